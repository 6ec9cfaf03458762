/* The volumetric pooling kernels (ops/vision/pool3d.c) against plain twins
 * written here: every raw window walked with a bounds test per tap, in
 * double, for max pooling (value and index, the last NaN wins), average pooling
 * (count_include_pad, divisor_override, windows cut by the padded input)
 * and the adaptive pools, with their gradients scattered the same way.
 * NCDHW and channels_last_3d operands; float32, float64, bfloat16. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "ops/engine/scalar_types.h"

static uint64_t rng_state = 0x0ddba11cafef00du;
static double rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (double)(rng_state >> 11) * 0x1p-53 * 2.0 - 1.0;
}

ORACLE_CODE static double get(nrt_dtype t, const void *p) {
  switch (t) {
    case NRT_BFLOAT16: return rt_bfloat16_to_float(*(const uint16_t *)p);
    case NRT_FLOAT32: return *(const float *)p;
    case NRT_INT64: return (double)*(const int64_t *)p;
    case NRT_INT32: return *(const int32_t *)p;
    case NRT_UINT8: return *(const uint8_t *)p;
    default: return *(const double *)p;
  }
}

ORACLE_CODE static void set(nrt_dtype t, void *p, double v) {
  switch (t) {
    case NRT_BFLOAT16: *(uint16_t *)p = rt_bfloat16_from_float((float)v); break;
    case NRT_FLOAT32: *(float *)p = (float)v; break;
    case NRT_INT64: *(int64_t *)p = (int64_t)v; break;
    case NRT_INT32: *(int32_t *)p = (int32_t)v; break;
    case NRT_UINT8: *(uint8_t *)p = (uint8_t)v; break;
    default: *(double *)p = v; break;
  }
}

typedef struct tensor {
  nrt_tensor_view v;
  int64_t numel;
} tensor;

static tensor make(nrt_dtype t, int64_t n, int64_t c, int64_t d, int64_t h, int64_t w, int cl) {
  tensor x;
  memset(&x, 0, sizeof x);
  int64_t s[5] = {n, c, d, h, w};
  x.numel = n * c * d * h * w;
  CHECK_OK(nrt_malloc(0, (size_t)(x.numel > 0 ? x.numel : 1) * nrt_dtype_size(t), &x.v.data));
  x.v.dtype = t;
  x.v.ndim = 5;
  for (int i = 0; i < 5; i++) x.v.shape[i] = s[i];
  if (cl) {
    x.v.strides[1] = 1, x.v.strides[4] = c, x.v.strides[3] = c * w, x.v.strides[2] = c * w * h;
    x.v.strides[0] = c * w * h * d;
  } else {
    x.v.strides[4] = 1, x.v.strides[3] = w, x.v.strides[2] = w * h, x.v.strides[1] = w * h * d;
    x.v.strides[0] = w * h * d * c;
  }
  return x;
}

ORACLE_CODE static void *at(const tensor *x, int64_t pl, int64_t d, int64_t h, int64_t w) {
  const int64_t *s = x->v.strides;
  int64_t off = pl / x->v.shape[1] * s[0] + pl % x->v.shape[1] * s[1] + d * s[2] + h * s[3] + w * s[4];
  return (char *)nrt_device_to_host(x->v.data) + off * (int64_t)nrt_dtype_size(x->v.dtype);
}

ORACLE_CODE static void fill(tensor *x) {
  const int64_t *s = x->v.shape;
  for (int64_t pl = 0; pl < s[0] * s[1]; pl++)
    for (int64_t d = 0; d < s[2]; d++)
      for (int64_t h = 0; h < s[3]; h++)
        for (int64_t w = 0; w < s[4]; w++) set(x->v.dtype, at(x, pl, d, h, w), round(rnd() * 64.0) / 64.0);
}

/* Two NaNs next to each other in plane 0 (one window of a kernel >= 2
 * holds both: the CPU keeps the last) and one in the last plane. */
