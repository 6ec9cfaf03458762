/* Pooling: MAX_POOL2D, ADAPTIVE_MAX_POOL2D, AVG_POOL2D, ADAPTIVE_AVG_POOL2D
 * and their backward ops (see neuronrt/ops/vision.h).
 *
 * Every pooling op is a window per output row and per output column: the
 * first input row it covers, how many taps, and its size for the divisor.
 * The windows are computed once per call here; the typed kernels of
 * pool_impl.h only walk them. Forward work splits by planes (NCHW) or by
 * output rows (channels_last); backward work by (image, channel block),
 * which owns its part of the gradient, so nothing is shared between
 * threads and every sum has one order. */
#include <stdatomic.h>
#include <stdlib.h>
#include "ops/engine/elementwise.h"
#include "ops/shape/shape_common.h"
#include "ops/engine/thread_pool.h"
#include "ops/vision/vision_common.h"

typedef struct rt_window {
  int64_t first; /* first input position */
  int64_t count; /* taps inside the input */
  int64_t size;  /* divisor factor (average pools) */
} rt_window;

enum { POOL_DIVIDE_SIZE, POOL_DIVIDE_ADAPTIVE, POOL_DIVIDE_OVERRIDE };

typedef struct pool_job {
  rt_image img;    /* the [H, W] side: input, or grad_input */
  rt_image pooled; /* the [OH, OW] side: output, or grad_output */
  rt_image ind;    /* int64 indices (max pools) */
  const rt_window *wh, *ww;
  int64_t dh, dw; /* tap steps (dilation) */
  int64_t col_step; /* > 0: every column window has the same taps, first = o * col_step + ww[0].first */
  int divisor_kind;
  int64_t divisor;
  int64_t cblock; /* channels per backward task */
  atomic_int failed;
  atomic_int out_of_memory;
  atomic_llong bad_index;
} pool_job;

/* Instantiations: pool_impl.h undefines T, A, SUFFIX, LOWEST and IS_NAN. */
#define LD(x) (x)
#define ST(a) (a)
#define T float
#define A float
#define SUFFIX _f32
#define LOWEST (-INFINITY)
#define IS_NAN(v) ((v) != (v))
#include "ops/vision/pool_impl.h"
#define T double
#define A double
#define SUFFIX _f64
#define LOWEST (-INFINITY)
#define IS_NAN(v) ((v) != (v))
#include "ops/vision/pool_impl.h"
#undef LD
#undef ST

#define T uint16_t
#define A float
#define SUFFIX _bf16
#define LOWEST (-INFINITY)
#define IS_NAN(v) ((v) != (v))
#define LD(x) rt_ld_bf16(x)
#define ST(a) rt_st_bf16(a)
#include "ops/vision/pool_impl.h"
#undef LD
#undef ST

#define T uint16_t
#define A float
#define SUFFIX _f16
#define LOWEST (-INFINITY)
#define IS_NAN(v) ((v) != (v))
#define LD(x) rt_ld_f16(x)
#define ST(a) rt_st_f16(a)
#include "ops/vision/pool_impl.h"
#undef LD
#undef ST

/* Integers: compared as they are, summed in int64 and divided as
 * integers (PyTorch's CPU average pool for int64). */
#define LD(x) (x)
#define ST(a) (a)
#define T uint8_t
#define A int64_t
#define SUFFIX _u8
#define LOWEST 0
#define IS_NAN(v) 0
#include "ops/vision/pool_impl.h"
#define T int8_t
#define A int64_t
#define SUFFIX _i8
#define LOWEST INT8_MIN
#define IS_NAN(v) 0
#include "ops/vision/pool_impl.h"
#define T int16_t
#define A int64_t
#define SUFFIX _i16
#define LOWEST INT16_MIN
#define IS_NAN(v) 0
#include "ops/vision/pool_impl.h"
#define T int32_t
#define A int64_t
#define SUFFIX _i32
#define LOWEST INT32_MIN
#define IS_NAN(v) 0
#include "ops/vision/pool_impl.h"
#define T int64_t
#define A int64_t
#define SUFFIX _i64
#define LOWEST INT64_MIN
#define IS_NAN(v) 0
#include "ops/vision/pool_impl.h"
#undef LD
#undef ST

typedef struct pool_kernels {
  rt_range_fn max_planes, max_rows, max_backward, avg_planes, avg_rows, avg_backward;
} pool_kernels;

#define FLOAT_KERNELS_(s) \
  {VCAT_(max_planes_, s), VCAT_(max_rows_, s), VCAT_(max_backward_, s), \
   VCAT_(avg_planes_, s), VCAT_(avg_rows_, s), VCAT_(avg_backward_, s)}
