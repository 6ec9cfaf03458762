/* Pointwise kernels and the vectorised float math they use.
 *
 * vmath.h is measured against double-precision libm over a sweep of the
 * float bit patterns (every 4099th: ~1M values of both signs, subnormals
 * included), a dense grid where the functions bend, and edge cases: at most
 * 2 ulp, NaN in gives NaN out, infinities and overflow as C99 Annex F.
 *
 * The kernels run through nrt_op_execute on contiguous, strided, broadcast,
 * immediate, transposed, mixed-dtype and multi-threaded (large) operands and
 * are compared with reference twins written here: plain per-element C that
 * states each op the way PyTorch defines it.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "ops/engine/convert.h"
#include "ops/engine/half_convert.h"
#include "ops/engine/scalar_types.h"
#include "ops/engine/vmath.h"
#include "ops/engine/vmath_sigmoid_tame.h"
#include "ops/pointwise/one_pass16.h"
#include "ops/pointwise/loop_capture.h"
#include "ops/pointwise/pointwise.h"

/* ---- vmath accuracy ------------------------------------------------------ */

static double ulp_of(double r) {
  double a = fabs(r);
  if (a < 0x1p-126) return 0x1p-149;
  int e;
  frexp(a, &e);
  return ldexp(1.0, e - 24);
}

/* Error of got in ulps of the exact result ref (0 when both are the same
 * special value; huge when one is NaN and the other not). */
static double ulp_error(float got, double ref) {
  if (isnan(ref) || isnan(got)) return isnan(ref) && isnan(got) ? 0.0 : 1e30;
  if (fabs(ref) >= 0x1.ffffffp127) return isinf(got) && (got > 0) == (ref > 0) ? 0.0 : 1e30;
  if (isinf(got)) return 1e30;
  return fabs((double)got - ref) / ulp_of(ref);
}

static double ref_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
static double ref_gelu(double x) { return 0.5 * x * erfc(-x / sqrt(2.0)); }
static double ref_gelu_tanh(double x) {
  double u = 0.7978845608028654 * (x + 0.044715 * x * x * x);
  return x / (1.0 + exp(-2.0 * u));
}
static double ref_silu(double x) { return x / (1.0 + exp(-x)); }

static float vm_exp(float x) { return rt_vm_expf(x); }
static float vm_log(float x) { return rt_vm_logf(x); }
static float vm_tanh(float x) { return rt_vm_tanhf(x); }
static float vm_sigmoid(float x) { return rt_vm_sigmoidf(x); }
static float vm_erf(float x) { return rt_vm_erff(x); }
static float vm_gelu(float x) { return rt_vm_geluf(x); }
static float vm_gelu_tanh(float x) { return rt_vm_gelu_tanhf(x); }
static float vm_silu(float x) { return rt_vm_siluf(x); }

typedef struct math_case {
  const char *name;
  float (*f)(float);
  double (*ref)(double);
  double max_ulp; /* as stated in vmath.h */
} math_case;

static const math_case math_cases[] = {
    {"exp", vm_exp, exp, 1.0},
    {"log", vm_log, log, 1.0},
    {"tanh", vm_tanh, tanh, 2.0},
    {"sigmoid", vm_sigmoid, ref_sigmoid, 2.0},
    {"erf", vm_erf, erf, 2.0},
    {"gelu", vm_gelu, ref_gelu, 6.5},
    {"gelu_tanh", vm_gelu_tanh, ref_gelu_tanh, 1.0},
    {"silu", vm_silu, ref_silu, 3.5},
};

static const float edge_values[] = {
    0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, FLT_MIN, -FLT_MIN, FLT_TRUE_MIN, -FLT_TRUE_MIN,
    FLT_MAX, -FLT_MAX, 1.0f, -1.0f, 0.5f, 0.625f, -0.625f, 0.875f, -0.875f, 1.5f, -0.71f, -0.75f,
    88.72283f, 88.72284f, 89.0f, -87.33654f, -103.97208f, -104.0f, -150.0f, 0x1p-24f, -0x1p-24f,
    10.5f, -14.85f, 15.0f, -1e30f, 1e30f, 3.9192f, -3.9192f, 9.01f, -9.01f,
};

/* Worst ulp error of f over the sweep, the grid and the edges. */
static double worst_ulp(const math_case *c, float *where) {
  double worst = 0.0;
  for (uint64_t u = 0; u < 0x100000000ull; u += 4099) {
    float x = rt_vm_float((uint32_t)u);
    double e = ulp_error(c->f(x), c->ref(x));
    if (e > worst) worst = e, *where = x;
  }
  for (int i = 0; i <= 400000; i++) {
    float x = -40.0f + 80.0f * (float)i / 400000.0f;
    double e = ulp_error(c->f(x), c->ref(x));
    if (e > worst) worst = e, *where = x;
  }
  for (size_t i = 0; i < sizeof edge_values / sizeof edge_values[0]; i++) {
    float x = edge_values[i];
    double e = ulp_error(c->f(x), c->ref(x));
    if (e > worst) worst = e, *where = x;
  }
  return worst;
}

static void test_vmath_within_stated_ulp(void) {
  for (size_t k = 0; k < sizeof math_cases / sizeof math_cases[0]; k++) {
    float where = 0.0f;
    double worst = worst_ulp(&math_cases[k], &where);
    if (worst > math_cases[k].max_ulp)
      fprintf(stderr, "  %s: %.3f ulp at %a\n", math_cases[k].name, worst, (double)where);
    CHECK(worst <= math_cases[k].max_ulp);
  }
}

/* rt_vm_expf_tame gives rt_vm_expf's bits on its whole domain: every 61st
 * float of [-86, 88] and the values at and next to both bounds; below the
 * bound (subnormal results) it does not, which is why callers check. */
static void test_expf_tame_matches_bitwise(void) {
  uint32_t lo = rt_vm_bits(-RT_VM_EXP_TAME_LO), hi = rt_vm_bits(RT_VM_EXP_TAME_HI); /* magnitudes */
  int64_t mismatches = 0, checked = 0;
  for (uint32_t u = 0; u <= hi; u += 61, checked += 2) { /* [0, 88] */
    float x = rt_vm_float(u), y = -rt_vm_float(u <= lo ? u : lo);
    mismatches += rt_vm_bits(rt_vm_expf_tame(x)) != rt_vm_bits(rt_vm_expf(x));
    mismatches += rt_vm_bits(rt_vm_expf_tame(y)) != rt_vm_bits(rt_vm_expf(y));
  }
  const float edges[] = {RT_VM_EXP_TAME_LO, nextafterf(RT_VM_EXP_TAME_LO, 0.0f), RT_VM_EXP_TAME_HI,
                         nextafterf(RT_VM_EXP_TAME_HI, 0.0f), -0.0f, 0.0f, FLT_TRUE_MIN, -FLT_TRUE_MIN,
                         -0.34657359f, 0.34657359f, -85.9999f, -62.383f};
  for (size_t k = 0; k < sizeof edges / sizeof edges[0]; k++, checked++)
    mismatches += rt_vm_bits(rt_vm_expf_tame(edges[k])) != rt_vm_bits(rt_vm_expf(edges[k]));
  CHECK(checked > 20000000 && mismatches == 0);
  CHECK(rt_vm_bits(rt_vm_expf_tame(-100.0f)) != rt_vm_bits(rt_vm_expf(-100.0f)));
}

static void test_vmath_special_values(void) {
  CHECK(rt_vm_expf(-INFINITY) == 0.0f && rt_vm_expf(INFINITY) == INFINITY && isnan(rt_vm_expf(NAN)));
  CHECK(rt_vm_expf(88.8f) == INFINITY && rt_vm_expf(-104.0f) == 0.0f);
  CHECK(rt_vm_expf(-100.0f) > 0.0f && rt_vm_expf(-100.0f) < FLT_MIN); /* subnormal, not flushed */
  CHECK(rt_vm_logf(0.0f) == -INFINITY && rt_vm_logf(-0.0f) == -INFINITY);
  CHECK(isnan(rt_vm_logf(-1.0f)) && rt_vm_logf(INFINITY) == INFINITY && rt_vm_logf(1.0f) == 0.0f);
  CHECK(rt_vm_logf(FLT_TRUE_MIN) < -103.0f);
  CHECK(rt_vm_tanhf(INFINITY) == 1.0f && rt_vm_tanhf(-INFINITY) == -1.0f);
  CHECK(signbit(rt_vm_tanhf(-0.0f)) && signbit(rt_vm_erff(-0.0f)) && signbit(rt_vm_geluf(-0.0f)));
  CHECK(signbit(rt_vm_siluf(-0.0f)) && signbit(rt_vm_gelu_tanhf(-0.0f)));
  CHECK(rt_vm_erff(INFINITY) == 1.0f && rt_vm_erff(-INFINITY) == -1.0f);
  CHECK(rt_vm_sigmoidf(INFINITY) == 1.0f && rt_vm_sigmoidf(-INFINITY) == 0.0f);
  CHECK(rt_vm_geluf(INFINITY) == INFINITY && isnan(rt_vm_geluf(-INFINITY)));
  CHECK(rt_vm_geluf(FLT_MAX) == FLT_MAX && rt_vm_geluf(-FLT_MAX) == 0.0f);
  CHECK(rt_vm_siluf(INFINITY) == INFINITY && isnan(rt_vm_siluf(-INFINITY)));
}

/* ---- running ops ----------------------------------------------------------- */

static nrt_tensor_view view_nd(void *data, nrt_dtype dtype, int32_t ndim, const int64_t *shape,
                               const int64_t *strides) {
  nrt_tensor_view v;
  memset(&v, 0, sizeof v);
  v.data = data;
  v.dtype = dtype;
  v.ndim = ndim;
  for (int32_t d = 0; d < ndim; d++) v.shape[d] = shape[d], v.strides[d] = strides[d];
  return v;
}

static nrt_tensor_view view_1d(void *data, nrt_dtype dtype, int64_t n, int64_t stride) {
  return view_nd(data, dtype, 1, &n, &stride);
}

static void *dev_alloc(size_t bytes) {
  void *p = NULL;
  CHECK_OK(nrt_malloc(0, bytes, &p));
  return p;
}

static void *host(void *dev) { return nrt_device_to_host(dev); }

static nrt_op make_op(nrt_op_code code, nrt_dtype compute, int num_outputs, int num_operands,
                      const nrt_tensor_view *views) {
  nrt_op op;
  memset(&op, 0, sizeof op);
  op.code = code;
  op.compute_dtype = compute;
  op.num_outputs = num_outputs;
  op.num_operands = num_operands;
  for (int k = 0; k < num_operands; k++) op.operands[k] = views[k];
  return op;
}

static void set_scalar(nrt_op *op, int k, double f) {
  op->scalars[k].is_float = 1;
  op->scalars[k].f = f;
  if (op->num_scalars <= k) op->num_scalars = k + 1;
}

static void set_int_scalar(nrt_op *op, int k, int64_t i) {
  op->scalars[k].is_float = 0;
  op->scalars[k].i = i;
  if (op->num_scalars <= k) op->num_scalars = k + 1;
}

/* Deterministic pseudo-random values. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t next_random(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}
static double random_normalish(void) {
  double s = 0;
  for (int i = 0; i < 4; i++) s += (double)(next_random() % 100000) / 100000.0 - 0.5;
  return 3.0 * s;
}

/* ---- integer arithmetic: the twins wrap through uint64_t ----------------- */

static int64_t wrap_to(nrt_dtype t, int64_t v) {
  switch (t) {
    case NRT_UINT8: return (uint8_t)v;
    case NRT_INT8: return (int8_t)v;
    case NRT_INT16: return (int16_t)v;
    case NRT_INT32: return (int32_t)v;
    default: return v;
  }
}

static int64_t load_int(nrt_dtype t, const void *p, int64_t i) {
  switch (t) {
    case NRT_BOOL:
    case NRT_UINT8: return ((const uint8_t *)p)[i];
    case NRT_INT8: return ((const int8_t *)p)[i];
    case NRT_INT16: return ((const int16_t *)p)[i];
    case NRT_INT32: return ((const int32_t *)p)[i];
    default: return ((const int64_t *)p)[i];
  }
}

static void store_int(nrt_dtype t, void *p, int64_t i, int64_t v) {
  switch (t) {
    case NRT_BOOL:
    case NRT_UINT8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case NRT_INT8: ((int8_t *)p)[i] = (int8_t)v; break;
    case NRT_INT16: ((int16_t *)p)[i] = (int16_t)v; break;
    case NRT_INT32: ((int32_t *)p)[i] = (int32_t)v; break;
    default: ((int64_t *)p)[i] = v; break;
  }
}

/* Python's division semantics on int64 values (callers keep them in the
 * dtype's range and b nonzero); INT64_MIN / -1 wraps. */
static int64_t ref_div_trunc(int64_t a, int64_t b) { return b == -1 ? (int64_t)(0 - (uint64_t)a) : a / b; }
static int64_t ref_fmod(int64_t a, int64_t b) { return b == -1 ? 0 : a % b; }
static int64_t ref_remainder(int64_t a, int64_t b) {
  int64_t r = ref_fmod(a, b);
  return r != 0 && (r < 0) != (b < 0) ? r + b : r;
}
static int64_t ref_div_floor(int64_t a, int64_t b) {
  int64_t q = ref_div_trunc(a, b);
  return ref_fmod(a, b) != 0 && (ref_fmod(a, b) < 0) != (b < 0) ? q - 1 : q;
}

typedef int64_t (*int_ref)(int64_t, int64_t);

/* Runs a binary integer op on n elements in four layouts and compares with
 * ref, wrapped to the dtype: contiguous, a strided, b broadcast (stride 0),
 * b an immediate. */
static void check_int_binary(nrt_op_code code, nrt_dtype t, int_ref ref, const int64_t *av,
                             const int64_t *bv, int64_t n) {
  size_t size = nrt_dtype_size(t);
  void *a = dev_alloc(2 * n * size), *b = dev_alloc(n * size), *o = dev_alloc(n * size);
  for (int64_t i = 0; i < n; i++) store_int(t, host(b), i, bv[i]);
  for (int layout = 0; layout < 4; layout++) {
    int64_t a_step = layout == 1 ? 2 : 1;
    for (int64_t i = 0; i < n; i++) store_int(t, host(a), i * a_step, av[i]);
    nrt_tensor_view views[3] = {view_1d(o, t, n, 1), view_1d(a, t, n, a_step),
                                view_1d(b, t, n, layout >= 2 ? 0 : 1)};
    nrt_op op = make_op(code, t, 1, 3, views);
    if (layout == 3) { /* b as an immediate */
      op.immediate_mask = 1u << 2;
      op.operands[2].data = NULL;
      op.immediates[2].i = bv[0];
    }
    CHECK_OK(nrt_op_execute(&op));
    for (int64_t i = 0; i < n; i++) {
      int64_t bi = layout >= 2 ? bv[0] : bv[i];
      int64_t want = wrap_to(t, ref(av[i], bi)), got = load_int(t, host(o), i);
      if (got != want) {
        fprintf(stderr, "  %s %s layout %d: %lld op %lld = %lld, want %lld\n", nrt_op_name(code),
                nrt_dtype_name(t), layout, (long long)av[i], (long long)bi, (long long)got,
                (long long)want);
        CHECK(got == want);
        break;
      }
    }
  }
  nrt_free(a);
  nrt_free(b);
  nrt_free(o);
}

static int64_t ref_add3(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + 3u * (uint64_t)b); }
static int64_t ref_mul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }
static int64_t ref_max(int64_t a, int64_t b) { return a > b ? a : b; }