ORACLE_CODE static void plant_nans(tensor *x) {
  const int64_t *s = x->v.shape;
  if (s[0] * s[1] == 0 || s[2] * s[3] * s[4] < 2) return;
  set(x->v.dtype, at(x, 0, 0, 0, 0), NAN);
  set(x->v.dtype, at(x, 0, 0, 0, 1), NAN);
  set(x->v.dtype, at(x, s[0] * s[1] - 1, s[2] - 1, s[3] / 2, s[4] / 2), NAN);
}

/* x (plane-major [pl][d][h][w] order) against want. */
ORACLE_CODE static int close_to(const tensor *x, const double *want, double tol) {
  const int64_t *s = x->v.shape;
  int64_t k = 0;
  int bad = 0;
  for (int64_t pl = 0; pl < s[0] * s[1]; pl++)
    for (int64_t d = 0; d < s[2]; d++)
      for (int64_t h = 0; h < s[3]; h++)
        for (int64_t w = 0; w < s[4]; w++, k++) {
          double got = get(x->v.dtype, at(x, pl, d, h, w));
          if (!(fabs(got - want[k]) <= tol * (1 + fabs(want[k]))) && !(isnan(got) && isnan(want[k]))) {
            if (!bad) fprintf(stderr, "  at %lld: got %g want %g\n", (long long)k, got, want[k]);
            bad = 1;
          }
        }
  return !bad;
}

static nrt_op new_op(nrt_op_code code, int outputs) {
  nrt_op op;
  memset(&op, 0, sizeof op);
  op.code = code;
  op.num_outputs = outputs;
  return op;
}

static void add(nrt_op *op, const tensor *t) { op->operands[op->num_operands++] = t->v; }
static void scalar(nrt_op *op, int64_t v) { op->scalars[op->num_scalars++].i = v; }
static int64_t pack(const int64_t v[3]) { return v[0] << 42 | v[1] << 21 | v[2]; }

typedef struct pool_case {
  int64_t n, c, in[3], k[3], s[3], p[3], dl[3];
  int ceil_mode, include_pad;
  int64_t divisor;
} pool_case;

static int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t dl, int ceil_mode) {
  int64_t span = in + 2 * p - dl * (k - 1) - 1;
  int64_t o = (span + (ceil_mode ? s - 1 : 0)) / s + 1;
  if (ceil_mode && (o - 1) * s >= in + p) o--;
  return o;
}

