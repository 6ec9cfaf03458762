/* FUSED_ADAM and FUSED_SGD (layouts in neuronrt/ops/optim.h).
 *
 * One pass over a parameter and its state: every element is read and
 * written once, which is what makes the fused optimizers cheaper than the
 * dozen foreach passes of the same update. The per-step coefficients (bias
 * corrections, step size) are computed once in double, as PyTorch's fused
 * CPU kernels do, then applied in the compute dtype. Loops are generated per
 * storage dtype and for the two layout choices that add a store (writing
 * back the unscaled gradient, the amsgrad maximum or the momentum buffer);
 * the other options are selects, so a zero coefficient never meets an
 * infinite parameter.
 */
#include <math.h>
#include <string.h>
#include "internal.h"
#include "ops/engine/elementwise.h"
#include "ops/engine/iterate.h"
#include "ops/engine/scalar_types.h"

typedef struct optim_coef {
  double lr, beta1, beta2, weight_decay, eps;
  double step_size, bias2_sqrt, grad_scale;
  double momentum, dampening;
  int maximize, decoupled, nesterov, first_step;
} optim_coef;

/* sqrt in the compute type (sqrt of a float would compute in double). */
#define SQRT_OF(x) _Generic((x), float: sqrtf, double: sqrt)(x)
#define LD_SAME(x) (x)
#define ST_SAME_F(x) (x)

/* One Adam element: p, g, m, v (and mx with amsgrad) in compute type C. */
#define ADAM_ELEMENT(C, UNSCALE, AMSGRAD, GSTORE, MXLOAD, MXSTORE)         \
  {                                                                        \
    if (UNSCALE) {                                                         \
      g = g / gs;                                                          \
      GSTORE;                                                              \
    }                                                                      \
    g = maximize ? -g : g;                                                 \
    g = coupled ? g + wd * p : g;                                          \
    p = decoupled ? p - lr_wd * p : p;                                     \
    m = m + omb1 * (g - m);                                                \
    v = v * b2 + omb2 * g * g;                                             \
    C vm = v;                                                              \
    if (AMSGRAD) {                                                         \
      C mx = MXLOAD;                                                       \
      vm = mx > v ? mx : v;                                                \
      MXSTORE;                                                             \
    }                                                                      \
    C denom = SQRT_OF(vm) / bc2 + eps;                                        \
    p = p - step_size * m / denom;                                         \
  }

#define ADAM_LOOP(NAME, T, C, LOAD, STORE, UNSCALE, AMSGRAD)                                    \
  RT_SIMD_VOID(NAME, (char **data, const int64_t *strides, int64_t n, void *arg),              \
                     (data, strides, n, arg)) {                                                \
    const optim_coef *k = arg;                                                                 \
    const C gs = (C)k->grad_scale, wd = (C)k->weight_decay, lr_wd = (C)(k->lr * k->weight_decay), \
            omb1 = (C)(1 - k->beta1), b2 = (C)k->beta2, omb2 = (C)(1 - k->beta2),               \
            bc2 = (C)k->bias2_sqrt, eps = (C)k->eps, step_size = (C)k->step_size;               \
    const int maximize = k->maximize, decoupled = k->decoupled && k->weight_decay != 0,         \
              coupled = !k->decoupled && k->weight_decay != 0;                                  \
    int contiguous = 1;                                                                        \
    for (int o = 0; o < 4 + (AMSGRAD); o++) contiguous &= strides[o] == (int64_t)sizeof(T);     \
    if (contiguous) {                                                                          \
      T *P = (T *)data[0], *G = (T *)data[1], *M = (T *)data[2], *V = (T *)data[3];            \
      T *X = (T *)data[4 - !(AMSGRAD)];                                                         \
      for (int64_t i = 0; i < n; i++) {                                                        \
        C p = LOAD(P[i]), g = LOAD(G[i]), m = LOAD(M[i]), v = LOAD(V[i]);                      \
        ADAM_ELEMENT(C, UNSCALE, AMSGRAD, G[i] = STORE(g), LOAD(X[i]), X[i] = STORE(vm))       \
        P[i] = STORE(p), M[i] = STORE(m), V[i] = STORE(v);                                     \
      }                                                                                        \
    } else {                                                                                   \
      for (int64_t i = 0; i < n; i++) {                                                        \
        T *P = (T *)(data[0] + i * strides[0]), *G = (T *)(data[1] + i * strides[1]);          \
        T *M = (T *)(data[2] + i * strides[2]), *V = (T *)(data[3] + i * strides[3]);          \
        T *X = (T *)(data[4 - !(AMSGRAD)] + i * strides[4 - !(AMSGRAD)]);                      \
        C p = LOAD(*P), g = LOAD(*G), m = LOAD(*M), v = LOAD(*V);                              \
        ADAM_ELEMENT(C, UNSCALE, AMSGRAD, *G = STORE(g), LOAD(*X), *X = STORE(vm))             \
        *P = STORE(p), *M = STORE(m), *V = STORE(v);                                           \
      }                                                                                        \
    }                                                                                          \
  }

