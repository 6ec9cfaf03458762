/* FRACTIONAL_MAX_POOL (ops/vision/fractional_pool.c) against a plain twin
 * written here: the window starts from the samples by Graham's formula in
 * double, every window scanned for the last NaN or the first largest
 * value. float64 2-d and 3-d, NCDHW and channels-last strides, NaN and
 * -inf planes; and descriptors that must fail cleanly. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

static uint64_t rng_state = 0xbb67ae8584caa73bu;
static double rnd01(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (double)(rng_state >> 11) * 0x1p-53;
}

static nrt_tensor_view make(nrt_dtype t, const int64_t shape[5], int cl) {
  nrt_tensor_view v;
  memset(&v, 0, sizeof v);
  int64_t numel = 1;
  for (int d = 0; d < 5; d++) numel *= shape[d], v.shape[d] = shape[d];
  CHECK_OK(nrt_malloc(0, (size_t)(numel > 0 ? numel : 1) * nrt_dtype_size(t), &v.data));
  v.dtype = t;
  v.ndim = 5;
  int64_t C = shape[1], D = shape[2], H = shape[3], W = shape[4];
  if (cl)
    v.strides[1] = 1, v.strides[4] = C, v.strides[3] = C * W, v.strides[2] = C * W * H;
  else
    v.strides[4] = 1, v.strides[3] = W, v.strides[2] = W * H, v.strides[1] = W * H * D;
  v.strides[0] = C * D * H * W;
  return v;
}

ORACLE_CODE static char *elem(const nrt_tensor_view *v, int64_t n, int64_t c, int64_t d, int64_t h, int64_t w) {
  int64_t off = n * v->strides[0] + c * v->strides[1] + d * v->strides[2] + h * v->strides[3] + w * v->strides[4];
  return (char *)nrt_device_to_host(v->data) + off * (int64_t)nrt_dtype_size(v->dtype);
}

ORACLE_CODE static int64_t start_of(double u, int64_t in, int64_t out, int64_t k, int64_t o) {
  if (o == out - 1) return in - k;
  double a = (double)(in - k) / (double)(out - 1);
  return (int64_t)(((double)o + u) * a) - (int64_t)(u * a);
}

ORACLE_CODE static void check(int dims, const int64_t in_shape[5], const int64_t out_shape[5], const int64_t k[3],
                              int cl) {
  nrt_tensor_view x = make(NRT_FLOAT64, in_shape, cl), y = make(NRT_FLOAT64, out_shape, cl),
                  ix = make(NRT_INT64, out_shape, !cl);
  int64_t N = in_shape[0], C = in_shape[1];
  nrt_tensor_view s;
  memset(&s, 0, sizeof s);
  CHECK_OK(nrt_malloc(0, (size_t)(N * C * dims) * sizeof(double), &s.data));
  s.dtype = NRT_FLOAT64, s.ndim = 3, s.shape[0] = N, s.shape[1] = C, s.shape[2] = dims;
  s.strides[2] = 1, s.strides[1] = dims, s.strides[0] = C * dims;
  double *u = nrt_device_to_host(s.data);
  for (int64_t i = 0; i < N * C * dims; i++) u[i] = rnd01();
  for (int64_t n = 0; n < N; n++)
    for (int64_t c = 0; c < C; c++)
      for (int64_t d = 0; d < in_shape[2]; d++)
        for (int64_t h = 0; h < in_shape[3]; h++)
          for (int64_t w = 0; w < in_shape[4]; w++) {
            double v = round(rnd01() * 16) - 8; /* ties: the first maximum wins */
            if (c == 1) v = -INFINITY;
            if (c == 2 && (h + w) % 5 == 0) v = NAN;
            *(double *)elem(&x, n, c, d, h, w) = v;
          }
  nrt_op op;
  memset(&op, 0, sizeof op);
  op.code = NRT_OP_FRACTIONAL_MAX_POOL;
  op.num_outputs = 2;
  op.num_operands = 4;
  op.operands[0] = y, op.operands[1] = ix, op.operands[2] = x, op.operands[3] = s;
  for (int d = 0; d < 3; d++) op.scalars[d].i = k[d];
  op.num_scalars = 3;
  CHECK_OK(nrt_op_execute(&op));
  int bad = 0;
  for (int64_t n = 0; n < N; n++)
    for (int64_t c = 0; c < C; c++) {
      const double *uu = u + (n * C + c) * dims;
      double ud = dims == 3 ? uu[0] : 0, uh = dims == 3 ? uu[1] : uu[1], uw = dims == 3 ? uu[2] : uu[0];
      for (int64_t od = 0; od < out_shape[2]; od++)
        for (int64_t oh = 0; oh < out_shape[3]; oh++)
          for (int64_t ow = 0; ow < out_shape[4]; ow++) {
            int64_t d0 = dims == 3 ? start_of(ud, in_shape[2], out_shape[2], k[0], od) : 0;
            int64_t h0 = start_of(uh, in_shape[3], out_shape[3], k[1], oh);
            int64_t w0 = start_of(uw, in_shape[4], out_shape[4], k[2], ow);
            double best = -INFINITY;
            int64_t at = (d0 * in_shape[3] + h0) * in_shape[4] + w0;
            for (int64_t d = d0; d < d0 + k[0]; d++)
              for (int64_t h = h0; h < h0 + k[1]; h++)
                for (int64_t w = w0; w < w0 + k[2]; w++) {
                  double v = *(double *)elem(&x, n, c, d, h, w);
                  if (v > best || isnan(v)) best = v, at = (d * in_shape[3] + h) * in_shape[4] + w;
                }
            double got = *(double *)elem(&y, n, c, od, oh, ow);
            int64_t got_i = *(int64_t *)elem(&ix, n, c, od, oh, ow);
            if (got_i != at || !(got == best || (isnan(got) && isnan(best)))) bad++;
          }
    }
  CHECK(bad == 0);
  nrt_free(x.data), nrt_free(y.data), nrt_free(ix.data), nrt_free(s.data);
}

