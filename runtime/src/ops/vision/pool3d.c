/* Volumetric pooling: MAX_POOL3D, ADAPTIVE_MAX_POOL3D, MAX_POOL3D_BACKWARD,
 * AVG_POOL3D, AVG_POOL3D_BACKWARD, ADAPTIVE_AVG_POOL3D and
 * ADAPTIVE_AVG_POOL3D_BACKWARD (see neuronrt/ops/vision.h).
 *
 * Every window is separable: per dim and output position, the first input
 * position it covers, the number of taps inside the input, the tap step
 * and its size for the divisor. The windows are computed once per call;
 * the floating kernels walk them for a run of channels ("lanes") at a time,
 * so that with channels_last_3d (channel stride 1) every tap is one
 * contiguous, vectorised run; with NCDHW the lanes step across planes.
 * Forward work splits by (image, channel run, output row); a channel's
 * gradient only receives its own channel's outputs, so backward work splits
 * by (image, channel run) and every sum has one order: results do not
 * depend on the thread count or the layout. Floating values are read as
 * double (exact for every floating dtype) and sums accumulate in double.
 * As on the CPU, MAX_POOL3D also takes the integer dtypes (compared as
 * int64, exactly) and AVG_POOL3D int64 (an int64 sum, wrapping, divided
 * with truncation toward zero). */
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

typedef struct p3_win {
  int64_t first, count, size;
} p3_win;

typedef struct p3_vol {
  char *data;
  int64_t n, c, d, h, w;
  int64_t sn, sc, sd, sh, sw;
} p3_vol;

typedef enum p3_kind { P3_MAX, P3_AVG } p3_kind;

typedef struct p3_job {
  p3_vol img;    /* the [D, H, W] side: input, or grad_input */
  p3_vol pooled; /* the [OD, OH, OW] side: output, or grad_output */
  p3_vol ind;    /* int64 indices (max pools) */
  nrt_dtype t;
  p3_win *win[3];
  int64_t step[3];
  int64_t lanes, runs; /* channels per task and channel runs per image */
  int64_t divisor; /* != 0: divisor_override (any sign, as the CPU's) */
  int max_backward; /* MAX_POOL3D_BACKWARD: gradients go to the indexed inputs */
  int64_t *cover[3]; /* NCDHW average pool backward without overlaps: p3_single_cover per dim */
  const char *name;
  atomic_llong bad_index; /* -1, or the first index outside the plane seen */
  atomic_int out_of_memory;
} p3_job;

static inline double p3_ld(nrt_dtype t, const char *base, int64_t i) {
  switch (t) {
    case NRT_FLOAT32: return ((const float *)base)[i];
    case NRT_FLOAT64: return ((const double *)base)[i];
    case NRT_BFLOAT16: return rt_bfloat16_to_float(((const uint16_t *)base)[i]);
    default: return rt_half_to_float(((const uint16_t *)base)[i]);
  }
}

static inline void p3_st(nrt_dtype t, char *base, int64_t i, double v) {
  switch (t) {
    case NRT_FLOAT32: ((float *)base)[i] = (float)v; break;
    case NRT_FLOAT64: ((double *)base)[i] = v; break;
    case NRT_BFLOAT16: ((uint16_t *)base)[i] = rt_bfloat16_from_float((float)v); break;
    default: ((uint16_t *)base)[i] = rt_half_from_float((float)v); break;
  }
}

static inline int p3_is_int(nrt_dtype t) {
  return t == NRT_UINT8 || t == NRT_INT8 || t == NRT_INT16 || t == NRT_INT32 || t == NRT_INT64;
}

static inline int64_t p3_ldi(nrt_dtype t, const char *base, int64_t i) {
  switch (t) {
    case NRT_UINT8: return ((const uint8_t *)base)[i];
    case NRT_INT8: return ((const int8_t *)base)[i];
    case NRT_INT16: return ((const int16_t *)base)[i];
    case NRT_INT32: return ((const int32_t *)base)[i];
    default: return ((const int64_t *)base)[i];
  }
}

static inline void p3_sti(nrt_dtype t, char *base, int64_t i, int64_t v) {
  switch (t) {
    case NRT_UINT8: ((uint8_t *)base)[i] = (uint8_t)v; break;
    case NRT_INT8: ((int8_t *)base)[i] = (int8_t)v; break;
    case NRT_INT16: ((int16_t *)base)[i] = (int16_t)v; break;
    case NRT_INT32: ((int32_t *)base)[i] = (int32_t)v; break;
    default: ((int64_t *)base)[i] = v; break;
  }
}

static p3_vol p3_vol_of(const nrt_tensor_view *v) {
  p3_vol x = {.data = v->data, .n = v->shape[0], .c = v->shape[1], .d = v->shape[2], .h = v->shape[3],
              .w = v->shape[4], .sn = v->strides[0], .sc = v->strides[1], .sd = v->strides[2],
              .sh = v->strides[3], .sw = v->strides[4]};
  return x;
}

