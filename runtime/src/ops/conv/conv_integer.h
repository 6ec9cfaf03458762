/* Convolution of integers (int8, uint8, int16, int32, int64): the forward
 * and the input-gradient form (a transposed convolution's forward) of
 * CONV2D and CONV3D (conv_integer.c).
 *
 * PyTorch's CPU multiplies and sums integers in their own type with
 * wrap-around; any wider wrapping sum truncated to the type gives the same
 * bits, and integer sums do not depend on their order, so the loops are
 * free to accumulate in 16 bits (8- and 16-bit dtypes), 32 (int32) or 64
 * (int64), in any order. */
#ifndef NEURONRT_OPS_CONV_INTEGER_H
#define NEURONRT_OPS_CONV_INTEGER_H

#include <stdint.h>
#include "internal.h"

/* One convolution as a 3-d one: img, out [N, C, D, H, W] and w [K, C /
 * groups, kD, kH, kW] views (a 2-d convolution has depth 1). out holds
 * the convolution of img; input_grad computes img from out instead. */
typedef struct rt_conv_int {
  nrt_tensor_view img, out, w;
  const nrt_tensor_view *bias; /* [C] of the side written, or NULL */
  int64_t s[3], p[3], dl[3], groups;
  int input_grad;
  int reference; /* direct loops whatever the shape (tests: the columns' twin) */
} rt_conv_int;

/* dtype is one the integer loops compute. */
int rt_conv_integer_dtype(nrt_dtype dtype);

/* Checks c (dtypes, channels, groups, extents) and runs it; name is the
 * op's, for messages. */
nrt_status rt_conv_integer(const rt_conv_int *c, const char *name);

/* A 4-d [N, C, H, W] view as the 5-d one of depth 1. */
nrt_tensor_view rt_conv_int_lift(const nrt_tensor_view *v);

#endif
