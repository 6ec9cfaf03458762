/* The FILL and COPY kernels, through nrt_op_execute and nrt_launch.
 *
 * Conversions are checked against a reference twin written here: plain
 * per-element code stating PyTorch's rules directly (float16 and bfloat16
 * rounding by rint on the exact quantum, not by bit tricks), so the
 * kernels' fast paths are compared with something independent of them.
 *
 * PyTorch rules (c10 static_cast on x86):
 *   to bool        v != 0 (NaN is true)
 *   float -> int   truncation; uint8 through int64, int8/int16 through
 *                  int32; out of range or NaN gives x86's "integer
 *                  indefinite" (INT32_MIN / INT64_MIN) before narrowing
 *   int -> int     two's complement wrap
 *   -> half/bf16   from float: double and int64 round to float first
 *   same dtype     a bitwise copy
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

/* ---- views, buffers, running ops ------------------------------------ */

static nrt_tensor_view make_view(void *data, nrt_dtype dtype, int32_t ndim, const int64_t *shape,
                                 const int64_t *strides) {
  nrt_tensor_view v;
  memset(&v, 0, sizeof v);
  v.data = data;
  v.dtype = dtype;
  v.ndim = ndim;
  for (int32_t d = 0; d < ndim && d < NRT_MAX_DIMS; d++) {
    v.shape[d] = shape[d];
    v.strides[d] = strides[d];
  }
  return v;
}

static nrt_tensor_view view_1d(void *data, nrt_dtype dtype, int64_t n, int64_t stride) {
  return make_view(data, dtype, 1, &n, &stride);
}

static nrt_op fill_op(nrt_tensor_view dst, int is_float, double f, int64_t i) {
  nrt_op op;
  memset(&op, 0, sizeof op);
  op.code = NRT_OP_FILL;
  op.num_operands = 1;
  op.num_scalars = 1;
  op.operands[0] = dst;
  op.scalars[0].is_float = is_float;
  op.scalars[0].f = f;
  op.scalars[0].i = i;
  return op;
}

static nrt_op copy_op(nrt_tensor_view dst, nrt_tensor_view src) {
  nrt_op op;
  memset(&op, 0, sizeof op);
  op.code = NRT_OP_COPY;
  op.num_operands = 2;
  op.operands[0] = dst;
  op.operands[1] = src;
  return op;
}

/* Runs an op synchronously (via_stream 0) or through the default stream
 * of device 0 and a synchronize (via_stream 1). */
static nrt_status run(const nrt_op *op, int via_stream) {
  if (!via_stream) return nrt_op_execute(op);
  nrt_stream_t s;
  nrt_status st = nrt_stream_get_default(0, &s);
  if (st) return st;
  if ((st = nrt_launch(s, op))) return st;
  return nrt_stream_synchronize(s);
}

static void *dev_alloc(size_t bytes) {
  void *p = NULL;
  CHECK_OK(nrt_malloc(0, bytes, &p));
  return p;
}

static void *host_of(void *dev) { return nrt_device_to_host(dev); }

/* ---- the reference twin --------------------------------------------- */

typedef struct ref_value {
  int is_float;
  double f; /* exact value of a floating element */
  int64_t i;
} ref_value;

static double ref_half_value(uint16_t h) {
  double sign = (h & 0x8000) ? -1.0 : 1.0;
  int exp = (h >> 10) & 31, mant = h & 1023;
  if (exp == 31) return mant ? copysign(NAN, sign) : sign * INFINITY;
  if (exp == 0) return sign * ldexp(mant, -24);
  return sign * ldexp(1024 + mant, exp - 25);
}

static double ref_bf16_value(uint16_t b) {
  double sign = (b & 0x8000) ? -1.0 : 1.0;
  int exp = (b >> 7) & 255, mant = b & 127;
  if (exp == 255) return mant ? copysign(NAN, sign) : sign * INFINITY;
  if (exp == 0) return sign * ldexp(mant, -133);
  return sign * ldexp(128 + mant, exp - 134);
}

/* Nearest value with `mant_bits` fraction bits, exponent >= min_exp (below
 * it: subnormal spacing), ties to even: the spacing q is a power of two, so
 * a / q is exact and rint (round to nearest even) does the rounding. */
static double ref_round(double a, int mant_bits, int min_exp) {
  if (a == 0) return 0;
  int e;
  frexp(a, &e);
  int exp = e - 1 < min_exp ? min_exp : e - 1;
  double q = ldexp(1.0, exp - mant_bits);
  return rint(a / q) * q;
}

/* Encodes an exactly representable magnitude. */
static uint16_t ref_encode(double r, int mant_bits, int min_exp, int bias) {
  if (r == 0) return 0;
  int e;
  frexp(r, &e);
  int exp = e - 1;
  if (exp < min_exp) return (uint16_t)(r / ldexp(1.0, min_exp - mant_bits));
  return (uint16_t)(((exp + bias) << mant_bits) | (int)((r / ldexp(1.0, exp) - 1) * (1 << mant_bits)));
}

static uint16_t ref_half_from_float(float x) {
  uint16_t sign = signbit(x) ? 0x8000 : 0;
  if (isnan(x)) return sign | 0x7e00;
  double r = ref_round(fabs((double)x), 10, -14);
  if (r > 65504.0) return sign | 0x7c00;
  return sign | ref_encode(r, 10, -14, 15);
}

static uint16_t ref_bf16_from_float(float x) {
  if (isnan(x)) return 0x7fc0;
  uint16_t sign = signbit(x) ? 0x8000 : 0;
  double r = ref_round(fabs((double)x), 7, -126);
  if (r > ldexp(255.0, 127 - 7)) return sign | 0x7f80;
  return sign | ref_encode(r, 7, -126, 127);
}

static int64_t ref_trunc_i64(double d) {
  if (isnan(d) || d >= ldexp(1.0, 63) || d < -ldexp(1.0, 63)) return INT64_MIN;
  return (int64_t)trunc(d);
}

static int32_t ref_trunc_i32(double d) {
  if (isnan(d) || d >= ldexp(1.0, 31) || trunc(d) < -ldexp(1.0, 31)) return INT32_MIN;
  return (int32_t)trunc(d);
}

static ref_value ref_read(nrt_dtype t, const void *p) {
  ref_value v = {0, 0, 0};
  switch (t) {
    case NRT_BOOL: v.i = *(const uint8_t *)p != 0; break;
    case NRT_UINT8: v.i = *(const uint8_t *)p; break;
    case NRT_INT8: v.i = *(const int8_t *)p; break;
    case NRT_INT16: v.i = *(const int16_t *)p; break;
    case NRT_INT32: v.i = *(const int32_t *)p; break;
    case NRT_INT64: v.i = *(const int64_t *)p; break;
    case NRT_FLOAT16: v.is_float = 1; v.f = ref_half_value(*(const uint16_t *)p); break;
    case NRT_BFLOAT16: v.is_float = 1; v.f = ref_bf16_value(*(const uint16_t *)p); break;
    case NRT_FLOAT32: v.is_float = 1; v.f = *(const float *)p; break;
    case NRT_FLOAT64: v.is_float = 1; v.f = *(const double *)p; break;
    default: break;
  }
  return v;
}

static float ref_as_float(ref_value v) { return v.is_float ? (float)v.f : (float)v.i; }

