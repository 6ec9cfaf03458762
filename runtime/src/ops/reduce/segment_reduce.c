/* SEGMENT_REDUCE and SEGMENT_REDUCE_BACKWARD (neuronrt/ops/reduce.h).
 *
 * The data is seen as [outer, A, inner] with the reduced axis in the
 * middle; offsets [outer, S + 1] cut each outer slice's A rows into S
 * segments. A thread takes a range of (outer, segment) pairs and reduces
 * the segment's rows in order, a row of inner values at a time, so results
 * do not depend on the thread count. float32 computes in float, float64 in
 * double. */
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"
#include "ops/engine/elementwise.h"
#include "ops/engine/thread_pool.h"

enum { SEG_SUM, SEG_MEAN, SEG_PROD, SEG_MAX, SEG_MIN };

typedef struct seg_job {
  int reduce, has_initial, dbl;
  double initial;
  int64_t outer, rows, inner, segments;
  const nrt_tensor_view *data, *out, *offsets, *grad, *output, *grad_data;
  atomic_int bad;
} seg_job;

#define SEG_AT(v, o, r, i) ((o) * (v)->strides[0] + (r) * (v)->strides[1] + (i) * (v)->strides[2])

/* The reductions, written once for compute type R (SUFFIX _f or _d). */
#define SEG_KERNELS(R, SUFFIX)                                                                                   \
  static void forward##SUFFIX(const seg_job *j, int64_t o, int64_t s, int64_t lo, int64_t hi) {                  \
    const R *x = (const R *)j->data->data;                                                                       \
    R *out = (R *)j->out->data;                                                                                  \
    const int64_t n = hi - lo;                                                                                   \
    for (int64_t i = 0; i < j->inner; i++) {                                                                     \
      R acc;                                                                                                     \
      switch (j->reduce) {                                                                                       \
        case SEG_PROD: acc = j->has_initial ? (R)j->initial : 1; break;                                          \
        case SEG_MAX: acc = j->has_initial ? (R)j->initial : (R)-INFINITY; break;                                \
        case SEG_MIN: acc = j->has_initial ? (R)j->initial : (R)INFINITY; break;                                 \
        default: acc = j->has_initial ? (R)j->initial : 0; break;                                                \
      }                                                                                                          \
      for (int64_t r = lo; r < hi; r++) {                                                                        \
        const R v = x[SEG_AT(j->data, o, r, i)];                                                                 \
        switch (j->reduce) {                                                                                     \
          case SEG_PROD: acc *= v; break;                                                                        \
          case SEG_MAX: acc = (v != v || v > acc) ? v : acc; break;                                              \
          case SEG_MIN: acc = (v != v || v < acc) ? v : acc; break;                                              \
          default: acc += v; break;                                                                              \
        }                                                                                                        \
        if (acc != acc && (j->reduce == SEG_MAX || j->reduce == SEG_MIN)) break;                                 \
      }                                                                                                          \
      if (j->reduce == SEG_MEAN) acc = n > 0 ? acc / (R)n : (j->has_initial ? (R)j->initial : (R)NAN);           \
      out[SEG_AT(j->out, o, s, i)] = acc;                                                                        \
    }                                                                                                            \
  }                                                                                                              \
                                                                                                                 \
  static void backward##SUFFIX(const seg_job *j, int64_t o, int64_t s, int64_t lo, int64_t hi) {                 \
    const R *x = (const R *)j->data->data, *g = (const R *)j->grad->data, *y = (const R *)j->output->data;       \
    R *gx = (R *)j->grad_data->data;                                                                             \
    const int64_t n = hi - lo;                                                                                   \
    for (int64_t i = 0; i < j->inner; i++) {                                                                     \
      const R gs = g[SEG_AT(j->grad, o, s, i)], ys = y[SEG_AT(j->output, o, s, i)];                              \
      if (j->reduce == SEG_SUM || j->reduce == SEG_MEAN) {                                                       \
        const R share = j->reduce == SEG_MEAN ? gs / (R)(n > 0 ? n : 1) : gs;                                    \
        for (int64_t r = lo; r < hi; r++) gx[SEG_AT(j->grad_data, o, r, i)] = share;                             \
      } else if (j->reduce == SEG_MAX || j->reduce == SEG_MIN) {                                                 \
        /* the extreme's rows share its gradient (NaN rows hold the NaN extreme) */                              \
        int64_t ties = 0;                                                                                        \
        for (int64_t r = lo; r < hi; r++) {                                                                      \
          const R v = x[SEG_AT(j->data, o, r, i)];                                                               \
          ties += v == ys || (v != v && ys != ys);                                                               \
        }                                                                                                        \
        const R share = gs / (R)(ties > 0 ? ties : 1);                                                           \
        for (int64_t r = lo; r < hi; r++) {                                                                      \
          const R v = x[SEG_AT(j->data, o, r, i)];                                                               \
          gx[SEG_AT(j->grad_data, o, r, i)] = (v == ys || (v != v && ys != ys)) ? share : 0;                     \
        }                                                                                                        \
      } else { /* prod: output / x without zeros; with one zero only that row, the product of the others */     \
        int64_t zeros = 0;                                                                                       \
        R others = j->has_initial ? (R)j->initial : 1;                                                           \
        for (int64_t r = lo; r < hi; r++) {                                                                      \
          const R v = x[SEG_AT(j->data, o, r, i)];                                                               \
          if (v == 0)                                                                                            \
            zeros++;                                                                                             \
          else                                                                                                   \
            others *= v;                                                                                         \
        }                                                                                                        \
        for (int64_t r = lo; r < hi; r++) {                                                                      \
          const R v = x[SEG_AT(j->data, o, r, i)];                                                               \
          R d;                                                                                                   \
          if (v != 0)                                                                                            \
            d = gs * ys / v;                                                                                     \
          else                                                                                                   \
            d = zeros == 1 ? gs * others : 0;                                                                    \
          gx[SEG_AT(j->grad_data, o, r, i)] = d;                                                                 \
        }                                                                                                        \
      }                                                                                                          \
    }                                                                                                            \
  }