static void test_integer_arithmetic_wraps(void) {
  const nrt_dtype types[] = {NRT_UINT8, NRT_INT8, NRT_INT16, NRT_INT32, NRT_INT64};
  enum { N = 515 };
  int64_t av[N], bv[N];
  for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
    nrt_dtype t = types[k];
    int64_t lo = t == NRT_UINT8 ? 0 : t == NRT_INT8 ? INT8_MIN : t == NRT_INT16 ? INT16_MIN
                                    : t == NRT_INT32 ? INT32_MIN : INT64_MIN;
    int64_t hi = t == NRT_UINT8 ? UINT8_MAX : t == NRT_INT8 ? INT8_MAX : t == NRT_INT16 ? INT16_MAX
                                    : t == NRT_INT32 ? INT32_MAX : INT64_MAX;
    for (int i = 0; i < N; i++) {
      av[i] = i < 4 ? (i & 1 ? hi : lo) : wrap_to(t, (int64_t)next_random());
      bv[i] = wrap_to(t, (int64_t)next_random());
      if (bv[i] == 0) bv[i] = 1;
    }
    bv[0] = t == NRT_UINT8 ? 3 : -1; /* INT_MIN / -1 */
    check_int_binary(NRT_OP_MUL, t, ref_mul, av, bv, N);
    check_int_binary(NRT_OP_MAXIMUM, t, ref_max, av, bv, N);
    check_int_binary(NRT_OP_DIV_TRUNC, t, ref_div_trunc, av, bv, N);
    check_int_binary(NRT_OP_DIV_FLOOR, t, ref_div_floor, av, bv, N);
    check_int_binary(NRT_OP_REMAINDER, t, ref_remainder, av, bv, N);
    check_int_binary(NRT_OP_FMOD, t, ref_fmod, av, bv, N);
  }
}

/* gcd / lcm: PyTorch's Euclid on magnitudes wrapped to the type (so
 * |INT_MIN| stays INT_MIN), written over int64 for the dtype in ref_type;
 * the result of values away from the minimum is also checked against
 * the mathematical gcd (binary gcd on magnitudes). */
static nrt_dtype ref_type;
static int64_t ref_gcd(int64_t a, int64_t b) {
  a = wrap_to(ref_type, a < 0 ? (int64_t)(0 - (uint64_t)a) : a);
  b = wrap_to(ref_type, b < 0 ? (int64_t)(0 - (uint64_t)b) : b);
  while (a != 0) {
    int64_t c = a;
    a = a == -1 ? 0 : b % a;
    b = c;
  }
  return b;
}
static int64_t ref_lcm(int64_t a, int64_t b) {
  int64_t g = ref_gcd(a, b);
  if (g == 0) return 0;
  int64_t q = g == -1 ? (int64_t)(0 - (uint64_t)a) : a / g;
  int64_t narrow = ref_type == NRT_UINT8 || ref_type == NRT_INT8 || ref_type == NRT_INT16;
  int64_t p = narrow ? q * b : wrap_to(ref_type, (int64_t)((uint64_t)q * (uint64_t)b));
  return p < 0 ? (int64_t)(0 - (uint64_t)p) : p;
}
static uint64_t binary_gcd(uint64_t a, uint64_t b) {
  if (a == 0) return b;
  if (b == 0) return a;
  int shift = __builtin_ctzll(a | b);
  a >>= __builtin_ctzll(a);
  while (b) {
    b >>= __builtin_ctzll(b);
    if (a > b) { uint64_t t = a; a = b; b = t; }
    b -= a;
  }
  return a << shift;
}

static void test_gcd_lcm_match_euclid(void) {
  const nrt_dtype types[] = {NRT_UINT8, NRT_INT8, NRT_INT16, NRT_INT32, NRT_INT64};
  enum { N = 301 };
  int64_t av[N], bv[N];
  for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
    nrt_dtype t = ref_type = types[k];
    int64_t lo = t == NRT_UINT8 ? 0 : t == NRT_INT8 ? INT8_MIN : t == NRT_INT16 ? INT16_MIN
                                    : t == NRT_INT32 ? INT32_MIN : INT64_MIN;
    for (int i = 0; i < N; i++) {
      av[i] = wrap_to(t, (int64_t)next_random() % 1000 * (i % 3 ? 6 : 1));
      bv[i] = wrap_to(t, (int64_t)next_random() % 1000 * (i % 2 ? 4 : 1));
      uint64_t ma = av[i] < 0 ? 0 - (uint64_t)av[i] : (uint64_t)av[i], mb = bv[i] < 0 ? 0 - (uint64_t)bv[i] : (uint64_t)bv[i];
      if (t == NRT_UINT8 || (av[i] != lo && bv[i] != lo)) /* away from |INT_MIN|: the twin is the gcd */
        CHECK((uint64_t)ref_gcd(av[i], bv[i]) == binary_gcd(ma, mb));
    }
    av[0] = lo, bv[0] = 0; /* the extremes: |INT_MIN| wraps */
    av[1] = lo, bv[1] = lo;
    av[2] = lo, bv[2] = 6;
    av[3] = 0, bv[3] = 0;
    av[4] = lo, bv[4] = 7; /* int64: gcd -1, and lcm's INT_MIN / -1 */
    check_int_binary(NRT_OP_GCD, t, ref_gcd, av, bv, N);
    check_int_binary(NRT_OP_LCM, t, ref_lcm, av, bv, N);
  }
}

/* int32 gcd and lcm run Stein's binary gcd over blocks of lanes on
 * contiguous runs; Euclid one element at a time (rt_kernel_*_reference) is
 * their twin: the same bits for magnitudes of every size, zeros, INT32_MIN
 * (its blocks take the twin) and -1, with the operands contiguous (a
 * length that leaves a tail), in place, strided and broadcast. */
static void test_gcd_lcm_match_twin_bitwise(void) {
  enum { N = 4096 + 13 };
  const int32_t edges[] = {0, 1, -1, INT32_MIN, INT32_MAX, INT32_MIN + 1, 1 << 30, -(1 << 30), 6, -6, 1 << 16, 3 << 20};
  const int E = (int)(sizeof edges / sizeof edges[0]);
  void *a = dev_alloc(2 * N * 4), *b = dev_alloc(2 * N * 4), *o = dev_alloc(2 * N * 4), *r = dev_alloc(2 * N * 4);
  int32_t *ha = host(a), *hb = host(b);
  for (int i = 0; i < 2 * N; i++) {
    const uint32_t x = (uint32_t)next_random(), y = (uint32_t)next_random();
    const int kind = (i / 64) % 4; /* whole blocks of one kind: small, shifted, any bits, few bits */
    ha[i] = kind == 0 ? (int32_t)(x % 2001) - 1000 : kind == 1 ? (int32_t)((x % 4001) << (y % 18)) - (1 << 17)
          : kind == 2 ? (int32_t)x : (int32_t)(x & 0x8000f0f0u);
    hb[i] = kind == 0 ? (int32_t)(y % 2001) - 1000 : kind == 1 ? (int32_t)((y % 3001) << (x % 19))
          : kind == 2 ? (int32_t)y : (int32_t)(y & 0x0f0f0001u);
    if (i % 11 == 0) ha[i] = edges[(i / 11) % E];
    if (i % 13 == 0) hb[i] = edges[(i / 13) % E];
    if (i > N && i < N + 200) ha[i] = (int32_t)(x % 97) - 48; /* blocks free of INT32_MIN near edges */
  }
  const nrt_op_code codes[2] = {NRT_OP_GCD, NRT_OP_LCM};
  nrt_status (*twins[2])(const nrt_op *) = {rt_kernel_gcd_reference, rt_kernel_lcm_reference};
  for (int c = 0; c < 2; c++)
    for (int layout = 0; layout < 4; layout++) { /* contiguous, in place, strided, broadcast b */
      const int64_t s = layout == 2 ? 2 : 1, sb = layout == 3 ? 0 : s;
      void *out = layout == 1 ? a : o, *out_r = r;
      if (layout == 1) memcpy(host(r), ha, 2 * N * 4); /* the twin's in-place copy */
      nrt_tensor_view views[3] = {view_1d(out, NRT_INT32, N, s), view_1d(a, NRT_INT32, N, s), view_1d(b, NRT_INT32, N, sb)};
      nrt_op op = make_op(codes[c], NRT_INT32, 1, 3, views);
      int32_t saved[2 * N];
      memcpy(saved, ha, sizeof saved);
      CHECK_OK(nrt_op_execute(&op));
      /* The kernel itself takes host addresses (nrt_op_execute translates). */
      op.operands[0] = view_1d(host(out_r), NRT_INT32, N, s);
      op.operands[1] = view_1d(layout == 1 ? host(r) : (void *)saved, NRT_INT32, N, s);
      op.operands[2] = view_1d(hb, NRT_INT32, N, sb);
      CHECK_OK(twins[c](&op));
      const int32_t *got = host(out), *want = host(out_r);
      int bad = 0;
      for (int i = 0; i < N; i++)
        if (got[i * s] != want[i * s] && bad++ < 3)
          fprintf(stderr, "  %s layout %d: (%d, %d) -> %d, twin %d\n", c ? "lcm" : "gcd", layout,
                  (int)saved[i * s], (int)hb[i * sb], (int)got[i * s], (int)want[i * s]);
      CHECK(bad == 0);
      memcpy(ha, saved, sizeof saved); /* undo the in-place run */
    }
  nrt_free(a);
  nrt_free(b);
  nrt_free(o);
  nrt_free(r);
}

/* float32 logaddexp(2) take tame twins per block of 512 finite pairs with
 * |x| <= 2^126 (pointwise_special.c): bitwise the general loops
 * (rt_kernel_logaddexp*_reference) over operands of every scale, gaps that
 * make e^-g subnormal or zero, signed zeros and the bound itself, blocks
 * holding one wild value (NaN, an infinity, just above the bound) each,
 * contiguous with a tail, in place and strided. */
static void test_logaddexp_tame_blocks_match_twin(void) {
  enum { N = 512 * 24 + 77 };
  const float edges[] = {0.0f, -0.0f, 0x1p126f, -0x1p126f, 1e-45f, -1e-45f, 1.1754944e-38f, 1.0f, -1.0f,
                         -87.5f, -100.0f, -103.9f, -150.0f, 88.0f, 3e38f / 4};
  const float wild[] = {NAN, INFINITY, -INFINITY, 0x1.000002p126f, -3e38f, 3e38f};
  const int ne = (int)(sizeof edges / sizeof edges[0]), nw = (int)(sizeof wild / sizeof wild[0]);
  void *a = dev_alloc(2 * N * 4), *b = dev_alloc(2 * N * 4), *o = dev_alloc(2 * N * 4), *r = dev_alloc(2 * N * 4);
  float *ha = host(a), *hb = host(b);
  for (int i = 0; i < 2 * N; i++) {
    const int block = i / 512;
    const float scale = block % 4 == 0 ? 1.0f : block % 4 == 1 ? 40.0f : block % 4 == 2 ? 1e-30f : 1e30f;
    ha[i] = (float)random_normalish() * scale;
    hb[i] = (float)random_normalish() * scale;
    if (i % 17 == 0) ha[i] = edges[(i / 17) % ne];
    if (i % 19 == 0) hb[i] = edges[(i / 19) % ne];
    if (i % 23 == 0) hb[i] = ha[i] - (float)(i % 160); /* gaps up to 160: e^-g subnormal, zero */
    if (block % 3 == 2 && i % 512 == 300) (block & 1 ? ha : hb)[i] = wild[(i / 512) % nw];
  }
  const nrt_op_code codes[2] = {NRT_OP_LOGADDEXP, NRT_OP_LOGADDEXP2};
  nrt_status (*twins[2])(const nrt_op *) = {rt_kernel_logaddexp_reference, rt_kernel_logaddexp2_reference};
  static float saved[2 * N];
  for (int c = 0; c < 2; c++)
    for (int layout = 0; layout < 3; layout++) { /* contiguous, in place, strided */
      const int64_t s = layout == 2 ? 2 : 1;
      void *out = layout == 1 ? a : o;
      memcpy(saved, ha, sizeof saved);
      memcpy(host(r), ha, sizeof saved);
      nrt_tensor_view views[3] = {view_1d(out, NRT_FLOAT32, N, s), view_1d(a, NRT_FLOAT32, N, s), view_1d(b, NRT_FLOAT32, N, s)};
      nrt_op op = make_op(codes[c], NRT_FLOAT32, 1, 3, views);
      CHECK_OK(nrt_op_execute(&op));
      /* The kernel itself takes host addresses (nrt_op_execute translates). */
      op.operands[0] = view_1d(host(r), NRT_FLOAT32, N, s);
      op.operands[1] = view_1d(layout == 1 ? host(r) : (void *)saved, NRT_FLOAT32, N, s);
      op.operands[2] = view_1d(hb, NRT_FLOAT32, N, s);
      CHECK_OK(twins[c](&op));
      const float *got = host(out), *want = host(r);
      int bad = 0;
      for (int i = 0; i < N; i++)
        if (memcmp(&got[i * s], &want[i * s], 4) != 0 && bad++ < 3)
          fprintf(stderr, "  logaddexp%s layout %d: (%a, %a) -> %a, twin %a\n", c ? "2" : "", layout,
                  (double)saved[i * s], (double)hb[i * s], (double)got[i * s], (double)want[i * s]);
      CHECK(bad == 0);
      memcpy(ha, saved, sizeof saved); /* undo the in-place run */
    }
  nrt_free(a);
  nrt_free(b);
  nrt_free(o);
  nrt_free(r);
}

static void test_add_alpha_wraps(void) {
  enum { N = 300 };
  int64_t av[N], bv[N];
  for (int i = 0; i < N; i++) av[i] = (int64_t)next_random(), bv[i] = (int64_t)next_random();
  /* ADD's alpha is a scalar: run it by hand with alpha 3 */
  void *a = dev_alloc(N * 8), *b = dev_alloc(N * 8), *o = dev_alloc(N * 8);
  memcpy(host(a), av, sizeof av);
  memcpy(host(b), bv, sizeof bv);
  nrt_tensor_view views[3] = {view_1d(o, NRT_INT64, N, 1), view_1d(a, NRT_INT64, N, 1),
                              view_1d(b, NRT_INT64, N, 1)};
  nrt_op op = make_op(NRT_OP_ADD, NRT_INT64, 1, 3, views);
  set_int_scalar(&op, 0, 3);
  CHECK_OK(nrt_op_execute(&op));
  for (int i = 0; i < N; i++) CHECK(((int64_t *)host(o))[i] == ref_add3(av[i], bv[i]));
  nrt_free(a);
  nrt_free(b);
  nrt_free(o);
}

static void test_integer_division_by_zero_fails(void) {
  const nrt_op_code codes[] = {NRT_OP_DIV_TRUNC, NRT_OP_DIV_FLOOR, NRT_OP_REMAINDER, NRT_OP_FMOD};
  void *a = dev_alloc(64), *b = dev_alloc(64), *o = dev_alloc(64);
  int32_t av[4] = {5, 6, 7, 8}, bv[4] = {1, 2, 0, 4};
  memcpy(host(a), av, sizeof av);
  memcpy(host(b), bv, sizeof bv);
  for (size_t k = 0; k < 4; k++) {
    nrt_tensor_view views[3] = {view_1d(o, NRT_INT32, 4, 1), view_1d(a, NRT_INT32, 4, 1),
                                view_1d(b, NRT_INT32, 4, 1)};
    nrt_op op = make_op(codes[k], NRT_INT32, 1, 3, views);
    CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_ARITHMETIC);
    CHECK(strstr(nrt_last_error(), "ZeroDivisionError") != NULL);
  }
  nrt_free(a);
  nrt_free(b);
  nrt_free(o);
}

