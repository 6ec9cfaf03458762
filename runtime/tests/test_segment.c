/* SEGMENT_REDUCE and its backward against a plain twin.
 *
 * The twin reads the data element by element in double, segment by
 * segment, from the definition in neuronrt/ops/reduce.h; the kernel (float32
 * or float64, a strided [outer, rows, inner] view) must agree within the
 * compute dtype's rounding. Cases: every reduction with and without an
 * initial value, empty segments, rows past the last offset (unsafe
 * lengths), ties and zeros, NaN; bad offsets and operands fail cleanly.
 * Operands are host memory (nrt_op_execute_host).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

enum { OUTER = 3, ROWS = 9, INNER = 4, SEGS = 4 };

static nrt_tensor_view view3(void *p, nrt_dtype t, int64_t a, int64_t b, int64_t c, const int64_t *strides) {
  nrt_tensor_view v;
  memset(&v, 0, sizeof v);
  v.data = p, v.dtype = t, v.ndim = 3;
  v.shape[0] = a, v.shape[1] = b, v.shape[2] = c;
  v.strides[0] = strides ? strides[0] : b * c;
  v.strides[1] = strides ? strides[1] : c;
  v.strides[2] = strides ? strides[2] : 1;
  return v;
}

static nrt_status run(nrt_op_code code, int nops, const nrt_tensor_view *ops, int reduce, int has_init, double init) {
  nrt_op op;
  memset(&op, 0, sizeof op);
  op.code = code, op.num_outputs = 1, op.num_operands = nops, op.compute_dtype = ops[1].dtype;
  for (int k = 0; k < nops; k++) op.operands[k] = ops[k];
  op.num_scalars = 3;
  op.scalars[0].i = reduce, op.scalars[1].i = has_init, op.scalars[2].f = init, op.scalars[2].is_float = 1;
  return nrt_op_execute_host(&op, (1u << nops) - 1);
}

/* The twin: out[o][s][i] and the data gradient for grad = g. */
static void twin(int reduce, int has_init, double init, const double x[OUTER][ROWS][INNER],
                 const int64_t off[OUTER][SEGS + 1], const double g[OUTER][SEGS][INNER], double out[OUTER][SEGS][INNER],
                 double gx[OUTER][ROWS][INNER]) {
  memset(gx, 0, sizeof(double) * OUTER * ROWS * INNER);
  for (int o = 0; o < OUTER; o++)
    for (int s = 0; s < SEGS; s++)
      for (int i = 0; i < INNER; i++) {
        const int64_t lo = off[o][s], hi = off[o][s + 1], n = hi - lo;
        double acc = has_init ? init : (reduce == 2 ? 1 : reduce == 3 ? -INFINITY : reduce == 4 ? INFINITY : 0);
        int nan = 0;
        for (int64_t r = lo; r < hi; r++) {
          double v = x[o][r][i];
          nan |= isnan(v);
          if (reduce <= 1) acc += v;
          if (reduce == 2) acc *= v;
          if (reduce == 3 && v > acc) acc = v;
          if (reduce == 4 && v < acc) acc = v;
        }
        if (nan && reduce >= 3) acc = NAN;
        if (reduce == 1) acc = n > 0 ? acc / (double)n : (has_init ? init : NAN);
        out[o][s][i] = acc;
        for (int64_t r = lo; r < hi; r++) {
          double v = x[o][r][i], d = 0;
          if (reduce == 0) d = g[o][s][i];
          if (reduce == 1) d = g[o][s][i] / (double)n;
          if (reduce >= 3) {
            int ties = 0;
            for (int64_t q = lo; q < hi; q++) ties += x[o][q][i] == acc || (isnan(x[o][q][i]) && isnan(acc));
            d = (v == acc || (isnan(v) && isnan(acc))) ? g[o][s][i] / ties : 0;
          }
          if (reduce == 2) {
            int zeros = 0;
            double others = has_init ? init : 1;
            for (int64_t q = lo; q < hi; q++)
              if (x[o][q][i] == 0)
                zeros++;
              else
                others *= x[o][q][i];
            d = v != 0 ? g[o][s][i] * acc / v : (zeros == 1 ? g[o][s][i] * others : 0);
          }
          gx[o][r][i] = d;
        }
      }
}