ORACLE_CODE static void check_pools(const pool_case *g, nrt_dtype t, int cl) {
  int64_t o[3], P = g->n * g->c;
  for (int d = 0; d < 3; d++) o[d] = out_size(g->in[d], g->k[d], g->s[d], g->p[d], g->dl[d], g->ceil_mode);
  tensor x = make(t, g->n, g->c, g->in[0], g->in[1], g->in[2], cl);
  tensor y = make(t, g->n, g->c, o[0], o[1], o[2], cl), ind = make(NRT_INT64, g->n, g->c, o[0], o[1], o[2], cl);
  tensor gy = make(t, g->n, g->c, o[0], o[1], o[2], !cl), gx = make(t, g->n, g->c, g->in[0], g->in[1], g->in[2], cl);
  fill(&x), fill(&gy);
  plant_nans(&x);
  int64_t on = P * o[0] * o[1] * o[2], in = P * g->in[0] * g->in[1] * g->in[2];
  double *want = calloc((size_t)on + 1, sizeof(double)), *want_i = calloc((size_t)on + 1, sizeof(double));
  double *want_g = calloc((size_t)in + 1, sizeof(double));
  /* max pooling */
  int64_t k = 0;
  for (int64_t pl = 0; pl < P; pl++)
    for (int64_t a = 0; a < o[0]; a++)
      for (int64_t b = 0; b < o[1]; b++)
        for (int64_t e = 0; e < o[2]; e++, k++) {
          double best = -INFINITY;
          int64_t bi = -1;
          for (int64_t i = 0; i < g->k[0]; i++)
            for (int64_t jj = 0; jj < g->k[1]; jj++)
              for (int64_t l = 0; l < g->k[2]; l++) {
                int64_t id = a * g->s[0] - g->p[0] + i * g->dl[0], ih = b * g->s[1] - g->p[1] + jj * g->dl[1];
                int64_t iw = e * g->s[2] - g->p[2] + l * g->dl[2];
                if (id < 0 || id >= g->in[0] || ih < 0 || ih >= g->in[1] || iw < 0 || iw >= g->in[2]) continue;
                double v = get(t, at(&x, pl, id, ih, iw));
                if (bi < 0 || v > best || isnan(v)) best = v, bi = (id * g->in[1] + ih) * g->in[2] + iw;
              }
          want[k] = best, want_i[k] = (double)bi;
          want_g[pl * g->in[0] * g->in[1] * g->in[2] + bi] += get(t, at(&gy, pl, a, b, e));
        }
  nrt_op op = new_op(NRT_OP_MAX_POOL3D, 2);
  add(&op, &y), add(&op, &ind), add(&op, &x);
  scalar(&op, pack(g->k)), scalar(&op, pack(g->s)), scalar(&op, pack(g->p)), scalar(&op, pack(g->dl));
  CHECK_OK(nrt_op_execute(&op));
  CHECK(close_to(&y, want, 0) && close_to(&ind, want_i, 0));
  op = new_op(NRT_OP_MAX_POOL3D_BACKWARD, 1);
  add(&op, &gx), add(&op, &gy), add(&op, &ind);
  CHECK_OK(nrt_op_execute(&op));
  CHECK(close_to(&gx, want_g, t == NRT_BFLOAT16 ? 1e-2 : 1e-12));
  /* average pooling (no dilation) */
  memset(want_g, 0, (size_t)in * sizeof(double));
  k = 0;
  for (int64_t pl = 0; pl < P; pl++)
    for (int64_t a = 0; a < o[0]; a++)
      for (int64_t b = 0; b < o[1]; b++)
        for (int64_t e = 0; e < o[2]; e++, k++) {
          double sum = 0;
          int64_t inside = 0, padded = 1, start[3] = {a * g->s[0] - g->p[0], b * g->s[1] - g->p[1], e * g->s[2] - g->p[2]};
          for (int d = 0; d < 3; d++) {
            int64_t stop = start[d] + g->k[d] < g->in[d] + g->p[d] ? start[d] + g->k[d] : g->in[d] + g->p[d];
            padded *= stop - start[d];
          }
          for (int pass = 0; pass < 2; pass++)
            for (int64_t i = 0; i < g->k[0]; i++)
              for (int64_t jj = 0; jj < g->k[1]; jj++)
                for (int64_t l = 0; l < g->k[2]; l++) {
                  int64_t id = start[0] + i, ih = start[1] + jj, iw = start[2] + l;
                  if (id < 0 || id >= g->in[0] || ih < 0 || ih >= g->in[1] || iw < 0 || iw >= g->in[2]) continue;
                  if (pass == 0) {
                    sum += get(t, at(&x, pl, id, ih, iw));
                    inside++;
                  } else {
                    double div = g->divisor ? (double)g->divisor : g->include_pad ? (double)padded : (double)inside;
                    want_g[((pl * g->in[0] + id) * g->in[1] + ih) * g->in[2] + iw] += get(t, at(&gy, pl, a, b, e)) / div;
                  }
                }
          want[k] = sum / (g->divisor ? (double)g->divisor : g->include_pad ? (double)padded : (double)inside);
        }
  op = new_op(NRT_OP_AVG_POOL3D, 1);
  add(&op, &y), add(&op, &x);
  scalar(&op, pack(g->k)), scalar(&op, pack(g->s)), scalar(&op, pack(g->p));
  scalar(&op, g->include_pad), scalar(&op, g->divisor);
  nrt_op bw = new_op(NRT_OP_AVG_POOL3D_BACKWARD, 1);
  add(&bw, &gx), add(&bw, &gy);
  memcpy(bw.scalars, op.scalars, sizeof op.scalars);
  bw.num_scalars = op.num_scalars;
  if (g->dl[0] == 1 && g->dl[1] == 1 && g->dl[2] == 1) {
    double tl = t == NRT_BFLOAT16 ? 1e-2 : t == NRT_FLOAT32 ? 1e-6 : 1e-12;
    CHECK_OK(nrt_op_execute(&op));
    CHECK(close_to(&y, want, tl));
    CHECK_OK(nrt_op_execute(&bw));
    CHECK(close_to(&gx, want_g, tl));
  }
  free(want), free(want_i), free(want_g);
  nrt_free(x.v.data), nrt_free(y.v.data), nrt_free(ind.v.data), nrt_free(gy.v.data), nrt_free(gx.v.data);
}

