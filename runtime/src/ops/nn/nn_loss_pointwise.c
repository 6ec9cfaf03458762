/* Elementwise losses and their gradients (MSE_LOSS ...
 * BINARY_CROSS_ENTROPY_BACKWARD in neuronrt/ops/nn.h), on the pointwise
 * engine: float32 and float64 loops, float16/bfloat16 computed in float32.
 * Formulas and branch points follow PyTorch's CPU kernels so that results
 * agree to rounding; a reduction is the caller's (the sum or mean ops).
 *
 * Gradient ops take (grad_in, grad_out, x, y): in EXPR a is grad_out, b the
 * input x and c the target y; scale (the last scalar) folds in 2 for MSE and
 * 1 / count for a mean reduction.
 */
#include <tgmath.h>
#include "ops/pointwise/pointwise.h"

#define S(T, k) ((T)sc->f[k])
#define FLOAT_TABLE(NAME) {[NRT_FLOAT32] = NAME##_f32, [NRT_FLOAT64] = NAME##_f64}

#define DEFINE_LOSS(NAME, EXPR_OF_T)                                    \
  RT_BINARY_LOOP(NAME##_f32, float, float, EXPR_OF_T(float))            \
  RT_BINARY_LOOP(NAME##_f64, double, double, EXPR_OF_T(double))         \
  nrt_status rt_kernel_##NAME(const nrt_op *op) {                       \
    static const rt_loop_table loops = FLOAT_TABLE(NAME);               \
    return rt_run_pointwise(op, loops, -1);                             \
  }

#define DEFINE_LOSS_BACKWARD(NAME, EXPR_OF_T)                           \
  RT_TERNARY_LOOP(NAME##_f32, float, float, float, float, EXPR_OF_T(float)) \
  RT_TERNARY_LOOP(NAME##_f64, double, double, double, double, EXPR_OF_T(double)) \
  nrt_status rt_kernel_##NAME(const nrt_op *op) {                       \
    static const rt_loop_table loops = FLOAT_TABLE(NAME);               \
    return rt_run_pointwise(op, loops, -1);                             \
  }

/* ---- forward (out, x, y) -------------------------------------------------- */

#define MSE(T) ((a - b) * (a - b))
DEFINE_LOSS(mse_loss, MSE)

/* scalars [beta] */
#define SMOOTH_L1(T) \
  (fabs(a - b) < S(T, 0) ? (T)0.5 * (a - b) * (a - b) / S(T, 0) : fabs(a - b) - (T)0.5 * S(T, 0))
DEFINE_LOSS(smooth_l1_loss, SMOOTH_L1)

/* scalars [delta] */
#define HUBER(T) \
  (fabs(a - b) < S(T, 0) ? (T)0.5 * (a - b) * (a - b) : S(T, 0) * (fabs(a - b) - (T)0.5 * S(T, 0)))
DEFINE_LOSS(huber_loss, HUBER)

/* ---- gradients (grad_in, grad_out, x, y) ----------------------------------- */

/* scalars [scale] */
#define MSE_GRAD(T) (S(T, 0) * (b - c) * a)
DEFINE_LOSS_BACKWARD(mse_loss_backward, MSE_GRAD)

/* scalars [beta, scale]; beta 0 is the L1 gradient, sign(x - y) */
#define SMOOTH_L1_GRAD(T)                                                      \
  (S(T, 0) <= 0 ? S(T, 1) * a * (T)((b - c > 0) - (b - c < 0))                 \
   : b - c <= -S(T, 0) ? -S(T, 1) * a                                          \
   : b - c >= S(T, 0) ? S(T, 1) * a                                            \
                      : S(T, 1) * (b - c) * a / S(T, 0))
DEFINE_LOSS_BACKWARD(smooth_l1_loss_backward, SMOOTH_L1_GRAD)

/* scalars [delta, scale] */
#define HUBER_GRAD(T)                                                          \
  (b - c <= -S(T, 0) ? -S(T, 1) * a * S(T, 0)                                  \
   : b - c >= S(T, 0) ? S(T, 1) * a * S(T, 0)                                  \
                      : S(T, 1) * (b - c) * a)
DEFINE_LOSS_BACKWARD(huber_loss_backward, HUBER_GRAD)

/* ---- helpers of loss formulas ------------------------------------------------ */

#define XLOGY(T) (b != b ? (T)NAN : a == 0 ? (T)0 : a * log(b))
DEFINE_LOSS(xlogy, XLOGY)

/* scalars [eps]; a negative eps means no clamp (PyTorch passes -1 for None) */
#define LOGIT_OF(T, z) log((z) / ((T)1 - (z)))
#define LOGIT(T)                                                                           \
  (S(T, 0) < 0 ? LOGIT_OF(T, x)                                                            \
               : LOGIT_OF(T, x < S(T, 0) ? S(T, 0) : x > (T)1 - S(T, 0) ? (T)1 - S(T, 0) : x))
RT_UNARY_LOOP(logit_f32, float, float, LOGIT(float))
RT_UNARY_LOOP(logit_f64, double, double, LOGIT(double))
/* float16 and bfloat16 round every step to the type, as PyTorch's CPU
 * kernel computes them: the clamp bounds, 1 - z, the quotient and the log. */
#define DEFINE_LOGIT16(NAME, TO_F, FROM_F)                                            \
  static inline __attribute__((always_inline)) uint16_t NAME(uint16_t x, double eps) {  \
    float lo = TO_F(FROM_F((float)eps)), hi = TO_F(FROM_F(1.0f - lo));                  \
    float v = TO_F(x);                                                                  \
    float z = eps < 0 ? v : v < lo ? lo : v > hi ? hi : v;                              \
    float q = TO_F(FROM_F(z / TO_F(FROM_F(1.0f - z))));                                 \
    return FROM_F(logf(q));                                                             \
  }
DEFINE_LOGIT16(logit_of_bf16, rt_bfloat16_to_float, rt_bfloat16_from_float)
DEFINE_LOGIT16(logit_of_f16, rt_half_to_float, rt_half_from_float)
RT_UNARY_LOOP(logit_bf16, uint16_t, uint16_t, logit_of_bf16(x, sc->f[0]))
RT_UNARY_LOOP(logit_f16, uint16_t, uint16_t, logit_of_f16(x, sc->f[0]))
nrt_status rt_kernel_logit(const nrt_op *op) {
  static const rt_loop_table loops = FLOAT_TABLE(logit);
  nrt_dtype t = op->compute_dtype;
  if (!rt_is_16bit_float(t)) return rt_run_pointwise(op, loops, -1);
  if (op->num_operands != 2) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "logit: expects operands (out, x)");
  const nrt_dtype want[2] = {t, t}; /* the loop reads and writes the 16-bit storage */
  return rt_run_pointwise_as(op, t == NRT_BFLOAT16 ? logit_bf16 : logit_f16, want);
}

/* (grad_in, grad_out, x): a is grad_out, b is x */
#define LOGIT_GRAD(T)                                                      \
  (S(T, 0) < 0 ? (b < 0 || b > 1 ? (T)NAN : a / (b * ((T)1 - b)))          \
               : (b < S(T, 0) || b > (T)1 - S(T, 0) ? (T)0 : a / (b * ((T)1 - b))))
DEFINE_LOSS(logit_backward, LOGIT_GRAD)

/* ---- binary cross entropy --------------------------------------------------- */

/* The loops have four inputs or outputs beyond the generators' reach, and a
 * data check: x (and y) outside [0, 1] raises the loop's fault. */
#define DEFINE_BCE_LOOPS(T, SUF)                                                                  \
  RT_SIMD_VOID(bce_##SUF, (char **data, const int64_t *st, int64_t n, void *ctx),                 \
                          (data, st, n, ctx)) {                                                   \
    int fault = 0;                                                                                \
    for (int64_t i = 0; i < n; i++) {                                                             \
      T x = *(const T *)(const void *)(data[1] + i * st[1]);                                      \
      T y = *(const T *)(const void *)(data[2] + i * st[2]);                                      \
      T w = *(const T *)(const void *)(data[3] + i * st[3]);                                      \
      fault |= !(x >= 0 && x <= 1) | !(y >= 0 && y <= 1);                                         \
      T lx = fmax(log(x), (T)-100), l1x = fmax(log1p(-x), (T)-100);                               \
      *(T *)(void *)(data[0] + i * st[0]) = w * ((y - 1) * l1x - y * lx);                         \
    }                                                                                             \
    if (fault) rt_loop_raise(ctx);                                                                \
  }                                                                                               \
  /* (grad_in, grad_out, x, y, weight), scalars [scale] */                                        \
  RT_SIMD_VOID(bce_grad_##SUF, (char **data, const int64_t *st, int64_t n, void *ctx),            \
                               (data, st, n, ctx)) {                                              \
    const T scale = (T)((const rt_scalars *)ctx)->f[0];                                           \
    for (int64_t i = 0; i < n; i++) {                                                             \
      T g = *(const T *)(const void *)(data[1] + i * st[1]);                                      \
      T x = *(const T *)(const void *)(data[2] + i * st[2]);                                      \
      T y = *(const T *)(const void *)(data[3] + i * st[3]);                                      \
      T w = *(const T *)(const void *)(data[4] + i * st[4]);                                      \
      T d = fmax((1 - x) * x, (T)1e-12);                                                          \
      *(T *)(void *)(data[0] + i * st[0]) = g * (x - y) / d * w * scale;                          \
    }                                                                                             \
  }

DEFINE_BCE_LOOPS(float, f32)
DEFINE_BCE_LOOPS(double, f64)

static nrt_status run_bce(const nrt_op *op, rt_inner_loop f32, rt_inner_loop f64, int operands) {
  const char *name = nrt_op_name(op->code);
  if (op->num_operands != operands || op->num_outputs != 1)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects %d operands", name, operands);
  nrt_dtype c = rt_compute_dtype(op->compute_dtype);
  if (c != NRT_FLOAT32 && c != NRT_FLOAT64)
    return rt_fail(NRT_ERROR_UNSUPPORTED, "%s: dtype %s is not supported", name, nrt_dtype_name(op->compute_dtype));
  for (int k = 1; k < operands; k++) {
    const nrt_tensor_view *a = &op->operands[0], *b = &op->operands[k];
    if (a->ndim != b->ndim || memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof a->shape[0]))
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: operand %d's shape differs from the output's", name, k);
  }
  nrt_dtype want[NRT_MAX_OPERANDS];
  for (int k = 0; k < operands; k++) want[k] = c;
  rt_loop_ctx ctx;
  rt_scalars_from_op(op, &ctx.sc);
  atomic_init(&ctx.fault, 0);
  rt_run_elementwise(op, want, c == NRT_FLOAT64 ? f64 : f32, &ctx);
  if (atomic_load(&ctx.fault))
    return rt_fail(NRT_ERROR_ARITHMETIC,
                   "%s: all elements of input and target should be between 0 and 1", name);
  return NRT_SUCCESS;
}

nrt_status rt_kernel_binary_cross_entropy(const nrt_op *op) { return run_bce(op, bce_f32, bce_f64, 4); }

nrt_status rt_kernel_binary_cross_entropy_backward(const nrt_op *op) {
  return run_bce(op, bce_grad_f32, bce_grad_f64, 5);
}
