/* The normalisation, softmax and loss kernels against reference twins.
 *
 * Each twin is plain code written from the op's definition: it reads the
 * logical elements one by one, computes in double (long double sums) with
 * no blocking, vectors or threads, and the kernel's result must agree
 * within a tolerance of the compute dtype (float32 kernels: relative 2e-5
 * plus a small absolute term; float64: 1e-12). Geometries cover the
 * contiguous row path and the strided column path of softmax, long rows
 * (the float-to-double flush), NCHW and channels-last batch norm, absent
 * weights, mixed dtypes (bfloat16 data with float32 outputs), bad targets
 * and inputs, and a child process per thread count checks that results are
 * bitwise identical for 1 and 3 kernel threads.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "child.h"

/* ---- tensors ----------------------------------------------------------------- */

typedef struct tensor {
  void *dev;
  char *host;
  nrt_tensor_view view;
} tensor;

static size_t elem_size(nrt_dtype t) { return nrt_dtype_size(t); }

/* A tensor of shape with strides (NULL: contiguous) over `storage` elements
 * (0: exactly the shape). */
static tensor make(nrt_dtype t, int ndim, const int64_t *shape, const int64_t *strides, int64_t storage) {
  tensor x;
  memset(&x, 0, sizeof x);
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= shape[d];
  if (storage <= 0) storage = n;
  size_t bytes = (size_t)(storage > 0 ? storage : 1) * elem_size(t);
  CHECK_OK(nrt_malloc(0, bytes, &x.dev));
  x.host = nrt_device_to_host(x.dev);
  memset(x.host, 0, bytes);
  x.view.data = n > 0 ? x.dev : NULL;
  x.view.dtype = t;
  x.view.ndim = ndim;
  int64_t step = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    x.view.shape[d] = shape[d];
    x.view.strides[d] = strides ? strides[d] : step;
    step *= shape[d];
  }
  return x;
}

static tensor make1(nrt_dtype t, int64_t n) { return make(t, 1, (int64_t[]){n}, NULL, 0); }

static void release(tensor *x) { CHECK_OK(nrt_free(x->dev)); }

static nrt_tensor_view absent(void) {
  nrt_tensor_view v;
  memset(&v, 0, sizeof v);
  v.dtype = NRT_FLOAT32;
  v.ndim = 1;
  return v;
}

static int64_t numel(const tensor *x) {
  int64_t n = 1;
  for (int d = 0; d < x->view.ndim; d++) n *= x->view.shape[d];
  return n;
}

static char *element(const tensor *x, int64_t i) {
  int64_t off = 0;
  for (int d = x->view.ndim - 1; d >= 0; d--) {
    off += (i % x->view.shape[d]) * x->view.strides[d];
    i /= x->view.shape[d];
  }
  return x->host + off * (int64_t)elem_size(x->view.dtype);
}

static double get(const tensor *x, int64_t i) {
  const char *p = element(x, i);
  switch (x->view.dtype) {
    case NRT_FLOAT32: return *(const float *)(const void *)p;
    case NRT_FLOAT64: return *(const double *)(const void *)p;
    case NRT_INT64: return (double)*(const int64_t *)(const void *)p;
    case NRT_BFLOAT16: {
      uint32_t bits = (uint32_t)*(const uint16_t *)(const void *)p << 16;
      float f;
      memcpy(&f, &bits, sizeof f);
      return f;
    }
    default: return NAN;
  }
}

static void set(tensor *x, int64_t i, double v) {
  char *p = element(x, i);
  switch (x->view.dtype) {
    case NRT_FLOAT32: *(float *)(void *)p = (float)v; break;
    case NRT_FLOAT64: *(double *)(void *)p = v; break;
    case NRT_INT64: *(int64_t *)(void *)p = (int64_t)v; break;
    case NRT_BFLOAT16: {
      float f = (float)v;
      uint32_t bits;
      memcpy(&bits, &f, sizeof bits);
      *(uint16_t *)(void *)p = (uint16_t)(bits >> 16); /* truncation: values are exact anyway */
      break;
    }
    default: break;
  }
}

static uint64_t rng_state = 88172645463325252ull;
static double uniform(void) { /* in [0, 1) */
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (double)(rng_state >> 11) * 0x1p-53;
}

/* Values in [lo, hi), rounded to the tensor's dtype so the twin reads what
 * the kernel reads. */
static void fill(tensor *x, double lo, double hi) {
  for (int64_t i = 0; i < numel(x); i++) {
    set(x, i, lo + (hi - lo) * uniform());
  }
}

static nrt_status run(nrt_op_code code, int nout, int nops, const nrt_tensor_view *ops, int nsc,
                      const nrt_scalar *sc) {
  nrt_op op;
  memset(&op, 0, sizeof op);
  op.code = code;
  op.compute_dtype = ops[nout].dtype;
  op.num_outputs = nout;
  op.num_operands = nops;
  op.num_scalars = nsc;
  for (int k = 0; k < nops; k++) op.operands[k] = ops[k];
  for (int k = 0; k < nsc; k++) op.scalars[k] = sc[k];
  return nrt_op_execute(&op);
}

static nrt_scalar fs(double v) { return (nrt_scalar){.is_float = 1, .f = v}; }
static nrt_scalar is(int64_t v) { return (nrt_scalar){.is_float = 0, .i = v, .f = (double)v}; }

static double tolerance(nrt_dtype t, double ref) {
  if (t == NRT_FLOAT64) return 1e-12 * (1 + fabs(ref));
  if (t == NRT_BFLOAT16) return 8e-3 * (1 + fabs(ref));
  return 2e-5 * fabs(ref) + 2e-6;
}

/* Every element of got within tolerance of ref[i] (dtype of compute t). */
static int close_to(const tensor *got, const double *ref, nrt_dtype t) {
  for (int64_t i = 0; i < numel(got); i++) {
    double g = get(got, i);
    if (isnan(ref[i]) ? !isnan(g) : !(fabs(g - ref[i]) <= tolerance(t, ref[i]))) {
      fprintf(stderr, "  element %lld: got %.17g, expected %.17g\n", (long long)i, g, ref[i]);
      return 0;
    }
  }
  return 1;
}

/* ---- embedding bags, renorm, histc ------------------------------------------------ */

/* The bag twin: bag b is indices [offsets[b], end); rows equal to padding
 * are skipped; sum (weighted), mean or max (strict >, first wins). */
static void bag_twin(int mode, const tensor *w, const int64_t *idx, int64_t n, const int64_t *off, int64_t bags,
                     int64_t pad, const double *psw, double *out, int64_t *size, int64_t *arg) {
  int64_t d = w->view.shape[1];
  for (int64_t b = 0; b < bags; b++) {
    int64_t end = b + 1 < bags ? off[b + 1] : n, count = 0;
    for (int64_t j = 0; j < d; j++) out[b * d + j] = 0, arg[b * d + j] = 0;
    for (int64_t i = off[b]; i < end; i++) {
      if (idx[i] == pad) continue;
      for (int64_t j = 0; j < d; j++) {
        double x = get(w, idx[i] * d + j);
        if (mode == 2) {
          if (count == 0 || x > out[b * d + j]) out[b * d + j] = x, arg[b * d + j] = idx[i];
        } else {
          out[b * d + j] += (psw ? psw[i] : 1.0) * x;
        }
      }
      count++;
    }
    if (mode == 1 && count > 0)
      for (int64_t j = 0; j < d; j++) out[b * d + j] /= (double)count;
    size[b] = count;
  }
}