static void ref_write(nrt_dtype t, ref_value v, void *p) {
  int64_t i64 = v.is_float ? ref_trunc_i64(v.f) : v.i;
  int64_t i32 = v.is_float ? ref_trunc_i32(v.f) : v.i; /* narrowed below */
  switch (t) {
    case NRT_BOOL: *(uint8_t *)p = v.is_float ? v.f != 0 : v.i != 0; break;
    case NRT_UINT8: *(uint8_t *)p = (uint8_t)i64; break;
    case NRT_INT8: *(int8_t *)p = (int8_t)i32; break;
    case NRT_INT16: *(int16_t *)p = (int16_t)i32; break;
    case NRT_INT32: *(int32_t *)p = (int32_t)i32; break;
    case NRT_INT64: *(int64_t *)p = i64; break;
    case NRT_FLOAT16: *(uint16_t *)p = ref_half_from_float(ref_as_float(v)); break;
    case NRT_BFLOAT16: *(uint16_t *)p = ref_bf16_from_float(ref_as_float(v)); break;
    case NRT_FLOAT32: *(float *)p = ref_as_float(v); break;
    case NRT_FLOAT64: *(double *)p = v.is_float ? v.f : (double)v.i; break;
    default: break;
  }
}

/* dst element (type t) = src element (type s) converted. */
static void ref_convert(nrt_dtype t, void *dst, nrt_dtype s, const void *src) {
  if (t == s) {
    memcpy(dst, src, nrt_dtype_size(t));
    return;
  }
  ref_write(t, ref_read(s, src), dst);
}

/* Equal, where two NaNs of the same sign are equal for float32/float64. */
static int same_element(nrt_dtype t, const void *got, const void *want) {
  if (t == NRT_FLOAT32) {
    float a = *(const float *)got, b = *(const float *)want;
    if (isnan(b)) return isnan(a) && !signbit(a) == !signbit(b);
  } else if (t == NRT_FLOAT64) {
    double a = *(const double *)got, b = *(const double *)want;
    if (isnan(b)) return isnan(a) && !signbit(a) == !signbit(b);
  }
  return memcmp(got, want, nrt_dtype_size(t)) == 0;
}

static void print_element(nrt_dtype t, const void *p) {
  switch (t) {
    case NRT_BOOL: case NRT_UINT8: fprintf(stderr, "%u", *(const uint8_t *)p); break;
    case NRT_INT8: fprintf(stderr, "%d", *(const int8_t *)p); break;
    case NRT_INT16: fprintf(stderr, "%d", *(const int16_t *)p); break;
    case NRT_INT32: fprintf(stderr, "%d", *(const int32_t *)p); break;
    case NRT_INT64: fprintf(stderr, "%lld", (long long)*(const int64_t *)p); break;
    case NRT_FLOAT16: case NRT_BFLOAT16: fprintf(stderr, "0x%04x", *(const uint16_t *)p); break;
    case NRT_FLOAT32: fprintf(stderr, "%.9g", (double)*(const float *)p); break;
    case NRT_FLOAT64: fprintf(stderr, "%.17g", *(const double *)p); break;
    default: break;
  }
}

/* ---- source values of every dtype ------------------------------------ */

#define MAX_VALUES 48

static size_t source_values(nrt_dtype t, unsigned char *out) {
  static const uint8_t b[] = {0, 1, 1, 0, 1};
  static const uint8_t u8[] = {0, 1, 2, 127, 128, 200, 255};
  static const int8_t i8[] = {0, 1, -1, 127, -128, -100, 50};
  static const int16_t i16[] = {0, 1, -1, 32767, -32768, 300, -129, 255, 256, 1000, 2049};
  static const int32_t i32[] = {0,     1,     -1,      INT32_MAX, INT32_MIN, 65535,    65536,
                                -70000, 16777217, 2049, 2051,      123456789, 65519,   65520};
  static const int64_t i64[] = {0,
                                1,
                                -1,
                                INT64_MAX,
                                INT64_MIN,
                                (1ll << 53) + 1,
                                1ll << 31,
                                -(1ll << 31) - 1,
                                1ll << 40,
                                255,
                                256,
                                -129,
                                (1ll << 24) + 1,
                                65520,
                                65519,
                                (1ll << 32) + 7};
  static const uint16_t f16[] = {0x0000, 0x8000, 0x3c00, 0xbc00, 0x3800, 0x3e00, 0xc100,
                                 0x7bff, 0xfbff, 0x0001, 0x03ff, 0x0400, 0x7c00, 0xfc00,
                                 0x7e00, 0xfe00, 0x7c01, 0x5a40, 0xd640, 0x7800, 0x5c00,
                                 0x2e66, 0xb555};
  static const uint16_t bf16[] = {0x0000, 0x8000, 0x3f80, 0xbf80, 0x3fc0, 0xc020, 0x7f7f, 0xff7f,
                                  0x0001, 0x0080, 0x7f80, 0xff80, 0x7fc0, 0xffc0, 0x7f81, 0x4f00,
                                  0xcf00, 0x5f00, 0xdf00, 0x4780, 0x477f, 0x4380, 0xc300, 0x3dcd};
  const float f32[] = {0.0f,
                       -0.0f,
                       1.0f,
                       -1.0f,
                       0.5f,
                       2.5f,
                       -2.5f,
                       0.1f,
                       1e-8f,
                       0x1p-24f,
                       0x1p-25f,
                       0x3p-25f,
                       65504.0f,
                       65519.99f,
                       65520.0f,
                       1.0f + 0x1p-11f,
                       1.0f + 0x3p-11f,
                       1.0f + 0x1p-8f,
                       1.0f + 0x3p-8f,
                       3e38f,
                       FLT_MAX,
                       INFINITY,
                       -INFINITY,
                       NAN,
                       -NAN,
                       2147483520.0f,
                       2147483648.0f,
                       -2147483648.0f,
                       3e9f,
                       1e20f,
                       300.7f,
                       -3.5f,
                       255.9f,
                       256.5f,
                       1e-40f,
                       0x1p-149f,
                       -0x1.fffffep-127f};
  const double f64[] = {0.0,
                        -0.0,
                        1.0,
                        -1.0,
                        0.1,
                        2.5,
                        -7.75,
                        1e300,
                        -1e300,
                        1.0 + 0x1p-11 + 0x1p-30,
                        1.0 + 0x1p-8 + 0x1p-30,
                        1e-320,
                        0x1p63,
                        -0x1p63,
                        9.2e18,
                        4503599627370497.0,
                        2147483647.9,
                        -2147483648.9,
                        -2147483649.0,
                        4294967296.5,
                        INFINITY,
                        -INFINITY,
                        NAN,
                        -NAN,
                        65519.0,
                        65520.0,
                        300.7,
                        -3.5,
                        1e-8,
                        (double)FLT_MAX * 1.0000001};
#define COPY_OUT(arr) (memcpy(out, arr, sizeof arr), sizeof arr / sizeof arr[0])
  switch (t) {
    case NRT_BOOL: return COPY_OUT(b);
    case NRT_UINT8: return COPY_OUT(u8);
    case NRT_INT8: return COPY_OUT(i8);
    case NRT_INT16: return COPY_OUT(i16);
    case NRT_INT32: return COPY_OUT(i32);
    case NRT_INT64: return COPY_OUT(i64);
    case NRT_FLOAT16: return COPY_OUT(f16);
    case NRT_BFLOAT16: return COPY_OUT(bf16);
    case NRT_FLOAT32: return COPY_OUT(f32);
    case NRT_FLOAT64: return COPY_OUT(f64);
    default: return 0;
  }
#undef COPY_OUT
}

