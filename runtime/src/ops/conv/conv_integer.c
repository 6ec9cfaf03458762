/* Convolution of integers (see conv_integer.h), one instantiation of
 * conv_integer_impl.h per dtype: the forward and the input gradient by
 * columns and register blocks when a group has several output channels,
 * by direct loops over planes otherwise (depthwise). The direct loops are
 * the columns' reference twin (rt_conv_int.reference);
 * runtime/tests/test_conv_integer.c checks both against the definition. */
#include "ops/conv/conv_integer.h"

#include <stdatomic.h>
#include <stdlib.h>
#include "ops/engine/elementwise.h"
#include "ops/engine/thread_pool.h"
#include "ops/vision/vision_common.h"

/* A [N, C, D, H, W] operand. */
typedef struct ci_vol {
  char *data;
  int64_t n, c, d, h, w;
  int64_t sn, sc, sd, sh, sw;
} ci_vol;

typedef struct ci_job {
  ci_vol img, out;
  nrt_tensor_view w;
  const char *bias;
  int64_t bias_stride;
  int64_t k[3], s[3], p[3], dl[3];
  int64_t cg, kg; /* image and output channels per group */
  int64_t groups, opos, tiles; /* columns: output positions, tiles of CI_NT per image */
  int64_t cb;                  /* columns' input gradient: image channels per task */
  void *wmat;                  /* columns: the weight as an ACC matrix [K][taps] */
  atomic_int failed;
} ci_job;

/* Output positions [d0, d1) x [h0, h1) x [w0, w1) that a tap reads inside
 * the image. */
typedef struct ci_range {
  int64_t d0, d1, h0, h1, w0, w1;
} ci_range;

static ci_vol vol_of(const nrt_tensor_view *v) {
  ci_vol x = {.data = v->data, .n = v->shape[0], .c = v->shape[1], .d = v->shape[2], .h = v->shape[3],
              .w = v->shape[4], .sn = v->strides[0], .sc = v->strides[1], .sd = v->strides[2],
              .sh = v->strides[3], .sw = v->strides[4]};
  return x;
}

static inline int64_t ci_weight_at(const ci_job *j, int64_t k, int64_t c, int64_t a, int64_t b, int64_t e) {
  const int64_t *st = j->w.strides;
  return k * st[0] + c * st[1] + a * st[2] + b * st[3] + e * st[4];
}

/* Positions u in [0, count) with 0 <= start + u * step < size: [*u0, *u1). */
static inline void ci_valid(int64_t start, int64_t step, int64_t size, int64_t count, int64_t *u0, int64_t *u1) {
  int64_t lo = start >= 0 ? 0 : (-start + step - 1) / step;
  int64_t hi = start >= size ? 0 : (size - start + step - 1) / step;
  *u0 = lo < count ? lo : count;
  *u1 = hi < count ? hi : count;
  if (*u1 < *u0) *u1 = *u0;
}

/* The output positions tap (a, b, e) reaches in the image; 0 when none. */
static inline int ci_tap_range(const ci_job *j, int64_t a, int64_t b, int64_t e, ci_range *r) {
  ci_valid(a * j->dl[0] - j->p[0], j->s[0], j->img.d, j->out.d, &r->d0, &r->d1);
  ci_valid(b * j->dl[1] - j->p[1], j->s[1], j->img.h, j->out.h, &r->h0, &r->h1);
  ci_valid(e * j->dl[2] - j->p[2], j->s[2], j->img.w, j->out.w, &r->w0, &r->w1);
  return r->d1 > r->d0 && r->h1 > r->h0 && r->w1 > r->w0;
}

/* Helpers of the RT_SIMD tasks, inlined so that each ISA's copy of a task
 * compiles them for its own level. */
#define CI_INLINE static inline __attribute__((always_inline))

/* d[u * ds] = s[u] + bias (sums of type A) for u < n, truncated to T.
 * Through restrict locals: a store of an 8-bit T may alias anything, and
 * would otherwise reload the strides and bounds at every element. */
#define CI_STORE_RUN(d, ds, s, bias, n, A)                                   \
  do {                                                                       \
    T *restrict d_ = (d);                                                    \
    const A *restrict s_ = (s);                                              \
    A b_ = (bias);                                                           \
    int64_t ds_ = (ds), n_ = (n);                                            \
    if (ds_ == 1)                                                            \
      for (int64_t u_ = 0; u_ < n_; u_++) d_[u_] = (T)(A)(s_[u_] + b_);      \
    else                                                                     \
      for (int64_t u_ = 0; u_ < n_; u_++) d_[u_ * ds_] = (T)(A)(s_[u_] + b_); \
  } while (0)

