/* Convolution: CONV2D, CONV2D_INPUT_GRAD and CONV2D_WEIGHT_GRAD (see
 * neuronrt/ops/vision.h).
 *
 * float32 and bfloat16 NCHW (or any layout whose channels are not the
 * innermost dim) take the blocked implicit GEMM of conv_blocked.h on CPUs
 * with AVX-512 (AVX512_BF16 for bfloat16): forward, the weight gradient,
 * and the input gradient without dilation (as flipped forwards, one per
 * stride phase). On CPUs with AMX, bfloat16 (16 channels per group, 64
 * taps or more, a stride only within the window) convolves directly on the
 * tiles (conv_amx.h; a 1x1 weight gradient excepted; a strided input
 * gradient by phase), and other bfloat16 of 64 taps or more
 * takes bfloat16 columns into the GEMM's AMX kernel (bf16_columns).
 * Everything else (float64, float16, channels_last,
 * depthwise, dilated input gradients, other CPUs) runs here, by im2col /
 * col2im and matrix products (conv_gemm.h, the project's GEMM):
 *
 * Parallel work is split into tasks whose outputs are disjoint: forward by
 * (image, group, tile of output positions), each thread building its own
 * column tile in cache; the input gradient in two stages over a chunk of
 * images (column blocks by tile, then col2im by image channel); the weight
 * gradient by tiles into a fixed number of private copies summed in order
 * or, for large weights, in two stages (column blocks by image, then
 * products by block of the weight gradient, each summing over the images
 * in order). Task
 * shapes depend on the problem only, and each output element is summed by
 * one task in a fixed order, so results do not depend on the thread count.
 * A 1x1 convolution with stride 1 and no padding reads the image in place;
 * the input gradient of a stride-1 convolution runs as a forward one;
 * depthwise convolutions run as direct loops (conv_depthwise_impl.h).
 * Integer dtypes (forward and input gradient) run conv_integer.c's loops. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "cpu_isa.h"
#include "ops/conv/conv_amx.h"
#include "ops/conv/conv_blocked.h"
#include "ops/conv/conv_gemm.h"
#include "ops/conv/conv_integer.h"
#include "ops/engine/elementwise.h"
#include "ops/shape/shape_common.h"
#include "ops/engine/thread_pool.h"
#include "ops/vision/vision_common.h"

typedef struct conv_job {
  rt_image img; /* I: input, or grad_input */
  rt_image out; /* O: output, or grad_output */
  int64_t kh, kw, sh, sw, ph, pw, dh, dw, groups;
  int64_t cg, kg, kk, ohw; /* channels per group of I and O, taps, positions */
  int64_t nt, tiles;       /* output positions per tile, tiles per image */
  int64_t batch;           /* images per tile (1 unless a tile holds whole images) */
  const void *wmat;        /* weight as an A matrix [K][kk], row stride w_rs */
  int64_t w_rs;
  const void *bias;
  int64_t bias_stride;
  const void *wcols;       /* depthwise weight as [tap][C] (channels-inner images) */
  int pointwise;  /* 1x1, stride 1, no padding, I dense over positions: I is its own col */
  int direct_out; /* O is read or written in place as an A matrix */
  int taps_outer; /* channels-inner image: columns as rows of pixels' channel runs */
  void *col, *omat, *wgrad;
  int64_t n0, chunk; /* images of the current stage */
  int64_t mb, nb;    /* weight-gradient block */
  int64_t parts;     /* weight-gradient accumulators (tiled path) */
  int started;       /* wgrad already holds earlier images */
  atomic_int out_of_memory;
} conv_job;

/* Channels per task of the channels-inner depthwise weight gradient. */
#define DW_CBLOCK 64

/* The products, flagging the job when one fails (out of memory). */
static inline void conv_gemm_f32(conv_job *j, int64_t m, int64_t n, int64_t k, rt_matrix_f32 a, rt_matrix_f32 b,
                                 rt_matrix_f32 c, int accumulate) {
  if (rt_conv_gemm_f32(m, n, k, a, b, c, accumulate)) atomic_store(&j->out_of_memory, 1);
}

static inline void conv_gemm_bf16(conv_job *j, int64_t m, int64_t n, int64_t k, rt_matrix_bf16 a, rt_matrix_bf16 b,
                                  rt_matrix_f32 c, int accumulate) {
  if (rt_conv_gemm_bf16(m, n, k, a, b, c, accumulate)) atomic_store(&j->out_of_memory, 1);
}

static inline void conv_gemm_f64(conv_job *j, int64_t m, int64_t n, int64_t k, rt_matrix_f64 a, rt_matrix_f64 b,
                                 rt_matrix_f64 c, int accumulate) {
  if (rt_conv_gemm_f64(m, n, k, a, b, c, accumulate)) atomic_store(&j->out_of_memory, 1);
}

/* Positions u in [0, count) with 0 <= start + u * step < size: [u0, u1). */
static inline void conv_valid_range(int64_t start, int64_t step, int64_t size, int64_t count, int64_t *u0,
                                    int64_t *u1) {
  int64_t lo = start >= 0 ? 0 : (-start + step - 1) / step;
  int64_t hi = start >= size ? 0 : (size - start + step - 1) / step;
  *u0 = lo < count ? lo : count;
  *u1 = hi < count ? hi : count;
  if (*u1 < *u0) *u1 = *u0;
}

