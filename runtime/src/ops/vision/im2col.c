/* Sliding-window patches: IM2COL copies each kernel tap of each window of
 * an image into a column matrix (nn.Unfold), COL2IM sums such a matrix
 * back onto the image (nn.Fold); each is the other's gradient. See
 * neuronrt/ops/vision.h for the operand layout.
 *
 * A row of the column matrix is one (image, channel, tap i, tap j, output
 * row oh): it reads one image row h = oh*sH - pH + i*dH at the columns
 * ow*sW - pW + j*dW, which lie inside the image for one contiguous range
 * of ow, computed once per row; outside it the row is zero. So the inner
 * loops are plain strided copies (IM2COL, any dtype, by element size) or
 * adds (COL2IM). COL2IM gives each (image, channel) plane to one task,
 * which sums into a zeroed plane of the compute type (float, double for
 * float64; bool sums as float, any true entry giving true) in a fixed
 * order, then stores it: no atomics, and results do
 * not depend on the thread count.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"
#include "ops/engine/convert.h"
#include "ops/engine/thread_pool.h"
#include "ops/vision/vision_common.h"

typedef struct patch_geometry {
  int64_t kh, kw, dh, dw, ph, pw, sh, sw;
} patch_geometry;

typedef struct patch_job {
  rt_image img, cols; /* cols: [N, C*kH*kW, OH, OW] */
  patch_geometry g;
  nrt_dtype dtype, c; /* the operands' dtype, the compute dtype (COL2IM) */
  atomic_int out_of_memory;
} patch_job;

/* ceil(a / b) for b > 0 and any a, clamped to [0, limit]. */
static int64_t first_at_least(int64_t a, int64_t b, int64_t limit) {
  int64_t q = a <= 0 ? 0 : (a + b - 1) / b;
  return q > limit ? limit : q;
}

/* The output columns [lo, hi) whose tap j lands inside an image row of W. */
static void valid_columns(const patch_geometry *g, int64_t j, int64_t w, int64_t ow, int64_t *lo, int64_t *hi) {
  const int64_t offset = j * g->dw - g->pw; /* image column of ow = 0 */
  *lo = first_at_least(-offset, g->sw, ow);
  *hi = first_at_least(w - offset, g->sw, ow);
  if (*hi < *lo) *hi = *lo;
}

#define DEFINE_PATCH_ROW(T)                                                                          \
  static void patch_row_##T(char *dst, int64_t ds, const char *src, int64_t ss, int64_t lo, int64_t hi, \
                            int64_t n) {                                                             \
    for (int64_t k = 0; k < lo; k++) *(T *)(dst + k * ds) = 0;                                       \
    for (int64_t k = lo; k < hi; k++) *(T *)(dst + k * ds) = *(const T *)(src + (k - lo) * ss);      \
    for (int64_t k = hi; k < n; k++) *(T *)(dst + k * ds) = 0;                                       \
  }
DEFINE_PATCH_ROW(uint8_t)
DEFINE_PATCH_ROW(uint16_t)
DEFINE_PATCH_ROW(uint32_t)
DEFINE_PATCH_ROW(uint64_t)

