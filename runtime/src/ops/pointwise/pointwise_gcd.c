/* gcd and lcm (NRT_SPECIAL_OPS in neuronrt/ops/pointwise.h).
 *
 * The reference is PyTorch's Euclid on |a|, |b| with its integer wrapping
 * spelt out: |INT_MIN| stays INT_MIN, and lcm's INT_MIN / -1 wraps instead
 * of trapping. It serves every dtype, and strided or broadcast int32.
 *
 * Contiguous int32 runs take Stein's binary gcd instead, over blocks of
 * GCD_LANES elements that the compiler vectorises: a division per Euclid
 * step (about 26 ns an element of 1M values in [-1000, 1000) on the Zen 4,
 * against 23.6 for PyTorch's CPU loop) becomes a shift, a min and a
 * subtraction per step in every lane at once. Both compute the one gcd of
 * two magnitudes below 2^31, so the results are the same bits (gcd(x, 0) =
 * x, gcd(0, 0) = 0). A block holding INT32_MIN (whose |.| wraps, and whose
 * Euclid result can be negative) and the run's tail take the reference.
 * The test comparing the two: runtime/tests/test_pointwise.c,
 * test_gcd_lcm_match_twin_bitwise.
 */
#include "ops/pointwise/pointwise.h"

/* ---- the reference: Euclid, one element at a time ---------------------------
 * |v| wrapping in T (uint8 is its own magnitude). The remainder guards
 * b % -1 (always 0), which traps for INT_MIN. */
#define ABS_WRAP(T, v) ((v) < 0 ? RT_WRAP(T, 0 - RT_U64(v)) : (v))
#define DEFINE_GCD(S, T)                                 \
  static inline T gcd_##S(T a, T b) {                    \
    a = ABS_WRAP(T, a);                                  \
    b = ABS_WRAP(T, b);                                  \
    while (a != 0) {                                     \
      T c = a;                                           \
      a = (T)(a == (T)-1 ? 0 : b % a);                   \
      b = c;                                             \
    }                                                    \
    return b;                                            \
  }
DEFINE_GCD(i8, int8_t)
DEFINE_GCD(i16, int16_t)
DEFINE_GCD(i32, int32_t)
DEFINE_GCD(i64, int64_t)
static inline uint8_t gcd_u8(uint8_t a, uint8_t b) {
  while (a != 0) {
    uint8_t c = a;
    a = (uint8_t)(b % a);
    b = c;
  }
  return b;
}

/* Types narrower than int compute a / g * b and its magnitude in int (C++
 * promotes them), then truncate; int32 and int64 wrap in their own type. */
#define LCM_NARROW(S, T)                                                  \
  static inline T lcm_##S(T a, T b) {                                     \
    T g = gcd_##S(a, b);                                                  \
    if (g == 0) return 0;                                                 \
    int32_t p = (int32_t)a / (int32_t)g * (int32_t)b;                     \
    return (T)(p < 0 ? -p : p);                                           \
  }
#define LCM_WIDE(S, T)                                                    \
  static inline T lcm_##S(T a, T b) {                                     \
    T g = gcd_##S(a, b);                                                  \
    if (g == 0) return 0;                                                 \
    T q = g == -1 ? RT_WRAP(T, 0 - RT_U64(a)) : (T)(a / g);               \
    T p = RT_WRAP(T, RT_UW(q) * RT_UW(b));                                \
    return ABS_WRAP(T, p);                                                \
  }
LCM_NARROW(u8, uint8_t)
LCM_NARROW(i8, int8_t)
LCM_NARROW(i16, int16_t)
LCM_WIDE(i32, int32_t)
LCM_WIDE(i64, int64_t)