/* Position of tap (c, i, j) in a weight row: (c, i, j) order, or (i, j, c)
 * for channels-inner images. */
static inline int64_t conv_tap_index(const nrt_tensor_view *w, int64_t c, int64_t i, int64_t j, int taps_outer) {
  return taps_outer ? (i * w->shape[3] + j) * w->shape[1] + c : (c * w->shape[2] + i) * w->shape[3] + j;
}

/* The taps of each weight row are dense in that order. */
static int conv_weight_dense(const nrt_tensor_view *w, int taps_outer) {
  int64_t cg = w->shape[1], kh = w->shape[2], kw = w->shape[3];
  if (taps_outer)
    return (cg == 1 || w->strides[1] == 1) && (kw == 1 || w->strides[3] == cg) &&
           (kh == 1 || w->strides[2] == kw * cg);
  return (kw == 1 || w->strides[3] == 1) && (kh == 1 || w->strides[2] == kw) &&
         (cg == 1 || w->strides[1] == kh * kw);
}

/* The positions of an image are one strided run (h stride = W * w stride). */
static int positions_flat(const rt_image *im) { return im->h == 1 || im->sh == im->w * im->sw; }

#define LD(x) (x)
#define ST(a) (a)
#define T float
#define A float
#define T_IS_A 1
#define SUFFIX _f32
#define GEMM conv_gemm_f32
#define MAT rt_matrix_f32
#include "ops/conv/conv_impl.h"
#define T double
#define A double
#define T_IS_A 1
#define SUFFIX _f64
#define GEMM conv_gemm_f64
#define MAT rt_matrix_f64
#include "ops/conv/conv_impl.h"
#undef LD
#undef ST
#define LD(x) rt_ld_bf16(x)
#define ST(a) rt_st_bf16(a)
#define T uint16_t
#define A float
#define T_IS_A 0
#define SUFFIX _bf16
#define GEMM conv_gemm_f32
#define MAT rt_matrix_f32
#include "ops/conv/conv_impl.h"
/* bfloat16 columns straight into the bfloat16 GEMM (AMX tiles), sums in
 * float32; not depthwise, which keeps the float32 loops above. */
#define T uint16_t
#define A float
#define T_IS_A 0
#define COL uint16_t
#define COLMAT rt_matrix_bf16
#define LDCOL(x) (x)
#define COL_IS_T 1
#define CONV_COLUMNS_ONLY
#define SUFFIX _bf16mm
#define GEMM conv_gemm_bf16
#define MAT rt_matrix_f32
#include "ops/conv/conv_impl.h"
#undef CONV_COLUMNS_ONLY
#undef LD
#undef ST
#define LD(x) rt_ld_f16(x)
#define ST(a) rt_st_f16(a)
#define T uint16_t
#define A float
#define T_IS_A 0
#define SUFFIX _f16
#define GEMM conv_gemm_f32
#define MAT rt_matrix_f32
#include "ops/conv/conv_impl.h"
#undef LD
#undef ST

typedef struct conv_kernels {
  rt_range_fn forward_tiles, grad_cols, grad_planes, wgrad_cols, wgrad_blocks, wgrad_tiles;
  rt_range_fn dw_planes, dw_rows, dw_wgrad, dw_wgrad_rows;
  void (*sum_parts)(void *, int64_t, int64_t);
  const void *(*weight_matrix)(const nrt_tensor_view *, int64_t, void *, int64_t *, int);
  void (*store_weight)(const void *, const nrt_tensor_view *, int64_t, int);
  size_t a_size; /* bytes of the accumulation type */
  size_t col_size; /* bytes of a column (and GEMM input) element */
  int t_is_a;
  int t_is_col; /* images, outputs and weights are read in place as columns */
} conv_kernels;

#define KERNELS_(s, A_, same)                                                                        \
  static const void *weight_matrix##s(const nrt_tensor_view *w, int64_t kk, void *buf, int64_t *rs,  \
                                      int taps_outer) {                                              \
    return weight_matrix_##s(w, kk, buf, rs, taps_outer);                                            \
  }                                                                                                  \
  static void store_weight##s(const void *dw, const nrt_tensor_view *w, int64_t kk, int taps_outer) { \
    store_weight_##s(dw, w, kk, taps_outer);                                                         \
  }                                                                                                  \
  static const conv_kernels kernels##s = {forward_tiles_##s, grad_cols_##s,     grad_planes_##s,       \
                                          wgrad_cols_##s,    wgrad_blocks_##s,  wgrad_tiles_##s,       \
                                          dw_planes_##s,     dw_rows_##s,       dw_wgrad_##s,          \
                                          dw_wgrad_rows_##s,                                         \
                                          sum_parts_##s,     weight_matrix##s,  store_weight##s,       \
                                          sizeof(A_),        sizeof(A_),       same, same};
KERNELS_(_f32, float, 1)
KERNELS_(_f64, double, 1)
KERNELS_(_bf16, float, 0)
KERNELS_(_f16, float, 0)

