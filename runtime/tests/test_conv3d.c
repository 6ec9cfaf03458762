/* The volumetric convolution (ops/conv/conv3d.c) against its plain twin
 * written here: the definition in double, every tap of every output
 * position (forward), and the same sum scattered to the image (input
 * gradient) or to the weight (weight gradient). Operands are NCDHW or
 * channels_last_3d (by strides), with bias, groups, stride, padding and
 * dilation; values are multiples of 1/64 so that float64 sums are exact and
 * float32 ones accurate to rounding. Also checks that bad descriptors
 * fail cleanly. (That results do not depend on the thread count is checked
 * from Python, tests/test_ops_conv3d.py.)
 *
 * float32 and bfloat16 run the depth-folded 2-d convolution
 * (conv3d_fold.h); its results are also checked against the reference
 * path (vol2col / col2vol and the GEMM) run on the same operands. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "tensor5d.h"
#include "ops/conv/conv3d_fold.h"
#include "ops/engine/scalar_types.h"

static uint64_t rng_state = 0x51f15eedc0ffee11u;
static double rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (double)(rng_state >> 11) * 0x1p-53 * 2.0 - 1.0;
}

ORACLE_CODE static double get(nrt_dtype t, const void *p) {
  switch (t) {
    case NRT_BFLOAT16: return rt_bfloat16_to_float(*(const uint16_t *)p);
    case NRT_FLOAT16: return rt_half_to_float(*(const uint16_t *)p);
    case NRT_FLOAT32: return *(const float *)p;
    default: return *(const double *)p;
  }
}

ORACLE_CODE static void set(nrt_dtype t, void *p, double v) {
  switch (t) {
    case NRT_BFLOAT16: *(uint16_t *)p = rt_bfloat16_from_float((float)v); break;
    case NRT_FLOAT16: *(uint16_t *)p = rt_half_from_float((float)v); break;
    case NRT_FLOAT32: *(float *)p = (float)v; break;
    default: *(double *)p = v; break;
  }
}

static tensor make_vector(nrt_dtype t, int64_t n) {
  tensor x;
  memset(&x, 0, sizeof x);
  x.numel = n;
  CHECK_OK(nrt_malloc(0, (size_t)n * nrt_dtype_size(t), &x.v.data));
  x.v.dtype = t;
  x.v.ndim = 1;
  x.v.shape[0] = n;
  x.v.strides[0] = 1;
  return x;
}

ORACLE_CODE static void *at5(const tensor *x, const int64_t i[5]) {
  int64_t off = 0;
  for (int d = 0; d < x->v.ndim; d++) off += i[d] * x->v.strides[d];
  return (char *)nrt_device_to_host(x->v.data) + off * (int64_t)nrt_dtype_size(x->v.dtype);
}

ORACLE_CODE static double val(const tensor *x, int64_t a, int64_t b, int64_t c, int64_t d, int64_t e) {
  int64_t i[5] = {a, b, c, d, e};
  return get(x->v.dtype, at5(x, i));
}

ORACLE_CODE static void fill(tensor *x) {
  for (int64_t k = 0; k < x->numel; k++) {
    int64_t i[5], r = k;
    for (int d = x->v.ndim - 1; d >= 0; d--) i[d] = r % x->v.shape[d], r /= x->v.shape[d];
    set(x->v.dtype, at5(x, i), round(rnd() * 64.0) / 64.0);
  }
}

/* Every element of x against want (a row-major double array). */
ORACLE_CODE static int close_to(const tensor *x, const double *want, double tol) {
  int bad = 0;
  for (int64_t k = 0; k < x->numel; k++) {
    int64_t i[5], r = k;
    for (int d = x->v.ndim - 1; d >= 0; d--) i[d] = r % x->v.shape[d], r /= x->v.shape[d];
    double got = get(x->v.dtype, at5(x, i)), w = want[k];
    if (!(fabs(got - w) <= tol * (1.0 + fabs(w)))) {
      if (!bad) fprintf(stderr, "  at %lld: got %g want %g\n", (long long)k, got, w);
      bad = 1;
    }
  }
  return !bad;
}

static nrt_op new_op(nrt_op_code code) {
  nrt_op op;
  memset(&op, 0, sizeof op);
  op.code = code;
  op.num_outputs = 1;
  return op;
}