ORACLE_CODE static void check_adaptive(nrt_dtype t, int cl, const int64_t in[3], const int64_t o[3]) {
  int64_t P = 6;
  tensor x = make(t, 2, 3, in[0], in[1], in[2], cl), y = make(t, 2, 3, o[0], o[1], o[2], cl);
  tensor ind = make(NRT_INT64, 2, 3, o[0], o[1], o[2], 0), gy = make(t, 2, 3, o[0], o[1], o[2], !cl);
  tensor gx = make(t, 2, 3, in[0], in[1], in[2], cl);
  fill(&x), fill(&gy);
  plant_nans(&x);
  int64_t on = P * o[0] * o[1] * o[2], inn = P * in[0] * in[1] * in[2], k = 0;
  double *want_max = calloc((size_t)on, sizeof(double)), *want_avg = calloc((size_t)on, sizeof(double));
  double *want_i = calloc((size_t)on, sizeof(double));
  double *g_max = calloc((size_t)inn, sizeof(double)), *g_avg = calloc((size_t)inn, sizeof(double));
  for (int64_t pl = 0; pl < P; pl++)
    for (int64_t a = 0; a < o[0]; a++)
      for (int64_t b = 0; b < o[1]; b++)
        for (int64_t e = 0; e < o[2]; e++, k++) {
          int64_t lo[3], hi[3], idx[3] = {a, b, e};
          for (int d = 0; d < 3; d++) {
            lo[d] = (int64_t)floor((double)(idx[d] * in[d]) / (double)o[d]);
            hi[d] = (int64_t)ceil((double)((idx[d] + 1) * in[d]) / (double)o[d]);
          }
          double best = -INFINITY, sum = 0;
          int64_t bi = -1, cnt = (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]);
          for (int64_t id = lo[0]; id < hi[0]; id++)
            for (int64_t ih = lo[1]; ih < hi[1]; ih++)
              for (int64_t iw = lo[2]; iw < hi[2]; iw++) {
                double v = get(t, at(&x, pl, id, ih, iw));
                sum += v;
                if (bi < 0 || v > best || isnan(v)) best = v, bi = (id * in[1] + ih) * in[2] + iw;
                g_avg[((pl * in[0] + id) * in[1] + ih) * in[2] + iw] += get(t, at(&gy, pl, a, b, e)) / (double)cnt;
              }
          want_max[k] = best, want_i[k] = (double)bi, want_avg[k] = sum / (double)cnt;
          g_max[pl * in[0] * in[1] * in[2] + bi] += get(t, at(&gy, pl, a, b, e));
        }
  double tl = t == NRT_BFLOAT16 ? 1e-2 : t == NRT_FLOAT32 ? 1e-6 : 1e-12;
  nrt_op op = new_op(NRT_OP_ADAPTIVE_MAX_POOL3D, 2);
  add(&op, &y), add(&op, &ind), add(&op, &x);
  CHECK_OK(nrt_op_execute(&op));
  CHECK(close_to(&y, want_max, 0) && close_to(&ind, want_i, 0));
  op = new_op(NRT_OP_MAX_POOL3D_BACKWARD, 1);
  add(&op, &gx), add(&op, &gy), add(&op, &ind);
  CHECK_OK(nrt_op_execute(&op));
  CHECK(close_to(&gx, g_max, tl));
  op = new_op(NRT_OP_ADAPTIVE_AVG_POOL3D, 1);
  add(&op, &y), add(&op, &x);
  CHECK_OK(nrt_op_execute(&op));
  CHECK(close_to(&y, want_avg, tl));
  op = new_op(NRT_OP_ADAPTIVE_AVG_POOL3D_BACKWARD, 1);
  add(&op, &gx), add(&op, &gy);
  CHECK_OK(nrt_op_execute(&op));
  CHECK(close_to(&gx, g_avg, tl));
  free(want_max), free(want_avg), free(want_i), free(g_max), free(g_avg);
  nrt_free(x.v.data), nrt_free(y.v.data), nrt_free(ind.v.data), nrt_free(gy.v.data), nrt_free(gx.v.data);
}