static void check_embedding_bag(int mode, nrt_dtype t, int transposed, int with_psw) {
  enum { V = 7, D = 5, N = 13, B = 5 };
  const int64_t offsets[B] = {0, 3, 3, 8, 9}, pad = 4;
  int64_t idx[N];
  for (int64_t i = 0; i < N; i++) idx[i] = (int64_t)(uniform() * V);
  tensor w = transposed ? make(t, 2, (int64_t[]){V, D}, (int64_t[]){1, V}, 0) : make(t, 2, (int64_t[]){V, D}, NULL, 0);
  for (int64_t i = 0; i < V * D; i++) set(&w, i, (double)(int64_t)(uniform() * 17) - 8);
  tensor ix = make1(NRT_INT64, N), of = make1(NRT_INT64, B), ps = make1(t, N);
  double psw[N];
  for (int64_t i = 0; i < N; i++) set(&ix, i, (double)idx[i]), set(&ps, i, (double)(i % 5) - 2), psw[i] = get(&ps, i);
  for (int64_t b = 0; b < B; b++) set(&of, b, (double)offsets[b]);
  tensor out = make(t, 2, (int64_t[]){B, D}, NULL, 0), o2b = make1(NRT_INT64, N), size = make1(NRT_INT64, B);
  tensor arg = mode == 2 ? make(NRT_INT64, 2, (int64_t[]){B, D}, NULL, 0) : make1(NRT_INT64, B);
  nrt_tensor_view ops[8] = {out.view, o2b.view, size.view, arg.view, w.view, ix.view, of.view,
                            with_psw ? ps.view : absent()};
  nrt_scalar sc[3] = {is(mode), is(pad), is(0)};
  CHECK_OK(run(NRT_OP_EMBEDDING_BAG, 4, 8, ops, 3, sc));
  double want[B * D];
  int64_t want_size[B], want_arg[B * D];
  bag_twin(mode, &w, idx, N, offsets, B, pad, with_psw ? psw : NULL, want, want_size, want_arg);
  CHECK(close_to(&out, want, t));
  for (int64_t b = 0; b < B; b++) {
    CHECK(get(&size, b) == (double)want_size[b]);
    for (int64_t j = 0; mode == 2 && j < D; j++) CHECK(get(&arg, b * D + j) == (double)want_arg[b * D + j]);
  }
  /* backward: grad_weight[r] = sum over the bag's entries of grad[b] scaled
   * (psw, 1 / count for mean), or grad[b, j] at the max's row */
  tensor grad = make(t, 2, (int64_t[]){B, D}, NULL, 0), gw = make(t, 2, (int64_t[]){V, D}, NULL, 0);
  fill(&grad, -2, 2);
  nrt_tensor_view bops[7] = {gw.view, grad.view, ix.view, o2b.view, size.view, arg.view,
                             with_psw ? ps.view : absent()};
  nrt_scalar bsc[3] = {is(mode), is(pad), is(0)};
  CHECK_OK(run(NRT_OP_EMBEDDING_BAG_BACKWARD, 1, 7, bops, 3, bsc));
  double gwant[V * D] = {0};
  for (int64_t b = 0; b < B; b++) {
    int64_t end = b + 1 < B ? offsets[b + 1] : N;
    if (mode == 2) {
      for (int64_t j = 0; j < D && want_size[b] > 0; j++) gwant[want_arg[b * D + j] * D + j] += get(&grad, b * D + j);
      continue;
    }
    for (int64_t i = offsets[b]; i < end; i++) {
      if (idx[i] == pad) continue;
      double s = (with_psw ? psw[i] : 1.0) / (mode == 1 ? (double)want_size[b] : 1.0);
      for (int64_t j = 0; j < D; j++) gwant[idx[i] * D + j] += s * get(&grad, b * D + j);
    }
  }
  CHECK(close_to(&gw, gwant, t));
  if (with_psw) {
    tensor gp = make1(t, N);
    nrt_tensor_view pops[5] = {gp.view, grad.view, w.view, ix.view, o2b.view};
    nrt_scalar psc[2] = {is(0), is(pad)};
    CHECK_OK(run(NRT_OP_EMBEDDING_BAG_PSW_BACKWARD, 1, 5, pops, 2, psc));
    double pwant[N] = {0};
    for (int64_t b = 0; b < B; b++)
      for (int64_t i = offsets[b]; i < (b + 1 < B ? offsets[b + 1] : N); i++)
        for (int64_t j = 0; j < D && idx[i] != pad; j++) pwant[i] += get(&grad, b * D + j) * get(&w, idx[i] * D + j);
    CHECK(close_to(&gp, pwant, t));
    release(&gp);
  }
  /* bad data: an index out of range, offsets not starting at 0 */
  set(&ix, 6, V);
  CHECK_STATUS(run(NRT_OP_EMBEDDING_BAG, 4, 8, ops, 3, sc), NRT_ERROR_INDEX_OUT_OF_RANGE);
  set(&ix, 6, 0);
  set(&of, 0, 1);
  CHECK_STATUS(run(NRT_OP_EMBEDDING_BAG, 4, 8, ops, 3, sc), NRT_ERROR_INDEX_OUT_OF_RANGE);
  tensor *all[] = {&w, &ix, &of, &ps, &out, &o2b, &size, &arg, &grad, &gw};
  for (size_t k = 0; k < sizeof all / sizeof *all; k++) release(all[k]);
}

static void test_embedding_bag_matches_twin(void) {
  nrt_dtype types[3] = {NRT_FLOAT32, NRT_FLOAT64, NRT_BFLOAT16};
  for (int ti = 0; ti < 3; ti++)
    for (int mode = 0; mode < 3; mode++)
      for (int transposed = 0; transposed < 2; transposed++) {
        check_embedding_bag(mode, types[ti], transposed, 0);
        if (mode == 0) check_embedding_bag(mode, types[ti], transposed, 1);
      }
}

/* The float32 row path (contiguous rows, prefetching ahead) against the
 * general strided loop, its reference, on the same values: sums, means and
 * maxima (and their argmax) agree bit for bit, since both add a bag's rows
 * in the order of its indices. D = 37 leaves a vector tail; bags are empty,
 * short and longer than the prefetch distance. */
static void test_embedding_bag_rows_match_reference(void) {
  enum { V = 40, D = 37, N = 300, B = 11 };
  const int64_t offsets[B] = {0, 0, 2, 40, 40, 41, 100, 180, 181, 250, 299};
  tensor rows = make(NRT_FLOAT32, 2, (int64_t[]){V, D}, NULL, 0);
  tensor cols = make(NRT_FLOAT32, 2, (int64_t[]){V, D}, (int64_t[]){1, V}, 0);
  fill(&rows, -4, 4);
  for (int64_t i = 0; i < V * D; i++) set(&cols, i, get(&rows, i));
  tensor ix = make1(NRT_INT64, N), of = make1(NRT_INT64, B);
  for (int64_t i = 0; i < N; i++) set(&ix, i, (double)(int64_t)(uniform() * V));
  for (int64_t b = 0; b < B; b++) set(&of, b, (double)offsets[b]);
  for (int mode = 0; mode < 3; mode++) {
    tensor out[2], o2b[2], size[2], arg[2];
    for (int k = 0; k < 2; k++) {
      out[k] = make(NRT_FLOAT32, 2, (int64_t[]){B, D}, NULL, 0);
      o2b[k] = make1(NRT_INT64, N);
      size[k] = make1(NRT_INT64, B);
      arg[k] = mode == 2 ? make(NRT_INT64, 2, (int64_t[]){B, D}, NULL, 0) : make1(NRT_INT64, B);
      nrt_tensor_view ops[8] = {out[k].view, o2b[k].view, size[k].view, arg[k].view, k ? cols.view : rows.view,
                                ix.view, of.view, absent()};
      nrt_scalar sc[3] = {is(mode), is(3), is(0)};
      CHECK_OK(run(NRT_OP_EMBEDDING_BAG, 4, 8, ops, 3, sc));
    }
    CHECK(memcmp(out[0].host, out[1].host, sizeof(float) * B * D) == 0);
    CHECK(memcmp(o2b[0].host, o2b[1].host, sizeof(int64_t) * N) == 0);
    CHECK(memcmp(size[0].host, size[1].host, sizeof(int64_t) * B) == 0);
    CHECK(memcmp(arg[0].host, arg[1].host, sizeof(int64_t) * (mode == 2 ? B * D : B)) == 0);
    for (int k = 0; k < 2; k++) release(&out[k]), release(&o2b[k]), release(&size[k]), release(&arg[k]);
  }
  release(&rows), release(&cols), release(&ix), release(&of);
}

