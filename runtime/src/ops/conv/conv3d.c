/* Volumetric convolution: CONV3D, CONV3D_INPUT_GRAD and CONV3D_WEIGHT_GRAD
 * (see neuronrt/ops/vision.h). float32 and bfloat16 run as 2-d
 * convolutions with depth folded into the channels (conv3d_fold.h); this
 * file is their reference twin and the path of the other dtypes: vol2col /
 * col2vol and the convolution's matrix products (conv_gemm.h, the
 * project's GEMM).
 *
 * Operands are 5-d views [N, C, D, H, W] with any strides (NCDHW,
 * channels_last_3d, sliced). float32 computes in float32, float64 in
 * float64, bfloat16 and float16 in float32, rounded once on the way out.
 *
 * Work is split into tasks with disjoint outputs whose shapes depend on the
 * problem only, and every output element is summed by one task in a fixed
 * order, so results do not depend on the thread count:
 *   forward        by (image, group, tile of output positions): the tile's
 *                  columns [taps][positions], one product per tile;
 *   input gradient by (image, group): the tiles' columns in order, each
 *                  scattered into a private copy of the group's planes;
 *   weight grad.   by (group, part): a fixed number of parts of the
 *                  (image, tile) sequence, each into a private copy of the
 *                  group's weight rows, summed in part order at the end.
 * The plain reference twin is the definition loop in runtime/tests.
 * Integer dtypes (forward and input gradient) run conv_integer.c's loops. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"
#include "ops/conv/conv3d_fold.h"
#include "ops/conv/conv_gemm.h"
#include "ops/conv/conv_integer.h"
#include "ops/engine/scalar_types.h"
#include "ops/engine/thread_pool.h"
#include "ops/shape/shape_common.h"
#include "ops/vision/vision_common.h"

/* A [N, C, D, H, W] operand. */
typedef struct vol {
  char *data;
  int64_t n, c, d, h, w;
  int64_t sn, sc, sd, sh, sw;
} vol;

typedef enum c3_role { C3_FORWARD, C3_INPUT_GRAD, C3_WEIGHT_GRAD } c3_role;

typedef struct c3_job {
  vol img, out; /* I (input or its gradient) and O (output or its gradient) */
  const nrt_tensor_view *w;
  nrt_dtype t;
  int is_f64;
  int64_t k[3], s[3], p[3], dl[3], groups;
  int64_t cg, kg, kk, opos; /* image / output channels per group, taps, output positions */
  int64_t nt, tiles;        /* positions per tile, tiles per image */
  int64_t parts;            /* weight-gradient parts per group */
  const char *bias;
  int64_t bias_stride;
  void *wmat; /* the weight as a dense [K][kk] matrix of the compute type */
  void *acc;  /* weight-gradient accumulators [groups][parts][kg][kk] */
  void *packed[2]; /* dense NCDHW copies of read operands whose W stride is not 1 */
  int pointwise;   /* 1x1x1 taps, stride 1, no padding, dense image of the compute type */
  atomic_int failed;
} c3_job;

/* ---- element access ---------------------------------------------------------- */

static inline double c3_ld(nrt_dtype t, const char *base, int64_t i) {
  switch (t) {
    case NRT_FLOAT32: return ((const float *)base)[i];
    case NRT_FLOAT64: return ((const double *)base)[i];
    case NRT_BFLOAT16: return rt_bfloat16_to_float(((const uint16_t *)base)[i]);
    default: return rt_half_to_float(((const uint16_t *)base)[i]);
  }
}

static inline void c3_st(nrt_dtype t, char *base, int64_t i, double v) {
  switch (t) {
    case NRT_FLOAT32: ((float *)base)[i] = (float)v; break;
    case NRT_FLOAT64: ((double *)base)[i] = v; break;
    case NRT_BFLOAT16: ((uint16_t *)base)[i] = rt_bfloat16_from_float((float)v); break;
    default: ((uint16_t *)base)[i] = rt_half_from_float((float)v); break;
  }
}

static vol vol_of(const nrt_tensor_view *v) {
  vol x = {.data = v->data, .n = v->shape[0], .c = v->shape[1], .d = v->shape[2], .h = v->shape[3],
           .w = v->shape[4], .sn = v->strides[0], .sc = v->strides[1], .sd = v->strides[2],
           .sh = v->strides[3], .sw = v->strides[4]};
  return x;
}

