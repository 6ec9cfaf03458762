/* LINALG_LU_FACTOR and LINALG_LU_PIVOT (layouts in neuronrt/ops/linalg.h).
 *
 * Each matrix is packed into row-major scratch, factored there (dense_t.h)
 * and written back, so any strides work (PyTorch's LU is column-major).
 * Batches split across the kernel threads; a single large matrix splits
 * its trailing updates instead. */
#include <stdlib.h>
#include <string.h>
#include "internal.h"
#include "ops/engine/thread_pool.h"
#include "ops/linalg/batch.h"
#include "ops/linalg/dense.h"


typedef struct factor_job {
  const nrt_tensor_view *lu, *piv, *info;
  int64_t m, n, k;
  la_failure failure;
} factor_job;

static void factor_range(int64_t begin, int64_t end, void *ctx) {
  factor_job *job = ctx;
  const nrt_tensor_view *lu = job->lu;
  const int64_t m = job->m, n = job->n, k = job->k;
  const la_dense_ops *la = la_dense_ops_of(lu->dtype);
  void *scratch = malloc((size_t)(m * n) * la->esize + 1);
  int32_t *piv = malloc((size_t)k * sizeof(int32_t) + 1);
  if (!scratch || !piv) {
    free(scratch);
    free(piv);
    la_fail_at(&job->failure, NRT_ERROR_OUT_OF_MEMORY, begin, (int64_t)((size_t)(m * n) * la->esize));
    return;
  }
  const int64_t rs = lu->strides[lu->ndim - 2], cs = lu->strides[lu->ndim - 1];
  const int64_t ps = job->piv->strides[job->piv->ndim - 1];
  for (int64_t b = begin; b < end; b++) {
    char *a = la_batch_at(lu, 2, b);
    la->pack(a, m, n, rs, cs, scratch);
    const int32_t info = la->lu(scratch, m, n, piv);
    la->unpack(scratch, m, n, a, rs, cs);
    int32_t *pout = (int32_t *)la_batch_at(job->piv, 1, b);
    for (int64_t i = 0; i < k; i++) pout[i * ps] = piv[i];
    *(int32_t *)la_batch_at(job->info, 0, b) = info;
  }
  free(scratch);
  free(piv);
}

static nrt_status report(const char *op, const la_failure *f) {
  if (f->status == NRT_SUCCESS) return NRT_SUCCESS;
  if (f->status == NRT_ERROR_OUT_OF_MEMORY)
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for %lld bytes of scratch", op,
                   (long long)f->value);
  return rt_fail((nrt_status)f->status, "%s: pivot %lld of batch element %lld is out of range", op,
                 (long long)f->value, (long long)f->batch);
}

nrt_status rt_kernel_linalg_lu_factor(const nrt_op *op) {
  static const char *name = "linalg_lu_factor";
  if (op->num_operands != 3 || op->num_outputs != 3)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expected 3 outputs (LU, pivots, info)", name);
  const nrt_tensor_view *lu = &op->operands[0], *piv = &op->operands[1], *info = &op->operands[2];
  if (lu->ndim < 2) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: LU must have 2 or more dims", name);
  nrt_status s;
  if ((s = la_check_dtype(name, "LU", lu, LA_OR_COMPLEX)) || (s = la_check_dtype(name, "pivots", piv, 0)) ||
      (s = la_check_dtype(name, "info", info, 0)) || (s = la_check_batch(name, "pivots", piv, 1, lu, 2)) ||
      (s = la_check_batch(name, "info", info, 0, lu, 2)))
    return s;
  const int64_t m = lu->shape[lu->ndim - 2], n = lu->shape[lu->ndim - 1], k = m < n ? m : n;
  if (piv->shape[piv->ndim - 1] != k)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: pivots has %lld entries per matrix, expected %lld",
                   name, (long long)piv->shape[piv->ndim - 1], (long long)k);
  const int64_t batch = la_batch_count(lu, 2);
  if (batch == 0) return NRT_SUCCESS;
  factor_job job = {lu, piv, info, m, n, k, {NRT_SUCCESS, 0, 0}};
  if (k == 0) { /* nothing to factor: info is 0 */
    for (int64_t b = 0; b < batch; b++) *(int32_t *)la_batch_at(info, 0, b) = 0;
    return NRT_SUCCESS;
  }
  rt_parallel_for(batch, la_grain((double)m * n * k), factor_range, &job);
  return report(name, &job.failure);
}

typedef struct pivot_job {
  const nrt_tensor_view *x, *piv;
  int64_t n, cols, p;
  int reverse;
  la_failure failure;
} pivot_job;

static void pivot_range(int64_t begin, int64_t end, void *ctx) {
  pivot_job *job = ctx;
  const nrt_tensor_view *x = job->x;
  const size_t esize = nrt_dtype_size(x->dtype);
  const int64_t rs = x->strides[x->ndim - 2] * (int64_t)esize,
                cs = x->strides[x->ndim - 1] * (int64_t)esize;
  const int64_t ps = job->piv->strides[job->piv->ndim - 1];
  for (int64_t b = begin; b < end; b++) {
    char *base = la_batch_at(x, 2, b);
    const int32_t *piv = (const int32_t *)la_batch_at(job->piv, 1, b);
    for (int64_t t = 0; t < job->p; t++) {
      const int64_t i = job->reverse ? job->p - 1 - t : t;
      const int64_t r = (int64_t)piv[i * ps] - 1;
      if (r < 0 || r >= job->n) {
        la_fail_at(&job->failure, NRT_ERROR_INDEX_OUT_OF_RANGE, b, r + 1);
        return;
      }
      if (r == i) continue;
      char *ri = base + i * rs, *rr = base + r * rs;
      for (int64_t c = 0; c < job->cols; c++) {
        char tmp[16];
        memcpy(tmp, ri + c * cs, esize);
        memcpy(ri + c * cs, rr + c * cs, esize);
        memcpy(rr + c * cs, tmp, esize);
      }
    }
  }
}

nrt_status rt_kernel_linalg_lu_pivot(const nrt_op *op) {
  static const char *name = "linalg_lu_pivot";
  if (op->num_operands != 2 || op->num_outputs != 1 || op->num_scalars < 1)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expected X, pivots and reverse", name);
  const nrt_tensor_view *x = &op->operands[0], *piv = &op->operands[1];
  if (x->ndim < 2) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: X must have 2 or more dims", name);
  nrt_status s;
  if ((s = la_check_dtype(name, "pivots", piv, 0)) || (s = la_check_batch(name, "pivots", piv, 1, x, 2)))
    return s;
  if (x->dtype == NRT_BOOL || nrt_dtype_size(x->dtype) > 16)
    return rt_fail(NRT_ERROR_UNSUPPORTED, "%s: X of dtype %s", name, nrt_dtype_name(x->dtype));
  const int64_t n = x->shape[x->ndim - 2], p = piv->shape[piv->ndim - 1];
  if (p > n)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: %lld pivots for %lld rows", name, (long long)p,
                   (long long)n);
  const int64_t batch = la_batch_count(x, 2);
  if (batch == 0 || p == 0) return NRT_SUCCESS;
  pivot_job job = {x, piv, n, x->shape[x->ndim - 1], p, op->scalars[0].i != 0, {NRT_SUCCESS, 0, 0}};
  rt_parallel_for(batch, la_grain((double)p * job.cols), pivot_range, &job);
  return report(name, &job.failure);
}
