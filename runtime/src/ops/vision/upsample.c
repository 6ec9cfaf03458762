/* Upsampling: UPSAMPLE_NEAREST2D (and nearest-exact), UPSAMPLE_BILINEAR2D
 * and their backward ops (see neuronrt/ops/vision.h).
 *
 * Each output row and column reads one source row and column (nearest) or
 * two with weights (bilinear); those tables are computed once per call with
 * PyTorch's index arithmetic, in float32 for nearest and in the op's
 * compute type for bilinear. Nearest forward is a gather of whole elements
 * and serves every dtype by element size. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "ops/engine/elementwise.h"
#include "ops/shape/shape_common.h"
#include "ops/engine/thread_pool.h"
#include "ops/vision/vision_common.h"

typedef struct upsample_job {
  rt_image img; /* the input side: input, or grad_input */
  rt_image out; /* output, or grad_output */
  const int64_t *h0, *h1, *w0, *w1;
  const void *lh0, *lh1, *lw0, *lw1; /* weights in A; NULL for nearest */
  int64_t cblock;
  atomic_int out_of_memory;
} upsample_job;

#define LD(x) (x)
#define ST(a) (a)
#define T float
#define A float
#define SUFFIX _f32
#include "ops/vision/upsample_impl.h"
#define T double
#define A double
#define SUFFIX _f64
#include "ops/vision/upsample_impl.h"
#undef LD
#undef ST
#define LD(x) rt_ld_bf16(x)
#define ST(a) rt_st_bf16(a)
#define T uint16_t
#define A float
#define SUFFIX _bf16
#include "ops/vision/upsample_impl.h"
#undef LD
#undef ST
#define LD(x) rt_ld_f16(x)
#define ST(a) rt_st_f16(a)
#define T uint16_t
#define A float
#define SUFFIX _f16
#include "ops/vision/upsample_impl.h"
#undef LD
#undef ST

/* ---- nearest forward: a gather by element size ------------------------- */

#define NEAREST_GATHER_(E, SUFFIX_)                                                           \
  static void nearest_planes##SUFFIX_(int64_t begin, int64_t end, void *arg) {                \
    const upsample_job *j = arg;                                                              \
    const rt_image *in = &j->img, *out = &j->out;                                             \
    for (int64_t p = begin; p < end; p++) {                                                   \
      int64_t n = p / in->c, c = p % in->c;                                                   \
      const E *src = (const E *)in->data + n * in->sn + c * in->sc;                           \
      E *dst = (E *)out->data + n * out->sn + c * out->sc;                                    \
      for (int64_t oh = 0; oh < out->h; oh++) {                                               \
        const E *row = src + j->h0[oh] * in->sh;                                              \
        E *d = dst + oh * out->sh;                                                            \
        for (int64_t ow = 0; ow < out->w; ow++) d[ow * out->sw] = row[j->w0[ow] * in->sw];    \
      }                                                                                       \
    }                                                                                         \
  }                                                                                           \
  static void nearest_rows##SUFFIX_(int64_t begin, int64_t end, void *arg) {                  \
    const upsample_job *j = arg;                                                              \
    const rt_image *in = &j->img, *out = &j->out;                                             \
    for (int64_t r = begin; r < end; r++) {                                                   \
      int64_t n = r / out->h, oh = r % out->h;                                                \
      const E *row = (const E *)in->data + n * in->sn + j->h0[oh] * in->sh;                   \
      for (int64_t ow = 0; ow < out->w; ow++) {                                               \
        const E *s = row + j->w0[ow] * in->sw;                                                \
        E *d = (E *)out->data + n * out->sn + oh * out->sh + ow * out->sw;                    \
        if (out->sc == 1)                                                                     \
          memcpy(d, s, (size_t)in->c * sizeof(E));                                            \
        else                                                                                  \
          for (int64_t c = 0; c < in->c; c++) d[c * out->sc] = s[c];                          \
      }                                                                                       \
    }                                                                                         \
  }

NEAREST_GATHER_(uint8_t, _1)
NEAREST_GATHER_(uint16_t, _2)
NEAREST_GATHER_(uint32_t, _4)
NEAREST_GATHER_(uint64_t, _8)