static void add(nrt_op *op, const tensor *t) { op->operands[op->num_operands++] = t->v; }

typedef struct c3_case {
  int64_t n, c, k, groups;
  int64_t in[3], ker[3], s[3], p[3], dl[3];
} c3_case;

static int64_t pack(const int64_t v[3]) { return v[0] << 42 | v[1] << 21 | v[2]; }

static void scalars(nrt_op *op, const c3_case *g) {
  op->scalars[0].i = pack(g->s);
  op->scalars[1].i = pack(g->p);
  op->scalars[2].i = pack(g->dl);
  op->scalars[3].i = g->groups;
  op->num_scalars = 4;
}

static double tol_of(nrt_dtype t) { return t == NRT_FLOAT64 ? 1e-12 : t == NRT_FLOAT32 ? 1e-5 : 2e-2; }

ORACLE_CODE static void check_case(const c3_case *g, nrt_dtype t, int cl, int with_bias) {
  int64_t o[3];
  for (int d = 0; d < 3; d++) o[d] = (g->in[d] + 2 * g->p[d] - g->dl[d] * (g->ker[d] - 1) - 1) / g->s[d] + 1;
  int64_t cg = g->c / g->groups, kg = g->k / g->groups;
  int64_t xs[5] = {g->n, g->c, g->in[0], g->in[1], g->in[2]}, ys[5] = {g->n, g->k, o[0], o[1], o[2]};
  int64_t ws[5] = {g->k, cg, g->ker[0], g->ker[1], g->ker[2]};
  tensor x = make(t, xs, cl), y = make(t, ys, cl), gy = make(t, ys, !cl), gx = make(t, xs, cl);
  tensor w = make(t, ws, cl), gw = make(t, ws, 0), b = make_vector(t, g->k), bx = make_vector(t, g->c);
  fill(&x), fill(&w), fill(&gy), fill(&b), fill(&bx);
  double *want_y = calloc((size_t)(y.numel + 1), sizeof(double));
  double *want_gx = calloc((size_t)(gx.numel + 1), sizeof(double));
  double *want_gw = calloc((size_t)(gw.numel + 1), sizeof(double));
  for (int64_t n = 0; n < g->n; n++)
    for (int64_t k = 0; k < g->k; k++)
      for (int64_t od = 0; od < o[0]; od++)
        for (int64_t oh = 0; oh < o[1]; oh++)
          for (int64_t ow = 0; ow < o[2]; ow++)
            for (int64_t cl_ = 0; cl_ < cg; cl_++)
              for (int64_t a = 0; a < g->ker[0]; a++)
                for (int64_t bb = 0; bb < g->ker[1]; bb++)
                  for (int64_t e = 0; e < g->ker[2]; e++) {
                    int64_t c = k / kg * cg + cl_;
                    int64_t id = od * g->s[0] - g->p[0] + a * g->dl[0];
                    int64_t ih = oh * g->s[1] - g->p[1] + bb * g->dl[1];
                    int64_t iw = ow * g->s[2] - g->p[2] + e * g->dl[2];
                    if (id < 0 || id >= g->in[0] || ih < 0 || ih >= g->in[1] || iw < 0 || iw >= g->in[2]) continue;
                    double wv = val(&w, k, cl_, a, bb, e), xv = val(&x, n, c, id, ih, iw);
                    double gyv = val(&gy, n, k, od, oh, ow);
                    want_y[(((n * g->k + k) * o[0] + od) * o[1] + oh) * o[2] + ow] += xv * wv;
                    want_gx[(((n * g->c + c) * g->in[0] + id) * g->in[1] + ih) * g->in[2] + iw] += gyv * wv;
                    want_gw[(((k * cg + cl_) * g->ker[0] + a) * g->ker[1] + bb) * g->ker[2] + e] += gyv * xv;
                  }
  if (with_bias) {
    int64_t op_ = o[0] * o[1] * o[2], ip = g->in[0] * g->in[1] * g->in[2];
    for (int64_t i = 0; i < y.numel; i++) want_y[i] += val(&b, i / op_ % g->k, 0, 0, 0, 0);
    for (int64_t i = 0; i < gx.numel; i++) want_gx[i] += val(&bx, i / ip % g->c, 0, 0, 0, 0);
  }
  nrt_op op = new_op(NRT_OP_CONV3D);
  add(&op, &y), add(&op, &x), add(&op, &w);
  if (with_bias) add(&op, &b);
  scalars(&op, g);
  CHECK_OK(nrt_op_execute(&op));
  CHECK(close_to(&y, want_y, tol_of(t)));
  op = new_op(NRT_OP_CONV3D_INPUT_GRAD);
  add(&op, &gx), add(&op, &gy), add(&op, &w);
  if (with_bias) add(&op, &bx);
  scalars(&op, g);
  CHECK_OK(nrt_op_execute(&op));
  CHECK(close_to(&gx, want_gx, tol_of(t)));
  op = new_op(NRT_OP_CONV3D_WEIGHT_GRAD);
  add(&op, &gw), add(&op, &x), add(&op, &gy);
  scalars(&op, g);
  CHECK_OK(nrt_op_execute(&op));
  CHECK(close_to(&gw, want_gw, tol_of(t) * (t == NRT_BFLOAT16 || t == NRT_FLOAT16 ? 1.0 : 10.0)));
  free(want_y), free(want_gx), free(want_gw);
  nrt_free(x.v.data), nrt_free(y.v.data), nrt_free(gy.v.data), nrt_free(gx.v.data);
  nrt_free(w.v.data), nrt_free(gw.v.data), nrt_free(b.v.data), nrt_free(bx.v.data);
}