/* The products in the compute type; a failure (out of memory) flags the job. */
static void c3_gemm(c3_job *j, int64_t m, int64_t n, int64_t k, void *a, int64_t a_rs, int64_t a_cs, void *b,
                    int64_t b_rs, int64_t b_cs, void *c, int64_t c_rs, int accumulate) {
  int rc;
  if (j->is_f64)
    rc = rt_conv_gemm_f64(m, n, k, (rt_matrix_f64){a, a_rs, a_cs}, (rt_matrix_f64){b, b_rs, b_cs},
                          (rt_matrix_f64){c, c_rs, 1}, accumulate);
  else
    rc = rt_conv_gemm_f32(m, n, k, (rt_matrix_f32){a, a_rs, a_cs}, (rt_matrix_f32){b, b_rs, b_cs},
                          (rt_matrix_f32){c, c_rs, 1}, accumulate);
  if (rc) atomic_store(&j->failed, 1);
}

static inline size_t c3_asize(const c3_job *j) { return j->is_f64 ? sizeof(double) : sizeof(float); }

static inline double c3_get(const c3_job *j, const void *buf, int64_t i) {
  return j->is_f64 ? ((const double *)buf)[i] : ((const float *)buf)[i];
}

static inline void c3_set(const c3_job *j, void *buf, int64_t i, double v) {
  if (j->is_f64)
    ((double *)buf)[i] = v;
  else
    ((float *)buf)[i] = (float)v;
}

static inline void c3_add(const c3_job *j, void *buf, int64_t i, double v) {
  if (j->is_f64)
    ((double *)buf)[i] += v;
  else
    ((float *)buf)[i] += (float)v;
}

/* Tap r of a group's weight row is (channel, a, b, e) in that order. */
static inline void c3_tap(const c3_job *j, int64_t r, int64_t *c, int64_t *a, int64_t *b, int64_t *e) {
  *e = r % j->k[2];
  *b = r / j->k[2] % j->k[1];
  *a = r / (j->k[2] * j->k[1]) % j->k[0];
  *c = r / (j->k[0] * j->k[1] * j->k[2]);
}

/* Output positions q0 .. q0 + m - 1 as runs along W: run R covers columns
 * u .. u + run - 1, positions (od, oh, ow .. ow + run - 1). Walking rows
 * keeps the divisions out of the per-element loops. */
typedef struct c3_rows {
  int64_t u, run, od, oh, ow;
} c3_rows;

static inline c3_rows c3_rows_first(const c3_job *j, int64_t q0, int64_t m) {
  c3_rows R = {.u = 0, .ow = q0 % j->out.w, .oh = q0 / j->out.w % j->out.h, .od = q0 / (j->out.w * j->out.h)};
  R.run = j->out.w - R.ow < m ? j->out.w - R.ow : m;
  return R;
}

static inline void c3_rows_next(const c3_job *j, c3_rows *R, int64_t m) {
  R->u += R->run;
  R->ow = 0;
  if (++R->oh == j->out.h) R->oh = 0, R->od++;
  R->run = j->out.w < m - R->u ? j->out.w : m - R->u;
}

#define C3_FOR_ROWS(j, q0, m, R) for (c3_rows R = c3_rows_first(j, q0, m); R.u < (m); c3_rows_next(j, &R, m))

/* Of a run of `run` output columns whose tap reads image column iw0 + t * s,
 * the columns t in [*lo, *hi) fall inside the image's w columns. */
static inline void c3_inside(int64_t iw0, int64_t s, int64_t run, int64_t w, int64_t *lo, int64_t *hi) {
  int64_t l = iw0 >= 0 ? 0 : (-iw0 + s - 1) / s;
  int64_t h = iw0 > w - 1 ? 0 : (w - 1 - iw0) / s + 1;
  if (h > run) h = run;
  if (l > h) l = h;
  *lo = l, *hi = h;
}

