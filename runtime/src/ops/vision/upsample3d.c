/* Volumetric upsampling: UPSAMPLE_NEAREST3D (and nearest-exact),
 * UPSAMPLE_TRILINEAR3D and their backward ops (see neuronrt/ops/vision.h).
 *
 * Each output position reads one source position per dim (nearest) or two
 * with weights (trilinear); those tables are computed once per call with
 * PyTorch's index arithmetic (float32 for nearest; the compute type,
 * float32 or float64, for trilinear). The kernels walk runs of channels
 * ("lanes") at a time, so that with channels_last_3d (channel stride 1)
 * every source position is one contiguous, vectorised run; with NCDHW the
 * lanes step across planes. A channel's gradient only receives its own
 * channel's outputs: backward work splits by (image, channel run), each
 * summing its gradients in output order into a double buffer, so results
 * do not depend on the thread count or the layout. The nearest forward
 * copies the chosen elements' bits. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"
#include "ops/engine/elementwise.h"
#include "ops/engine/scalar_types.h"
#include "ops/engine/thread_pool.h"
#include "ops/shape/shape_common.h"
#include "ops/vision/vision_common.h"

typedef struct u3_vol {
  char *data;
  int64_t n, c, d, h, w;
  int64_t sn, sc, sd, sh, sw;
} u3_vol;

typedef struct u3_job {
  u3_vol img; /* input, or grad_input */
  u3_vol out; /* output, or grad_output */
  nrt_dtype t;
  int linear;
  int64_t *i0[3], *i1[3]; /* per dim: source positions of each output position */
  double *l0[3], *l1[3];  /* per dim: their weights (linear) */
  int64_t lanes, runs;    /* channels per task and channel runs per image */
  atomic_int out_of_memory;
} u3_job;

static inline double u3_ld(nrt_dtype t, const char *base, int64_t i) {
  switch (t) {
    case NRT_FLOAT32: return ((const float *)base)[i];
    case NRT_FLOAT64: return ((const double *)base)[i];
    case NRT_BFLOAT16: return rt_bfloat16_to_float(((const uint16_t *)base)[i]);
    case NRT_FLOAT16: return rt_half_to_float(((const uint16_t *)base)[i]);
    default: return ((const uint8_t *)base)[i];
  }
}

static inline void u3_st(nrt_dtype t, char *base, int64_t i, double v) {
  switch (t) {
    case NRT_FLOAT32: ((float *)base)[i] = (float)v; break;
    case NRT_FLOAT64: ((double *)base)[i] = v; break;
    case NRT_BFLOAT16: ((uint16_t *)base)[i] = rt_bfloat16_from_float((float)v); break;
    case NRT_FLOAT16: ((uint16_t *)base)[i] = rt_half_from_float((float)v); break;
    default: ((uint8_t *)base)[i] = (uint8_t)v; break;
  }
}

static u3_vol u3_vol_of(const nrt_tensor_view *v) {
  u3_vol x = {.data = v->data, .n = v->shape[0], .c = v->shape[1], .d = v->shape[2], .h = v->shape[3],
              .w = v->shape[4], .sn = v->strides[0], .sc = v->strides[1], .sd = v->strides[2],
              .sh = v->strides[3], .sw = v->strides[4]};
  return x;
}

/* ---- tables ----------------------------------------------------------------- */

/* PyTorch's nearest / nearest-exact source index, float32 math. */
static void u3_nearest_table(int64_t out, int64_t in, double scale, int exact, int64_t *idx) {
  float step = scale > 0 ? (float)(1.0 / scale) : (float)in / (float)out;
  for (int64_t o = 0; o < out; o++) {
    int64_t i;
    if (exact)
      i = (int64_t)floorf((float)(((double)o + 0.5) * (double)step));
    else if (out == in)
      i = o;
    else if (out == 2 * in)
      i = o >> 1;
    else
      i = (int64_t)floorf((float)o * step);
    idx[o] = i < in - 1 ? i : in - 1;
  }
}

/* PyTorch's linear source index and weights (area_pixel_compute_scale and
 * _source_index), in float32 unless f64. */