static inline int64_t p3_at(const p3_vol *v, int64_t plane, int64_t d, int64_t h, int64_t w) {
  return plane / v->c * v->sn + plane % v->c * v->sc + d * v->sd + h * v->sh + w * v->sw;
}

/* The divisor of output (od, oh, ow) of an average pool. */
static inline double p3_divisor(const p3_job *j, int64_t od, int64_t oh, int64_t ow) {
  if (j->divisor != 0) return (double)j->divisor;
  return (double)(j->win[0][od].size * j->win[1][oh].size * j->win[2][ow].size);
}

static inline int64_t p3_divisor_int(const p3_job *j, int64_t od, int64_t oh, int64_t ow) {
  if (j->divisor != 0) return j->divisor;
  return j->win[0][od].size * j->win[1][oh].size * j->win[2][ow].size;
}

/* ---- channel runs ------------------------------------------------------------ */

#define P3_LANES 64 /* channels of a forward task */
#define P3_BW_LANES 16 /* channels of a backward task (its buffer holds a [D, H, W] volume per channel) */

static inline __attribute__((always_inline)) void p3_store_run(nrt_dtype t, char *base, int64_t at, int64_t stride, int64_t n, const double *src) {
  if (t == NRT_FLOAT32 && stride == 1) {
    float *d = (float *)base + at;
    for (int64_t c = 0; c < n; c++) d[c] = (float)src[c];
    return;
  }
  for (int64_t c = 0; c < n; c++) p3_st(t, base, at + c * stride, src[c]);
}

/* ---- forward ---------------------------------------------------------------- */

/* The lane kernels are compiled per ISA level (RT_SIMD_VOID), so that the
 * channel loops vectorise with the host's widest vectors. */

/* Task -> (image, first channel, channels, od, oh) of a forward task. */
static void p3_forward_task(const p3_job *j, int64_t task, int64_t *n, int64_t *c0, int64_t *lanes, int64_t *od,
                            int64_t *oh) {
  const p3_vol *out = &j->pooled;
  *oh = task % out->h;
  *od = task / out->h % out->d;
  int64_t run = task / (out->h * out->d) % j->runs;
  *n = task / (out->h * out->d * j->runs);
  *c0 = run * j->lanes;
  *lanes = out->c - *c0 < j->lanes ? out->c - *c0 : j->lanes;
}

RT_SIMD_VOID(p3_max_lanes, (int64_t begin, int64_t end, void *ctx), (begin, end, ctx)) {
  p3_job *j = ctx;
  const p3_vol *in = &j->img, *out = &j->pooled, *ind = &j->ind;
  double best[P3_LANES], v[P3_LANES];
  int64_t at[P3_LANES];
  for (int64_t task = begin; task < end; task++) {
    int64_t n, c0, lanes, od, oh;
    p3_forward_task(j, task, &n, &c0, &lanes, &od, &oh);
    const p3_win *wd = &j->win[0][od], *wh = &j->win[1][oh];
    int64_t ib = n * in->sn + c0 * in->sc;
    int64_t ob = n * out->sn + c0 * out->sc + od * out->sd + oh * out->sh;
    int64_t xb = n * ind->sn + c0 * ind->sc + od * ind->sd + oh * ind->sh;
    for (int64_t ow = 0; ow < out->w; ow++) {
      const p3_win *ww = &j->win[2][ow];
      int taken = 0;
      for (int64_t a = 0; a < wd->count; a++)
        for (int64_t b = 0; b < wh->count; b++)
          for (int64_t e = 0; e < ww->count; e++) {
            int64_t id = wd->first + a * j->step[0], ih = wh->first + b * j->step[1];
            int64_t iw = ww->first + e * j->step[2], idx = (id * in->h + ih) * in->w + iw;
            rt_vision_load_run(j->t, in->data, ib + id * in->sd + ih * in->sh + iw * in->sw, in->sc, lanes, v, p3_ld);
            if (!taken) {
              for (int64_t c = 0; c < lanes; c++) best[c] = v[c], at[c] = idx;
              taken = 1;
              continue;
            }
            /* as the CPU: a larger value or any NaN (so the last NaN) takes over */
            for (int64_t c = 0; c < lanes; c++) {
              /* branch free (a mask), so that the loop vectorises */
              int64_t take = -(int64_t)((v[c] > best[c]) | (v[c] != v[c]));
              best[c] = take ? v[c] : best[c];
              at[c] = (idx & take) | (at[c] & ~take);
            }
          }
      /* a window with no taps inside the input (not produced by PyTorch's sizes) */
      if (!taken)
        for (int64_t c = 0; c < lanes; c++) best[c] = -INFINITY, at[c] = 0;
      p3_store_run(j->t, out->data, ob + ow * out->sw, out->sc, lanes, best);
      int64_t *xo = (int64_t *)j->ind.data + xb + ow * ind->sw;
      for (int64_t c = 0; c < lanes; c++) xo[c * ind->sc] = at[c];
    }
  }
}