static const pool_case cases[] = {
    /* n c  in          k          s          p          dl       ceil pad div */
    {2, 3, {5, 6, 7}, {2, 2, 2}, {2, 2, 2}, {0, 0, 0}, {1, 1, 1}, 0, 1, 0},
    {1, 4, {6, 7, 8}, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {1, 1, 1}, 0, 1, 0},
    {1, 4, {6, 7, 8}, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {1, 1, 1}, 1, 0, 0},
    {2, 2, {7, 5, 6}, {3, 2, 3}, {2, 1, 2}, {1, 1, 0}, {1, 1, 1}, 1, 1, 0},
    {2, 2, {7, 5, 6}, {2, 2, 2}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}, 0, 1, 3},
    {2, 2, {7, 5, 6}, {2, 3, 2}, {2, 1, 1}, {1, 0, 1}, {1, 1, 1}, 1, 0, -2}, /* a negative override: the CPU's too */
    {1, 3, {8, 7, 9}, {3, 2, 2}, {1, 2, 1}, {1, 0, 1}, {2, 1, 2}, 0, 1, 0}, /* dilated (max only) */
};

static void test_pools_match_window_walks(void) {
  const nrt_dtype types[] = {NRT_FLOAT32, NRT_FLOAT64, NRT_BFLOAT16};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    for (int ti = 0; ti < 3; ti++)
      for (int cl = 0; cl < 2; cl++) check_pools(&cases[i], types[ti], cl);
}

static void test_adaptive_pools_match_window_walks(void) {
  const int64_t shapes[][2][3] = {{{5, 7, 9}, {3, 4, 5}}, {{4, 4, 4}, {1, 1, 1}}, {{3, 5, 6}, {5, 7, 9}}};
  const nrt_dtype types[] = {NRT_FLOAT32, NRT_FLOAT64, NRT_BFLOAT16};
  for (size_t i = 0; i < 3; i++)
    for (int ti = 0; ti < 3; ti++)
      for (int cl = 0; cl < 2; cl++) check_adaptive(types[ti], cl, shapes[i][0], shapes[i][1]);
}

/* Integer pools: max pooling of uint8 / int32 / int64 (values and
 * indices) and int64 average pooling (an integer sum divided with
 * truncation toward zero), against the window walks in int64. */
