/* Resampling by tap tables: UPSAMPLE_BICUBIC2D, UPSAMPLE_AA2D and their
 * backward ops (see neuronrt/ops/vision.h).
 *
 * Both are separable: per output row (and column) a few input rows with
 * weights. Bicubic takes PyTorch's four taps (Keys' kernel, a = -0.75) at
 * indices clamped into the image; the antialiased filters (PIL's, as
 * PyTorch's _upsample_*2d_aa) widen their support by the downscaling
 * factor and normalise the weights to sum 1. The tables are built once per
 * call in the compute type; the kernels (resample_impl.h) walk planes, so
 * each plane's work, forward and backward, has one order whatever the
 * thread count. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"
#include "ops/engine/scalar_types.h"
#include "ops/engine/thread_pool.h"
#include "ops/shape/shape_common.h"
#include "ops/vision/vision_common.h"

/* Kinds: the AA filters by their scalar value, then bicubic. */
enum { RS_AA_BILINEAR = 0, RS_AA_BICUBIC = 1, RS_AA_LANCZOS = 2, RS_BICUBIC = 3 };

typedef struct rs_axis {
  int64_t out, taps; /* taps: the table's row length */
  int64_t *idx;      /* [out * taps] input positions */
  int64_t *count;    /* [out] taps used */
  void *w;           /* [out * taps] weights in the compute type */
} rs_axis;

typedef struct rs_job {
  rt_image src, dst; /* forward: input, output; backward: grad_output, grad_input */
  rs_axis h, w;
  atomic_int out_of_memory;
} rs_job;

/* PyTorch's interp_size of each AA filter. */
static int rs_interp_size(int kind) { return kind == RS_AA_BILINEAR ? 2 : kind == RS_AA_BICUBIC ? 4 : 6; }

/* Half the filter's width in input positions. */
static double rs_support(int kind, double scale) {
  double half = rs_interp_size(kind) * 0.5;
  return scale >= 1.0 ? half * scale : half;
}

#define LD(x) (x)
#define ST(a) (a)
#define T float
#define A float
#define SUFFIX _f32
#include "ops/vision/resample_impl.h"
#define T double
#define A double
#define SUFFIX _f64
#include "ops/vision/resample_impl.h"
#undef LD
#undef ST
#define LD(x) rt_ld_bf16(x)
#define ST(a) rt_st_bf16(a)
#define T uint16_t
#define A float
#define SUFFIX _bf16
#include "ops/vision/resample_impl.h"
#undef LD
#undef ST
#define LD(x) rt_ld_f16(x)
#define ST(a) rt_st_f16(a)
#define T uint16_t
#define A float
#define SUFFIX _f16
#include "ops/vision/resample_impl.h"
#undef LD
#undef ST

typedef struct rs_kernels {
  rt_range_fn forward, backward;
  void (*table)(rs_axis *, int, int64_t, int, double);
  size_t weight_size;
} rs_kernels;

static const rs_kernels *rs_kernels_for(nrt_dtype t) {
  static const rs_kernels f32 = {rs_forward__f32, rs_backward__f32, rs_table__f32, sizeof(float)},
                          f64 = {rs_forward__f64, rs_backward__f64, rs_table__f64, sizeof(double)},
                          bf16 = {rs_forward__bf16, rs_backward__bf16, rs_table__bf16, sizeof(float)},
                          f16 = {rs_forward__f16, rs_backward__f16, rs_table__f16, sizeof(float)};
  switch (t) {
    case NRT_FLOAT32: return &f32;
    case NRT_FLOAT64: return &f64;
    case NRT_BFLOAT16: return &bf16;
    case NRT_FLOAT16: return &f16;
    default: return NULL;
  }
}

/* The taps per output position of an axis from in to out positions. */
static int64_t rs_taps(int kind, int64_t in, int64_t out, int align, double user_scale) {
  if (kind == RS_BICUBIC) return 4;
  double scale = align ? (out > 1 ? (double)(in - 1) / (double)(out - 1) : 0.0)
                       : user_scale > 0 ? 1.0 / user_scale : (double)in / (double)out;
  /* PyTorch's max_interp_size, plus one for a support computed in float */
  return (int64_t)ceil(rs_support(kind, scale)) * 2 + 2;
}

static nrt_status rs_axis_alloc(rs_axis *ax, int64_t out, int64_t taps, size_t wsize) {
  ax->out = out, ax->taps = taps;
  ax->idx = calloc((size_t)(out * taps), sizeof *ax->idx);
  ax->count = calloc((size_t)out, sizeof *ax->count);
  ax->w = calloc((size_t)(out * taps), wsize);
  return ax->idx && ax->count && ax->w ? NRT_SUCCESS : NRT_ERROR_OUT_OF_MEMORY;
}