/* ---- tables ---------------------------------------------------------------- */

/* PyTorch's nearest_idx / nearest_exact_idx (UpSample.h), float32 math. */
static void nearest_table(int64_t out, int64_t in, double scale, int exact, int64_t *idx) {
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

typedef struct upsample_tables {
  int64_t *index;  /* h0, h1, w0, w1: out_h, out_h, out_w, out_w entries */
  void *weights;   /* lh0, lh1, lw0, lw1 in the compute type */
} upsample_tables;

typedef struct upsample_kernels {
  rt_range_fn planes, rows, backward;
  void (*linear_table)(int64_t, int64_t, int, double, int64_t *, int64_t *, void *, void *);
  size_t weight_size;
} upsample_kernels;

#define LINEAR_TABLE_(s, A_)                                                                   \
  static void linear_table##s(int64_t out, int64_t in, int align, double scale, int64_t *i0,  \
                              int64_t *i1, void *l0, void *l1) {                               \
    linear_table_##s(out, in, align, scale, i0, i1, (A_ *)l0, (A_ *)l1);                       \
  }
LINEAR_TABLE_(_f32, float)
LINEAR_TABLE_(_f64, double)
LINEAR_TABLE_(_bf16, float)
LINEAR_TABLE_(_f16, float)

#define FLOAT_KERNELS_(s, A_) \
  {bilinear_planes_##s, bilinear_rows_##s, backward_##s, linear_table##s, sizeof(A_)}

static const upsample_kernels *kernels_for(nrt_dtype t) {
  static const upsample_kernels f32 = FLOAT_KERNELS_(_f32, float), f64 = FLOAT_KERNELS_(_f64, double),
                                bf16 = FLOAT_KERNELS_(_bf16, float), f16 = FLOAT_KERNELS_(_f16, float);
  switch (t) {
    case NRT_FLOAT32: return &f32;
    case NRT_FLOAT64: return &f64;
    case NRT_BFLOAT16: return &bf16;
    case NRT_FLOAT16: return &f16;
    default: return NULL;
  }
}

/* ---- ops ----------------------------------------------------------------- */

typedef enum upsample_mode { NEAREST, BILINEAR } upsample_mode;

/* Checks [dst, src] and fills job; img is the input side. */
static nrt_status prepare(const nrt_op *op, int backward, upsample_job *job) {
  const char *name = nrt_op_name(op->code);
  nrt_status s = rt_check_arity(op, 2, 3);
  if (s) return s;
  if (op->num_outputs != 1) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects one output", name);
  if ((s = rt_check_image(op, 0, "the output")) || (s = rt_check_image(op, 1, "the input"))) return s;
  const nrt_tensor_view *dst = &op->operands[0], *src = &op->operands[1];
  job->img = rt_image_of(backward ? dst : src);
  job->out = rt_image_of(backward ? src : dst);
  atomic_init(&job->out_of_memory, 0);
  if (job->img.n != job->out.n || job->img.c != job->out.c)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: batch and channel sizes differ between operands", name);
  if (dst->dtype != src->dtype)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: operands must share one dtype", name);
  if (job->out.h * job->out.w > 0 && job->img.h * job->img.w == 0)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: the input plane is empty", name);
  return NRT_SUCCESS;
}

static int64_t grain_for(int64_t work_per_task) {
  return work_per_task >= RT_VISION_GRAIN ? 1 : RT_VISION_GRAIN / (work_per_task > 0 ? work_per_task : 1);
}

static nrt_status upsample(const nrt_op *op, upsample_mode mode, int backward) {
  const char *name = nrt_op_name(op->code);
  upsample_job job;
  memset(&job, 0, sizeof job);
  nrt_status s = prepare(op, backward, &job);
  if (s) return s;
  nrt_dtype dtype = op->operands[0].dtype;
  const upsample_kernels *k = kernels_for(dtype);
  if ((mode == BILINEAR || backward) && !k)
    return rt_fail(NRT_ERROR_UNSUPPORTED, "%s: dtype %s is not supported", name, nrt_dtype_name(dtype));
  rt_image *img = &job.img, *out = &job.out;
  /* PyTorch's sizes are positive, so an empty operand means an empty batch. */
  if (img->n * img->c * img->h * img->w == 0 || out->n * out->c * out->h * out->w == 0) return NRT_SUCCESS;
  double scale_h = rt_scalar_double(op, 0), scale_w = rt_scalar_double(op, 1);
  int flag = rt_scalar_int(op, 2) != 0;
  size_t wsize = k ? k->weight_size : sizeof(float);
  int64_t *index = calloc((size_t)(2 * (out->h + out->w)), sizeof *index); /* nearest fills half */
  char *weights = mode == BILINEAR ? malloc((size_t)(2 * (out->h + out->w)) * wsize) : NULL;
  if (!index || (mode == BILINEAR && !weights)) {
    free(index);
    free(weights);
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory", name);
  }
  job.h0 = index;
  job.h1 = index + out->h;
  job.w0 = index + 2 * out->h;
  job.w1 = index + 2 * out->h + out->w;
  if (mode == NEAREST) {
    nearest_table(out->h, img->h, scale_h, flag, index);
    nearest_table(out->w, img->w, scale_w, flag, index + 2 * out->h);
  } else {
    job.lh0 = weights;
    job.lh1 = weights + (size_t)out->h * wsize;
    job.lw0 = weights + (size_t)(2 * out->h) * wsize;
    job.lw1 = weights + (size_t)(2 * out->h + out->w) * wsize;
    k->linear_table(out->h, img->h, flag, scale_h, index, index + out->h, (void *)job.lh0, (void *)job.lh1);
    k->linear_table(out->w, img->w, flag, scale_w, index + 2 * out->h, index + 2 * out->h + out->w,
                    (void *)job.lw0, (void *)job.lw1);
  }
  int taps = mode == BILINEAR ? 4 : 1;
  if (backward) {
    job.cblock = rt_image_channels_inner(img) ? (img->c < 64 ? img->c : 64) : 1;
    int64_t blocks = (img->c + job.cblock - 1) / job.cblock;
    rt_parallel_for(img->n * blocks, grain_for((img->h * img->w + out->h * out->w * taps) * job.cblock),
                    k->backward, &job);
  } else if (rt_image_channels_inner(img)) {
    rt_range_fn rows = mode == BILINEAR ? k->rows : NULL;
    if (!rows) {
      switch (nrt_dtype_size(dtype)) {
        case 1: rows = nearest_rows_1; break;
        case 2: rows = nearest_rows_2; break;
        case 4: rows = nearest_rows_4; break;
        default: rows = nearest_rows_8; break;
      }
    }
    rt_parallel_for(out->n * out->h, grain_for(out->w * out->c * taps), rows, &job);
  } else {
    rt_range_fn planes = mode == BILINEAR ? k->planes : NULL;
    if (!planes) {
      switch (nrt_dtype_size(dtype)) {
        case 1: planes = nearest_planes_1; break;
        case 2: planes = nearest_planes_2; break;
        case 4: planes = nearest_planes_4; break;
        default: planes = nearest_planes_8; break;
      }
    }
    rt_parallel_for(out->n * out->c, grain_for(out->h * out->w * taps), planes, &job);
  }
  free(index);
  free(weights);
  if (atomic_load(&job.out_of_memory))
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for scratch buffers", name);
  return NRT_SUCCESS;
}

nrt_status rt_kernel_upsample_nearest2d(const nrt_op *op) { return upsample(op, NEAREST, 0); }
nrt_status rt_kernel_upsample_nearest2d_backward(const nrt_op *op) { return upsample(op, NEAREST, 1); }
nrt_status rt_kernel_upsample_bilinear2d(const nrt_op *op) {
  if (op->num_operands >= 1 && op->operands[0].dtype == NRT_UINT8) return rt_resample_u8(op, RT_U8_LINEAR);
  return upsample(op, BILINEAR, 0);
}
nrt_status rt_kernel_upsample_bilinear2d_backward(const nrt_op *op) { return upsample(op, BILINEAR, 1); }