/* One SGD element: p, g (and b, the momentum buffer, with MOMENTUM). */
#define SGD_ELEMENT(C, UNSCALE, MOMENTUM, GSTORE, BLOAD, BSTORE) \
  {                                                              \
    if (UNSCALE) {                                               \
      g = g / gs;                                                \
      GSTORE;                                                    \
    }                                                            \
    g = maximize ? -g : g;                                       \
    g = decay ? g + wd * p : g;                                  \
    if (MOMENTUM) {                                              \
      C b = first ? g : mom * BLOAD + omd * g;                   \
      BSTORE;                                                    \
      g = nesterov ? g + mom * b : b;                            \
    }                                                            \
    p = p - lr * g;                                              \
  }

#define SGD_LOOP(NAME, T, C, LOAD, STORE, UNSCALE, MOMENTUM)                                   \
  RT_SIMD_VOID(NAME, (char **data, const int64_t *strides, int64_t n, void *arg),              \
                     (data, strides, n, arg)) {                                                \
    const optim_coef *k = arg;                                                                 \
    const C gs = (C)k->grad_scale, wd = (C)k->weight_decay, lr = (C)k->lr, mom = (C)k->momentum, \
            omd = (C)(1 - k->dampening);                                                       \
    const int maximize = k->maximize, decay = k->weight_decay != 0, first = k->first_step,     \
              nesterov = k->nesterov;                                                          \
    int contiguous = 1;                                                                        \
    for (int o = 0; o < 2 + (MOMENTUM); o++) contiguous &= strides[o] == (int64_t)sizeof(T);    \
    if (contiguous) {                                                                          \
      T *P = (T *)data[0], *G = (T *)data[1], *B = (T *)data[1 + (MOMENTUM)];                   \
      for (int64_t i = 0; i < n; i++) {                                                        \
        C p = LOAD(P[i]), g = LOAD(G[i]);                                                      \
        SGD_ELEMENT(C, UNSCALE, MOMENTUM, G[i] = STORE(g), LOAD(B[i]), B[i] = STORE(b))        \
        P[i] = STORE(p);                                                                       \
      }                                                                                        \
    } else {                                                                                   \
      for (int64_t i = 0; i < n; i++) {                                                        \
        T *P = (T *)(data[0] + i * strides[0]), *G = (T *)(data[1] + i * strides[1]);          \
        T *B = (T *)(data[1 + (MOMENTUM)] + i * strides[1 + (MOMENTUM)]);                       \
        C p = LOAD(*P), g = LOAD(*G);                                                          \
        SGD_ELEMENT(C, UNSCALE, MOMENTUM, *G = STORE(g), LOAD(*B), *B = STORE(b))              \
        *P = STORE(p);                                                                         \
      }                                                                                        \
    }                                                                                          \
  }

/* Storage dtypes: name, storage type, compute type, load, store. */
#define OPTIM_DTYPES(X)                                                   \
  X(f32, float, float, LD_SAME, ST_SAME_F)                                \
  X(f64, double, double, LD_SAME, ST_SAME_F)                              \
  X(bf16, uint16_t, float, rt_bfloat16_to_float, rt_bfloat16_from_float)  \
  X(f16, uint16_t, float, rt_half_to_float, rt_half_from_float)