#define INT_KERNELS_(s) FLOAT_KERNELS_(s)

static const pool_kernels *kernels_for(nrt_dtype t) {
  static const pool_kernels f32 = FLOAT_KERNELS_(_f32), f64 = FLOAT_KERNELS_(_f64),
                            bf16 = FLOAT_KERNELS_(_bf16), f16 = FLOAT_KERNELS_(_f16),
                            u8 = INT_KERNELS_(_u8), i8 = INT_KERNELS_(_i8), i16 = INT_KERNELS_(_i16),
                            i32 = INT_KERNELS_(_i32), i64 = INT_KERNELS_(_i64);
  switch (t) {
    case NRT_FLOAT32: return &f32;
    case NRT_FLOAT64: return &f64;
    case NRT_BFLOAT16: return &bf16;
    case NRT_FLOAT16: return &f16;
    case NRT_UINT8: return &u8;
    case NRT_INT8: return &i8;
    case NRT_INT16: return &i16;
    case NRT_INT32: return &i32;
    case NRT_INT64: return &i64;
    default: return NULL;
  }
}

/* ---- windows ------------------------------------------------------------ */

/* Taps start + i * step, i < k, that fall in [0, size). */
static rt_window strided_window(int64_t start, int64_t k, int64_t step, int64_t size) {
  int64_t i0 = start < 0 ? (-start + step - 1) / step : 0;
  int64_t i1 = start >= size ? 0 : (size - start + step - 1) / step;
  if (i1 > k) i1 = k;
  rt_window w = {.first = start + i0 * step, .count = i1 > i0 ? i1 - i0 : 0, .size = 0};
  return w;
}

static void max_windows(rt_window *w, int64_t out, int64_t size, int64_t k, int64_t s, int64_t p,
                        int64_t d) {
  for (int64_t o = 0; o < out; o++) w[o] = strided_window(o * s - p, k, d, size);
}

/* PyTorch's avg_pool: the window is clipped to the padded input, which
 * gives the count_include_pad divisor, then to the input. */
static void avg_windows(rt_window *w, int64_t out, int64_t size, int64_t k, int64_t s, int64_t p,
                        int include_pad) {
  for (int64_t o = 0; o < out; o++) {
    int64_t start = o * s - p, end = start + k < size + p ? start + k : size + p;
    int64_t padded = end - start;
    if (start < 0) start = 0;
    if (end > size) end = size;
    w[o].first = start;
    w[o].count = end > start ? end - start : 0;
    w[o].size = include_pad ? padded : w[o].count;
  }
}

static void adaptive_windows(rt_window *w, int64_t out, int64_t size) {
  for (int64_t o = 0; o < out; o++) {
    int64_t start = o * size / out, end = ((o + 1) * size + out - 1) / out;
    w[o].first = start;
    w[o].count = end - start;
    w[o].size = end - start;
  }
}

/* The step between n windows that all have the same taps (no clipping by
 * the padding), or 0 if they differ. Max pooling over planes then runs
 * branch-free across output columns. */
static int64_t uniform_step(const rt_window *w, int64_t n) {
  int64_t step = n > 1 ? w[1].first - w[0].first : 1;
  if (step <= 0) return 0;
  for (int64_t o = 0; o < n; o++)
    if (w[o].count != w[0].count || w[o].first != w[0].first + o * step) return 0;
  return step;
}

/* ---- checks and launch -------------------------------------------------- */

typedef enum pool_kind { POOL_MAX, POOL_ADAPTIVE_MAX, POOL_AVG, POOL_ADAPTIVE_AVG } pool_kind;

static nrt_status check_operands(const nrt_op *op, int operands, int scalars, int outputs) {
  nrt_status s = rt_check_arity(op, operands, scalars);
  if (s) return s;
  if (op->num_outputs != outputs)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects %d outputs", nrt_op_name(op->code), outputs);
  for (int i = 0; i < operands; i++)
    if ((s = rt_check_image(op, i, "every operand"))) return s;
  return NRT_SUCCESS;
}

/* img is the [H, W] side, pooled the [OH, OW] side; they share N and C and,
 * with values (not indices), a dtype. */
