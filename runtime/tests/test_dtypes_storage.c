/* The storage dtypes (uint16, uint32, uint64, complex64, complex128): names
 * and sizes, COPY between every pair that involves one of them against a
 * plain reference twin, COPY's conjugate/negate flags, FILL with an
 * imaginary part, and the runtime's refusal of ops whose kernels do not take
 * them (before they run). */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "check.h"
#include "view1d.h"

static nrt_op op_of(nrt_op_code code, int n, const nrt_tensor_view *views) {
  nrt_op op;
  memset(&op, 0, sizeof op);
  op.code = code;
  op.num_operands = n;
  op.num_outputs = 1;
  for (int k = 0; k < n; k++) op.operands[k] = views[k];
  return op;
}

static void *dev_alloc(size_t bytes) {
  void *p = NULL;
  CHECK_OK(nrt_malloc(0, bytes, &p));
  return p;
}

/* ---- the reference twin: one element at a time, by plain C ------------- */

typedef struct value {
  double re, im;
} value;

static float ref_half_to_float(uint16_t h) {
  int e = (h >> 10) & 31, m = h & 1023;
  float v = e == 0 ? ldexpf((float)m, -24) : ldexpf((float)(m | 1024), e - 25);
  return (h & 0x8000) ? -v : v;
}

static value ref_read(nrt_dtype t, const unsigned char *p) {
  value v = {0, 0};
  switch (t) {
    case NRT_BOOL: v.re = *p != 0; break;
    case NRT_UINT8: v.re = *p; break;
    case NRT_INT8: v.re = *(const int8_t *)p; break;
    case NRT_INT16: { int16_t x; memcpy(&x, p, 2); v.re = x; break; }
    case NRT_INT32: { int32_t x; memcpy(&x, p, 4); v.re = x; break; }
    case NRT_INT64: { int64_t x; memcpy(&x, p, 8); v.re = (double)x; break; }
    case NRT_FLOAT16: { uint16_t x; memcpy(&x, p, 2); v.re = ref_half_to_float(x); break; }
    case NRT_BFLOAT16: {
      uint16_t x; memcpy(&x, p, 2);
      uint32_t b = (uint32_t)x << 16; float f; memcpy(&f, &b, 4); v.re = f; break;
    }
    case NRT_FLOAT32: { float x; memcpy(&x, p, 4); v.re = x; break; }
    case NRT_FLOAT64: memcpy(&v.re, p, 8); break;
    case NRT_UINT16: { uint16_t x; memcpy(&x, p, 2); v.re = x; break; }
    case NRT_UINT32: { uint32_t x; memcpy(&x, p, 4); v.re = x; break; }
    case NRT_UINT64: { uint64_t x; memcpy(&x, p, 8); v.re = (double)x; break; }
    case NRT_COMPLEX64: { float x[2]; memcpy(x, p, 8); v.re = x[0]; v.im = x[1]; break; }
    case NRT_COMPLEX128: memcpy(&v, p, 16); break;
    case NRT_COMPLEX32: {
      uint16_t x[2]; memcpy(x, p, 4);
      v.re = ref_half_to_float(x[0]); v.im = ref_half_to_float(x[1]); break;
    }
    default: break;
  }
  return v;
}

/* The sources below hold small non-negative values exact in every dtype
 * (halves truncate toward zero for integers), so this twin needs no range
 * rules; those are spelled out in test_edges. */
