/* Volumetric convolution as one 2-d convolution with depth folded into
 * the channels (conv3d_fold.c), for float32 and bfloat16.
 *
 * Output depth od of image n reads image slices id = od * s0 - p0 + a * dl0,
 * a < kd. Copying those kd slices of every channel side by side gives a
 * 2-d image per (n, od) with C * kd channels (channel c * kd + a) whose 2-d
 * convolution with the weight seen as [K, cg * kd, kh, kw] is the 3-d one:
 *
 *   forward       O[n, :, od] = conv2d(X[n, od], W2)           (batch n, od)
 *   weight grad.  W'2 = conv2d_weight_grad(X, O')               (batch n, od)
 *   input grad.   float32: Z = conv2d_input_grad(O', W2), the folded
 *                 image's gradient, then I'[n, c, id] = the sum over taps a
 *                 of Z[n, od, c * kd + a] with od * s0 = id + p0 - a * dl0;
 *                 bfloat16 (rounded once): per depth phase f < s0, the
 *                 slices id = f + s0 u are conv2d_input_grad(Y, W2') of
 *                 grad_output folded by the phase's taps (channel k * m + i)
 *                 and the weight with those taps moved to its output
 *                 channels, W2'[k * m + i] = W[k, :, tap i].
 *
 * Pointwise problems (1x1x1, stride 1, no padding) merge depth into height
 * instead: one 2-d convolution of [N, C, D * H, W] views.
 *
 * Memory: the folded copies are made per piece of the batch, whole images
 * while they fit (FOLD_CHUNK_ELEMS, 4M elements; the weight gradient takes
 * the whole batch in one call up to FOLD_WGRAD_ELEMS, 16M), else ranges of
 * output depths (slices of a depth phase) of one image, down to one 2-d
 * image. float32 weight gradients in pieces add each piece's 2-d weight
 * gradient in piece order; bfloat16 ones that would need pieces take the
 * reference path (each piece would be rounded). Out of memory is reported
 * only when a piece's buffers cannot be had.
 *
 * Every product runs through the 2-d entry points (rt_kernel_conv2d*,
 * conv.c), so the 2-d kernels' dispatch applies (blocked implicit GEMM, the direct AMX
 * bfloat16 kernel, columns). The columns of a 3-d tap are then never
 * materialised; the copies are kd slices of the image (a view when kd = 1
 * and there is no depth padding). Results depend on the shape only, not on
 * the thread count, and are within the 2-d convolution's rounding of the
 * reference path (conv3d.c), which keeps float64, float16, integer dtypes
 * and depthwise problems. */
#ifndef NEURONRT_OPS_CONV_CONV3D_FOLD_H
#define NEURONRT_OPS_CONV_CONV3D_FOLD_H

#include "internal.h"

typedef enum rt_conv3d_role { RT_CONV3D_FORWARD, RT_CONV3D_INPUT_GRAD, RT_CONV3D_WEIGHT_GRAD } rt_conv3d_role;

/* A checked 3-d convolution: img is I (or its gradient), out O (or its
 * gradient), w the weight (or its gradient), all 5-d; bias may be NULL. */
typedef struct rt_conv3d_problem {
  nrt_op_code code; /* names the op in errors */
  rt_conv3d_role role;
  nrt_tensor_view img, out, w;
  const nrt_tensor_view *bias;
  int64_t k[3], s[3], p[3], dl[3], groups;
} rt_conv3d_problem;

/* 1 when the folded path takes the problem (dtype, sizes, memory). */
int rt_conv3d_fold_usable(const rt_conv3d_problem *p);

/* Runs the problem folded; counts conv3d.fold (torchneuron.metrics). */
nrt_status rt_conv3d_fold(const rt_conv3d_problem *p);

/* Caps the folded working buffers at elems elements (0: the defaults,
 * FOLD_CHUNK_ELEMS and FOLD_WGRAD_ELEMS in conv3d_fold.c), so that tests
 * reach the pieces on small shapes. Not thread-safe; tests only. */
void rt_conv3d_fold_set_budget(int64_t elems);

/* Runs a CONV3D, CONV3D_INPUT_GRAD or CONV3D_WEIGHT_GRAD op; reference = 1
 * forces the reference path (vol2col / col2vol and the GEMM) for tests. */
nrt_status rt_conv3d_run(const nrt_op *op, int reference);

#endif
