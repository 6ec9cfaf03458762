/* ROLL: a roll along k dims is 2^k block copies. Along one dim of size n
 * shifted by s, out[s, n) comes from in[0, n - s) and out[0, s) from
 * in[n - s, n); every combination of those halves over the k dims is one
 * copy between sub-views, so no intermediate tensor is needed. */
#include "ops/shape/shape_common.h"

#define MAX_ROLL_DIMS 4

nrt_status rt_kernel_roll(const nrt_op *op) {
  nrt_status s = rt_check_arity(op, 2, 0);
  if (s) return s;
  const nrt_tensor_view *out = &op->operands[0], *in = &op->operands[1];
  if (!rt_same_shape(out, in) || out->dtype != in->dtype)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "roll: output and input differ in shape or dtype");
  int k = op->num_scalars / 2;
  if (op->num_scalars % 2 || k > MAX_ROLL_DIMS)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "roll: expects up to %d (dim, shift) pairs",
                   MAX_ROLL_DIMS);
  int dims[MAX_ROLL_DIMS];
  int64_t shifts[MAX_ROLL_DIMS];
  for (int j = 0; j < k; j++) {
    int64_t d = rt_scalar_int(op, 2 * j);
    if (d < 0 || d >= out->ndim)
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "roll: dim %lld out of range for %d dims",
                     (long long)d, out->ndim);
    dims[j] = (int)d;
    int64_t n = out->shape[d];
    shifts[j] = n == 0 ? 0 : ((rt_scalar_int(op, 2 * j + 1) % n) + n) % n;
  }
  if (nrt_view_numel(out) == 0) return NRT_SUCCESS;
  for (unsigned mask = 0; mask < (1u << k); mask++) {
    nrt_tensor_view dst = *out, src = *in;
    int empty = 0;
    for (int j = 0; j < k && !empty; j++) {
      int64_t n = out->shape[dims[j]], sh = shifts[j];
      /* bit clear: out[sh, n) <- in[0, n - sh); bit set: out[0, sh) <- in[n - sh, n) */
      int64_t len = mask & (1u << j) ? sh : n - sh;
      if (len == 0) {
        empty = 1;
        break;
      }
      dst = rt_view_narrow(&dst, dims[j], mask & (1u << j) ? 0 : sh, len);
      src = rt_view_narrow(&src, dims[j], mask & (1u << j) ? n - sh : 0, len);
    }
    if (!empty) rt_copy_view(&dst, &src);
  }
  return NRT_SUCCESS;
}