static const c3_case cases[] = {
    /* n  c  k  groups  in            ker        stride     pad        dilation */
    {2, 3, 4, 1, {5, 6, 7}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}},
    {1, 4, 6, 2, {6, 5, 8}, {2, 3, 2}, {2, 1, 3}, {0, 2, 1}, {1, 2, 1}},
    {2, 4, 4, 4, {4, 4, 4}, {3, 1, 2}, {1, 2, 1}, {2, 0, 1}, {2, 1, 1}},
    {1, 2, 3, 1, {3, 40, 40}, {1, 3, 3}, {1, 1, 1}, {0, 1, 1}, {1, 1, 1}}, /* several tiles */
    {1, 1, 1, 1, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}},
    {2, 6, 4, 2, {3, 20, 30}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}}, /* pointwise, two tiles */
    {1, 3, 2, 1, {4, 5, 7}, {1, 1, 1}, {2, 2, 3}, {0, 1, 0}, {1, 1, 1}},    /* 1x1x1, not pointwise */
};

static void test_conv3d_matches_direct_loops(void) {
  const nrt_dtype types[] = {NRT_FLOAT32, NRT_FLOAT64, NRT_BFLOAT16, NRT_FLOAT16};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    for (int ti = 0; ti < 4; ti++)
      for (int cl = 0; cl < 2; cl++) check_case(&cases[i], types[ti], cl, (int)((i + (size_t)cl) % 2));
}

/* op with host addresses, run by the folded path or the reference one. */
static nrt_status run_path(const nrt_op *op, int reference) {
  nrt_op h = *op;
  for (int i = 0; i < h.num_operands; i++) h.operands[i].data = nrt_device_to_host(h.operands[i].data);
  return rt_conv3d_run(&h, reference);
}

/* The output of op (operand 0) by the folded path against the reference
 * path, relative to the reference's largest magnitude; conv3d.fold counts
 * the folded run (folded = 1), nothing (0), or either (-1). */
ORACLE_CODE static int fold_matches_reference(nrt_op *op, tensor *outp, double tol, int folded) {
  size_t bytes = (size_t)outp->numel * nrt_dtype_size(outp->v.dtype);
  char *host = nrt_device_to_host(outp->v.data), *want = malloc(bytes + 1);
  CHECK_OK(run_path(op, 1));
  memcpy(want, host, bytes);
  memset(host, 0x7f, bytes); /* every element must be written again */
  uint64_t before = nrt_metric_value(NRT_METRIC_CONV3D_FOLD);
  CHECK_OK(run_path(op, 0));
  if (folded >= 0) CHECK(nrt_metric_value(NRT_METRIC_CONV3D_FOLD) - before == (uint64_t)folded);
  double big = 0.0, worst = 0.0;
  for (int64_t k = 0; k < outp->numel; k++) {
    int64_t i[5], r = k, off = 0;
    for (int d = 4; d >= 0; d--) i[d] = r % outp->v.shape[d], r /= outp->v.shape[d];
    for (int d = 0; d < 5; d++) off += i[d] * outp->v.strides[d];
    size_t es = nrt_dtype_size(outp->v.dtype);
    double w = get(outp->v.dtype, want + off * (int64_t)es), g = get(outp->v.dtype, host + off * (int64_t)es);
    if (fabs(w) > big) big = fabs(w);
    if (!(fabs(g - w) <= worst)) worst = isnan(g) ? INFINITY : fabs(g - w);
  }
  free(want);
  if (!(worst <= tol * (1.0 + big))) fprintf(stderr, "  fold vs reference: %g off (largest %g)\n", worst, big);
  return worst <= tol * (1.0 + big);
}