static void test_renorm_matches_twin(void) {
  const double ps[4] = {1, 2, 3, INFINITY};
  for (int pi = 0; pi < 4; pi++)
    for (int ti = 0; ti < 4; ti++) {
      nrt_dtype t = ti % 2 ? NRT_FLOAT64 : NRT_FLOAT32;
      /* slices along dim 0 of a [6, 4, 5] view whose dim 0 is innermost in memory, then of a
       * contiguous one (float32's contiguous path: 8 lanes and a tail of 4) */
      const int64_t *strides = ti < 2 ? (int64_t[]){1, 30, 6} : NULL;
      tensor x = make(t, 3, (int64_t[]){6, 4, 5}, strides, 0), out = make(t, 3, (int64_t[]){6, 4, 5}, NULL, 0);
      fill(&x, -2, 2);
      nrt_tensor_view ops[2] = {out.view, x.view};
      nrt_scalar sc[2] = {fs(ps[pi]), fs(3.0)};
      CHECK_OK(run(NRT_OP_RENORM, 1, 2, ops, 2, sc));
      double want[120];
      for (int64_t s = 0; s < 6; s++) {
        double acc = 0;
        for (int64_t k = 0; k < 20; k++) {
          double a = fabs(get(&x, s * 20 + k));
          acc = isinf(ps[pi]) ? (a > acc ? a : acc) : acc + pow(a, ps[pi]);
        }
        double norm = isinf(ps[pi]) ? acc : pow(acc, 1 / ps[pi]);
        double f = norm > 3.0 ? 3.0 / (norm + 1e-7) : 1.0;
        for (int64_t k = 0; k < 20; k++) want[s * 20 + k] = get(&x, s * 20 + k) * f;
      }
      CHECK(close_to(&out, want, t));
      nrt_scalar bad[2] = {fs(0), fs(3.0)};
      CHECK_STATUS(run(NRT_OP_RENORM, 1, 2, ops, 2, bad), NRT_ERROR_INVALID_ARGUMENT);
      release(&x), release(&out);
    }
}

static void test_histc_matches_twin(void) {
  for (int ti = 0; ti < 2; ti++) {
    nrt_dtype t = ti ? NRT_FLOAT64 : NRT_FLOAT32;
    /* quarters in [-6, 6), a NaN, read with a stride of 2; bins of width 1 over [-5, 5] */
    tensor x = make(t, 1, (int64_t[]){200}, (int64_t[]){2}, 400), h = make1(t, 10);
    for (int64_t i = 0; i < 200; i++) set(&x, i, (double)((int64_t)(uniform() * 48) - 24) / 4);
    set(&x, 7, NAN);
    set(&x, 8, 5.0);
    nrt_tensor_view ops[2] = {h.view, x.view};
    nrt_scalar sc[3] = {is(10), fs(-5), fs(5)};
    CHECK_OK(run(NRT_OP_HISTC, 1, 2, ops, 3, sc));
    double want[10] = {0};
    for (int64_t i = 0; i < 200; i++) {
      double v = get(&x, i);
      if (!(v >= -5 && v <= 5)) continue;
      int64_t b = (int64_t)floor(v + 5);
      want[b > 9 ? 9 : b] += 1; /* max falls in the last bin */
    }
    CHECK(close_to(&h, want, t));
    nrt_scalar bad[3] = {is(10), fs(5), fs(-5)};
    CHECK_STATUS(run(NRT_OP_HISTC, 1, 2, ops, 3, bad), NRT_ERROR_INVALID_ARGUMENT);
    release(&x), release(&h);
  }
}

/* ---- softmax ------------------------------------------------------------------- */

/* [outer, n, inner]: contiguous, or with n the strided (outermost) dim. */
typedef struct sm_geometry {
  int64_t outer, n, inner;
  int n_outermost;
} sm_geometry;

static tensor sm_tensor(const sm_geometry *g, nrt_dtype t) {
  int64_t shape[3] = {g->outer, g->n, g->inner};
  if (!g->n_outermost) return make(t, 3, shape, NULL, 0);
  int64_t strides[3] = {g->inner, g->outer * g->inner, 1};
  return make(t, 3, shape, strides, 0);
}

static void softmax_twin(const sm_geometry *g, const tensor *x, const tensor *gy, int log, int backward,
                         double *out) {
  for (int64_t o = 0; o < g->outer; o++)
    for (int64_t in = 0; in < g->inner; in++) {
#define IDX(i) ((o * g->n + (i)) * g->inner + in)
      if (!backward) {
        double m = -INFINITY;
        for (int64_t i = 0; i < g->n; i++) m = fmax(m, get(x, IDX(i)));
        long double s = 0;
        for (int64_t i = 0; i < g->n; i++) s += expl((long double)get(x, IDX(i)) - m);
        for (int64_t i = 0; i < g->n; i++)
          out[IDX(i)] = log ? (double)(get(x, IDX(i)) - m - logl(s)) : (double)(expl(get(x, IDX(i)) - m) / s);
      } else { /* x holds the forward output */
        long double s = 0;
        for (int64_t i = 0; i < g->n; i++) s += log ? get(gy, IDX(i)) : get(gy, IDX(i)) * get(x, IDX(i));
        for (int64_t i = 0; i < g->n; i++)
          out[IDX(i)] = log ? (double)(get(gy, IDX(i)) - expl(get(x, IDX(i))) * s)
                            : (double)(get(x, IDX(i)) * (get(gy, IDX(i)) - s));
      }
#undef IDX
    }
}

static void check_softmax(const sm_geometry *g, nrt_dtype in_t, nrt_dtype out_t) {
  static const nrt_op_code codes[4] = {NRT_OP_SOFTMAX, NRT_OP_LOG_SOFTMAX, NRT_OP_SOFTMAX_BACKWARD,
                                       NRT_OP_LOG_SOFTMAX_BACKWARD};
  int64_t n = g->outer * g->n * g->inner;
  double *ref = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
  for (int c = 0; c < 4; c++) {
    int log = c & 1, backward = c >= 2;
    tensor x = sm_tensor(g, in_t), gy = sm_tensor(g, in_t), y = sm_tensor(g, out_t);
    fill(&x, backward && !log ? 0 : -6, backward && !log ? 0.2 : backward ? -0.5 : 6);
    fill(&gy, -1, 1);
    nrt_tensor_view ops[3] = {y.view, backward ? gy.view : x.view, x.view};
    CHECK_OK(run(codes[c], 1, backward ? 3 : 2, ops, 0, NULL));
    softmax_twin(g, &x, &gy, log, backward, ref);
    nrt_dtype t = in_t == NRT_FLOAT64 ? NRT_FLOAT64 : out_t == NRT_BFLOAT16 ? NRT_BFLOAT16 : NRT_FLOAT32;
    if (!close_to(&y, ref, t))
      fprintf(stderr, "  softmax case %d geometry %lldx%lldx%lld\n", c, (long long)g->outer, (long long)g->n,
              (long long)g->inner);
    CHECK(close_to(&y, ref, t));
    release(&x);
    release(&gy);
    release(&y);
  }
  free(ref);
}

static void test_softmax_matches_twin(void) {
  static const sm_geometry geometries[] = {
      {3, 37, 1, 0},   /* rows */
      {2, 3000, 1, 0}, /* long rows: float lanes flushed into double */
      {2, 5, 70, 0},   /* softmax dim strided: column blocks */
      {4, 9, 3, 1},    /* n outermost in memory */
      {1, 1, 1, 0},
      {0, 4, 2, 0},    /* empty */
  };
  for (size_t k = 0; k < sizeof geometries / sizeof geometries[0]; k++) {
    check_softmax(&geometries[k], NRT_FLOAT32, NRT_FLOAT32);
    check_softmax(&geometries[k], NRT_FLOAT64, NRT_FLOAT64);
  }
  check_softmax(&geometries[0], NRT_BFLOAT16, NRT_FLOAT32); /* half_to_float */
  check_softmax(&geometries[2], NRT_BFLOAT16, NRT_BFLOAT16);
}

static void test_softmax_of_infinite_rows(void) {
  tensor x = make(NRT_FLOAT32, 3, (int64_t[]){1, 3, 1}, NULL, 0), y = make(NRT_FLOAT32, 3, (int64_t[]){1, 3, 1}, NULL, 0);
  for (int i = 0; i < 3; i++) set(&x, i, -INFINITY);
  nrt_tensor_view ops[2] = {y.view, x.view};
  CHECK_OK(run(NRT_OP_SOFTMAX, 1, 2, ops, 0, NULL));
  CHECK(isnan(get(&y, 0)) && isnan(get(&y, 2))); /* as PyTorch: NaN */
  set(&x, 1, 2.0);
  CHECK_OK(run(NRT_OP_LOG_SOFTMAX, 1, 2, ops, 0, NULL));
  CHECK(get(&y, 0) == -INFINITY && get(&y, 1) == 0.0);
  release(&x);
  release(&y);
}