/* Output positions per column tile (and per register block). */
#define CI_NT 64

/* 8- and 16-bit dtypes sum in 16 bits (their bits are those of any wider
 * wrapping sum), products computed in unsigned int (no promotion to a
 * signed int that could overflow). */
#define MUL16(a, b) ((uint16_t)((uint32_t)(a) * (uint32_t)(b)))
#define MUL_PLAIN(a, b) ((a) * (b))

#define T uint8_t
#define ACC uint16_t
#define MUL MUL16
#define SUFFIX _u8
#define DACC uint32_t
#define KB 4
#define WIDEN(x) ((ACC)(x)) /* conversion to unsigned: sign-extends modulo 2^bits */
#include "ops/conv/conv_integer_impl.h"
#define T int8_t
#define ACC uint16_t
#define MUL MUL16
#define SUFFIX _i8
#define DACC uint32_t
#define KB 4
#define WIDEN(x) ((ACC)(x))
#include "ops/conv/conv_integer_impl.h"
#define T int16_t
#define ACC uint16_t
#define MUL MUL16
#define SUFFIX _i16
#define DACC uint32_t
#define KB 4
#define WIDEN(x) ((ACC)(x))
#include "ops/conv/conv_integer_impl.h"
#define T int32_t
#define ACC uint32_t
#define MUL MUL_PLAIN
#define SUFFIX _i32
#define DACC uint32_t
#define KB 4
#define WIDEN(x) ((ACC)(x))
#include "ops/conv/conv_integer_impl.h"
#define T int64_t
#define ACC uint64_t
#define MUL MUL_PLAIN
#define SUFFIX _i64
#define DACC uint64_t
#define KB 2
#define WIDEN(x) ((ACC)(x))
#include "ops/conv/conv_integer_impl.h"

typedef struct ci_kernels {
  nrt_dtype dtype;
  rt_range_fn forward, input_grad, forward_cols, input_grad_cols;
  void (*weight_matrix)(const ci_job *, void *), (*weight_transposed)(const ci_job *, void *);
  size_t acc_size;
} ci_kernels;

#define CI_KERNELS(dtype, s, acc) \
  {dtype,                 ci_forward_##s,        ci_input_grad_##s,          ci_forward_cols_##s, \
   ci_input_grad_cols_##s, ci_weight_matrix_##s,  ci_weight_transposed_##s,   sizeof(acc)}
static const ci_kernels ci_table[] = {
    CI_KERNELS(NRT_UINT8, _u8, uint16_t),  CI_KERNELS(NRT_INT8, _i8, uint16_t),
    CI_KERNELS(NRT_INT16, _i16, uint16_t), CI_KERNELS(NRT_INT32, _i32, uint32_t),
    CI_KERNELS(NRT_INT64, _i64, uint64_t),
};

static const ci_kernels *kernels_for(nrt_dtype dtype) {
  for (size_t i = 0; i < sizeof ci_table / sizeof ci_table[0]; i++)
    if (ci_table[i].dtype == dtype) return &ci_table[i];
  return NULL;
}

int rt_conv_integer_dtype(nrt_dtype dtype) { return kernels_for(dtype) != NULL; }

nrt_tensor_view rt_conv_int_lift(const nrt_tensor_view *v) {
  nrt_tensor_view x = *v;
  x.ndim = 5;
  x.shape[0] = v->shape[0];
  x.shape[1] = v->shape[1];
  x.shape[2] = 1;
  x.strides[2] = 0;
  for (int d = 2; d < 4; d++) {
    x.shape[d + 1] = v->shape[d];
    x.strides[d + 1] = v->strides[d];
  }
  return x;
}

static nrt_status check(const rt_conv_int *c, const char *name, ci_job *j) {
  const nrt_tensor_view *views[3] = {&c->img, &c->out, &c->w};
  for (int i = 0; i < 3; i++) {
    if (views[i]->ndim != 5)
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: operands must be 5-d [N, C, D, H, W] views, got %d dims",
                     name, views[i]->ndim);
    if (views[i]->dtype != c->img.dtype || (c->bias && c->bias->dtype != c->img.dtype))
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: operands must share one dtype", name);
  }
  if (!kernels_for(c->img.dtype))
    return rt_fail(NRT_ERROR_UNSUPPORTED, "%s: dtype %s is not supported", name, nrt_dtype_name(c->img.dtype));
  j->img = vol_of(&c->img);
  j->out = vol_of(&c->out);
  j->w = c->w;
  for (int d = 0; d < 3; d++) {
    j->k[d] = c->w.shape[2 + d];
    j->s[d] = c->s[d];
    j->p[d] = c->p[d];
    j->dl[d] = c->dl[d];
    if (j->s[d] <= 0 || j->dl[d] <= 0 || j->p[d] < 0)
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                     "%s: stride and dilation must be positive and padding non-negative", name);
  }
  const nrt_tensor_view *w = &c->w;
  if (c->groups <= 0 || j->img.n != j->out.n || j->out.c != w->shape[0] || j->out.c % c->groups != 0 ||
      j->img.c != w->shape[1] * c->groups)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "%s: weight [%lld, %lld, ...] with %lld groups does not fit %lld image and %lld output channels",
                   name, (long long)w->shape[0], (long long)w->shape[1], (long long)c->groups,
                   (long long)j->img.c, (long long)j->out.c);
  int64_t in[3] = {j->img.d, j->img.h, j->img.w}, on[3] = {j->out.d, j->out.h, j->out.w};
  for (int d = 0; d < 3; d++) {
    int64_t span = in[d] + 2 * j->p[d] - j->dl[d] * (j->k[d] - 1) - 1;
    int64_t most = span < 0 ? 0 : span / j->s[d] + 1;
    if (on[d] > most)
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: %lld output positions along dim %d, at most %lld fit", name,
                     (long long)on[d], 2 + d, (long long)most);
  }
  if (c->bias) {
    int64_t want = c->input_grad ? j->img.c : j->out.c;
    if (c->bias->ndim != 1 || c->bias->shape[0] != want)
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: bias must be 1-d of size %lld", name, (long long)want);
    j->bias = c->bias->data;
    j->bias_stride = c->bias->strides[0];
  }
  j->cg = w->shape[1];
  j->kg = j->out.c / c->groups;
  j->groups = c->groups;
  j->opos = j->out.d * j->out.h * j->out.w;
  j->tiles = (j->opos + CI_NT - 1) / CI_NT;
  return NRT_SUCCESS;
}