static nrt_status check_pair(const nrt_op *op, const rt_image *img, const rt_image *pooled,
                             nrt_dtype img_type, nrt_dtype pooled_type, int need_float) {
  const char *name = nrt_op_name(op->code);
  if (img->n != pooled->n || img->c != pooled->c)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: batch and channel sizes differ between operands", name);
  if (img_type != pooled_type)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: operands must share one dtype (%s vs %s)", name,
                   nrt_dtype_name(img_type), nrt_dtype_name(pooled_type));
  const pool_kernels *k = kernels_for(img_type);
  if (!k || (need_float && !rt_is_float_dtype(img_type)))
    return rt_fail(NRT_ERROR_UNSUPPORTED, "%s: dtype %s is not supported", name, nrt_dtype_name(img_type));
  if (pooled->h * pooled->w > 0 && img->h * img->w == 0)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: the input plane is empty", name);
  return NRT_SUCCESS;
}

/* Fills job's windows from the op's scalars (or the adaptive rule). */
static nrt_status make_windows(const nrt_op *op, pool_kind kind, pool_job *job, rt_window **storage) {
  const rt_image *img = &job->img, *pooled = &job->pooled;
  rt_window *w = malloc((size_t)(pooled->h + pooled->w + 1) * sizeof *w);
  if (!w) return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory", nrt_op_name(op->code));
  *storage = w;
  job->wh = w;
  job->ww = w + pooled->h;
  job->dh = job->dw = 1;
  job->divisor_kind = POOL_DIVIDE_SIZE;
  if (kind == POOL_ADAPTIVE_MAX || kind == POOL_ADAPTIVE_AVG) {
    adaptive_windows(w, pooled->h, img->h);
    adaptive_windows(w + pooled->h, pooled->w, img->w);
    job->divisor_kind = POOL_DIVIDE_ADAPTIVE;
    return NRT_SUCCESS;
  }
  int64_t kh = rt_scalar_int(op, 0), kw = rt_scalar_int(op, 1), sh = rt_scalar_int(op, 2),
          sw = rt_scalar_int(op, 3), ph = rt_scalar_int(op, 4), pw = rt_scalar_int(op, 5);
  if (kh <= 0 || kw <= 0 || sh <= 0 || sw <= 0 || ph < 0 || pw < 0)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "%s: kernel size and stride must be positive and padding non-negative",
                   nrt_op_name(op->code));
  if (kind == POOL_MAX) {
    job->dh = rt_scalar_int(op, 6);
    job->dw = rt_scalar_int(op, 7);
    if (job->dh <= 0 || job->dw <= 0)
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: dilation must be positive", nrt_op_name(op->code));
    max_windows(w, pooled->h, img->h, kh, sh, ph, job->dh);
    max_windows(w + pooled->h, pooled->w, img->w, kw, sw, pw, job->dw);
    return NRT_SUCCESS;
  }
  int include_pad = rt_scalar_int(op, 6) != 0;
  job->divisor = rt_scalar_int(op, 7);
  if (job->divisor != 0) job->divisor_kind = POOL_DIVIDE_OVERRIDE;
  avg_windows(w, pooled->h, img->h, kh, sh, ph, include_pad);
  avg_windows(w + pooled->h, pooled->w, img->w, kw, sw, pw, include_pad);
  return NRT_SUCCESS;
}

static nrt_status finish(const nrt_op *op, pool_job *job, rt_window *windows) {
  free(windows);
  if (atomic_load(&job->out_of_memory))
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for scratch buffers",
                   nrt_op_name(op->code));
  if (atomic_load(&job->failed))
    return rt_fail(NRT_ERROR_INDEX_OUT_OF_RANGE, "%s: index %lld is out of bounds for a plane of %lld elements",
                   nrt_op_name(op->code), (long long)atomic_load(&job->bad_index),
                   (long long)(job->img.h * job->img.w));
  return NRT_SUCCESS;
}

static void init_job(pool_job *job) {
  atomic_init(&job->failed, 0);
  atomic_init(&job->out_of_memory, 0);
  atomic_init(&job->bad_index, 0);
}

static int64_t tasks_grain(int64_t work_per_task) {
  return work_per_task >= RT_VISION_GRAIN ? 1 : RT_VISION_GRAIN / (work_per_task > 0 ? work_per_task : 1);
}

