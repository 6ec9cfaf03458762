/* Helpers shared by the normalisation, softmax and loss kernels (nn_*.c).
 *
 * The kernels compute in C = float (float16, bfloat16 and float32 data) or
 * double (float64 data). Rows of an operand are brought into contiguous C
 * buffers by the conversion loops (one call per run, not per element) unless
 * they already are contiguous C data, and sums run over RT_LANES
 * independent lanes combined in a fixed tree, with float lanes flushed into
 * a double total every NN_FLUSH elements so that long rows keep their
 * precision. Nothing depends on the thread count.
 */
#ifndef NEURONRT_OPS_NN_COMMON_H
#define NEURONRT_OPS_NN_COMMON_H

#include <math.h>
#include <stdlib.h>
#include "internal.h"
#include "ops/engine/convert.h"
#include "ops/engine/dtype_size.h"
#include "ops/engine/elementwise.h"
#include "ops/reduce/reduce.h"
#include "ops/engine/thread_pool.h"
#include "ops/engine/vmath.h"

/* Elements folded into float lanes before they are added to a double. */
#define NN_FLUSH 1024

/* An operand: host base address, dtype and byte strides of up to 3 dims. */
typedef struct nn_operand {
  char *base;
  nrt_dtype dtype;
  int64_t size[3];
  int64_t stride[3]; /* bytes */
} nn_operand;

/* Reads view v as a [d0, d1, d2] operand (v must have rank 3, or rank r < 3
 * with the leading sizes taken as 1). */
static inline nn_operand nn_operand_of(const nrt_tensor_view *v) {
  nn_operand o;
  int64_t elem = (int64_t)rt_dtype_size(v->dtype);
  int lead = 3 - v->ndim;
  o.base = (char *)v->data;
  o.dtype = v->dtype;
  for (int d = 0; d < 3; d++) {
    o.size[d] = d < lead ? 1 : v->shape[d - lead];
    o.stride[d] = d < lead ? 0 : v->strides[d - lead] * elem;
  }
  return o;
}

static inline int nn_is_float(nrt_dtype t) {
  return t == NRT_FLOAT16 || t == NRT_BFLOAT16 || t == NRT_FLOAT32 || t == NRT_FLOAT64;
}

/* The compute dtype for data of dtype t. */
static inline nrt_dtype nn_compute(nrt_dtype t) {
  return t == NRT_FLOAT64 ? NRT_FLOAT64 : NRT_FLOAT32;
}

/* Converts n elements: src (dtype st, byte stride ss) to dst (dt, ds). */
static inline void nn_convert(void *dst, nrt_dtype dt, int64_t ds, const void *src, nrt_dtype st,
                              int64_t ss, int64_t n) {
  if (n <= 0) return;
  char *data[2] = {(char *)dst, (char *)src};
  int64_t strides[2] = {ds, ss};
  rt_convert_loops[dt][st](data, strides, n, NULL);
}

/* A run of n elements at p (byte stride s, dtype t) as contiguous data of
 * compute dtype c: p itself when it already is, else converted into buf. */
static inline const void *nn_load(const char *p, int64_t s, nrt_dtype t, nrt_dtype c, int64_t n,
                                  void *buf) {
  int64_t size = (int64_t)rt_dtype_size(c);
  if (t == c && (s == size || n <= 1)) return p;
  nn_convert(buf, c, size, p, t, s, n);
  return buf;
}

/* Where to compute a run that is stored at p: p itself when it is
 * contiguous data of dtype c, else buf (then nn_store copies it out). */
static inline void *nn_target(char *p, int64_t s, nrt_dtype t, nrt_dtype c, int64_t n, void *buf) {
  int64_t size = (int64_t)rt_dtype_size(c);
  return t == c && (s == size || n <= 1) ? (void *)p : buf;
}

static inline void nn_store(char *p, int64_t s, nrt_dtype t, nrt_dtype c, int64_t n,
                            const void *computed) {
  if (computed == p) return;
  nn_convert(p, t, s, computed, c, (int64_t)rt_dtype_size(c), n);
}

/* The number of elements of a view; 0 marks an absent optional operand. */
static inline int nn_present(const nrt_tensor_view *v) { return nrt_view_numel(v) > 0; }

/* RESULT (a double) = the sum over j in [0, n) of EXPR (an expression of
 * j, of type C, that may also store): in C lanes, flushed to double every
 * NN_FLUSH elements. Within a flush window NN_SUM keeps NN_WIDE lanes (four
 * vectors, folded into the first in a fixed order at the end of the
 * window): with one vector, every step waited for the previous add (the
 * hottest loop of a layer norm backward row). NN_SUM_NARROW keeps
 * one vector, for an EXPR as costly as an exponential, which hides the
 * adds; four of those in flight spilled registers (softmax 15% slower).
 * Each flush window is its own loop with its own lanes, and the lane loop
 * is unrolled: the lanes then stay in vector registers (with the flush test
 * inside the loop, or kept rolled, they went through the stack on every
 * step, four times slower). */
