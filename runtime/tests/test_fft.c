/* FFT_C2C, FFT_R2C and FFT_C2R against the reference twin: the O(n^2) DFT
 * accumulated in long double, over lengths 1..64, primes (97, 127, 1009:
 * Bluestein), powers of two up to 4096, 1000 and 3072, in float32 and
 * float64. The error bound is relative to the norm of the result, as FFT
 * libraries state theirs: ||X - X_ref|| <= 2 eps (log2(n) + 1) ||X_ref||
 * (the largest seen is about 0.15 of that). Also
 * strided batches (the axis not last, non-unit strides), column passes
 * (blocks of lines gathered together), in-place C2C, equal
 * lines giving equal bits (lines are split over threads), the
 * normalization scale, and the refusals. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

static uint64_t rng_state = 7;
static double urand(void) {
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(rng_state >> 11) / 9007199254740992.0 * 2 - 1;
}

/* ---- the twin --------------------------------------------------------------- */

/* y[k] = sum_j x[j] exp(sign 2 pi i jk / n), in long double. */
static void twin_dft(const long double *xr, const long double *xi, int64_t n, int sign, long double *yr,
                     long double *yi) {
  long double *c = malloc(sizeof(long double) * (size_t)n), *s = malloc(sizeof(long double) * (size_t)n);
  const long double two_pi = 6.283185307179586476925286766559005768L;
  for (int64_t j = 0; j < n; j++) c[j] = cosl(two_pi * j / n), s[j] = sign * sinl(two_pi * j / n);
  for (int64_t k = 0; k < n; k++) {
    long double ar = 0, ai = 0;
    int64_t idx = 0;
    for (int64_t j = 0; j < n; j++) {
      ar += xr[j] * c[idx] - xi[j] * s[idx];
      ai += xr[j] * s[idx] + xi[j] * c[idx];
      idx += k;
      if (idx >= n) idx -= n;
    }
    yr[k] = ar, yi[k] = ai;
  }
  free(c), free(s);
}

/* ---- device buffers ------------------------------------------------------------ */

typedef struct buf {
  void *dev;
  nrt_dtype dtype;
} buf;

static buf make_buf(nrt_dtype d, int64_t count) {
  buf b = {NULL, d};
  CHECK_OK(nrt_malloc(0, (size_t)count * nrt_dtype_size(d) + 16, &b.dev));
  return b;
}
static double bget(const buf *b, int64_t i) {
  const char *p = nrt_device_to_host(b->dev);
  return b->dtype == NRT_FLOAT32 ? ((const float *)p)[i] : ((const double *)p)[i];
}
static void bset(buf *b, int64_t i, double v) {
  char *p = nrt_device_to_host(b->dev);
  if (b->dtype == NRT_FLOAT32)
    ((float *)p)[i] = (float)v;
  else
    ((double *)p)[i] = v;
}

static nrt_tensor_view view(const buf *b, int ndim, const int64_t *shape, const int64_t *strides) {
  nrt_tensor_view v;
  memset(&v, 0, sizeof v);
  v.data = b->dev, v.dtype = b->dtype, v.ndim = ndim;
  for (int d = 0; d < ndim; d++) v.shape[d] = shape[d], v.strides[d] = strides[d];
  return v;
}

static nrt_op fft_op(nrt_op_code code, nrt_tensor_view out, nrt_tensor_view in, int64_t axis, int64_t flag,
                     double scale) {
  nrt_op op;
  memset(&op, 0, sizeof op);
  op.code = code, op.num_outputs = 1, op.num_operands = 2;
  op.operands[0] = out, op.operands[1] = in;
  op.num_scalars = 3;
  op.scalars[0].i = axis;
  if (code == NRT_OP_FFT_C2C) {
    op.scalars[1].i = flag;
    op.scalars[2].is_float = 1, op.scalars[2].f = scale;
  } else {
    op.scalars[1].is_float = 1, op.scalars[1].f = scale;
    op.scalars[2].i = flag;
  }
  return op;
}