static void test_windows_and_maxima_match_the_formula(void) {
  const int64_t k2[3] = {1, 2, 3}, k3[3] = {2, 2, 3}, k1[3] = {1, 1, 1};
  for (int cl = 0; cl < 2; cl++) {
    const int64_t in2[5] = {2, 3, 1, 9, 11}, out2[5] = {2, 3, 1, 5, 4}, one2[5] = {2, 3, 1, 1, 1};
    check(2, in2, out2, k2, cl);
    check(2, in2, one2, k2, cl);
    const int64_t in3[5] = {2, 3, 6, 9, 11}, out3[5] = {2, 3, 3, 5, 4}, same3[5] = {2, 3, 5, 8, 10};
    check(3, in3, out3, k3, cl);
    check(3, in3, same3, k1, cl);
  }
}

static void test_bad_descriptors_fail_cleanly(void) {
  const int64_t in[5] = {1, 1, 1, 4, 4}, out[5] = {1, 1, 1, 2, 2};
  nrt_tensor_view x = make(NRT_FLOAT32, in, 0), y = make(NRT_FLOAT32, out, 0), ix = make(NRT_INT64, out, 0);
  nrt_tensor_view s;
  memset(&s, 0, sizeof s);
  CHECK_OK(nrt_malloc(0, 2 * sizeof(float), &s.data));
  s.dtype = NRT_FLOAT32, s.ndim = 3, s.shape[0] = 1, s.shape[1] = 1, s.shape[2] = 2, s.strides[2] = 1;
  nrt_op op;
  memset(&op, 0, sizeof op);
  op.code = NRT_OP_FRACTIONAL_MAX_POOL;
  op.num_outputs = 2, op.num_operands = 4, op.num_scalars = 3;
  op.operands[0] = y, op.operands[1] = ix, op.operands[2] = x, op.operands[3] = s;
  op.scalars[0].i = 1, op.scalars[1].i = 4, op.scalars[2].i = 2; /* 2 outputs + 4 - 1 > 4 inputs */
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  op.scalars[1].i = 2, op.scalars[0].i = 2; /* a depth window on a 2-d image */
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  op.scalars[0].i = 1;
  op.operands[1].dtype = NRT_INT32;
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  op.operands[1].dtype = NRT_INT64;
  op.operands[3].dtype = NRT_FLOAT64;
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_UNSUPPORTED);
  op.operands[3].dtype = NRT_FLOAT32;
  CHECK_OK(nrt_op_execute(&op));
  nrt_free(x.data), nrt_free(y.data), nrt_free(ix.data), nrt_free(s.data);
}

int main(void) {
  RUN(test_windows_and_maxima_match_the_formula);
  RUN(test_bad_descriptors_fail_cleanly);
  return CHECK_MAIN_RESULT();
}