/* The masked softmax (the fast path's): a bool mask [A, B, n, inner] with
 * A B = outer, here broadcast over B (stride 0) as a (batch, keys) padding
 * mask is over heads and queries, or contiguous. A masked input counts as
 * -inf; a masked entry's gradient is 0 and adds nothing to the row's sum. */
static void check_masked_softmax(const sm_geometry *g, int64_t A, int broadcast_b, nrt_dtype t) {
  const int64_t B = g->outer / A, n = g->outer * g->n * g->inner;
  int64_t mshape[4] = {A, B, g->n, g->inner};
  int64_t mstrides[4] = {g->n * g->inner, broadcast_b ? 0 : g->n * g->inner, g->inner, 1};
  if (!broadcast_b) mstrides[0] = B * g->n * g->inner;
  tensor mask = make(NRT_BOOL, 4, mshape, mstrides, broadcast_b ? A * g->n * g->inner : 0);
  unsigned char *m = (unsigned char *)mask.host;
  for (int64_t i = 0; i < (broadcast_b ? A : A * B) * g->n * g->inner; i++) m[i] = uniform() < 0.35;
  for (int64_t i = 0; i < g->n; i++) m[i * g->inner] = 1; /* row or column 0 masked whole */
  double *ref = malloc((size_t)n * sizeof(double));
  for (int backward = 0; backward < 2; backward++) {
    tensor x = sm_tensor(g, t), gy = sm_tensor(g, t), y = sm_tensor(g, t);
    fill(&x, backward ? 0 : -6, backward ? 0.2 : 6);
    fill(&gy, -1, 1);
    for (int64_t o = 0; o < g->outer; o++)
      for (int64_t in = 0; in < g->inner; in++) {
        const unsigned char *mr = m + (o / B) * mstrides[0] + (o % B) * mstrides[1] + in;
#define IDX(i) ((o * g->n + (i)) * g->inner + in)
        double mx = -INFINITY;
        long double s = 0;
        for (int64_t i = 0; i < g->n; i++)
          if (!mr[i * g->inner]) mx = fmax(mx, get(&x, IDX(i)));
        for (int64_t i = 0; i < g->n; i++)
          if (!mr[i * g->inner])
            s += backward ? (long double)get(&gy, IDX(i)) * get(&x, IDX(i)) : expl(get(&x, IDX(i)) - mx);
        for (int64_t i = 0; i < g->n; i++) {
          int masked = mr[i * g->inner];
          if (backward)
            ref[IDX(i)] = masked ? 0 : (double)(get(&x, IDX(i)) * (get(&gy, IDX(i)) - s));
          else
            ref[IDX(i)] = mx == -INFINITY ? NAN : masked ? 0 : (double)(expl(get(&x, IDX(i)) - mx) / s);
        }
#undef IDX
      }
    nrt_tensor_view ops[4] = {y.view, backward ? gy.view : x.view, x.view, mask.view};
    if (!backward) ops[2] = mask.view;
    CHECK_OK(run(backward ? NRT_OP_SOFTMAX_BACKWARD : NRT_OP_SOFTMAX, 1, backward ? 4 : 3, ops, 0, NULL));
    if (!close_to(&y, ref, t))
      fprintf(stderr, "  masked softmax backward=%d geometry %lldx%lldx%lld\n", backward, (long long)g->outer,
              (long long)g->n, (long long)g->inner);
    CHECK(close_to(&y, ref, t));
    release(&x);
    release(&gy);
    release(&y);
  }
  free(ref);
  release(&mask);
}

static void test_masked_softmax_matches_twin(void) {
  static const sm_geometry rows = {6, 37, 1, 0}, cols = {4, 5, 70, 0}, outermost = {4, 9, 3, 1};
  for (int t = 0; t < 2; t++) {
    nrt_dtype dt = t ? NRT_FLOAT64 : NRT_FLOAT32;
    check_masked_softmax(&rows, 2, 1, dt);
    check_masked_softmax(&rows, 3, 0, dt);
    check_masked_softmax(&cols, 2, 1, dt);
    check_masked_softmax(&outermost, 1, 0, dt);
  }
  check_masked_softmax(&rows, 2, 1, NRT_BFLOAT16);
  /* Refusals: a mask on log-softmax, a mask of the wrong shape or dtype. */
  tensor x = make(NRT_FLOAT32, 3, (int64_t[]){2, 3, 1}, NULL, 0), y = make(NRT_FLOAT32, 3, (int64_t[]){2, 3, 1}, NULL, 0);
  tensor mask = make(NRT_BOOL, 4, (int64_t[]){1, 2, 3, 1}, NULL, 0), wrong = make(NRT_BOOL, 4, (int64_t[]){1, 2, 2, 1}, NULL, 0);
  nrt_tensor_view ops[3] = {y.view, x.view, mask.view};
  CHECK_STATUS(run(NRT_OP_LOG_SOFTMAX, 1, 3, ops, 0, NULL), NRT_ERROR_UNSUPPORTED);
  ops[2] = wrong.view;
  CHECK_STATUS(run(NRT_OP_SOFTMAX, 1, 3, ops, 0, NULL), NRT_ERROR_INVALID_ARGUMENT);
  ops[2] = x.view;
  ops[2].ndim = 4;
  ops[2].shape[0] = 1, ops[2].shape[1] = 2, ops[2].shape[2] = 3, ops[2].shape[3] = 1;
  CHECK_STATUS(run(NRT_OP_SOFTMAX, 1, 3, ops, 0, NULL), NRT_ERROR_UNSUPPORTED);
  release(&x);
  release(&y);
  release(&mask);
  release(&wrong);
}

/* ---- layer norm and RMS norm ------------------------------------------------------ */

static void row_norm_twin(const tensor *x, const double *w, const double *b, int64_t rows, int64_t n,
                          double eps, int rms, double *y, double *mean, double *rstd) {
  for (int64_t r = 0; r < rows; r++) {
    long double s = 0, s2 = 0;
    for (int64_t j = 0; j < n; j++) s += get(x, r * n + j);
    double mu = rms ? 0 : (double)(s / n);
    for (int64_t j = 0; j < n; j++) s2 += (long double)(get(x, r * n + j) - mu) * (get(x, r * n + j) - mu);
    double rs = 1.0 / sqrt((double)(s2 / n) + eps);
    for (int64_t j = 0; j < n; j++)
      y[r * n + j] = (get(x, r * n + j) - mu) * rs * (w ? w[j] : 1) + (b ? b[j] : 0);
    mean[r] = mu;
    rstd[r] = rs;
  }
}

static void row_norm_backward_twin(const tensor *gy, const tensor *x, const double *w, const double *mean,
                                   const double *rstd, int64_t rows, int64_t n, int rms, double *gx,
                                   double *dw, double *db) {
  for (int64_t j = 0; j < n; j++) dw[j] = db[j] = 0;
  for (int64_t r = 0; r < rows; r++) {
    long double sg = 0, sgx = 0;
    double mu = rms ? 0 : mean[r], rs = rstd[r];
    for (int64_t j = 0; j < n; j++) {
      double g = get(gy, r * n + j) * (w ? w[j] : 1), xh = (get(x, r * n + j) - mu) * rs;
      sg += g;
      sgx += g * xh;
      dw[j] += get(gy, r * n + j) * xh;
      db[j] += get(gy, r * n + j);
    }
    for (int64_t j = 0; j < n; j++) {
      double g = get(gy, r * n + j) * (w ? w[j] : 1), xh = (get(x, r * n + j) - mu) * rs;
      gx[r * n + j] = rs * (g - (rms ? 0 : (double)(sg / n)) - xh * (double)(sgx / n));
    }
  }
}