static double eps_of(nrt_dtype d) { return d == NRT_FLOAT32 ? 1.2e-7 : 2.3e-16; }
static double bound(nrt_dtype d, int64_t n) { return 2 * eps_of(d) * (log2((double)n) + 1); }
static double worst_ratio; /* largest error / bound seen, reported at the end */

static void check_close(const long double *rr, const long double *ri, const double *gr, const double *gi,
                        int64_t count, nrt_dtype d, int64_t n, const char *what) {
  long double err = 0, norm = 0;
  for (int64_t k = 0; k < count; k++) {
    const long double er = gr[k] - rr[k], ei = gi ? gi[k] - ri[k] : 0;
    err += er * er + ei * ei;
    norm += rr[k] * rr[k] + (ri ? ri[k] * ri[k] : 0);
  }
  const double rel = norm > 0 ? (double)sqrtl(err / norm) : (double)sqrtl(err);
  if (rel / bound(d, n) > worst_ratio) worst_ratio = rel / bound(d, n);
  if (!(rel <= bound(d, n))) {
    fprintf(stderr, "%s n=%lld %s: relative error %.3g > bound %.3g\n", what, (long long)n, nrt_dtype_name(d), rel,
            bound(d, n));
    check_failed();
  }
}

/* One length in one dtype: C2C both ways, R2C onesided and full, C2R;
 * batch 2 along axis 0 of a [n, 2, 2] layout (the axis not last), so the
 * lines are strided. */
static void length_case(int64_t n, nrt_dtype d) {
  const int64_t batch = 2;
  long double *xr = malloc(sizeof(long double) * (size_t)n * 2), *xi = xr + n;
  long double *yr = malloc(sizeof(long double) * (size_t)n * 2), *yi = yr + n;
  double *gr = malloc(sizeof(double) * (size_t)n * 2), *gi = gr + n;
  buf cin = make_buf(d, n * batch * 2), cout = make_buf(d, n * batch * 2), rin = make_buf(d, n * batch * 3);
  buf rout = make_buf(d, n * batch);
  /* complex [n, batch, 2] contiguous: the axis is dim 0 */
  const int64_t cshape[3] = {n, batch, 2}, cstrides[3] = {batch * 2, 2, 1};
  /* real [n, batch] with stride 3 along the axis (every third value) */
  const int64_t rshape[2] = {n, batch}, rstrides[2] = {batch * 3, 1};
  for (int64_t i = 0; i < n * batch * 2; i++) bset(&cin, i, urand());
  for (int64_t i = 0; i < n * batch * 3; i++) bset(&rin, i, urand());

  for (int forward = 0; forward <= 1; forward++) {
    nrt_op op = fft_op(NRT_OP_FFT_C2C, view(&cout, 3, cshape, cstrides), view(&cin, 3, cshape, cstrides), 0, forward,
                       1.0);
    CHECK_OK(nrt_op_execute(&op));
    for (int64_t b = 0; b < batch; b++) {
      for (int64_t j = 0; j < n; j++) xr[j] = bget(&cin, j * batch * 2 + b * 2), xi[j] = bget(&cin, j * batch * 2 + b * 2 + 1);
      twin_dft(xr, xi, n, forward ? -1 : 1, yr, yi);
      for (int64_t k = 0; k < n; k++) gr[k] = bget(&cout, k * batch * 2 + b * 2), gi[k] = bget(&cout, k * batch * 2 + b * 2 + 1);
      check_close(yr, yi, gr, gi, n, d, n, forward ? "c2c forward" : "c2c inverse");
    }
  }
  for (int onesided = 0; onesided <= 1; onesided++) {
    const int64_t m = onesided ? n / 2 + 1 : n;
    const int64_t oshape[3] = {m, batch, 2};
    nrt_op op = fft_op(NRT_OP_FFT_R2C, view(&cout, 3, oshape, cstrides), view(&rin, 2, rshape, rstrides), 0, onesided,
                       1.0);
    CHECK_OK(nrt_op_execute(&op));
    for (int64_t b = 0; b < batch; b++) {
      for (int64_t j = 0; j < n; j++) xr[j] = bget(&rin, j * batch * 3 + b), xi[j] = 0;
      twin_dft(xr, xi, n, -1, yr, yi);
      for (int64_t k = 0; k < m; k++) gr[k] = bget(&cout, k * batch * 2 + b * 2), gi[k] = bget(&cout, k * batch * 2 + b * 2 + 1);
      check_close(yr, yi, gr, gi, m, d, n, onesided ? "r2c onesided" : "r2c full");
    }
  }
  { /* C2R from the first n/2+1 values of cin (Hermitian extension) */
    const int64_t h = n / 2;
    const int64_t ishape[3] = {h + 1, batch, 2}, oshape[2] = {n, batch}, ostrides[2] = {batch, 1};
    nrt_op op = fft_op(NRT_OP_FFT_C2R, view(&rout, 2, oshape, ostrides), view(&cin, 3, ishape, cstrides), 0, 0, 1.0);
    op.num_scalars = 2;
    CHECK_OK(nrt_op_execute(&op));
    for (int64_t b = 0; b < batch; b++) {
      for (int64_t k = 0; k <= h; k++) xr[k] = bget(&cin, k * batch * 2 + b * 2), xi[k] = bget(&cin, k * batch * 2 + b * 2 + 1);
      xi[0] = 0;
      if (n % 2 == 0) xi[h] = 0;
      for (int64_t k = 1; k < n - h; k++) xr[n - k] = xr[k], xi[n - k] = -xi[k];
      twin_dft(xr, xi, n, 1, yr, yi);
      for (int64_t k = 0; k < n; k++) gr[k] = bget(&rout, k * batch + b);
      check_close(yr, NULL, gr, NULL, n, d, n, "c2r");
    }
  }
  nrt_free(cin.dev), nrt_free(cout.dev), nrt_free(rin.dev), nrt_free(rout.dev);
  free(xr), free(yr), free(gr);
}