RT_SIMD_VOID(p3_avg_lanes, (int64_t begin, int64_t end, void *ctx), (begin, end, ctx)) {
  p3_job *j = ctx;
  const p3_vol *in = &j->img, *out = &j->pooled;
  double sum[P3_LANES], v[P3_LANES];
  for (int64_t task = begin; task < end; task++) {
    int64_t n, c0, lanes, od, oh;
    p3_forward_task(j, task, &n, &c0, &lanes, &od, &oh);
    const p3_win *wd = &j->win[0][od], *wh = &j->win[1][oh];
    int64_t ib = n * in->sn + c0 * in->sc;
    int64_t ob = n * out->sn + c0 * out->sc + od * out->sd + oh * out->sh;
    for (int64_t ow = 0; ow < out->w; ow++) {
      const p3_win *ww = &j->win[2][ow];
      for (int64_t c = 0; c < lanes; c++) sum[c] = 0.0;
      for (int64_t a = 0; a < wd->count; a++)
        for (int64_t b = 0; b < wh->count; b++)
          for (int64_t e = 0; e < ww->count; e++) {
            int64_t id = wd->first + a, ih = wh->first + b, iw = ww->first + e;
            rt_vision_load_run(j->t, in->data, ib + id * in->sd + ih * in->sh + iw * in->sw, in->sc, lanes, v, p3_ld);
            for (int64_t c = 0; c < lanes; c++) sum[c] += v[c];
          }
      double div = p3_divisor(j, od, oh, ow);
      for (int64_t c = 0; c < lanes; c++) sum[c] /= div;
      p3_store_run(j->t, out->data, ob + ow * out->sw, out->sc, lanes, sum);
    }
  }
}

static void p3_max_planes_int(int64_t begin, int64_t end, void *ctx) {
  p3_job *j = ctx;
  const p3_vol *in = &j->img, *out = &j->pooled;
  for (int64_t pl = begin; pl < end; pl++)
    for (int64_t od = 0; od < out->d; od++)
      for (int64_t oh = 0; oh < out->h; oh++)
        for (int64_t ow = 0; ow < out->w; ow++) {
          const p3_win *wd = &j->win[0][od], *wh = &j->win[1][oh], *ww = &j->win[2][ow];
          int64_t best = 0, best_at = -1;
          for (int64_t a = 0; a < wd->count; a++)
            for (int64_t b = 0; b < wh->count; b++)
              for (int64_t e = 0; e < ww->count; e++) {
                int64_t id = wd->first + a * j->step[0], ih = wh->first + b * j->step[1];
                int64_t iw = ww->first + e * j->step[2];
                int64_t v = p3_ldi(j->t, in->data, p3_at(in, pl, id, ih, iw));
                if (best_at < 0 || v > best) {
                  best = v;
                  best_at = (id * in->h + ih) * in->w + iw;
                }
              }
          if (best_at < 0) best_at = 0;
          p3_sti(j->t, out->data, p3_at(out, pl, od, oh, ow), best);
          ((int64_t *)j->ind.data)[p3_at(&j->ind, pl, od, oh, ow)] = best_at;
        }
}

static void p3_avg_planes_int(int64_t begin, int64_t end, void *ctx) {
  p3_job *j = ctx;
  const p3_vol *in = &j->img, *out = &j->pooled;
  for (int64_t pl = begin; pl < end; pl++)
    for (int64_t od = 0; od < out->d; od++)
      for (int64_t oh = 0; oh < out->h; oh++)
        for (int64_t ow = 0; ow < out->w; ow++) {
          const p3_win *wd = &j->win[0][od], *wh = &j->win[1][oh], *ww = &j->win[2][ow];
          uint64_t sum = 0; /* wraps as the CPU's int64 sum does in practice */
          for (int64_t a = 0; a < wd->count; a++)
            for (int64_t b = 0; b < wh->count; b++)
              for (int64_t e = 0; e < ww->count; e++)
                sum += (uint64_t)p3_ldi(j->t, in->data, p3_at(in, pl, wd->first + a, wh->first + b, ww->first + e));
          /* C truncates toward zero, as the CPU's int64 division; -1 negates with wrapping (INT64_MIN / -1
           * would trap); an empty window (divisor 0) gives 0 */
          int64_t div = p3_divisor_int(j, od, oh, ow);
          int64_t q = div == -1 ? (int64_t)(0 - sum) : div != 0 ? (int64_t)sum / div : 0;
          p3_sti(j->t, out->data, p3_at(out, pl, od, oh, ow), q);
        }
}