SEG_KERNELS(float, _f)
SEG_KERNELS(double, _d)

/* Segment s of outer slice o spans rows [lo, hi); 0 when the offsets are
 * not an ascending run inside [0, rows] (recorded). */
static int bounds(seg_job *j, int64_t o, int64_t s, int64_t *lo, int64_t *hi) {
  const int64_t *off = (const int64_t *)j->offsets->data + o * (j->segments + 1);
  *lo = off[s], *hi = off[s + 1];
  if (*lo < 0 || *hi < *lo || *hi > j->rows) {
    atomic_store(&j->bad, 1);
    return 0;
  }
  return 1;
}

static void forward_range(int64_t begin, int64_t end, void *ctx) {
  seg_job *j = ctx;
  for (int64_t q = begin; q < end; q++) {
    int64_t lo, hi, o = q / j->segments, s = q % j->segments;
    if (!bounds(j, o, s, &lo, &hi)) continue;
    if (j->dbl)
      forward_d(j, o, s, lo, hi);
    else
      forward_f(j, o, s, lo, hi);
  }
}

/* Rows outside every segment (before the first offset or past the last)
 * get no gradient. */
static void zero_uncovered(seg_job *j, int64_t o) {
  const int64_t *off = (const int64_t *)j->offsets->data + o * (j->segments + 1);
  const int64_t first = off[0] < 0 ? 0 : off[0] > j->rows ? j->rows : off[0];
  const int64_t last = off[j->segments] < first ? first : off[j->segments] > j->rows ? j->rows : off[j->segments];
  const size_t es = j->dbl ? 8 : 4;
  for (int part = 0; part < 2; part++)
    for (int64_t r = part ? last : 0; r < (part ? j->rows : first); r++)
      for (int64_t i = 0; i < j->inner; i++)
        memset((char *)j->grad_data->data + SEG_AT(j->grad_data, o, r, i) * (int64_t)es, 0, es);
}

static void backward_range(int64_t begin, int64_t end, void *ctx) {
  seg_job *j = ctx;
  for (int64_t q = begin; q < end; q++) {
    int64_t lo, hi, o = q / j->segments, s = q % j->segments;
    if (!bounds(j, o, s, &lo, &hi)) continue;
    if (j->dbl)
      backward_d(j, o, s, lo, hi);
    else
      backward_f(j, o, s, lo, hi);
  }
}