/* ---- the reference twin checks itself on known answers --------------- */

static void test_reference_twin(void) {
  CHECK(ref_half_from_float(1.0f) == 0x3c00);
  CHECK(ref_half_from_float(1.0f + 0x1p-11f) == 0x3c00); /* tie: to even */
  CHECK(ref_half_from_float(1.0f + 0x3p-11f) == 0x3c02); /* tie: to even */
  CHECK(ref_half_from_float(65504.0f) == 0x7bff);
  CHECK(ref_half_from_float(65519.0f) == 0x7bff);
  CHECK(ref_half_from_float(65520.0f) == 0x7c00);
  CHECK(ref_half_from_float(0x1p-24f) == 0x0001);
  CHECK(ref_half_from_float(0x1p-25f) == 0x0000);
  CHECK(ref_half_from_float(0x3p-25f) == 0x0002);
  CHECK(ref_half_from_float(0x1.ffcp-15f) == 0x0400); /* tie: up to the least normal */
  CHECK(ref_half_from_float(0x1.ff8p-15f) == 0x03ff); /* the largest subnormal */
  CHECK(ref_half_from_float(-2.5f) == 0xc100);
  CHECK(ref_half_from_float(0.1f) == 0x2e66);
  CHECK(ref_half_from_float(NAN) == 0x7e00);
  CHECK(ref_bf16_from_float(1.0f) == 0x3f80);
  CHECK(ref_bf16_from_float(1.0f + 0x1p-8f) == 0x3f80);
  CHECK(ref_bf16_from_float(1.0f + 0x3p-8f) == 0x3f82);
  CHECK(ref_bf16_from_float(0.1f) == 0x3dcd);
  CHECK(ref_bf16_from_float(FLT_MAX) == 0x7f80);
  CHECK(ref_bf16_from_float(NAN) == 0x7fc0);
  CHECK(ref_bf16_from_float(-NAN) == 0x7fc0);
  CHECK(ref_half_value(0x3555) > 0.333 && ref_half_value(0x3555) < 0.3334);
  CHECK(ref_bf16_value(0x7f7f) == ldexp(255.0, 120));
  CHECK(ref_trunc_i32(-2147483648.9) == INT32_MIN && ref_trunc_i32(-2147483647.9) == -2147483647);
}

/* ---- FILL --------------------------------------------------------------- */

#define FILL_N 37

/* Fills a contiguous buffer of every dtype with the scalar and checks each
 * element against the reference conversion of the scalar. */
static void check_fill_all_dtypes(int is_float, double f, int64_t i) {
  unsigned char *dev = dev_alloc(FILL_N * 8 + 64);
  for (int t = 0; t < NRT_UINT16; t++) {
    size_t size = nrt_dtype_size((nrt_dtype)t);
    for (int via_stream = 0; via_stream < 2; via_stream++) {
      memset(host_of(dev), 0xcd, FILL_N * 8 + 64);
      nrt_op op = fill_op(view_1d(dev, (nrt_dtype)t, FILL_N, 1), is_float, f, i);
      CHECK_OK(run(&op, via_stream));
      unsigned char want[8];
      ref_value v = {is_float, f, i};
      ref_write((nrt_dtype)t, v, want);
      const unsigned char *h = host_of(dev);
      int ok = 1;
      for (int k = 0; k < FILL_N; k++) ok &= same_element((nrt_dtype)t, h + k * size, want);
      ok &= h[FILL_N * size] == 0xcd; /* nothing past the end */
      if (!ok) {
        fprintf(stderr, "  fill %s with %s %.17g / %lld: got ", nrt_dtype_name((nrt_dtype)t),
                is_float ? "float" : "int", f, (long long)i);
        print_element((nrt_dtype)t, h);
        fprintf(stderr, ", want ");
        print_element((nrt_dtype)t, want);
        fprintf(stderr, "\n");
      }
      CHECK(ok);
    }
  }
  CHECK_OK(nrt_free(dev));
}

static uint16_t fill_one_u16(nrt_dtype t, double value) {
  uint16_t *dev = dev_alloc(64);
  nrt_op op = fill_op(view_1d(dev, t, 3, 1), 1, value, 0);
  CHECK_OK(nrt_op_execute(&op));
  uint16_t r = ((uint16_t *)host_of(dev))[2];
  CHECK_OK(nrt_free(dev));
  return r;
}

static void test_fill_dtypes(void) {
  const double floats[] = {0.0, -0.0, 1.0, 3.9, -3.9, 0.5, 100.7, 200.2, -1.5, 1e15 + 0.5,
                           0.1, 65504.0, 65520.0, 1.0 + 0x1p-11, 1.0 + 0x3p-11,
                           1.0 + 0x1p-11 + 0x1p-30, 1.0 + 0x1p-8, 0x1p-24, 0x1p-25,
                           3e38, NAN, INFINITY, -INFINITY, 1e-320};
  for (size_t k = 0; k < sizeof floats / sizeof floats[0]; k++)
    check_fill_all_dtypes(1, floats[k], 0);
  const int64_t ints[] = {0, 1, -1, 7, 127, 200, -7, 100000, (1ll << 53) + 1, INT64_MAX};
  for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++) check_fill_all_dtypes(0, 0, ints[k]);

  /* Spelled out: the rules the reference encodes. */
  int32_t *i32 = dev_alloc(64);
  nrt_op op = fill_op(view_1d(i32, NRT_INT32, 2, 1), 1, -3.9, 0);
  CHECK_OK(nrt_op_execute(&op));
  CHECK(((int32_t *)host_of(i32))[1] == -3); /* truncates toward zero */
  op = fill_op(view_1d(i32, NRT_INT8, 2, 1), 1, 100.7, 0);
  CHECK_OK(nrt_op_execute(&op));
  CHECK(((int8_t *)host_of(i32))[1] == 100);
  op = fill_op(view_1d(i32, NRT_UINT8, 2, 1), 1, 200.9, 0);
  CHECK_OK(nrt_op_execute(&op));
  CHECK(((uint8_t *)host_of(i32))[1] == 200);
  op = fill_op(view_1d(i32, NRT_BOOL, 2, 1), 1, 0.25, 0);
  CHECK_OK(nrt_op_execute(&op));
  CHECK(((uint8_t *)host_of(i32))[1] == 1);
  op = fill_op(view_1d(i32, NRT_BOOL, 2, 1), 0, 0.0, -5);
  CHECK_OK(nrt_op_execute(&op));
  CHECK(((uint8_t *)host_of(i32))[1] == 1);
  op = fill_op(view_1d(i32, NRT_BOOL, 2, 1), 1, 0.0, 5); /* is_float: .f counts */
  CHECK_OK(nrt_op_execute(&op));
  CHECK(((uint8_t *)host_of(i32))[1] == 0);
  op = fill_op(view_1d(i32, NRT_INT64, 2, 1), 0, 0.0, -1234567890123ll);
  CHECK_OK(nrt_op_execute(&op));
  CHECK(((int64_t *)host_of(i32))[1] == -1234567890123ll);
  CHECK_OK(nrt_free(i32));

  CHECK(fill_one_u16(NRT_FLOAT16, 1.0) == 0x3c00);
  CHECK(fill_one_u16(NRT_FLOAT16, 1.0 + 0x1p-11) == 0x3c00);          /* tie, to even */
  CHECK(fill_one_u16(NRT_FLOAT16, 1.0 + 0x3p-11) == 0x3c02);          /* tie, to even */
  CHECK(fill_one_u16(NRT_FLOAT16, 1.0 + 0x1p-11 + 0x1p-30) == 0x3c00); /* via float */
  CHECK(fill_one_u16(NRT_FLOAT16, 65520.0) == 0x7c00);
  CHECK(fill_one_u16(NRT_FLOAT16, -0.0) == 0x8000);
  CHECK(fill_one_u16(NRT_FLOAT16, 0x1p-24) == 0x0001);
  CHECK(fill_one_u16(NRT_FLOAT16, NAN) == 0x7e00);
  CHECK(fill_one_u16(NRT_BFLOAT16, 1.0 + 0x1p-8) == 0x3f80); /* tie, to even */
  CHECK(fill_one_u16(NRT_BFLOAT16, 1.0 + 0x3p-8) == 0x3f82);
  CHECK(fill_one_u16(NRT_BFLOAT16, 0.1) == 0x3dcd);
  CHECK(fill_one_u16(NRT_BFLOAT16, NAN) == 0x7fc0);
  CHECK(fill_one_u16(NRT_BFLOAT16, -INFINITY) == 0xff80);
}