static void check_row_norm(int64_t rows, int64_t n, nrt_dtype t, int rms, int with_weights) {
  double eps = 1e-5;
  tensor x = make(t, 2, (int64_t[]){rows, n}, NULL, 0), y = make(t, 2, (int64_t[]){rows, n}, NULL, 0);
  tensor gy = make(t, 2, (int64_t[]){rows, n}, NULL, 0), gx = make(t, 2, (int64_t[]){rows, n}, NULL, 0);
  tensor w = make1(NRT_FLOAT32, n), b = make1(NRT_FLOAT32, n), dw = make1(NRT_FLOAT32, n), db = make1(NRT_FLOAT32, n);
  tensor mean = make1(t, rows), rstd = make1(t, rows);
  fill(&x, 3, 5); /* an offset mean: the two-pass statistics keep the variance exact */
  fill(&gy, -1, 1);
  fill(&w, 0.5, 1.5);
  fill(&b, -1, 1);
  int64_t total = rows * n;
  double *ry = calloc((size_t)(total + 1), sizeof(double)), *rgx = calloc((size_t)(total + 1), sizeof(double));
  double *rm = calloc((size_t)(rows + 1), sizeof(double)), *rr = calloc((size_t)(rows + 1), sizeof(double));
  double *wv = calloc((size_t)n + 1, sizeof(double)), *bv = calloc((size_t)n + 1, sizeof(double));
  double *rdw = calloc((size_t)n + 1, sizeof(double)), *rdb = calloc((size_t)n + 1, sizeof(double));
  for (int64_t j = 0; j < n; j++) wv[j] = get(&w, j), bv[j] = get(&b, j);
  nrt_tensor_view wview = with_weights ? w.view : absent(), bview = with_weights ? b.view : absent();
  nrt_scalar sc[1] = {fs(eps)};
  if (rms) {
    nrt_tensor_view ops[4] = {y.view, rstd.view, x.view, wview};
    CHECK_OK(run(NRT_OP_RMS_NORM, 2, 4, ops, 1, sc));
  } else {
    nrt_tensor_view ops[6] = {y.view, mean.view, rstd.view, x.view, wview, bview};
    CHECK_OK(run(NRT_OP_LAYER_NORM, 3, 6, ops, 1, sc));
  }
  row_norm_twin(&x, with_weights ? wv : NULL, with_weights && !rms ? bv : NULL, rows, n, eps, rms, ry, rm, rr);
  CHECK(close_to(&y, ry, t));
  CHECK(close_to(&rstd, rr, t));
  if (!rms) CHECK(close_to(&mean, rm, t));
  /* backward with the kernel's own statistics */
  for (int64_t r = 0; r < rows; r++) rm[r] = rms ? 0 : get(&mean, r), rr[r] = get(&rstd, r);
  if (rms) {
    nrt_tensor_view ops[6] = {gx.view, with_weights ? dw.view : absent(), gy.view, x.view, rstd.view, wview};
    CHECK_OK(run(NRT_OP_RMS_NORM_BACKWARD, 2, 6, ops, 0, NULL));
  } else {
    nrt_tensor_view ops[8] = {gx.view, with_weights ? dw.view : absent(), with_weights ? db.view : absent(),
                              gy.view, x.view, mean.view, rstd.view, wview};
    CHECK_OK(run(NRT_OP_LAYER_NORM_BACKWARD, 3, 8, ops, 0, NULL));
  }
  row_norm_backward_twin(&gy, &x, with_weights ? wv : NULL, rm, rr, rows, n, rms, rgx, rdw, rdb);
  CHECK(close_to(&gx, rgx, t));
  if (with_weights) {
    CHECK(close_to(&dw, rdw, rows > 64 ? NRT_BFLOAT16 : NRT_FLOAT32)); /* float32 weights */
    if (!rms) CHECK(close_to(&db, rdb, rows > 64 ? NRT_BFLOAT16 : NRT_FLOAT32));
  }
  free(ry), free(rgx), free(rm), free(rr), free(wv), free(bv), free(rdw), free(rdb);
  release(&x), release(&y), release(&gy), release(&gx), release(&w), release(&b), release(&dw), release(&db);
  release(&mean), release(&rstd);
}

static void test_layer_and_rms_norm_match_twin(void) {
  for (int rms = 0; rms < 2; rms++) {
    check_row_norm(7, 33, NRT_FLOAT32, rms, 1);
    check_row_norm(7, 33, NRT_FLOAT64, rms, 1);
    check_row_norm(5, 16, NRT_FLOAT32, rms, 0);
    check_row_norm(300, 2100, NRT_FLOAT32, rms, 1); /* many row blocks, long rows */
    check_row_norm(0, 8, NRT_FLOAT32, rms, 1);
  }
}

/* Contiguous bfloat16 rows take their own row loop (conversions inside it):
 * bitwise the float32 kernel on the widened input, its output rounded once
 * to bfloat16 (round to nearest even), and the same float32 statistics. */
static uint16_t bf16_rounded(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0u;
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static void check_bf16_row_norm_bitwise(int64_t rows, int64_t n, int rms, int with_weights) {
  const int64_t shape[2] = {rows, n};
  tensor x16 = make(NRT_BFLOAT16, 2, shape, NULL, 0), y16 = make(NRT_BFLOAT16, 2, shape, NULL, 0);
  tensor x32 = make(NRT_FLOAT32, 2, shape, NULL, 0), y32 = make(NRT_FLOAT32, 2, shape, NULL, 0);
  tensor w = make1(NRT_FLOAT32, n), b = make1(NRT_FLOAT32, n);
  tensor m16 = make1(NRT_FLOAT32, rows), r16 = make1(NRT_FLOAT32, rows);
  tensor m32 = make1(NRT_FLOAT32, rows), r32 = make1(NRT_FLOAT32, rows);
  fill(&x16, -3, 7);
  for (int64_t i = 0; i < rows * n; i++) set(&x32, i, get(&x16, i));
  fill(&w, 0.5, 1.5);
  fill(&b, -1, 1);
  nrt_tensor_view wview = with_weights ? w.view : absent(), bview = with_weights ? b.view : absent();
  nrt_scalar sc[1] = {fs(1e-5)};
  for (int k = 0; k < 2; k++) {
    tensor *y = k ? &y32 : &y16, *x = k ? &x32 : &x16, *m = k ? &m32 : &m16, *r = k ? &r32 : &r16;
    if (rms) {
      nrt_tensor_view ops[4] = {y->view, r->view, x->view, wview};
      CHECK_OK(run(NRT_OP_RMS_NORM, 2, 4, ops, 1, sc));
    } else {
      nrt_tensor_view ops[6] = {y->view, m->view, r->view, x->view, wview, bview};
      CHECK_OK(run(NRT_OP_LAYER_NORM, 3, 6, ops, 1, sc));
    }
  }
  int64_t bad = 0;
  for (int64_t i = 0; i < rows * n; i++)
    bad += ((const uint16_t *)(const void *)y16.host)[i] != bf16_rounded(((const float *)(const void *)y32.host)[i]);
  CHECK(bad == 0);
  CHECK(memcmp(r16.host, r32.host, (size_t)rows * 4) == 0);
  if (!rms) CHECK(memcmp(m16.host, m32.host, (size_t)rows * 4) == 0);
  release(&x16), release(&y16), release(&x32), release(&y32), release(&w), release(&b);
  release(&m16), release(&r16), release(&m32), release(&r32);
}

static void test_bf16_row_norm_matches_float32_bitwise(void) {
  const int64_t ns[] = {1, 7, 33, 768, 2100}; /* 2100: past a flush window of the sums */
  for (int rms = 0; rms < 2; rms++)
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) check_bf16_row_norm_bitwise(9, ns[k], rms, k % 2 == 0);
  check_bf16_row_norm_bitwise(300, 768, 0, 1); /* several threads' rows */
}

/* ---- group norm ----------------------------------------------------------------------- */