/* Average forward with W innermost (NCDHW), task (plane, od, oh): each
 * output sums its window in the lane kernel's order (d, h, then w), so both
 * kernels give the same bits. The row's outputs advance together, one (d,
 * h) window row at a time, so their sums are independent chains (one
 * output's 128 dependent adds no longer run back to back). */
#define P3_ROW_AVG(LOAD)                                                        \
  for (int64_t ow = 0; ow < out->w; ow++) row[ow] = 0.0;                       \
  for (int64_t a = 0; a < wd->count; a++)                                      \
    for (int64_t b = 0; b < wh->count; b++) {                                  \
      int64_t at = ib + (wd->first + a) * in->sd + (wh->first + b) * in->sh;   \
      for (int64_t ow = 0; ow < out->w; ow++) {                                \
        const p3_win *ww = &j->win[2][ow];                                     \
        double sum = row[ow];                                                  \
        for (int64_t e = 0; e < ww->count; e++)                                \
          sum += (double)LOAD(at + (ww->first + e) * in->sw);                  \
        row[ow] = sum;                                                         \
      }                                                                        \
    }                                                                          \
  for (int64_t ow = 0; ow < out->w; ow++) row[ow] /= p3_divisor(j, od, oh, ow);
#define P3_LD_F32(i) ((const float *)in->data)[i]
#define P3_LD_ANY(i) p3_ld(j->t, in->data, i)

RT_SIMD_VOID(p3_avg_rows, (int64_t begin, int64_t end, void *ctx), (begin, end, ctx)) {
  p3_job *j = ctx;
  const p3_vol *in = &j->img, *out = &j->pooled;
  double *row = malloc((size_t)(out->w > 0 ? out->w : 1) * sizeof(double));
  if (!row) {
    atomic_store(&j->out_of_memory, 1);
    return;
  }
  for (int64_t task = begin; task < end; task++) {
    int64_t oh = task % out->h, od = task / out->h % out->d, pl = task / (out->h * out->d);
    const p3_win *wd = &j->win[0][od], *wh = &j->win[1][oh];
    int64_t ib = pl / in->c * in->sn + pl % in->c * in->sc;
    if (j->t == NRT_FLOAT32) {
      P3_ROW_AVG(P3_LD_F32)
    } else {
      P3_ROW_AVG(P3_LD_ANY)
    }
    p3_store_run(j->t, out->data, pl / out->c * out->sn + pl % out->c * out->sc + od * out->sd + oh * out->sh,
                 out->sw, out->w, row);
  }
  free(row);
}

/* ---- backward --------------------------------------------------------------- */

/* A backward task: image n, channels [c0, c0 + lanes), summed in double into
 * acc[position][lane] in output order, then stored. */
typedef struct p3_bw_task {
  int64_t n, c0, lanes, plane;
  double *acc;
} p3_bw_task;

/* The task's sums for one image plane of every lane; false (and the job's
 * out-of-memory flag set) when they cannot be had. */
static int p3_bw_alloc(p3_job *j, p3_bw_task *b) {
  const p3_vol *gi = &j->img;
  memset(b, 0, sizeof *b);
  b->plane = gi->d * gi->h * gi->w;
  b->acc = malloc((size_t)((b->plane > 0 ? b->plane : 1) * j->lanes) * sizeof(double));
  if (!b->acc) atomic_store(&j->out_of_memory, 1);
  return b->acc != NULL;
}

static void p3_bw_begin(p3_job *j, int64_t task, p3_bw_task *b) {
  b->n = task / j->runs;
  b->c0 = task % j->runs * j->lanes;
  b->lanes = j->img.c - b->c0 < j->lanes ? j->img.c - b->c0 : j->lanes;
  memset(b->acc, 0, (size_t)(b->plane * j->lanes) * sizeof(double));
}

/* Stores the task's sums: position-major runs of channels when channels
 * are innermost; for dense NCDHW planes, blocks of positions transposed
 * through the cache (each channel's block is one contiguous write). */
#define P3_STORE_BLOCK 16

static void p3_bw_store(p3_job *j, const p3_bw_task *b) {
  const p3_vol *g = &j->img;
  int64_t base = b->n * g->sn + b->c0 * g->sc, L = j->lanes, plane = b->plane;
  if (g->sc != 1 && g->sw == 1 && g->sh == g->w && g->sd == g->h * g->w) {
    double run[P3_STORE_BLOCK];
    for (int64_t x0 = 0; x0 < plane; x0 += P3_STORE_BLOCK) {
      int64_t cnt = plane - x0 < P3_STORE_BLOCK ? plane - x0 : P3_STORE_BLOCK;
      for (int64_t c = 0; c < b->lanes; c++) {
        for (int64_t x = 0; x < cnt; x++) run[x] = b->acc[(x0 + x) * L + c];
        p3_store_run(j->t, g->data, base + c * g->sc + x0, 1, cnt, run);
      }
    }
    return;
  }
  for (int64_t d = 0, x = 0; d < g->d; d++)
    for (int64_t h = 0; h < g->h; h++)
      for (int64_t w = 0; w < g->w; w++, x++)
        p3_store_run(j->t, g->data, base + d * g->sd + h * g->sh + w * g->sw, g->sc, b->lanes, b->acc + x * L);
}