static int64_t ref_lshift(nrt_dtype t, int64_t a, int64_t b, int width) {
  int64_t count = wrap_to(t == NRT_UINT8 ? NRT_INT8 : t, b); /* read as signed */
  if (count < 0 || count >= width) return 0;
  return wrap_to(t, (int64_t)((uint64_t)a << count));
}

static int64_t ref_rshift(nrt_dtype t, int64_t a, int64_t b, int width) {
  int64_t count = wrap_to(t == NRT_UINT8 ? NRT_INT8 : t, b);
  int max = width - (t != NRT_UINT8);
  if (count < 0 || count >= max) count = max;
  return count >= 64 ? (a < 0 ? -1 : 0) : a >> count;
}

static void test_shifts_past_the_width(void) {
  const nrt_dtype types[] = {NRT_UINT8, NRT_INT8, NRT_INT32, NRT_INT64};
  const int widths[] = {8, 8, 32, 64};
  const int64_t av[] = {1, -1, 100, -100, 3, 5, 77, -77}, bv[] = {0, 3, 7, 8, 63, 64, -1, 200};
  for (size_t k = 0; k < 4; k++) {
    nrt_dtype t = types[k];
    size_t size = nrt_dtype_size(t);
    void *a = dev_alloc(8 * size), *b = dev_alloc(8 * size), *o = dev_alloc(8 * size);
    for (int i = 0; i < 8; i++) {
      store_int(t, host(a), i, wrap_to(t, av[i]));
      store_int(t, host(b), i, wrap_to(t, bv[i]));
    }
    for (int left = 0; left < 2; left++) {
      nrt_tensor_view views[3] = {view_1d(o, t, 8, 1), view_1d(a, t, 8, 1), view_1d(b, t, 8, 1)};
      nrt_op op = make_op(left ? NRT_OP_LSHIFT : NRT_OP_RSHIFT, t, 1, 3, views);
      CHECK_OK(nrt_op_execute(&op));
      for (int i = 0; i < 8; i++) {
        int64_t x = wrap_to(t, av[i]), s = wrap_to(t, bv[i]);
        int64_t want = left ? ref_lshift(t, x, s, widths[k]) : ref_rshift(t, x, s, widths[k]);
        CHECK(load_int(t, host(o), i) == want);
      }
    }
    nrt_free(a);
    nrt_free(b);
    nrt_free(o);
  }
}

static void test_integer_pow(void) {
  const int64_t av[] = {2, -1, 1, 0, -1, 3, -3, 7}, bv[] = {-1, -3, -2, -1, -4, 0, 5, 30};
  void *a = dev_alloc(64), *b = dev_alloc(64), *o = dev_alloc(64);
  memcpy(host(a), av, sizeof av);
  memcpy(host(b), bv, sizeof bv);
  nrt_tensor_view views[3] = {view_1d(o, NRT_INT64, 8, 1), view_1d(a, NRT_INT64, 8, 1),
                              view_1d(b, NRT_INT64, 8, 1)};
  nrt_op op = make_op(NRT_OP_POW, NRT_INT64, 1, 3, views);
  CHECK_OK(nrt_op_execute(&op));
  const int64_t want[] = {0, -1, 1, 0, 1, 1, -243, 0};
  uint64_t p = 1;
  for (int i = 0; i < 30; i++) p *= 7; /* 7^30 wraps */
  int64_t *got = host(o);
  for (int i = 0; i < 7; i++) CHECK(got[i] == want[i]);
  CHECK(got[7] == (int64_t)p);
  nrt_free(a);
  nrt_free(b);
  nrt_free(o);
}

/* ---- float kernels ------------------------------------------------------- */

typedef float (*float_ref)(float);

/* A unary float32 op over n values: contiguous and strided (the two code
 * paths of the loop), and large enough to split across threads; compared
 * bitwise with the scalar twin (NaN with NaN). */
static void check_float_unary(nrt_op_code code, float_ref ref, int64_t n) {
  float *values = malloc((size_t)n * sizeof *values);
  for (int64_t i = 0; i < n; i++)
    values[i] = i < (int64_t)(sizeof edge_values / sizeof edge_values[0]) ? edge_values[i]
                                                                           : (float)random_normalish();
  void *a = dev_alloc(2 * n * 4), *o = dev_alloc(2 * n * 4);
  for (int strided = 0; strided < 2; strided++) {
    int64_t step = strided ? 2 : 1;
    for (int64_t i = 0; i < n; i++) ((float *)host(a))[i * step] = values[i];
    nrt_tensor_view views[2] = {view_1d(o, NRT_FLOAT32, n, step), view_1d(a, NRT_FLOAT32, n, step)};
    nrt_op op = make_op(code, NRT_FLOAT32, 1, 2, views);
    CHECK_OK(nrt_op_execute(&op));
    for (int64_t i = 0; i < n; i++) {
      float got = ((float *)host(o))[i * step], want = ref(values[i]);
      if (!(got == want || (isnan(got) && isnan(want)))) {
        fprintf(stderr, "  %s(%a) = %a, want %a\n", nrt_op_name(code), (double)values[i], (double)got,
                (double)want);
        CHECK(0);
        break;
      }
    }
  }
  free(values);
  nrt_free(a);
  nrt_free(o);
}

static float ref_exp(float x) { return rt_vm_expf(x); }
static float ref_sigmoid_vm(float x) { return rt_vm_sigmoidf(x); }
static float ref_relu(float x) { return x < 0 ? 0.0f : x; }
static float ref_hardswish(float x) {
  float t = x + 3.0f;
  t = t < 0 ? 0.0f : t > 6 ? 6.0f : t;
  return x * t / 6.0f;
}
static float ref_frac(float x) { return x - truncf(x); }

static void test_float_unary_matches_twins(void) {
  const int64_t n = 100003; /* above the parallel grain */
  check_float_unary(NRT_OP_EXP, ref_exp, n);
  check_float_unary(NRT_OP_LOG, vm_log, n);
  check_float_unary(NRT_OP_TANH, vm_tanh, n);
  check_float_unary(NRT_OP_ERF, vm_erf, n);
  check_float_unary(NRT_OP_SIGMOID, ref_sigmoid_vm, n);
  check_float_unary(NRT_OP_GELU, vm_gelu, n);
  check_float_unary(NRT_OP_GELU_TANH, vm_gelu_tanh, n);
  check_float_unary(NRT_OP_SILU, vm_silu, n);
  check_float_unary(NRT_OP_SQRT, sqrtf, n);
  check_float_unary(NRT_OP_RELU, ref_relu, n);
  check_float_unary(NRT_OP_HARDSWISH, ref_hardswish, n);
  check_float_unary(NRT_OP_FRAC, ref_frac, n);
}

/* The eager sigmoid's tame twin (pointwise_unary.c: contiguous blocks of
 * 512 whose every |x| <= 86): bitwise rt_vm_sigmoidf over every 2053rd bit
 * pattern of the domain (both signs, all tame blocks), its edges, and tame
 * blocks each holding one value outside it (86 plus an ulp, NaN, an
 * infinity, 1e30, -87.5, -100) - out of place and in place. */
/* Bit patterns 0, step, 2 * step, ... (sweep of them), each followed by
 * its negative: 2 * sweep floats written from values[0]; returns that count. */
static int64_t bit_sweep(float *values, int64_t sweep, int64_t step) {
  int64_t at = 0;
  for (int64_t i = 0; i < sweep; i++) {
    uint32_t u = (uint32_t)(i * step);
    memcpy(&values[at++], &u, 4);
    u |= 0x80000000u;
    memcpy(&values[at++], &u, 4);
  }
  return at;
}

/* Distance in ulp between two floats of the same sign (or zeros). */
static int64_t float_ulp_distance(float a, float b) {
  int32_t ia, ib;
  memcpy(&ia, &a, 4);
  memcpy(&ib, &b, 4);
  const int64_t ka = ia < 0 ? (int64_t)INT32_MIN - ia : ia, kb = ib < 0 ? (int64_t)INT32_MIN - ib : ib;
  return ka > kb ? ka - kb : kb - ka;
}

/* float32 xlog1py computes log1p without libm (pointwise_special.c): within
 * XLOG1PY_TWIN_ULP ulp of its twin, libm's double log1p, over a sweep of
 * the bit patterns of b (every scale, both signs: below -1 NaN), a dense
 * run near 0 and -1 (where 1 + b rounds), and edge cases (signed zeros,
 * -1, just above it, subnormals, huge values, infinities, NaN), with a
 * taken from 1, -0.5, 3e-39, 1e30, 0, -0, NaN and infinities; contiguous,
 * in place and strided, and with a broadcast a. */
static void test_xlog1py_within_ulp_of_twin(void) {
  const int64_t step = 65537, sweep = (int64_t)(0xffffffffu / step / 2) + 1;
  const float edges[] = {0.0f, -0.0f, -1.0f, -0.99999994f, -0.5f, 1e-45f, -1e-45f, 1.1754944e-38f,
                         0x1p-24f, -0x1p-24f, 0x1p-25f, 0x1.000002p-24f, 1.0f, 2.0f, 0x1p24f, 0x1p25f,
                         3e38f, INFINITY, -INFINITY, NAN, -1.0000001f, -2.0f};
  const float as[] = {1.0f, -0.5f, 3e-39f, 1e30f, 0.0f, -0.0f, NAN, INFINITY, -INFINITY, 7.25f};
  const int64_t ne = (int64_t)(sizeof edges / sizeof edges[0]), na = (int64_t)(sizeof as / sizeof as[0]);
  const int64_t near = 20000, n = 2 * sweep + ne + 2 * near;
  void *a = dev_alloc((size_t)n * 2 * 4), *b = dev_alloc((size_t)n * 2 * 4);
  void *o = dev_alloc((size_t)n * 2 * 4), *r = dev_alloc((size_t)n * 2 * 4);
  float *ha = host(a), *hb = host(b);
  int64_t at = bit_sweep(hb, sweep, step);
  for (int64_t i = 0; i < ne; i++) hb[at++] = edges[i];
  for (int64_t i = 0; i < near; i++) { /* around 0 (scaled by 2^-k) and just above -1 */
    hb[at++] = (float)random_normalish() * ldexpf(1.0f, -(int)(i % 30));
    hb[at++] = -1.0f + (float)(i + 1) * 0x1p-24f;
  }
  for (int64_t i = 0; i < n; i++)
    ha[i] = i % 5 == 0 ? as[(i / 5) % na] : (float)random_normalish() * (i % 3 == 0 ? 1e-3f : 10.0f);
  for (int64_t i = n; i < 2 * n; i++) ha[i] = ha[i - n], hb[i] = hb[i - n];
  float *saved = malloc((size_t)n * 2 * 4);
  memcpy(saved, ha, (size_t)n * 2 * 4);
  int64_t worst = 0;
  for (int layout = 0; layout < 4; layout++) { /* contiguous, in place, strided, broadcast a */
    const int64_t s = layout == 2 ? 2 : 1, sa = layout == 3 ? 0 : s;
    void *out = layout == 1 ? a : o;
    memcpy(ha, saved, (size_t)n * 2 * 4);
    memcpy(host(r), saved, (size_t)n * 2 * 4);
    nrt_tensor_view views[3] = {view_1d(out, NRT_FLOAT32, n, s), view_1d(a, NRT_FLOAT32, n, sa),
                                view_1d(b, NRT_FLOAT32, n, s)};
    nrt_op op = make_op(NRT_OP_XLOG1PY, NRT_FLOAT32, 1, 3, views);
    CHECK_OK(nrt_op_execute(&op));
    /* The kernel itself takes host addresses (nrt_op_execute translates). */
    op.operands[0] = view_1d(host(r), NRT_FLOAT32, n, s);
    op.operands[1] = view_1d(layout == 1 ? host(r) : (void *)saved, NRT_FLOAT32, n, sa);
    op.operands[2] = view_1d(hb, NRT_FLOAT32, n, s);
    CHECK_OK(rt_kernel_xlog1py_reference(&op));
    const float *got = host(out), *want = host(r);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
      const float g = got[i * s], w = want[i * s];
      const int64_t d = isnan(g) || isnan(w) ? (isnan(g) && isnan(w) ? 0 : 1 << 30) : float_ulp_distance(g, w);
      worst = d > worst ? d : worst;
      if (d > XLOG1PY_TWIN_ULP && bad++ < 3)
        fprintf(stderr, "  xlog1py layout %d: (%a, %a) -> %a, twin %a (%lld ulp)\n", layout,
                (double)saved[i * sa], (double)hb[i * s], (double)g, (double)w, (long long)d);
    }
    CHECK(bad == 0);
  }
  printf("  xlog1py: at most %lld ulp from the twin\n", (long long)worst);
  free(saved);
  nrt_free(a);
  nrt_free(b);
  nrt_free(o);
  nrt_free(r);
}

/* float32 sinc computes blocks of 512 values with |x| <= 2^18 in double
 * without libm (pointwise_special.c); its twin, libm sinf and a float
 * division, rounds twice. Within SINC_TWIN_ULP ulp of the twin over a
 * sweep of the bit patterns up to the bound, integers and half-integers
 * (where pi x lands near a multiple of pi / 2), zeros and subnormals, with
 * blocks holding one wild value (NaN, an infinity, just above the bound,
 * 1e30: such a block takes the twin), contiguous, in place and strided. */