static const void *weight_matrix_bf16mm_any(const nrt_tensor_view *w, int64_t kk, void *buf, int64_t *rs,
                                            int taps_outer) {
  return weight_matrix__bf16mm(w, kk, buf, rs, taps_outer);
}
static void store_weight_bf16mm_any(const void *dw, const nrt_tensor_view *w, int64_t kk, int taps_outer) {
  store_weight__bf16mm(dw, w, kk, taps_outer);
}
static const conv_kernels kernels_bf16mm = {
    .forward_tiles = forward_tiles__bf16mm, .grad_cols = grad_cols__bf16mm, .grad_planes = grad_planes__bf16mm,
    .wgrad_cols = wgrad_cols__bf16mm, .wgrad_blocks = wgrad_blocks__bf16mm, .wgrad_tiles = wgrad_tiles__bf16mm,
    .sum_parts = sum_parts__bf16mm, .weight_matrix = weight_matrix_bf16mm_any,
    .store_weight = store_weight_bf16mm_any, .a_size = sizeof(float), .col_size = sizeof(uint16_t), .t_is_a = 0,
    .t_is_col = 1};

static const conv_kernels *kernels_for(nrt_dtype t) {
  switch (t) {
    case NRT_FLOAT32: return &kernels_f32;
    case NRT_FLOAT64: return &kernels_f64;
    case NRT_BFLOAT16: return &kernels_bf16;
    case NRT_FLOAT16: return &kernels_f16;
    default: return NULL;
  }
}

/* ---- setup ------------------------------------------------------------------ */

/* Column elements a forward tile may hold: about 1 MiB of float32. */
#define TILE_BUDGET (1 << 18)
/* Elements of the column (and converted gradient) blocks of one stage. */
#define CHUNK_BUDGET (1 << 22)

/* The tiled weight gradient keeps PARTS_MIN..PARTS_MAX copies of it, at
 * most PARTS_BUDGET elements in all; a larger weight takes the staged path. */
#define PARTS_MIN 4
#define PARTS_MAX 16
#define PARTS_BUDGET (1 << 22)

typedef enum conv_role { FORWARD, INPUT_GRAD, WEIGHT_GRAD } conv_role;

/* bfloat16 takes bfloat16 columns into the GEMM's AMX kernel where there is
 * one: about twice the blocked AVX512_BF16 path's speed from 64 taps on
 * (benchmarks/conv.py); fewer taps (an RGB input layer) leave the tiles
 * mostly empty and stay blocked, and depthwise keeps its direct loops. */
#define BF16_COLUMNS_MIN_TAPS 64
static int bf16_columns(const conv_job *j) {
  return rt_isa_amx_bf16() && j->kk >= BF16_COLUMNS_MIN_TAPS && !(j->cg == 1 && j->kg == 1);
}

/* The blocked implicit GEMM (conv_blocked.h) runs the shape, unless the
 * kernels chosen are the bfloat16 columns'. Each convolution (any role)
 * asks once, so the conv.* counters say which path every one took: blocked,
 * columns into the GEMM, or bfloat16 columns into the AMX GEMM. */
static int use_blocked(const conv_kernels *k, const rt_conv_shape *cs, nrt_dtype dtype) {
  int blocked = k != &kernels_bf16mm && rt_conv_blocked_usable(cs, dtype);
  if (blocked) rt_metric_add(NRT_METRIC_CONV_BLOCKED, 1);
  return blocked;
}

/* bfloat16 on an AMX host convolves directly on tiles where
 * rt_conv_amx_usable says (conv_amx.h): no columns, no GEMM packing.
 * Counted as conv.amx_direct. */
static int use_amx_direct(nrt_dtype dtype, const rt_conv_shape *cs) {
  int direct = dtype == NRT_BFLOAT16 && rt_conv_amx_usable(cs);
  if (direct) rt_metric_add(NRT_METRIC_CONV_AMX_DIRECT, 1);
  return direct;
}

/* Counts a convolution that runs on columns (not blocked). */
static void count_columns(const conv_kernels *k) {
  rt_metric_add(k == &kernels_bf16mm ? NRT_METRIC_CONV_AMX_COLUMNS : NRT_METRIC_CONV_COLUMNS, 1);
}

/* Checks the op and fills the geometry of job. Operand order by role:
 * FORWARD [O, I, w (, bias)], INPUT_GRAD [I, O, w (, bias)], WEIGHT_GRAD
 * [w, I, O]. */