static void ref_write(nrt_dtype t, unsigned char *p, value v) {
  switch (t) {
    case NRT_BOOL: *p = v.re != 0 || v.im != 0; break;
    case NRT_UINT8: *p = (uint8_t)v.re; break;
    case NRT_INT8: *(int8_t *)p = (int8_t)v.re; break;
    case NRT_INT16: { int16_t x = (int16_t)v.re; memcpy(p, &x, 2); break; }
    case NRT_INT32: { int32_t x = (int32_t)v.re; memcpy(p, &x, 4); break; }
    case NRT_INT64: { int64_t x = (int64_t)v.re; memcpy(p, &x, 8); break; }
    case NRT_FLOAT16: case NRT_BFLOAT16: {
      /* exact small values: convert through the bit layout directly */
      float f = fabsf((float)v.re); /* the sign bit goes on last (complex32's -3) */
      uint16_t x = 0;
      if (f != 0) {
        int e;
        float m = frexpf(f, &e); /* f = m * 2^e, m in [0.5, 1) */
        if (t == NRT_FLOAT16)
          x = (uint16_t)(((e + 14) << 10) | ((uint32_t)ldexpf(m * 2 - 1, 10)));
        else
          x = (uint16_t)(((e + 126) << 7) | ((uint32_t)ldexpf(m * 2 - 1, 7)));
      }
      if (v.re < 0) x |= 0x8000u;
      memcpy(p, &x, 2);
      break;
    }
    case NRT_FLOAT32: { float x = (float)v.re; memcpy(p, &x, 4); break; }
    case NRT_FLOAT64: memcpy(p, &v.re, 8); break;
    case NRT_UINT16: { uint16_t x = (uint16_t)v.re; memcpy(p, &x, 2); break; }
    case NRT_UINT32: { uint32_t x = (uint32_t)v.re; memcpy(p, &x, 4); break; }
    case NRT_UINT64: { uint64_t x = (uint64_t)v.re; memcpy(p, &x, 8); break; }
    case NRT_COMPLEX64: { float x[2] = {(float)v.re, (float)v.im}; memcpy(p, x, 8); break; }
    case NRT_COMPLEX128: memcpy(p, &v, 16); break;
    case NRT_COMPLEX32: { /* two exact float16 parts */
      ref_write(NRT_FLOAT16, p, (value){v.re, 0});
      ref_write(NRT_FLOAT16, p + 2, (value){v.im, 0});
      break;
    }
    default: break;
  }
}

enum { N = 9 };
static const value sources[N] = {{0, 0}, {1, 0}, {2.5, 0.5}, {7, -3}, {100, 0},
                                 {0, 2},  {3, 1}, {64.5, 8}, {127, 0.25}};

static void check_pair(nrt_dtype t, nrt_dtype s, int64_t dst_stride, int64_t src_stride) {
  size_t ts = nrt_dtype_size(t), ss = nrt_dtype_size(s);
  unsigned char *src = dev_alloc(N * 16 * 3), *dst = dev_alloc(N * 16 * 3);
  unsigned char *hs = nrt_device_to_host(src), *hd = nrt_device_to_host(dst);
  memset(hd, 0xcd, N * 16 * 3);
  for (int k = 0; k < N; k++) {
    value v = sources[k];
    if (!nrt_dtype_is_complex(s)) v.im = 0;
    if (s == NRT_BOOL) v.re = v.re != 0 || v.im != 0;
    if (!nrt_dtype_is_floating(s) && !nrt_dtype_is_complex(s)) v.re = floor(v.re);
    ref_write(s, hs + (size_t)k * (size_t)src_stride * ss, v);
  }
  nrt_tensor_view views[2] = {view_1d(dst, t, N, dst_stride), view_1d(src, s, N, src_stride)};
  nrt_op op = op_of(NRT_OP_COPY, 2, views);
  CHECK_OK(nrt_op_execute(&op));
  int bad = 0;
  for (int k = 0; k < N; k++) {
    unsigned char want[16];
    ref_write(t, want, ref_read(s, hs + (size_t)k * (size_t)src_stride * ss));
    if (memcmp(want, hd + (size_t)k * (size_t)dst_stride * ts, ts) != 0 && bad++ < 3)
      fprintf(stderr, "  copy %s <- %s [%d] differs\n", nrt_dtype_name(t), nrt_dtype_name(s), k);
    for (size_t g = ts; k + 1 < N && g < (size_t)dst_stride * ts; g++)
      bad += hd[(size_t)k * (size_t)dst_stride * ts + g] != 0xcd; /* gaps untouched */
  }
  CHECK(bad == 0);
  CHECK_OK(nrt_free(src));
  CHECK_OK(nrt_free(dst));
}