/* dst[di + t] = element at + t * stride of data, for t < cnt, in the compute type. */
static inline void c3_load_run(const c3_job *j, const char *data, int64_t at, int64_t stride, int64_t cnt, void *dst,
                               int64_t di) {
  switch (j->t) {
    case NRT_FLOAT32: {
      const float *s = (const float *)data + at;
      float *d = (float *)dst + di;
      if (stride == 1 && cnt > 0)
        memcpy(d, s, (size_t)cnt * sizeof(float));
      else
        for (int64_t t = 0; t < cnt; t++) d[t] = s[t * stride];
      break;
    }
    case NRT_FLOAT64: {
      const double *s = (const double *)data + at;
      double *d = (double *)dst + di;
      if (stride == 1 && cnt > 0)
        memcpy(d, s, (size_t)cnt * sizeof(double));
      else
        for (int64_t t = 0; t < cnt; t++) d[t] = s[t * stride];
      break;
    }
    default: {
      float *d = (float *)dst + di;
      for (int64_t t = 0; t < cnt; t++) d[t] = (float)c3_ld(j->t, data, at + t * stride);
    }
  }
}

/* col[r][u] = tap r of position q0 + u, for u < m (row stride m), zero
 * outside the image: each output row is one strided run of image pixels. */
static void c3_vol2col(const c3_job *j, int64_t n, int64_t g, int64_t q0, int64_t m, void *col) {
  size_t as = c3_asize(j);
  const vol *im = &j->img;
  for (int64_t r = 0; r < j->kk; r++) {
    int64_t c, a, b, e;
    c3_tap(j, r, &c, &a, &b, &e);
    int64_t base = n * im->sn + (g * j->cg + c) * im->sc;
    char *dst = (char *)col + (size_t)(r * m) * as;
    C3_FOR_ROWS(j, q0, m, R) {
      int64_t id = R.od * j->s[0] - j->p[0] + a * j->dl[0], ih = R.oh * j->s[1] - j->p[1] + b * j->dl[1];
      int64_t iw0 = R.ow * j->s[2] - j->p[2] + e * j->dl[2], lo = 0, hi = 0;
      if (id >= 0 && id < im->d && ih >= 0 && ih < im->h) c3_inside(iw0, j->s[2], R.run, im->w, &lo, &hi);
      memset(dst + (size_t)R.u * as, 0, (size_t)lo * as);
      c3_load_run(j, im->data, base + id * im->sd + ih * im->sh + (iw0 + lo * j->s[2]) * im->sw, j->s[2] * im->sw,
                  hi - lo, dst, R.u + lo);
      memset(dst + (size_t)(R.u + hi) * as, 0, (size_t)(R.run - hi) * as);
    }
  }
}

/* The columns of positions q0 .. q0 + m - 1 and their row stride: a
 * pointwise convolution's columns are the image's own channel rows (no
 * copy); otherwise vol2col fills col. */
static const void *c3_columns(const c3_job *j, int64_t n, int64_t g, int64_t q0, int64_t m, void *col,
                              int64_t *row_stride) {
  if (j->pointwise) {
    *row_stride = j->img.sc;
    return j->img.data + (size_t)(n * j->img.sn + g * j->cg * j->img.sc + q0) * c3_asize(j);
  }
  c3_vol2col(j, n, g, q0, m, col);
  *row_stride = m;
  return col;
}

/* buf[k][u] = O[n, g*kg + k, q0 + u]. */
static void c3_gather_out(const c3_job *j, int64_t n, int64_t g, int64_t q0, int64_t m, void *buf) {
  const vol *o = &j->out;
  for (int64_t k = 0; k < j->kg; k++) {
    int64_t base = n * o->sn + (g * j->kg + k) * o->sc;
    C3_FOR_ROWS(j, q0, m, R)
    c3_load_run(j, o->data, base + R.od * o->sd + R.oh * o->sh + R.ow * o->sw, o->sw, R.run, buf, k * m + R.u);
  }
}

/* ---- tasks ------------------------------------------------------------------- */

