/* The reduction engine: geometry, work split and output conversion shared
 * by every reduction kernel (reduce_*.c).
 *
 * A kernel describes its reduction as an rt_reducer: per-output
 * accumulators, a block function that folds a 2-d block of input into
 * them, a combine for partial results and a finish that turns accumulators
 * into result values. The engine does the rest: it finds the reduced
 * dimensions, coalesces dimensions, picks the reduction axis (rows of a
 * block) and the output axis (columns of a block), groups outputs into
 * tiles, and runs tiles on the kernel thread pool. A reduction with few
 * outputs and much input is also cut into groups of blocks whose partial
 * accumulators are combined in group order afterwards.
 *
 * Every choice (tile width, block height, groups) depends on the shapes and
 * strides only, never on the thread count, so results are identical for
 * any number of threads.
 */
#ifndef NEURONRT_OPS_REDUCE_INTERNAL_H
#define NEURONRT_OPS_REDUCE_INTERNAL_H

#include <math.h>
#include "internal.h"
#include "ops/engine/elementwise.h"
#include "ops/engine/scalar_types.h"

/* Accumulators of a tile of up to cap outputs, as a structure of arrays of
 * 8-byte slots: field k of output j is element j of RT_ACC(acc, k, T). A
 * field may hold any type of at most 8 bytes. */
typedef struct rt_acc {
  char *base;
  int64_t cap;
} rt_acc;

#define RT_ACC(acc, k, T) ((T *)(void *)((acc).base + (size_t)(k) * (size_t)(acc).cap * 8))
#define RT_ACC_MAX_FIELDS 3
#define RT_REDUCE_MAX_RESULTS 2

/* A block of input: rows along the reduction, one output per column.
 * Element (i, j) is at x + i * row_stride + j * col_stride (bytes) and
 * belongs to output j of the tile; its reduction index (row-major over the
 * reduced dims, for argmax) is index + i * index_step. */
typedef struct rt_reduce_block {
  const char *x;
  int64_t rows, row_stride;
  int64_t cols, col_stride;
  int64_t index, index_step;
} rt_reduce_block;

typedef struct rt_reducer rt_reducer;
struct rt_reducer {
  int fields;  /* accumulator fields per output */
  int results; /* result values per output, written by finish */
  nrt_dtype result_dtype[RT_REDUCE_MAX_RESULTS];
  int first_result; /* op output k receives result first_result + k */
  /* Sets n accumulators to the identity. */
  void (*init)(rt_acc acc, int64_t n, const rt_reducer *r);
  /* Folds a block (b->cols <= acc.cap) into the accumulators. */
  void (*block)(rt_acc acc, const rt_reduce_block *b, const rt_reducer *r);
  /* acc[j] = acc[j] (+) later[j]: later covers input that follows acc's. */
  void (*combine)(rt_acc acc, rt_acc later, int64_t n, const rt_reducer *r);
  /* Writes results[k][j] (dense, result_dtype[k]) for j < n; count is the
   * number of elements each output reduced. */
  void (*finish)(rt_acc acc, int64_t n, int64_t count, char *const *results, const rt_reducer *r);
  double param[2]; /* op attributes: p of a norm, correction, ... */
  int variant;
};

/* Runs a reduction op (operands as in neuronrt/ops/reduce.h) with reducer
 * r for its input's dtype. */
nrt_status rt_reduce(const nrt_op *op, const rt_reducer *r);

/* Checks the operand count of a reduction or scan op. */
nrt_status rt_reduce_check_operands(const nrt_op *op, int min_outputs, int max_outputs);

/* Elements of each dtype read as the type reductions compute in. The
 * float16 reader gives rt_half_to_float's values without branches, so that
 * loops over float16 vectorise. */
static inline float rt_load_f16(rt_half h) {
  uint32_t em = h & 0x7fffu;
  uint32_t bits = (em << 13) + (112u << 23);  /* normal: rebias the exponent by 127 - 15 */
  bits += em >= 0x7c00u ? (112u << 23) : 0u;  /* infinity and NaN: exponent all ones */
  float mag = em < 0x400u ? (float)(int32_t)em * 0x1p-24f : rt_f32_from_bits(bits); /* subnormal */
  return rt_f32_from_bits(rt_f32_bits(mag) | ((uint32_t)(h & 0x8000u) << 16));
}
static inline float rt_load_bf16(rt_bfloat16 b) { return rt_bfloat16_to_float(b); }

/* The dtypes and C types reductions are generated for:
 * X(dtype, suffix, storage type, compute type, load expression of v). */
#define RT_REDUCE_INT_TYPES(X)                       \
  X(NRT_BOOL, b8, uint8_t, uint8_t, (uint8_t)((v) != 0)) \
  X(NRT_UINT8, u8, uint8_t, uint8_t, (v))            \
  X(NRT_INT8, i8, int8_t, int8_t, (v))               \
  X(NRT_INT16, i16, int16_t, int16_t, (v))           \
  X(NRT_INT32, i32, int32_t, int32_t, (v))           \
  X(NRT_INT64, i64, int64_t, int64_t, (v))
#define RT_REDUCE_FLOAT_TYPES(X)                          \
  X(NRT_FLOAT16, f16, rt_half, float, rt_load_f16(v))     \
  X(NRT_BFLOAT16, bf16, rt_bfloat16, float, rt_load_bf16(v)) \
  X(NRT_FLOAT32, f32, float, float, (v))                  \
  X(NRT_FLOAT64, f64, double, double, (v))
#define RT_REDUCE_ALL_TYPES(X) RT_REDUCE_INT_TYPES(X) RT_REDUCE_FLOAT_TYPES(X)

/* Block functions of one op indexed by input dtype; NULL if unsupported. */
typedef void (*rt_reduce_block_fn)(rt_acc acc, const rt_reduce_block *b, const rt_reducer *r);
typedef rt_reduce_block_fn rt_reduce_block_table[NRT_DTYPE_COUNT];

/* Lanes of the row loops: independent partial results that the compiler
 * keeps in vector registers; combined in a fixed tree at the end. The loop
 * over the lanes carries RT_LANE_LOOP: kept rolled, it is vectorised by the
 * loop vectoriser, which handles selects (max, NaN checks) and conversions;
 * unrolled early, it would be left to the basic-block vectoriser, which
 * does not. */
#define RT_LANES 16
/* Helpers of kernel loops are inlined into them, so that they are compiled
 * for each RT_SIMD_* variant rather than for the baseline only. */
#define RT_INLINE static inline __attribute__((always_inline))
#define RT_LANE_LOOP _Pragma("GCC unroll 1")

#endif
