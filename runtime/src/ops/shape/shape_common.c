/* See shape_common.h. */
#include "ops/shape/shape_common.h"

#include <string.h>
#include "ops/engine/thread_pool.h"

void rt_slices_init(rt_slices *s, int nops, const nrt_tensor_view *const *views, int dim) {
  s->nops = nops;
  s->ndim = 0;
  s->count = 1;
  const nrt_tensor_view *first = views[0];
  for (int d = 0; d < first->ndim; d++) {
    if (d == dim || first->shape[d] == 1) continue;
    s->shape[s->ndim] = first->shape[d];
    for (int k = 0; k < nops; k++)
      s->strides[k][s->ndim] = views[k]->strides[d] * (int64_t)nrt_dtype_size(views[k]->dtype);
    s->count *= first->shape[d];
    s->ndim++;
  }
}

int64_t rt_slices_offset(const rt_slices *s, int k, int64_t r) {
  int64_t offset = 0;
  for (int d = s->ndim - 1; d >= 0 && r > 0; d--) {
    offset += (r % s->shape[d]) * s->strides[k][d];
    r /= s->shape[d];
  }
  return offset;
}

int rt_view_is_contiguous(const nrt_tensor_view *v) {
  int64_t expected = 1;
  for (int32_t d = v->ndim - 1; d >= 0; d--) {
    if (v->shape[d] == 0) return 1;
    if (v->shape[d] != 1 && v->strides[d] != expected) return 0;
    expected *= v->shape[d];
  }
  return 1;
}

nrt_tensor_view rt_view_narrow(const nrt_tensor_view *v, int dim, int64_t start, int64_t length) {
  nrt_tensor_view out = *v;
  if (v->data && length > 0)
    out.data = (char *)v->data + start * v->strides[dim] * (int64_t)nrt_dtype_size(v->dtype);
  out.shape[dim] = length;
  return out;
}

typedef struct memcpy_job {
  char *dst;
  const char *src;
} memcpy_job;

static void memcpy_range(int64_t begin, int64_t end, void *arg) {
  const memcpy_job *job = arg;
  memcpy(job->dst + begin, job->src + begin, (size_t)(end - begin));
}

/* Below this many bytes one thread copies faster than the pool wakes up. */
#define PARALLEL_COPY_BYTES (1 << 20)

static void parallel_memcpy(void *dst, const void *src, int64_t n) {
  memcpy_job job = {dst, src};
  rt_parallel_for_light(n, PARALLEL_COPY_BYTES, memcpy_range, &job);
}

void rt_copy_view(const nrt_tensor_view *dst, const nrt_tensor_view *src) {
  int64_t n = nrt_view_numel(dst);
  if (n == 0) return;
  if (dst->dtype == src->dtype && rt_view_is_contiguous(dst) && rt_view_is_contiguous(src)) {
    parallel_memcpy(dst->data, src->data, n * (int64_t)nrt_dtype_size(dst->dtype));
    return;
  }
  nrt_op copy;
  memset(&copy, 0, sizeof copy);
  copy.code = NRT_OP_COPY;
  copy.num_operands = 2;
  copy.num_outputs = 1;
  copy.operands[0] = *dst;
  copy.operands[1] = *src;
  (void)rt_kernel_copy(&copy); /* cannot fail: shapes match */
}

nrt_status rt_check_arity(const nrt_op *op, int operands, int min_scalars) {
  const char *name = nrt_op_name(op->code);
  if (op->num_operands != operands)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects %d operands, got %d", name, operands,
                   op->num_operands);
  if (op->num_scalars < min_scalars)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects %d scalars, got %d", name, min_scalars,
                   op->num_scalars);
  return NRT_SUCCESS;
}

nrt_status rt_check_selection(const nrt_op *op, int64_t dim, int64_t out_len) {
  const char *name = nrt_op_name(op->code);
  const nrt_tensor_view *values = &op->operands[0], *indices = &op->operands[1],
                        *in = &op->operands[2];
  if (in->ndim == 0 ? dim != 0 : dim < 0 || dim >= in->ndim)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: dim %lld out of range for %d dims", name,
                   (long long)dim, in->ndim);
  int ok = values->ndim == in->ndim && indices->ndim == in->ndim && values->dtype == in->dtype &&
           indices->dtype == NRT_INT64;
  for (int d = 0; ok && d < in->ndim; d++) {
    int64_t want = d == dim ? out_len : in->shape[d];
    ok = values->shape[d] == want && indices->shape[d] == want;
  }
  if (!ok)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "%s: values/indices must have the input's shape with %lld along dim, "
                   "the input's dtype and int64", name, (long long)out_len);
  return NRT_SUCCESS;
}