static void u3_linear_table(int64_t out, int64_t in, double scale, int align, int f64, int64_t *i0, int64_t *i1,
                            double *l0, double *l1) {
  if (f64) {
    double s = align ? (out > 1 ? (double)(in - 1) / (double)(out - 1) : 0.0)
                     : (scale > 0 ? 1.0 / scale : (double)in / (double)out);
    for (int64_t o = 0; o < out; o++) {
      double src = align ? s * (double)o : s * ((double)o + 0.5) - 0.5;
      if (src < 0) src = 0;
      int64_t a = (int64_t)src;
      if (a > in - 1) a = in - 1;
      i0[o] = a;
      i1[o] = a + (a < in - 1 ? 1 : 0);
      l1[o] = src - (double)a;
      l0[o] = 1.0 - l1[o];
    }
  } else {
    float s = align ? (out > 1 ? (float)(in - 1) / (float)(out - 1) : 0.0f)
                    : (scale > 0 ? (float)(1.0 / scale) : (float)in / (float)out);
    for (int64_t o = 0; o < out; o++) {
      float src = align ? s * (float)o : s * ((float)o + 0.5f) - 0.5f;
      if (src < 0) src = 0;
      int64_t a = (int64_t)src;
      if (a > in - 1) a = in - 1;
      i0[o] = a;
      i1[o] = a + (a < in - 1 ? 1 : 0);
      float w1 = src - (float)a;
      l1[o] = w1;
      l0[o] = 1.0f - w1;
    }
  }
}

/* ---- kernels ---------------------------------------------------------------- */

/* Nearest forward: a copy of the chosen source elements' bits, with the
 * plane and row offsets hoisted out of the inner loop. */
#define U3_NEAREST_COPY(T)                                                                  \
  for (int64_t pl = begin; pl < end; pl++) {                                               \
    const T *src = (const T *)in->data + pl / in->c * in->sn + pl % in->c * in->sc;        \
    T *dst = (T *)out->data + pl / out->c * out->sn + pl % out->c * out->sc;               \
    for (int64_t od = 0; od < out->d; od++)                                                \
      for (int64_t oh = 0; oh < out->h; oh++) {                                            \
        const T *row = src + j->i0[0][od] * in->sd + j->i0[1][oh] * in->sh;                \
        T *orow = dst + od * out->sd + oh * out->sh;                                       \
        for (int64_t ow = 0; ow < out->w; ow++) orow[ow * out->sw] = row[j->i0[2][ow] * in->sw]; \
      }                                                                                    \
  }

static void u3_nearest_planes(int64_t begin, int64_t end, void *ctx) {
  u3_job *j = ctx;
  const u3_vol *in = &j->img, *out = &j->out;
  switch (nrt_dtype_size(j->t)) {
    case 1: U3_NEAREST_COPY(uint8_t) break;
    case 2: U3_NEAREST_COPY(uint16_t) break;
    case 4: U3_NEAREST_COPY(uint32_t) break;
    default: U3_NEAREST_COPY(uint64_t) break;
  }
}

#define U3_LANES 64    /* channels of a forward task */
#define U3_BW_LANES 16 /* channels of a backward task (its buffer holds a [D, H, W] volume per channel) */

static inline __attribute__((always_inline)) void u3_store_run(nrt_dtype t, char *base, int64_t at, int64_t stride,
                                                               int64_t n, const double *src) {
  if (t == NRT_FLOAT32 && stride == 1) {
    float *d = (float *)base + at;
    for (int64_t c = 0; c < n; c++) d[c] = (float)src[c];
    return;
  }
  for (int64_t c = 0; c < n; c++) u3_st(t, base, at + c * stride, src[c]);
}

/* Nearest forward with channels innermost on both sides: each output
 * position is a copy of one source position's run of channels. */
static void u3_nearest_runs(int64_t begin, int64_t end, void *ctx) {
  u3_job *j = ctx;
  const u3_vol *in = &j->img, *out = &j->out;
  size_t es = nrt_dtype_size(j->t), run = (size_t)in->c * es;
  for (int64_t task = begin; task < end; task++) {
    int64_t oh = task % out->h, od = task / out->h % out->d, n = task / (out->h * out->d);
    const char *row = in->data + (size_t)(n * in->sn + j->i0[0][od] * in->sd + j->i0[1][oh] * in->sh) * es;
    char *orow = out->data + (size_t)(n * out->sn + od * out->sd + oh * out->sh) * es;
    for (int64_t ow = 0; ow < out->w; ow++)
      memcpy(orow + (size_t)(ow * out->sw) * es, row + (size_t)(j->i0[2][ow] * in->sw) * es, run);
  }
}

/* Trilinear forward, task (image, channel run, od, oh): the 8 taps of each
 * output position in the reference order, weights multiplied d, h, w; the
 * four source rows and their (d, h) weights are fixed per task. */