static void c3_forward_tasks(int64_t begin, int64_t end, void *ctx) {
  c3_job *j = ctx;
  size_t as = c3_asize(j);
  void *col = malloc((size_t)(j->kk * j->nt) * as + 1), *res = malloc((size_t)(j->kg * j->nt) * as + 1);
  if (!col || !res) {
    atomic_store(&j->failed, 1);
    free(col), free(res);
    return;
  }
  for (int64_t task = begin; task < end; task++) {
    int64_t tile = task % j->tiles, g = task / j->tiles % j->groups, n = task / (j->tiles * j->groups);
    int64_t q0 = tile * j->nt, m = j->opos - q0 < j->nt ? j->opos - q0 : j->nt;
    if (j->kk > 0) {
      int64_t rs;
      const void *cols = c3_columns(j, n, g, q0, m, col, &rs);
      /* res[u][k] = cols^T [m][kk] * W_g^T [kk][kg]: the positions are the product's long side */
      c3_gemm(j, m, j->kg, j->kk, (void *)cols, 1, rs, (char *)j->wmat + (size_t)(g * j->kg * j->kk) * as, 1, j->kk,
              res, j->kg, 0);
    }
    for (int64_t k = 0; k < j->kg; k++) {
      int64_t ch = g * j->kg + k;
      double b = j->bias ? c3_ld(j->t, j->bias, ch * j->bias_stride) : 0.0;
      int64_t base = n * j->out.sn + ch * j->out.sc;
      C3_FOR_ROWS(j, q0, m, R) {
        int64_t at = base + R.od * j->out.sd + R.oh * j->out.sh + R.ow * j->out.sw;
        for (int64_t t = 0; t < R.run; t++) {
          double v = j->kk > 0 ? c3_get(j, res, (R.u + t) * j->kg + k) : 0.0;
          /* float32 rounding of the sum with the bias, as the 2-d kernels */
          c3_st(j->t, j->out.data, at + t * j->out.sw, j->is_f64 ? v + b : (double)((float)v + (float)b));
        }
      }
    }
  }
  free(col), free(res);
}

static void c3_input_grad_tasks(int64_t begin, int64_t end, void *ctx) {
  c3_job *j = ctx;
  size_t as = c3_asize(j);
  int64_t plane = j->img.d * j->img.h * j->img.w;
  void *col = malloc((size_t)(j->kk * j->nt) * as + 1), *go = malloc((size_t)(j->kg * j->nt) * as + 1);
  void *acc = malloc((size_t)(j->cg * plane) * as + 1);
  if (!col || !go || !acc) {
    atomic_store(&j->failed, 1);
    free(col), free(go), free(acc);
    return;
  }
  for (int64_t task = begin; task < end; task++) {
    int64_t g = task % j->groups, n = task / j->groups;
    memset(acc, 0, (size_t)(j->cg * plane) * as);
    for (int64_t tile = 0; j->kk > 0 && j->kg > 0 && tile < j->tiles; tile++) {
      int64_t q0 = tile * j->nt, m = j->opos - q0 < j->nt ? j->opos - q0 : j->nt;
      c3_gather_out(j, n, g, q0, m, go);
      /* col[kk][m] = W_g^T [kk][kg] * go [kg][m] */
      c3_gemm(j, j->kk, m, j->kg, (char *)j->wmat + (size_t)(g * j->kg * j->kk) * as, 1, j->kk, go, m, 1, col, m, 0);
      /* col2vol: each output row's tap adds into one strided run of the plane */
      for (int64_t r = 0; r < j->kk; r++) {
        int64_t c, a, b, e;
        c3_tap(j, r, &c, &a, &b, &e);
        C3_FOR_ROWS(j, q0, m, R) {
          int64_t id = R.od * j->s[0] - j->p[0] + a * j->dl[0], ih = R.oh * j->s[1] - j->p[1] + b * j->dl[1];
          int64_t iw0 = R.ow * j->s[2] - j->p[2] + e * j->dl[2], lo, hi;
          if (id < 0 || id >= j->img.d || ih < 0 || ih >= j->img.h) continue;
          c3_inside(iw0, j->s[2], R.run, j->img.w, &lo, &hi);
          int64_t at = c * plane + (id * j->img.h + ih) * j->img.w + iw0, s2 = j->s[2], from = r * m + R.u;
          if (j->is_f64)
            for (int64_t t = lo; t < hi; t++) ((double *)acc)[at + t * s2] += ((const double *)col)[from + t];
          else
            for (int64_t t = lo; t < hi; t++) ((float *)acc)[at + t * s2] += ((const float *)col)[from + t];
        }
      }
    }
    for (int64_t c = 0; c < j->cg; c++) {
      int64_t ch = g * j->cg + c;
      double b = j->bias ? c3_ld(j->t, j->bias, ch * j->bias_stride) : 0.0;
      for (int64_t id = 0, x = 0; id < j->img.d; id++)
        for (int64_t ih = 0; ih < j->img.h; ih++) {
          int64_t at = n * j->img.sn + ch * j->img.sc + id * j->img.sd + ih * j->img.sh;
          for (int64_t iw = 0; iw < j->img.w; iw++, x++) {
            double v = c3_get(j, acc, c * plane + x);
            c3_st(j->t, j->img.data, at + iw * j->img.sw, j->is_f64 ? v + b : (double)((float)v + (float)b));
          }
        }
    }
  }
  free(col), free(go), free(acc);
}

