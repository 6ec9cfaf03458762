/* LINALG_EIGH (layout in neuronrt/ops/linalg.h): each matrix is packed
 * from its lower or upper triangle into full symmetric row-major scratch,
 * diagonalised by cyclic Jacobi (eigh_t.h), and its eigenpairs written back
 * sorted by ascending eigenvalue. Batches split across the kernel threads. */
#include <stdlib.h>
#include "internal.h"
#include "ops/engine/thread_pool.h"
#include "ops/linalg/batch.h"

#define LA_T float
#define LA_NAME(x) la_##x##_f32
#include "ops/linalg/eigh_t.h"
#undef LA_T
#undef LA_NAME
#define LA_T double
#define LA_NAME(x) la_##x##_f64
#include "ops/linalg/eigh_t.h"
#undef LA_T
#undef LA_NAME

typedef struct eigh_job {
  const nrt_tensor_view *w, *v;
  int64_t n;
  int upper, want_v;
  la_failure failure;
} eigh_job;

#define EIGH_ONE(T, SUFFIX)                                                                  \
  do {                                                                                       \
    T *a = (T *)buf, *vt = a + n * n;                                                        \
    const T *src = (const T *)m;                                                             \
    for (int64_t i = 0; i < n; i++)                                                          \
      for (int64_t j = 0; j < n; j++) {                                                      \
        const int64_t hi = i > j ? i : j, lo = i > j ? j : i; /* lower: (hi, lo) */         \
        a[i * n + j] = job->upper ? src[lo * rs + hi * cs] : src[hi * rs + lo * cs];         \
      }                                                                                      \
    la_jacobi_##SUFFIX(a, n, vt, job->want_v);                                               \
    for (int64_t i = 0; i < n; i++) order[i] = i;                                            \
    for (int64_t i = 1; i < n; i++) { /* insertion sort: stable, ascending */               \
      const int64_t x = order[i];                                                            \
      int64_t j = i;                                                                         \
      for (; j > 0 && a[order[j - 1] * (n + 1)] > a[x * (n + 1)]; j--) order[j] = order[j - 1]; \
      order[j] = x;                                                                          \
    }                                                                                        \
    T *wout = (T *)la_batch_at(job->w, 1, b);                                                \
    for (int64_t r = 0; r < n; r++) wout[r * ws] = a[order[r] * (n + 1)];                    \
    if (job->want_v) {                                                                       \
      T *dst = (T *)m;                                                                       \
      for (int64_t r = 0; r < n; r++)                                                        \
        for (int64_t k = 0; k < n; k++) dst[k * rs + r * cs] = vt[order[r] * n + k];         \
    }                                                                                        \
  } while (0)

static void eigh_range(int64_t begin, int64_t end, void *ctx) {
  eigh_job *job = ctx;
  const int64_t n = job->n;
  const int f64 = job->v->dtype == NRT_FLOAT64;
  const size_t esize = f64 ? sizeof(double) : sizeof(float);
  char *buf = malloc((size_t)(2 * n * n) * esize + 8);
  int64_t *order = malloc((size_t)n * sizeof(int64_t) + 8);
  if (!buf || !order) {
    free(buf), free(order);
    la_fail_at(&job->failure, NRT_ERROR_OUT_OF_MEMORY, begin, (int64_t)((size_t)(2 * n * n) * esize));
    return;
  }
  const nrt_tensor_view *v = job->v;
  const int64_t rs = v->strides[v->ndim - 2], cs = v->strides[v->ndim - 1];
  const int64_t ws = job->w->strides[job->w->ndim - 1];
  for (int64_t b = begin; b < end; b++) {
    char *m = la_batch_at(v, 2, b);
    if (f64)
      EIGH_ONE(double, f64);
    else
      EIGH_ONE(float, f32);
  }
  free(buf), free(order);
}

nrt_status rt_kernel_linalg_eigh(const nrt_op *op) {
  static const char *name = "linalg_eigh";
  if (op->num_operands != 2 || op->num_outputs != 2 || op->num_scalars < 2)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expected W, V, upper and compute_v", name);
  const nrt_tensor_view *w = &op->operands[0], *v = &op->operands[1];
  if (v->ndim < 2) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: V must have 2 or more dims", name);
  nrt_status s;
  if ((s = la_check_dtype(name, "V", v, 1)) || (s = la_check_batch(name, "W", w, 1, v, 2))) return s;
  if (w->dtype != v->dtype)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: W is %s, V is %s", name, nrt_dtype_name(w->dtype),
                   nrt_dtype_name(v->dtype));
  const int64_t n = v->shape[v->ndim - 1];
  if (v->shape[v->ndim - 2] != n || w->shape[w->ndim - 1] != n)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: V must be square and W hold its %lld eigenvalues", name,
                   (long long)n);
  const int64_t batch = la_batch_count(v, 2);
  if (batch == 0 || n == 0) return NRT_SUCCESS;
  eigh_job job = {w, v, n, op->scalars[0].i != 0, op->scalars[1].i != 0, {NRT_SUCCESS, 0, 0}};
  rt_parallel_for(batch, la_grain(20.0 * n * n * n), eigh_range, &job);
  if (job.failure.status != NRT_SUCCESS)
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for %lld bytes of scratch", name,
                   (long long)job.failure.value);
  return NRT_SUCCESS;
}
