/* Complex ADD (complex64, complex128): a + alpha * b against a plain twin
 * of PyTorch's CPU arithmetic (c10::complex's product, no recovery of
 * infinities), bit for bit, over every pair of parts drawn from zeros,
 * finite values, infinities and NaN; contiguous, strided and broadcast
 * operands, in place, a run long enough to split across threads; and the
 * refusals (mixed dtypes, immediates, a missing alpha). */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "check.h"
#include "view1d.h"

static const double PARTS[] = {0.0, -0.0, 1.5, -2.0, 3e38, INFINITY, -INFINITY, NAN};
#define NP (sizeof PARTS / sizeof PARTS[0])
#define NV (NP * NP)  /* complex values */
#define NPAIR (NV * NV)

static nrt_op add_op(nrt_dtype t, nrt_tensor_view o, nrt_tensor_view a, nrt_tensor_view b, double wr, double wi) {
  nrt_op op;
  memset(&op, 0, sizeof op);
  op.code = NRT_OP_ADD;
  op.compute_dtype = t;
  op.num_operands = 3;
  op.num_outputs = 1;
  op.operands[0] = o;
  op.operands[1] = a;
  op.operands[2] = b;
  op.num_scalars = 2;
  op.scalars[0] = (nrt_scalar){.is_float = 1, .f = wr};
  op.scalars[1] = (nrt_scalar){.is_float = 1, .f = wi};
  return op;
}

/* The twins: one element, the CPU's order of operations in the type. */
static void twin_f(const float *a, const float *b, float wr, float wi, float *o) {
  float pr = b[0] * wr - b[1] * wi, pi = b[0] * wi + b[1] * wr;
  o[0] = a[0] + pr;
  o[1] = a[1] + pi;
}
static void twin_d(const double *a, const double *b, double wr, double wi, double *o) {
  double pr = b[0] * wr - b[1] * wi, pi = b[0] * wi + b[1] * wr;
  o[0] = a[0] + pr;
  o[1] = a[1] + pi;
}

/* Equal bits, or both NaN (a NaN's sign and payload are not specified). */
static int same_f(float x, float y) { return (isnan(x) && isnan(y)) || memcmp(&x, &y, sizeof x) == 0; }
static int same_d(double x, double y) { return (isnan(x) && isnan(y)) || memcmp(&x, &y, sizeof x) == 0; }

static const double ALPHAS[][2] = {{1, 0}, {-1, 0}, {2.5, 0}, {0, 0}, {2, -0.5}, {0, 3}, {-0.0, 1}};
#define NALPHA (sizeof ALPHAS / sizeof ALPHAS[0])

/* Every pair (a, b) of values, as a[i] + alpha * b[i] over NPAIR elements. */
static void fill_pairs_f(float *a, float *b) {
  for (size_t i = 0; i < NPAIR; i++) {
    size_t va = i / NV, vb = i % NV;
    a[2 * i] = (float)PARTS[va / NP], a[2 * i + 1] = (float)PARTS[va % NP];
    b[2 * i] = (float)PARTS[vb / NP], b[2 * i + 1] = (float)PARTS[vb % NP];
  }
}
static void fill_pairs_d(double *a, double *b) {
  for (size_t i = 0; i < NPAIR; i++) {
    size_t va = i / NV, vb = i % NV;
    a[2 * i] = PARTS[va / NP], a[2 * i + 1] = PARTS[va % NP];
    b[2 * i] = PARTS[vb / NP], b[2 * i + 1] = PARTS[vb % NP];
  }
}

static void test_pairs_complex64(void) {
  float *dev;
  CHECK_OK(nrt_malloc(0, 3 * NPAIR * 8, (void **)&dev));
  float *h = nrt_device_to_host(dev);
  float *a = h, *b = h + 2 * NPAIR, *o = h + 4 * NPAIR;
  float *da = dev, *db = dev + 2 * NPAIR, *dout = dev + 4 * NPAIR;
  for (size_t k = 0; k < NALPHA; k++) {
    fill_pairs_f(a, b);
    nrt_op op = add_op(NRT_COMPLEX64, view_1d(dout, NRT_COMPLEX64, NPAIR, 1), view_1d(da, NRT_COMPLEX64, NPAIR, 1),
                       view_1d(db, NRT_COMPLEX64, NPAIR, 1), ALPHAS[k][0], ALPHAS[k][1]);
    CHECK_OK(nrt_op_execute(&op));
    int bad = 0;
    for (size_t i = 0; i < NPAIR; i++) {
      float want[2];
      twin_f(a + 2 * i, b + 2 * i, (float)ALPHAS[k][0], (float)ALPHAS[k][1], want);
      bad += !same_f(o[2 * i], want[0]) || !same_f(o[2 * i + 1], want[1]);
    }
    CHECK(bad == 0);
    /* in place (out is a), and b one broadcast value */
    for (size_t j = 0; j < NV; j++) {
      float keep[2 * NPAIR];
      memcpy(keep, a, sizeof keep);
      const float *bj = b + 2 * j; /* b's first NV elements are the NV values in turn */
      op = add_op(NRT_COMPLEX64, view_1d(da, NRT_COMPLEX64, NPAIR, 1), view_1d(da, NRT_COMPLEX64, NPAIR, 1),
                  view_1d(db + 2 * j, NRT_COMPLEX64, NPAIR, 0), ALPHAS[k][0], ALPHAS[k][1]);
      CHECK_OK(nrt_op_execute(&op));
      bad = 0;
      for (size_t i = 0; i < NPAIR; i++) {
        float want[2];
        twin_f(keep + 2 * i, bj, (float)ALPHAS[k][0], (float)ALPHAS[k][1], want);
        bad += !same_f(a[2 * i], want[0]) || !same_f(a[2 * i + 1], want[1]);
      }
      CHECK(bad == 0);
      memcpy(a, keep, sizeof keep);
    }
  }
  /* the CPU's results named: (1+1i) + (inf+0i) = inf + NaN i; (inf+inf i) - (-inf-inf i) = NaN + NaN i */
  a[0] = 1, a[1] = 1, b[0] = INFINITY, b[1] = 0;
  a[2] = INFINITY, a[3] = INFINITY, b[2] = -INFINITY, b[3] = -INFINITY;
  nrt_op op = add_op(NRT_COMPLEX64, view_1d(dout, NRT_COMPLEX64, 2, 1), view_1d(da, NRT_COMPLEX64, 2, 1),
                     view_1d(db, NRT_COMPLEX64, 2, 1), 1, 0);
  CHECK_OK(nrt_op_execute(&op));
  CHECK(o[0] == INFINITY && isnan(o[1]));
  op.scalars[0].f = -1; /* sub */
  CHECK_OK(nrt_op_execute(&op));
  CHECK(isnan(o[2]) && isnan(o[3]));
  CHECK_OK(nrt_free(dev));
}