static void test_names(void) {
  CHECK(nrt_dtype_size(NRT_UINT16) == 2 && strcmp(nrt_dtype_name(NRT_UINT16), "uint16") == 0);
  CHECK(nrt_dtype_size(NRT_UINT32) == 4 && strcmp(nrt_dtype_name(NRT_UINT32), "uint32") == 0);
  CHECK(nrt_dtype_size(NRT_UINT64) == 8 && strcmp(nrt_dtype_name(NRT_UINT64), "uint64") == 0);
  CHECK(nrt_dtype_size(NRT_COMPLEX64) == 8 && strcmp(nrt_dtype_name(NRT_COMPLEX64), "complex64") == 0);
  CHECK(nrt_dtype_size(NRT_COMPLEX128) == 16 &&
        strcmp(nrt_dtype_name(NRT_COMPLEX128), "complex128") == 0);
  CHECK(nrt_dtype_size(NRT_COMPLEX32) == 4 && strcmp(nrt_dtype_name(NRT_COMPLEX32), "complex32") == 0);
  for (int t = NRT_UINT16; t < NRT_DTYPE_COUNT; t++) {
    CHECK(!nrt_dtype_is_floating((nrt_dtype)t));
    CHECK(nrt_dtype_is_complex((nrt_dtype)t) == (t >= NRT_COMPLEX64));
  }
  CHECK(!nrt_dtype_is_complex(NRT_FLOAT64) && !nrt_dtype_is_complex(NRT_DTYPE_COUNT));
}

static void test_copy_pairs(void) {
  for (int t = 0; t < NRT_DTYPE_COUNT; t++)
    for (int s = 0; s < NRT_DTYPE_COUNT; s++) {
      if (t < NRT_UINT16 && s < NRT_UINT16) continue; /* test_ops covers those */
      check_pair((nrt_dtype)t, (nrt_dtype)s, 1, 1);
      check_pair((nrt_dtype)t, (nrt_dtype)s, 3, 2);
    }
}

static void test_edges(void) {
  unsigned char *buf = dev_alloc(256);
  unsigned char *h = nrt_device_to_host(buf);
  /* uint64 above 2^63 to and from float64 */
  uint64_t big = (1ull << 63) + 4096;
  memcpy(h, &big, 8);
  nrt_tensor_view v[2] = {view_1d(buf + 64, NRT_FLOAT64, 1, 1), view_1d(buf, NRT_UINT64, 1, 1)};
  nrt_op op = op_of(NRT_OP_COPY, 2, v);
  CHECK_OK(nrt_op_execute(&op));
  double d;
  memcpy(&d, h + 64, 8);
  CHECK(d == 9223372036854779904.0);
  v[0] = view_1d(buf + 128, NRT_UINT64, 1, 1);
  v[1] = view_1d(buf + 64, NRT_FLOAT64, 1, 1);
  op = op_of(NRT_OP_COPY, 2, v);
  CHECK_OK(nrt_op_execute(&op));
  uint64_t back;
  memcpy(&back, h + 128, 8);
  CHECK(back == big);
  /* uint64 to int64 keeps the bits; uint32 max to float64 exactly */
  v[0] = view_1d(buf + 64, NRT_INT64, 1, 1);
  v[1] = view_1d(buf, NRT_UINT64, 1, 1);
  op = op_of(NRT_OP_COPY, 2, v);
  CHECK_OK(nrt_op_execute(&op));
  int64_t as_signed;
  memcpy(&as_signed, h + 64, 8);
  CHECK(as_signed == (int64_t)big);
  uint32_t u32 = 0xffffffffu;
  memcpy(h, &u32, 4);
  v[0] = view_1d(buf + 64, NRT_FLOAT64, 1, 1);
  v[1] = view_1d(buf, NRT_UINT32, 1, 1);
  op = op_of(NRT_OP_COPY, 2, v);
  CHECK_OK(nrt_op_execute(&op));
  memcpy(&d, h + 64, 8);
  CHECK(d == 4294967295.0);
  /* complex to bool: either part counts; complex128 -> complex64 rounds both */
  float c[2] = {0.0f, -0.0f};
  memcpy(h, c, 8);
  c[1] = 1e-30f;
  memcpy(h + 8, c, 8);
  v[0] = view_1d(buf + 64, NRT_BOOL, 2, 1);
  v[1] = view_1d(buf, NRT_COMPLEX64, 2, 1);
  op = op_of(NRT_OP_COPY, 2, v);
  CHECK_OK(nrt_op_execute(&op));
  CHECK(h[64] == 0 && h[65] == 1);
  double z[2] = {0.1, -1e300};
  memcpy(h, z, 16);
  v[0] = view_1d(buf + 64, NRT_COMPLEX64, 1, 1);
  v[1] = view_1d(buf, NRT_COMPLEX128, 1, 1);
  op = op_of(NRT_OP_COPY, 2, v);
  CHECK_OK(nrt_op_execute(&op));
  memcpy(c, h + 64, 8);
  CHECK(c[0] == 0.1f && isinf(c[1]) && c[1] < 0);
  CHECK_OK(nrt_free(buf));
}