static void test_lengths(void) {
  static const int64_t extra[] = {97, 127, 1009, 128, 256, 512, 1024, 2048, 4096, 1000, 3072, 4099, 2 * 1009};
  for (int di = 0; di < 2; di++) {
    const nrt_dtype d = di ? NRT_FLOAT64 : NRT_FLOAT32;
    for (int64_t n = 1; n <= 64; n++) length_case(n, d);
    for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++) {
#if defined(__SANITIZE_THREAD__)
      /* ThreadSanitizer checks the threading (test_batch_in_place_and_scale
       * splits lines over threads); the long twin DFTs of the big lengths
       * took most of its minute, and the other builds run them. */
      if (extra[i] > 1024) continue;
#endif
      length_case(extra[i], d);
    }
  }
  fprintf(stderr, "largest error / bound: %.3f\n", worst_ratio);
}

/* Many equal lines: equal bits whichever thread took each; in place; scale. */
static void test_batch_in_place_and_scale(void) {
  const int64_t lines = 300, n = 360;
  buf a = make_buf(NRT_FLOAT64, lines * n * 2), b = make_buf(NRT_FLOAT64, lines * n * 2);
  for (int64_t j = 0; j < n * 2; j++) {
    const double v = urand();
    for (int64_t l = 0; l < lines; l++) bset(&a, l * n * 2 + j, v);
  }
  const int64_t shape[3] = {lines, n, 2}, strides[3] = {n * 2, 2, 1};
  nrt_op op = fft_op(NRT_OP_FFT_C2C, view(&b, 3, shape, strides), view(&a, 3, shape, strides), 1, 1, 1.0);
  CHECK_OK(nrt_op_execute(&op));
  const double *hb = nrt_device_to_host(b.dev);
  int same = 1;
  for (int64_t l = 1; l < lines; l++) same &= memcmp(hb, hb + l * n * 2, sizeof(double) * (size_t)n * 2) == 0;
  CHECK(same);
  /* in place, inverse with scale 1/n: back to the input */
  op = fft_op(NRT_OP_FFT_C2C, view(&b, 3, shape, strides), view(&b, 3, shape, strides), 1, 0, 1.0 / n);
  CHECK_OK(nrt_op_execute(&op));
  double worst = 0;
  for (int64_t i = 0; i < lines * n * 2; i++) worst = fmax(worst, fabs(bget(&b, i) - bget(&a, i)));
  CHECK(worst < 1e-13);
  nrt_free(a.dev), nrt_free(b.dev);
}