static void test_fill_strided(void) {
  enum { N = 50 };
  int32_t *dev = dev_alloc(2 * N * sizeof(int32_t));
  int32_t *h = host_of(dev);
  for (int via_stream = 0; via_stream < 2; via_stream++) {
    /* Every other element. */
    for (int k = 0; k < 2 * N; k++) h[k] = -1;
    nrt_op op = fill_op(view_1d(dev, NRT_INT32, N, 2), 1, 7.0, 0);
    CHECK_OK(run(&op, via_stream));
    int ok = 1;
    for (int k = 0; k < 2 * N; k++) ok &= h[k] == (k % 2 ? -1 : 7);
    CHECK(ok);

    /* A 3 x 4 block of rows 6 long: the padding stays. */
    for (int k = 0; k < 2 * N; k++) h[k] = -1;
    int64_t shape[2] = {3, 4}, strides[2] = {6, 1};
    op = fill_op(make_view(dev, NRT_INT32, 2, shape, strides), 0, 0, 9);
    CHECK_OK(run(&op, via_stream));
    ok = 1;
    for (int k = 0; k < 2 * N; k++) ok &= h[k] == ((k < 18 && k % 6 < 4) ? 9 : -1);
    CHECK(ok);

    /* Column-major 4 x 3 (dst strides (1, 4)). */
    for (int k = 0; k < 2 * N; k++) h[k] = -1;
    int64_t cshape[2] = {4, 3}, cstrides[2] = {1, 4};
    op = fill_op(make_view(dev, NRT_INT32, 2, cshape, cstrides), 0, 0, 5);
    CHECK_OK(run(&op, via_stream));
    ok = 1;
    for (int k = 0; k < 2 * N; k++) ok &= h[k] == (k < 12 ? 5 : -1);
    CHECK(ok);

    /* Negative stride: from the last element backwards, every third. */
    for (int k = 0; k < 2 * N; k++) h[k] = -1;
    op = fill_op(view_1d(dev + 2 * N - 1, NRT_INT32, 10, -3), 0, 0, 4);
    CHECK_OK(run(&op, via_stream));
    ok = 1;
    for (int k = 0; k < 2 * N; k++)
      ok &= h[k] == ((k >= 2 * N - 28 && (2 * N - 1 - k) % 3 == 0) ? 4 : -1);
    CHECK(ok);

    /* A 0-d scalar: exactly one element. */
    for (int k = 0; k < 2 * N; k++) h[k] = -1;
    op = fill_op(make_view(dev + 5, NRT_INT32, 0, NULL, NULL), 1, 2.0, 0);
    CHECK_OK(run(&op, via_stream));
    ok = 1;
    for (int k = 0; k < 2 * N; k++) ok &= h[k] == (k == 5 ? 2 : -1);
    CHECK(ok);

    /* Zero size: nothing, whatever the strides; size-1 dims are ignored. */
    for (int k = 0; k < 2 * N; k++) h[k] = -1;
    int64_t zshape[2] = {3, 0}, zstrides[2] = {1000000, 1};
    op = fill_op(make_view(dev, NRT_INT32, 2, zshape, zstrides), 1, 2.0, 0);
    CHECK_OK(run(&op, via_stream));
    int64_t oshape[3] = {1, 5, 1}, ostrides[3] = {99999, 1, -77777};
    op = fill_op(make_view(dev, NRT_INT32, 3, oshape, ostrides), 1, 8.0, 0);
    CHECK_OK(run(&op, via_stream));
    ok = 1;
    for (int k = 0; k < 2 * N; k++) ok &= h[k] == (k < 5 ? 8 : -1);
    CHECK(ok);
  }
  /* An empty view may have any data pointer (PyTorch's empty tensors). */
  int64_t zero = 0, one = 1;
  nrt_op op = fill_op(make_view(NULL, NRT_FLOAT32, 1, &zero, &one), 1, 1.0, 0);
  CHECK_OK(nrt_op_execute(&op));
  CHECK_OK(run(&op, 1));
  CHECK_OK(nrt_free(dev));
}

/* ---- COPY: every pair of dtypes ----------------------------------------- */

/* Copies the source values of dtype s into dtype t with the given element
 * strides (src_stride, dst_stride) and checks against the reference. */
static void check_copy_pair(nrt_dtype t, nrt_dtype s, int64_t dst_stride, int64_t src_stride,
                            int via_stream) {
  unsigned char values[MAX_VALUES * 8];
  size_t n = source_values(s, values);
  size_t ssize = nrt_dtype_size(s), tsize = nrt_dtype_size(t);
  unsigned char *src = dev_alloc(MAX_VALUES * 8 * 4), *dst = dev_alloc(MAX_VALUES * 8 * 4);
  unsigned char *hs = host_of(src), *hd = host_of(dst);
  memset(hs, 0x5a, MAX_VALUES * 8 * 4);
  memset(hd, 0xcd, MAX_VALUES * 8 * 4);
  for (size_t k = 0; k < n; k++) memcpy(hs + k * (size_t)src_stride * ssize, values + k * ssize, ssize);
  nrt_op op = copy_op(view_1d(dst, t, (int64_t)n, dst_stride), view_1d(src, s, (int64_t)n, src_stride));
  CHECK_OK(run(&op, via_stream));
  int bad = 0;
  for (size_t k = 0; k < n; k++) {
    unsigned char want[8];
    const unsigned char *got = hd + k * (size_t)dst_stride * tsize;
    ref_convert(t, want, s, values + k * ssize);
    if (!same_element(t, got, want)) {
      if (bad++ < 4) {
        fprintf(stderr, "  copy %s <- %s (strides %lld <- %lld) [%zu]: ", nrt_dtype_name(t),
                nrt_dtype_name(s), (long long)dst_stride, (long long)src_stride, k);
        print_element(s, values + k * ssize);
        fprintf(stderr, " gave ");
        print_element(t, got);
        fprintf(stderr, ", want ");
        print_element(t, want);
        fprintf(stderr, "\n");
      }
    }
    /* Gaps between strided destination elements are untouched. */
    for (size_t g = tsize; k + 1 < n && g < (size_t)dst_stride * tsize; g++)
      bad += got[g] != 0xcd;
  }
  bad += hd[n * (size_t)dst_stride * tsize] != 0xcd;
  CHECK(bad == 0);
  CHECK_OK(nrt_free(src));
  CHECK_OK(nrt_free(dst));
}