static void test_pairs_complex128_strided(void) {
  double *dev;
  /* a and b with a gap of one element between elements (stride 2), out backwards */
  CHECK_OK(nrt_malloc(0, 5 * NPAIR * 16, (void **)&dev));
  double *h = nrt_device_to_host(dev);
  double *a = h, *b = h + 4 * NPAIR, *o = h + 8 * NPAIR;
  static double pa[2 * NPAIR], pb[2 * NPAIR];
  fill_pairs_d(pa, pb);
  for (size_t i = 0; i < NPAIR; i++) {
    a[4 * i] = pa[2 * i], a[4 * i + 1] = pa[2 * i + 1];
    b[4 * i] = pb[2 * i], b[4 * i + 1] = pb[2 * i + 1];
  }
  for (size_t k = 0; k < NALPHA; k++) {
    nrt_op op = add_op(NRT_COMPLEX128, view_1d(dev + 8 * NPAIR + 2 * (NPAIR - 1), NRT_COMPLEX128, NPAIR, -1),
                       view_1d(dev, NRT_COMPLEX128, NPAIR, 2), view_1d(dev + 4 * NPAIR, NRT_COMPLEX128, NPAIR, 2),
                       ALPHAS[k][0], ALPHAS[k][1]);
    CHECK_OK(nrt_op_execute(&op));
    int bad = 0;
    for (size_t i = 0; i < NPAIR; i++) {
      double want[2];
      twin_d(pa + 2 * i, pb + 2 * i, ALPHAS[k][0], ALPHAS[k][1], want);
      const double *got = o + 2 * (NPAIR - 1 - i);
      bad += !same_d(got[0], want[0]) || !same_d(got[1], want[1]);
    }
    CHECK(bad == 0);
  }
  CHECK_OK(nrt_free(dev));
}

/* Beyond RT_PARALLEL_GRAIN: the threads' ranges give the twin's values. */
static void test_long_run(void) {
  enum { N = 100003 };
  float *dev;
  CHECK_OK(nrt_malloc(0, 3 * (size_t)N * 8, (void **)&dev));
  float *h = nrt_device_to_host(dev);
  for (int64_t i = 0; i < 4 * N; i++) h[i] = (float)((i * 7919) % 1000) / 37.0f - 13.0f;
  nrt_op op = add_op(NRT_COMPLEX64, view_1d(dev + 4 * N, NRT_COMPLEX64, N, 1), view_1d(dev, NRT_COMPLEX64, N, 1),
                     view_1d(dev + 2 * N, NRT_COMPLEX64, N, 1), 0.75, -1.25);
  CHECK_OK(nrt_op_execute(&op));
  int bad = 0;
  for (int i = 0; i < N; i++) {
    float want[2];
    twin_f(h + 2 * i, h + 2 * N + 2 * i, 0.75f, -1.25f, want);
    bad += !same_f(h[4 * N + 2 * i], want[0]) || !same_f(h[4 * N + 2 * i + 1], want[1]);
  }
  CHECK(bad == 0);
  CHECK_OK(nrt_free(dev));
}

static void test_refusals(void) {
  float *dev;
  CHECK_OK(nrt_malloc(0, 256, (void **)&dev));
  nrt_tensor_view c = view_1d(dev, NRT_COMPLEX64, 4, 1), f = view_1d(dev + 8, NRT_FLOAT32, 4, 1);
  nrt_op op = add_op(NRT_COMPLEX64, c, c, f, 1, 0); /* a real operand: promoted by the caller */
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_UNSUPPORTED);
  op = add_op(NRT_COMPLEX64, c, c, view_1d(dev, NRT_COMPLEX128, 2, 1), 1, 0);
  op.operands[2].shape[0] = 4;
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_UNSUPPORTED);
  op = add_op(NRT_COMPLEX64, c, c, c, 1, 0);
  op.num_scalars = 0;
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  op.num_scalars = 1; /* alpha's imaginary part defaults to 0 */
  CHECK_OK(nrt_op_execute(&op));
  CHECK(nrt_op_accepts_dtype(NRT_OP_ADD, NRT_COMPLEX64) && nrt_op_accepts_dtype(NRT_OP_ADD, NRT_COMPLEX128));
  CHECK(!nrt_op_accepts_dtype(NRT_OP_ADD, NRT_COMPLEX32) && !nrt_op_accepts_dtype(NRT_OP_MUL, NRT_COMPLEX64));
  CHECK_OK(nrt_free(dev));
}

int main(void) {
  RUN(test_pairs_complex64);
  RUN(test_pairs_complex128_strided);
  RUN(test_long_run);
  RUN(test_refusals);
  return CHECK_MAIN_RESULT();
}