#define DEFINE_LOOPS(N, T, C, LOAD, STORE)                 \
  ADAM_LOOP(adam_##N##_00, T, C, LOAD, STORE, 0, 0)        \
  ADAM_LOOP(adam_##N##_01, T, C, LOAD, STORE, 0, 1)        \
  ADAM_LOOP(adam_##N##_10, T, C, LOAD, STORE, 1, 0)        \
  ADAM_LOOP(adam_##N##_11, T, C, LOAD, STORE, 1, 1)        \
  SGD_LOOP(sgd_##N##_00, T, C, LOAD, STORE, 0, 0)          \
  SGD_LOOP(sgd_##N##_01, T, C, LOAD, STORE, 0, 1)          \
  SGD_LOOP(sgd_##N##_10, T, C, LOAD, STORE, 1, 0)          \
  SGD_LOOP(sgd_##N##_11, T, C, LOAD, STORE, 1, 1)
OPTIM_DTYPES(DEFINE_LOOPS)

typedef struct loop_set {
  rt_inner_loop adam[2][2], sgd[2][2]; /* [unscale][amsgrad or momentum] */
} loop_set;

#define LOOP_ENTRY(N, T, C, LOAD, STORE) \
  {{{adam_##N##_00, adam_##N##_01}, {adam_##N##_10, adam_##N##_11}}, \
   {{sgd_##N##_00, sgd_##N##_01}, {sgd_##N##_10, sgd_##N##_11}}},
static const loop_set loop_sets[] = {OPTIM_DTYPES(LOOP_ENTRY)};

static const loop_set *loops_for(nrt_dtype d) {
  switch (d) {
    case NRT_FLOAT32: return &loop_sets[0];
    case NRT_FLOAT64: return &loop_sets[1];
    case NRT_BFLOAT16: return &loop_sets[2];
    case NRT_FLOAT16: return &loop_sets[3];
    default: return NULL;
  }
}

/* ---- arguments -------------------------------------------------------------- */

static double scalar_f(const nrt_op *op, int k) {
  return op->scalars[k].is_float ? op->scalars[k].f : (double)op->scalars[k].i;
}

/* The one element of a step or control entry, as double. */
static double element_f(const nrt_tensor_view *v, int64_t index) {
  int64_t off = v->ndim ? index * v->strides[0] : 0;
  const char *p = (const char *)v->data;
  switch (v->dtype) {
    case NRT_FLOAT32: return ((const float *)p)[off];
    case NRT_FLOAT64: return ((const double *)p)[off];
    case NRT_BFLOAT16: return rt_bfloat16_to_float(((const uint16_t *)p)[off]);
    case NRT_FLOAT16: return rt_half_to_float(((const uint16_t *)p)[off]);
    case NRT_INT64: return (double)((const int64_t *)p)[off];
    case NRT_INT32: return ((const int32_t *)p)[off];
    default: return NAN;
  }
}

/* Checks that the first `count` operands share the first one's shape and
 * floating dtype. */
static nrt_status check_state(const nrt_op *op, int count, const char *name) {
  const nrt_tensor_view *p = &op->operands[0];
  if (!loops_for(p->dtype))
    return rt_fail(NRT_ERROR_UNSUPPORTED, "%s: parameters of dtype %s are not supported", name,
                   nrt_dtype_name(p->dtype));
  for (int k = 1; k < count; k++) {
    const nrt_tensor_view *v = &op->operands[k];
    int same = v->dtype == p->dtype && v->ndim == p->ndim;
    for (int d = 0; same && d < p->ndim; d++) same = v->shape[d] == p->shape[d];
    if (!same)
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                     "%s: operand %d must have the parameter's shape and dtype (%s)", name, k,
                     nrt_dtype_name(p->dtype));
  }
  return NRT_SUCCESS;
}

/* Reads the control vector (if present) into lr and grad_scale; returns 1
 * when found_inf says to skip the step. */
static nrt_status read_control(const nrt_op *op, int index, int flags, optim_coef *k, int *skip,
                               const char *name) {
  *skip = 0;
  k->grad_scale = 1;
  if (!(flags & (NRT_OPTIM_CONTROL_LR | NRT_OPTIM_CONTROL_AMP))) return NRT_SUCCESS;
  if (op->num_operands <= index)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: the control operand is missing", name);
  const nrt_tensor_view *c = &op->operands[index];
  if (c->ndim != 1 || c->shape[0] != 3 || c->dtype != NRT_FLOAT64)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: control must be float64 (3)", name);
  if (flags & NRT_OPTIM_CONTROL_LR) k->lr = element_f(c, 0);
  if (flags & NRT_OPTIM_CONTROL_AMP) {
    k->grad_scale = element_f(c, 1);
    *skip = element_f(c, 2) != 0;
  }
  return NRT_SUCCESS;
}

nrt_status rt_kernel_fused_adam(const nrt_op *op) {
  const char *name = "fused_adam";
  if (op->num_scalars != 6 || (op->num_outputs != 4 && op->num_outputs != 5))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "%s: expects outputs (param, grad, exp_avg, exp_avg_sq[, max_exp_avg_sq]), "
                   "step[, control] and 6 scalars",
                   name);
  int flags = (int)op->scalars[5].i;
  int amsgrad = (flags & NRT_OPTIM_AMSGRAD) != 0;
  int state = op->num_outputs;
  if (state != 4 + amsgrad || op->num_operands < state + 1)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: operands do not match the amsgrad flag", name);
  nrt_status s = check_state(op, state, name);
  if (s) return s;
  optim_coef k;
  memset(&k, 0, sizeof k);
  k.lr = scalar_f(op, 0);
  k.beta1 = scalar_f(op, 1);
  k.beta2 = scalar_f(op, 2);
  k.weight_decay = scalar_f(op, 3);
  k.eps = scalar_f(op, 4);
  k.maximize = (flags & NRT_OPTIM_MAXIMIZE) != 0;
  k.decoupled = (flags & NRT_OPTIM_DECOUPLED) != 0;
  int skip;
  if ((s = read_control(op, state + 1, flags, &k, &skip, name))) return s;
  if (skip || nrt_view_numel(&op->operands[0]) == 0) return NRT_SUCCESS;
  const nrt_tensor_view *step = &op->operands[state];
  if (nrt_view_numel(step) != 1)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: step must have one element", name);
  double t = element_f(step, 0);
  double bias1 = 1 - pow(k.beta1, t), bias2 = 1 - pow(k.beta2, t);
  k.step_size = k.lr / bias1;
  k.bias2_sqrt = sqrt(bias2);
  int unscale = (flags & NRT_OPTIM_CONTROL_AMP) != 0;
  rt_iterate(state, op->operands, loops_for(op->operands[0].dtype)->adam[unscale][amsgrad], &k);
  return NRT_SUCCESS;
}

nrt_status rt_kernel_fused_sgd(const nrt_op *op) {
  const char *name = "fused_sgd";
  if (op->num_scalars != 5 || (op->num_outputs != 2 && op->num_outputs != 3))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "%s: expects outputs (param, grad[, momentum_buffer]), [control] and 5 scalars",
                   name);
  int flags = (int)op->scalars[4].i;
  int state = op->num_outputs, momentum = state == 3;
  nrt_status s = check_state(op, state, name);
  if (s) return s;
  optim_coef k;
  memset(&k, 0, sizeof k);
  k.lr = scalar_f(op, 0);
  k.weight_decay = scalar_f(op, 1);
  k.momentum = scalar_f(op, 2);
  k.dampening = scalar_f(op, 3);
  k.maximize = (flags & NRT_OPTIM_MAXIMIZE) != 0;
  k.nesterov = (flags & NRT_OPTIM_NESTEROV) != 0;
  k.first_step = (flags & NRT_OPTIM_FIRST_STEP) != 0;
  int skip;
  if ((s = read_control(op, state, flags, &k, &skip, name))) return s;
  if (skip || nrt_view_numel(&op->operands[0]) == 0) return NRT_SUCCESS;
  int unscale = (flags & NRT_OPTIM_CONTROL_AMP) != 0;
  rt_iterate(state, op->operands, loops_for(op->operands[0].dtype)->sgd[unscale][momentum], &k);
  return NRT_SUCCESS;
}