static void test_copy_all_pairs(void) {
  for (int t = 0; t < NRT_UINT16; t++)
    for (int s = 0; s < NRT_UINT16; s++) {
      check_copy_pair((nrt_dtype)t, (nrt_dtype)s, 1, 1, (t + s) % 2); /* contiguous */
      check_copy_pair((nrt_dtype)t, (nrt_dtype)s, 2, 3, (t + s + 1) % 2); /* strided */
    }
}

/* Every float16 / bfloat16 bit pattern to float32 and back, and many
 * random float32 bit patterns to both. */
static void test_copy_half_exhaustive(void) {
  enum { N = 65536, R = 100000 };
  uint16_t *h16 = dev_alloc(N * 2), *back = dev_alloc(N * 2);
  float *f32 = dev_alloc(N * 4);
  for (int kind = 0; kind < 2; kind++) {
    nrt_dtype t = kind ? NRT_BFLOAT16 : NRT_FLOAT16;
    uint16_t *h = host_of(h16);
    for (int k = 0; k < N; k++) h[k] = (uint16_t)k;
    nrt_op op = copy_op(view_1d(f32, NRT_FLOAT32, N, 1), view_1d(h16, t, N, 1));
    CHECK_OK(nrt_op_execute(&op));
    op = copy_op(view_1d(back, t, N, 1), view_1d(f32, NRT_FLOAT32, N, 1));
    CHECK_OK(nrt_op_execute(&op));
    const float *hf = host_of(f32);
    const uint16_t *hb = host_of(back);
    int bad = 0;
    for (int k = 0; k < N; k++) {
      double want = kind ? ref_bf16_value((uint16_t)k) : ref_half_value((uint16_t)k);
      int ok = isnan(want) ? isnan(hf[k]) && !signbit(hf[k]) == !signbit(want)
                           : (double)hf[k] == want && !signbit(hf[k]) == !signbit(want);
      uint16_t want_back = kind ? ref_bf16_from_float((float)want) : ref_half_from_float((float)want);
      ok &= hb[k] == want_back;
      if (!isnan(want)) ok &= hb[k] == (uint16_t)k; /* exact round trip */
      if (!ok && bad++ < 4)
        fprintf(stderr, "  %s 0x%04x -> %.9g -> 0x%04x\n", nrt_dtype_name(t), k, (double)hf[k],
                hb[k]);
    }
    CHECK(bad == 0);
  }
  CHECK_OK(nrt_free(f32));
  CHECK_OK(nrt_free(h16));
  CHECK_OK(nrt_free(back));

  uint32_t *bits = dev_alloc(R * 4);
  uint16_t *out16 = dev_alloc(R * 2), *outbf = dev_alloc(R * 2);
  uint32_t *hbits = host_of(bits);
  uint64_t state = 0x9e3779b97f4a7c15ull;
  for (int k = 0; k < R; k++) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    hbits[k] = (uint32_t)(state >> 32);
    if (k % 4 == 1) hbits[k] = (hbits[k] & 0x8fffffffu) | 0x30000000u; /* near half range */
    if (k % 4 == 2) hbits[k] &= 0x807fffffu;                           /* subnormal */
  }
  nrt_op op = copy_op(view_1d(out16, NRT_FLOAT16, R, 1), view_1d(bits, NRT_FLOAT32, R, 1));
  CHECK_OK(nrt_op_execute(&op));
  op = copy_op(view_1d(outbf, NRT_BFLOAT16, R, 1), view_1d(bits, NRT_FLOAT32, R, 1));
  CHECK_OK(nrt_op_execute(&op));
  const uint16_t *o16 = host_of(out16), *obf = host_of(outbf);
  int bad = 0;
  for (int k = 0; k < R; k++) {
    float x;
    memcpy(&x, &hbits[k], 4);
    if (o16[k] != ref_half_from_float(x) || obf[k] != ref_bf16_from_float(x)) {
      if (bad++ < 4)
        fprintf(stderr, "  float 0x%08x: half 0x%04x (want 0x%04x) bf16 0x%04x (want 0x%04x)\n",
                hbits[k], o16[k], ref_half_from_float(x), obf[k], ref_bf16_from_float(x));
    }
  }
  CHECK(bad == 0);
  CHECK_OK(nrt_free(bits));
  CHECK_OK(nrt_free(out16));
  CHECK_OK(nrt_free(outbf));
}

/* ---- COPY: layouts ------------------------------------------------------ */

/* src is an R x C row-major matrix; dst (C x R, contiguous) = its transpose
 * viewed through strides (1, C), converted from s to t. */
static void check_transpose(nrt_dtype t, nrt_dtype s, int via_stream) {
  enum { R = 5, C = 7 };
  unsigned char values[MAX_VALUES * 8];
  size_t n = source_values(s, values);
  size_t ssize = nrt_dtype_size(s), tsize = nrt_dtype_size(t);
  unsigned char *src = dev_alloc(R * C * 8), *dst = dev_alloc(R * C * 8);
  unsigned char *hs = host_of(src), *hd = host_of(dst);
  for (int k = 0; k < R * C; k++) memcpy(hs + k * ssize, values + (k % n) * ssize, ssize);
  int64_t shape[2] = {C, R}, sstrides[2] = {1, C}, dstrides[2] = {R, 1};
  nrt_op op = copy_op(make_view(dst, t, 2, shape, dstrides), make_view(src, s, 2, shape, sstrides));
  CHECK_OK(run(&op, via_stream));
  int bad = 0;
  for (int c = 0; c < C; c++)
    for (int r = 0; r < R; r++) {
      unsigned char want[8];
      ref_convert(t, want, s, hs + (r * C + c) * ssize);
      bad += !same_element(t, hd + (c * R + r) * tsize, want);
    }
  if (bad) fprintf(stderr, "  transpose %s <- %s: %d wrong\n", nrt_dtype_name(t), nrt_dtype_name(s), bad);
  CHECK(bad == 0);
  CHECK_OK(nrt_free(src));
  CHECK_OK(nrt_free(dst));
}

static void test_copy_transposed(void) {
  for (int t = 0; t < NRT_UINT16; t++)
    for (int s = 0; s < NRT_UINT16; s++) check_transpose((nrt_dtype)t, (nrt_dtype)s, (t ^ s) & 1);
}

