/* Direct bfloat16 convolution on AMX tiles (conv_amx.c): no column matrix
 * and no GEMM packing.
 *
 * Each image (of one group) is copied once, zero-padded, into planes of
 * channel pairs: word p of plane c2 holds channels 2 c2 and 2 c2 + 1 at
 * flat padded position p = row * Wp + column. Output position (oh, ow)
 * computed at flat p = oh * Wp + ow then meets tap (i, j) at p + i * dh * Wp
 * + j * dw, the same offset for every position: a B tile (16 channel pairs
 * x 16 positions) of a tap is one strided tile load from the planes, and
 * the weight of a tap and a block of 32 channels is an A tile (16 output
 * channels x 16 pairs) packed once per call. A C block of 32 output
 * channels x 32 flat positions sums every tap and channel block in four
 * tiles (float32), then its positions with ow < OW are rounded once to
 * bfloat16 and stored; the Wp - OW columns between rows are computed and
 * dropped (2 of 10 for an 8x8 image with a 3x3 window).
 *
 * A stride sh x sw deals the padded image into sh * sw phase planes (rows
 * r = sh q + a, columns c = sw u + b to plane (a, b) at (q, u)): tap (i,
 * j) then reads phase (i dh mod sh, j dw mod sw) at (oh + i dh / sh, ow +
 * j dw / sw), again one offset for every output position.
 *
 * The input gradient of a stride-1 convolution is the same forward over
 * grad_output with the weight flipped (flipped = 1, as conv_blocked.h); a
 * strided one is a stride-1 one per phase of the image (conv.c). */
#ifndef NEURONRT_OPS_CONV_AMX_H
#define NEURONRT_OPS_CONV_AMX_H

#include "ops/conv/conv_blocked.h"

/* 1 when the direct AMX forward takes this bfloat16 problem: an AMX host,
 * at least 16 channels per group and 64 taps, and a stride only where every
 * phase has taps (no dilation, window at least the stride). */
int rt_conv_amx_usable(const rt_conv_shape *s);

/* O = conv(I, W) (+ bias), bfloat16, as rt_conv_blocked_forward (w, flipped
 * and bias alike). portable = 1 runs the reference twin of the tile loop
 * (plain C, any host) on the same packed operands. */
nrt_status rt_conv_amx_forward(const rt_conv_shape *s, const nrt_tensor_view *w, int flipped, const void *bias,
                               int64_t bias_stride, int portable, const char *name);

/* w = the weight gradient [groups * kg, cg, kh, kw] of I and grad_output
 * O (as rt_conv_amx_usable). Per tap, C tiles of 32 output x 32
 * input channels sum k pairs of flat positions: A is grad_output packed
 * [channel][flat] (zeros between rows), B the padded image packed [pair
 * of positions][channel] from an even and from an odd position (a tap's
 * offset may be odd). Sums in float32 over every image in order, rounded
 * once. portable = 1 runs the twin. */
nrt_status rt_conv_amx_weight_grad(const rt_conv_shape *s, const nrt_tensor_view *w, int portable,
                                   const char *name);

#endif
