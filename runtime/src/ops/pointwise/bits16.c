/* float16/bfloat16 ops that only clear, flip, copy, compare or select
 * values, run on their 16-bit patterns: abs, neg, sign, hardtanh (clamp,
 * clamp_min and clamp_max with number bounds: the shim makes them
 * hardtanh), threshold, copysign, and maximum/minimum of two tensors
 * (clamp_min/clamp_max with a tensor). No value needs rounding, so the
 * conversion to float32 and back that other 16-bit ops take is skipped.
 *
 * Each gives the bits of its converting twin (the float32 loops between
 * conversions, rt_kernel_NAME_reference): a NaN leaves as that rounding
 * back leaves it (RT_BF16_AS_ROUNDED / RT_F16_AS_ROUNDED); a comparison
 * with a float32 bound becomes one of integers, through a map of the
 * patterns that keeps their order and makes -0 and +0 equal (KEY16), with
 * the bound replaced by the nearest pattern on the side that keeps the
 * comparison's outcome for every 16-bit value. An op whose bound is NaN
 * keeps the converting path (every result NaN: rare, and simplest so).
 * runtime/tests/test_pointwise.c compares each with its twin over every
 * pattern (binary ops: a sweep of pattern pairs).
 */
#include "ops/pointwise/pointwise.h"

/* Signed magnitude to an ordered integer: -0 and +0 both 0 (a negative
 * pattern's magnitude bits inverted, then one added), with 16-bit
 * operations only (every key, bounds' too, lies within +-0x7f81), so that
 * GCC keeps 16-bit lanes: a select between the negation and the magnitude
 * was widened to 32-bit lanes and packed back. */
static inline int16_t key16(uint16_t x) {
  const int16_t neg = (int16_t)((int16_t)x >> 15); /* -1 or 0 */
  return (int16_t)((int16_t)(x ^ (uint16_t)(neg & 0x7fff)) - neg);
}
#define KEY16(x) key16(x)
/* Not NaN: the magnitude at most infinity's (NANB: 0x7f80 / 0x7c00). */
#define ISNAN16(x, NANB) (((x) & 0x7fffu) > (NANB))

/* A key constant, compared in 16-bit lanes. */
#define K16(k) ((int16_t)sc->i[k])

/* Each expression takes AS (the type's NaN as the twin leaves it), NANB
 * (infinity's magnitude) and ONE (1.0's pattern); x or a, b are the
 * operands' patterns, sc->i[2...] the constants prepare_* computed. */
#define ABS16(AS, NANB, ONE) AS((x) & 0x7fffu)
#define NEG16(AS, NANB, ONE) AS((x) ^ 0x8000u)
/* (x > 0) - (x < 0) as a float: +-0 and NaN give +0. */
#define SIGN16(AS, NANB, ONE) \
  ((x) & 0x7fffu) == 0u || ISNAN16(x, NANB) ? 0u : ((x) & 0x8000u) | (ONE)
/* sc->i: [2] x < lo as KEY16(x) < i[2]; [3] x > hi as KEY16(x) > i[3];
 * [4] the result when x < lo; [5] hi's pattern. */
#define HARDTANH16(AS, NANB, ONE)                       \
  ISNAN16(x, NANB)           ? AS(x)                    \
  : KEY16(x) < K16(2)        ? (uint16_t)sc->i[4]       \
  : KEY16(x) > K16(3)        ? (uint16_t)sc->i[5]       \
                             : (x)
/* sc->i: [2] x <= threshold as KEY16(x) <= i[2]; [3] value's pattern. */
#define THRESHOLD16(AS, NANB, ONE) \
  ISNAN16(x, NANB) ? AS(x) : KEY16(x) <= K16(2) ? (uint16_t)sc->i[3] : (x)
#define COPYSIGN16(AS, NANB, ONE) AS(((a) & 0x7fffu) | ((b) & 0x8000u))
/* NaN wins, a's first; equal values (-0 and +0 too) give b. */
#define MAXIMUM16(AS, NANB, ONE) \
  ISNAN16(a, NANB) ? AS(a) : ISNAN16(b, NANB) ? AS(b) : KEY16(a) > KEY16(b) ? (a) : (b)
#define MINIMUM16(AS, NANB, ONE) \
  ISNAN16(a, NANB) ? AS(a) : ISNAN16(b, NANB) ? AS(b) : KEY16(a) < KEY16(b) ? (a) : (b)

