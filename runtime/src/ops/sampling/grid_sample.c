/* GRID_SAMPLE and GRID_SAMPLE_BACKWARD (neuronrt/ops/sampling.h).
 *
 * The forward pass and the grid's gradient go point by point (a thread
 * takes a range of output points, all channels); the input's gradient goes
 * plane by plane (a thread owns an (n, c) plane and adds every grid point's
 * share in order), so no two threads write one element and the sums do not
 * depend on the thread count. 2-d is the 3-d code with one depth slice and
 * the z terms left out. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "internal.h"
#include "ops/engine/elementwise.h"
#include "ops/engine/thread_pool.h"

enum { GS_BILINEAR = 0, GS_NEAREST = 1, GS_BICUBIC = 2 };
enum { GS_ZEROS = 0, GS_BORDER = 1, GS_REFLECTION = 2 };

typedef struct gs_job {
  int dims, mode, padding, align;
  int64_t channels;
  int64_t in_size[3];  /* D, H, W (D = 1 in 2-d) */
  int64_t out_size[3]; /* Do, Ho, Wo */
  /* element strides: images [n, c, d, h, w]; grids [n, d, h, w, coordinate] */
  int64_t in_s[5], out_s[5], gin_s[5], gout_s[5], grid_s[5], ggrid_s[5];
  char *in, *out, *grid, *grad_in, *grad_grid, *grad_out;
} gs_job;

#define GS_CAT_(a, b) a##b
#define GS_CAT2_(a, b) GS_CAT_(a, b)

static inline float fmod_f(float a, float b) { return fmodf(a, b); }
static inline float floor_f(float a) { return floorf(a); }
static inline float nearbyint_f(float a) { return nearbyintf(a); }
static inline float fabs_f(float a) { return fabsf(a); }
static inline float fma_f(float a, float b, float c) { return fmaf(a, b, c); }
static inline float trunc_f(float a) { return truncf(a); }
static inline double fmod_d(double a, double b) { return fmod(a, b); }
static inline double floor_d(double a) { return floor(a); }
static inline double nearbyint_d(double a) { return nearbyint(a); }
static inline double fabs_d(double a) { return fabs(a); }
static inline double fma_d(double a, double b, double c) { return fma(a, b, c); }
static inline double trunc_d(double a) { return trunc(a); }

#define R float
#define SUFFIX _f
#include "ops/sampling/grid_sample_impl.h"
#undef R
#undef SUFFIX
#define R double
#define SUFFIX _d
#include "ops/sampling/grid_sample_impl.h"
#undef R
#undef SUFFIX

/* An image view (rank dims + 2) as sizes and [n, c, d, h, w] strides. */
static void image_geometry(const nrt_tensor_view *v, int dims, int64_t size[3], int64_t s[5]) {
  s[0] = v->strides[0], s[1] = v->strides[1];
  if (dims == 3) {
    for (int d = 0; d < 3; d++) size[d] = v->shape[2 + d], s[2 + d] = v->strides[2 + d];
  } else {
    size[0] = 1, s[2] = 0;
    for (int d = 0; d < 2; d++) size[1 + d] = v->shape[2 + d], s[3 + d] = v->strides[2 + d];
  }
}

/* A grid view (rank dims + 2) as [n, d, h, w, coordinate] strides. */
static void grid_geometry(const nrt_tensor_view *v, int dims, int64_t s[5]) {
  s[0] = v->strides[0], s[4] = v->strides[dims + 1];
  if (dims == 3) {
    for (int d = 1; d < 4; d++) s[d] = v->strides[d];
  } else {
    s[1] = 0, s[2] = v->strides[1], s[3] = v->strides[2];
  }
}

/* Checks the operands and fills the geometry. in, grid: operand indices;
 * out_like: the operand shaped like the output ([N, C, Do, Ho, Wo]). */