static int close_to(double got, double want, double tol) {
  if (isnan(want)) return isnan(got);
  if (isinf(want)) return got == want;
  return fabs(got - want) <= tol * (1 + fabs(want));
}

static void check_case(nrt_dtype t, int reduce, int has_init) {
  static double x[OUTER][ROWS][INNER], g[OUTER][SEGS][INNER], want[OUTER][SEGS][INNER], gwant[OUTER][ROWS][INNER];
  /* segments: ordinary, empty, a tie-rich one; the last outer slice leaves 2 rows uncovered */
  const int64_t off[OUTER][SEGS + 1] = {{0, 2, 2, 6, 9}, {0, 0, 4, 5, 9}, {0, 3, 3, 5, 7}};
  for (int o = 0; o < OUTER; o++)
    for (int r = 0; r < ROWS; r++)
      for (int i = 0; i < INNER; i++) x[o][r][i] = (double)((o * 7 + r * 3 + i * 5) % 6) / 2 - 1; /* ties, zeros */
  x[1][7][2] = NAN;
  for (int o = 0; o < OUTER; o++)
    for (int s = 0; s < SEGS; s++)
      for (int i = 0; i < INNER; i++) g[o][s][i] = 0.25 + 0.5 * s - 0.75 * i + o;
  twin(reduce, has_init, 1.5, (const double(*)[ROWS][INNER])x, off, (const double(*)[SEGS][INNER])g, want, gwant);
  const size_t es = t == NRT_FLOAT64 ? 8 : 4;
  /* data stored [inner][outer][rows] and seen as [outer, rows, inner] */
  char *xd = malloc(es * OUTER * ROWS * INNER), *gd = malloc(es * OUTER * SEGS * INNER);
  char *out = malloc(es * OUTER * SEGS * INNER), *gx = malloc(es * OUTER * ROWS * INNER);
  for (int o = 0; o < OUTER; o++)
    for (int r = 0; r < ROWS; r++)
      for (int i = 0; i < INNER; i++) {
        size_t k = (size_t)(i * OUTER * ROWS + o * ROWS + r);
        if (t == NRT_FLOAT64)
          ((double *)(void *)xd)[k] = x[o][r][i];
        else
          ((float *)(void *)xd)[k] = (float)x[o][r][i];
      }
  for (int k = 0; k < OUTER * SEGS * INNER; k++) {
    double v = ((const double *)g)[k];
    if (t == NRT_FLOAT64)
      ((double *)(void *)gd)[k] = v;
    else
      ((float *)(void *)gd)[k] = (float)v;
  }
  nrt_tensor_view vx = view3(xd, t, OUTER, ROWS, INNER, (int64_t[]){ROWS, 1, OUTER * ROWS});
  nrt_tensor_view vout = view3(out, t, OUTER, SEGS, INNER, NULL), vg = view3(gd, t, OUTER, SEGS, INNER, NULL);
  nrt_tensor_view vgx = view3(gx, t, OUTER, ROWS, INNER, NULL);
  nrt_tensor_view voff;
  memset(&voff, 0, sizeof voff);
  voff.data = (void *)off, voff.dtype = NRT_INT64, voff.ndim = 2;
  voff.shape[0] = OUTER, voff.shape[1] = SEGS + 1, voff.strides[0] = SEGS + 1, voff.strides[1] = 1;
  CHECK_OK(run(NRT_OP_SEGMENT_REDUCE, 3, (nrt_tensor_view[]){vout, vx, voff}, reduce, has_init, 1.5));
  memset(gx, 0x7f, es * OUTER * ROWS * INNER); /* every element must be written */
  CHECK_OK(run(NRT_OP_SEGMENT_REDUCE_BACKWARD, 5, (nrt_tensor_view[]){vgx, vg, vout, vx, voff}, reduce, has_init, 1.5));
  const double tol = t == NRT_FLOAT64 ? 1e-14 : 1e-6;
  int bad = 0;
  for (int k = 0; k < OUTER * SEGS * INNER; k++) {
    double v = t == NRT_FLOAT64 ? ((double *)(void *)out)[k] : ((float *)(void *)out)[k];
    bad += !close_to(v, ((const double *)want)[k], tol);
  }
  for (int k = 0; k < OUTER * ROWS * INNER; k++) {
    double v = t == NRT_FLOAT64 ? ((double *)(void *)gx)[k] : ((float *)(void *)gx)[k];
    bad += !close_to(v, ((const double *)gwant)[k], tol);
  }
  if (bad) fprintf(stderr, "  dtype %d reduce %d initial %d: %d elements off\n", (int)t, reduce, has_init, bad);
  CHECK(bad == 0);
  /* offsets running backwards or past the rows */
  int64_t bad_off[OUTER][SEGS + 1];
  memcpy(bad_off, off, sizeof bad_off);
  bad_off[2][2] = 1;
  voff.data = bad_off;
  CHECK_STATUS(run(NRT_OP_SEGMENT_REDUCE, 3, (nrt_tensor_view[]){vout, vx, voff}, reduce, has_init, 1.5),
               NRT_ERROR_INDEX_OUT_OF_RANGE);
  bad_off[2][2] = 3, bad_off[2][4] = 10;
  CHECK_STATUS(run(NRT_OP_SEGMENT_REDUCE_BACKWARD, 5, (nrt_tensor_view[]){vgx, vg, vout, vx, voff}, reduce, has_init,
                   1.5),
               NRT_ERROR_INDEX_OUT_OF_RANGE);
  free(xd), free(gd), free(out), free(gx);
}

