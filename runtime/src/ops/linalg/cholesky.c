/* LINALG_CHOLESKY (layout in neuronrt/ops/linalg.h): each matrix packed
 * into row-major scratch, where the dot-product form of the factorisation
 * reads contiguous row prefixes, then written back with the strict upper
 * triangle zeroed. Complex matrices factor as L L^H. */
#include <stdlib.h>
#include "internal.h"
#include "ops/engine/thread_pool.h"
#include "ops/linalg/batch.h"
#include "ops/linalg/dense.h"

typedef struct chol_job {
  const nrt_tensor_view *l, *info;
  int64_t n;
  la_failure failure;
} chol_job;

static void chol_range(int64_t begin, int64_t end, void *ctx) {
  chol_job *job = ctx;
  const nrt_tensor_view *l = job->l;
  const int64_t n = job->n;
  const la_dense_ops *la = la_dense_ops_of(l->dtype);
  void *scratch = malloc((size_t)(n * n) * la->esize + 1);
  if (!scratch) {
    la_fail_at(&job->failure, NRT_ERROR_OUT_OF_MEMORY, begin, (int64_t)((size_t)(n * n) * la->esize));
    return;
  }
  const int64_t rs = l->strides[l->ndim - 2], cs = l->strides[l->ndim - 1];
  for (int64_t b = begin; b < end; b++) {
    char *a = la_batch_at(l, 2, b);
    la->pack(a, n, n, rs, cs, scratch);
    const int32_t info = la->cholesky_lower(scratch, n);
    la->unpack(scratch, n, n, a, rs, cs);
    *(int32_t *)la_batch_at(job->info, 0, b) = info;
  }
  free(scratch);
}

nrt_status rt_kernel_linalg_cholesky(const nrt_op *op) {
  static const char *name = "linalg_cholesky";
  if (op->num_operands != 2 || op->num_outputs != 2)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expected 2 outputs (L, info)", name);
  const nrt_tensor_view *l = &op->operands[0], *info = &op->operands[1];
  if (l->ndim < 2) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: L must have 2 or more dims", name);
  nrt_status s;
  if ((s = la_check_dtype(name, "L", l, LA_OR_COMPLEX)) || (s = la_check_dtype(name, "info", info, 0)) ||
      (s = la_check_batch(name, "info", info, 0, l, 2)))
    return s;
  const int64_t n = l->shape[l->ndim - 1];
  if (l->shape[l->ndim - 2] != n)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: L must be square, got %lld x %lld", name,
                   (long long)l->shape[l->ndim - 2], (long long)n);
  const int64_t batch = la_batch_count(l, 2);
  if (batch == 0) return NRT_SUCCESS;
  if (n == 0) {
    for (int64_t b = 0; b < batch; b++) *(int32_t *)la_batch_at(info, 0, b) = 0;
    return NRT_SUCCESS;
  }
  chol_job job = {l, info, n, {NRT_SUCCESS, 0, 0}};
  rt_parallel_for(batch, la_grain((double)n * n * n / 3), chol_range, &job);
  if (job.failure.status != NRT_SUCCESS)
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for %lld bytes of scratch", name,
                   (long long)job.failure.value);
  return NRT_SUCCESS;
}