static void test_sinc_tame_blocks_within_ulp_of_twin(void) {
  const uint32_t top = 0x48800000u; /* 2^18 */
  const int64_t step = 4099, sweep = (int64_t)(top / step) + 1;
  const float edges[] = {0.0f, -0.0f, 0x1p18f, -0x1p18f, nextafterf(0x1p18f, 0.0f), 1e-45f, -1e-45f,
                         1.1754944e-38f, 0.5f, -0.5f, 1.0f, -1.0f, 1.5f, 3.0f, 0x1p-12f, 1e-20f, 131071.5f};
  const float wild[] = {NAN, INFINITY, -INFINITY, nextafterf(0x1p18f, 1e30f), 1e30f, -3e38f};
  const int64_t ne = (int64_t)(sizeof edges / sizeof edges[0]), nw = (int64_t)(sizeof wild / sizeof wild[0]);
  const int64_t n = 2 * sweep + ne + 512 * 40 + nw * 512 + 7;
  void *x = dev_alloc((size_t)n * 2 * 4), *o = dev_alloc((size_t)n * 2 * 4), *r = dev_alloc((size_t)n * 2 * 4);
  float *hx = host(x);
  int64_t at = bit_sweep(hx, sweep, step);
  for (int64_t i = 0; i < ne; i++) hx[at++] = edges[i];
  for (int64_t i = 0; at < n; i++, at++) /* integers, half-integers, quarter steps, up to 2^17 */
    hx[at] = (float)((int64_t)(next_random() % (1u << 19)) - (1 << 18)) * (i % 3 == 0 ? 0.5f : i % 3 == 1 ? 0.25f : 1.0f);
  for (int64_t i = 0; i < nw; i++) hx[n - 7 - nw * 512 + 100 + 512 * i] = wild[i];
  for (int64_t i = n; i < 2 * n; i++) hx[i] = hx[i - n];
  float *saved = malloc((size_t)n * 2 * 4);
  memcpy(saved, hx, (size_t)n * 2 * 4);
  for (int layout = 0; layout < 3; layout++) { /* contiguous, in place, strided */
    const int64_t s = layout == 2 ? 2 : 1, len = n;
    void *out = layout == 1 ? x : o;
    memcpy(hx, saved, (size_t)n * 2 * 4);
    memcpy(host(r), saved, (size_t)n * 2 * 4);
    nrt_tensor_view views[2] = {view_1d(out, NRT_FLOAT32, len, s), view_1d(x, NRT_FLOAT32, len, s)};
    nrt_op op = make_op(NRT_OP_SINC, NRT_FLOAT32, 1, 2, views);
    CHECK_OK(nrt_op_execute(&op));
    /* The kernel itself takes host addresses (nrt_op_execute translates). */
    op.operands[0] = view_1d(host(r), NRT_FLOAT32, len, s);
    op.operands[1] = view_1d(layout == 1 ? host(r) : (void *)saved, NRT_FLOAT32, len, s);
    CHECK_OK(rt_kernel_sinc_reference(&op));
    const float *got = host(out), *want = host(r);
    int64_t bad = 0, worst = 0;
    for (int64_t i = 0; i < len; i++) {
      const float g = got[i * s], w = want[i * s];
      const int64_t d = isnan(g) || isnan(w) ? (isnan(g) && isnan(w) ? 0 : 1 << 30) : float_ulp_distance(g, w);
      worst = d > worst ? d : worst;
      if (d > SINC_TWIN_ULP && bad++ < 3)
        fprintf(stderr, "  sinc layout %d: %a -> %a, twin %a (%lld ulp)\n", layout, (double)saved[i * s],
                (double)g, (double)w, (long long)d);
    }
    CHECK(bad == 0);
    /* the wild values themselves take the twin (their blocks do) */
    for (int64_t i = 0; i < nw && layout != 2; i++) {
      const int64_t k = n - 7 - nw * 512 + 100 + 512 * i;
      CHECK(memcmp(&got[k], &want[k], 4) == 0 || (isnan(got[k]) && isnan(want[k])));
    }
    if (layout == 0) printf("  sinc: at most %lld ulp from the twin\n", (long long)worst);
  }
  /* A value's result is its own, not its block's: contiguous from element
   * 100 on (blocks shifted), and strided, equal the contiguous run's bits. */
  memcpy(hx, saved, (size_t)n * 2 * 4);
  nrt_tensor_view whole[2] = {view_1d(o, NRT_FLOAT32, n, 1), view_1d(x, NRT_FLOAT32, n, 1)};
  nrt_op op = make_op(NRT_OP_SINC, NRT_FLOAT32, 1, 2, whole);
  CHECK_OK(nrt_op_execute(&op));
  memcpy(host(r), host(o), (size_t)n * 4);
  const float *cont = host(r), *got = host(o);
  nrt_tensor_view shifted[2] = {view_1d((char *)o + 400, NRT_FLOAT32, n - 100, 1),
                                view_1d((char *)x + 400, NRT_FLOAT32, n - 100, 1)};
  op = make_op(NRT_OP_SINC, NRT_FLOAT32, 1, 2, shifted);
  CHECK_OK(nrt_op_execute(&op));
  CHECK(memcmp(got + 100, cont + 100, (size_t)(n - 100) * 4) == 0);
  nrt_tensor_view strided[2] = {view_1d(o, NRT_FLOAT32, n, 2), view_1d(x, NRT_FLOAT32, n, 2)};
  op = make_op(NRT_OP_SINC, NRT_FLOAT32, 1, 2, strided);
  CHECK_OK(nrt_op_execute(&op));
  int64_t differ = 0;
  for (int64_t i = 0; i < n; i++) differ += memcmp(&got[2 * i], &cont[(2 * i) % n], 4) != 0;
  CHECK(differ == 0);
  free(saved);
  nrt_free(x);
  nrt_free(o);
  nrt_free(r);
}

/* float32 entr (-x log x) takes vmath's logarithm; its twin libm's logf.
 * Within ENTR_TWIN_ULP ulp over a sweep of the positive bit patterns
 * (subnormals to the largest float), NaN, infinities, zeros and negatives
 * bitwise, contiguous and strided. */
static void test_entr_within_ulp_of_twin(void) {
  const int64_t step = 1021, sweep = (int64_t)(0x7f800000u / step) + 1;
  const int64_t n = 2 * sweep + 8;
  void *x = dev_alloc((size_t)n * 2 * 4), *o = dev_alloc((size_t)n * 2 * 4), *r = dev_alloc((size_t)n * 2 * 4);
  float *hx = host(x);
  int64_t at = bit_sweep(hx, sweep, step);
  const float edges[] = {0.0f, -0.0f, 1.0f, NAN, INFINITY, -INFINITY, 1e-45f, 0x1.fffffep127f};
  for (int i = 0; i < 8; i++) hx[at++] = edges[i];
  for (int64_t i = n; i < 2 * n; i++) hx[i] = hx[i - n];
  for (int strided = 0; strided < 2; strided++) {
    const int64_t s = strided ? 2 : 1;
    nrt_tensor_view views[2] = {view_1d(o, NRT_FLOAT32, n, s), view_1d(x, NRT_FLOAT32, n, s)};
    nrt_op op = make_op(NRT_OP_ENTR, NRT_FLOAT32, 1, 2, views);
    CHECK_OK(nrt_op_execute(&op));
    op.operands[0] = view_1d(host(r), NRT_FLOAT32, n, s); /* the kernel takes host addresses */
    op.operands[1] = view_1d(hx, NRT_FLOAT32, n, s);
    CHECK_OK(rt_kernel_entr_reference(&op));
    const float *got = host(o), *want = host(r);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
      const float g = got[i * s], w = want[i * s], v = hx[i * s];
      const int exact = !(v > 0.0f) || v == INFINITY; /* NaN, zeros, negatives, infinity */
      const int64_t d = isnan(g) || isnan(w) ? (isnan(g) && isnan(w) ? 0 : 1 << 30)
                      : exact ? (memcmp(&g, &w, 4) == 0 ? 0 : 1 << 30) : float_ulp_distance(g, w);
      if (d > ENTR_TWIN_ULP && bad++ < 3)
        fprintf(stderr, "  entr strided=%d: %a -> %a, twin %a\n", strided, (double)v, (double)g, (double)w);
    }
    CHECK(bad == 0);
  }
  nrt_free(x);
  nrt_free(o);
  nrt_free(r);
}

static void test_sigmoid_tame_blocks_match_bitwise(void) {
  const uint32_t top = 0x42ac0000u; /* 86.0f */
  const int64_t step = 2053, sweep = (int64_t)(top / step) + 1;
  const float edges[] = {86.0f, -86.0f, nextafterf(86.0f, 0.0f), -nextafterf(86.0f, 0.0f), 9.2736185f,
                         -9.2736185f, 0.0f, -0.0f, 1e-45f, -1e-45f, 1.1754944e-38f, 0.5f, -0.5f, 1.0f};
  /* -87.5 and -100 have subnormal sigmoids, which the twin cannot give */
  const float wild[] = {nextafterf(86.0f, 100.0f), -nextafterf(86.0f, 100.0f), NAN, -INFINITY, 1e30f,
                        -87.5f, -100.0f};
  const int nw = (int)(sizeof wild / sizeof wild[0]);
  const int64_t ne = (int64_t)(sizeof edges / sizeof edges[0]), n = 2 * sweep + ne + nw * 512;
  float *values = malloc((size_t)n * sizeof *values);
  int64_t at = bit_sweep(values, sweep, step);
  for (int64_t i = 0; i < ne; i++) values[at++] = edges[i];
  while (at < n) values[at] = (float)((at % 1700) - 850) / 10.0f, at++;
  for (int i = 0; i < nw; i++) values[n - nw * 512 + 100 + 512 * i] = wild[i];
  void *a = dev_alloc(n * 4), *o = dev_alloc(n * 4);
  for (int inplace = 0; inplace < 2; inplace++) {
    void *dst = inplace ? a : o;
    memcpy(host(a), values, (size_t)n * 4);
    nrt_tensor_view views[2] = {view_1d(dst, NRT_FLOAT32, n, 1), view_1d(a, NRT_FLOAT32, n, 1)};
    nrt_op op = make_op(NRT_OP_SIGMOID, NRT_FLOAT32, 1, 2, views);
    CHECK_OK(nrt_op_execute(&op));
    for (int64_t i = 0; i < n; i++) {
      float got = ((float *)host(dst))[i], want = rt_vm_sigmoidf(values[i]);
      if (memcmp(&got, &want, 4)) {
        fprintf(stderr, "  sigmoid(%a) = %a, want %a (in place: %d)\n", (double)values[i], (double)got,
                (double)want, inplace);
        CHECK(0);
        break;
      }
    }
  }
  free(values);
  nrt_free(a);
  nrt_free(o);
}

/* The float32 GELU, SiLU and GLU kernels and bfloat16 GLU take tame twins
 * per block of 512 values (float32 GLU: 128) within a bound
 * (RT_UNARY_LOOP_TAME, RT_BINARY_LOOP_TAME): bitwise
 * the general expressions, over a sweep of the bit patterns up to just
 * past each bound and blocks holding one wild value (NaN, infinity, just
 * above the bound, subnormal results) each. */
static float glu_ref(float a, float b) { return a * rt_vm_sigmoidf(b); }
static float gelu_ref(float x) { return rt_vm_geluf(x); }
static float silu_ref(float x) { return rt_vm_siluf(x); }

static void check_tame_blocks(nrt_op_code code, nrt_dtype t, uint32_t top, float (*unary)(float)) {
  const int64_t step = 2053, sweep = (int64_t)(top / step) + 1;
  const float bound = rt_vm_float(top);
  const float edges[] = {bound, -bound, nextafterf(bound, 0.0f), -nextafterf(bound, 0.0f), 0.0f, -0.0f,
                         1e-45f, -1e-45f, 1.1754944e-38f, 0.5f, -0.5f, 1.0f, -1.0f, 3.0f, -3.0f};
  const float wild[] = {nextafterf(bound, 1e30f), -nextafterf(bound, 1e30f), NAN, -INFINITY, INFINITY,
                        1e30f, -87.5f, -100.0f, -13.5f};
  const int nw = (int)(sizeof wild / sizeof wild[0]);
  const int64_t ne = (int64_t)(sizeof edges / sizeof edges[0]), n = 2 * sweep + ne + nw * 512 + 7;
  float *values = malloc((size_t)n * sizeof *values);
  int64_t at = bit_sweep(values, sweep, step);
  for (int64_t i = 0; i < ne; i++) values[at++] = edges[i];
  while (at < n) values[at] = (float)((at % 1700) - 850) / 10.0f * (top < 0x42000000u ? 0.15f : 1.0f), at++;
  for (int i = 0; i < nw; i++) values[n - 7 - nw * 512 + 100 + 512 * i] = wild[i];
  const int binary = unary == NULL, size = t == NRT_BFLOAT16 ? 2 : 4;
  /* glu's a: values reversed, so that a and b differ */
  void *a = dev_alloc((size_t)n * 4), *b = dev_alloc((size_t)n * 4), *o = dev_alloc((size_t)n * 4);
  for (int64_t i = 0; i < n; i++) {
    float va = values[n - 1 - i], vb = values[i];
    if (size == 2) {
      ((rt_bfloat16 *)host(a))[i] = rt_bfloat16_from_float(va);
      ((rt_bfloat16 *)host(b))[i] = rt_bfloat16_from_float(vb);
    } else {
      ((float *)host(a))[i] = va;
      ((float *)host(b))[i] = vb;
    }
  }
  for (int inplace = 0; inplace < 2; inplace++) {
    void *dst = inplace ? b : o;
    nrt_tensor_view views[3] = {view_1d(dst, t, n, 1), view_1d(binary ? a : b, t, n, 1), view_1d(b, t, n, 1)};
    nrt_op op = make_op(code, t, 1, binary ? 3 : 2, views);
    CHECK_OK(nrt_op_execute(&op));
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
      float x = size == 2 ? rt_bfloat16_to_float(rt_bfloat16_from_float(values[i])) : values[i];
      float xa = size == 2 ? rt_bfloat16_to_float(rt_bfloat16_from_float(values[n - 1 - i])) : values[n - 1 - i];
      float want = binary ? glu_ref(xa, x) : unary(x);
      uint32_t got_bits, want_bits;
      if (size == 2) {
        got_bits = ((rt_bfloat16 *)host(dst))[i];
        want_bits = rt_bfloat16_from_float(want);
      } else {
        memcpy(&got_bits, (float *)host(dst) + i, 4);
        memcpy(&want_bits, &want, 4);
      }
      if (got_bits != want_bits && bad++ < 3)
        fprintf(stderr, "  %s(%a) = %#x, want %#x (in place: %d)\n", nrt_op_name(code), (double)x, got_bits,
                want_bits, inplace);
    }
    CHECK(bad == 0);
    if (inplace) break; /* b was overwritten */
  }
  free(values);
  nrt_free(a);
  nrt_free(b);
  nrt_free(o);
}

static void test_tame_blocks_match_bitwise(void) {
  check_tame_blocks(NRT_OP_GELU, NRT_FLOAT32, RT_VM_GELU_TAME_BITS, gelu_ref);
  check_tame_blocks(NRT_OP_SILU, NRT_FLOAT32, RT_VM_SILU_TAME_BITS, silu_ref);
  check_tame_blocks(NRT_OP_GLU, NRT_FLOAT32, RT_VM_SIGMOID_TAME_BITS, NULL);
  check_tame_blocks(NRT_OP_GLU, NRT_BFLOAT16, RT_VM_SIGMOID_TAME_BITS, NULL);
}

/* bfloat16 in and out: computed in float32, rounded once. */
static void test_bfloat16_computes_in_float32(void) {
  enum { N = 4097 };
  void *a = dev_alloc(N * 2), *b = dev_alloc(N * 2), *o = dev_alloc(N * 2);
  rt_bfloat16 *ha = host(a), *hb = host(b), *ho = host(o);
  for (int i = 0; i < N; i++) {
    ha[i] = rt_bfloat16_from_float((float)random_normalish());
    hb[i] = rt_bfloat16_from_float((float)random_normalish());
  }
  nrt_tensor_view views[3] = {view_1d(o, NRT_BFLOAT16, N, 1), view_1d(a, NRT_BFLOAT16, N, 1),
                              view_1d(b, NRT_BFLOAT16, N, 1)};
  nrt_op add = make_op(NRT_OP_ADD, NRT_BFLOAT16, 1, 3, views);
  set_scalar(&add, 0, 1.0);
  CHECK_OK(nrt_op_execute(&add));
  for (int i = 0; i < N; i++)
    CHECK(ho[i] == rt_bfloat16_from_float(rt_bfloat16_to_float(ha[i]) + rt_bfloat16_to_float(hb[i])));
  nrt_free(a);
  nrt_free(b);
  nrt_free(o);
}

static double decode16(uint16_t bits, nrt_dtype t) {
  return t == NRT_FLOAT16 ? rt_half_to_float(bits) : rt_bfloat16_to_float(bits);
}

/* v rounded to nearest, ties to even, in float16 or bfloat16: the nearer of
 * the two finite patterns that bracket |v| (found by bisection, since the
 * non-negative patterns are ordered like their values). Independent of the
 * runtime's conversions, and rounding once: a detour through float rounds
 * twice, which moves a few results of every table by one ulp. */