#define NN_WIDE (4 * RT_LANES)
#define NN_SUM(C, n, RESULT, EXPR) NN_SUM_LANES(C, NN_WIDE, n, RESULT, EXPR)
#define NN_SUM_NARROW(C, n, RESULT, EXPR) NN_SUM_LANES(C, RT_LANES, n, RESULT, EXPR)
#define NN_SUM_LANES(C, W, n, RESULT, EXPR)                            \
  do {                                                                 \
    C lanes_[RT_LANES] = {0};                                          \
    double total_ = 0;                                                 \
    int64_t i_ = 0, n_ = (n);                                          \
    while (i_ + RT_LANES <= n_) {                                      \
      const int64_t end_ = n_ - i_ > NN_FLUSH ? i_ + NN_FLUSH : n_;    \
      C part_[W] = {0};                                                \
      for (; i_ + (W) <= end_; i_ += (W))                              \
        _Pragma("GCC unroll 64") for (int k_ = 0; k_ < (W); k_++) {    \
          int64_t j = i_ + k_;                                         \
          part_[k_] += (EXPR);                                         \
        }                                                              \
      for (; i_ + RT_LANES <= end_; i_ += RT_LANES)                    \
        _Pragma("GCC unroll 16") for (int k_ = 0; k_ < RT_LANES; k_++) { \
          int64_t j = i_ + k_;                                         \
          part_[k_] += (EXPR);                                         \
        }                                                              \
      for (int g_ = 1; g_ < (W) / RT_LANES; g_++)                      \
        _Pragma("GCC unroll 16") for (int k_ = 0; k_ < RT_LANES; k_++) \
          part_[k_] += part_[k_ + g_ * RT_LANES];                      \
      if (i_ % NN_FLUSH == 0)                                          \
        total_ += nn_tree_##C(part_);                                  \
      else                                                             \
        for (int k_ = 0; k_ < RT_LANES; k_++) lanes_[k_] = part_[k_];  \
    }                                                                  \
    for (int k_ = 0; i_ < n_; i_++, k_++) {                            \
      int64_t j = i_;                                                  \
      lanes_[k_] += (EXPR);                                            \
    }                                                                  \
    (RESULT) = total_ + nn_tree_##C(lanes_);                           \
  } while (0)

/* Adds the lanes in a fixed tree and clears them. */
RT_INLINE double nn_tree_float(float *lanes) {
  _Pragma("GCC unroll 16") for (int w = RT_LANES / 2; w > 0; w /= 2)
    _Pragma("GCC unroll 16") for (int k = 0; k < w; k++) lanes[k] += lanes[k + w];
  double r = lanes[0];
  for (int k = 0; k < RT_LANES; k++) lanes[k] = 0;
  return r;
}

RT_INLINE double nn_tree_double(double *lanes) {
  _Pragma("GCC unroll 16") for (int w = RT_LANES / 2; w > 0; w /= 2)
    _Pragma("GCC unroll 16") for (int k = 0; k < w; k++) lanes[k] += lanes[k + w];
  double r = lanes[0];
  for (int k = 0; k < RT_LANES; k++) lanes[k] = 0;
  return r;
}

/* Work items per parallel task so that a task has about RT_PARALLEL_GRAIN
 * elements of work. */
static inline int64_t nn_grain(int64_t elements_per_item) {
  if (elements_per_item <= 0) return 1;
  int64_t g = RT_PARALLEL_GRAIN / elements_per_item;
  return g < 1 ? 1 : g;
}

/* Checks that op has count operands and floating dtypes in the first
 * `floating` of them (absent ones excepted). */
static inline nrt_status nn_check_operands(const nrt_op *op, int count, int outputs, uint32_t floating) {
  const char *name = nrt_op_name(op->code);
  if (op->num_operands != count || op->num_outputs != outputs)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects %d operands (%d outputs), got %d (%d)",
                   name, count, outputs, op->num_operands, op->num_outputs);
  if (op->immediate_mask)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: immediate operands are not supported", name);
  for (int k = 0; k < count; k++)
    if ((floating >> k & 1u) && nn_present(&op->operands[k]) && !nn_is_float(op->operands[k].dtype))
      return rt_fail(NRT_ERROR_UNSUPPORTED, "%s: operand %d has dtype %s; a floating dtype is required",
                     name, k, nrt_dtype_name(op->operands[k].dtype));
  return NRT_SUCCESS;
}

/* A 1-d operand of n elements (per-feature parameters, per-row statistics)
 * converted to a new array of compute dtype c; *out is NULL when the view
 * is absent. The caller frees it. */
static inline nrt_status nn_load_vector(const nrt_op *op, int k, nrt_dtype c, int64_t n, void **out) {
  const nrt_tensor_view *v = &op->operands[k];
  *out = NULL;
  if (!nn_present(v)) return NRT_SUCCESS;
  if (v->ndim != 1 || v->shape[0] != n)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: operand %d must be a vector of %lld elements",
                   nrt_op_name(op->code), k, (long long)n);
  /* Cache-line aligned: the row loops read it beside 64-byte aligned rows,
   * and a vector load that straddles two lines costs a second access. */
  *out = aligned_alloc(64, ((size_t)n * rt_dtype_size(c) + 63) & ~(size_t)63);
  if (!*out)
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory", nrt_op_name(op->code));
  nn_convert(*out, c, (int64_t)rt_dtype_size(c), v->data, v->dtype,
             v->strides[0] * (int64_t)rt_dtype_size(v->dtype), n);
  return NRT_SUCCESS;
}

/* Writes n values of compute dtype c into the 1-d view of operand k (if
 * present). */
static inline void nn_store_vector(const nrt_op *op, int k, nrt_dtype c, int64_t n, const void *values) {
  const nrt_tensor_view *v = &op->operands[k];
  if (!nn_present(v)) return;
  nn_convert(v->data, v->dtype, v->strides[0] * (int64_t)rt_dtype_size(v->dtype), values, c,
             (int64_t)rt_dtype_size(c), n);
}

/* Checks that operand k is absent or a 1-d view of n elements. */
static inline nrt_status nn_check_vector(const nrt_op *op, int k, int64_t n) {
  const nrt_tensor_view *v = &op->operands[k];
  if (nn_present(v) && (v->ndim != 1 || v->shape[0] != n))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: operand %d must be a vector of %lld elements",
                   nrt_op_name(op->code), k, (long long)n);
  return NRT_SUCCESS;
}

#endif