static void im2col_range(int64_t begin, int64_t end, void *ctx) {
  const patch_job *job = ctx;
  const rt_image *im = &job->img, *co = &job->cols;
  const patch_geometry *g = &job->g;
  const int64_t es = (int64_t)nrt_dtype_size(job->dtype), OH = co->h, OW = co->w;
  for (int64_t r = begin; r < end; r++) { /* r: (n, c, i, j, oh) */
    const int64_t oh = r % OH, j = r / OH % g->kw, i = r / (OH * g->kw) % g->kh;
    const int64_t c = r / (OH * g->kw * g->kh) % im->c, n = r / (OH * g->kw * g->kh * im->c);
    const int64_t row = (c * g->kh + i) * g->kw + j, h = oh * g->sh - g->ph + i * g->dh;
    char *dst = co->data + (n * co->sn + row * co->sc + oh * co->sh) * es;
    int64_t lo = 0, hi = 0;
    if (h >= 0 && h < im->h) valid_columns(g, j, im->w, OW, &lo, &hi);
    const int64_t w0 = lo * g->sw - g->pw + j * g->dw;
    const char *src = hi > lo ? im->data + (n * im->sn + c * im->sc + h * im->sh + w0 * im->sw) * es : NULL;
    const int64_t ds = co->sw * es, ss = g->sw * im->sw * es;
    switch (es) {
      case 1: patch_row_uint8_t(dst, ds, src, ss, lo, hi, OW); break;
      case 2: patch_row_uint16_t(dst, ds, src, ss, lo, hi, OW); break;
      case 4: patch_row_uint32_t(dst, ds, src, ss, lo, hi, OW); break;
      default: patch_row_uint64_t(dst, ds, src, ss, lo, hi, OW); break;
    }
  }
}

/* One (n, c) plane of COL2IM in compute type C: acc (H*W) = the sum of
 * every column entry landing on each pixel, taps and rows in order. */
#define DEFINE_COL2IM_PLANE(C)                                                                          \
  static void col2im_plane_##C(const patch_job *job, int64_t n, int64_t c, C *acc, C *buf) {            \
    const rt_image *im = &job->img, *co = &job->cols;                                                   \
    const patch_geometry *g = &job->g;                                                                  \
    const int64_t es = (int64_t)nrt_dtype_size(job->dtype), H = im->h, W = im->w;                       \
    memset(acc, 0, (size_t)(H * W) * sizeof(C));                                                        \
    for (int64_t i = 0; i < g->kh; i++)                                                                 \
      for (int64_t j = 0; j < g->kw; j++) {                                                             \
        const int64_t row = (c * g->kh + i) * g->kw + j;                                                \
        int64_t lo, hi;                                                                                 \
        valid_columns(g, j, W, co->w, &lo, &hi);                                                        \
        if (hi <= lo) continue;                                                                         \
        const int64_t w0 = lo * g->sw - g->pw + j * g->dw, sw = g->sw;                                  \
        for (int64_t oh = 0; oh < co->h; oh++) {                                                        \
          const int64_t h = oh * g->sh - g->ph + i * g->dh;                                             \
          if (h < 0 || h >= H) continue;                                                                \
          char *data[2] = {(char *)buf, co->data + (n * co->sn + row * co->sc + oh * co->sh + lo * co->sw) * es}; \
          int64_t strides[2] = {(int64_t)sizeof(C), co->sw * es};                                       \
          rt_convert_loops[job->c][job->dtype](data, strides, hi - lo, NULL);                           \
          C *dst = acc + h * W + w0;                                                                    \
          for (int64_t k = 0; k < hi - lo; k++) dst[k * sw] += buf[k];                                  \
        }                                                                                               \
      }                                                                                                 \
    for (int64_t h = 0; h < H; h++) {                                                                   \
      char *data[2] = {im->data + (n * im->sn + c * im->sc + h * im->sh) * es, (char *)(acc + h * W)};  \
      int64_t strides[2] = {im->sw * es, (int64_t)sizeof(C)};                                           \
      rt_convert_loops[job->dtype][job->c](data, strides, W, NULL);                                     \
    }                                                                                                   \
  }
DEFINE_COL2IM_PLANE(float)
DEFINE_COL2IM_PLANE(double)

static void col2im_range(int64_t begin, int64_t end, void *ctx) {
  patch_job *job = ctx;
  const size_t c = nrt_dtype_size(job->c);
  const int64_t plane = job->img.h * job->img.w, ow = job->cols.w;
  void *acc = malloc((size_t)(plane > 0 ? plane : 1) * c), *buf = malloc((size_t)(ow > 0 ? ow : 1) * c);
  if (!acc || !buf) {
    atomic_store(&job->out_of_memory, 1);
  } else {
    for (int64_t p = begin; p < end; p++) {
      if (job->c == NRT_FLOAT64)
        col2im_plane_double(job, p / job->img.c, p % job->img.c, acc, buf);
      else
        col2im_plane_float(job, p / job->img.c, p % job->img.c, acc, buf);
    }
  }
  free(acc);
  free(buf);
}