static double round16(double v, nrt_dtype t) {
  if (isnan(v) || isinf(v)) return v;
  const uint16_t inf = t == NRT_FLOAT16 ? 0x7c00 : 0x7f80;
  double a = fabs(v);
  uint16_t lo = 0, hi = inf; /* decode(lo) <= a < decode(hi) */
  while (hi - lo > 1) {
    uint16_t mid = (uint16_t)((lo + hi) / 2);
    if (decode16(mid, t) <= a) lo = mid;
    else hi = mid;
  }
  double below = decode16(lo, t);
  /* past the largest finite value, the next step up is where infinity starts */
  double above = hi == inf ? 2.0 * below - decode16((uint16_t)(lo - 1), t) : decode16(hi, t);
  double to_below = a - below, to_above = above - a; /* exact (Sterbenz) */
  int up = to_above < to_below || (to_above == to_below && (lo & 1));
  double r = up ? (hi == inf ? INFINITY : above) : below;
  return copysign(r, v);
}

/* exp and the GELU/SiLU family of float16/bfloat16 come from tables: every
 * one of the 2^16 inputs gives the double result rounded once to the type
 * (correctly rounded); an out= of float32 receives the 16-bit result
 * converted. */
static void check_table16(nrt_op_code code, double (*ref)(double)) {
  void *in = dev_alloc(2 << 16), *out16 = dev_alloc(2 << 16), *out32 = dev_alloc(4 << 16);
  for (uint32_t bits = 0; bits < (1u << 16); bits++) ((uint16_t *)host(in))[bits] = (uint16_t)bits;
  const nrt_dtype types[2] = {NRT_FLOAT16, NRT_BFLOAT16};
  for (int k = 0; k < 2; k++) {
    nrt_dtype t = types[k];
    for (int wide = 0; wide < 2; wide++) {
      nrt_tensor_view views[2] = {wide ? view_1d(out32, NRT_FLOAT32, 1 << 16, 1)
                                       : view_1d(out16, t, 1 << 16, 1),
                                  view_1d(in, t, 1 << 16, 1)};
      nrt_op op = make_op(code, t, 1, 2, views);
      CHECK_OK(nrt_op_execute(&op));
      int mismatches = 0;
      for (uint32_t bits = 0; bits < (1u << 16); bits++) {
        double x = t == NRT_FLOAT16 ? rt_half_to_float((uint16_t)bits) : rt_bfloat16_to_float((uint16_t)bits);
        float want = (float)round16(ref(x), t);
        uint16_t raw = ((uint16_t *)host(out16))[bits];
        float got = wide ? ((float *)host(out32))[bits]
                         : t == NRT_FLOAT16 ? rt_half_to_float(raw) : rt_bfloat16_to_float(raw);
        mismatches += !(got == want || (isnan(got) && isnan(want)));
      }
      if (mismatches) fprintf(stderr, "  %s %s: %d mismatches\n", nrt_op_name(code), nrt_dtype_name(t), mismatches);
      CHECK(mismatches == 0);
    }
  }
  nrt_free(in);
  nrt_free(out16);
  nrt_free(out32);
}

/* The four-per-step lookup against its one-by-one twin, bitwise: every
 * length up to 11 and a long odd one, at every start offset within a
 * 64-bit word, in place and not, and strided runs. */
static void test_lookup16_matches_twin(void) {
  enum { N = 4099 };
  static uint16_t table[1 << 16];
  for (uint32_t i = 0; i < (1u << 16); i++) table[i] = (uint16_t)(i * 2654435761u >> 13);
  uint16_t *in = malloc((N + 8) * 2 * sizeof *in), *got = malloc((N + 8) * 2 * sizeof *got),
           *want = malloc((N + 8) * 2 * sizeof *want);
  uint32_t state = 12345u;
  const int64_t lengths[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, N};
  int mismatches = 0;
  for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++)
    for (int offset = 0; offset < 4; offset++)
      for (int mode = 0; mode < 3; mode++) { /* 0 out of place, 1 in place, 2 strided */
        const int64_t n = lengths[li], step = mode == 2 ? 2 : 1;
        for (int64_t i = 0; i < (N + 8) * 2; i++) {
          state = state * 1664525u + 1013904223u;
          in[i] = (uint16_t)(state >> 16);
          got[i] = want[i] = (uint16_t)~in[i];
        }
        uint16_t *dst = mode == 1 ? in : got;
        if (mode == 1) memcpy(want, in, (N + 8) * 2 * sizeof *in);
        int64_t strides[2] = {2 * step, 2 * step};
        char *twin[2] = {(char *)(want + offset), (char *)(in + offset)};
        if (mode == 1) { /* the twin in place on a copy of the input */
          char *copy[2] = {(char *)(want + offset), (char *)(want + offset)};
          rt_lookup16_reference(table, copy, strides, n);
        } else {
          rt_lookup16_reference(table, twin, strides, n);
        }
        char *data[2] = {(char *)(dst + offset), (char *)(in + offset)};
        rt_lookup16(table, data, strides, n);
        mismatches += memcmp(dst, want, (N + 8) * 2 * sizeof *dst) != 0;
      }
  CHECK(mismatches == 0);
  free(in);
  free(got);
  free(want);
}

static void test_16_bit_tables_are_exact(void) {
  check_table16(NRT_OP_EXP, exp);
  check_table16(NRT_OP_GELU, ref_gelu);
  check_table16(NRT_OP_GELU_TANH, ref_gelu_tanh);
  check_table16(NRT_OP_SILU, ref_silu);
}

/* float16 floor division with a tensor divisor rounds every step to float16,
 * as PyTorch's CPU kernel does; with a single-value divisor it does not. */
static float round_half(float v) { return rt_half_to_float(rt_half_from_float(v)); }

static float ref_floor_divide_half_steps(float a, float b) {
  float quotient = round_half(a / b);
  float mod = fmodf(a, b);
  float whole = fabsf(quotient) == INFINITY && fabsf(a) != INFINITY ? a : round_half(a - mod);
  float div = round_half(whole / b);
  if (mod != 0 && (b < 0) != (mod < 0)) div = round_half(div - 1);
  float floordiv = floorf(div);
  if (round_half(div - floordiv) > 0.5f) floordiv = round_half(floordiv + 1);
  if (div == 0) floordiv = copysignf(0.0f, quotient);
  return b == 0 ? quotient : floordiv;
}

static void test_float16_floor_division_rounds_each_step(void) {
  enum { N = 2000 };
  void *a = dev_alloc(N * 2), *b = dev_alloc(N * 2), *o = dev_alloc(N * 2);
  rt_half *ha = host(a), *hb = host(b), *ho = host(o);
  for (int i = 0; i < N; i++) {
    ha[i] = rt_half_from_float((float)(100 * random_normalish()));
    hb[i] = rt_half_from_float((float)random_normalish());
  }
  nrt_tensor_view views[3] = {view_1d(o, NRT_FLOAT16, N, 1), view_1d(a, NRT_FLOAT16, N, 1),
                              view_1d(b, NRT_FLOAT16, N, 1)};
  nrt_op op = make_op(NRT_OP_DIV_FLOOR, NRT_FLOAT16, 1, 3, views);
  CHECK_OK(nrt_op_execute(&op));
  for (int i = 0; i < N; i++) {
    float want = ref_floor_divide_half_steps(rt_half_to_float(ha[i]), rt_half_to_float(hb[i]));
    CHECK(ho[i] == rt_half_from_float(want) || (isnan(want) && isnan(rt_half_to_float(ho[i]))));
  }
  nrt_free(a);
  nrt_free(b);
  nrt_free(o);
}

/* pow with an immediate exponent takes PyTorch's special cases. */
static void test_pow_immediate_exponents(void) {
  const float x[] = {4.0f, -0.0f, -INFINITY, 2.5f, -2.0f, 0.0f};
  const double exps[] = {2.0, 3.0, 0.5, -0.5, -1.0, -2.0, 1.7};
  void *a = dev_alloc(sizeof x), *o = dev_alloc(sizeof x);
  memcpy(host(a), x, sizeof x);
  for (size_t e = 0; e < sizeof exps / sizeof exps[0]; e++) {
    nrt_tensor_view views[3] = {view_1d(o, NRT_FLOAT32, 6, 1), view_1d(a, NRT_FLOAT32, 6, 1),
                                view_1d(NULL, NRT_FLOAT64, 6, 0)};
    nrt_op op = make_op(NRT_OP_POW, NRT_FLOAT32, 1, 3, views);
    op.immediate_mask = 1u << 2;
    op.immediates[2].is_float = 1;
    op.immediates[2].f = exps[e];
    CHECK_OK(nrt_op_execute(&op));
    for (int i = 0; i < 6; i++) {
      float v = x[i], want;
      switch ((int)(exps[e] * 2)) {
        case 4: want = v * v; break;
        case 6: want = v * v * v; break;
        case 1: want = sqrtf(v); break;
        case -1: want = 1.0f / sqrtf(v); break;
        case -2: want = 1.0f / v; break;
        case -4: want = 1.0f / (v * v); break;
        default: want = powf(v, (float)exps[e]); break;
      }
      float got = ((float *)host(o))[i];
      CHECK((got == want && signbit(got) == signbit(want)) || (isnan(got) && isnan(want)));
    }
  }
  nrt_free(a);
  nrt_free(o);
}

/* maximum/minimum propagate NaN, fmax/fmin drop it; clamp with a NaN bound
 * gives NaN and lets max win when min > max. */
static void test_nan_rules(void) {
  const float av[] = {NAN, 1.0f, 2.0f, NAN, 5.0f}, bv[] = {1.0f, NAN, 3.0f, NAN, 4.0f};
  void *a = dev_alloc(20), *b = dev_alloc(20), *c = dev_alloc(20), *o = dev_alloc(20);
  memcpy(host(a), av, sizeof av);
  memcpy(host(b), bv, sizeof bv);
  const nrt_op_code codes[] = {NRT_OP_MAXIMUM, NRT_OP_MINIMUM, NRT_OP_FMAX, NRT_OP_FMIN};
  for (int k = 0; k < 4; k++) {
    nrt_tensor_view views[3] = {view_1d(o, NRT_FLOAT32, 5, 1), view_1d(a, NRT_FLOAT32, 5, 1),
                                view_1d(b, NRT_FLOAT32, 5, 1)};
    nrt_op op = make_op(codes[k], NRT_FLOAT32, 1, 3, views);
    CHECK_OK(nrt_op_execute(&op));
    const float *got = host(o);
    int propagates = k < 2;
    CHECK(isnan(got[0]) == propagates && isnan(got[1]) == propagates && isnan(got[3]));
    CHECK(got[2] == (k % 2 == 0 ? 3.0f : 2.0f) && got[4] == (k % 2 == 0 ? 5.0f : 4.0f));
  }
  const float x[] = {NAN, 1.5f, 2.0f, 0.5f, 5.0f};
  const float lo[] = {0.0f, 0.0f, NAN, 3.0f, 0.0f}, hi[] = {1.0f, 1.0f, 1.0f, 2.0f, NAN};
  memcpy(host(a), x, sizeof x);
  memcpy(host(b), lo, sizeof lo);
  memcpy(host(c), hi, sizeof hi);
  nrt_tensor_view views[4] = {view_1d(o, NRT_FLOAT32, 5, 1), view_1d(a, NRT_FLOAT32, 5, 1),
                              view_1d(b, NRT_FLOAT32, 5, 1), view_1d(c, NRT_FLOAT32, 5, 1)};
  nrt_op clamp = make_op(NRT_OP_CLAMP, NRT_FLOAT32, 1, 4, views);
  CHECK_OK(nrt_op_execute(&clamp));
  const float *got = host(o);
  CHECK(isnan(got[0]) && got[1] == 1.0f && isnan(got[2]) && got[3] == 2.0f && isnan(got[4]));
  nrt_free(a);
  nrt_free(b);
  nrt_free(c);
  nrt_free(o);
}

/* float32/float64 nextafter steps the bits in a vectorised loop: bitwise
 * libm's nextafterf/nextafter (the twins) on every pair of edge values, both
 * operands contiguous and b broadcast. */
#define NEXTAFTER_EDGES(T, MIN, TRUE_MIN, MAX)                                                     \
  {0, -(T)0, (T)1, -(T)1, MIN, -(MIN), TRUE_MIN, -(TRUE_MIN), (MIN) - (TRUE_MIN), MAX, -(MAX),     \
   (T)INFINITY, -(T)INFINITY, (T)NAN, -(T)NAN, (T)0.1, (T)-3e-5}
#define CHECK_NEXTAFTER(T, DTYPE, TWIN, MIN, TRUE_MIN, MAX)                                          \
  do {                                                                                               \
    const T edges[] = NEXTAFTER_EDGES(T, MIN, TRUE_MIN, MAX);                                        \
    enum { E = sizeof edges / sizeof edges[0], N = E * E };                                          \
    void *a = dev_alloc(N * sizeof(T)), *b = dev_alloc(N * sizeof(T)), *o = dev_alloc(N * sizeof(T)); \
    T *ha = host(a), *hb = host(b);                                                                  \
    for (int i = 0; i < N; i++) ha[i] = edges[i / E], hb[i] = edges[i % E];                          \
    for (int broadcast = 0; broadcast < 2; broadcast++) {                                            \
      nrt_tensor_view views[3] = {view_1d(o, DTYPE, N, 1), view_1d(a, DTYPE, N, 1),                  \
                                  view_1d(b, DTYPE, N, broadcast ? 0 : 1)};                          \
      nrt_op op = make_op(NRT_OP_NEXTAFTER, DTYPE, 1, 3, views);                                     \
      CHECK_OK(nrt_op_execute(&op));                                                                 \
      const T *got = host(o);                                                                        \
      for (int i = 0; i < N; i++) {                                                                  \
        T want = TWIN(ha[i], broadcast ? hb[0] : hb[i]);                                             \
        if (memcmp(&got[i], &want, sizeof(T)) != 0 && !(isnan(got[i]) && isnan(want))) {           \
          fprintf(stderr, "  nextafter %s(%a, %a) = %a, want %a\n", nrt_dtype_name(DTYPE),          \
                  (double)ha[i], (double)(broadcast ? hb[0] : hb[i]), (double)got[i], (double)want);  \
          CHECK(0);                                                                                  \
          break;                                                                                     \
        }                                                                                            \
      }                                                                                              \
    }                                                                                                \
    nrt_free(a);                                                                                     \
    nrt_free(b);                                                                                     \
    nrt_free(o);                                                                                     \
  } while (0)

static void test_nextafter_matches_libm_bitwise(void) {
  CHECK_NEXTAFTER(float, NRT_FLOAT32, nextafterf, FLT_MIN, FLT_TRUE_MIN, FLT_MAX);
  CHECK_NEXTAFTER(double, NRT_FLOAT64, nextafter, DBL_MIN, DBL_TRUE_MIN, DBL_MAX);
}

/* float32/float64 frexp reads the exponent off the bits in a vectorised
 * loop: mantissa and exponent bitwise libm's frexpf/frexp (the twins) on the
 * edge values (zeros, subnormals, the normal range's ends, infinities, NaN)
 * and a spread of bit patterns, the operands contiguous (long enough for
 * the vector body) and strided. */