typedef struct fold_case {
  c3_case g;
  int cl, with_bias;
} fold_case;

/* Shapes that reach each branch of the folding: depth padding, stride and
 * dilation (zero planes, uneven depth ranges), kd = 1 without depth padding
 * (views, no copy), an image deeper than the output reads, groups,
 * channels_last_3d, and images in more than one chunk. */
static const fold_case fold_cases[] = {
    {{2, 4, 6, 1, {6, 7, 9}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}}, 0, 1},
    {{2, 4, 6, 1, {6, 7, 9}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}}, 1, 0},
    {{3, 6, 4, 2, {9, 6, 5}, {3, 2, 3}, {2, 1, 2}, {2, 0, 1}, {2, 1, 1}}, 0, 1},
    {{2, 6, 4, 2, {9, 6, 5}, {2, 3, 1}, {3, 2, 1}, {1, 1, 0}, {3, 1, 2}}, 1, 1},
    {{2, 8, 4, 1, {5, 6, 7}, {1, 3, 3}, {1, 1, 1}, {0, 1, 1}, {1, 1, 1}}, 0, 1}, /* views */
    {{2, 8, 4, 1, {5, 6, 7}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}}, 1, 0}, /* views, channels_last_3d */
    {{2, 4, 4, 1, {6, 5, 5}, {1, 3, 3}, {2, 1, 1}, {1, 1, 1}, {1, 1, 1}}, 0, 1}, /* kd = 1, depth padding; input
                                                                                 gradient phase without taps */
    {{1, 3, 5, 1, {7, 4, 6}, {3, 3, 3}, {2, 1, 1}, {0, 1, 1}, {1, 1, 1}}, 1, 1}, /* slice 6 never read */
    {{3, 8, 4, 1, {8, 100, 100}, {3, 1, 1}, {1, 1, 1}, {1, 0, 0}, {1, 1, 1}}, 1, 1}, /* 2 chunks of images */
    /* 16 and 8 channels: bfloat16 input gradients on AMX hosts put 2 or 4 slices in a 2-d row (odd depths
     * leave a row part empty) */
    {{2, 16, 8, 1, {5, 6, 7}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}}, 0, 1},
    {{2, 16, 8, 1, {7, 6, 5}, {3, 3, 3}, {2, 1, 1}, {1, 1, 1}, {1, 1, 1}}, 1, 1},
    {{1, 8, 16, 1, {9, 5, 6}, {3, 3, 3}, {1, 1, 1}, {2, 1, 1}, {2, 1, 1}}, 0, 0},
};

/* budget: rt_conv3d_fold_set_budget's cap (0: the defaults); 1 cuts every
 * problem into pieces of one 2-d image (one output depth, or one slice of a
 * depth phase), 2000 into pieces of a few depths or images. */
