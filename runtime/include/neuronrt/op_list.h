/* The op vocabulary: the one list every layer shares.
 *
 * X(CODE, name) expands into the op enum (NRT_OP_CODE), the name table
 * (nrt_op_name) and the kernel dispatch table (rt_kernel_name). Each family
 * of ops keeps its list in neuronrt/ops/<family>.h, next to a comment that
 * states its operands and scalars; adding an op is one line there plus its
 * kernel.
 *
 *   FILL  operands: [dst]       scalars: [value]
 *   COPY  operands: [dst, src]  src has dst's shape (broadcast with stride 0);
 *                               dtypes may differ (PyTorch conversion rules)
 */
#ifndef NEURONRT_OP_LIST_H
#define NEURONRT_OP_LIST_H

#include "neuronrt/ops/amp.h"
#include "neuronrt/ops/attention.h"
#include "neuronrt/ops/distance.h"
#include "neuronrt/ops/fft.h"
#include "neuronrt/ops/gemm.h"
#include "neuronrt/ops/index.h"
#include "neuronrt/ops/linalg.h"
#include "neuronrt/ops/nn.h"
#include "neuronrt/ops/optim.h"
#include "neuronrt/ops/pointwise.h"
#include "neuronrt/ops/random.h"
#include "neuronrt/ops/reduce.h"
#include "neuronrt/ops/sampling.h"
#include "neuronrt/ops/shape.h"
#include "neuronrt/ops/special.h"
#include "neuronrt/ops/vision.h"

#define NRT_OP_LIST(X) \
  X(FILL, fill)        \
  X(COPY, copy)        \
  NRT_POINTWISE_OPS(X)  \
  NRT_REDUCE_OPS(X)     \
  NRT_INDEX_OPS(X)      \
  NRT_SHAPE_OPS(X)      \
  NRT_RANDOM_OPS(X)     \
  NRT_GEMM_OPS(X)       \
  NRT_NN_OPS(X)         \
  NRT_ATTENTION_OPS(X)  \
  NRT_OPTIM_OPS(X)      \
  NRT_VISION_OPS(X)     \
  NRT_AMP_OPS(X)        \
  NRT_LINALG_OPS(X)     \
  NRT_SPECIAL_FUNCTION_OPS(X) \
  NRT_DISTANCE_OPS(X) \
  NRT_FFT_OPS(X) \
  NRT_SAMPLING_OPS(X)

#endif