static void test_copy_broadcast(void) {
  enum { R = 4, C = 6 };
  for (int via_stream = 0; via_stream < 2; via_stream++) {
    float *src = dev_alloc(4096);
    double *dst = dev_alloc(4096);
    float *hs = host_of(src);
    double *hd = host_of(dst);
    for (int k = 0; k < C; k++) hs[k] = (float)k + 0.5f;
    /* A row broadcast down the rows (stride 0). */
    int64_t shape[2] = {R, C}, sstrides[2] = {0, 1}, dstrides[2] = {C, 1};
    nrt_op op = copy_op(make_view(dst, NRT_FLOAT64, 2, shape, dstrides),
                        make_view(src, NRT_FLOAT32, 2, shape, sstrides));
    CHECK_OK(run(&op, via_stream));
    int ok = 1;
    for (int r = 0; r < R; r++)
      for (int c = 0; c < C; c++) ok &= hd[r * C + c] == c + 0.5;
    CHECK(ok);
    /* A column broadcast along the rows. */
    int64_t cstrides[2] = {1, 0};
    op = copy_op(make_view(dst, NRT_FLOAT64, 2, shape, dstrides),
                 make_view(src, NRT_FLOAT32, 2, shape, cstrides));
    CHECK_OK(run(&op, via_stream));
    ok = 1;
    for (int r = 0; r < R; r++)
      for (int c = 0; c < C; c++) ok &= hd[r * C + c] == r + 0.5;
    CHECK(ok);
    /* One element everywhere, same dtype (no conversion). */
    int64_t n = 40, zero = 0, one = 1;
    op = copy_op(make_view(src + 10, NRT_FLOAT32, 1, &n, &one),
                 make_view(src + 3, NRT_FLOAT32, 1, &n, &zero));
    CHECK_OK(run(&op, via_stream));
    ok = 1;
    for (int k = 0; k < 40; k++) ok &= hs[10 + k] == 3.5f;
    CHECK(ok);
    CHECK_OK(nrt_free(src));
    CHECK_OK(nrt_free(dst));
  }
}

static void test_copy_negative_strides(void) {
  enum { N = 33, R = 3, C = 5 };
  for (int via_stream = 0; via_stream < 2; via_stream++) {
    int16_t *src = dev_alloc(4096);
    int32_t *dst = dev_alloc(4096);
    int16_t *hs = host_of(src);
    int32_t *hd = host_of(dst);
    for (int k = 0; k < N; k++) hs[k] = (int16_t)(k * 100 - 1000);
    /* Reversed source. */
    nrt_op op = copy_op(view_1d(dst, NRT_INT32, N, 1), view_1d(src + N - 1, NRT_INT16, N, -1));
    CHECK_OK(run(&op, via_stream));
    int ok = 1;
    for (int k = 0; k < N; k++) ok &= hd[k] == (N - 1 - k) * 100 - 1000;
    CHECK(ok);
    /* Reversed destination, same dtype. */
    int16_t *dst16 = dev_alloc(4096);
    int16_t *hd16 = host_of(dst16);
    op = copy_op(view_1d(dst16 + N - 1, NRT_INT16, N, -1), view_1d(src, NRT_INT16, N, 1));
    CHECK_OK(run(&op, via_stream));
    ok = 1;
    for (int k = 0; k < N; k++) ok &= hd16[k] == hs[N - 1 - k];
    CHECK(ok);
    /* Both dims of a matrix flipped (merges into one reversed run). */
    int64_t shape[2] = {R, C}, sstrides[2] = {-C, -1}, dstrides[2] = {C, 1};
    op = copy_op(make_view(dst, NRT_INT32, 2, shape, dstrides),
                 make_view(src + R * C - 1, NRT_INT16, 2, shape, sstrides));
    CHECK_OK(run(&op, via_stream));
    ok = 1;
    for (int k = 0; k < R * C; k++) ok &= hd[k] == hs[R * C - 1 - k];
    CHECK(ok);
    /* Only the rows flipped. */
    int64_t rstrides[2] = {-C, 1};
    op = copy_op(make_view(dst, NRT_INT32, 2, shape, dstrides),
                 make_view(src + (R - 1) * C, NRT_INT16, 2, shape, rstrides));
    CHECK_OK(run(&op, via_stream));
    ok = 1;
    for (int r = 0; r < R; r++)
      for (int c = 0; c < C; c++) ok &= hd[r * C + c] == hs[(R - 1 - r) * C + c];
    CHECK(ok);
    CHECK_OK(nrt_free(src));
    CHECK_OK(nrt_free(dst));
    CHECK_OK(nrt_free(dst16));
  }
}

static void test_copy_scalar_and_empty(void) {
  double *src = dev_alloc(4096);
  int32_t *dst = dev_alloc(4096);
  ((double *)host_of(src))[2] = -41.9;
  int32_t *hd = host_of(dst);
  for (int k = 0; k < 8; k++) hd[k] = -1;
  nrt_op op = copy_op(make_view(dst + 3, NRT_INT32, 0, NULL, NULL),
                      make_view(src + 2, NRT_FLOAT64, 0, NULL, NULL));
  CHECK_OK(nrt_op_execute(&op));
  CHECK(hd[3] == -41 && hd[2] == -1 && hd[4] == -1);
  hd[3] = -1;
  CHECK_OK(run(&op, 1));
  CHECK(hd[3] == -41);
  /* Same dtype 0-d. */
  op = copy_op(make_view(dst + 5, NRT_INT32, 0, NULL, NULL), make_view(dst + 3, NRT_INT32, 0, NULL, NULL));
  CHECK_OK(nrt_op_execute(&op));
  CHECK(hd[5] == -41 && hd[4] == -1 && hd[6] == -1);

  /* Zero-size copies touch nothing, even with NULL or host pointers. */
  int64_t shape[2] = {4, 0}, strides[2] = {1, 1};
  float host[4] = {0};
  op = copy_op(make_view(dst, NRT_INT32, 2, shape, strides), make_view(src, NRT_FLOAT64, 2, shape, strides));
  CHECK_OK(nrt_op_execute(&op));
  CHECK_OK(run(&op, 1));
  op = copy_op(make_view(NULL, NRT_INT32, 2, shape, strides), make_view(host, NRT_FLOAT32, 2, shape, strides));
  CHECK_OK(nrt_op_execute(&op));
  CHECK_OK(run(&op, 1));
  CHECK(hd[0] == -1 && hd[1] == -1);
  CHECK_OK(nrt_free(src));
  CHECK_OK(nrt_free(dst));
}

/* A higher-rank non-contiguous copy checked element by element: a 4-d
 * permutation with a sliced (stepped) dimension. */
static void test_copy_permuted_4d(void) {
  enum { A = 3, B = 4, C = 2, D = 5 };
  int64_t *src = dev_alloc(A * B * C * D * 2 * 8);
  float *dst = dev_alloc(A * B * C * D * 4);
  int64_t *hs = host_of(src);
  float *hd = host_of(dst);
  for (int k = 0; k < A * B * C * D * 2; k++) hs[k] = k * 3 - 7;
  /* src memory: [D][C][B][A*2] (contiguous); view (A, B, C, D) taking
   * every other element of the last memory dim. */
  int64_t shape[4] = {A, B, C, D};
  int64_t sstrides[4] = {2, 2 * A, 2 * A * B, 2 * A * B * C};
  int64_t dstrides[4] = {B * C * D, C * D, D, 1};
  nrt_op op = copy_op(make_view(dst, NRT_FLOAT32, 4, shape, dstrides),
                      make_view(src, NRT_INT64, 4, shape, sstrides));
  CHECK_OK(run(&op, 1));
  int ok = 1;
  for (int a = 0; a < A; a++)
    for (int b = 0; b < B; b++)
      for (int c = 0; c < C; c++)
        for (int d = 0; d < D; d++)
          ok &= hd[((a * B + b) * C + c) * D + d] ==
                (float)hs[a * sstrides[0] + b * sstrides[1] + c * sstrides[2] + d * sstrides[3]];
  CHECK(ok);
  CHECK_OK(nrt_free(src));
  CHECK_OK(nrt_free(dst));
}