#define BITS16_UNARY(NAME, EXPR)                                                        \
  RT_UNARY_LOOP(NAME##_bf16b, uint16_t, uint16_t, EXPR(RT_BF16_AS_ROUNDED, 0x7f80u, 0x3f80u)) \
  RT_UNARY_LOOP(NAME##_f16b, uint16_t, uint16_t, EXPR(RT_F16_AS_ROUNDED, 0x7c00u, 0x3c00u))
#define BITS16_BINARY(NAME, EXPR)                                                        \
  RT_BINARY_LOOP(NAME##_bf16b, uint16_t, uint16_t, EXPR(RT_BF16_AS_ROUNDED, 0x7f80u, 0x3f80u)) \
  RT_BINARY_LOOP(NAME##_f16b, uint16_t, uint16_t, EXPR(RT_F16_AS_ROUNDED, 0x7c00u, 0x3c00u))

BITS16_UNARY(abs, ABS16)
BITS16_UNARY(neg, NEG16)
BITS16_UNARY(sign, SIGN16)
BITS16_UNARY(hardtanh, HARDTANH16)
BITS16_UNARY(threshold, THRESHOLD16)
BITS16_BINARY(copysign, COPYSIGN16)
BITS16_BINARY(maximum, MAXIMUM16)
BITS16_BINARY(minimum, MINIMUM16)

/* ---- the bounds as patterns ------------------------------------------- */

static float value16(nrt_dtype t, uint16_t bits) {
  return t == NRT_BFLOAT16 ? rt_bfloat16_to_float(bits) : rt_half_to_float(bits);
}
static uint16_t round16(nrt_dtype t, float f) {
  return t == NRT_BFLOAT16 ? rt_bfloat16_from_float(f) : rt_half_from_float(f);
}
/* The key of the smallest (ceil) or largest (floor) pattern whose value is
 * at least / at most f (not NaN): x < f exactly when KEY16(x) < ceil_key,
 * x > f exactly when KEY16(x) > floor_key, for every non-NaN pattern x. */
static int64_t ceil_key(nrt_dtype t, float f) {
  uint16_t r = round16(t, f);
  return KEY16(r) + (value16(t, r) < f);
}
static int64_t floor_key(nrt_dtype t, float f) {
  uint16_t r = round16(t, f);
  return KEY16(r) - (value16(t, r) > f);
}

static void set_scalar(nrt_op *op, int k, int64_t value) {
  while (op->num_scalars <= k) op->scalars[op->num_scalars++] = (nrt_scalar){.is_float = 0, .i = 0};
  op->scalars[k] = (nrt_scalar){.is_float = 0, .i = value};
}
static double scalar_f(const nrt_op *op, int k) {
  return op->scalars[k].is_float ? op->scalars[k].f : (double)op->scalars[k].i; /* rt_scalars_from_op */
}

/* Each returns 0 where the converting path must run (a NaN bound). */
static int prepare_hardtanh(nrt_op *op, nrt_dtype t) {
  if (op->num_scalars < 2) return 0;
  const float lo = (float)scalar_f(op, 0), hi = (float)scalar_f(op, 1);
  if (lo != lo || hi != hi) return 0;
  set_scalar(op, 2, ceil_key(t, lo));
  set_scalar(op, 3, floor_key(t, hi));
  set_scalar(op, 4, round16(t, lo > hi ? hi : lo));
  set_scalar(op, 5, round16(t, hi));
  return 1;
}
static int prepare_threshold(nrt_op *op, nrt_dtype t) {
  if (op->num_scalars < 2) return 0;
  const float threshold = (float)scalar_f(op, 0), value = (float)scalar_f(op, 1);
  if (threshold != threshold) return 0;
  set_scalar(op, 2, floor_key(t, threshold));
  set_scalar(op, 3, round16(t, value));
  return 1;
}
/* ---- the table --------------------------------------------------------- */

typedef struct bits16_op {
  nrt_op_code code;
  rt_inner_loop bf16, f16;
  int (*prepare)(nrt_op *op, nrt_dtype t);
} bits16_op;

#define ENTRY(CODE, NAME, PREPARE) {NRT_OP_##CODE, NAME##_bf16b, NAME##_f16b, PREPARE}
static const bits16_op bits16_ops[] = {
    ENTRY(ABS, abs, NULL),
    ENTRY(NEG, neg, NULL),
    ENTRY(SIGN, sign, NULL),
    ENTRY(HARDTANH, hardtanh, prepare_hardtanh),
    ENTRY(THRESHOLD, threshold, prepare_threshold),
    ENTRY(COPYSIGN, copysign, NULL),
    ENTRY(MAXIMUM, maximum, NULL),
    ENTRY(MINIMUM, minimum, NULL),
};

nrt_status rt_run_bits16(const nrt_op *op, const rt_loop_table loops) {
  const nrt_dtype t = op->compute_dtype;
  if (!rt_is_16bit_float(t) || op->immediate_mask || op->num_operands > NRT_MAX_OPERANDS)
    return rt_run_pointwise(op, loops, -1);
  const bits16_op *e = NULL;
  for (size_t k = 0; k < sizeof bits16_ops / sizeof bits16_ops[0] && !e; k++)
    if (bits16_ops[k].code == op->code) e = &bits16_ops[k];
  if (!e) return rt_run_pointwise(op, loops, -1);
  nrt_dtype want[NRT_MAX_OPERANDS];
  for (int k = 0; k < op->num_operands; k++) {
    if (op->operands[k].dtype != t) return rt_run_pointwise(op, loops, -1);
    want[k] = t;
  }
  nrt_op local = *op;
  if (e->prepare && !e->prepare(&local, t)) return rt_run_pointwise(op, loops, -1);
  return rt_run_pointwise_as(&local, t == NRT_BFLOAT16 ? e->bf16 : e->f16, want);
}