static nrt_status prepare(const nrt_op *op, conv_role role, conv_job *j, const conv_kernels **k) {
  const char *name = nrt_op_name(op->code);
  int with_bias = role != WEIGHT_GRAD && op->num_operands == 4;
  if ((op->num_operands != 3 && !with_bias) || op->num_outputs != 1 || op->num_scalars < 7)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects 3 operands (4 with a bias), one output and 7 scalars",
                   name);
  for (int i = 0; i < 3; i++) {
    nrt_status s = rt_check_image(op, i, "every operand but the bias");
    if (s) return s;
  }
  int oi = role == FORWARD ? 0 : role == INPUT_GRAD ? 1 : 2, ii = role == FORWARD ? 1 : role == INPUT_GRAD ? 0 : 1;
  int wi = role == WEIGHT_GRAD ? 0 : 2;
  const nrt_tensor_view *w = &op->operands[wi];
  nrt_dtype dtype = op->operands[0].dtype;
  for (int i = 1; i < op->num_operands; i++)
    if (op->operands[i].dtype != dtype)
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: operands must share one dtype", name);
  if (!(*k = kernels_for(dtype)))
    return rt_fail(NRT_ERROR_UNSUPPORTED, "%s: dtype %s is not supported", name, nrt_dtype_name(dtype));
  memset(j, 0, sizeof *j);
  atomic_init(&j->out_of_memory, 0);
  j->img = rt_image_of(&op->operands[ii]);
  j->out = rt_image_of(&op->operands[oi]);
  j->sh = rt_scalar_int(op, 0);
  j->sw = rt_scalar_int(op, 1);
  j->ph = rt_scalar_int(op, 2);
  j->pw = rt_scalar_int(op, 3);
  j->dh = rt_scalar_int(op, 4);
  j->dw = rt_scalar_int(op, 5);
  j->groups = rt_scalar_int(op, 6);
  j->kh = w->shape[2];
  j->kw = w->shape[3];
  if (j->sh <= 0 || j->sw <= 0 || j->dh <= 0 || j->dw <= 0 || j->ph < 0 || j->pw < 0 || j->groups <= 0)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "%s: stride, dilation and groups must be positive and padding non-negative", name);
  if (j->img.n != j->out.n || j->out.c != w->shape[0] || j->out.c % j->groups != 0 ||
      j->img.c != w->shape[1] * j->groups)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "%s: weight [%lld, %lld, ...] with %lld groups does not fit %lld image and %lld output channels",
                   name, (long long)w->shape[0], (long long)w->shape[1], (long long)j->groups,
                   (long long)j->img.c, (long long)j->out.c);
  if (with_bias) {
    const nrt_tensor_view *b = &op->operands[3];
    int64_t want = role == FORWARD ? j->out.c : j->img.c;
    if (b->ndim != 1 || b->shape[0] != want)
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: bias must be 1-d of size %lld", name, (long long)want);
    j->bias = b->data;
    j->bias_stride = b->strides[0];
  }
  j->cg = w->shape[1];
  j->kg = j->out.c / j->groups;
  j->kk = j->cg * j->kh * j->kw;
  j->ohw = j->out.h * j->out.w;
  if (*k == &kernels_bf16 && bf16_columns(j)) *k = &kernels_bf16mm;
  j->direct_out = (*k)->t_is_col && positions_flat(&j->out);
  j->pointwise = (*k)->t_is_col && j->kh == 1 && j->kw == 1 && j->sh == 1 && j->sw == 1 && j->ph == 0 &&
                 j->pw == 0 && j->img.h == j->out.h && j->img.w == j->out.w && positions_flat(&j->img);
  return NRT_SUCCESS;
}

/* Channels-inner images build their columns from runs of a pixel's
 * channels, worth it when the runs and the product's width are not tiny
 * (depthwise convolutions keep the plane-wise columns). */
static int use_taps_outer(const conv_job *j) {
  return rt_image_channels_inner(&j->img) && j->cg >= 4 && j->kg >= 4;
}

static int64_t round_tile(int64_t nt) { return nt >= 16 ? nt / 16 * 16 : nt; }

/* Tiles of output positions sized to keep the columns in cache; small
 * images are batched whole into one tile (for a product wide enough to run
 * at speed), keeping at least 8 tasks when the batch allows. Depends on the
 * shape only. */
static void choose_tiles(conv_job *j) {
  int64_t nt = round_tile(TILE_BUDGET / (j->kk > 0 ? j->kk : 1));
  if (nt < 16) nt = 16;
  if (nt > 1024) nt = 1024;
  j->nt = j->ohw < nt ? j->ohw : nt;
  j->tiles = j->nt > 0 ? (j->ohw + j->nt - 1) / j->nt : 0;
  j->batch = 1;
  if (j->tiles == 1 && j->ohw > 0) {
    int64_t fit = nt / j->ohw, spread = j->img.n / 8;
    j->batch = fit < spread ? fit : spread;
    if (j->batch < 1) j->batch = 1;
  }
}

static int64_t image_blocks(const conv_job *j) { return (j->img.n + j->batch - 1) / j->batch; }

static int64_t grain_for(double work_per_task) {
  return work_per_task >= RT_VISION_GRAIN ? 1 : (int64_t)(RT_VISION_GRAIN / (work_per_task > 1 ? work_per_task : 1));
}

static nrt_status finish(const nrt_op *op, conv_job *j, void *a, void *b, void *c) {
  free(a);
  free(b);
  free(c);
  if (atomic_load(&j->out_of_memory))
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for column buffers", nrt_op_name(op->code));
  return NRT_SUCCESS;
}

static nrt_status oom(const nrt_op *op, void *a, void *b, void *c) {
  free(a);
  free(b);
  free(c);
  return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for column buffers", nrt_op_name(op->code));
}

/* ---- kernels ---------------------------------------------------------------- */

/* ---- depthwise ---------------------------------------------------------------- */

static int is_depthwise(const conv_job *j) { return j->cg == 1 && j->kg == 1; }

