/* Helpers shared by the vision kernels (pooling, upsampling, convolution):
 * 4-d image views, element loads and stores by dtype, operand checks.
 *
 * The typed kernels are written once in *_impl.h files and instantiated per
 * dtype: the includer defines T (storage type), A (accumulation type),
 * SUFFIX, LD(x) (T -> A) and ST(a) (A -> T), LOWEST (A's smallest value). */
#ifndef NEURONRT_OPS_VISION_COMMON_H
#define NEURONRT_OPS_VISION_COMMON_H

#include <math.h>
#include <stdint.h>
#include "internal.h"
#include "ops/engine/scalar_types.h"

#define VCAT_(a, b) a##b
#define VCAT2_(a, b) VCAT_(a, b)
#define VF(name) VCAT2_(name, SUFFIX)

/* An [N, C, H, W] operand: typed pointers come from data, element strides. */
typedef struct rt_image {
  char *data;
  int64_t n, c, h, w;
  int64_t sn, sc, sh, sw;
} rt_image;

static inline rt_image rt_image_of(const nrt_tensor_view *v) {
  rt_image im = {.data = v->data,
                 .n = v->shape[0], .c = v->shape[1], .h = v->shape[2], .w = v->shape[3],
                 .sn = v->strides[0], .sc = v->strides[1], .sh = v->strides[2], .sw = v->strides[3]};
  return im;
}

/* Channels are the innermost dim (channels_last): kernels then vectorise
 * over channels instead of walking planes. */
static inline int rt_image_channels_inner(const rt_image *im) {
  return im->c > 1 && im->sc == 1 && im->sw != 1;
}

static inline float rt_ld_bf16(uint16_t x) { return rt_bfloat16_to_float(x); }
static inline float rt_ld_f16(uint16_t x) { return rt_half_to_float(x); }
static inline uint16_t rt_st_bf16(float x) { return rt_bfloat16_from_float(x); }
static inline uint16_t rt_st_f16(float x) { return rt_half_from_float(x); }

/* Checks that operand i is a 4-d view; fails naming the op otherwise. */
static inline nrt_status rt_check_image(const nrt_op *op, int i, const char *role) {
  if (op->operands[i].ndim != 4)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: %s must be a 4-d [N, C, H, W] view, got %d dims",
                   nrt_op_name(op->code), role, op->operands[i].ndim);
  return NRT_SUCCESS;
}

static inline int rt_is_float_dtype(nrt_dtype t) {
  return t == NRT_FLOAT32 || t == NRT_FLOAT64 || t == NRT_BFLOAT16 || t == NRT_FLOAT16;
}

/* dst[c] = element at + c * stride as double, dtypes other than float32
 * and float64 through ld: a contiguous float32 run vectorises (the channel
 * runs of pool3d.c and upsample3d.c; inlined into each ISA's copy). */
static inline __attribute__((always_inline)) void rt_vision_load_run(
    nrt_dtype t, const char *base, int64_t at, int64_t stride, int64_t n, double *dst,
    double (*ld)(nrt_dtype, const char *, int64_t)) {
  switch (t) {
    case NRT_FLOAT32: {
      const float *s = (const float *)base + at;
      if (stride == 1)
        for (int64_t c = 0; c < n; c++) dst[c] = s[c];
      else
        for (int64_t c = 0; c < n; c++) dst[c] = s[c * stride];
      break;
    }
    case NRT_FLOAT64: {
      const double *s = (const double *)base + at;
      for (int64_t c = 0; c < n; c++) dst[c] = s[c * stride];
      break;
    }
    default:
      for (int64_t c = 0; c < n; c++) dst[c] = ld(t, base, at + c * stride);
  }
}

/* Elements handled per parallel task before splitting is worthwhile. */
#define RT_VISION_GRAIN 16384

/* uint8 resampling in fixed point (resample_u8.c), PyTorch's CPU rule, for
 * the ops [out, in] with scalars [scale_h, scale_w, align_corners, ...]. */
enum { RT_U8_LINEAR = 0, RT_U8_CUBIC = 1, RT_U8_AA_LINEAR = 2, RT_U8_AA_CUBIC = 3, RT_U8_AA_LANCZOS = 4 };
nrt_status rt_resample_u8(const nrt_op *op, int filter);

#endif