static void test_flags_and_fill(void) {
  enum { M = 5 };
  double *src = dev_alloc(M * 16), *dst = dev_alloc(M * 16 * 2);
  double *hs = nrt_device_to_host(src), *hd = nrt_device_to_host(dst);
  for (int k = 0; k < 2 * M; k++) hs[k] = k % 3 == 0 ? 0.0 : k * 0.5 - 2;
  for (int64_t flags = 0; flags < 4; flags++) {
    nrt_tensor_view v[2] = {view_1d(dst, NRT_COMPLEX128, M, 2), view_1d(src, NRT_COMPLEX128, M, 1)};
    nrt_op op = op_of(NRT_OP_COPY, 2, v);
    op.num_scalars = 1;
    op.scalars[0].i = flags;
    CHECK_OK(nrt_op_execute(&op));
    int bad = 0;
    for (int k = 0; k < M; k++) {
      double re = hs[2 * k], im = hs[2 * k + 1];
      if (flags & 2) re = -re, im = -im;
      if (flags & 1) im = -im;
      double got_re = hd[4 * k], got_im = hd[4 * k + 1];
      bad += memcmp(&got_re, &re, 8) != 0 || memcmp(&got_im, &im, 8) != 0; /* signed zeros too */
    }
    CHECK(bad == 0);
    /* a real dst: conjugation is nothing, negation flips the sign */
    v[0] = view_1d(dst, NRT_FLOAT32, M, 1);
    op = op_of(NRT_OP_COPY, 2, v);
    op.num_scalars = 1;
    op.scalars[0].i = flags;
    CHECK_OK(nrt_op_execute(&op));
    const float *f = (const float *)hd;
    bad = 0;
    for (int k = 0; k < M; k++) {
      float want = (float)hs[2 * k];
      if (flags & 2) want = -want;
      bad += memcmp(&f[k], &want, 4) != 0;
    }
    CHECK(bad == 0);
  }
  nrt_tensor_view v[2] = {view_1d(dst, NRT_COMPLEX64, 1, 1), view_1d(src, NRT_COMPLEX64, 1, 1)};
  nrt_op op = op_of(NRT_OP_COPY, 2, v);
  op.num_scalars = 1;
  op.scalars[0].i = 4;
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);

  /* FILL: complex with and without an imaginary part, uint64 above 2^63 */
  nrt_tensor_view fv = view_1d(dst, NRT_COMPLEX64, 3, 2);
  op = op_of(NRT_OP_FILL, 1, &fv);
  op.num_scalars = 2;
  op.scalars[0].is_float = 1;
  op.scalars[0].f = 1.5;
  op.scalars[1].is_float = 1;
  op.scalars[1].f = -2.0;
  memset(hd, 0, M * 32);
  CHECK_OK(nrt_op_execute(&op));
  const float *f = (const float *)hd;
  CHECK(f[0] == 1.5f && f[1] == -2.0f && f[2] == 0.0f && f[4] == 1.5f && f[5] == -2.0f);
  fv = view_1d(dst, NRT_COMPLEX128, 2, 1);
  op = op_of(NRT_OP_FILL, 1, &fv);
  op.num_scalars = 1;
  op.scalars[0].i = 3;
  CHECK_OK(nrt_op_execute(&op));
  CHECK(hd[0] == 3.0 && hd[1] == 0.0 && hd[2] == 3.0 && hd[3] == 0.0);
  fv = view_1d(dst, NRT_UINT64, 1, 1);
  op = op_of(NRT_OP_FILL, 1, &fv);
  op.num_scalars = 1;
  op.scalars[0].i = INT64_MIN + 7; /* the bits of 2^63 + 7 */
  CHECK_OK(nrt_op_execute(&op));
  uint64_t u;
  memcpy(&u, hd, 8);
  CHECK(u == (1ull << 63) + 7);
  op.num_scalars = 2; /* an imaginary part needs a complex dst */
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_OK(nrt_free(src));
  CHECK_OK(nrt_free(dst));
}