/* Runs a depthwise forward job whose j->wmat is set; frees wbuf, extra. */
static nrt_status depthwise_forward(const nrt_op *op, conv_job *j, const conv_kernels *k, void *wbuf,
                                    void *extra) {
  const rt_image *out = &j->out;
  void *wcols = NULL;
  if (rt_image_channels_inner(&j->img)) {
    wcols = malloc((size_t)(j->kk * out->c) * k->a_size);
    if (!wcols) return oom(op, wbuf, extra, NULL);
    size_t a = k->a_size;
    for (int64_t c = 0; c < out->c; c++)
      for (int64_t t = 0; t < j->kk; t++)
        memcpy((char *)wcols + (size_t)(t * out->c + c) * a, (const char *)j->wmat + (size_t)(c * j->w_rs + t) * a, a);
    j->wcols = wcols;
    rt_parallel_for(out->n * out->h, grain_for((double)(out->w * out->c * j->kk)), k->dw_rows, j);
  } else {
    rt_parallel_for(out->n * out->c, grain_for((double)(j->ohw * j->kk)), k->dw_planes, j);
  }
  free(wcols);
  return finish(op, j, wbuf, extra, NULL);
}

/* ---- kernels ---------------------------------------------------------------- */

/* Integer dtypes take the direct loops of conv_integer.c, as 3-d
 * convolutions of depth 1. Operands by role as prepare reads them. */
static nrt_status conv2d_integer(const nrt_op *op, conv_role role) {
  const char *name = nrt_op_name(op->code);
  if ((op->num_operands != 3 && op->num_operands != 4) || op->num_outputs != 1 || op->num_scalars < 7)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects 3 operands (4 with a bias), one output and 7 scalars",
                   name);
  for (int i = 0; i < 3; i++) {
    nrt_status s = rt_check_image(op, i, "every operand but the bias");
    if (s) return s;
  }
  int oi = role == FORWARD ? 0 : 1;
  rt_conv_int c = {.img = rt_conv_int_lift(&op->operands[1 - oi]),
                   .out = rt_conv_int_lift(&op->operands[oi]),
                   .w = rt_conv_int_lift(&op->operands[2]),
                   .bias = op->num_operands == 4 ? &op->operands[3] : NULL,
                   .s = {1, rt_scalar_int(op, 0), rt_scalar_int(op, 1)},
                   .p = {0, rt_scalar_int(op, 2), rt_scalar_int(op, 3)},
                   .dl = {1, rt_scalar_int(op, 4), rt_scalar_int(op, 5)},
                   .groups = rt_scalar_int(op, 6),
                   .input_grad = role == INPUT_GRAD};
  return rt_conv_integer(&c, name);
}

static rt_conv_shape shape_of(const conv_job *j) {
  rt_conv_shape s = {.img = j->img, .out = j->out, .kh = j->kh, .kw = j->kw, .sh = j->sh, .sw = j->sw,
                     .ph = j->ph, .pw = j->pw, .dh = j->dh, .dw = j->dw, .groups = j->groups};
  return s;
}

nrt_status rt_kernel_conv2d(const nrt_op *op) {
  if (op->num_operands > 0 && rt_conv_integer_dtype(op->operands[0].dtype)) return conv2d_integer(op, FORWARD);
  conv_job j;
  const conv_kernels *k;
  nrt_status s = prepare(op, FORWARD, &j, &k);
  if (s) return s;
  const nrt_tensor_view *w = &op->operands[2];
  if (j.out.n * j.out.c * j.ohw == 0) return NRT_SUCCESS;
  rt_conv_shape cs = shape_of(&j);
  if (use_amx_direct(w->dtype, &cs))
    return rt_conv_amx_forward(&cs, w, 0, j.bias, j.bias_stride, 0, nrt_op_name(op->code));
  if (use_blocked(k, &cs, w->dtype))
    return rt_conv_blocked_forward(&cs, w->dtype, w, 0, j.bias, j.bias_stride, 0, nrt_op_name(op->code));
  count_columns(k);
  void *wbuf = malloc((size_t)(j.out.c * j.kk) * k->a_size);
  if (!wbuf) return oom(op, NULL, NULL, NULL);
  j.taps_outer = use_taps_outer(&j);
  j.wmat = k->weight_matrix(w, j.kk, wbuf, &j.w_rs, j.taps_outer);
  if (is_depthwise(&j)) return depthwise_forward(op, &j, k, wbuf, NULL);
  choose_tiles(&j);
  rt_parallel_for(image_blocks(&j) * j.groups * j.tiles, grain_for(2.0 * (double)(j.kg * j.kk * j.nt * j.batch)),
                  k->forward_tiles, &j);
  return finish(op, &j, wbuf, NULL, NULL);
}

/* With stride 1, the input gradient is itself a forward convolution: of
 * the column side, by the weight flipped in space with its two channel dims
 * swapped, padded by d * (k - 1) - p (image position h receives column
 * position h - p' + i' * d through tap i' = k - 1 - i). It then runs as the
 * forward does, in cache-sized tiles, without a col2im pass. */
static int input_grad_as_forward(const conv_job *j) {
  return j->sh == 1 && j->sw == 1 && j->dh * (j->kh - 1) >= j->ph && j->dw * (j->kw - 1) >= j->pw;
}