RT_SIMD_VOID(p3_max_backward_lanes, (int64_t begin, int64_t end, void *ctx), (begin, end, ctx)) {
  p3_job *j = ctx;
  const p3_vol *go = &j->pooled, *ind = &j->ind;
  p3_bw_task b;
  if (!p3_bw_alloc(j, &b)) return;
  double g[P3_BW_LANES];
  for (int64_t task = begin; task < end; task++) {
    p3_bw_begin(j, task, &b);
    for (int64_t od = 0; od < go->d; od++)
      for (int64_t oh = 0; oh < go->h; oh++)
        for (int64_t ow = 0; ow < go->w; ow++) {
          rt_vision_load_run(j->t, go->data, b.n * go->sn + b.c0 * go->sc + od * go->sd + oh * go->sh + ow * go->sw,
                             go->sc, b.lanes, g, p3_ld);
          const int64_t *xi =
              (const int64_t *)ind->data + b.n * ind->sn + b.c0 * ind->sc + od * ind->sd + oh * ind->sh + ow * ind->sw;
          for (int64_t c = 0; c < b.lanes; c++) {
            int64_t i = xi[c * ind->sc];
            if (i < 0 || i >= b.plane) {
              long long none = -1;
              atomic_compare_exchange_strong(&j->bad_index, &none, (long long)i);
              continue;
            }
            b.acc[i * j->lanes + c] += g[c];
          }
        }
    p3_bw_store(j, &b);
  }
  free(b.acc);
}

RT_SIMD_VOID(p3_avg_backward_lanes, (int64_t begin, int64_t end, void *ctx), (begin, end, ctx)) {
  p3_job *j = ctx;
  const p3_vol *gi = &j->img, *go = &j->pooled;
  p3_bw_task b;
  if (!p3_bw_alloc(j, &b)) return;
  double g[P3_BW_LANES];
  for (int64_t task = begin; task < end; task++) {
    p3_bw_begin(j, task, &b);
    for (int64_t od = 0; od < go->d; od++)
      for (int64_t oh = 0; oh < go->h; oh++)
        for (int64_t ow = 0; ow < go->w; ow++) {
          const p3_win *wd = &j->win[0][od], *wh = &j->win[1][oh], *ww = &j->win[2][ow];
          rt_vision_load_run(j->t, go->data, b.n * go->sn + b.c0 * go->sc + od * go->sd + oh * go->sh + ow * go->sw,
                             go->sc, b.lanes, g, p3_ld);
          double div = p3_divisor(j, od, oh, ow);
          for (int64_t c = 0; c < b.lanes; c++) g[c] /= div;
          for (int64_t a = 0; a < wd->count; a++)
            for (int64_t e2 = 0; e2 < wh->count; e2++)
              for (int64_t e = 0; e < ww->count; e++) {
                double *row = b.acc + (((wd->first + a) * gi->h + wh->first + e2) * gi->w + ww->first + e) * j->lanes;
                for (int64_t c = 0; c < b.lanes; c++) row[c] += g[c];
              }
        }
    p3_bw_store(j, &b);
  }
  free(b.acc);
}

/* Backward of gradients with W innermost (NCDHW), task = one (image,
 * channel) plane, each element summed in double in output order from 0, as
 * in the lane kernels, so both give the same bits.
 *
 * In general the plane's gradients are scattered into a plane buffer
 * (cache-sized where the lanes' holds 16 volumes), then stored by rows.
 * Average pools whose windows do not overlap (each input covered by at most
 * one output per dim: adaptive pools of divisible sizes, kernel = stride)
 * write each row once instead: an element is 0 + its one output's
 * gradient / divisor, or 0. */