static void rs_axis_free(rs_axis *ax) {
  free(ax->idx);
  free(ax->count);
  free(ax->w);
}

/* [dst, src]; scalars [scale_h, scale_w, align_corners (, filter)]. */
static nrt_status resample(const nrt_op *op, int kind_given, int backward) {
  const char *name = nrt_op_name(op->code);
  nrt_status s = rt_check_arity(op, 2, kind_given < 0 ? 4 : 3);
  if (s) return s;
  if (op->num_outputs != 1) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects one output", name);
  if ((s = rt_check_image(op, 0, "the output")) || (s = rt_check_image(op, 1, "the input"))) return s;
  const nrt_tensor_view *dst = &op->operands[0], *src = &op->operands[1];
  if (dst->dtype != src->dtype)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: operands must share one dtype", name);
  const rs_kernels *k = rs_kernels_for(dst->dtype);
  if (!k) return rt_fail(NRT_ERROR_UNSUPPORTED, "%s: dtype %s is not supported", name, nrt_dtype_name(dst->dtype));
  int kind = kind_given;
  if (kind < 0) {
    int64_t f = rt_scalar_int(op, 3);
    if (f < RS_AA_BILINEAR || f > RS_AA_LANCZOS)
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: unknown filter %lld", name, (long long)f);
    kind = (int)f;
  }
  rs_job job;
  memset(&job, 0, sizeof job);
  job.src = rt_image_of(src);
  job.dst = rt_image_of(dst);
  atomic_init(&job.out_of_memory, 0);
  const rt_image *img = backward ? &job.dst : &job.src, *res = backward ? &job.src : &job.dst;
  if (img->n != res->n || img->c != res->c)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: batch and channel sizes differ between operands", name);
  /* PyTorch's sizes are positive, so an empty operand means an empty batch. */
  if (img->n * img->c * img->h * img->w == 0 || res->n * res->c * res->h * res->w == 0) return NRT_SUCCESS;
  double scale_h = rt_scalar_double(op, 0), scale_w = rt_scalar_double(op, 1);
  int align = rt_scalar_int(op, 2) != 0;
  if ((s = rs_axis_alloc(&job.h, res->h, rs_taps(kind, img->h, res->h, align, scale_h), k->weight_size)) ||
      (s = rs_axis_alloc(&job.w, res->w, rs_taps(kind, img->w, res->w, align, scale_w), k->weight_size))) {
    rs_axis_free(&job.h);
    rs_axis_free(&job.w);
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for its tables", name);
  }
  k->table(&job.h, kind, img->h, align, scale_h);
  k->table(&job.w, kind, img->w, align, scale_w);
  int64_t planes = img->n * img->c;
  int64_t work = (img->h * res->w * job.w.taps + res->h * res->w * job.h.taps) + 1;
  int64_t grain = work >= RT_VISION_GRAIN ? 1 : RT_VISION_GRAIN / work;
  rt_parallel_for(planes, grain, backward ? k->backward : k->forward, &job);
  rs_axis_free(&job.h);
  rs_axis_free(&job.w);
  if (atomic_load(&job.out_of_memory))
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for scratch buffers", name);
  return NRT_SUCCESS;
}

static int rs_is_u8(const nrt_op *op) { return op->num_operands >= 1 && op->operands[0].dtype == NRT_UINT8; }

nrt_status rt_kernel_upsample_bicubic2d(const nrt_op *op) {
  return rs_is_u8(op) ? rt_resample_u8(op, RT_U8_CUBIC) : resample(op, RS_BICUBIC, 0);
}
nrt_status rt_kernel_upsample_bicubic2d_backward(const nrt_op *op) { return resample(op, RS_BICUBIC, 1); }
nrt_status rt_kernel_upsample_aa2d(const nrt_op *op) {
  if (rs_is_u8(op)) {
    nrt_status s = rt_check_arity(op, 2, 4);
    if (s) return s;
    int64_t f = rt_scalar_int(op, 3);
    if (f < RS_AA_BILINEAR || f > RS_AA_LANCZOS)
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: unknown filter %lld", nrt_op_name(op->code), (long long)f);
    return rt_resample_u8(op, f == RS_AA_BILINEAR ? RT_U8_AA_LINEAR
                              : f == RS_AA_BICUBIC ? RT_U8_AA_CUBIC : RT_U8_AA_LANCZOS);
  }
  return resample(op, -1, 0);
}
nrt_status rt_kernel_upsample_aa2d_backward(const nrt_op *op) { return resample(op, -1, 1); }