static void test_segment_reduce_matches_twin(void) {
  for (int d = 0; d < 2; d++)
    for (int reduce = 0; reduce < 5; reduce++)
      for (int init = 0; init < 2; init++) check_case(d ? NRT_FLOAT64 : NRT_FLOAT32, reduce, init);
}

static void test_bad_operands_fail_cleanly(void) {
  float x[2 * 3], out[2 * 2];
  int64_t off[2 * 3] = {0, 1, 3, 0, 2, 3};
  nrt_tensor_view vx = view3(x, NRT_FLOAT32, 2, 3, 1, NULL), vout = view3(out, NRT_FLOAT32, 2, 2, 1, NULL);
  nrt_tensor_view voff;
  memset(&voff, 0, sizeof voff);
  voff.data = off, voff.dtype = NRT_INT64, voff.ndim = 2;
  voff.shape[0] = 2, voff.shape[1] = 3, voff.strides[0] = 3, voff.strides[1] = 1;
  memset(x, 0, sizeof x);
  nrt_tensor_view ops[3] = {vout, vx, voff};
  CHECK_OK(run(NRT_OP_SEGMENT_REDUCE, 3, ops, 0, 0, 0));
  CHECK_STATUS(run(NRT_OP_SEGMENT_REDUCE, 3, ops, 5, 0, 0), NRT_ERROR_INVALID_ARGUMENT); /* reduction */
  ops[1].dtype = NRT_INT32;
  CHECK_STATUS(run(NRT_OP_SEGMENT_REDUCE, 3, ops, 0, 0, 0), NRT_ERROR_INVALID_ARGUMENT);
  ops[1].dtype = NRT_FLOAT32;
  ops[2].shape[1] = 2; /* offsets not segments + 1 */
  CHECK_STATUS(run(NRT_OP_SEGMENT_REDUCE, 3, ops, 0, 0, 0), NRT_ERROR_INVALID_ARGUMENT);
  ops[2].shape[1] = 3;
  ops[0].dtype = NRT_FLOAT64;
  CHECK_STATUS(run(NRT_OP_SEGMENT_REDUCE, 3, ops, 0, 0, 0), NRT_ERROR_INVALID_ARGUMENT);
}

int main(void) {
  RUN(test_segment_reduce_matches_twin);
  RUN(test_bad_operands_fail_cleanly);
  return CHECK_MAIN_RESULT();
}
