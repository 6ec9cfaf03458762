/* Blocked convolution for float32 and bfloat16 (conv_blocked.c): an
 * implicit GEMM that packs image windows straight into the register-tile
 * panels of conv_ukernels.h, with no im2col matrix in between.
 *
 *   forward       O[n, g*kg + o, q] = sum_r W[g*kg + o, r] * col_n[r, q]
 *   weight grad   W'[g*kg + o, r]   = sum_{n, q} O[n, g*kg + o, q] * col_n[r, q]
 *
 * where r = (c, i, j) runs over the cg * kh * kw taps of a group and col_n
 * is image n's window values (0 in the padding). bfloat16 operands are
 * multiplied as bfloat16 pairs and summed in float32 (rounded once at the
 * end). The input gradient is a forward over grad_output with the weight
 * flipped (flipped = 1): conv.c runs one per stride phase, each with the
 * phase's sub-kernel and a strided view of the image.
 *
 * Reproducibility: tasks and k blocks depend on the shape only; each output
 * element of the forward is summed by one task; the weight gradient sums
 * fixed parts of the batch into private accumulators, added in part order.
 * Results do not depend on the thread count. */
#ifndef NEURONRT_OPS_CONV_BLOCKED_H
#define NEURONRT_OPS_CONV_BLOCKED_H

#include "ops/vision/vision_common.h"

typedef struct rt_conv_shape {
  rt_image img; /* I: [N, groups * cg, H, W] */
  rt_image out; /* O: [N, groups * kg, OH, OW] */
  int64_t kh, kw, sh, sw, ph, pw, dh, dw, groups;
} rt_conv_shape;

/* 1 when the blocked kernels take this problem (dtype, layout, CPU). */
int rt_conv_blocked_usable(const rt_conv_shape *s, nrt_dtype dtype);

/* O = conv(I, W) (+ bias). w is [groups * kg, cg, kh, kw]; with flipped,
 * it is the weight of the convolution whose input gradient this is:
 * [groups * cg, kg, kh, kw], read flipped in space with channels swapped.
 * portable = 1 uses the portable tiles (tests). */
nrt_status rt_conv_blocked_forward(const rt_conv_shape *s, nrt_dtype dtype, const nrt_tensor_view *w, int flipped,
                                   const void *bias, int64_t bias_stride, int portable, const char *name);

/* w = the weight gradient [groups * kg, cg, kh, kw] of I and grad_output O. */
nrt_status rt_conv_blocked_weight_grad(const rt_conv_shape *s, nrt_dtype dtype, const nrt_tensor_view *w,
                                       int portable, const char *name);

#endif