#define CHECK_FREXP(T, U, DTYPE, TWIN, MIN, TRUE_MIN, MAX)                                         \
  do {                                                                                             \
    const T edges[] = {0, -(T)0, (T)1, -(T)1, (T)0.5, (T)0.75, MIN, -(MIN), TRUE_MIN, -(TRUE_MIN), \
                       (MIN) - (TRUE_MIN), (T)3 * (TRUE_MIN), MAX, -(MAX), (T)INFINITY,           \
                       -(T)INFINITY, (T)NAN, -(T)NAN, (T)0.1, (T)-3e-5, (T)1e30};                   \
    enum { E = sizeof edges / sizeof edges[0], N = 4096 };                                         \
    void *x = dev_alloc(2 * N * sizeof(T)), *m = dev_alloc(2 * N * sizeof(T));                     \
    void *e = dev_alloc(2 * N * sizeof(int32_t));                                                  \
    T *hx = host(x);                                                                               \
    uint64_t state = 0x9e3779b97f4a7c15ull;                                                        \
    for (int i = 0; i < 2 * N; i++) {                                                              \
      state = state * 6364136223846793005ull + 1442695040888963407ull;                             \
      const U bits = sizeof(U) == 8 ? (U)state : (U)(state >> 32);                                 \
      memcpy(&hx[i], &bits, sizeof(T));                                                            \
      if (i % 7 == 0) hx[i] = edges[(i / 7) % E];                                                  \
    }                                                                                              \
    for (int stride = 1; stride <= 2; stride++) {                                                  \
      nrt_tensor_view views[3] = {view_1d(m, DTYPE, N, stride), view_1d(e, NRT_INT32, N, stride),  \
                                  view_1d(x, DTYPE, N, stride)};                                   \
      nrt_op op = make_op(NRT_OP_FREXP, DTYPE, 2, 3, views);                                       \
      CHECK_OK(nrt_op_execute(&op));                                                               \
      const T *gm = host(m);                                                                       \
      const int32_t *ge = host(e);                                                                 \
      for (int i = 0; i < N; i++) {                                                                \
        const T v = hx[i * stride];                                                                \
        int want_e = 0;                                                                            \
        const T want_m = TWIN(v, &want_e);                                                         \
        if (memcmp(&gm[i * stride], &want_m, sizeof(T)) != 0 || ge[i * stride] != want_e) {       \
          fprintf(stderr, "  frexp %s(%a) = (%a, %d), want (%a, %d)\n", nrt_dtype_name(DTYPE),    \
                  (double)v, (double)gm[i * stride], (int)ge[i * stride], (double)want_m, want_e); \
          CHECK(0);                                                                                \
          break;                                                                                   \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
    nrt_free(x);                                                                                   \
    nrt_free(m);                                                                                   \
    nrt_free(e);                                                                                   \
  } while (0)

static void test_frexp_matches_libm_bitwise(void) {
  CHECK_FREXP(float, uint32_t, NRT_FLOAT32, frexpf, FLT_MIN, FLT_TRUE_MIN, FLT_MAX);
  CHECK_FREXP(double, uint64_t, NRT_FLOAT64, frexp, DBL_MIN, DBL_TRUE_MIN, DBL_MAX);
}

/* float32 logaddexp and logaddexp2 (vectorised exp and log) against double
 * libm within 4 ulp of the larger term over a spread of differences, and
 * their special values:
 * equal infinities give themselves, NaN propagates, -inf is the identity. */
static void test_logaddexp_float32(void) {
  enum { N = 4096 };
  void *a = dev_alloc(N * 4), *b = dev_alloc(N * 4), *o = dev_alloc(N * 4);
  float *ha = host(a), *hb = host(b);
  for (int i = 0; i < N; i++) {
    ha[i] = (float)(random_normalish() * (i % 4 == 0 ? 30.0 : 3.0));
    hb[i] = i % 7 == 0 ? ha[i] : (float)(random_normalish() * (i % 3 == 0 ? 1e-4 : 5.0));
  }
  /* ... and results that are subnormal, or zero (gaps beyond 149) */
  const float special_a[] = {INFINITY, -INFINITY, -INFINITY, NAN, 1.0f, INFINITY, 0.0f, -0.0f, 0.0f, -300.0f, 0.0f};
  const float special_b[] = {INFINITY, -INFINITY, 2.0f, 1.0f, NAN, -INFINITY, -0.0f, 0.0f, -140.5f, 0.0f, -1e30f};
  for (int k = 0; k < 11; k++) ha[k] = special_a[k], hb[k] = special_b[k];
  for (int base2 = 0; base2 < 2; base2++) {
    nrt_tensor_view views[3] = {view_1d(o, NRT_FLOAT32, N, 1), view_1d(a, NRT_FLOAT32, N, 1),
                                view_1d(b, NRT_FLOAT32, N, 1)};
    nrt_op op = make_op(base2 ? NRT_OP_LOGADDEXP2 : NRT_OP_LOGADDEXP, NRT_FLOAT32, 1, 3, views);
    CHECK_OK(nrt_op_execute(&op));
    const float *got = host(o);
    double worst = 0;
    for (int i = 0; i < N; i++) {
      /* The gap is a float, |a - b| rounded, as the CPU's kernel has it. */
      double x = ha[i], y = hb[i], m = x > y ? x : y, gap = fabsf(ha[i] - hb[i]);
      double ref = isnan(x) || isnan(y) ? NAN
                   : x == y && isinf(x)  ? x
                   : base2               ? m + log1p(exp2(-gap)) / log(2.0)
                                         : m + log1p(exp(-gap));
      /* In ulps of the larger term of m + log1p(...): the sum cancels where
       * a is near -b, in float as on the CPU. */
      double scale = fmax(fabs(m), fabs(ref - m));
      double err = isnan(ref) || isinf(ref) ? ulp_error(got[i], ref) : fabs(got[i] - ref) / ulp_of(scale);
      if (err > worst) worst = err;
      if (err > 4) fprintf(stderr, "  logaddexp%s(%a, %a) = %a, want %a\n", base2 ? "2" : "", x, y, got[i], ref);
    }
    CHECK(worst <= 4);
  }
  nrt_free(a);
  nrt_free(b);
  nrt_free(o);
}

/* float32 glu_backward (vectorised, e^-b in double rounded once) against
 * its twin with libm's expf, as the CPU computes it: bitwise the twin's in
 * all but a few elements (where e^-b lies near a rounding boundary of the
 * two exps, s = 1 / (1 + e) may move 2 ulp), grad_a within 3 ulp, grad_b =
 * g a s (1 - s) within 2 ulp of g a where 1 - s cancels. b contiguous and strided. */
static float ref_glu_sigmoid(float b) { return 1.0f / (1.0f + expf(-b)); }

static void test_glu_backward_float32(void) {
  enum { N = 4099 };
  static float bv[N];
  void *ga = dev_alloc(N * 4), *gb = dev_alloc(N * 4), *go = dev_alloc(N * 4), *a = dev_alloc(N * 4),
       *b = dev_alloc(2 * N * 4);
  float *hgo = host(go), *ha = host(a), *hb = host(b);
  for (int i = 0; i < N; i++) {
    hgo[i] = (float)random_normalish();
    ha[i] = (float)random_normalish() * 10.0f;
    bv[i] = (float)(random_normalish() * (i % 3 == 0 ? 30.0 : 4.0));
  }
  const float special[] = {INFINITY, -INFINITY, NAN, 0.0f, -0.0f, 100.0f, -100.0f, 88.0f, -88.0f, 17.0f};
  for (int k = 0; k < 10; k++) bv[k] = special[k];
  for (int step = 1; step <= 2; step++) { /* b contiguous, then strided */
    for (int i = 0; i < N; i++) hb[i * step] = bv[i];
    nrt_tensor_view views[5] = {view_1d(ga, NRT_FLOAT32, N, 1), view_1d(gb, NRT_FLOAT32, N, 1),
                                view_1d(go, NRT_FLOAT32, N, 1), view_1d(a, NRT_FLOAT32, N, 1),
                                view_1d(b, NRT_FLOAT32, N, step)};
    nrt_op op = make_op(NRT_OP_GLU_BACKWARD, NRT_FLOAT32, 2, 5, views);
    CHECK_OK(nrt_op_execute(&op));
    const float *got_a = host(ga), *got_b = host(gb);
    int differ = 0, bad = 0;
    for (int i = 0; i < N; i++) {
      float s = ref_glu_sigmoid(bv[i]);
      float want_a = hgo[i] * s, want_b = hgo[i] * ha[i] * s * (1.0f - s);
      if (memcmp(&got_a[i], &want_a, 4) != 0 || memcmp(&got_b[i], &want_b, 4) != 0) differ++;
      if (isnan(want_a) || isnan(want_b)) {
        bad += !(isnan(got_a[i]) && isnan(got_b[i]));
        continue;
      }
      double ulp_ga = 0x1p-23 * fabs((double)hgo[i] * ha[i]);
      if (ulp_error(got_a[i], want_a) > 3 || fabs((double)got_b[i] - want_b) > 2 * (ulp_ga + 0x1p-23 * fabs(want_b))) {
        fprintf(stderr, "  glu_backward b=%a: (%a, %a), want (%a, %a)\n", bv[i], got_a[i], got_b[i], want_a, want_b);
        bad++;
      }
    }
    CHECK(bad == 0);
    if (differ > 4) fprintf(stderr, "  glu_backward: %d of %d differ from the twin's bits\n", differ, N);
    CHECK(differ <= 4);
  }
  nrt_free(ga);
  nrt_free(gb);
  nrt_free(go);
  nrt_free(a);
  nrt_free(b);
}

/* where moves values unchanged: float16 NaN payloads survive, a bool
 * condition and an immediate branch broadcast over a transposed tensor. */
static void test_where_moves_bits(void) {
  enum { R = 3, C = 5 };
  void *cond = dev_alloc(R * C), *a = dev_alloc(R * C * 2), *o = dev_alloc(R * C * 2);
  uint8_t *hc = host(cond);
  uint16_t *ha = host(a), *ho = host(o);
  for (int i = 0; i < R * C; i++) {
    hc[i] = (uint8_t)(i % 3 != 0);
    ha[i] = (uint16_t)(0x7e01 + i); /* NaN payloads */
  }
  /* out[r][c] = cond[r][c] ? a[c][r] (transposed) : 2.5 */
  const int64_t shape[2] = {R, C}, row_major[2] = {C, 1}, transposed[2] = {1, R}, zero[2] = {0, 0};
  nrt_tensor_view views[4] = {view_nd(o, NRT_FLOAT16, 2, shape, row_major),
                              view_nd(cond, NRT_BOOL, 2, shape, row_major),
                              view_nd(a, NRT_FLOAT16, 2, shape, transposed),
                              view_nd(NULL, NRT_FLOAT64, 2, shape, zero)};
  nrt_op op = make_op(NRT_OP_WHERE, NRT_FLOAT16, 1, 4, views);
  op.immediate_mask = 1u << 3;
  op.immediates[3].is_float = 1;
  op.immediates[3].f = 2.5;
  CHECK_OK(nrt_op_execute(&op));
  for (int r = 0; r < R; r++)
    for (int c = 0; c < C; c++) {
      uint16_t want = hc[r * C + c] ? ha[c * R + r] : rt_half_from_float(2.5f);
      CHECK(ho[r * C + c] == want);
    }
  nrt_free(cond);
  nrt_free(a);
  nrt_free(o);
}

/* Comparisons write bool; an int32 output receives them converted. */
static void test_comparison_outputs(void) {
  const double av[] = {1.0, NAN, -0.0, 2.0}, bv[] = {1.0, NAN, 0.0, 3.0};
  void *a = dev_alloc(32), *b = dev_alloc(32), *o = dev_alloc(16);
  memcpy(host(a), av, sizeof av);
  memcpy(host(b), bv, sizeof bv);
  nrt_tensor_view views[3] = {view_1d(o, NRT_INT32, 4, 1), view_1d(a, NRT_FLOAT64, 4, 1),
                              view_1d(b, NRT_FLOAT64, 4, 1)};
  nrt_op eq = make_op(NRT_OP_EQ, NRT_FLOAT64, 1, 3, views);
  CHECK_OK(nrt_op_execute(&eq));
  const int32_t *got = host(o);
  CHECK(got[0] == 1 && got[1] == 0 && got[2] == 1 && got[3] == 0);
  nrt_op lt = make_op(NRT_OP_LT, NRT_FLOAT64, 1, 3, views);
  CHECK_OK(nrt_op_execute(&lt));
  CHECK(got[0] == 0 && got[1] == 0 && got[2] == 0 && got[3] == 1);
  nrt_free(a);
  nrt_free(b);
  nrt_free(o);
}

/* log_sigmoid writes two outputs: the result and e^-|x| for the backward. */
static void test_log_sigmoid_buffer(void) {
  const double xv[] = {-2.0, 0.0, 3.0, -40.0};
  void *x = dev_alloc(32), *out = dev_alloc(32), *buf = dev_alloc(32);
  memcpy(host(x), xv, sizeof xv);
  nrt_tensor_view views[3] = {view_1d(out, NRT_FLOAT64, 4, 1), view_1d(buf, NRT_FLOAT64, 4, 1),
                              view_1d(x, NRT_FLOAT64, 4, 1)};
  nrt_op op = make_op(NRT_OP_LOG_SIGMOID, NRT_FLOAT64, 2, 3, views);
  CHECK_OK(nrt_op_execute(&op));
  for (int i = 0; i < 4; i++) {
    double z = exp(-fabs(xv[i]));
    CHECK(((double *)host(buf))[i] == z);
    CHECK(fabs(((double *)host(out))[i] - (fmin(xv[i], 0.0) - log1p(z))) <= 1e-15);
  }
  nrt_free(x);
  nrt_free(out);
  nrt_free(buf);
}

static void test_scalar_attribute_ops(void) {
  const float xv[] = {NAN, INFINITY, -INFINITY, 1.234f, -5.0f, 0.5f};
  void *x = dev_alloc(sizeof xv), *o = dev_alloc(sizeof xv);
  memcpy(host(x), xv, sizeof xv);
  nrt_tensor_view views[2] = {view_1d(o, NRT_FLOAT32, 6, 1), view_1d(x, NRT_FLOAT32, 6, 1)};
  const float *got = host(o);

  nrt_op nan_to_num = make_op(NRT_OP_NAN_TO_NUM, NRT_FLOAT32, 1, 2, views);
  set_scalar(&nan_to_num, 0, 7.0);
  set_scalar(&nan_to_num, 1, 1e300); /* beyond float: becomes inf, as static_cast gives */
  set_scalar(&nan_to_num, 2, -8.0);
  CHECK_OK(nrt_op_execute(&nan_to_num));
  CHECK(got[0] == 7.0f && got[1] == INFINITY && got[2] == -8.0f && got[3] == 1.234f);

  nrt_op hardtanh = make_op(NRT_OP_HARDTANH, NRT_FLOAT32, 1, 2, views);
  set_scalar(&hardtanh, 0, -1.0);
  set_scalar(&hardtanh, 1, 1.0);
  CHECK_OK(nrt_op_execute(&hardtanh));
  CHECK(isnan(got[0]) && got[1] == 1.0f && got[2] == -1.0f && got[3] == 1.0f && got[5] == 0.5f);
  set_scalar(&hardtanh, 1, NAN); /* a NaN bound gives NaN, as clamp does */
  CHECK_OK(nrt_op_execute(&hardtanh));
  for (int i = 0; i < 6; i++) CHECK(isnan(got[i]));

  nrt_op round = make_op(NRT_OP_ROUND_DECIMALS, NRT_FLOAT32, 1, 2, views);
  set_int_scalar(&round, 0, 2);
  CHECK_OK(nrt_op_execute(&round));
  CHECK(got[3] == nearbyintf(1.234f * 100.0f) / 100.0f && got[4] == -5.0f);

  nrt_op threshold = make_op(NRT_OP_THRESHOLD, NRT_FLOAT32, 1, 2, views);
  set_scalar(&threshold, 0, 0.5);
  set_scalar(&threshold, 1, -3.0);
  CHECK_OK(nrt_op_execute(&threshold));
  CHECK(isnan(got[0]) && got[1] == INFINITY && got[2] == -3.0f && got[3] == 1.234f && got[5] == -3.0f);
  nrt_free(x);
  nrt_free(o);
}

/* relu on float16/bfloat16 runs on the bits; its twin converts through
 * float32. Every one of the 65,536 bit patterns, contiguous and with
 * stride 3 (input) and 2 (output), must give the same bits. */
static void test_relu16_matches_twin_bitwise(void) {
  const int64_t n = 1 << 16;
  const nrt_dtype types[2] = {NRT_BFLOAT16, NRT_FLOAT16};
  void *x = dev_alloc((size_t)n * 2 * 3), *o = dev_alloc((size_t)n * 2 * 2),
       *r = dev_alloc((size_t)n * 2 * 2);
  for (int k = 0; k < 2; k++)
    for (int strided = 0; strided < 2; strided++) {
      int64_t si = strided ? 3 : 1, so = strided ? 2 : 1;
      for (int64_t i = 0; i < n; i++) ((uint16_t *)host(x))[i * si] = (uint16_t)i;
      nrt_tensor_view views[2] = {view_1d(o, types[k], n, so), view_1d(x, types[k], n, si)};
      nrt_op op = make_op(NRT_OP_RELU, types[k], 1, 2, views);
      CHECK_OK(nrt_op_execute(&op));
      /* The kernel itself takes host addresses (nrt_op_execute translates). */
      op.operands[0] = view_1d(host(r), types[k], n, so);
      op.operands[1] = view_1d(host(x), types[k], n, si);
      CHECK_OK(rt_kernel_relu_reference(&op));
      int64_t bad = 0;
      for (int64_t i = 0; i < n; i++) {
        uint16_t got = ((uint16_t *)host(o))[i * so], want = ((uint16_t *)host(r))[i * so];
        if (got != want && bad++ < 3)
          fprintf(stderr, "  relu %s strided=%d: 0x%04x -> 0x%04x, twin 0x%04x\n",
                  types[k] == NRT_BFLOAT16 ? "bf16" : "f16", strided, (unsigned)i, got, want);
      }
      CHECK(bad == 0);
      /* -0.0 is kept, the most negative finite value becomes +0. */
      CHECK(((uint16_t *)host(o))[0x8000 * so] == 0x8000u);
      CHECK(((uint16_t *)host(o))[0xfbff * so] == 0u);
    }
  nrt_free(x);
  nrt_free(o);
  nrt_free(r);
}

/* threshold_backward with threshold 0 on float16/bfloat16 runs on the bits;
 * its twin converts in registers. Every pattern as the gradient against
 * every pattern as x (a permutation), contiguous and strided. */
static void test_threshold_backward0_16_matches_twin_bitwise(void) {
  const int64_t n = 1 << 16;
  const nrt_dtype types[2] = {NRT_BFLOAT16, NRT_FLOAT16};
  void *g = dev_alloc((size_t)n * 2 * 3), *x = dev_alloc((size_t)n * 2 * 3),
       *o = dev_alloc((size_t)n * 2 * 2), *r = dev_alloc((size_t)n * 2 * 2);
  for (int k = 0; k < 2; k++)
    for (int strided = 0; strided < 2; strided++) {
      int64_t si = strided ? 3 : 1, so = strided ? 2 : 1;
      for (int64_t i = 0; i < n; i++) {
        ((uint16_t *)host(g))[i * si] = (uint16_t)i;
        ((uint16_t *)host(x))[i * si] = (uint16_t)((uint64_t)i * 40503u + 12345u);
      }
      nrt_tensor_view views[3] = {view_1d(o, types[k], n, so), view_1d(g, types[k], n, si),
                                  view_1d(x, types[k], n, si)};
      nrt_op op = make_op(NRT_OP_THRESHOLD_BACKWARD, types[k], 1, 3, views);
      set_scalar(&op, 0, 0.0);
      CHECK_OK(nrt_op_execute(&op));
      op.operands[0] = view_1d(host(r), types[k], n, so);
      op.operands[1] = view_1d(host(g), types[k], n, si);
      op.operands[2] = view_1d(host(x), types[k], n, si);
      CHECK_OK(rt_kernel_threshold_backward_reference(&op));
      int64_t bad = 0;
      for (int64_t i = 0; i < n; i++) {
        uint16_t got = ((uint16_t *)host(o))[i * so], want = ((uint16_t *)host(r))[i * so];
        if (got != want && bad++ < 3)
          fprintf(stderr, "  threshold_backward %s strided=%d: g 0x%04x x 0x%04x -> 0x%04x, twin 0x%04x\n",
                  types[k] == NRT_BFLOAT16 ? "bf16" : "f16", strided,
                  ((uint16_t *)host(g))[i * si], ((uint16_t *)host(x))[i * si], got, want);
      }
      CHECK(bad == 0);
    }
  nrt_free(g);
  nrt_free(x);
  nrt_free(o);
  nrt_free(r);
}

/* bits16.c: abs, neg, sign, hardtanh, threshold, copysign, maximum and
 * minimum on float16/bfloat16 patterns must give their converting twins'
 * bits. Unary ops over all 65,536 patterns (contiguous, and strided for the
 * scalar-free ones), with bounds around zero, rounding boundaries, float16
 * subnormals, the ends of each range, infinities (clamp_min / clamp_max
 * become hardtanh with one infinite bound) and NaN (which keeps the
 * converting path); binary ops over every a against a permuted sweep of b
 * and against special values. */
typedef struct bits16_case {
  nrt_op_code code;
  int num_scalars, int_scalars;
  double s0, s1;
} bits16_case;

static int64_t bits16_compare(const char *what, nrt_dtype t, const uint16_t *got, const uint16_t *want,
                              const uint16_t *x, int64_t n, int64_t step) {
  int64_t bad = 0;
  for (int64_t i = 0; i < n; i++)
    if (got[i * step] != want[i * step] && bad++ < 3)
      fprintf(stderr, "  %s %s: x 0x%04x -> 0x%04x, twin 0x%04x\n", what,
              t == NRT_BFLOAT16 ? "bf16" : "f16", (unsigned)x[i], got[i * step], want[i * step]);
  return bad;
}

static void test_bits16_ops_match_twins(void) {
  const int64_t n = 1 << 16;
  const double bounds[] = {0.0, -0.0, 0.1, -0.1, 1.0, -1.0, 6.0, 2.5, 1e-6, -3e-8, 5.9604644775390625e-08,
                           1e-40, 65504.0, 65520.0, -1e30, 3.3895313892515355e38, 1e39, INFINITY,
                           -INFINITY, NAN};
  const int nb = (int)(sizeof bounds / sizeof bounds[0]);
  bits16_case cases[400];
  int nc = 0;
  const nrt_op_code plain[] = {NRT_OP_ABS, NRT_OP_NEG, NRT_OP_SIGN};
  for (int k = 0; k < 3; k++) cases[nc++] = (bits16_case){plain[k], 0, 0, 0, 0};
  for (int i = 0; i < nb; i++)
    for (int j = 0; j < nb; j += 3) {
      cases[nc++] = (bits16_case){NRT_OP_HARDTANH, 2, 0, bounds[i], bounds[(i + j + 1) % nb]};
      cases[nc++] = (bits16_case){NRT_OP_THRESHOLD, 2, 0, bounds[i], bounds[(i + j + 2) % nb]};
    }
  for (int i = 0; i < nb; i++) { /* clamp_min / clamp_max with a number */
    cases[nc++] = (bits16_case){NRT_OP_HARDTANH, 2, 0, bounds[i], INFINITY};
    cases[nc++] = (bits16_case){NRT_OP_HARDTANH, 2, 0, -INFINITY, bounds[i]};
  }
  cases[nc++] = (bits16_case){NRT_OP_HARDTANH, 2, 1, -1, 1}; /* integer scalars */
  cases[nc++] = (bits16_case){NRT_OP_THRESHOLD, 2, 1, 3, -7};
  const nrt_dtype types[2] = {NRT_BFLOAT16, NRT_FLOAT16};
  uint16_t *x = malloc((size_t)n * 2 * 2);
  void *xd = dev_alloc((size_t)n * 2 * 2), *o = dev_alloc((size_t)n * 2 * 2), *r = dev_alloc((size_t)n * 2 * 2);
  for (int k = 0; k < 2; k++)
    for (int c = 0; c < nc; c++)
      for (int strided = 0; strided < 1 + (cases[c].num_scalars == 0); strided++) {
        const bits16_case *bc = &cases[c];
        const int64_t step = strided ? 2 : 1;
        for (int64_t i = 0; i < n; i++) x[i] = (uint16_t)i, ((uint16_t *)host(xd))[i * step] = (uint16_t)i;
        nrt_tensor_view views[2] = {view_1d(o, types[k], n, step), view_1d(xd, types[k], n, step)};
        nrt_op op = make_op(bc->code, types[k], 1, 2, views);
        for (int s = 0; s < bc->num_scalars; s++) {
          const double v = s ? bc->s1 : bc->s0;
          if (bc->int_scalars) set_int_scalar(&op, s, (int64_t)v);
          else set_scalar(&op, s, v);
        }
        CHECK_OK(nrt_op_execute(&op));
        op.operands[0] = view_1d(host(r), types[k], n, step);
        op.operands[1] = view_1d(host(xd), types[k], n, step);
        const nrt_status s = bc->code == NRT_OP_ABS        ? rt_kernel_abs_reference(&op)
                             : bc->code == NRT_OP_NEG      ? rt_kernel_neg_reference(&op)
                             : bc->code == NRT_OP_SIGN     ? rt_kernel_sign_reference(&op)
                             : bc->code == NRT_OP_HARDTANH ? rt_kernel_hardtanh_reference(&op)
                                                           : rt_kernel_threshold_reference(&op);
        CHECK_OK(s);
        char what[96];
        snprintf(what, sizeof what, "%s(%g, %g)%s", nrt_op_name(bc->code), bc->s0, bc->s1,
                 strided ? " strided" : "");
        CHECK(bits16_compare(what, types[k], host(o), host(r), x, n, step) == 0);
      }
  /* Binary: every a against b permuted (each b once), then against specials. */
  const uint16_t specials[] = {0x0000, 0x8000, 0x7f80, 0xff80, 0x7c00, 0xfc00, 0x7fc0, 0xffc1, 0x7e00,
                               0xfe01, 0x7c01, 0x0001, 0x8001, 0x3f80, 0xbc00, 0x03ff, 0x7bff, 0xfbff};
  const int ns = (int)(sizeof specials / sizeof specials[0]);
  void *b = dev_alloc((size_t)n * 2);
  const nrt_op_code binary[] = {NRT_OP_COPYSIGN, NRT_OP_MAXIMUM, NRT_OP_MINIMUM};
  for (int k = 0; k < 2; k++)
    for (int sweep = 0; sweep < 2; sweep++)
      for (int c = 0; c < 3; c++) {
        for (int64_t i = 0; i < n; i++) {
          ((uint16_t *)host(xd))[i] = x[i] = (uint16_t)i;
          ((uint16_t *)host(b))[i] = sweep ? specials[i % ns] : (uint16_t)(i * 40503 + 12345);
        }
        nrt_tensor_view views[3] = {view_1d(o, types[k], n, 1), view_1d(xd, types[k], n, 1),
                                    view_1d(b, types[k], n, 1)};
        nrt_op op = make_op(binary[c], types[k], 1, 3, views);
        CHECK_OK(nrt_op_execute(&op));
        op.operands[0] = view_1d(host(r), types[k], n, 1);
        op.operands[1] = view_1d(host(xd), types[k], n, 1);
        op.operands[2] = view_1d(host(b), types[k], n, 1);
        CHECK_OK(c == 0 ? rt_kernel_copysign_reference(&op)
                 : c == 1 ? rt_kernel_maximum_reference(&op)
                          : rt_kernel_minimum_reference(&op));
        CHECK(bits16_compare(nrt_op_name(binary[c]), types[k], host(o), host(r), x, n, 1) == 0);
      }
  free(x);
  nrt_free(b);
  nrt_free(xd);
  nrt_free(o);
  nrt_free(r);
}

/* half_convert.c's blocks against the C conversions at this ISA level:
 * every float16 read (a signalling NaN may come back quiet), and written
 * from float32: every float16 value, the midpoints between neighbours and
 * one float32 either side of each (rounding to nearest even), a sweep of
 * all float32 exponents (overflow, float16 subnormals, float32 subnormals)
 * and NaNs with every kind of payload. Blocks of every length up to 40 and
 * at odd offsets reach the instructions' tails. */
static void test_half_blocks_match_c(void) {
  const int64_t n = 1 << 16;
  uint16_t *h = malloc((size_t)n * 2), *got16 = malloc((size_t)(n + 64) * 2);
  float *got = malloc((size_t)n * 4);
  for (int64_t i = 0; i < n; i++) h[i] = (uint16_t)i;
  rt_half_block_to_float(got, h, n);
  int64_t bad = 0;
  for (int64_t i = 0; i < n; i++) {
    uint32_t g = rt_f32_bits(got[i]), w = rt_f32_bits(rt_half_to_float(h[i]));
    if (g != w && !(isnan(got[i]) && (g | 0x400000u) == (w | 0x400000u)) && bad++ < 3)
      fprintf(stderr, "  to_float 0x%04x: 0x%08x, C 0x%08x\n", (unsigned)h[i], g, w);
  }
  CHECK(bad == 0);
  const int64_t m = 4 * n + (1 << 20);
  float *f = malloc((size_t)m * 4);
  int64_t k = 0;
  for (int64_t i = 0; i < n; i++) {
    const float v = rt_half_to_float((uint16_t)i), next = rt_half_to_float((uint16_t)(i + 1));
    f[k++] = v;
    const float mid = (float)(((double)v + (double)next) / 2); /* exact: 11 bits and one more */
    f[k++] = mid;
    f[k++] = nextafterf(mid, INFINITY);
    f[k++] = nextafterf(mid, -INFINITY);
  }
  for (uint32_t i = 0; i < (1u << 20); i++) f[k++] = rt_f32_from_bits(i * 4099u); /* spreads over all 2^32 */
  CHECK(k == m);
  for (int64_t start = 0; start < m; start += n) {
    const int64_t len = m - start < n ? m - start : n;
    rt_half_block_from_float(got16, f + start, len);
    for (int64_t i = 0; i < len; i++) {
      uint16_t w = rt_half_from_float(f[start + i]);
      if (got16[i] != w && bad++ < 3)
        fprintf(stderr, "  from_float 0x%08x: 0x%04x, C 0x%04x\n", rt_f32_bits(f[start + i]), got16[i], w);
    }
  }
  CHECK(bad == 0);
  for (int64_t len = 0; len <= 40; len++) /* tails, odd offsets, nothing written past len */
    for (int64_t off = 0; off < 3; off++) {
      for (int64_t i = 0; i < len + 8; i++) got16[i] = 0xabcd;
      rt_half_block_from_float(got16, f + 3 * n + off * 7, len);
      for (int64_t i = 0; i < len; i++) CHECK(got16[i] == rt_half_from_float(f[3 * n + off * 7 + i]));
      for (int64_t i = len; i < len + 8; i++) CHECK(got16[i] == 0xabcd);
      rt_half_block_to_float(got, h + 1000 + off, len);
      for (int64_t i = 0; i < len; i++) CHECK(got[i] == rt_half_to_float(h[1000 + off + i]));
    }
  free(h);
  free(got16);
  free(got);
  free(f);
}

/* add, mul and div of float16/bfloat16 with a number (an immediate) run
 * their 16-bit loops with the number in float32 (rt_run_pointwise16_numbers);
 * the twins take the general path. Every one of the 65,536 patterns with
 * numbers that bfloat16 and float16 cannot hold (0.1, 1/3, a float32
 * subnormal, 1e38), infinities, NaN, both zeros and integers; the number
 * as float64 or int64 (mul's and div's exact number) or already in the
 * 16-bit type (add's), on the right and on the left, contiguous, strided
 * and in place: the same bits. */
static int is_nan16(nrt_dtype t, uint16_t v) {
  return (v & 0x7fffu) > (t == NRT_BFLOAT16 ? 0x7f80u : 0x7c00u);
}

/* any_nan: a NaN result matches any NaN (NaN + NaN: which operand's NaN,
 * and sign, comes out is the compiler's choice of operand order, in the
 * twin as here; mul picks a's, add does not, as its float32 loop does not). */
static void run_number_twin(nrt_op *op, nrt_status (*twin)(const nrt_op *), void *r, int number,
                            int64_t n, int64_t step, const uint16_t *x, const char *what, int any_nan) {
  const nrt_dtype t = op->compute_dtype;
  CHECK_OK(nrt_op_execute(op));
  nrt_op local = *op; /* the kernel takes host addresses and materialised immediates */
  uint64_t value[2];
  rt_convert_scalar(local.operands[number].dtype, &local.immediates[number], value);
  local.operands[number].data = value;
  local.operands[0] = view_1d(host(r), t, n, step);
  local.operands[3 - number] = view_1d(host(op->operands[3 - number].data), t, n, step);
  if (op->operands[0].data == op->operands[3 - number].data) { /* in place: the twin from x again */
    for (int64_t i = 0; i < n; i++) ((uint16_t *)host(r))[i * step] = x[i];
    local.operands[3 - number] = local.operands[0];
  }
  CHECK_OK(twin(&local));
  const uint16_t *got = host(op->operands[0].data), *want = host(r);
  int64_t bad = 0;
  for (int64_t i = 0; i < n; i++) {
    const uint16_t g = got[i * step], w = want[i * step];
    if (g == w || (any_nan && is_nan16(t, g) && is_nan16(t, w))) continue;
    if (bad++ < 3)
      fprintf(stderr, "  %s %s: x 0x%04x -> 0x%04x, twin 0x%04x\n", what, t == NRT_BFLOAT16 ? "bf16" : "f16",
              (unsigned)x[i], g, w);
  }
  CHECK(bad == 0);
  if (local.operands[0].data == local.operands[3 - number].data) return;
  /* The 16-bit loops ran, not the twin's. */
  rt_loop_capture fast = {0}, general = {0};
  rt_loop_capture_set(&fast);
  CHECK_OK(op->code == NRT_OP_ADD ? rt_kernel_add(&local) : op->code == NRT_OP_MUL ? rt_kernel_mul(&local)
                                                                                     : rt_kernel_div(&local));
  rt_loop_capture_set(&general);
  CHECK_OK(twin(&local));
  rt_loop_capture_set(NULL);
  CHECK(fast.calls == 1 && general.calls == 1);
  CHECK(fast.loop != general.loop);
}

static void test_numbers16_match_twins(void) {
  const int64_t n = 1 << 16;
  const double numbers[] = {2.0, 0.1, 1.0 / 3.0, -2.5, 1e-40, 1.401298464324817e-45, 1e38, -3e38,
                            65504.0, 70000.0, INFINITY, -INFINITY, NAN, -NAN, 0.0, -0.0};
  const int64_t integers[] = {2, -3, 7, 0, (int64_t)1 << 40};
  const int nn = (int)(sizeof numbers / sizeof numbers[0]), ni = (int)(sizeof integers / sizeof integers[0]);
  const nrt_op_code codes[3] = {NRT_OP_ADD, NRT_OP_MUL, NRT_OP_DIV};
  nrt_status (*twins[3])(const nrt_op *) = {rt_kernel_add_reference, rt_kernel_mul_reference,
                                            rt_kernel_div_reference};
  const nrt_dtype types[2] = {NRT_BFLOAT16, NRT_FLOAT16};
  uint16_t *x = malloc((size_t)n * 2);
  void *xd = dev_alloc((size_t)n * 2 * 2), *o = dev_alloc((size_t)n * 2 * 2), *r = dev_alloc((size_t)n * 2 * 2);
  for (int64_t i = 0; i < n; i++) x[i] = (uint16_t)i;
  for (int k = 0; k < 2; k++)
    for (int c = 0; c < 3; c++)
      for (int v = 0; v < nn + ni; v++)
        for (int number = 1; number <= 2; number++)
          for (int layout = 0; layout < 3; layout++) { /* contiguous, stride 2, in place */
            /* the number's dtype: float64 or int64, and for add also the 16-bit type */
            const int is_float = v < nn;
            for (int in_type = 0; in_type < 1 + (codes[c] == NRT_OP_ADD); in_type++) {
              const int64_t step = layout == 1 ? 2 : 1;
              for (int64_t i = 0; i < n; i++) ((uint16_t *)host(xd))[i * step] = x[i];
              void *out = layout == 2 ? xd : o;
              const nrt_dtype nt = in_type ? types[k] : is_float ? NRT_FLOAT64 : NRT_INT64;
              nrt_tensor_view views[3];
              views[0] = view_1d(out, types[k], n, step);
              views[3 - number] = view_1d(xd, types[k], n, step);
              views[number] = view_1d(NULL, nt, n, 0);
              nrt_op op = make_op(codes[c], types[k], 1, 3, views);
              op.immediate_mask = 1u << number;
              op.immediates[number].is_float = is_float;
              if (is_float) op.immediates[number].f = numbers[v];
              else op.immediates[number].i = integers[v - nn];
              if (codes[c] == NRT_OP_ADD) set_scalar(&op, 0, number == 1 ? -1.0 : 1.0); /* 2 - x, x + 2 */
              char what[96];
              snprintf(what, sizeof what, "%s(%s%g, %s, layout %d)", nrt_op_name(codes[c]),
                       number == 1 ? "left " : "", is_float ? numbers[v] : (double)integers[v - nn],
                       nrt_dtype_name(nt), layout);
              run_number_twin(&op, twins[c], r, number, n, step, x, what,
                              codes[c] == NRT_OP_ADD && is_float && isnan(numbers[v]));
            }
          }
  free(x);
  nrt_free(xd);
  nrt_free(o);
  nrt_free(r);
}

/* float16 and bfloat16 add, mul and div run in one pass with the conversion
 * instructions where the CPU has them (one_pass16.c: float16 at the AVX2
 * and AVX-512 levels, bfloat16 with AVX512-BF16), by the C loops elsewhere:
 * against the general path, bitwise, for every pattern against another
 * (two tensors, and swapped), a tensor with one 16-bit value broadcast on
 * either side, and every length up to 40 at odd offsets (the masked and
 * buffered tails) with nothing written past the end, tensor with tensor and
 * with a float64 number on either side. add's NaN meeting NaN may be either
 * operand's (see run_number_twin). */
typedef struct pass16_case {
  nrt_op_code code;
  nrt_status (*fast)(const nrt_op *);
  nrt_status (*twin)(const nrt_op *);
} pass16_case;

/* Runs op (output 0 unset) into got and its twin into want; the op's first
 * len elements must agree, the 8 after them stay 0xabcd. */
static void check_pass16(const pass16_case *c, nrt_op op, uint16_t *got, uint16_t *want, int64_t len,
                         const char *what) {
  const nrt_dtype t = op.compute_dtype;
  for (int64_t i = 0; i < len + 8; i++) got[i] = want[i] = 0xabcd;
  op.operands[0] = view_1d(got, t, len, 1);
  CHECK_OK(c->fast(&op));
  op.operands[0] = view_1d(want, t, len, 1);
  CHECK_OK(c->twin(&op));
  int64_t bad = 0;
  for (int64_t i = 0; i < len + 8; i++) {
    const int both_nan = i < len && is_nan16(t, got[i]) && is_nan16(t, want[i]);
    if (got[i] == want[i] || (c->code == NRT_OP_ADD && both_nan)) continue;
    if (bad++ < 3)
      fprintf(stderr, "  %s %s %s [%lld]: 0x%04x, twin 0x%04x\n", nrt_op_name(c->code), nrt_dtype_name(t), what,
              (long long)i, got[i], want[i]);
  }
  CHECK(bad == 0);
}

static void test_one_pass16_matches_twins(void) {
  const int64_t n = 1 << 16;
  uint16_t *x = malloc((size_t)n * 2), *y = malloc((size_t)n * 2);
  uint16_t *got = malloc((size_t)(n + 8) * 2), *want = malloc((size_t)(n + 8) * 2);
  for (int64_t i = 0; i < n; i++) {
    x[i] = (uint16_t)i;
    y[i] = (uint16_t)((uint32_t)i * 40503u + 12345u); /* a bijection: every pattern meets another */
  }
  const pass16_case cases[3] = {{NRT_OP_ADD, rt_kernel_add, rt_kernel_add_reference},
                                {NRT_OP_MUL, rt_kernel_mul, rt_kernel_mul_reference},
                                {NRT_OP_DIV, rt_kernel_div, rt_kernel_div_reference}};
  /* the one pass runs at exactly the levels with the instructions */
  char *data[3] = {(char *)got, (char *)x, (char *)y};
  int64_t strides[3] = {2, 2, 2};
  const nrt_isa isa = rt_isa();
  CHECK(rt_one_pass16(NRT_FLOAT16, RT_PASS16_MUL, RT_PASS16_HALF, RT_PASS16_HALF, data, strides, 5, 0.0f) ==
        (isa == NRT_ISA_AVX512 || isa == NRT_ISA_AVX2));
  CHECK(rt_one_pass16(NRT_BFLOAT16, RT_PASS16_MUL, RT_PASS16_HALF, RT_PASS16_HALF, data, strides, 5, 0.0f) ==
        rt_isa_avx512_bf16());
  strides[2] = 4;
  CHECK(rt_one_pass16(NRT_FLOAT16, RT_PASS16_MUL, RT_PASS16_HALF, RT_PASS16_HALF, data, strides, 5, 0.0f) == 0);
  /* 2, 1/3, -5, the smallest subnormal, -0, the largest finite, +-inf, NaNs */
  const uint16_t values[2][10] = {{0x4000, 0x3555, 0xc500, 0x0001, 0x8000, 0x7bff, 0x7c00, 0xfc00, 0x7e00, 0xfd01},
                                  {0x4000, 0x3eab, 0xc0a0, 0x0001, 0x8000, 0x7f7f, 0x7f80, 0xff80, 0x7fc0, 0xff81}};
  const nrt_dtype types[2] = {NRT_FLOAT16, NRT_BFLOAT16};
  double number = 0.1;
  for (int ti = 0; ti < 2; ti++)
    for (int k = 0; k < 3; k++) {
      const pass16_case *c = &cases[k];
      const nrt_dtype t = types[ti];
      nrt_tensor_view views[3] = {view_1d(NULL, t, n, 1), view_1d(x, t, n, 1), view_1d(y, t, n, 1)};
      nrt_op op = make_op(c->code, t, 1, 3, views);
      if (c->code == NRT_OP_ADD) set_scalar(&op, 0, -1.5); /* alpha */
      check_pass16(c, op, got, want, n, "x, y");
      op.operands[1] = views[2], op.operands[2] = views[1];
      check_pass16(c, op, got, want, n, "y, x");
      for (int v = 0; v < 10; v++)
        for (int side = 1; side <= 2; side++) {
          op.operands[1] = views[1], op.operands[2] = views[1];
          op.operands[side] = view_1d((void *)&values[ti][v], t, n, 0);
          check_pass16(c, op, got, want, n, side == 1 ? "value, x" : "x, value");
        }
      for (int64_t len = 1; len <= 40; len++)
        for (int64_t off = 0; off < 3; off++)
          for (int form = 0; form < 3; form++) { /* x, y; x, number; number, x */
            nrt_op s = op;
            s.operands[1] = view_1d(x + 1000 + off * 7, t, len, 1);
            s.operands[2] = view_1d(y + 3 + off, t, len, 1);
            if (form) {
              s.operands[form] = view_1d(&number, NRT_FLOAT64, len, 0);
              s.immediate_mask = 1u << form;
            }
            check_pass16(c, s, got, want, len, form == 0 ? "tail x, y" : form == 1 ? "tail x, 0.1" : "tail 0.1, x");
          }
    }
  free(x);
  free(y);
  free(got);
  free(want);
}

static void test_unsupported_dtypes_fail(void) {
  void *a = dev_alloc(16), *o = dev_alloc(16);
  nrt_tensor_view views[3] = {view_1d(o, NRT_FLOAT32, 4, 1), view_1d(a, NRT_FLOAT32, 4, 1),
                              view_1d(a, NRT_FLOAT32, 4, 1)};
  nrt_op bitwise = make_op(NRT_OP_BITWISE_AND, NRT_FLOAT32, 1, 3, views);
  CHECK_STATUS(nrt_op_execute(&bitwise), NRT_ERROR_UNSUPPORTED);
  CHECK(strstr(nrt_last_error(), "bitwise_and") != NULL);
  nrt_op div = make_op(NRT_OP_DIV, NRT_INT32, 1, 3, views);
  CHECK_STATUS(nrt_op_execute(&div), NRT_ERROR_UNSUPPORTED);
  nrt_op gelu = make_op(NRT_OP_GELU, NRT_INT64, 1, 2, views);
  CHECK_STATUS(nrt_op_execute(&gelu), NRT_ERROR_UNSUPPORTED);
  nrt_op where = make_op(NRT_OP_WHERE, NRT_FLOAT32, 1, 3, views); /* one operand short */
  CHECK_STATUS(nrt_op_execute(&where), NRT_ERROR_INVALID_ARGUMENT);
  nrt_free(a);
  nrt_free(o);
}

int main(void) {
  RUN(test_vmath_within_stated_ulp);
  RUN(test_vmath_special_values);
  RUN(test_expf_tame_matches_bitwise);
  RUN(test_integer_arithmetic_wraps);
  RUN(test_add_alpha_wraps);
  RUN(test_gcd_lcm_match_euclid);
  RUN(test_gcd_lcm_match_twin_bitwise);
  RUN(test_integer_division_by_zero_fails);
  RUN(test_shifts_past_the_width);
  RUN(test_integer_pow);
  RUN(test_float_unary_matches_twins);
  RUN(test_sigmoid_tame_blocks_match_bitwise);
  RUN(test_tame_blocks_match_bitwise);
  RUN(test_bfloat16_computes_in_float32);
  RUN(test_lookup16_matches_twin);
  RUN(test_relu16_matches_twin_bitwise);
  RUN(test_bits16_ops_match_twins);
  RUN(test_half_blocks_match_c);
  RUN(test_numbers16_match_twins);
  RUN(test_one_pass16_matches_twins);
  RUN(test_threshold_backward0_16_matches_twin_bitwise);
  RUN(test_16_bit_tables_are_exact);
  RUN(test_float16_floor_division_rounds_each_step);
  RUN(test_pow_immediate_exponents);
  RUN(test_nan_rules);
  RUN(test_nextafter_matches_libm_bitwise);
  RUN(test_frexp_matches_libm_bitwise);
  RUN(test_logaddexp_float32);
  RUN(test_logaddexp_tame_blocks_match_twin);
  RUN(test_sinc_tame_blocks_within_ulp_of_twin);
  RUN(test_xlog1py_within_ulp_of_twin);
  RUN(test_entr_within_ulp_of_twin);
  RUN(test_glu_backward_float32);
  RUN(test_where_moves_bits);
  RUN(test_comparison_outputs);
  RUN(test_log_sigmoid_buffer);
  RUN(test_scalar_attribute_ops);
  RUN(test_unsupported_dtypes_fail);
  return CHECK_MAIN_RESULT();
}
