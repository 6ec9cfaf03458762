/* The volumetric upsampling kernels (ops/vision/upsample3d.c) against a
 * plain twin written here from PyTorch's index formulas, in double: the
 * nearest (floor(o * in / out), or floor((o + 0.5) * in / out) for
 * nearest-exact) and trilinear (align_corners on and off, given scales)
 * source positions, every output a product of per-dim weights, and the
 * backward ops as the same weights scattered. NCDHW and channels_last_3d,
 * float32 and float64, uint8 for nearest. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

static uint64_t rng_state = 0x6a09e667f3bcc909u;
static double rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (double)(rng_state >> 11) * 0x1p-53 * 2.0 - 1.0;
}

typedef struct tensor {
  nrt_tensor_view v;
  int64_t numel;
} tensor;

ORACLE_CODE static double get(nrt_dtype t, const void *p) {
  return t == NRT_FLOAT32 ? *(const float *)p : t == NRT_UINT8 ? *(const uint8_t *)p : *(const double *)p;
}

ORACLE_CODE static void set(nrt_dtype t, void *p, double v) {
  if (t == NRT_FLOAT32) *(float *)p = (float)v;
  else if (t == NRT_UINT8) *(uint8_t *)p = (uint8_t)v;
  else *(double *)p = v;
}

static tensor make(nrt_dtype t, int64_t n, int64_t c, const int64_t s[3], int cl) {
  tensor x;
  memset(&x, 0, sizeof x);
  int64_t d = s[0], h = s[1], w = s[2];
  x.numel = n * c * d * h * w;
  CHECK_OK(nrt_malloc(0, (size_t)(x.numel > 0 ? x.numel : 1) * nrt_dtype_size(t), &x.v.data));
  x.v.dtype = t;
  x.v.ndim = 5;
  int64_t shape[5] = {n, c, d, h, w};
  for (int i = 0; i < 5; i++) x.v.shape[i] = shape[i];
  if (cl) {
    x.v.strides[1] = 1, x.v.strides[4] = c, x.v.strides[3] = c * w, x.v.strides[2] = c * w * h;
  } else {
    x.v.strides[4] = 1, x.v.strides[3] = w, x.v.strides[2] = w * h, x.v.strides[1] = w * h * d;
  }
  x.v.strides[0] = c * d * h * w;
  return x;
}

ORACLE_CODE static void *at(const tensor *x, int64_t pl, int64_t d, int64_t h, int64_t w) {
  const int64_t *s = x->v.strides;
  int64_t off = pl / x->v.shape[1] * s[0] + pl % x->v.shape[1] * s[1] + d * s[2] + h * s[3] + w * s[4];
  return (char *)nrt_device_to_host(x->v.data) + off * (int64_t)nrt_dtype_size(x->v.dtype);
}

/* Source positions and weights of output o along a dim, in double. */
ORACLE_CODE static void source(int linear, int flag, double scale, int64_t in, int64_t out, int64_t o, int64_t i[2],
                               double l[2]) {
  if (!linear) {
    double step = scale > 0 ? 1.0 / scale : (double)in / (double)out;
    int64_t k = flag ? (int64_t)floor(((double)o + 0.5) * step) : (int64_t)floor((double)o * step);
    i[0] = i[1] = k < in - 1 ? k : in - 1;
    l[0] = 1, l[1] = 0;
    return;
  }
  double s = flag ? (out > 1 ? (double)(in - 1) / (double)(out - 1) : 0) : scale > 0 ? 1.0 / scale : (double)in / (double)out;
  double src = flag ? s * (double)o : s * ((double)o + 0.5) - 0.5;
  if (src < 0) src = 0;
  i[0] = (int64_t)src < in - 1 ? (int64_t)src : in - 1;
  i[1] = i[0] + (i[0] < in - 1);
  l[1] = src - (double)i[0];
  l[0] = 1 - l[1];
}

static nrt_op new_op(nrt_op_code code, const tensor *a, const tensor *b, const double sc[3], int flag) {
  nrt_op op;
  memset(&op, 0, sizeof op);
  op.code = code;
  op.num_outputs = 1;
  op.operands[0] = a->v, op.operands[1] = b->v;
  op.num_operands = 2;
  for (int d = 0; d < 3; d++) op.scalars[d].is_float = 1, op.scalars[d].f = sc[d];
  op.scalars[3].i = flag;
  op.num_scalars = 4;
  return op;
}