/* Part p of a group covers items [p * items / parts, (p + 1) * items / parts)
 * of the (image, tile) sequence. */
static void c3_weight_grad_tasks(int64_t begin, int64_t end, void *ctx) {
  c3_job *j = ctx;
  size_t as = c3_asize(j);
  void *col = malloc((size_t)(j->kk * j->nt) * as + 1), *go = malloc((size_t)(j->kg * j->nt) * as + 1);
  if (!col || !go) {
    atomic_store(&j->failed, 1);
    free(col), free(go);
    return;
  }
  int64_t items = j->img.n * j->tiles;
  for (int64_t task = begin; task < end; task++) {
    int64_t part = task % j->parts, g = task / j->parts;
    void *acc = (char *)j->acc + (size_t)(task * j->kg * j->kk) * as;
    memset(acc, 0, (size_t)(j->kg * j->kk) * as);
    int64_t i0 = part * items / j->parts, i1 = (part + 1) * items / j->parts;
    for (int64_t it = i0; it < i1; it++) {
      int64_t n = it / j->tiles, tile = it % j->tiles;
      int64_t q0 = tile * j->nt, m = j->opos - q0 < j->nt ? j->opos - q0 : j->nt;
      int64_t rs;
      const void *cols = c3_columns(j, n, g, q0, m, col, &rs);
      c3_gather_out(j, n, g, q0, m, go);
      /* acc[kg][kk] += go [kg][m] * col^T [m][kk] */
      c3_gemm(j, j->kg, j->kk, m, go, m, 1, (void *)cols, 1, rs, acc, j->kk, 1);
    }
  }
  free(col), free(go);
}

/* ---- setup ------------------------------------------------------------------- */

#define C3_TILE_BUDGET (1 << 18) /* column elements of a tile */
#define C3_PARTS 8
#define C3_PARTS_BUDGET (1 << 23) /* weight-gradient accumulator elements */

/* scalars [stride, padding, dilation, groups]; the first three pack the
 * (D, H, W) values as three 21-bit fields, D highest */
static nrt_status c3_geometry(const nrt_op *op, int64_t *stride, int64_t *padding, int64_t *dilation) {
  for (int s = 0; s < 3; s++) {
    int64_t packed = rt_scalar_int(op, s), *dst = s == 0 ? stride : s == 1 ? padding : dilation;
    if (packed < 0)
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: scalar %d is not a packed triple", nrt_op_name(op->code), s);
    for (int d = 0; d < 3; d++) dst[d] = (packed >> (21 * (2 - d))) & ((1 << 21) - 1);
  }
  return NRT_SUCCESS;
}

/* Integer dtypes take the direct loops of conv_integer.c. */
static nrt_status c3_integer(const nrt_op *op, c3_role role) {
  const char *name = nrt_op_name(op->code);
  if ((op->num_operands != 3 && op->num_operands != 4) || op->num_outputs != 1 || op->num_scalars < 4)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects 3 operands (4 with a bias), one output and 4 scalars",
                   name);
  int oi = role == C3_FORWARD ? 0 : 1;
  rt_conv_int c = {.img = op->operands[1 - oi], .out = op->operands[oi], .w = op->operands[2],
                   .bias = op->num_operands == 4 ? &op->operands[3] : NULL, .groups = rt_scalar_int(op, 3),
                   .input_grad = role == C3_INPUT_GRAD};
  nrt_status s = c3_geometry(op, c.s, c.p, c.dl);
  return s ? s : rt_conv_integer(&c, name);
}

/* Operands read along W as strided runs (vol2col, the output gather) are
 * copied once to dense NCDHW when W is not their innermost dim
 * (channels_last_3d): the runs then become contiguous copies. The values
 * are copied bit for bit, so results do not change. */