static nrt_status input_grad_forward(const nrt_op *op, const conv_job *j, const conv_kernels *k) {
  const nrt_tensor_view *w = &op->operands[2];
  rt_conv_shape cs = shape_of(j);
  cs.img = j->out;
  cs.out = j->img;
  cs.ph = j->dh * (j->kh - 1) - j->ph;
  cs.pw = j->dw * (j->kw - 1) - j->pw;
  if (use_blocked(k, &cs, w->dtype))
    return rt_conv_blocked_forward(&cs, w->dtype, w, 1, j->bias, j->bias_stride, 0, nrt_op_name(op->code));
  count_columns(k);
  void *wbuf = malloc((size_t)(j->out.c * j->kk) * k->a_size);
  void *flipped = malloc((size_t)(j->out.c * j->kk) * k->a_size);
  if (!wbuf || !flipped) return oom(op, wbuf, flipped, NULL);
  int64_t rs;
  const char *wm = k->weight_matrix(w, j->kk, wbuf, &rs, 0);
  conv_job f = *j;
  atomic_init(&f.out_of_memory, 0);
  f.img = j->out;
  f.out = j->img;
  f.cg = j->kg;
  f.kg = j->cg;
  f.kk = f.cg * j->kh * j->kw;
  f.ohw = f.out.h * f.out.w;
  f.ph = j->dh * (j->kh - 1) - j->ph;
  f.pw = j->dw * (j->kw - 1) - j->pw;
  f.direct_out = k->t_is_col && positions_flat(&f.out);
  f.taps_outer = use_taps_outer(&f);
  f.pointwise = k->t_is_col && j->kh == 1 && j->kw == 1 && f.ph == 0 && f.pw == 0 && f.img.h == f.out.h &&
                f.img.w == f.out.w && positions_flat(&f.img);
  size_t a = k->col_size; /* weight matrix elements */
  for (int64_t g = 0; g < j->groups; g++)
    for (int64_t kk = 0; kk < j->kg; kk++)
      for (int64_t c = 0; c < j->cg; c++)
        for (int64_t i = 0; i < j->kh; i++)
          for (int64_t jj = 0; jj < j->kw; jj++)
            memcpy((char *)flipped + (size_t)((g * j->cg + c) * f.kk +
                                              (f.taps_outer ? (i * j->kw + jj) * f.cg + kk : (kk * j->kh + i) * j->kw + jj)) * a,
                   wm + (size_t)((g * j->kg + kk) * rs + (c * j->kh + j->kh - 1 - i) * j->kw + j->kw - 1 - jj) * a,
                   a);
  f.wmat = flipped;
  f.w_rs = f.kk;
  if (is_depthwise(&f)) return depthwise_forward(op, &f, k, wbuf, flipped);
  choose_tiles(&f);
  rt_parallel_for(image_blocks(&f) * f.groups * f.tiles, grain_for(2.0 * (double)(f.kg * f.kk * f.nt * f.batch)),
                  k->forward_tiles, &f);
  return finish(op, &f, wbuf, flipped, NULL);
}

/* A strided input gradient (dilation 1) splits by phase: the image rows
 * ih = fh + sh * u (fh < sh) receive grad_output only through the taps i =
 * ti + sh * m with ti = (fh + ph) mod sh, at row bh + u - m, bh = (fh + ph -
 * ti) / sh; columns likewise. Each phase is then a stride-1 forward over
 * grad_output with that sub-kernel (a strided view of the weight) flipped,
 * padding km - 1 - b (negative padding is only an offset), writing a
 * strided view of the image; a phase without taps gets the bias (or 0). */
/* Phase (fh, fw) of the strided input gradient: the strided view o of the
 * image it writes, the sub-kernel view sub of w and the stride-1 forward
 * cs over grad_output; 0 when the phase meets no tap. */
static int input_grad_phase(const conv_job *j, const nrt_tensor_view *w, int64_t fh, int64_t fw, rt_image *o,
                            nrt_tensor_view *sub, rt_conv_shape *cs) {
  size_t es = nrt_dtype_size(w->dtype);
  *o = j->img;
  o->h = (j->img.h - fh + j->sh - 1) / j->sh;
  o->w = (j->img.w - fw + j->sw - 1) / j->sw;
  o->sh *= j->sh;
  o->sw *= j->sw;
  o->data += (size_t)(fh * j->img.sh + fw * j->img.sw) * es;
  int64_t ti = (fh + j->ph) % j->sh, tj = (fw + j->pw) % j->sw;
  int64_t kmh = ti < j->kh ? (j->kh - ti + j->sh - 1) / j->sh : 0;
  int64_t kmw = tj < j->kw ? (j->kw - tj + j->sw - 1) / j->sw : 0;
  if (kmh == 0 || kmw == 0) return 0;
  *sub = *w;
  sub->data = (char *)w->data + (size_t)(ti * w->strides[2] + tj * w->strides[3]) * es;
  sub->shape[2] = kmh;
  sub->shape[3] = kmw;
  sub->strides[2] *= j->sh;
  sub->strides[3] *= j->sw;
  rt_conv_shape c = {.img = j->out, .out = *o, .kh = kmh, .kw = kmw, .sh = 1, .sw = 1,
                     .ph = kmh - 1 - (fh + j->ph - ti) / j->sh, .pw = kmw - 1 - (fw + j->pw - tj) / j->sw,
                     .dh = 1, .dw = 1, .groups = j->groups};
  *cs = c;
  return 1;
}