static void fold_matches_reference_path(int64_t budget) {
  const nrt_dtype types[] = {NRT_FLOAT32, NRT_BFLOAT16};
  rt_conv3d_fold_set_budget(budget);
  for (size_t ci = 0; ci < sizeof fold_cases / sizeof fold_cases[0]; ci++)
    for (int ti = 0; ti < 2; ti++) {
      const c3_case *g = &fold_cases[ci].g;
      int failures = check_failures;
      nrt_dtype t = types[ti];
      int cl = fold_cases[ci].cl, wb = fold_cases[ci].with_bias;
      int64_t o[3];
      for (int d = 0; d < 3; d++) o[d] = (g->in[d] + 2 * g->p[d] - g->dl[d] * (g->ker[d] - 1) - 1) / g->s[d] + 1;
      int64_t xs[5] = {g->n, g->c, g->in[0], g->in[1], g->in[2]}, ys[5] = {g->n, g->k, o[0], o[1], o[2]};
      int64_t ws[5] = {g->k, g->c / g->groups, g->ker[0], g->ker[1], g->ker[2]};
      tensor x = make(t, xs, cl), y = make(t, ys, cl), gy = make(t, ys, cl), gx = make(t, xs, cl);
      tensor w = make(t, ws, 0), gw = make(t, ws, cl), b = make_vector(t, g->k), bx = make_vector(t, g->c);
      fill(&x), fill(&w), fill(&gy), fill(&b), fill(&bx);
      /* float32: the sums' order differs; bfloat16: one rounding each, of sums that may differ */
      double tol = t == NRT_FLOAT32 ? 1e-5 : 1e-2;
      nrt_op op = new_op(NRT_OP_CONV3D);
      add(&op, &y), add(&op, &x), add(&op, &w);
      if (wb) add(&op, &b);
      scalars(&op, g);
      CHECK(fold_matches_reference(&op, &y, tol, 1));
      op = new_op(NRT_OP_CONV3D_INPUT_GRAD);
      add(&op, &gx), add(&op, &gy), add(&op, &w);
      if (wb) add(&op, &bx);
      scalars(&op, g);
      CHECK(fold_matches_reference(&op, &gx, tol, 1));
      op = new_op(NRT_OP_CONV3D_WEIGHT_GRAD);
      add(&op, &gw), add(&op, &x), add(&op, &gy);
      scalars(&op, g);
      /* a bfloat16 weight gradient that copies more than the budget takes the
       * reference path (pieces would round each) */
      CHECK(fold_matches_reference(&op, &gw, tol, t == NRT_FLOAT32 || budget == 0 ? 1 : -1));
      if (check_failures > failures)
        fprintf(stderr, "  in fold case %zu, %s, budget %lld\n", ci, nrt_dtype_name(t), (long long)budget);
      nrt_free(x.v.data), nrt_free(y.v.data), nrt_free(gy.v.data), nrt_free(gx.v.data);
      nrt_free(w.v.data), nrt_free(gw.v.data), nrt_free(b.v.data), nrt_free(bx.v.data);
    }
  rt_conv3d_fold_set_budget(0);
}

static void test_fold_matches_reference_path(void) { fold_matches_reference_path(0); }

static void test_fold_in_pieces_matches_reference_path(void) {
  fold_matches_reference_path(1);
  fold_matches_reference_path(2000);
}

static void test_bad_descriptors_fail_cleanly(void) {
  c3_case g = cases[0];
  int64_t xs[5] = {1, 3, 4, 4, 4}, ys[5] = {1, 4, 4, 4, 4}, ws[5] = {4, 2, 3, 3, 3};
  tensor x = make(NRT_FLOAT32, xs, 0), y = make(NRT_FLOAT32, ys, 0), w = make(NRT_FLOAT32, ws, 0);
  nrt_op op = new_op(NRT_OP_CONV3D);
  add(&op, &y), add(&op, &x), add(&op, &w);
  scalars(&op, &g);
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT); /* 2 weight channels for 3 */
  int64_t ws2[5] = {4, 3, 3, 3, 3}, ys2[5] = {1, 4, 9, 4, 4};
  tensor w2 = make(NRT_FLOAT32, ws2, 0), y2 = make(NRT_FLOAT32, ys2, 0);
  op = new_op(NRT_OP_CONV3D);
  add(&op, &y2), add(&op, &x), add(&op, &w2);
  scalars(&op, &g);
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT); /* 9 output positions where 4 fit */
  op = new_op(NRT_OP_CONV3D);
  add(&op, &y), add(&op, &x);
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT); /* missing weight and scalars */
  nrt_free(x.v.data), nrt_free(y.v.data), nrt_free(w.v.data), nrt_free(w2.v.data), nrt_free(y2.v.data);
}

int main(void) {
  RUN(test_conv3d_matches_direct_loops);
  RUN(test_fold_matches_reference_path);
  RUN(test_fold_in_pieces_matches_reference_path);
  RUN(test_bad_descriptors_fail_cleanly);
  return CHECK_MAIN_RESULT();
}