static int shaped(const nrt_tensor_view *v, nrt_dtype t, int64_t a, int64_t b, int64_t c) {
  return v->ndim == 3 && v->dtype == t && v->shape[0] == a && v->shape[1] == b && v->shape[2] == c;
}

static nrt_status setup(const nrt_op *op, const char *name, int data_i, int offsets_i, int segs_i, seg_job *j) {
  if (op->num_scalars < 3)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects scalars [reduce, has_initial, initial]", name);
  memset(j, 0, sizeof *j);
  j->reduce = (int)op->scalars[0].i;
  j->has_initial = op->scalars[1].i != 0;
  j->initial = op->scalars[2].f;
  if (j->reduce < SEG_SUM || j->reduce > SEG_MIN)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: reduction %d is not one of sum, mean, prod, max, min", name,
                   j->reduce);
  j->data = &op->operands[data_i];
  j->offsets = &op->operands[offsets_i];
  const nrt_tensor_view *d = j->data, *segs = &op->operands[segs_i];
  if (d->ndim != 3 || (d->dtype != NRT_FLOAT32 && d->dtype != NRT_FLOAT64))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects data [outer, rows, inner] of float32 or float64", name);
  j->dbl = d->dtype == NRT_FLOAT64;
  j->outer = d->shape[0], j->rows = d->shape[1], j->inner = d->shape[2];
  j->segments = segs->ndim == 3 ? segs->shape[1] : -1;
  if (!shaped(segs, d->dtype, j->outer, j->segments, j->inner))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects per-segment tensors [outer, segments, inner] of the data's dtype",
                   name);
  const nrt_tensor_view *off = j->offsets;
  if (off->ndim != 2 || off->dtype != NRT_INT64 || off->shape[0] != j->outer || off->shape[1] != j->segments + 1 ||
      off->strides[1] != 1 || off->strides[0] != j->segments + 1)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects contiguous int64 offsets [outer, segments + 1]", name);
  atomic_init(&j->bad, 0);
  return NRT_SUCCESS;
}

static nrt_status finish(seg_job *j, const char *name) {
  if (atomic_load(&j->bad))
    return rt_fail(NRT_ERROR_INDEX_OUT_OF_RANGE, "%s: offsets must ascend within [0, %lld]", name,
                   (long long)j->rows);
  return NRT_SUCCESS;
}

nrt_status rt_kernel_segment_reduce(const nrt_op *op) {
  const char *name = "segment_reduce";
  if (op->num_operands != 3 || op->num_outputs != 1)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects operands [out, data, offsets]", name);
  seg_job j;
  nrt_status st = setup(op, name, 1, 2, 0, &j);
  if (st != NRT_SUCCESS) return st;
  j.out = &op->operands[0];
  const int64_t tasks = j.outer * j.segments;
  if (tasks > 0 && j.inner > 0) {
    const int64_t per = (j.rows / (j.segments > 0 ? j.segments : 1) + 1) * j.inner;
    rt_parallel_for(tasks, per >= 16384 ? 1 : 16384 / per, forward_range, &j);
  }
  return finish(&j, name);
}

nrt_status rt_kernel_segment_reduce_backward(const nrt_op *op) {
  const char *name = "segment_reduce_backward";
  if (op->num_operands != 5 || op->num_outputs != 1)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects operands [grad_data, grad, output, data, offsets]", name);
  seg_job j;
  nrt_status st = setup(op, name, 3, 4, 1, &j);
  if (st != NRT_SUCCESS) return st;
  j.grad_data = &op->operands[0];
  j.grad = &op->operands[1];
  j.output = &op->operands[2];
  if (!shaped(j.grad_data, j.data->dtype, j.outer, j.rows, j.inner) ||
      !shaped(j.output, j.data->dtype, j.outer, j.segments, j.inner))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: grad_data must be shaped as the data and output as grad", name);
  if (j.inner == 0 || j.rows == 0) return NRT_SUCCESS;
  for (int64_t o = 0; o < j.outer; o++) zero_uncovered(&j, o);
  const int64_t tasks = j.outer * j.segments;
  if (tasks > 0) {
    const int64_t per = (j.rows / (j.segments > 0 ? j.segments : 1) + 1) * j.inner * 2;
    rt_parallel_for(tasks, per >= 16384 ? 1 : 16384 / per, backward_range, &j);
  }
  return finish(&j, name);
}