static void test_group_norm_matches_twin(void) {
  const int64_t B = 3, C = 6, S = 10, G = 3, D = C / G;
  for (int ti = 0; ti < 2; ti++) {
    nrt_dtype t = ti ? NRT_FLOAT64 : NRT_FLOAT32;
    int64_t shape[3] = {B, C, S};
    tensor x = make(t, 3, shape, NULL, 0), y = make(t, 3, shape, NULL, 0), gy = make(t, 3, shape, NULL, 0);
    tensor gx = make(t, 3, shape, NULL, 0), w = make1(t, C), b = make1(t, C), dw = make1(t, C), db = make1(t, C);
    tensor mean = make1(t, B * G), rstd = make1(t, B * G);
    fill(&x, -2, 4), fill(&gy, -1, 1), fill(&w, 0.5, 1.5), fill(&b, -1, 1);
    nrt_scalar sc[2] = {is(G), fs(1e-5)};
    nrt_tensor_view fops[6] = {y.view, mean.view, rstd.view, x.view, w.view, b.view};
    CHECK_OK(run(NRT_OP_GROUP_NORM, 3, 6, fops, 2, sc));
    nrt_tensor_view bops[8] = {gx.view, dw.view, db.view, gy.view, x.view, mean.view, rstd.view, w.view};
    CHECK_OK(run(NRT_OP_GROUP_NORM_BACKWARD, 3, 8, bops, 1, sc));
    double ry[B * C * S], rgx[B * C * S], rdw[C], rdb[C];
    memset(rdw, 0, sizeof rdw), memset(rdb, 0, sizeof rdb);
    for (int64_t n = 0; n < B; n++)
      for (int64_t g = 0; g < G; g++) {
        long double s = 0, s2 = 0, sg = 0, sgx = 0;
        int64_t base = (n * C + g * D) * S, cnt = D * S;
        for (int64_t i = 0; i < cnt; i++) s += get(&x, base + i);
        double mu = (double)(s / cnt);
        for (int64_t i = 0; i < cnt; i++) s2 += (long double)(get(&x, base + i) - mu) * (get(&x, base + i) - mu);
        double rs = 1 / sqrt((double)(s2 / cnt) + 1e-5);
        for (int64_t i = 0; i < cnt; i++) {
          int64_t ch = g * D + i / S;
          double xh = (get(&x, base + i) - mu) * rs, gw = get(&gy, base + i) * get(&w, ch);
          ry[base + i] = xh * get(&w, ch) + get(&b, ch);
          sg += gw;
          sgx += gw * xh;
          rdw[ch] += get(&gy, base + i) * xh;
          rdb[ch] += get(&gy, base + i);
        }
        for (int64_t i = 0; i < cnt; i++) {
          int64_t ch = g * D + i / S;
          double xh = (get(&x, base + i) - mu) * rs;
          rgx[base + i] = rs * (get(&gy, base + i) * get(&w, ch) - (double)(sg / cnt) - xh * (double)(sgx / cnt));
        }
      }
    CHECK(close_to(&y, ry, t));
    CHECK(close_to(&gx, rgx, t));
    CHECK(close_to(&dw, rdw, t));
    CHECK(close_to(&db, rdb, t));
    release(&x), release(&y), release(&gy), release(&gx), release(&w), release(&b), release(&dw), release(&db);
    release(&mean), release(&rstd);
  }
}

/* ---- batch norm ------------------------------------------------------------------------- */

/* [B, C, S] as NCHW or channels-last strides. */
static tensor bn_tensor(int64_t B, int64_t C, int64_t S, int channels_last, nrt_dtype t) {
  int64_t shape[3] = {B, C, S};
  if (!channels_last) return make(t, 3, shape, NULL, 0);
  int64_t strides[3] = {S * C, 1, C};
  return make(t, 3, shape, strides, 0);
}

static void check_batch_norm(int64_t B, int64_t C, int64_t S, int channels_last, int training, nrt_dtype t) {
  const double eps = 1e-5, momentum = 0.1;
  tensor x = bn_tensor(B, C, S, channels_last, t), y = bn_tensor(B, C, S, channels_last, t);
  tensor gy = bn_tensor(B, C, S, channels_last, t), gx = bn_tensor(B, C, S, channels_last, t);
  tensor w = make1(NRT_FLOAT32, C), b = make1(NRT_FLOAT32, C), rm = make1(NRT_FLOAT32, C), rv = make1(NRT_FLOAT32, C);
  nrt_dtype st = t == NRT_FLOAT64 ? t : NRT_FLOAT32; /* saved statistics */
  tensor sm = make1(st, C), si = make1(st, C), dw = make1(NRT_FLOAT32, C), db = make1(NRT_FLOAT32, C);
  fill(&x, 1, 3), fill(&gy, -1, 1), fill(&w, 0.5, 1.5), fill(&b, -1, 1), fill(&rm, 1, 2), fill(&rv, 0.5, 1);
  int64_t cnt = B * S, total = B * C * S;
  double *ry = malloc((size_t)(total + 1) * sizeof(double)), *rgx = malloc((size_t)(total + 1) * sizeof(double));
  double *mean = malloc((size_t)C * sizeof(double)), *inv = malloc((size_t)C * sizeof(double));
  double *rrm = malloc((size_t)C * sizeof(double)), *rrv = malloc((size_t)C * sizeof(double));
  double *rdw = malloc((size_t)C * sizeof(double)), *rdb = malloc((size_t)C * sizeof(double));
#define X(n, c, s) get(&x, ((n) * C + (c)) * S + (s))
#define GY(n, c, s) get(&gy, ((n) * C + (c)) * S + (s))
  for (int64_t c = 0; c < C; c++) {
    long double s1 = 0, s2 = 0;
    for (int64_t n = 0; n < B; n++)
      for (int64_t s = 0; s < S; s++) s1 += X(n, c, s);
    double mu = (double)(s1 / cnt);
    for (int64_t n = 0; n < B; n++)
      for (int64_t s = 0; s < S; s++) s2 += (long double)(X(n, c, s) - mu) * (X(n, c, s) - mu);
    double var = (double)(s2 / cnt);
    mean[c] = training ? mu : get(&rm, c);
    inv[c] = 1 / sqrt((training ? var : get(&rv, c)) + eps);
    rrm[c] = training ? (1 - momentum) * get(&rm, c) + momentum * mu : get(&rm, c);
    rrv[c] = training ? (1 - momentum) * get(&rv, c) + momentum * (double)(s2 / (cnt - 1)) : get(&rv, c);
    long double dy = 0, dot = 0;
    for (int64_t n = 0; n < B; n++)
      for (int64_t s = 0; s < S; s++) {
        ry[(n * C + c) * S + s] = (X(n, c, s) - mean[c]) * inv[c] * get(&w, c) + get(&b, c);
        dy += GY(n, c, s);
        dot += GY(n, c, s) * (X(n, c, s) - mean[c]);
      }
    rdw[c] = (double)dot * inv[c];
    rdb[c] = (double)dy;
    for (int64_t n = 0; n < B; n++)
      for (int64_t s = 0; s < S; s++) {
        double g = GY(n, c, s);
        if (training)
          g = g - (double)dy / cnt - (X(n, c, s) - mean[c]) * inv[c] * inv[c] * (double)dot / cnt;
        rgx[(n * C + c) * S + s] = g * inv[c] * get(&w, c);
      }
  }
#undef X
#undef GY
  nrt_scalar sc[3] = {is(training), fs(momentum), fs(eps)};
  nrt_tensor_view fops[8] = {y.view, training ? sm.view : absent(), training ? si.view : absent(), rm.view,
                             rv.view, x.view, w.view, b.view};
  CHECK_OK(run(NRT_OP_BATCH_NORM, 5, 8, fops, 3, sc));
  nrt_dtype tt = t; /* the output's precision */
  CHECK(close_to(&y, ry, tt));
  CHECK(close_to(&rm, rrm, NRT_FLOAT32));
  CHECK(close_to(&rv, rrv, NRT_FLOAT32));
  if (training) CHECK(close_to(&si, inv, NRT_FLOAT32));
  /* backward: training reads the saved statistics, evaluation the running ones (unchanged) */
  nrt_scalar bsc[2] = {is(training), fs(eps)};
  nrt_tensor_view bops[8] = {gx.view,          dw.view,          db.view, gy.view, x.view, w.view,
                             training ? sm.view : rm.view, training ? si.view : rv.view};
  CHECK_OK(run(NRT_OP_BATCH_NORM_BACKWARD, 3, 8, bops, 2, bsc));
  CHECK(close_to(&gx, rgx, tt));
  CHECK(close_to(&dw, rdw, NRT_FLOAT32));
  CHECK(close_to(&db, rdb, NRT_FLOAT32));
  free(ry), free(rgx), free(mean), free(inv), free(rrm), free(rrv), free(rdw), free(rdb);
  release(&x), release(&y), release(&gy), release(&gx), release(&w), release(&b), release(&rm), release(&rv);
  release(&sm), release(&si), release(&dw), release(&db);
}