static int c3_pack(vol *v, nrt_dtype t, void **own) {
  if (v->sw == 1 || v->n * v->c * v->d * v->h * v->w == 0) return 0;
  size_t es = nrt_dtype_size(t);
  char *dst = malloc((size_t)(v->n * v->c * v->d * v->h * v->w) * es);
  if (!dst) return -1;
  char *d = dst;
  for (int64_t n = 0; n < v->n; n++)
    for (int64_t c = 0; c < v->c; c++)
      for (int64_t z = 0; z < v->d; z++)
        for (int64_t h = 0; h < v->h; h++) {
          const char *src = v->data + (size_t)(n * v->sn + c * v->sc + z * v->sd + h * v->sh) * es;
          size_t step = (size_t)v->sw * es;
          switch (es) {
            case 2:
              for (int64_t w = 0; w < v->w; w++) ((uint16_t *)d)[w] = *(const uint16_t *)(src + w * step);
              break;
            case 4:
              for (int64_t w = 0; w < v->w; w++) ((uint32_t *)d)[w] = *(const uint32_t *)(src + w * step);
              break;
            default:
              for (int64_t w = 0; w < v->w; w++) ((uint64_t *)d)[w] = *(const uint64_t *)(src + w * step);
          }
          d += (size_t)v->w * es;
        }
  *own = dst;
  v->data = dst;
  v->sw = 1, v->sh = v->w, v->sd = v->h * v->w, v->sc = v->d * v->h * v->w, v->sn = v->c * v->sc;
  return 0;
}

/* Checks the op and fills the job's geometry. */
static nrt_status c3_check(const nrt_op *op, c3_role role, c3_job *j) {
  const char *name = nrt_op_name(op->code);
  int with_bias = role != C3_WEIGHT_GRAD && op->num_operands == 4;
  if ((op->num_operands != 3 && !with_bias) || op->num_outputs != 1 || op->num_scalars < 4)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects 3 operands (4 with a bias), one output and 4 scalars",
                   name);
  for (int i = 0; i < 3; i++)
    if (op->operands[i].ndim != 5)
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: operand %d must be a 5-d [N, C, D, H, W] view, got %d dims",
                     name, i, op->operands[i].ndim);
  nrt_dtype t = op->operands[0].dtype;
  for (int i = 1; i < op->num_operands; i++)
    if (op->operands[i].dtype != t)
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: operands must share one dtype", name);
  if (!rt_is_float_dtype(t))
    return rt_fail(NRT_ERROR_UNSUPPORTED, "%s: dtype %s is not supported", name, nrt_dtype_name(t));
  memset(j, 0, sizeof *j);
  atomic_init(&j->failed, 0);
  j->t = t;
  j->is_f64 = t == NRT_FLOAT64;
  int oi = role == C3_FORWARD ? 0 : role == C3_INPUT_GRAD ? 1 : 2;
  int ii = role == C3_FORWARD ? 1 : role == C3_INPUT_GRAD ? 0 : 1;
  j->w = &op->operands[role == C3_WEIGHT_GRAD ? 0 : 2];
  j->img = vol_of(&op->operands[ii]);
  j->out = vol_of(&op->operands[oi]);
  nrt_status st = c3_geometry(op, j->s, j->p, j->dl);
  if (st) return st;
  j->groups = rt_scalar_int(op, 3);
  for (int d = 0; d < 3; d++) {
    j->k[d] = j->w->shape[2 + d];
    if (j->s[d] <= 0 || j->dl[d] <= 0)
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: stride and dilation must be positive", name);
  }
  if (j->groups <= 0 || j->img.n != j->out.n || j->out.c != j->w->shape[0] || j->out.c % j->groups != 0 ||
      j->img.c != j->w->shape[1] * j->groups)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "%s: weight [%lld, %lld, ...] with %lld groups does not fit %lld image and %lld output channels",
                   name, (long long)j->w->shape[0], (long long)j->w->shape[1], (long long)j->groups,
                   (long long)j->img.c, (long long)j->out.c);
  int64_t in[3] = {j->img.d, j->img.h, j->img.w}, on[3] = {j->out.d, j->out.h, j->out.w};
  for (int d = 0; d < 3; d++) {
    int64_t span = in[d] + 2 * j->p[d] - j->dl[d] * (j->k[d] - 1) - 1;
    int64_t most = span < 0 ? 0 : span / j->s[d] + 1;
    if (on[d] > most)
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: %lld output positions along dim %d, at most %lld fit", name,
                     (long long)on[d], 2 + d, (long long)most);
  }
  if (with_bias) {
    const nrt_tensor_view *b = &op->operands[3];
    int64_t want = role == C3_FORWARD ? j->out.c : j->img.c;
    if (b->ndim != 1 || b->shape[0] != want)
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: bias must be 1-d of size %lld", name, (long long)want);
    j->bias = b->data;
    j->bias_stride = b->strides[0];
  }
  j->cg = j->w->shape[1];
  j->kg = j->out.c / j->groups;
  j->kk = j->cg * j->k[0] * j->k[1] * j->k[2];
  j->opos = j->out.d * j->out.h * j->out.w;
  int64_t nt = C3_TILE_BUDGET / (j->kk > 0 ? j->kk : 1);
  nt = nt < 16 ? 16 : nt > 1024 ? 1024 : nt;
  j->nt = j->opos < nt ? j->opos : nt;
  j->tiles = j->nt > 0 ? (j->opos + j->nt - 1) / j->nt : 0;
  return NRT_SUCCESS;
}