/* ---- validation ----------------------------------------------------------- */

/* Expects the op to be refused with `want` both synchronously and at
 * launch (where the refusal is immediate, not a sticky error). */
static void expect_refused(const nrt_op *op, nrt_status want, const char *what) {
  nrt_status got = nrt_op_execute(op);
  if (got != want)
    fprintf(stderr, "  %s: nrt_op_execute gave %s (%s)\n", what, nrt_status_string(got),
            nrt_last_error());
  CHECK(got == want);
  CHECK(nrt_last_error()[0] != 0);
  nrt_stream_t s;
  CHECK_OK(nrt_stream_get_default(0, &s));
  got = nrt_launch(s, op);
  if (got != want)
    fprintf(stderr, "  %s: nrt_launch gave %s (%s)\n", what, nrt_status_string(got), nrt_last_error());
  CHECK(got == want);
  CHECK_OK(nrt_stream_synchronize(s));
}

static void test_validation(void) {
  float *dev = dev_alloc(4096);
  nrt_op good = fill_op(view_1d(dev, NRT_FLOAT32, 16, 1), 1, 1.0, 0);
  CHECK_OK(nrt_op_execute(&good));
  CHECK_STATUS(nrt_op_execute(NULL), NRT_ERROR_INVALID_ARGUMENT);

  /* Host memory, pageable or pinned, is not device memory. */
  float host[16];
  nrt_op op = fill_op(view_1d(host, NRT_FLOAT32, 16, 1), 1, 1.0, 0);
  expect_refused(&op, NRT_ERROR_INVALID_ARGUMENT, "pageable host operand");
  void *pinned = NULL;
  CHECK_OK(nrt_host_alloc(4096, &pinned));
  op = fill_op(view_1d(pinned, NRT_FLOAT32, 16, 1), 1, 1.0, 0);
  expect_refused(&op, NRT_ERROR_INVALID_ARGUMENT, "pinned host operand");
  op = copy_op(view_1d(dev, NRT_FLOAT32, 16, 1), view_1d(pinned, NRT_FLOAT32, 16, 1));
  expect_refused(&op, NRT_ERROR_INVALID_ARGUMENT, "host copy source");
  op = fill_op(view_1d(NULL, NRT_FLOAT32, 16, 1), 1, 1.0, 0);
  expect_refused(&op, NRT_ERROR_INVALID_ARGUMENT, "NULL operand");

  /* Bad dtypes, ranks, sizes, counts and codes. */
  op = good;
  op.operands[0].dtype = NRT_DTYPE_COUNT;
  expect_refused(&op, NRT_ERROR_INVALID_ARGUMENT, "dtype out of range");
  op.operands[0].dtype = (nrt_dtype)-1;
  expect_refused(&op, NRT_ERROR_INVALID_ARGUMENT, "negative dtype");
  op = good;
  op.operands[0].ndim = NRT_MAX_DIMS + 1;
  expect_refused(&op, NRT_ERROR_UNSUPPORTED, "too many dims");
  op.operands[0].ndim = -1;
  expect_refused(&op, NRT_ERROR_UNSUPPORTED, "negative ndim");
  op = good;
  op.operands[0].shape[0] = -3;
  expect_refused(&op, NRT_ERROR_INVALID_ARGUMENT, "negative size");
  int64_t zshape[2] = {0, -1}, zstrides[2] = {1, 1};
  op = fill_op(make_view(dev, NRT_FLOAT32, 2, zshape, zstrides), 1, 1.0, 0);
  expect_refused(&op, NRT_ERROR_INVALID_ARGUMENT, "negative size after an empty dim");
  op = good;
  op.code = NRT_OP_COUNT;
  expect_refused(&op, NRT_ERROR_INVALID_ARGUMENT, "unknown op code");
  op.code = (nrt_op_code)-1;
  expect_refused(&op, NRT_ERROR_INVALID_ARGUMENT, "negative op code");
  op = good;
  op.num_operands = NRT_MAX_OPERANDS + 1;
  expect_refused(&op, NRT_ERROR_INVALID_ARGUMENT, "too many operands");
  op = good;
  op.num_scalars = -1;
  expect_refused(&op, NRT_ERROR_INVALID_ARGUMENT, "negative scalar count");

  /* Views running outside the device memory. The first allocation on an
   * untouched device sits at its arena's start. */
  size_t free_bytes, total;
  CHECK_OK(nrt_mem_get_info(2, &free_bytes, &total));
  char *first = NULL;
  CHECK_OK(nrt_malloc(2, 1 << 16, (void **)&first));
  int32_t owner = -1;
  if (nrt_pointer_get_device(first - 4, &owner) != NRT_SUCCESS) {
    op = fill_op(view_1d(first, NRT_FLOAT32, 2, -1), 1, 1.0, 0);
    expect_refused(&op, NRT_ERROR_INVALID_ARGUMENT, "negative stride before the arena");
  }
  char *near_end = first + total - 16;
  int32_t beyond = -1;
  if (nrt_pointer_get_device(near_end, &owner) == NRT_SUCCESS && owner == 2 &&
      (nrt_pointer_get_device(first + total, &beyond) != NRT_SUCCESS || beyond != 2)) {
    op = fill_op(view_1d(near_end, NRT_FLOAT32, 4, 1), 1, 1.0, 0);
    CHECK_OK(nrt_op_execute(&op)); /* the last 16 bytes are fine */
    op = fill_op(view_1d(near_end, NRT_FLOAT32, 5, 1), 1, 1.0, 0);
    expect_refused(&op, NRT_ERROR_INVALID_ARGUMENT, "view past the end of the arena");
    CHECK(strstr(nrt_last_error(), "fill") != NULL);
    op = fill_op(view_1d(first, NRT_FLOAT32, 2, (int64_t)(total / 4)), 1, 1.0, 0);
    expect_refused(&op, NRT_ERROR_INVALID_ARGUMENT, "stride past the end of the arena");
    op = copy_op(view_1d(first, NRT_FLOAT32, 4, 1), view_1d(near_end, NRT_FLOAT64, 4, 1));
    expect_refused(&op, NRT_ERROR_INVALID_ARGUMENT, "copy source past the end");
  } else {
    fprintf(stderr, "  (skipped the past-the-end views: arena layout unknown)\n");
  }
  /* Strides so large that the extent overflows 64 bits (and wraps back
   * inside the arena) are refused, not followed. */
  op = fill_op(view_1d(dev, NRT_FLOAT32, 5, (int64_t)1 << 62), 1, 1.0, 0);
  expect_refused(&op, NRT_ERROR_INVALID_ARGUMENT, "extent overflowing int64");
  op = fill_op(view_1d(dev, NRT_UINT8, 3, INT64_MIN), 1, 1.0, 0);
  expect_refused(&op, NRT_ERROR_INVALID_ARGUMENT, "INT64_MIN stride");
  int64_t bshape[2] = {(int64_t)1 << 24 | 1, 2}, bstrides[2] = {(int64_t)1 << 40, 1};
  op = fill_op(make_view(dev, NRT_UINT8, 2, bshape, bstrides), 1, 1.0, 0);
  expect_refused(&op, NRT_ERROR_INVALID_ARGUMENT, "extent wrapping to zero");
  int64_t hshape[1] = {(int64_t)1 << 61}, hstrides[1] = {1};
  op = fill_op(make_view(dev, NRT_FLOAT64, 1, hshape, hstrides), 1, 1.0, 0);
  expect_refused(&op, NRT_ERROR_INVALID_ARGUMENT, "byte extent overflowing");

  /* Kernel-level checks (valid views, wrong op arity or shapes). */
  op = good;
  op.num_scalars = 0;
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(nrt_last_error(), "fill") != NULL);
  op = copy_op(view_1d(dev, NRT_FLOAT32, 8, 1), view_1d(dev + 8, NRT_FLOAT32, 4, 1));
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(nrt_last_error(), "copy") != NULL);
  int64_t shape2[2] = {2, 4}, strides2[2] = {4, 1};
  op = copy_op(view_1d(dev, NRT_FLOAT32, 8, 1), make_view(dev + 8, NRT_FLOAT32, 2, shape2, strides2));
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  op.num_operands = 1;
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(nrt_last_error(), "copy") != NULL);

  /* The buffer is intact after all that. */
  int ok = 1;
  for (int k = 0; k < 16; k++) ok &= ((float *)host_of(dev))[k] == 1.0f;
  CHECK(ok);
  CHECK_OK(nrt_free(first));
  CHECK_OK(nrt_host_free(pinned));
  CHECK_OK(nrt_free(dev));
}