ORACLE_CODE static void check(nrt_dtype t, int linear, int flag, const int64_t in[3], const int64_t out[3],
                              const double sc[3], int cl) {
  int64_t P = 6;
  tensor x = make(t, 2, 3, in, cl), y = make(t, 2, 3, out, cl), gy = make(t, 2, 3, out, !cl), gx = make(t, 2, 3, in, cl);
  for (int64_t pl = 0; pl < P; pl++)
    for (int64_t d = 0; d < in[0]; d++)
      for (int64_t h = 0; h < in[1]; h++)
        for (int64_t w = 0; w < in[2]; w++)
          set(t, at(&x, pl, d, h, w), t == NRT_UINT8 ? floor((rnd() + 1) * 127) : round(rnd() * 64) / 64);
  for (int64_t pl = 0; pl < P; pl++)
    for (int64_t d = 0; d < out[0]; d++)
      for (int64_t h = 0; h < out[1]; h++)
        for (int64_t w = 0; w < out[2]; w++) set(t, at(&gy, pl, d, h, w), round(rnd() * 64) / 64);
  int64_t inn = in[0] * in[1] * in[2];
  double *want_y = calloc((size_t)(P * out[0] * out[1] * out[2]), sizeof(double));
  double *want_g = calloc((size_t)(P * inn), sizeof(double));
  int64_t k = 0;
  for (int64_t pl = 0; pl < P; pl++)
    for (int64_t a = 0; a < out[0]; a++)
      for (int64_t b = 0; b < out[1]; b++)
        for (int64_t e = 0; e < out[2]; e++, k++) {
          int64_t id[2], ih[2], iw[2];
          double ld[2], lh[2], lw[2];
          source(linear, flag, sc[0], in[0], out[0], a, id, ld);
          source(linear, flag, sc[1], in[1], out[1], b, ih, lh);
          source(linear, flag, sc[2], in[2], out[2], e, iw, lw);
          double g = get(t, at(&gy, pl, a, b, e));
          for (int p = 0; p < 2; p++)
            for (int q = 0; q < 2; q++)
              for (int r = 0; r < 2; r++) {
                double wt = ld[p] * lh[q] * lw[r];
                if (wt == 0) continue;
                want_y[k] += wt * get(t, at(&x, pl, id[p], ih[q], iw[r]));
                want_g[pl * inn + (id[p] * in[1] + ih[q]) * in[2] + iw[r]] += wt * g;
              }
        }
  double tol = t == NRT_FLOAT64 ? 1e-12 : t == NRT_FLOAT32 ? 1e-5 : 0;
  nrt_op op = new_op(linear ? NRT_OP_UPSAMPLE_TRILINEAR3D : NRT_OP_UPSAMPLE_NEAREST3D, &y, &x, sc, flag);
  CHECK_OK(nrt_op_execute(&op));
  int bad = 0;
  k = 0;
  for (int64_t pl = 0; pl < P; pl++)
    for (int64_t a = 0; a < out[0]; a++)
      for (int64_t b = 0; b < out[1]; b++)
        for (int64_t e = 0; e < out[2]; e++, k++)
          if (!(fabs(get(t, at(&y, pl, a, b, e)) - want_y[k]) <= tol * (1 + fabs(want_y[k])))) bad++;
  CHECK(bad == 0);
  if (t != NRT_UINT8) {
    op = new_op(linear ? NRT_OP_UPSAMPLE_TRILINEAR3D_BACKWARD : NRT_OP_UPSAMPLE_NEAREST3D_BACKWARD, &gx, &gy, sc,
                flag);
    CHECK_OK(nrt_op_execute(&op));
    bad = 0;
    for (int64_t pl = 0; pl < P; pl++)
      for (int64_t d = 0; d < in[0]; d++)
        for (int64_t h = 0; h < in[1]; h++)
          for (int64_t w = 0; w < in[2]; w++) {
            double want = want_g[pl * inn + (d * in[1] + h) * in[2] + w];
            if (!(fabs(get(t, at(&gx, pl, d, h, w)) - want) <= tol * 10 * (1 + fabs(want)))) bad++;
          }
    CHECK(bad == 0);
  }
  free(want_y), free(want_g);
  nrt_free(x.v.data), nrt_free(y.v.data), nrt_free(gy.v.data), nrt_free(gx.v.data);
}

static void test_upsampling_matches_index_formulas(void) {
  const int64_t in[3] = {3, 4, 5}, sizes[][3] = {{6, 8, 10}, {5, 7, 3}, {3, 4, 5}, {1, 1, 1}};
  const double none[3] = {0, 0, 0}, given[3] = {2.0, 1.75, 0.6};
  for (int cl = 0; cl < 2; cl++)
    for (int linear = 0; linear < 2; linear++)
      for (int flag = 0; flag < 2; flag++) {
        for (int s = 0; s < 4; s++) {
          check(NRT_FLOAT64, linear, flag, in, sizes[s], none, cl);
          check(NRT_FLOAT32, linear, flag, in, sizes[s], none, cl);
          if (!linear) check(NRT_UINT8, linear, flag, in, sizes[s], none, cl);
        }
        const int64_t scaled[3] = {6, 7, 3};
        if (!(linear && flag)) check(NRT_FLOAT64, linear, flag, in, scaled, given, cl);
      }
}

static void test_bad_descriptors_fail_cleanly(void) {
  const int64_t s[3] = {2, 2, 2};
  const double none[3] = {0, 0, 0};
  tensor x = make(NRT_UINT8, 1, 1, s, 0), y = make(NRT_UINT8, 1, 1, s, 0);
  nrt_op op = new_op(NRT_OP_UPSAMPLE_TRILINEAR3D, &y, &x, none, 0);
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_UNSUPPORTED); /* linear is floating only */
  op.num_scalars = 2;
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  nrt_free(x.v.data), nrt_free(y.v.data);
}

int main(void) {
  RUN(test_upsampling_matches_index_formulas);
  RUN(test_bad_descriptors_fail_cleanly);
  return CHECK_MAIN_RESULT();
}
