/* The fused optimizer kernels against a reference twin.
 *
 * The twin applies the update rules as torch.optim documents them, element
 * by element in double, to the same (dtype-rounded) inputs. Cases cover
 * Adam and AdamW with and without weight decay, amsgrad, maximize, a
 * gradient scale (the unscaled gradient is written back) and found_inf
 * (nothing changes), a learning rate from the control vector, SGD with and
 * without momentum, first step, nesterov and dampening; every floating
 * dtype; contiguous and strided (every other element) state.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "ops/engine/scalar_types.h"
#include "vector_buf.h"

#define N 300

static uint64_t rng_state = 42;
static double urand(void) {
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(rng_state >> 11) / 9007199254740992.0;
}

static double tolerance(nrt_dtype d) {
  return d == NRT_BFLOAT16 ? 1.6e-2 : d == NRT_FLOAT16 ? 2e-3 : d == NRT_FLOAT32 ? 2e-6 : 1e-12;
}

/* Within tol relative to max(|ref|, 1): the values are of order 1. */
static int close_to(double ref, double got, double tol) {
  return fabs(ref - got) <= tol * fmax(fabs(ref), 1.0);
}

static const nrt_dtype dtypes[] = {NRT_FLOAT32, NRT_FLOAT64, NRT_BFLOAT16, NRT_FLOAT16};

static nrt_op optim_op(nrt_op_code code, int outputs, buf *const *bs, int n, const double *sc,
                       int nsc, int flags) {
  nrt_op op;
  memset(&op, 0, sizeof op);
  op.code = code;
  op.num_outputs = outputs;
  op.num_operands = n;
  for (int k = 0; k < n; k++) op.operands[k] = bs[k]->view;
  for (int k = 0; k < nsc; k++) op.scalars[k].is_float = 1, op.scalars[k].f = sc[k];
  op.scalars[nsc].i = flags;
  op.num_scalars = nsc + 1;
  return op;
}

/* A control vector [lr, grad_scale, found_inf]. */
static buf control(double lr, double scale, double inf) {
  buf c = make(NRT_FLOAT64, 3, 1);
  put(&c, 0, lr), put(&c, 1, scale), put(&c, 2, inf);
  return c;
}

static void adam_case(nrt_dtype d, int stride, int flags, double wd, int use_control, double found_inf) {
  const double lr = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-8, step = 3, gscale = 4;
  int ams = (flags & NRT_OPTIM_AMSGRAD) != 0;
  buf p = make(d, N, stride), g = make(d, N, stride), m = make(d, N, stride), v = make(d, N, stride),
      mx = make(d, N, stride), st = make(NRT_FLOAT32, 1, 1);
  double rp[N], rg[N], rm[N], rv[N], rmx[N];
  for (int i = 0; i < N; i++) {
    put(&p, i, urand() * 2 - 1), put(&g, i, urand() - 0.5), put(&m, i, (urand() - 0.5) * 0.1);
    put(&v, i, urand() * 0.01), put(&mx, i, urand() * 0.012);
    rp[i] = get(&p, i), rg[i] = get(&g, i), rm[i] = get(&m, i), rv[i] = get(&v, i), rmx[i] = get(&mx, i);
  }
  put(&st, 0, step);
  int amp = use_control ? NRT_OPTIM_CONTROL_LR | NRT_OPTIM_CONTROL_AMP : 0;
  buf c = control(lr, gscale, found_inf);
  buf *ops[7] = {&p, &g, &m, &v, &mx, &st, &c};
  if (!ams) ops[4] = &st, ops[5] = &c;
  double sc[5] = {use_control ? 123.0 : lr, b1, b2, wd, eps}; /* lr from control wins */
  nrt_op op = optim_op(NRT_OP_FUSED_ADAM, 4 + ams, ops, 5 + ams + (use_control ? 1 : 0), sc, 5, flags | amp);
  CHECK_OK(nrt_op_execute(&op));
  double tol = tolerance(d);
  int ok = 1;
  for (int i = 0; i < N; i++) {
    double gr = rg[i], pr = rp[i], mr = rm[i], vr = rv[i], xr = rmx[i];
    if (!(use_control && found_inf != 0)) {
      if (use_control) gr /= gscale;
      double gu = gr;
      if (flags & NRT_OPTIM_MAXIMIZE) gr = -gr;
      if (wd != 0 && (flags & NRT_OPTIM_DECOUPLED)) pr -= lr * wd * pr;
      if (wd != 0 && !(flags & NRT_OPTIM_DECOUPLED)) gr += wd * pr;
      mr = mr * b1 + (1 - b1) * gr;
      vr = vr * b2 + (1 - b2) * gr * gr;
      double bc1 = 1 - pow(b1, step), bc2 = 1 - pow(b2, step);
      double vv = vr;
      if (ams) xr = vv = fmax(xr, vr);
      pr -= lr / bc1 * mr / (sqrt(vv) / sqrt(bc2) + eps);
      gr = use_control ? gu : rg[i];
    }
    ok &= close_to(pr, get(&p, i), tol) && close_to(mr, get(&m, i), tol) &&
          close_to(vr, get(&v, i), tol) && close_to(gr, get(&g, i), tol);
    if (ams) ok &= close_to(xr, get(&mx, i), tol);
  }
  if (!ok)
    fprintf(stderr, "  adam dtype %s stride %d flags %d wd %g control %d found_inf %g\n",
            nrt_dtype_name(d), stride, flags, wd, use_control, found_inf);
  CHECK(ok);
  buf *all[] = {&p, &g, &m, &v, &mx, &st, &c};
  for (int k = 0; k < 7; k++) nrt_free(all[k]->dev);
}