/* The reference path's own operands: dense copies, the weight matrix. */
static nrt_status c3_setup(const nrt_op *op, c3_role role, c3_job *j) {
  const char *name = nrt_op_name(op->code);
  nrt_dtype t = j->t;
  int64_t in[3] = {j->img.d, j->img.h, j->img.w}, on[3] = {j->out.d, j->out.h, j->out.w};
  if ((role != C3_INPUT_GRAD && c3_pack(&j->img, t, &j->packed[0])) ||
      (role != C3_FORWARD && c3_pack(&j->out, t, &j->packed[1]))) {
    free(j->packed[0]);
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for a dense copy of an operand", name);
  }
  j->pointwise = role != C3_INPUT_GRAD && (t == NRT_FLOAT32 || t == NRT_FLOAT64) && j->img.sw == 1 &&
                 j->img.sh == j->img.w && j->img.sd == j->img.h * j->img.w;
  for (int d = 0; d < 3; d++) j->pointwise &= j->k[d] == 1 && j->s[d] == 1 && j->p[d] == 0 && on[d] == in[d];
  if (role != C3_WEIGHT_GRAD) {
    /* the weight as a dense [K][kk] matrix of the compute type */
    int64_t K = j->out.c;
    j->wmat = malloc((size_t)(K * j->kk) * c3_asize(j) + 1);
    if (!j->wmat) {
      free(j->packed[0]), free(j->packed[1]);
      return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for the weight", name);
    }
    const nrt_tensor_view *w = j->w;
    for (int64_t k = 0; k < K; k++)
      for (int64_t r = 0; r < j->kk; r++) {
        int64_t e = r % j->k[2], b = r / j->k[2] % j->k[1], a = r / (j->k[2] * j->k[1]) % j->k[0];
        int64_t c = r / (j->k[0] * j->k[1] * j->k[2]);
        int64_t at = k * w->strides[0] + c * w->strides[1] + a * w->strides[2] + b * w->strides[3] + e * w->strides[4];
        c3_set(j, j->wmat, k * j->kk + r, c3_ld(j->t, w->data, at));
      }
  }
  return NRT_SUCCESS;
}

static nrt_status c3_finish(const nrt_op *op, c3_job *j) {
  free(j->wmat);
  free(j->acc);
  free(j->packed[0]), free(j->packed[1]);
  if (atomic_load(&j->failed))
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for column buffers", nrt_op_name(op->code));
  return NRT_SUCCESS;
}

static int64_t c3_grain(double work_per_task) {
  return work_per_task >= RT_VISION_GRAIN ? 1 : (int64_t)(RT_VISION_GRAIN / (work_per_task > 1 ? work_per_task : 1));
}

static nrt_status c3_forward(const nrt_op *op, c3_job *j) {
  int64_t tasks = j->out.n * j->groups * j->tiles;
  if (tasks > 0) rt_parallel_for(tasks, c3_grain((double)(j->nt * j->kg * (j->kk + 1))), c3_forward_tasks, j);
  return c3_finish(op, j);
}