static void test_batch_norm_matches_twin(void) {
  for (int training = 0; training < 2; training++)
    for (int cl = 0; cl < 2; cl++) {
      check_batch_norm(4, 5, 12, cl, training, NRT_FLOAT32);
      check_batch_norm(3, 70, 9, cl, training, NRT_FLOAT64); /* two channel blocks when channels-last */
    }
  check_batch_norm(16, 3, 1, 0, 1, NRT_FLOAT32); /* [batch, channels] input */
  check_batch_norm(8, 2, 3000, 0, 1, NRT_BFLOAT16);
}

/* ---- nll_loss --------------------------------------------------------------------------- */

static void check_nll(int64_t B, int64_t C, int64_t S, int reduction, int with_weight, nrt_dtype t) {
  const int64_t ignore = 1;
  tensor x = make(t, 3, (int64_t[]){B, C, S}, NULL, 0), tg = make(NRT_INT64, 2, (int64_t[]){B, S}, NULL, 0);
  tensor w = make1(t, C), tw = make1(t, 1), gx = make(t, 3, (int64_t[]){B, C, S}, NULL, 0);
  tensor out = reduction ? make1(t, 1) : make(t, 2, (int64_t[]){B, S}, NULL, 0);
  tensor go = reduction ? make1(t, 1) : make(t, 2, (int64_t[]){B, S}, NULL, 0);
  fill(&x, -3, 0), fill(&w, 0.5, 2), fill(&go, -1, 1);
  for (int64_t p = 0; p < B * S; p++) set(&tg, p, (double)(int64_t)(uniform() * (double)C));
  nrt_scalar sc[2] = {is(reduction), is(ignore)};
  nrt_tensor_view fops[5] = {out.view, tw.view, x.view, tg.view, with_weight ? w.view : absent()};
  CHECK_OK(run(NRT_OP_NLL_LOSS, 2, 5, fops, 2, sc));
  double *loss = malloc((size_t)(B * S + 1) * sizeof(double)), *rgx = calloc((size_t)(B * C * S + 1), sizeof(double));
  long double total = 0, weight = 0;
  for (int64_t n = 0; n < B; n++)
    for (int64_t s = 0; s < S; s++) {
      int64_t target = (int64_t)get(&tg, n * S + s);
      double wt = target == ignore ? 0 : with_weight ? get(&w, target) : 1;
      loss[n * S + s] = target == ignore ? 0 : -wt * get(&x, (n * C + target) * S + s);
      total += loss[n * S + s];
      weight += wt;
    }
  double reduced = reduction == 1 ? (double)(total / weight) : (double)total;
  if (reduction) {
    CHECK(close_to(&out, &reduced, t));
    double rw = (double)weight;
    CHECK(close_to(&tw, &rw, t));
  } else {
    CHECK(close_to(&out, loss, t));
  }
  nrt_tensor_view bops[5] = {gx.view, go.view, tg.view, with_weight ? w.view : absent(), tw.view};
  set(&gx, 0, 123.0); /* the kernel writes every element */
  CHECK_OK(run(NRT_OP_NLL_LOSS_BACKWARD, 1, 5, bops, 2, sc));
  for (int64_t n = 0; n < B; n++)
    for (int64_t s = 0; s < S; s++) {
      int64_t target = (int64_t)get(&tg, n * S + s);
      if (target == ignore) continue;
      double g = reduction ? get(&go, 0) : get(&go, n * S + s);
      if (reduction == 1) g /= get(&tw, 0);
      rgx[(n * C + target) * S + s] = -(with_weight ? get(&w, target) : 1) * g;
    }
  CHECK(close_to(&gx, rgx, t));
  free(loss), free(rgx);
  release(&x), release(&tg), release(&w), release(&tw), release(&gx), release(&out), release(&go);
}

static void test_nll_loss_matches_twin(void) {
  for (int reduction = 0; reduction < 3; reduction++)
    for (int ww = 0; ww < 2; ww++) {
      check_nll(9, 5, 1, reduction, ww, NRT_FLOAT32);
      check_nll(3, 4, 7, reduction, ww, NRT_FLOAT64);
    }
  check_nll(5000, 3, 2, 1, 1, NRT_FLOAT32); /* several position blocks */
}

static void test_nll_loss_rejects_bad_targets(void) {
  tensor x = make(NRT_FLOAT32, 3, (int64_t[]){2, 3, 1}, NULL, 0), tg = make(NRT_INT64, 2, (int64_t[]){2, 1}, NULL, 0);
  tensor out = make1(NRT_FLOAT32, 1), tw = make1(NRT_FLOAT32, 1);
  set(&tg, 0, 1), set(&tg, 1, 3);
  nrt_scalar sc[2] = {is(1), is(-100)};
  nrt_tensor_view ops[5] = {out.view, tw.view, x.view, tg.view, absent()};
  CHECK_STATUS(run(NRT_OP_NLL_LOSS, 2, 5, ops, 2, sc), NRT_ERROR_INDEX_OUT_OF_RANGE);
  CHECK(strstr(nrt_last_error(), "Target 3 is out of bounds") != NULL);
  set(&tg, 1, -1);
  CHECK_STATUS(run(NRT_OP_NLL_LOSS, 2, 5, ops, 2, sc), NRT_ERROR_INDEX_OUT_OF_RANGE);
  sc[1] = is(-1); /* the ignored index is not checked */
  CHECK_OK(run(NRT_OP_NLL_LOSS, 2, 5, ops, 2, sc));
  release(&x), release(&tg), release(&out), release(&tw);
}

/* ---- pointwise losses ---------------------------------------------------------------------- */

static double loss_twin(nrt_op_code code, double x, double y, double p) {
  double d = x - y, a = fabs(d);
  switch (code) {
    case NRT_OP_MSE_LOSS: return d * d;
    case NRT_OP_SMOOTH_L1_LOSS: return a < p ? 0.5 * d * d / p : a - 0.5 * p;
    case NRT_OP_HUBER_LOSS: return a < p ? 0.5 * d * d : p * (a - 0.5 * p);
    default: return -(y * fmax(log(x), -100) + (1 - y) * fmax(log1p(-x), -100)) * p; /* p: weight */
  }
}

static double grad_twin(nrt_op_code code, double g, double x, double y, double p, double scale) {
  double d = x - y;
  switch (code) {
    case NRT_OP_MSE_LOSS_BACKWARD: return scale * d * g;
    case NRT_OP_SMOOTH_L1_LOSS_BACKWARD: return d <= -p ? -scale * g : d >= p ? scale * g : scale * d * g / p;
    case NRT_OP_HUBER_LOSS_BACKWARD: return d <= -p ? -scale * g * p : d >= p ? scale * g * p : scale * d * g;
    default: return g * d / fmax((1 - x) * x, 1e-12) * p * scale;
  }
}

static void test_pointwise_losses_match_twin(void) {
  static const nrt_op_code fwd[4] = {NRT_OP_MSE_LOSS, NRT_OP_SMOOTH_L1_LOSS, NRT_OP_HUBER_LOSS,
                                     NRT_OP_BINARY_CROSS_ENTROPY};
  static const nrt_op_code bwd[4] = {NRT_OP_MSE_LOSS_BACKWARD, NRT_OP_SMOOTH_L1_LOSS_BACKWARD,
                                     NRT_OP_HUBER_LOSS_BACKWARD, NRT_OP_BINARY_CROSS_ENTROPY_BACKWARD};
  const int64_t n = 300;
  for (int ti = 0; ti < 2; ti++) {
    nrt_dtype t = ti ? NRT_FLOAT64 : NRT_FLOAT32;
    for (int k = 0; k < 4; k++) {
      int bce = k == 3;
      tensor x = make1(t, n), y = make1(t, n), w = make1(t, n), g = make1(t, n), out = make1(t, n);
      fill(&x, bce ? 0.01 : -3, bce ? 0.99 : 3), fill(&y, bce ? 0 : -3, bce ? 1 : 3), fill(&w, 0.5, 2);
      fill(&g, -1, 1);
      double p = 0.7, scale = 0.25, ref[300];
      nrt_tensor_view fops[4] = {out.view, x.view, y.view, w.view};
      nrt_scalar sc[2] = {fs(p), fs(scale)};
      CHECK_OK(run(fwd[k], 1, bce ? 4 : 3, fops, k == 1 || k == 2 ? 1 : 0, sc));
      for (int64_t i = 0; i < n; i++) ref[i] = loss_twin(fwd[k], get(&x, i), get(&y, i), bce ? get(&w, i) : p);
      CHECK(close_to(&out, ref, t));
      nrt_tensor_view bops[5] = {out.view, g.view, x.view, y.view, w.view};
      nrt_scalar bsc[2] = {fs(k == 0 || bce ? scale : p), fs(scale)};
      CHECK_OK(run(bwd[k], 1, bce ? 5 : 4, bops, k == 1 || k == 2 ? 2 : 1, bsc));
      for (int64_t i = 0; i < n; i++)
        ref[i] = grad_twin(bwd[k], get(&g, i), get(&x, i), get(&y, i), bce ? get(&w, i) : p, scale);
      CHECK(close_to(&out, ref, t));
      release(&x), release(&y), release(&w), release(&g), release(&out);
    }
  }
}