/* The window count along a dim of size `in`: PyTorch's formula. */
static int64_t window_count(int64_t in, int64_t k, int64_t d, int64_t p, int64_t s) {
  const int64_t span = in + 2 * p - (d * (k - 1) + 1);
  return span < 0 ? 0 : span / s + 1;
}

static nrt_status patch_run(const nrt_op *op, int to_image) {
  const char *name = nrt_op_name(op->code);
  if (op->num_operands != 2 || op->num_outputs != 1 || op->num_scalars != 8)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects two operands and scalars (kH, kW, dH, dW, pH, pW, sH, sW)",
                   name);
  nrt_status s;
  if ((s = rt_check_image(op, 0, to_image ? "image" : "columns")) != NRT_SUCCESS ||
      (s = rt_check_image(op, 1, to_image ? "columns" : "image")) != NRT_SUCCESS)
    return s;
  const nrt_tensor_view *img = &op->operands[to_image ? 0 : 1], *cols = &op->operands[to_image ? 1 : 0];
  patch_geometry g = {op->scalars[0].i, op->scalars[1].i, op->scalars[2].i, op->scalars[3].i,
                      op->scalars[4].i, op->scalars[5].i, op->scalars[6].i, op->scalars[7].i};
  if (g.kh < 1 || g.kw < 1 || g.dh < 1 || g.dw < 1 || g.sh < 1 || g.sw < 1 || g.ph < 0 || g.pw < 0)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: kernel, dilation and stride must be positive, padding not negative",
                   name);
  if (img->dtype != cols->dtype)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: image and columns must have one dtype", name);
  if (to_image && !rt_is_float_dtype(img->dtype) && img->dtype != NRT_BOOL)
    return rt_fail(NRT_ERROR_UNSUPPORTED, "%s: floating dtypes and bool only, got %s", name,
                   nrt_dtype_name(img->dtype));
  const int64_t N = img->shape[0], C = img->shape[1], H = img->shape[2], W = img->shape[3];
  if (cols->shape[0] != N || cols->shape[1] != C * g.kh * g.kw ||
      cols->shape[2] != window_count(H, g.kh, g.dh, g.ph, g.sh) ||
      cols->shape[3] != window_count(W, g.kw, g.dw, g.pw, g.sw))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "%s: columns [%lld, %lld, %lld, %lld] do not match the image and the kernel geometry", name,
                   (long long)cols->shape[0], (long long)cols->shape[1], (long long)cols->shape[2],
                   (long long)cols->shape[3]);
  patch_job job = {.img = rt_image_of(img), .cols = rt_image_of(cols), .g = g, .dtype = img->dtype,
                   .c = img->dtype == NRT_FLOAT64 ? NRT_FLOAT64 : NRT_FLOAT32};
  if (!to_image) {
    const int64_t rows = cols->shape[0] * cols->shape[1] * cols->shape[2];
    if (rows > 0 && cols->shape[3] > 0) rt_parallel_for(rows, 1 + RT_VISION_GRAIN / (cols->shape[3] + 1), im2col_range, &job);
    return NRT_SUCCESS;
  }
  if (N * C * H * W == 0) return NRT_SUCCESS;
  const int64_t per_plane = H * W + g.kh * g.kw * cols->shape[2] * cols->shape[3];
  rt_parallel_for(N * C, 1 + RT_VISION_GRAIN / (per_plane + 1), col2im_range, &job);
  if (atomic_load(&job.out_of_memory)) return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory", name);
  return NRT_SUCCESS;
}

nrt_status rt_kernel_im2col(const nrt_op *op) { return patch_run(op, 0); }

nrt_status rt_kernel_col2im(const nrt_op *op) { return patch_run(op, 1); }