RT_SIMD_VOID(p3_backward_planes, (int64_t begin, int64_t end, void *ctx), (begin, end, ctx)) {
  p3_job *j = ctx;
  const p3_vol *gi = &j->img, *go = &j->pooled, *ind = &j->ind;
  int64_t plane = gi->d * gi->h * gi->w, oplane = go->d * go->h * go->w;
  int rows = !j->max_backward && j->cover[0] != NULL;
  int64_t bufsize = rows ? oplane + gi->w : plane;
  double *acc = malloc((size_t)(bufsize > 0 ? bufsize : 1) * sizeof(double));
  if (!acc) {
    atomic_store(&j->out_of_memory, 1);
    return;
  }
  for (int64_t pl = begin; pl < end; pl++) {
    if (rows) {
      double *gd = acc, *row = acc + oplane;
      for (int64_t od = 0, x = 0; od < go->d; od++)
        for (int64_t oh = 0; oh < go->h; oh++)
          for (int64_t ow = 0; ow < go->w; ow++, x++)
            gd[x] = p3_ld(j->t, go->data, p3_at(go, pl, od, oh, ow)) / p3_divisor(j, od, oh, ow);
      for (int64_t d = 0; d < gi->d; d++)
        for (int64_t h = 0; h < gi->h; h++) {
          int64_t od = j->cover[0][d], oh = j->cover[1][h];
          if (od < 0 || oh < 0) {
            for (int64_t w = 0; w < gi->w; w++) row[w] = 0.0;
          } else {
            const double *src = gd + (od * go->h + oh) * go->w;
            for (int64_t w = 0; w < gi->w; w++) {
              int64_t ow = j->cover[2][w];
              row[w] = ow < 0 ? 0.0 : 0.0 + src[ow];
            }
          }
          p3_store_run(j->t, gi->data, p3_at(gi, pl, d, h, 0), gi->sw, gi->w, row);
        }
      continue;
    }
    memset(acc, 0, (size_t)plane * sizeof(double));
    for (int64_t od = 0; od < go->d; od++)
      for (int64_t oh = 0; oh < go->h; oh++)
        for (int64_t ow = 0; ow < go->w; ow++) {
          double g = p3_ld(j->t, go->data, p3_at(go, pl, od, oh, ow));
          if (j->max_backward) {
            int64_t i = ((const int64_t *)ind->data)[p3_at(ind, pl, od, oh, ow)];
            if (i < 0 || i >= plane) {
              long long none = -1;
              atomic_compare_exchange_strong(&j->bad_index, &none, (long long)i);
              continue;
            }
            acc[i] += g;
            continue;
          }
          const p3_win *wd = &j->win[0][od], *wh = &j->win[1][oh], *ww = &j->win[2][ow];
          g /= p3_divisor(j, od, oh, ow);
          for (int64_t a = 0; a < wd->count; a++)
            for (int64_t e2 = 0; e2 < wh->count; e2++) {
              double *r = acc + ((wd->first + a) * gi->h + wh->first + e2) * gi->w + ww->first;
              for (int64_t e = 0; e < ww->count; e++) r[e] += g;
            }
        }
    for (int64_t d = 0; d < gi->d; d++)
      for (int64_t h = 0; h < gi->h; h++)
        p3_store_run(j->t, gi->data, p3_at(gi, pl, d, h, 0), gi->sw, gi->w, acc + (d * gi->h + h) * gi->w);
  }
  free(acc);
}

/* cover[x] = the one output whose window (of out outputs over n inputs)
 * covers input x, or -1; returns 0 when some input is covered twice. */
static int p3_single_cover(const p3_win *w, int64_t out, int64_t n, int64_t *cover) {
  for (int64_t x = 0; x < n; x++) cover[x] = -1;
  for (int64_t o = 0; o < out; o++)
    for (int64_t x = w[o].first; x < w[o].first + w[o].count; x++) {
      if (cover[x] >= 0) return 0;
      cover[x] = o;
    }
  return 1;
}

/* ---- windows ---------------------------------------------------------------- */

/* Windows of a kernel k, stride s, padding p, dilation dl over an input of
 * size n; avg: taps clipped to the input, size clipped to the padded input
 * (include_pad) or to the input. */
static void p3_windows(p3_win *w, int64_t out, int64_t n, int64_t k, int64_t s, int64_t p, int64_t dl, int avg,
                       int include_pad) {
  for (int64_t o = 0; o < out; o++) {
    int64_t start = o * s - p;
    if (avg) {
      int64_t stop = start + k < n + p ? start + k : n + p;
      int64_t lo = start > 0 ? start : 0, hi = stop < n ? stop : n;
      w[o].first = lo;
      w[o].count = hi > lo ? hi - lo : 0;
      w[o].size = include_pad ? stop - start : w[o].count;
    } else {
      int64_t i0 = start >= 0 ? 0 : (-start + dl - 1) / dl, i1 = k;
      while (i1 > i0 && start + (i1 - 1) * dl >= n) i1--;
      w[o].first = start + i0 * dl;
      w[o].count = i1 > i0 ? i1 - i0 : 0;
      w[o].size = w[o].count;
    }
  }
}

static void p3_adaptive_windows(p3_win *w, int64_t out, int64_t n) {
  for (int64_t o = 0; o < out; o++) {
    int64_t lo = o * n / out, hi = ((o + 1) * n + out - 1) / out;
    w[o].first = lo;
    w[o].count = hi - lo;
    w[o].size = hi - lo;
  }
}

/* ---- ops -------------------------------------------------------------------- */