static void test_binary_cross_entropy_rejects_values_outside_unit_interval(void) {
  tensor x = make1(NRT_FLOAT32, 4), y = make1(NRT_FLOAT32, 4), w = make1(NRT_FLOAT32, 4), out = make1(NRT_FLOAT32, 4);
  fill(&x, 0.1, 0.9), fill(&y, 0, 1), fill(&w, 1, 1);
  set(&x, 2, 1.5);
  nrt_tensor_view ops[4] = {out.view, x.view, y.view, w.view};
  CHECK_STATUS(run(NRT_OP_BINARY_CROSS_ENTROPY, 1, 4, ops, 0, NULL), NRT_ERROR_ARITHMETIC);
  CHECK(strstr(nrt_last_error(), "between 0 and 1") != NULL);
  set(&x, 2, NAN);
  CHECK_STATUS(run(NRT_OP_BINARY_CROSS_ENTROPY, 1, 4, ops, 0, NULL), NRT_ERROR_ARITHMETIC);
  set(&x, 2, 0.5), set(&y, 0, -0.5);
  CHECK_STATUS(run(NRT_OP_BINARY_CROSS_ENTROPY, 1, 4, ops, 0, NULL), NRT_ERROR_ARITHMETIC);
  release(&x), release(&y), release(&w), release(&out);
}

static void test_bad_operands_fail_cleanly(void) {
  tensor x = make(NRT_INT64, 3, (int64_t[]){1, 4, 1}, NULL, 0), y = make(NRT_FLOAT32, 3, (int64_t[]){1, 4, 1}, NULL, 0);
  nrt_tensor_view ops[2] = {y.view, x.view};
  CHECK_STATUS(run(NRT_OP_SOFTMAX, 1, 2, ops, 0, NULL), NRT_ERROR_UNSUPPORTED);
  tensor z = make(NRT_FLOAT32, 3, (int64_t[]){1, 5, 1}, NULL, 0);
  nrt_tensor_view mismatch[2] = {y.view, z.view};
  CHECK_STATUS(run(NRT_OP_SOFTMAX, 1, 2, mismatch, 0, NULL), NRT_ERROR_INVALID_ARGUMENT);
  nrt_scalar sc[2] = {is(3), fs(1e-5)}; /* 4 channels do not split into 3 groups */
  tensor m = make1(NRT_FLOAT32, 3);
  nrt_tensor_view gops[6] = {y.view, m.view, m.view, y.view, absent(), absent()};
  CHECK_STATUS(run(NRT_OP_GROUP_NORM, 3, 6, gops, 2, sc), NRT_ERROR_INVALID_ARGUMENT);
  release(&x), release(&y), release(&z), release(&m);
}

/* ---- thread-count independence ----------------------------------------------------------- */

static int write_thread_case(void) {
  const char *path = getenv("NN_TEST_OUT");
  FILE *f = path ? fopen(path, "wb") : NULL;
  if (!f) return 1;
  rng_state = 777;
  const int64_t rows = 700, n = 1500;
  tensor x = make(NRT_FLOAT32, 2, (int64_t[]){rows, n}, NULL, 0), gy = make(NRT_FLOAT32, 2, (int64_t[]){rows, n}, NULL, 0);
  tensor y = make(NRT_FLOAT32, 2, (int64_t[]){rows, n}, NULL, 0), w = make1(NRT_FLOAT32, n), b = make1(NRT_FLOAT32, n);
  tensor dw = make1(NRT_FLOAT32, n), db = make1(NRT_FLOAT32, n), mean = make1(NRT_FLOAT32, rows), rstd = make1(NRT_FLOAT32, rows);
  fill(&x, -1, 3), fill(&gy, -1, 1), fill(&w, 0.5, 1.5), fill(&b, -1, 1);
  nrt_scalar eps[1] = {fs(1e-5)};
  nrt_tensor_view lops[6] = {y.view, mean.view, rstd.view, x.view, w.view, b.view};
  nrt_tensor_view bops[8] = {y.view, dw.view, db.view, gy.view, x.view, mean.view, rstd.view, w.view};
  int ok = run(NRT_OP_LAYER_NORM, 3, 6, lops, 1, eps) == NRT_SUCCESS &&
           run(NRT_OP_LAYER_NORM_BACKWARD, 3, 8, bops, 0, NULL) == NRT_SUCCESS;
  fwrite(y.host, 4, (size_t)(rows * n), f), fwrite(dw.host, 4, (size_t)n, f), fwrite(db.host, 4, (size_t)n, f);
  /* batch norm over [rows, 3, n / 3]: long channel sums */
  tensor bx = make(NRT_FLOAT32, 3, (int64_t[]){rows, 3, n / 3}, NULL, 0), by = make(NRT_FLOAT32, 3, (int64_t[]){rows, 3, n / 3}, NULL, 0);
  tensor sm = make1(NRT_FLOAT32, 3), si = make1(NRT_FLOAT32, 3);
  fill(&bx, -1, 3);
  nrt_scalar bsc[3] = {is(1), fs(0.1), fs(1e-5)};
  nrt_tensor_view nops[8] = {by.view, sm.view, si.view, absent(), absent(), bx.view, absent(), absent()};
  ok = ok && run(NRT_OP_BATCH_NORM, 5, 8, nops, 3, bsc) == NRT_SUCCESS;
  fwrite(sm.host, 4, 3, f), fwrite(si.host, 4, 3, f), fwrite(by.host, 4, (size_t)(rows * n), f);
  /* nll_loss mean over many positions */
  tensor tg = make(NRT_INT64, 2, (int64_t[]){rows * 10, 1}, NULL, 0), out = make1(NRT_FLOAT32, 1), tw = make1(NRT_FLOAT32, 1);
  for (int64_t p = 0; p < rows * 10; p++) set(&tg, p, (double)(p % 3));
  nrt_tensor_view xl = bx.view;
  xl.shape[0] = rows * 10, xl.shape[1] = 3, xl.shape[2] = 1, xl.strides[0] = 3, xl.strides[1] = 1;
  nrt_scalar lsc[2] = {is(1), is(-100)};
  nrt_tensor_view llops[5] = {out.view, tw.view, xl, tg.view, absent()};
  ok = ok && run(NRT_OP_NLL_LOSS, 2, 5, llops, 2, lsc) == NRT_SUCCESS;
  fwrite(out.host, 4, 1, f);
  fclose(f);
  return ok ? check_failures : 1;
}

static void test_thread_count_independence(void) {
  CHECK(child_results_agree_across_threads("NN_TEST_OUT", "nn"));
}

int main(int argc, char **argv) {
  if (child_is_case(argc, argv)) return write_thread_case();
  RUN(test_softmax_matches_twin);
  RUN(test_softmax_of_infinite_rows);
  RUN(test_masked_softmax_matches_twin);
  RUN(test_layer_and_rms_norm_match_twin);
  RUN(test_bf16_row_norm_matches_float32_bitwise);
  RUN(test_group_norm_matches_twin);
  RUN(test_batch_norm_matches_twin);
  RUN(test_nll_loss_matches_twin);
  RUN(test_nll_loss_rejects_bad_targets);
  RUN(test_pointwise_losses_match_twin);
  RUN(test_binary_cross_entropy_rejects_values_outside_unit_interval);
  RUN(test_bad_operands_fail_cleanly);
  RUN(test_embedding_bag_matches_twin);
  RUN(test_embedding_bag_rows_match_reference);
  RUN(test_renorm_matches_twin);
  RUN(test_histc_matches_twin);
  RUN(test_thread_count_independence);
  return CHECK_MAIN_RESULT();
}