/* 1 when every phase of a strided bfloat16 input gradient (dilation 1)
 * with taps can run on the direct AMX forward (conv_amx.h). */
static int input_grad_phases_amx(const conv_job *j, const nrt_tensor_view *w) {
  if (w->dtype != NRT_BFLOAT16 || j->dh != 1 || j->dw != 1 || (j->sh == 1 && j->sw == 1)) return 0;
  for (int64_t fh = 0; fh < j->sh && fh < j->img.h; fh++)
    for (int64_t fw = 0; fw < j->sw && fw < j->img.w; fw++) {
      rt_image o;
      nrt_tensor_view sub;
      rt_conv_shape cs;
      if (input_grad_phase(j, w, fh, fw, &o, &sub, &cs) && !rt_conv_amx_usable(&cs)) return 0;
    }
  return 1;
}

static nrt_status input_grad_phases(const nrt_op *op, const conv_job *j, int amx) {
  const nrt_tensor_view *w = &op->operands[2];
  const char *name = nrt_op_name(op->code);
  for (int64_t fh = 0; fh < j->sh && fh < j->img.h; fh++)
    for (int64_t fw = 0; fw < j->sw && fw < j->img.w; fw++) {
      rt_image o;
      nrt_tensor_view sub;
      rt_conv_shape cs;
      if (!input_grad_phase(j, w, fh, fw, &o, &sub, &cs)) {
        for (int64_t n = 0; n < o.n; n++)
          for (int64_t c = 0; c < o.c; c++) {
            float v = 0;
            if (j->bias)
              v = w->dtype == NRT_BFLOAT16 ? rt_ld_bf16(((const uint16_t *)j->bias)[c * j->bias_stride])
                                           : ((const float *)j->bias)[c * j->bias_stride];
            for (int64_t h = 0; h < o.h; h++)
              for (int64_t x = 0; x < o.w; x++) {
                int64_t at = n * o.sn + c * o.sc + h * o.sh + x * o.sw;
                if (w->dtype == NRT_BFLOAT16)
                  ((uint16_t *)o.data)[at] = rt_st_bf16(v);
                else
                  ((float *)o.data)[at] = v;
              }
          }
        continue;
      }
      nrt_status s = amx ? rt_conv_amx_forward(&cs, &sub, 1, j->bias, j->bias_stride, 0, name)
                         : rt_conv_blocked_forward(&cs, w->dtype, &sub, 1, j->bias, j->bias_stride, 0, name);
      if (s) return s;
    }
  return NRT_SUCCESS;
}

nrt_status rt_kernel_conv2d_input_grad(const nrt_op *op) {
  if (op->num_operands > 0 && rt_conv_integer_dtype(op->operands[0].dtype)) return conv2d_integer(op, INPUT_GRAD);
  conv_job j;
  const conv_kernels *k;
  nrt_status s = prepare(op, INPUT_GRAD, &j, &k);
  if (s) return s;
  const nrt_tensor_view *w = &op->operands[2];
  if (j.img.n * j.img.c * j.img.h * j.img.w == 0) return NRT_SUCCESS;
  if (input_grad_as_forward(&j)) {
    rt_conv_shape cs = shape_of(&j);
    cs.img = j.out;
    cs.out = j.img;
    cs.ph = j.dh * (j.kh - 1) - j.ph;
    cs.pw = j.dw * (j.kw - 1) - j.pw;
    if (use_amx_direct(w->dtype, &cs))
      return rt_conv_amx_forward(&cs, w, 1, j.bias, j.bias_stride, 0, nrt_op_name(op->code));
  }
  /* A strided one splits by phase onto the direct AMX forward. */
  if (input_grad_phases_amx(&j, w)) {
    rt_metric_add(NRT_METRIC_CONV_AMX_DIRECT, 1);
    return input_grad_phases(op, &j, 1);
  }
  if (j.dh == 1 && j.dw == 1) {
    rt_conv_shape cs = shape_of(&j);
    cs.img = j.out;
    cs.out = j.img;
    if (use_blocked(k, &cs, w->dtype)) return input_grad_phases(op, &j, 0);
  }
  if (input_grad_as_forward(&j)) return input_grad_forward(op, &j, k);
  count_columns(k);
  void *wbuf = malloc((size_t)(j.out.c * j.kk) * k->a_size);
  int64_t per_image = j.groups * j.kk * j.ohw;
  j.chunk = per_image > 0 ? CHUNK_BUDGET / per_image : j.img.n;
  if (j.chunk < 1) j.chunk = 1;
  if (j.chunk > j.img.n) j.chunk = j.img.n;
  j.col = malloc((size_t)(j.chunk * per_image + 1) * k->a_size);
  if (!wbuf || !j.col) return oom(op, wbuf, j.col, NULL);
  j.wmat = k->weight_matrix(w, j.kk, wbuf, &j.w_rs, 0);
  choose_tiles(&j);
  int64_t total = j.img.n;
  for (j.n0 = 0; j.n0 < total && !atomic_load(&j.out_of_memory); j.n0 += j.chunk) {
    int64_t chunk = total - j.n0 < j.chunk ? total - j.n0 : j.chunk, saved = j.chunk;
    j.chunk = chunk;
    if (j.ohw > 0)
      rt_parallel_for(chunk * j.groups * j.tiles, grain_for(2.0 * (double)(j.kg * j.kk * j.nt)), k->grad_cols, &j);
    rt_parallel_for(chunk * j.img.c, grain_for((double)(j.kh * j.kw * j.ohw + j.img.h * j.img.w)),
                    k->grad_planes, &j);
    j.chunk = saved;
  }
  return finish(op, &j, wbuf, j.col, NULL);
}