RT_SIMD_VOID(u3_linear_lanes, (int64_t begin, int64_t end, void *ctx), (begin, end, ctx)) {
  u3_job *j = ctx;
  const u3_vol *in = &j->img, *out = &j->out;
  double acc[U3_LANES], v[U3_LANES];
  for (int64_t task = begin; task < end; task++) {
    int64_t oh = task % out->h, od = task / out->h % out->d;
    int64_t c0 = task / (out->h * out->d) % j->runs * j->lanes, n = task / (out->h * out->d * j->runs);
    int64_t lanes = out->c - c0 < j->lanes ? out->c - c0 : j->lanes;
    int64_t ib = n * in->sn + c0 * in->sc, ob = n * out->sn + c0 * out->sc + od * out->sd + oh * out->sh, at[4];
    double wr[4];
    for (int a = 0; a < 2; a++)
      for (int b = 0; b < 2; b++) {
        at[a * 2 + b] = ib + (a ? j->i1[0][od] : j->i0[0][od]) * in->sd + (b ? j->i1[1][oh] : j->i0[1][oh]) * in->sh;
        wr[a * 2 + b] = (a ? j->l1[0][od] : j->l0[0][od]) * (b ? j->l1[1][oh] : j->l0[1][oh]);
      }
    if (j->t == NRT_FLOAT32 && in->sc == 1 && out->sc == 1) {
      /* float32 channel runs on both sides: per channel, the same 8 products
       * summed in the same order as below (no contraction in ISO C), with the
       * sum in a register instead of acc[] */
      for (int64_t ow = 0; ow < out->w; ow++) {
        const float *x[8];
        double wg[8];
        for (int r = 0; r < 4; r++)
          for (int e = 0; e < 2; e++) {
            wg[r * 2 + e] = wr[r] * (e ? j->l1[2][ow] : j->l0[2][ow]);
            x[r * 2 + e] = (const float *)in->data + at[r] + (e ? j->i1[2][ow] : j->i0[2][ow]) * in->sw;
          }
        float *o = (float *)out->data + ob + ow * out->sw;
        for (int64_t c = 0; c < lanes; c++) {
          double a = 0.0;
          for (int k = 0; k < 8; k++) a += wg[k] * (double)x[k][c];
          o[c] = (float)a;
        }
      }
      continue;
    }
    for (int64_t ow = 0; ow < out->w; ow++) {
      for (int64_t c = 0; c < lanes; c++) acc[c] = 0.0;
      for (int r = 0; r < 4; r++)
        for (int e = 0; e < 2; e++) {
          double wgt = wr[r] * (e ? j->l1[2][ow] : j->l0[2][ow]);
          int64_t src = at[r] + (e ? j->i1[2][ow] : j->i0[2][ow]) * in->sw;
          if (j->t == NRT_FLOAT32 && in->sc == 1) {
            const float *x = (const float *)in->data + src;
            for (int64_t c = 0; c < lanes; c++) acc[c] += wgt * (double)x[c];
          } else {
            rt_vision_load_run(j->t, in->data, src, in->sc, lanes, v, u3_ld);
            for (int64_t c = 0; c < lanes; c++) acc[c] += wgt * v[c];
          }
        }
      if (j->t != NRT_FLOAT64)
        for (int64_t c = 0; c < lanes; c++) acc[c] = (float)acc[c];
      u3_store_run(j->t, out->data, ob + ow * out->sw, out->sc, lanes, acc);
    }
  }
}

/* Trilinear forward with W innermost (NCDHW), task (plane, od, oh): the four
 * source rows and their (d, h) weights are fixed per task; each output
 * position sums its 8 taps in the lane kernel's order, with the same
 * products ((d * h) * w), so both kernels give the same bits. */
#define U3_ROW_SUM(LOAD)                                                                        \
  for (int64_t ow = 0; ow < out->w; ow++) {                                                    \
    double v = 0.0;                                                                            \
    int64_t x0 = j->i0[2][ow] * in->sw, x1 = j->i1[2][ow] * in->sw;                            \
    double w0 = j->l0[2][ow], w1 = j->l1[2][ow];                                               \
    for (int r = 0; r < 4; r++) {                                                              \
      v += (wr[r] * w0) * (double)LOAD(at[r] + x0);                                            \
      v += (wr[r] * w1) * (double)LOAD(at[r] + x1);                                            \
    }                                                                                          \
    row[ow] = v;                                                                               \
  }
#define U3_LD_F32(i) ((const float *)in->data)[i]
#define U3_LD_ANY(i) u3_ld(j->t, in->data, i)