static void test_refusals(void) {
  float *buf = dev_alloc(256);
  /* A kernel that does not take the dtype is refused before it runs. */
  nrt_tensor_view v[3] = {view_1d(buf, NRT_COMPLEX64, 4, 1), view_1d(buf + 8, NRT_COMPLEX64, 4, 1),
                          view_1d(buf + 16, NRT_COMPLEX64, 4, 1)};
  nrt_op op = op_of(NRT_OP_MUL, 3, v);
  op.compute_dtype = NRT_COMPLEX64;
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_UNSUPPORTED);
  CHECK(strstr(nrt_last_error(), "mul") && strstr(nrt_last_error(), "complex64"));
  op.compute_dtype = NRT_FLOAT32; /* an operand alone is enough */
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_UNSUPPORTED);
  nrt_tensor_view u[2] = {view_1d(buf, NRT_FLOAT32, 4, 1), view_1d(buf + 8, NRT_UINT32, 4, 1)};
  op = op_of(NRT_OP_NEG, 2, u);
  op.compute_dtype = NRT_FLOAT32;
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_UNSUPPORTED);
  /* ... through a stream too: refused at launch */
  nrt_stream_t s;
  CHECK_OK(nrt_stream_get_default(0, &s));
  CHECK_STATUS(nrt_launch(s, &op), NRT_ERROR_UNSUPPORTED);
  CHECK_OK(nrt_stream_synchronize(s));
  CHECK(nrt_op_accepts_dtype(NRT_OP_COPY, NRT_COMPLEX128));
  CHECK(nrt_op_accepts_dtype(NRT_OP_INDEX_SELECT, NRT_COMPLEX64));
  CHECK(!nrt_op_accepts_dtype(NRT_OP_INDEX_SELECT, NRT_COMPLEX128));
  CHECK(nrt_op_accepts_dtype(NRT_OP_ADD, NRT_FLOAT64));
  CHECK(!nrt_op_accepts_dtype(NRT_OP_COPY, NRT_DTYPE_COUNT));
  CHECK_OK(nrt_free(buf));
}

/* complex32: each part rounds to float16 (nearest even, overflow to
 * infinity) on the way in; conj/neg flags and FILL's imaginary part act on
 * the float16 halves. */
static void test_complex32(void) {
  unsigned char *buf = dev_alloc(256);
  unsigned char *h = nrt_device_to_host(buf);
  float c[4] = {1.0f + 0x1p-11f, 65520.0f, -0x1p-25f, 0x1.8p-24f}; /* tie, overflow, underflows */
  memcpy(h, c, 16);
  nrt_tensor_view v[2] = {view_1d(buf + 64, NRT_COMPLEX32, 2, 1), view_1d(buf, NRT_COMPLEX64, 2, 1)};
  nrt_op op = op_of(NRT_OP_COPY, 2, v);
  op.num_scalars = 1;
  op.scalars[0].i = 1; /* conjugate */
  CHECK_OK(nrt_op_execute(&op));
  uint16_t got[4];
  memcpy(got, h + 64, 8);
  CHECK(got[0] == 0x3c00 && got[1] == 0xfc00 && got[2] == 0x8000 && got[3] == 0x8002);
  nrt_tensor_view fv = view_1d(buf + 64, NRT_COMPLEX32, 2, 1);
  op = op_of(NRT_OP_FILL, 1, &fv);
  op.num_scalars = 2;
  op.scalars[0].is_float = 1;
  op.scalars[0].f = 0.1;
  op.scalars[1].is_float = 1;
  op.scalars[1].f = -1e9;
  CHECK_OK(nrt_op_execute(&op));
  memcpy(got, h + 64, 8);
  CHECK(got[0] == 0x2e66 && got[1] == 0xfc00 && got[2] == 0x2e66 && got[3] == 0xfc00);
  CHECK(nrt_op_accepts_dtype(NRT_OP_INDEX_SELECT, NRT_COMPLEX32));
  CHECK(!nrt_op_accepts_dtype(NRT_OP_ADD, NRT_COMPLEX32));
  CHECK(!nrt_op_accepts_dtype(NRT_OP_LOGCUMSUMEXP, NRT_COMPLEX32)); /* no complex32 scan kernel */
  CHECK_OK(nrt_free(buf));
}

int main(void) {
  RUN(test_names);
  RUN(test_copy_pairs);
  RUN(test_edges);
  RUN(test_flags_and_fill);
  RUN(test_complex32);
  RUN(test_refusals);
  return CHECK_MAIN_RESULT();
}