typedef enum p3_op { OP_MAX, OP_AMAX, OP_MAX_BW, OP_AVG, OP_AVG_BW, OP_AAVG, OP_AAVG_BW } p3_op;

static int64_t p3_unpack(int64_t packed, int d) { return (packed >> (21 * (2 - d))) & ((1 << 21) - 1); }

static nrt_status p3_run(const nrt_op *op, p3_op which) {
  const char *name = nrt_op_name(op->code);
  int max_pool = which == OP_MAX || which == OP_AMAX || which == OP_MAX_BW;
  int outputs = which == OP_MAX || which == OP_AMAX ? 2 : 1;
  int operands = max_pool ? 3 : 2;
  int scalars = which == OP_MAX ? 4 : which == OP_AVG || which == OP_AVG_BW ? 5 : 0;
  if (op->num_operands != operands || op->num_outputs != outputs || op->num_scalars < scalars)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects %d operands, %d outputs and %d scalars", name, operands,
                   outputs, scalars);
  for (int i = 0; i < operands; i++)
    if (op->operands[i].ndim != 5)
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: operand %d must be a 5-d [N, C, D, H, W] view, got %d dims",
                     name, i, op->operands[i].ndim);
  p3_job j;
  memset(&j, 0, sizeof j);
  atomic_init(&j.bad_index, -1);
  atomic_init(&j.out_of_memory, 0);
  j.name = name;
  j.max_backward = which == OP_MAX_BW;
  int backward = which == OP_MAX_BW || which == OP_AVG_BW || which == OP_AAVG_BW;
  /* operand roles: [out, (ind,) in] or [grad_in, grad_out (, ind)] */
  int ii = backward ? 0 : outputs, pi = backward ? 1 : 0, xi = which == OP_MAX_BW ? 2 : which == OP_MAX || which == OP_AMAX ? 1 : -1;
  j.img = p3_vol_of(&op->operands[ii]);
  j.pooled = p3_vol_of(&op->operands[pi]);
  j.t = op->operands[ii].dtype;
  int int_ok = (which == OP_MAX && p3_is_int(j.t)) || (which == OP_AVG && j.t == NRT_INT64);
  if ((!rt_is_float_dtype(j.t) && !int_ok) || op->operands[pi].dtype != j.t)
    return rt_fail(NRT_ERROR_UNSUPPORTED, "%s: expects one floating dtype (or integer for the forward pools), got %s and %s",
                   name, nrt_dtype_name(j.t), nrt_dtype_name(op->operands[pi].dtype));
  if (xi >= 0) {
    if (op->operands[xi].dtype != NRT_INT64)
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: indices must be int64", name);
    j.ind = p3_vol_of(&op->operands[xi]);
    for (int d = 0; d < 5; d++)
      if (op->operands[xi].shape[d] != op->operands[pi].shape[d])
        return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: indices must have the pooled side's shape", name);
  }
  if (j.img.n != j.pooled.n || j.img.c != j.pooled.c)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: the two sides must have the same batch and channels", name);
  int64_t in[3] = {j.img.d, j.img.h, j.img.w}, out[3] = {j.pooled.d, j.pooled.h, j.pooled.w};
  int64_t planes = j.img.n * j.img.c;
  for (int d = 0; d < 3; d++) j.step[d] = 1;
  if (which == OP_MAX || which == OP_AVG || which == OP_AVG_BW) {
    int64_t k[3], s[3], p[3], dl[3] = {1, 1, 1};
    for (int i = 0; i < (which == OP_MAX ? 4 : 3); i++)
      if (rt_scalar_int(op, i) < 0)
        return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: scalar %d is not a packed triple", name, i);
    for (int d = 0; d < 3; d++) {
      k[d] = p3_unpack(rt_scalar_int(op, 0), d);
      s[d] = p3_unpack(rt_scalar_int(op, 1), d);
      p[d] = p3_unpack(rt_scalar_int(op, 2), d);
      if (which == OP_MAX) dl[d] = p3_unpack(rt_scalar_int(op, 3), d);
      if (k[d] <= 0 || s[d] <= 0 || dl[d] <= 0)
        return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: kernel, stride and dilation must be positive", name);
      j.step[d] = dl[d];
    }
    int include_pad = 0;
    if (which != OP_MAX) {
      include_pad = rt_scalar_int(op, 3) != 0;
      j.divisor = rt_scalar_int(op, 4); /* 0: none (the shim rejects an override of 0, as the CPU) */
    }
    for (int d = 0; d < 3; d++) {
      j.win[d] = malloc((size_t)(out[d] > 0 ? out[d] : 1) * sizeof(p3_win));
      if (!j.win[d]) {
        for (int e = 0; e < d; e++) free(j.win[e]);
        return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory", name);
      }
      p3_windows(j.win[d], out[d], in[d], k[d], s[d], p[d], dl[d], which != OP_MAX, include_pad);
    }
  } else if (which == OP_AMAX || which == OP_AAVG || which == OP_AAVG_BW) {
    for (int d = 0; d < 3; d++) {
      if (out[d] > 0 && in[d] <= 0) {
        for (int e = 0; e < d; e++) free(j.win[e]);
        return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: an empty input dim cannot be pooled", name);
      }
      j.win[d] = malloc((size_t)(out[d] > 0 ? out[d] : 1) * sizeof(p3_win));
      if (!j.win[d]) {
        for (int e = 0; e < d; e++) free(j.win[e]);
        return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory", name);
      }
      p3_adaptive_windows(j.win[d], out[d], in[d]);
    }
  }
  int is_int = p3_is_int(j.t);
  if (is_int) {
    int64_t work = out[0] * out[1] * out[2];
    int64_t grain = work >= RT_VISION_GRAIN ? 1 : RT_VISION_GRAIN / (work > 0 ? work : 1);
    if (planes > 0) rt_parallel_for(planes, grain, which == OP_MAX ? p3_max_planes_int : p3_avg_planes_int, &j);
  } else {
    j.lanes = backward ? P3_BW_LANES : P3_LANES;
    j.runs = j.img.c > 0 ? (j.img.c + j.lanes - 1) / j.lanes : 0;
    int64_t tasks = j.img.n * j.runs * (backward ? 1 : out[0] * out[1]);
    int64_t work = backward ? 1 : out[2] * (j.img.c < j.lanes ? j.img.c : j.lanes);
    int64_t grain = work >= RT_VISION_GRAIN ? 1 : RT_VISION_GRAIN / (work > 0 ? work : 1);
    rt_range_fn fn = which == OP_MAX || which == OP_AMAX ? p3_max_lanes
                     : which == OP_MAX_BW                ? p3_max_backward_lanes
                     : which == OP_AVG || which == OP_AAVG ? p3_avg_lanes
                                                           : p3_avg_backward_lanes;
    if (!backward && !max_pool && !(j.img.sc == 1 && j.pooled.sc == 1)) {
      /* average pools of W-innermost operands: rows of one plane */
      tasks = planes * out[0] * out[1];
      grain = out[2] >= RT_VISION_GRAIN ? 1 : RT_VISION_GRAIN / (out[2] > 0 ? out[2] : 1);
      fn = p3_avg_rows;
    }
    if (backward && j.img.sc != 1 && !j.max_backward) {
      int single = 1;
      for (int d = 0; d < 3; d++) {
        j.cover[d] = malloc((size_t)(in[d] + 1) * sizeof(int64_t));
        if (!j.cover[d])
          atomic_store(&j.out_of_memory, 1);
        else
          single &= p3_single_cover(j.win[d], out[d], in[d], j.cover[d]);
      }
      if (!single)
        for (int d = 0; d < 3; d++) free(j.cover[d]), j.cover[d] = NULL;
    }
    if (atomic_load(&j.out_of_memory)) {
      tasks = 0;
    } else if (backward && j.img.sc != 1) {
      /* gradients with W innermost: one plane per task */
      int64_t work = out[0] * out[1] * out[2] + in[0] * in[1] * in[2];
      tasks = planes;
      grain = work >= RT_VISION_GRAIN ? 1 : RT_VISION_GRAIN / (work > 0 ? work : 1);
      fn = p3_backward_planes;
    }
    if (tasks > 0 && planes > 0) rt_parallel_for(tasks, grain, fn, &j);
  }
  for (int d = 0; d < 3; d++) free(j.win[d]), free(j.cover[d]);
  if (atomic_load(&j.out_of_memory))
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for a gradient plane", name);
  long long bad = atomic_load(&j.bad_index);
  if (bad != -1)
    return rt_fail(NRT_ERROR_INDEX_OUT_OF_RANGE, "%s: index %lld is out of range for a plane of %lld elements", name,
                   bad, (long long)(in[0] * in[1] * in[2]));
  return NRT_SUCCESS;
}

nrt_status rt_kernel_max_pool3d(const nrt_op *op) { return p3_run(op, OP_MAX); }
nrt_status rt_kernel_adaptive_max_pool3d(const nrt_op *op) { return p3_run(op, OP_AMAX); }
nrt_status rt_kernel_max_pool3d_backward(const nrt_op *op) { return p3_run(op, OP_MAX_BW); }
nrt_status rt_kernel_avg_pool3d(const nrt_op *op) { return p3_run(op, OP_AVG); }
nrt_status rt_kernel_avg_pool3d_backward(const nrt_op *op) { return p3_run(op, OP_AVG_BW); }
nrt_status rt_kernel_adaptive_avg_pool3d(const nrt_op *op) { return p3_run(op, OP_AAVG); }
nrt_status rt_kernel_adaptive_avg_pool3d_backward(const nrt_op *op) { return p3_run(op, OP_AAVG_BW); }