/* nrt_op_execute_host: operands in the host mask are host memory (the
 * distributed backend's shared segment), read and written where they are;
 * the others are device memory, checked as always. */
static void test_host_operands(void) {
  enum { N = 37 };
  float *dev = dev_alloc(2 * N * sizeof(float));
  float *host = malloc(2 * N * sizeof(float)), *back = malloc(N * sizeof(float));
  for (int k = 0; k < 2 * N; k++) host[k] = (float)(k * 3 - 40);
  /* host -> device, every other element of the host buffer */
  nrt_op op = copy_op(view_1d(dev, NRT_FLOAT32, N, 1), view_1d(host, NRT_FLOAT32, N, 2));
  CHECK_OK(nrt_op_execute_host(&op, 1u << 1));
  /* dev[k] += 2 * host[k] (ADD with alpha), the host operand second */
  nrt_op add;
  memset(&add, 0, sizeof add);
  add.code = NRT_OP_ADD;
  add.compute_dtype = NRT_FLOAT32;
  add.num_operands = 3;
  add.num_outputs = 1;
  add.num_scalars = 1;
  add.scalars[0].is_float = 1;
  add.scalars[0].f = 2.0;
  add.operands[0] = view_1d(dev, NRT_FLOAT32, N, 1);
  add.operands[1] = add.operands[0];
  add.operands[2] = view_1d(host, NRT_FLOAT32, N, 1);
  CHECK_OK(nrt_op_execute_host(&add, 1u << 2));
  /* device -> host */
  op = copy_op(view_1d(back, NRT_FLOAT32, N, 1), view_1d(dev, NRT_FLOAT32, N, 1));
  CHECK_OK(nrt_op_execute_host(&op, 1u << 0));
  int ok = 1;
  for (int k = 0; k < N; k++) ok &= back[k] == host[2 * k] + 2.0f * host[k];
  CHECK(ok);
  /* Refused: a host pointer without its mask bit (not device memory), a
   * NULL host operand, a mask naming missing or immediate operands. */
  op = copy_op(view_1d(back, NRT_FLOAT32, N, 1), view_1d(dev, NRT_FLOAT32, N, 1));
  CHECK_STATUS(nrt_op_execute_host(&op, 0), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(nrt_last_error(), "not entirely in neuron device memory") != NULL);
  op = copy_op(view_1d(NULL, NRT_FLOAT32, N, 1), view_1d(dev, NRT_FLOAT32, N, 1));
  CHECK_STATUS(nrt_op_execute_host(&op, 1u << 0), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(nrt_last_error(), "host operand 0 is NULL") != NULL);
  op = copy_op(view_1d(back, NRT_FLOAT32, N, 1), view_1d(dev, NRT_FLOAT32, N, 1));
  CHECK_STATUS(nrt_op_execute_host(&op, 1u << 2), NRT_ERROR_INVALID_ARGUMENT);
  add.immediate_mask = 1u << 2;
  add.operands[2].strides[0] = 0;
  CHECK_STATUS(nrt_op_execute_host(&add, 1u << 2), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(nrt_last_error(), "both host memory and immediate") != NULL);
  CHECK_STATUS(nrt_op_execute_host(NULL, 0), NRT_ERROR_INVALID_ARGUMENT);
  free(host);
  free(back);
  CHECK_OK(nrt_free(dev));
}

static void test_names(void) {
  static const size_t sizes[NRT_UINT16] = {1, 1, 1, 2, 4, 8, 2, 2, 4, 8};
  static const char *const names[NRT_UINT16] = {"bool",  "uint8",   "int8",     "int16",
                                                     "int32", "int64",   "float16",  "bfloat16",
                                                     "float32", "float64"};
  for (int t = 0; t < NRT_UINT16; t++) {
    CHECK(nrt_dtype_size((nrt_dtype)t) == sizes[t]);
    CHECK(strcmp(nrt_dtype_name((nrt_dtype)t), names[t]) == 0);
    CHECK(nrt_dtype_is_floating((nrt_dtype)t) == (t >= NRT_FLOAT16));
  }
  CHECK(nrt_dtype_size(NRT_DTYPE_COUNT) == 0);
  CHECK(nrt_dtype_is_floating((nrt_dtype)-1) == 0);
  CHECK(strcmp(nrt_op_name(NRT_OP_FILL), "fill") == 0);
  CHECK(strcmp(nrt_op_name(NRT_OP_COPY), "copy") == 0);
  CHECK(strcmp(nrt_op_name(NRT_OP_COUNT), "unknown_op") == 0);
  nrt_tensor_view v = make_view(NULL, NRT_FLOAT32, 0, NULL, NULL);
  CHECK(nrt_view_numel(&v) == 1);
  int64_t shape[3] = {2, 3, 4}, strides[3] = {0, 0, 0};
  v = make_view(NULL, NRT_FLOAT32, 3, shape, strides);
  CHECK(nrt_view_numel(&v) == 24);
  shape[1] = 0;
  v = make_view(NULL, NRT_FLOAT32, 3, shape, strides);
  CHECK(nrt_view_numel(&v) == 0);
}

int main(void) {
  RUN(test_reference_twin);
  RUN(test_names);
  RUN(test_fill_dtypes);
  RUN(test_fill_strided);
  RUN(test_copy_all_pairs);
  RUN(test_copy_half_exhaustive);
  RUN(test_copy_transposed);
  RUN(test_copy_broadcast);
  RUN(test_copy_negative_strides);
  RUN(test_copy_scalar_and_empty);
  RUN(test_copy_permuted_4d);
  RUN(test_validation);
  RUN(test_host_operands);
  return CHECK_MAIN_RESULT();
}