static nrt_status setup(const nrt_op *op, const char *name, int in_i, int grid_i, int out_i, gs_job *j) {
  if (op->num_scalars < 3)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects scalars [mode, padding, align_corners]", name);
  const nrt_tensor_view *in = &op->operands[in_i], *grid = &op->operands[grid_i], *out = &op->operands[out_i];
  j->dims = in->ndim - 2;
  j->mode = (int)op->scalars[0].i;
  j->padding = (int)op->scalars[1].i;
  j->align = op->scalars[2].i != 0;
  if (j->dims != 2 && j->dims != 3)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects a 4-d or 5-d input, got %d dims", name, in->ndim);
  if (j->mode < GS_BILINEAR || j->mode > GS_BICUBIC || (j->mode == GS_BICUBIC && j->dims != 2))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: interpolation mode %d is not one of %s", name, j->mode,
                   j->dims == 2 ? "0 (bilinear), 1 (nearest), 2 (bicubic)" : "0 (trilinear), 1 (nearest)");
  if (j->padding < GS_ZEROS || j->padding > GS_REFLECTION)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: padding mode %d is not 0 (zeros), 1 (border) or 2 (reflection)",
                   name, j->padding);
  if (in->dtype != NRT_FLOAT32 && in->dtype != NRT_FLOAT64)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects float32 or float64 data", name);
  for (int k = 0; k < op->num_operands; k++) {
    const nrt_tensor_view *v = &op->operands[k];
    if (nrt_view_numel(v) == 0 && k < op->num_outputs) continue; /* absent */
    if (v->dtype != in->dtype)
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: every operand must have the input's dtype", name);
  }
  const int64_t N = in->shape[0];
  if (grid->ndim != j->dims + 2 || grid->shape[0] != N || grid->shape[grid->ndim - 1] != j->dims)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects a grid [N, ..., %d] matching the input's batch", name,
                   j->dims);
  if (out->ndim != in->ndim || out->shape[0] != N || out->shape[1] != in->shape[1])
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects an output [N, C, ...] of the input's rank", name);
  for (int d = 0; d < j->dims; d++)
    if (out->shape[2 + d] != grid->shape[1 + d])
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: the output's spatial size must be the grid's", name);
  j->channels = in->shape[1];
  image_geometry(in, j->dims, j->in_size, j->in_s);
  image_geometry(out, j->dims, j->out_size, j->out_s);
  grid_geometry(grid, j->dims, j->grid_s);
  j->in = in->data;
  j->grid = grid->data;
  return NRT_SUCCESS;
}

static int64_t grain(int64_t work_per_item) {
  const int64_t target = 16384;
  return work_per_item >= target ? 1 : target / (work_per_item > 0 ? work_per_item : 1);
}

nrt_status rt_kernel_grid_sample(const nrt_op *op) {
  const char *name = "grid_sample";
  if (op->num_operands != 3 || op->num_outputs != 1)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects operands [out, in, grid]", name);
  gs_job j;
  nrt_status st = setup(op, name, 1, 2, 0, &j);
  if (st != NRT_SUCCESS) return st;
  j.out = op->operands[0].data;
  const int64_t points = op->operands[0].shape[0] * j.out_size[0] * j.out_size[1] * j.out_size[2];
  if (points == 0 || j.channels == 0) return NRT_SUCCESS;
  const int64_t taps = j.mode == GS_BICUBIC ? 16 : 1 << j.dims;
  rt_parallel_for(points, grain(j.channels * taps), op->operands[1].dtype == NRT_FLOAT64 ? forward_range_d
                                                                                         : forward_range_f,
                  &j);
  return NRT_SUCCESS;
}

nrt_status rt_kernel_grid_sample_backward(const nrt_op *op) {
  const char *name = "grid_sample_backward";
  if (op->num_operands != 5 || op->num_outputs != 2)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects operands [grad_in?, grad_grid?, grad_out, in, grid]",
                   name);
  gs_job j;
  nrt_status st = setup(op, name, 3, 4, 2, &j);
  if (st != NRT_SUCCESS) return st;
  const nrt_tensor_view *gin = &op->operands[0], *ggrid = &op->operands[1], *gout = &op->operands[2];
  const nrt_tensor_view *in = &op->operands[3], *grid = &op->operands[4];
  const int want_in = nrt_view_numel(gin) > 0, want_grid = nrt_view_numel(ggrid) > 0;
  int64_t unused[3];
  image_geometry(gout, j.dims, unused, j.gout_s);
  j.grad_out = gout->data;
  const int64_t N = in->shape[0];
  const int64_t points = N * j.out_size[0] * j.out_size[1] * j.out_size[2];
  const int64_t taps = j.mode == GS_BICUBIC ? 16 : 1 << j.dims;
  const int dbl = in->dtype == NRT_FLOAT64;
  if (want_in) {
    if (gin->ndim != in->ndim || memcmp(gin->shape, in->shape, sizeof(int64_t) * (size_t)in->ndim) != 0)
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: grad_in must have the input's shape", name);
    image_geometry(gin, j.dims, unused, j.gin_s);
    j.grad_in = gin->data;
    const int64_t plane = j.in_size[0] * j.in_size[1] * j.in_size[2];
    if (N * j.channels > 0)
      rt_parallel_for(N * j.channels, grain(plane + points / (N > 0 ? N : 1) * taps),
                      dbl ? grad_input_range_d : grad_input_range_f, &j);
  }
  if (want_grid) {
    if (ggrid->ndim != grid->ndim || memcmp(ggrid->shape, grid->shape, sizeof(int64_t) * (size_t)grid->ndim) != 0)
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: grad_grid must have the grid's shape", name);
    grid_geometry(ggrid, j.dims, j.ggrid_s);
    j.grad_grid = ggrid->data;
    if (points > 0) rt_parallel_for(points, grain(j.channels * taps), dbl ? grad_grid_range_d : grad_grid_range_f, &j);
  }
  return NRT_SUCCESS;
}