/* A column pass (the axis far apart, the lines adjacent): the kernel
 * gathers blocks of lines; each column against the twin, out of place and
 * in place, float32 and float64, forward and inverse. */
static void test_column_blocks(void) {
  const int64_t n = 60, cols = 37;
  long double xr[60], xi[60], yr[60], yi[60];
  double gr[60], gi[60];
  for (int di = 0; di < 2; di++) {
    const nrt_dtype d = di ? NRT_FLOAT64 : NRT_FLOAT32;
    for (int in_place = 0; in_place <= 1; in_place++)
      for (int forward = 0; forward <= 1; forward++) {
        buf a = make_buf(d, n * cols * 2), b = make_buf(d, n * cols * 2);
        for (int64_t i = 0; i < n * cols * 2; i++) bset(&a, i, urand()), bset(&b, i, bget(&a, i));
        const int64_t shape[3] = {n, cols, 2}, strides[3] = {cols * 2, 2, 1};
        nrt_op op = fft_op(NRT_OP_FFT_C2C, view(&b, 3, shape, strides), view(in_place ? &b : &a, 3, shape, strides), 0,
                           forward, 0.5);
        CHECK_OK(nrt_op_execute(&op));
        for (int64_t c = 0; c < cols; c++) {
          for (int64_t k = 0; k < n; k++) xr[k] = bget(&a, k * cols * 2 + c * 2), xi[k] = bget(&a, k * cols * 2 + c * 2 + 1);
          twin_dft(xr, xi, n, forward ? -1 : 1, yr, yi);
          for (int64_t k = 0; k < n; k++) yr[k] *= 0.5L, yi[k] *= 0.5L;
          for (int64_t k = 0; k < n; k++) gr[k] = bget(&b, k * cols * 2 + c * 2), gi[k] = bget(&b, k * cols * 2 + c * 2 + 1);
          check_close(yr, yi, gr, gi, n, d, n, "c2c column blocks");
        }
        nrt_free(a.dev), nrt_free(b.dev);
      }
  }
}

static void test_refusals(void) {
  buf a = make_buf(NRT_FLOAT32, 64), b = make_buf(NRT_FLOAT32, 64);
  const int64_t cs[2] = {8, 2}, cst[2] = {2, 1}, rs[1] = {8}, rst[1] = {1}, bad[2] = {8, 3};
  nrt_op op = fft_op(NRT_OP_FFT_C2C, view(&a, 2, cs, cst), view(&b, 2, cs, cst), 1, 1, 1.0);
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT); /* axis 1 is the pair dim */
  op = fft_op(NRT_OP_FFT_C2C, view(&a, 2, bad, cst), view(&b, 2, bad, cst), 0, 1, 1.0);
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT); /* no pair dim */
  op = fft_op(NRT_OP_FFT_R2C, view(&a, 2, cs, cst), view(&b, 1, rs, rst), 0, 1, 1.0);
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT); /* onesided wants 5 values */
  op = fft_op(NRT_OP_FFT_R2C, view(&a, 2, cs, cst), view(&b, 1, rs, rst), 0, 0, 1.0);
  CHECK_OK(nrt_op_execute(&op));
  op = fft_op(NRT_OP_FFT_C2R, view(&a, 1, rs, rst), view(&b, 2, (int64_t[]){4, 2}, cst), 0, 0, 1.0);
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT); /* needs 5 values */
  op = fft_op(NRT_OP_FFT_C2C, view(&a, 2, cs, cst), view(&b, 2, cs, cst), 0, 1, 1.0);
  op.operands[1].dtype = NRT_FLOAT64;
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  op.operands[0].dtype = op.operands[1].dtype = NRT_INT32;
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  nrt_free(a.dev), nrt_free(b.dev);
}

int main(void) {
  RUN(test_lengths);
  RUN(test_batch_in_place_and_scale);
  RUN(test_column_blocks);
  RUN(test_refusals);
  return CHECK_MAIN_RESULT();
}