RT_SIMD_VOID(u3_linear_rows, (int64_t begin, int64_t end, void *ctx), (begin, end, ctx)) {
  u3_job *j = ctx;
  const u3_vol *in = &j->img, *out = &j->out;
  double *row = malloc((size_t)(out->w > 0 ? out->w : 1) * sizeof(double));
  if (!row) {
    atomic_store(&j->out_of_memory, 1);
    return;
  }
  for (int64_t task = begin; task < end; task++) {
    int64_t oh = task % out->h, od = task / out->h % out->d, pl = task / (out->h * out->d);
    int64_t ib = pl / in->c * in->sn + pl % in->c * in->sc, at[4];
    double wr[4];
    for (int a = 0; a < 2; a++)
      for (int b = 0; b < 2; b++) {
        at[a * 2 + b] = ib + (a ? j->i1[0][od] : j->i0[0][od]) * in->sd + (b ? j->i1[1][oh] : j->i0[1][oh]) * in->sh;
        wr[a * 2 + b] = (a ? j->l1[0][od] : j->l0[0][od]) * (b ? j->l1[1][oh] : j->l0[1][oh]);
      }
    if (j->t == NRT_FLOAT32) {
      U3_ROW_SUM(U3_LD_F32)
    } else {
      U3_ROW_SUM(U3_LD_ANY)
    }
    if (j->t != NRT_FLOAT64)
      for (int64_t ow = 0; ow < out->w; ow++) row[ow] = (float)row[ow];
    u3_store_run(j->t, out->data, pl / out->c * out->sn + pl % out->c * out->sc + od * out->sd + oh * out->sh,
                 out->sw, out->w, row);
  }
  free(row);
}

RT_SIMD_VOID(u3_backward_lanes, (int64_t begin, int64_t end, void *ctx), (begin, end, ctx)) {
  u3_job *j = ctx;
  const u3_vol *gi = &j->img, *go = &j->out;
  int64_t plane = gi->d * gi->h * gi->w, L = j->lanes;
  double *acc = malloc((size_t)((plane > 0 ? plane : 1) * L) * sizeof(double));
  if (!acc) {
    atomic_store(&j->out_of_memory, 1);
    return;
  }
  double g[U3_BW_LANES];
  for (int64_t task = begin; task < end; task++) {
    int64_t n = task / j->runs, c0 = task % j->runs * L;
    int64_t lanes = gi->c - c0 < L ? gi->c - c0 : L;
    memset(acc, 0, (size_t)(plane * L) * sizeof(double));
    for (int64_t od = 0; od < go->d; od++)
      for (int64_t oh = 0; oh < go->h; oh++)
        for (int64_t ow = 0; ow < go->w; ow++) {
          rt_vision_load_run(j->t, go->data, n * go->sn + c0 * go->sc + od * go->sd + oh * go->sh + ow * go->sw, go->sc,
                             lanes, g, u3_ld);
          if (!j->linear) {
            double *row = acc + ((j->i0[0][od] * gi->h + j->i0[1][oh]) * gi->w + j->i0[2][ow]) * L;
            for (int64_t c = 0; c < lanes; c++) row[c] += g[c];
            continue;
          }
          for (int a = 0; a < 2; a++)
            for (int b = 0; b < 2; b++)
              for (int e = 0; e < 2; e++) {
                double wgt = (a ? j->l1[0][od] : j->l0[0][od]) * (b ? j->l1[1][oh] : j->l0[1][oh]) *
                             (e ? j->l1[2][ow] : j->l0[2][ow]);
                int64_t id = a ? j->i1[0][od] : j->i0[0][od], ih = b ? j->i1[1][oh] : j->i0[1][oh];
                int64_t iw = e ? j->i1[2][ow] : j->i0[2][ow];
                double *row = acc + ((id * gi->h + ih) * gi->w + iw) * L;
                for (int64_t c = 0; c < lanes; c++) row[c] += wgt * g[c];
              }
        }
    int64_t base = n * gi->sn + c0 * gi->sc;
    for (int64_t d = 0, x = 0; d < gi->d; d++)
      for (int64_t h = 0; h < gi->h; h++)
        for (int64_t w = 0; w < gi->w; w++, x++)
          u3_store_run(j->t, gi->data, base + d * gi->sd + h * gi->sh + w * gi->sw, gi->sc, lanes, acc + x * L);
  }
  free(acc);
}

/* ---- ops -------------------------------------------------------------------- */