nrt_status rt_conv_integer(const rt_conv_int *c, const char *name) {
  ci_job j = {0};
  atomic_init(&j.failed, 0);
  nrt_status s = check(c, name, &j);
  if (s) return s;
  const ci_kernels *k = kernels_for(c->img.dtype);
  const ci_vol *dst = c->input_grad ? &j.img : &j.out, *src = c->input_grad ? &j.out : &j.img;
  int64_t planes = dst->n * dst->c, plane = dst->d * dst->h * dst->w;
  if (planes * plane == 0) return NRT_SUCCESS;
  int64_t taps = j.k[0] * j.k[1] * j.k[2];
  if (!c->input_grad && !c->reference && j.kg >= 2) {
    /* columns: a tile's columns serve every output channel of its group */
    j.wmat = malloc((size_t)(j.out.c * j.cg * taps + 1) * k->acc_size);
    if (!j.wmat) return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for the weight", name);
    k->weight_matrix(&j, j.wmat);
    int64_t tasks = j.out.n * j.groups * j.tiles;
    double work = (double)CI_NT * (double)(j.cg * taps + 1) * (double)(j.kg + 1);
    rt_parallel_for(tasks, work >= RT_VISION_GRAIN ? 1 : (int64_t)(RT_VISION_GRAIN / work) + 1, k->forward_cols, &j);
    free(j.wmat);
  } else if (c->input_grad && !c->reference && j.kg >= 2) {
    /* tasks of enough channels for about CI_NT (channel, tap) rows each */
    j.cb = (CI_NT + taps - 1) / taps;
    if (j.cb > j.cg) j.cb = j.cg;
    j.wmat = malloc((size_t)(j.out.c * j.cg * taps + 1) * k->acc_size);
    if (!j.wmat) return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for the weight", name);
    k->weight_transposed(&j, j.wmat);
    int64_t tasks = j.img.n * j.groups * ((j.cg + j.cb - 1) / j.cb);
    if (j.cg > 0) rt_parallel_for(tasks, 1, k->input_grad_cols, &j);
    free(j.wmat);
  } else {
    /* multiply-adds per task: every position of the source plane, once per
     * tap and channel of the group */
    double work = (double)(src->d * src->h * src->w) * (double)taps * (double)(c->input_grad ? j.kg : j.cg) +
                  (double)plane;
    int64_t grain = work >= RT_VISION_GRAIN ? 1 : (int64_t)(RT_VISION_GRAIN / (work > 1 ? work : 1));
    rt_parallel_for(planes, grain, c->input_grad ? k->input_grad : k->forward, &j);
  }
  if (atomic_load(&j.failed))
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for a plane's sums", name);
  return NRT_SUCCESS;
}