nrt_status rt_kernel_conv2d_weight_grad(const nrt_op *op) {
  conv_job j;
  const conv_kernels *k;
  nrt_status s = prepare(op, WEIGHT_GRAD, &j, &k);
  if (s) return s;
  const nrt_tensor_view *w = &op->operands[0];
  if (j.out.c * j.kk == 0) return NRT_SUCCESS;
  rt_conv_shape cs = shape_of(&j);
  /* A 1x1 weight gradient reads the image in place as its columns: faster
   * than the direct path's packing of the image into position pairs. */
  if (j.kh * j.kw > 1 && use_amx_direct(w->dtype, &cs))
    return rt_conv_amx_weight_grad(&cs, w, 0, nrt_op_name(op->code));
  if (use_blocked(k, &cs, w->dtype)) return rt_conv_blocked_weight_grad(&cs, w->dtype, w, 0, nrt_op_name(op->code));
  count_columns(k);
  if (is_depthwise(&j)) {
    j.wgrad = malloc((size_t)(j.out.c * j.kk) * k->a_size);
    if (!j.wgrad) return oom(op, NULL, NULL, NULL);
    if (rt_image_channels_inner(&j.img))
      rt_parallel_for((j.out.c + DW_CBLOCK - 1) / DW_CBLOCK, 1, k->dw_wgrad_rows, &j);
    else
      rt_parallel_for(j.out.c, grain_for((double)(j.img.n * j.ohw * j.kk)), k->dw_wgrad, &j);
    k->store_weight(j.wgrad, w, j.kk, 0);
    return finish(op, &j, j.wgrad, NULL, NULL);
  }
  choose_tiles(&j);
  int64_t items = image_blocks(&j) * j.groups * j.tiles, size = j.out.c * j.kk;
  j.parts = items < PARTS_MAX ? items : PARTS_MAX;
  if (j.parts * size > PARTS_BUDGET) j.parts = PARTS_BUDGET / size;
  if (j.parts >= PARTS_MIN) {
    j.wgrad = calloc((size_t)(j.parts * size), k->a_size);
    if (!j.wgrad) return oom(op, NULL, NULL, NULL);
    j.taps_outer = use_taps_outer(&j);
    rt_parallel_for(j.parts, 1, k->wgrad_tiles, &j);
    k->sum_parts(j.wgrad, j.parts, size);
    if (!atomic_load(&j.out_of_memory)) k->store_weight(j.wgrad, w, j.kk, j.taps_outer);
    return finish(op, &j, j.wgrad, NULL, NULL);
  }
  j.wgrad = calloc((size_t)size, k->a_size);
  int64_t per_image = (j.pointwise ? 0 : j.groups * j.kk * j.ohw) + (j.direct_out ? 0 : j.out.c * j.ohw);
  j.chunk = per_image > 0 ? CHUNK_BUDGET / per_image : j.img.n;
  if (j.chunk < 1) j.chunk = 1;
  if (j.chunk > j.img.n) j.chunk = j.img.n;
  if (j.chunk < 1) j.chunk = 1;
  j.col = malloc((size_t)(j.chunk * per_image + 1) * k->a_size);
  if (!j.wgrad || !j.col) return oom(op, j.wgrad, j.col, NULL);
  j.omat = (char *)j.col + (size_t)(j.pointwise ? 0 : j.chunk * j.groups * j.kk * j.ohw) * k->col_size;
  j.mb = j.kg < 96 ? j.kg : 96;
  j.nb = j.kk < 512 ? j.kk : 512;
  int64_t blocks = j.groups * ((j.kg + j.mb - 1) / j.mb) * ((j.kk + j.nb - 1) / j.nb);
  int64_t total = j.img.n;
  for (j.n0 = 0; j.n0 < total && j.ohw > 0 && !atomic_load(&j.out_of_memory); j.n0 += j.chunk) {
    int64_t chunk = total - j.n0 < j.chunk ? total - j.n0 : j.chunk, saved = j.chunk;
    j.chunk = chunk;
    if (!j.pointwise || !j.direct_out)
      rt_parallel_for(chunk * j.groups, grain_for((double)(j.kk + j.kg) * (double)j.ohw), k->wgrad_cols, &j);
    rt_parallel_for(blocks, grain_for(2.0 * (double)(j.mb * j.nb * j.ohw * chunk)), k->wgrad_blocks, &j);
    j.started = 1;
    j.chunk = saved;
  }
  if (!atomic_load(&j.out_of_memory)) k->store_weight(j.wgrad, w, j.kk, 0);
  return finish(op, &j, j.wgrad, j.col, NULL);
}