static nrt_status u3_run(const nrt_op *op, int linear, int backward) {
  const char *name = nrt_op_name(op->code);
  if (op->num_operands != 2 || op->num_outputs != 1 || op->num_scalars < 4)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects 2 operands, one output and 4 scalars", name);
  for (int i = 0; i < 2; i++)
    if (op->operands[i].ndim != 5)
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: operand %d must be a 5-d [N, C, D, H, W] view, got %d dims",
                     name, i, op->operands[i].ndim);
  u3_job j;
  memset(&j, 0, sizeof j);
  atomic_init(&j.out_of_memory, 0);
  j.linear = linear;
  j.t = op->operands[0].dtype;
  int uint8_ok = !linear && !backward;
  if ((!rt_is_float_dtype(j.t) && !(uint8_ok && j.t == NRT_UINT8)) || op->operands[1].dtype != j.t)
    return rt_fail(NRT_ERROR_UNSUPPORTED, "%s: dtype %s is not supported", name, nrt_dtype_name(j.t));
  j.img = u3_vol_of(&op->operands[backward ? 0 : 1]);
  j.out = u3_vol_of(&op->operands[backward ? 1 : 0]);
  if (j.img.n != j.out.n || j.img.c != j.out.c)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: the two sides must have the same batch and channels", name);
  int64_t in[3] = {j.img.d, j.img.h, j.img.w}, out[3] = {j.out.d, j.out.h, j.out.w};
  for (int d = 0; d < 3; d++)
    if (out[d] > 0 && in[d] <= 0)
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: an empty input dim cannot be upsampled", name);
  int flag = (int)rt_scalar_int(op, 3);
  nrt_status status = NRT_SUCCESS;
  for (int d = 0; d < 3; d++) {
    size_t cnt = (size_t)(out[d] > 0 ? out[d] : 1);
    j.i0[d] = malloc(cnt * sizeof(int64_t));
    j.i1[d] = malloc(cnt * sizeof(int64_t));
    j.l0[d] = malloc(cnt * sizeof(double));
    j.l1[d] = malloc(cnt * sizeof(double));
    if (!j.i0[d] || !j.i1[d] || !j.l0[d] || !j.l1[d]) {
      status = rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory", name);
      continue;
    }
    double scale = rt_scalar_double(op, d);
    if (linear)
      u3_linear_table(out[d], in[d], scale, flag, j.t == NRT_FLOAT64, j.i0[d], j.i1[d], j.l0[d], j.l1[d]);
    else
      u3_nearest_table(out[d], in[d], scale, flag, j.i0[d]);
  }
  if (status == NRT_SUCCESS) {
    int64_t planes = j.img.n * j.img.c;
    int inner = j.img.sc == 1 && j.out.sc == 1 && j.img.c > 1;
    if (!linear && !backward) {
      /* the nearest copy: runs of channels (channels_last_3d) or planes */
      int64_t rows = j.img.n * out[0] * out[1], work = inner ? out[2] * j.img.c : out[0] * out[1] * out[2];
      int64_t grain = work >= RT_VISION_GRAIN ? 1 : RT_VISION_GRAIN / (work > 0 ? work : 1);
      if (planes > 0) rt_parallel_for(inner ? rows : planes, grain, inner ? u3_nearest_runs : u3_nearest_planes, &j);
    } else {
      j.lanes = backward ? U3_BW_LANES : U3_LANES;
      j.runs = j.img.c > 0 ? (j.img.c + j.lanes - 1) / j.lanes : 0;
      int64_t tasks = j.img.n * j.runs * (backward ? 1 : out[0] * out[1]);
      int64_t work = backward ? RT_VISION_GRAIN : out[2] * 8 * (j.img.c < j.lanes ? j.img.c : j.lanes);
      int64_t grain = work >= RT_VISION_GRAIN ? 1 : RT_VISION_GRAIN / (work > 0 ? work : 1);
      if (!backward && !inner) {
        /* W innermost: rows of one plane */
        tasks = planes * out[0] * out[1];
        work = out[2] * 8;
        grain = work >= RT_VISION_GRAIN ? 1 : RT_VISION_GRAIN / (work > 0 ? work : 1);
      }
      rt_range_fn fn = backward ? u3_backward_lanes : inner ? u3_linear_lanes : u3_linear_rows;
      if (tasks > 0 && planes > 0) rt_parallel_for(tasks, grain, fn, &j);
    }
    if (atomic_load(&j.out_of_memory))
      status = rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for a gradient plane", name);
  }
  for (int d = 0; d < 3; d++) free(j.i0[d]), free(j.i1[d]), free(j.l0[d]), free(j.l1[d]);
  return status;
}

nrt_status rt_kernel_upsample_nearest3d(const nrt_op *op) { return u3_run(op, 0, 0); }
nrt_status rt_kernel_upsample_nearest3d_backward(const nrt_op *op) { return u3_run(op, 0, 1); }
nrt_status rt_kernel_upsample_trilinear3d(const nrt_op *op) { return u3_run(op, 1, 0); }
nrt_status rt_kernel_upsample_trilinear3d_backward(const nrt_op *op) { return u3_run(op, 1, 1); }