ORACLE_CODE static void check_int_pools(const pool_case *g, nrt_dtype t, int cl) {
  int64_t o[3], P = g->n * g->c;
  for (int d = 0; d < 3; d++) o[d] = out_size(g->in[d], g->k[d], g->s[d], g->p[d], g->dl[d], g->ceil_mode);
  tensor x = make(t, g->n, g->c, g->in[0], g->in[1], g->in[2], cl);
  tensor y = make(t, g->n, g->c, o[0], o[1], o[2], cl), ind = make(NRT_INT64, g->n, g->c, o[0], o[1], o[2], !cl);
  for (int64_t pl = 0; pl < P; pl++)
    for (int64_t d = 0; d < g->in[0]; d++)
      for (int64_t h = 0; h < g->in[1]; h++)
        for (int64_t w = 0; w < g->in[2]; w++)
          set(t, at(&x, pl, d, h, w), t == NRT_UINT8 ? floor((rnd() + 1) * 127.5) : round(rnd() * 1000));
  int64_t on = P * o[0] * o[1] * o[2], k = 0;
  double *want = calloc((size_t)on + 1, sizeof(double)), *want_i = calloc((size_t)on + 1, sizeof(double));
  double *want_avg = calloc((size_t)on + 1, sizeof(double));
  for (int64_t pl = 0; pl < P; pl++)
    for (int64_t a = 0; a < o[0]; a++)
      for (int64_t b = 0; b < o[1]; b++)
        for (int64_t e = 0; e < o[2]; e++, k++) {
          int64_t best = 0, bi = -1, sum = 0, inside = 0, padded = 1;
          int64_t start[3] = {a * g->s[0] - g->p[0], b * g->s[1] - g->p[1], e * g->s[2] - g->p[2]};
          for (int d = 0; d < 3; d++) {
            int64_t stop = start[d] + g->k[d] < g->in[d] + g->p[d] ? start[d] + g->k[d] : g->in[d] + g->p[d];
            padded *= stop - start[d];
          }
          for (int64_t i = 0; i < g->k[0]; i++)
            for (int64_t jj = 0; jj < g->k[1]; jj++)
              for (int64_t l = 0; l < g->k[2]; l++) {
                int64_t id = start[0] + i * g->dl[0], ih = start[1] + jj * g->dl[1], iw = start[2] + l * g->dl[2];
                if (id < 0 || id >= g->in[0] || ih < 0 || ih >= g->in[1] || iw < 0 || iw >= g->in[2]) continue;
                int64_t v = (int64_t)get(t, at(&x, pl, id, ih, iw));
                if (bi < 0 || v > best) best = v, bi = (id * g->in[1] + ih) * g->in[2] + iw;
                sum += v, inside++;
              }
          int64_t div = g->divisor ? g->divisor : g->include_pad ? padded : inside;
          want[k] = (double)best, want_i[k] = (double)bi, want_avg[k] = (double)(sum / div);
        }
  nrt_op op = new_op(NRT_OP_MAX_POOL3D, 2);
  add(&op, &y), add(&op, &ind), add(&op, &x);
  scalar(&op, pack(g->k)), scalar(&op, pack(g->s)), scalar(&op, pack(g->p)), scalar(&op, pack(g->dl));
  CHECK_OK(nrt_op_execute(&op));
  CHECK(close_to(&y, want, 0) && close_to(&ind, want_i, 0));
  op = new_op(NRT_OP_AVG_POOL3D, 1);
  add(&op, &y), add(&op, &x);
  scalar(&op, pack(g->k)), scalar(&op, pack(g->s)), scalar(&op, pack(g->p));
  scalar(&op, g->include_pad), scalar(&op, g->divisor);
  if (t != NRT_INT64) {
    CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_UNSUPPORTED); /* int64 only, as the CPU */
  } else if (g->dl[0] == 1 && g->dl[1] == 1 && g->dl[2] == 1) {
    CHECK_OK(nrt_op_execute(&op));
    CHECK(close_to(&y, want_avg, 0));
  }
  free(want), free(want_i), free(want_avg);
  nrt_free(x.v.data), nrt_free(y.v.data), nrt_free(ind.v.data);
}

static void test_integer_pools_match_window_walks(void) {
  const nrt_dtype types[] = {NRT_UINT8, NRT_INT32, NRT_INT64};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    for (int ti = 0; ti < 3; ti++)
      for (int cl = 0; cl < 2; cl++) check_int_pools(&cases[i], types[ti], cl);
}

static void test_bad_descriptors_fail_cleanly(void) {
  tensor x = make(NRT_FLOAT32, 1, 1, 2, 2, 2, 0), y = make(NRT_FLOAT32, 1, 1, 1, 1, 1, 0);
  tensor ind = make(NRT_INT64, 1, 1, 1, 1, 1, 0);
  set(NRT_INT64, nrt_device_to_host(ind.v.data), 8);
  nrt_op op = new_op(NRT_OP_MAX_POOL3D_BACKWARD, 1);
  add(&op, &x), add(&op, &y), add(&op, &ind);
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INDEX_OUT_OF_RANGE);
  op = new_op(NRT_OP_MAX_POOL3D, 2);
  add(&op, &y), add(&op, &ind), add(&op, &x);
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT); /* no scalars */
  op = new_op(NRT_OP_ADAPTIVE_AVG_POOL3D, 1);
  add(&op, &ind), add(&op, &x);
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_UNSUPPORTED); /* int64 out */
  nrt_free(x.v.data), nrt_free(y.v.data), nrt_free(ind.v.data);
}

int main(void) {
  RUN(test_pools_match_window_walks);
  RUN(test_adaptive_pools_match_window_walks);
  RUN(test_integer_pools_match_window_walks);
  RUN(test_bad_descriptors_fail_cleanly);
  return CHECK_MAIN_RESULT();
}