static nrt_status c3_input_grad(const nrt_op *op, c3_job *j) {
  int64_t tasks = j->img.n * j->groups;
  if (tasks > 0 && j->cg > 0)
    rt_parallel_for(tasks, c3_grain((double)(j->opos * j->kg * (j->kk + 1))), c3_input_grad_tasks, j);
  return c3_finish(op, j);
}

static nrt_status c3_weight_grad(const nrt_op *op, c3_job *j) {
  int64_t items = j->img.n * j->tiles, wsize = j->out.c * j->kk;
  int64_t parts = C3_PARTS;
  if (parts > items) parts = items;
  while (parts > 1 && parts * wsize > C3_PARTS_BUDGET) parts--;
  if (parts < 1) parts = 1;
  j->parts = parts;
  size_t as = c3_asize(j);
  j->acc = calloc((size_t)(wsize * parts) + 1, as);
  if (!j->acc) {
    free(j->packed[0]), free(j->packed[1]);
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for the accumulators", nrt_op_name(op->code));
  }
  if (wsize > 0 && items > 0) rt_parallel_for(j->groups * parts, 1, c3_weight_grad_tasks, j);
  /* sum the parts of each group in order, and store */
  const nrt_tensor_view *w = j->w;
  for (int64_t g = 0; g < j->groups; g++)
    for (int64_t k = 0; k < j->kg; k++)
      for (int64_t r = 0; r < j->kk; r++) {
        double v = 0.0;
        if (items > 0)
          for (int64_t p = 0; p < parts; p++) {
            double x = c3_get(j, j->acc, ((g * parts + p) * j->kg + k) * j->kk + r);
            v = j->is_f64 ? v + x : (double)((float)v + (float)x);
          }
        int64_t e = r % j->k[2], b = r / j->k[2] % j->k[1], a = r / (j->k[2] * j->k[1]) % j->k[0];
        int64_t c = r / (j->k[0] * j->k[1] * j->k[2]);
        c3_st(j->t, w->data,
              (g * j->kg + k) * w->strides[0] + c * w->strides[1] + a * w->strides[2] + b * w->strides[3] +
                  e * w->strides[4],
              v);
      }
  return c3_finish(op, j);
}

static rt_conv3d_problem c3_problem(const nrt_op *op, c3_role role, const c3_job *j) {
  int oi = role == C3_FORWARD ? 0 : role == C3_INPUT_GRAD ? 1 : 2;
  int ii = role == C3_FORWARD ? 1 : role == C3_INPUT_GRAD ? 0 : 1;
  rt_conv3d_problem p = {.code = op->code, .role = (rt_conv3d_role)role, .img = op->operands[ii],
                         .out = op->operands[oi], .w = *j->w, .groups = j->groups};
  if (j->bias) p.bias = &op->operands[3];
  for (int d = 0; d < 3; d++) p.k[d] = j->k[d], p.s[d] = j->s[d], p.p[d] = j->p[d], p.dl[d] = j->dl[d];
  return p;
}

nrt_status rt_conv3d_run(const nrt_op *op, int reference) {
  c3_role role = op->code == NRT_OP_CONV3D ? C3_FORWARD : op->code == NRT_OP_CONV3D_INPUT_GRAD ? C3_INPUT_GRAD
                                                                                              : C3_WEIGHT_GRAD;
  if (role != C3_WEIGHT_GRAD && op->num_operands > 0 && rt_conv_integer_dtype(op->operands[0].dtype))
    return c3_integer(op, role);
  c3_job j;
  nrt_status s = c3_check(op, role, &j);
  if (s) return s;
  if (!reference) {
    rt_conv3d_problem p = c3_problem(op, role, &j);
    if (rt_conv3d_fold_usable(&p)) return rt_conv3d_fold(&p);
  }
  s = c3_setup(op, role, &j);
  if (s) return s;
  return role == C3_FORWARD ? c3_forward(op, &j) : role == C3_INPUT_GRAD ? c3_input_grad(op, &j)
                                                                          : c3_weight_grad(op, &j);
}

nrt_status rt_kernel_conv3d(const nrt_op *op) { return rt_conv3d_run(op, 0); }

nrt_status rt_kernel_conv3d_input_grad(const nrt_op *op) { return rt_conv3d_run(op, 0); }

nrt_status rt_kernel_conv3d_weight_grad(const nrt_op *op) { return rt_conv3d_run(op, 0); }
