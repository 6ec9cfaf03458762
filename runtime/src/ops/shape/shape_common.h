/* Helpers shared by the shape-family kernels (cat, roll, sort, ...): slices
 * along one dim, contiguity, sub-views, copies between views, checks. */
#ifndef NEURONRT_OPS_SHAPE_COMMON_H
#define NEURONRT_OPS_SHAPE_COMMON_H

#include <stdint.h>
#include "internal.h"

/* Walks the slices of up to three views along dim: slice r of operand k
 * starts at byte offset rt_slices_offset(s, k, r) from its data. The views
 * share every size except possibly the one along dim. */
typedef struct rt_slices {
  int nops;
  int ndim;           /* outer dims (every dim but the sliced one) */
  int64_t count;      /* number of slices */
  int64_t shape[NRT_MAX_DIMS];
  int64_t strides[3][NRT_MAX_DIMS]; /* bytes */
} rt_slices;

void rt_slices_init(rt_slices *s, int nops, const nrt_tensor_view *const *views, int dim);
int64_t rt_slices_offset(const rt_slices *s, int k, int64_t r);

/* 1 if the view's elements are dense in row-major order (size-1 dims and
 * empty views are ignored). */
int rt_view_is_contiguous(const nrt_tensor_view *v);

/* Checks the operands [values, indices, in] of a selection along dim
 * (TOPK, KTHVALUE, MODE): dim in range for in, values in's dtype and
 * indices int64, both of in's shape with out_len along dim. */
nrt_status rt_check_selection(const nrt_op *op, int64_t dim, int64_t out_len);

/* v narrowed along dim to [start, start + length). */
nrt_tensor_view rt_view_narrow(const nrt_tensor_view *v, int dim, int64_t start, int64_t length);

/* dst = src converted to dst's dtype (same shape), parallel when large. */
void rt_copy_view(const nrt_tensor_view *dst, const nrt_tensor_view *src);

/* Reads the integer scalar k of op. */
static inline int64_t rt_scalar_int(const nrt_op *op, int k) {
  const nrt_scalar *s = &op->scalars[k];
  return s->is_float ? (int64_t)s->f : s->i;
}

static inline double rt_scalar_double(const nrt_op *op, int k) {
  const nrt_scalar *s = &op->scalars[k];
  return s->is_float ? s->f : (double)s->i;
}

static inline int rt_same_shape(const nrt_tensor_view *a, const nrt_tensor_view *b) {
  if (a->ndim != b->ndim) return 0;
  for (int32_t d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d]) return 0;
  return 1;
}

/* Checks operand and scalar counts; fails naming the op. */
nrt_status rt_check_arity(const nrt_op *op, int operands, int min_scalars);

#endif