static nrt_status pool_forward(const nrt_op *op, pool_kind kind) {
  int is_max = kind == POOL_MAX || kind == POOL_ADAPTIVE_MAX;
  int scalars = kind == POOL_MAX || kind == POOL_AVG ? 8 : 0;
  nrt_status s = check_operands(op, is_max ? 3 : 2, scalars, is_max ? 2 : 1);
  if (s) return s;
  pool_job job = {.pooled = rt_image_of(&op->operands[0])};
  const nrt_tensor_view *in = &op->operands[is_max ? 2 : 1];
  job.img = rt_image_of(in);
  if ((s = check_pair(op, &job.img, &job.pooled, in->dtype, op->operands[0].dtype, kind == POOL_ADAPTIVE_AVG)))
    return s;
  if (is_max) {
    job.ind = rt_image_of(&op->operands[1]);
    if (op->operands[1].dtype != NRT_INT64 || !rt_same_shape(&op->operands[0], &op->operands[1]))
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: indices must be int64 of the output's shape",
                     nrt_op_name(op->code));
  }
  init_job(&job);
  if (job.pooled.n * job.pooled.c * job.pooled.h * job.pooled.w == 0) return NRT_SUCCESS;
  rt_window *windows = NULL;
  if ((s = make_windows(op, kind, &job, &windows))) {
    free(windows);
    return s;
  }
  job.col_step = uniform_step(job.ww, job.pooled.w);
  const pool_kernels *k = kernels_for(in->dtype);
  int64_t taps = (job.img.h / (job.pooled.h ? job.pooled.h : 1) + 2) *
                 (job.img.w / (job.pooled.w ? job.pooled.w : 1) + 2);
  if (rt_image_channels_inner(&job.img)) {
    int64_t rows = job.pooled.n * job.pooled.h;
    rt_parallel_for(rows, tasks_grain(job.pooled.w * job.pooled.c * taps),
                    is_max ? k->max_rows : k->avg_rows, &job);
  } else {
    int64_t planes = job.pooled.n * job.pooled.c;
    rt_parallel_for(planes, tasks_grain(job.pooled.h * job.pooled.w * taps),
                    is_max ? k->max_planes : k->avg_planes, &job);
  }
  return finish(op, &job, windows);
}

static nrt_status pool_backward(const nrt_op *op, pool_kind kind) {
  int is_max = kind == POOL_MAX;
  int scalars = kind == POOL_AVG ? 8 : 0;
  nrt_status s = check_operands(op, is_max ? 3 : 2, scalars, 1);
  if (s) return s;
  pool_job job = {.img = rt_image_of(&op->operands[0]), .pooled = rt_image_of(&op->operands[1])};
  if ((s = check_pair(op, &job.img, &job.pooled, op->operands[0].dtype, op->operands[1].dtype, 1))) return s;
  if (is_max) {
    job.ind = rt_image_of(&op->operands[2]);
    if (op->operands[2].dtype != NRT_INT64 || !rt_same_shape(&op->operands[1], &op->operands[2]))
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: indices must be int64 of grad_output's shape",
                     nrt_op_name(op->code));
  }
  init_job(&job);
  if (job.img.n * job.img.c * job.img.h * job.img.w == 0) return NRT_SUCCESS;
  rt_window *windows = NULL;
  if (!is_max && (s = make_windows(op, kind, &job, &windows))) {
    free(windows);
    return s;
  }
  const pool_kernels *k = kernels_for(op->operands[0].dtype);
  /* Channel blocks keep the scratch small and give work to every thread
   * when the batch is small; the split depends on the shape only. */
  job.cblock = rt_image_channels_inner(&job.img) ? (job.img.c < 64 ? job.img.c : 64) : 1;
  int64_t blocks = (job.img.c + job.cblock - 1) / job.cblock;
  int64_t work = (job.img.h * job.img.w + job.pooled.h * job.pooled.w) * job.cblock;
  rt_parallel_for(job.img.n * blocks, tasks_grain(work), is_max ? k->max_backward : k->avg_backward, &job);
  return finish(op, &job, windows);
}

nrt_status rt_kernel_max_pool2d(const nrt_op *op) { return pool_forward(op, POOL_MAX); }
nrt_status rt_kernel_adaptive_max_pool2d(const nrt_op *op) { return pool_forward(op, POOL_ADAPTIVE_MAX); }
nrt_status rt_kernel_avg_pool2d(const nrt_op *op) { return pool_forward(op, POOL_AVG); }
nrt_status rt_kernel_adaptive_avg_pool2d(const nrt_op *op) { return pool_forward(op, POOL_ADAPTIVE_AVG); }
nrt_status rt_kernel_max_pool2d_backward(const nrt_op *op) { return pool_backward(op, POOL_MAX); }
nrt_status rt_kernel_avg_pool2d_backward(const nrt_op *op) { return pool_backward(op, POOL_AVG); }
nrt_status rt_kernel_adaptive_avg_pool2d_backward(const nrt_op *op) {
  return pool_backward(op, POOL_ADAPTIVE_AVG);
}