#define DEFINE_INTEGER_LOOPS(ENUM, S, T)               \
  RT_BINARY_LOOP(gcd_loop_##S, T, T, gcd_##S(a, b))    \
  RT_BINARY_LOOP(lcm_loop_##S, T, T, lcm_##S(a, b))
RT_INTEGER_TYPES(DEFINE_INTEGER_LOOPS)
#define INTEGER_TABLE(NAME)                                                          \
  {[NRT_UINT8] = NAME##_u8, [NRT_INT8] = NAME##_i8, [NRT_INT16] = NAME##_i16,        \
   [NRT_INT32] = NAME##_i32, [NRT_INT64] = NAME##_i64}

/* ---- int32: Stein's binary gcd, vectorised ---------------------------------- */
#define GCD_LANES 32

/* Trailing zeros of v, 0 < v < 2^31: the exponent of its lowest set bit,
 * read off that bit converted to float (a power of two, exact). Vectorises,
 * where __builtin_ctz does not. */
static inline __attribute__((always_inline)) uint32_t ctz31(uint32_t v) {
  const float f = (float)(int32_t)(v & (0u - v));
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  return (bits >> 23) - 127u;
}

/* g[j] = gcd(|a[j]|, |b[j]|) for j < GCD_LANES; no operand is INT32_MIN. */
static inline __attribute__((always_inline)) void gcd_block_i32(const int32_t *a, const int32_t *b,
                                                                uint32_t *g) {
  uint32_t u[GCD_LANES], v[GCD_LANES], k[GCD_LANES];
  for (int j = 0; j < GCD_LANES; j++) {
    const uint32_t x = (uint32_t)(a[j] < 0 ? -a[j] : a[j]), y = (uint32_t)(b[j] < 0 ? -b[j] : b[j]);
    const uint32_t zero = (x == 0) | (y == 0); /* gcd is x | y: the loop leaves u so */
    k[j] = zero ? 0 : ctz31(x | y);               /* the power of two both share */
    u[j] = zero ? x | y : x >> ctz31(x | zero);   /* odd */
    v[j] = zero ? 0 : y;
  }
  for (;;) { /* v = odd part of v; (u, v) = (min, max - min); until every v is 0 */
    uint32_t any = 0;
    for (int j = 0; j < GCD_LANES; j++) {
      const uint32_t vj = v[j], uj = u[j], live = vj != 0;
      const uint32_t t = vj >> ctz31(vj | !live);
      const uint32_t lo = t < uj ? t : uj, hi = t < uj ? uj : t;
      u[j] = live ? lo : uj;
      v[j] = live ? hi - lo : 0;
      any |= v[j];
    }
    if (!any) break;
  }
  for (int j = 0; j < GCD_LANES; j++) g[j] = u[j] << k[j];
}

static inline __attribute__((always_inline)) int has_int32_min(const int32_t *a, const int32_t *b) {
  int found = 0;
  for (int j = 0; j < GCD_LANES; j++) found |= (a[j] == INT32_MIN) | (b[j] == INT32_MIN);
  return found;
}

/* lcm from the block's gcd as the reference computes it: |a / g * b|
 * wrapping in int32, 0 where g is. a / g is exact in double (g divides a). */
static inline __attribute__((always_inline)) void lcm_block_i32(const int32_t *a, const int32_t *b,
                                                                int32_t *o) {
  uint32_t g[GCD_LANES];
  gcd_block_i32(a, b, g);
  for (int j = 0; j < GCD_LANES; j++) {
    const double d = g[j] ? (double)g[j] : 1.0;
    const int32_t q = (int32_t)((double)a[j] / d);
    const uint32_t p = (uint32_t)q * (uint32_t)b[j];
    const uint32_t m = (int32_t)p < 0 ? 0u - p : p;
    o[j] = g[j] ? (int32_t)m : 0;
  }
}

/* The contiguous loops: blocks of lanes, the rest through the reference. */
#define GCD_FAST_LOOP(NAME, REFERENCE, BLOCK)                                                 \
  RT_SIMD_VOID(NAME, (char **data, const int64_t *strides, int64_t n, void *ctx),             \
               (data, strides, n, ctx)) {                                                     \
    const int64_t w = (int64_t)sizeof(int32_t);                                               \
    if (strides[0] != w || strides[1] != w || strides[2] != w) {                              \
      REFERENCE(data, strides, n, ctx);                                                       \
      return;                                                                                 \
    }                                                                                         \
    int32_t *o = (int32_t *)(void *)data[0];                                                  \
    const int32_t *a = (const int32_t *)(const void *)data[1];                                \
    const int32_t *b = (const int32_t *)(const void *)data[2]; /* either may be o */          \
    int64_t i = 0;                                                                            \
    for (; i + GCD_LANES <= n; i += GCD_LANES) {                                              \
      char *part[3] = {(char *)(o + i), (char *)(a + i), (char *)(b + i)};                    \
      if (has_int32_min(a + i, b + i)) {                                                      \
        REFERENCE(part, strides, GCD_LANES, ctx);                                             \
        continue;                                                                             \
      }                                                                                       \
      BLOCK                                                                                   \
    }                                                                                         \
    char *rest[3] = {(char *)(o + i), (char *)(a + i), (char *)(b + i)};                      \
    if (i < n) REFERENCE(rest, strides, n - i, ctx);                                          \
  }
GCD_FAST_LOOP(gcd_fast_i32, gcd_loop_i32, {
  uint32_t g[GCD_LANES];
  gcd_block_i32(a + i, b + i, g);
  for (int j = 0; j < GCD_LANES; j++) o[i + j] = (int32_t)g[j];
})
GCD_FAST_LOOP(lcm_fast_i32, lcm_loop_i32, {
  int32_t r[GCD_LANES];
  lcm_block_i32(a + i, b + i, r);
  for (int j = 0; j < GCD_LANES; j++) o[i + j] = r[j];
})

/* ---- kernels ----------------------------------------------------------------- */
nrt_status rt_kernel_gcd(const nrt_op *op) {
  static const rt_loop_table loops = {[NRT_UINT8] = gcd_loop_u8, [NRT_INT8] = gcd_loop_i8,
                                      [NRT_INT16] = gcd_loop_i16, [NRT_INT32] = gcd_fast_i32,
                                      [NRT_INT64] = gcd_loop_i64};
  return rt_run_pointwise(op, loops, -1);
}

nrt_status rt_kernel_lcm(const nrt_op *op) {
  static const rt_loop_table loops = {[NRT_UINT8] = lcm_loop_u8, [NRT_INT8] = lcm_loop_i8,
                                      [NRT_INT16] = lcm_loop_i16, [NRT_INT32] = lcm_fast_i32,
                                      [NRT_INT64] = lcm_loop_i64};
  return rt_run_pointwise(op, loops, -1);
}

nrt_status rt_kernel_gcd_reference(const nrt_op *op) {
  static const rt_loop_table loops = INTEGER_TABLE(gcd_loop);
  return rt_run_pointwise(op, loops, -1);
}

nrt_status rt_kernel_lcm_reference(const nrt_op *op) {
  static const rt_loop_table loops = INTEGER_TABLE(lcm_loop);
  return rt_run_pointwise(op, loops, -1);
}