static void sgd_case(nrt_dtype d, int stride, int flags, double momentum, double dampening,
                     double wd, int use_control) {
  const double lr = 0.05, gscale = 0.5;
  buf p = make(d, N, stride), g = make(d, N, stride), b = make(d, N, stride);
  double rp[N], rg[N], rb[N];
  for (int i = 0; i < N; i++) {
    put(&p, i, urand() * 2 - 1), put(&g, i, urand() - 0.5), put(&b, i, urand() - 0.5);
    rp[i] = get(&p, i), rg[i] = get(&g, i), rb[i] = get(&b, i);
  }
  buf c = control(lr, gscale, 0);
  int mom = momentum != 0;
  buf *ops[4] = {&p, &g, &b, &c};
  if (!mom) ops[2] = &c;
  int amp = use_control ? NRT_OPTIM_CONTROL_AMP : 0;
  double sc[4] = {lr, wd, momentum, dampening};
  nrt_op op = optim_op(NRT_OP_FUSED_SGD, 2 + mom, ops, 2 + mom + (use_control ? 1 : 0), sc, 4, flags | amp);
  CHECK_OK(nrt_op_execute(&op));
  double tol = tolerance(d);
  int ok = 1;
  for (int i = 0; i < N; i++) {
    double gr = use_control ? rg[i] / gscale : rg[i], gu = gr, pr = rp[i], br = rb[i];
    if (flags & NRT_OPTIM_MAXIMIZE) gr = -gr;
    gr += wd * pr;
    if (mom) {
      br = (flags & NRT_OPTIM_FIRST_STEP) ? gr : momentum * br + (1 - dampening) * gr;
      gr = (flags & NRT_OPTIM_NESTEROV) ? gr + momentum * br : br;
    }
    pr -= lr * gr;
    ok &= close_to(pr, get(&p, i), tol) && close_to(gu, get(&g, i), tol);
    if (mom) ok &= close_to(br, get(&b, i), tol);
  }
  if (!ok)
    fprintf(stderr, "  sgd dtype %s stride %d flags %d momentum %g\n", nrt_dtype_name(d), stride,
            flags, momentum);
  CHECK(ok);
  nrt_free(p.dev), nrt_free(g.dev), nrt_free(b.dev), nrt_free(c.dev);
}

static void test_adam_matches_twin(void) {
  for (int t = 0; t < 4; t++)
    for (int stride = 1; stride <= 2; stride++) {
      adam_case(dtypes[t], stride, 0, 0, 0, 0);
      adam_case(dtypes[t], stride, NRT_OPTIM_DECOUPLED, 0.1, 0, 0);
      adam_case(dtypes[t], stride, NRT_OPTIM_AMSGRAD | NRT_OPTIM_MAXIMIZE, 0.01, 0, 0);
      adam_case(dtypes[t], stride, NRT_OPTIM_AMSGRAD | NRT_OPTIM_DECOUPLED, 0.01, 1, 0);
      adam_case(dtypes[t], stride, 0, 0.01, 1, 1); /* found_inf: unchanged */
    }
}

static void test_sgd_matches_twin(void) {
  for (int t = 0; t < 4; t++)
    for (int stride = 1; stride <= 2; stride++) {
      sgd_case(dtypes[t], stride, 0, 0, 0, 0, 0);
      sgd_case(dtypes[t], stride, NRT_OPTIM_MAXIMIZE, 0, 0, 0.1, 1);
      sgd_case(dtypes[t], stride, NRT_OPTIM_FIRST_STEP, 0.9, 0, 0.01, 0);
      sgd_case(dtypes[t], stride, 0, 0.9, 0.2, 0, 1);
      sgd_case(dtypes[t], stride, NRT_OPTIM_NESTEROV, 0.9, 0, 0.01, 0);
    }
}

static void test_bad_arguments(void) {
  buf p = make(NRT_FLOAT32, 10, 1), g = make(NRT_FLOAT32, 9, 1), st = make(NRT_FLOAT32, 1, 1);
  buf *ops[5] = {&p, &g, &p, &p, &st};
  double sc[5] = {0.1, 0.9, 0.99, 0, 1e-8};
  nrt_op op = optim_op(NRT_OP_FUSED_ADAM, 4, ops, 5, sc, 5, 0);
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT); /* grad of another shape */
  op = optim_op(NRT_OP_FUSED_ADAM, 4, ops, 5, sc, 5, NRT_OPTIM_CONTROL_LR);
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT); /* control missing */
  buf i = make(NRT_INT32, 10, 1);
  buf *iops[2] = {&i, &i};
  op = optim_op(NRT_OP_FUSED_SGD, 2, iops, 2, sc, 4, 0);
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_UNSUPPORTED);
  nrt_free(p.dev), nrt_free(g.dev), nrt_free(st.dev), nrt_free(i.dev);
}

int main(void) {
  RUN(test_adam_matches_twin);
  RUN(test_sgd_matches_twin);
  RUN(test_bad_arguments);
  return CHECK_MAIN_RESULT();
}
