/* The reduction and scan kernels against a reference twin.
 *
 * The twin is plain code written from the op definitions: it walks the
 * input in row-major order, element by element, through the view's
 * strides, and folds each element into its output in long double (or
 * wrapping uint64 for integers). Test values are multiples of 1/2 (or
 * powers of two for products), so sums, products and means are exact and
 * compared bit for bit; var, norm and logsumexp are compared within a
 * tolerance. Geometries cover row mode, column mode, strided views, split
 * reductions, empty and 0-d inputs; a child process per thread count checks
 * that results are bitwise identical for 1 and 3 kernel threads.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "child.h"
#include "ops/reduce/reduce.h"

/* ---- element access (independent of the runtime's converters) ---------- */

static double half_value(uint16_t h) {
  double sign = (h & 0x8000) ? -1.0 : 1.0;
  int exp = (h >> 10) & 31, mant = h & 1023;
  if (exp == 31) return mant ? NAN : sign * INFINITY;
  if (exp == 0) return sign * ldexp(mant, -24);
  return sign * ldexp(1024 + mant, exp - 25);
}

static double bf16_value(uint16_t b) {
  uint32_t bits = (uint32_t)b << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

/* v, exactly representable in float16, encoded. */
static uint16_t half_of(double v) {
  if (v != v) return 0x7e00;
  uint16_t sign = v < 0 ? 0x8000 : 0;
  v = fabs(v);
  if (v == 0) return sign;
  if (isinf(v)) return sign | 0x7c00;
  if (v < 0x1p-14) return (uint16_t)(sign | (uint16_t)rint(v * 0x1p24)); /* subnormal */
  int e;
  double m = frexp(v, &e); /* v = m 2^e, m in [0.5, 1) */
  return (uint16_t)(sign | ((e + 14) << 10) | (uint16_t)((m * 2 - 1) * 1024));
}

static uint16_t bf16_of(double v) {
  float f = (float)v;
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  return (uint16_t)(bits >> 16);
}

static size_t elem_size(nrt_dtype t) {
  static const size_t sizes[] = {1, 1, 1, 2, 4, 8, 2, 2, 4, 8};
  return sizes[t];
}

static double read_value(nrt_dtype t, const void *p) {
  switch (t) {
    case NRT_BOOL: return *(const uint8_t *)p != 0;
    case NRT_UINT8: return *(const uint8_t *)p;
    case NRT_INT8: return *(const int8_t *)p;
    case NRT_INT16: return *(const int16_t *)p;
    case NRT_INT32: return *(const int32_t *)p;
    case NRT_INT64: return (double)*(const int64_t *)p;
    case NRT_FLOAT16: return half_value(*(const uint16_t *)p);
    case NRT_BFLOAT16: return bf16_value(*(const uint16_t *)p);
    case NRT_FLOAT32: return *(const float *)p;
    default: return *(const double *)p;
  }
}

static int64_t read_int(nrt_dtype t, const void *p) {
  return t == NRT_INT64 ? *(const int64_t *)p : (int64_t)read_value(t, p);
}

static void write_value(nrt_dtype t, void *p, double v) {
  switch (t) {
    case NRT_BOOL: *(uint8_t *)p = v != 0; break;
    case NRT_UINT8: *(uint8_t *)p = (uint8_t)v; break;
    case NRT_INT8: *(int8_t *)p = (int8_t)v; break;
    case NRT_INT16: *(int16_t *)p = (int16_t)v; break;
    case NRT_INT32: *(int32_t *)p = (int32_t)v; break;
    case NRT_INT64: *(int64_t *)p = (int64_t)v; break;
    case NRT_FLOAT16: *(uint16_t *)p = half_of(v); break;
    case NRT_BFLOAT16: *(uint16_t *)p = bf16_of(v); break;
    case NRT_FLOAT32: *(float *)p = (float)v; break;
    default: *(double *)p = v; break;
  }
}

/* The exact double v rounded to dtype t (ties to even), as a double. */
static double round_to(nrt_dtype t, double v) {
  if (t == NRT_FLOAT64) return v;
  v = (float)v; /* PyTorch reaches 16-bit floats through float */
  if (t == NRT_FLOAT32 || v != v || isinf(v) || v == 0) return v;
  int bits = t == NRT_FLOAT16 ? 11 : 8, e;
  int min_exp = t == NRT_FLOAT16 ? -13 : -125;
  frexp(v, &e);
  if (e < min_exp) e = min_exp;
  double q = ldexp(1.0, e - bits);
  double r = rint(v / q) * q;
  if (fabs(r) > (t == NRT_FLOAT16 ? 65504 : 3.3895313892515355e38)) return copysign(INFINITY, v);
  return r;
}

/* An integer result as an integer dtype t holds it (wrapping). */
static int64_t narrow(nrt_dtype t, int64_t v) {
  switch (t) {
    case NRT_BOOL: return v != 0;
    case NRT_UINT8: return (uint8_t)v;
    case NRT_INT8: return (int8_t)v;
    case NRT_INT16: return (int16_t)v;
    case NRT_INT32: return (int32_t)v;
    default: return v;
  }
}

static int is_float(nrt_dtype t) { return t >= NRT_FLOAT16; }

/* ---- device tensors -------------------------------------------------- */

typedef struct tensor {
  void *dev;
  char *host;
  nrt_tensor_view view;
} tensor;

/* A tensor of `shape` viewed with `strides` (NULL: contiguous) over a
 * buffer of `storage` elements. */
static tensor make_tensor(nrt_dtype t, int ndim, const int64_t *shape, const int64_t *strides,
                          int64_t storage) {
  tensor x;
  memset(&x, 0, sizeof x);
  size_t bytes = (size_t)(storage > 0 ? storage : 1) * elem_size(t);
  CHECK_OK(nrt_malloc(0, bytes, &x.dev));
  x.host = nrt_device_to_host(x.dev);
  memset(x.host, 0, bytes);
  x.view.data = x.dev;
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

static void free_tensor(tensor *x) { CHECK_OK(nrt_free(x->dev)); }

static int64_t numel_of(const nrt_tensor_view *v) {
  int64_t n = 1;
  for (int d = 0; d < v->ndim; d++) n *= v->shape[d];
  return n;
}

/* Host address of the element at logical row-major index i. */
static char *element(const tensor *x, int64_t i) {
  int64_t off = 0;
  for (int d = x->view.ndim - 1; d >= 0; d--) {
    off += (i % x->view.shape[d]) * x->view.strides[d];
    i /= x->view.shape[d];
  }
  return x->host + off * (int64_t)elem_size(x->view.dtype);
}

static uint64_t rng_state = 88172645463325252ull;
static uint64_t rng(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

/* Fills the logical elements: halves in [-4, 4] (signed), [0, 8]
 * (unsigned), 0/1 (bool), or powers of two for products. */
static void fill_values(tensor *x, int for_product) {
  nrt_dtype t = x->view.dtype;
  int64_t n = numel_of(&x->view);
  for (int64_t i = 0; i < n; i++) {
    double v;
    uint64_t r = rng();
    if (t == NRT_BOOL)
      v = (double)(r % 4 != 0);
    else if (for_product)
      v = (double[]){1, -1, 2, is_float(t) ? 0.5 : 1, is_float(t) ? -0.5 : -1}[r % 5];
    else if (t == NRT_UINT8)
      v = (double)(r % 9);
    else
      v = (double)((int)(r % 17) - 8) / (is_float(t) ? 2.0 : 1.0);
    if (t == NRT_UINT8 && v < 0) v = -v;
    write_value(t, element(x, i), v);
  }
}

static nrt_status run_op(nrt_op_code code, int nout, tensor *outs, const tensor *in,
                         int nscalars, const double *scalars) {
  nrt_op op;
  memset(&op, 0, sizeof op);
  op.code = code;
  op.num_outputs = nout;
  op.num_operands = nout + 1;
  for (int k = 0; k < nout; k++) op.operands[k] = outs[k].view;
  op.operands[nout] = in->view;
  op.num_scalars = nscalars;
  for (int k = 0; k < nscalars; k++) {
    op.scalars[k].is_float = 1;
    op.scalars[k].f = scalars[k];
  }
  return nrt_op_execute(&op);
}

/* ---- the reference twin ------------------------------------------------- */

typedef struct ref_acc {
  long double sum, sum2, squares;
  uint64_t wrap; /* integer sum or product, wrapping */
  long double prod;
  int64_t count, nonzero;
  double best;
  int64_t best_index;
  int has_nan;
} ref_acc;

/* Which dims of in reduce to out (keepdim shapes); output index of
 * logical input index i, and its reduction index. */
static void locate(const nrt_tensor_view *in, const nrt_tensor_view *out, int64_t i,
                   int64_t *out_index, int64_t *red_index) {
  int64_t o = 0, r = 0, ostep = 1, rstep = 1;
  for (int d = in->ndim - 1; d >= 0; d--) {
    int64_t pos = i % in->shape[d];
    i /= in->shape[d];
    if (out->shape[d] == 1 && in->shape[d] != 1) {
      r += pos * rstep;
      rstep *= in->shape[d];
    } else {
      o += pos * ostep;
      ostep *= out->shape[d];
    }
  }
  *out_index = o;
  *red_index = r;
}

typedef enum ref_kind { R_SUM, R_PROD, R_MEAN, R_NONZERO, R_ANY, R_ALL, R_MAX, R_MIN,
                        R_VAR, R_NORM, R_LSE } ref_kind;

/* Reference accumulators for every output of reducing `in` into `out`. */
static ref_acc *reference(const tensor *in, const nrt_tensor_view *out, ref_kind kind, double p) {
  int64_t nout = numel_of(out), n = numel_of(&in->view);
  ref_acc *acc = calloc((size_t)(nout > 0 ? nout : 1), sizeof *acc);
  for (int64_t j = 0; j < nout; j++) {
    acc[j].prod = 1;
    acc[j].wrap = kind == R_PROD;
    acc[j].best = kind == R_MIN ? INFINITY : -INFINITY;
    acc[j].best_index = -1;
  }
  int neg_inf_norm = kind == R_NORM && p == -INFINITY;
  for (int64_t i = 0; i < n; i++) {
    int64_t o, r;
    locate(&in->view, out, i, &o, &r);
    const char *e = element(in, i);
    double v = read_value(in->view.dtype, e);
    ref_acc *a = &acc[o];
    a->count++;
    a->sum += v;
    a->squares += (long double)v * v;
    a->prod *= v;
    a->nonzero += v != 0 || v != v;
    if (kind == R_PROD)
      a->wrap *= (uint64_t)read_int(in->view.dtype, e);
    else
      a->wrap += (uint64_t)read_int(in->view.dtype, e);
    if (kind == R_NORM) {
      double m = fabs(v);
      a->sum2 += p == 1 ? m : p == 2 ? (long double)m * m : powl(m, p);
      if (v != v) a->has_nan = 1;
      if (neg_inf_norm ? m < a->best || a->best_index < 0 : m > a->best) a->best = m, a->best_index = r;
      continue;
    }
    if (v != v) {
      if (!a->has_nan) a->best = v, a->best_index = r;
      a->has_nan = 1;
    } else if (!a->has_nan && (kind == R_MIN ? v < a->best : v > a->best)) {
      a->best = v;
      a->best_index = r;
    } else if (!a->has_nan && a->best_index < 0) {
      a->best = v; /* equal to the identity (an extreme value) */
      a->best_index = r;
    }
  }
  if (kind == R_LSE) /* second walk: sum of exp(x - max) */
    for (int64_t i = 0; i < n; i++) {
      int64_t o, r;
      locate(&in->view, out, i, &o, &r);
      double m = acc[o].best;
      if (isfinite(m)) acc[o].sum2 += expl(read_value(in->view.dtype, element(in, i)) - m);
    }
  return acc;
}

/* The reference result of output j as a double (for float outputs) or
 * int64 (integer outputs, through *iv). */
static double ref_result(ref_acc *a, ref_kind kind, double p, double correction, int take_sqrt) {
  switch (kind) {
    case R_SUM: return (double)a->sum;
    case R_PROD: return (double)a->prod;
    case R_MEAN: return (double)(a->sum / (long double)a->count);
    case R_NONZERO: return (double)a->nonzero;
    case R_ANY: return a->nonzero > 0;
    case R_ALL: return a->nonzero == a->count;
    case R_MAX:
    case R_MIN: return a->best;
    case R_VAR: {
      long double m2 = a->squares - a->sum * a->sum / (long double)a->count;
      double dof = (double)a->count - correction;
      double v = (double)(m2 / (dof > 0 ? dof : 0));
      return take_sqrt ? sqrt(v) : v;
    }
    case R_NORM:
      if (p == 0) return (double)a->nonzero;
      if (a->has_nan) return NAN;
      if (isinf(p)) return a->count ? a->best : 0;
      if (p == 1) return (double)a->sum2;
      if (p == 2) return (double)sqrtl(a->sum2);
      return (double)powl(a->sum2, 1.0L / p);
    case R_LSE:
      if (a->has_nan) return NAN;
      if (!isfinite(a->best)) return a->best;
      return (double)(a->best + logl(a->sum2));
  }
  return 0;
}

/* Compares output j of out with want (exact unless tol > 0: relative). */
static int same_result(const tensor *out, int64_t j, double want, int64_t want_int, double tol) {
  nrt_dtype t = out->view.dtype;
  const char *e = element(out, j);
  if (!is_float(t)) return read_int(t, e) == narrow(t, want_int);
  double got = read_value(t, e), r = round_to(t, want);
  if (r != r) return got != got;
  if (tol == 0 || isinf(r)) return got == r || (got == 0 && r == 0);
  return fabs(got - r) <= tol * (fabs(r) + 1e-30) + 1e-300;
}

/* ---- geometries --------------------------------------------------------- */

typedef struct geometry {
  const char *name;
  int ndim;
  int64_t shape[4], strides[4]; /* strides all 0: contiguous */
  int64_t storage;
  int64_t out_shape[4];         /* keepdim shape of the result */
} geometry;

static const geometry geometries[] = {
    {"full", 1, {1000}, {0}, 1000, {1}},
    {"rows", 2, {37, 129}, {0}, 37 * 129, {37, 1}},
    {"columns", 2, {37, 129}, {0}, 37 * 129, {1, 129}},
    {"transposed rows", 2, {37, 129}, {1, 37}, 37 * 129, {37, 1}},
    {"transposed columns", 2, {37, 129}, {1, 37}, 37 * 129, {1, 129}},
    {"transposed full", 2, {37, 129}, {1, 37}, 37 * 129, {1, 1}},
    {"outer and inner", 3, {6, 5, 40}, {0}, 6 * 5 * 40, {1, 5, 1}},
    {"middle", 3, {6, 50, 7}, {0}, 6 * 50 * 7, {6, 1, 7}},
    {"sliced rows", 2, {50, 32}, {64, 2}, 50 * 64, {50, 1}},
    {"sliced columns", 2, {50, 32}, {64, 2}, 50 * 64, {1, 32}},
    {"split full", 1, {100003}, {0}, 100003, {1}},
    {"split rows", 2, {3, 50001}, {0}, 3 * 50001, {3, 1}},
    {"split columns", 2, {50001, 3}, {0}, 3 * 50001, {1, 3}},
    {"wide columns", 2, {130, 1100}, {0}, 130 * 1100, {1, 1100}},
    {"size-1 dim", 3, {4, 1, 3}, {0}, 12, {4, 1, 3}},
    {"empty reduced", 2, {4, 0}, {0}, 0, {4, 1}},
    {"empty full", 1, {0}, {0}, 0, {1}},
    {"empty kept", 2, {0, 4}, {0}, 0, {0, 1}},
    {"scalar", 0, {0}, {0}, 1, {0}},
};
#define NUM_GEOMETRIES (int)(sizeof geometries / sizeof geometries[0])

/* Large geometries run for a few dtypes only, to keep the test fast. */
static int skip_large(const geometry *g, nrt_dtype t) {
  int64_t n = 1;
  for (int d = 0; d < g->ndim; d++) n *= g->shape[d];
  return n > 20000 && t != NRT_INT32 && t != NRT_BFLOAT16 && t != NRT_FLOAT32;
}

static int has_strides(const geometry *g) {
  for (int d = 0; d < g->ndim; d++)
    if (g->strides[d]) return 1;
  return 0;
}

static tensor input_of(const geometry *g, nrt_dtype t) {
  tensor x = make_tensor(t, g->ndim, g->shape, has_strides(g) ? g->strides : NULL, g->storage);
  if (g->storage == 0) x.view.data = NULL; /* as the shim passes empty tensors */
  return x;
}

static tensor output_of(const geometry *g, nrt_dtype t) {
  int64_t n = 1;
  for (int d = 0; d < g->ndim; d++) n *= g->out_shape[d];
  return make_tensor(t, g->ndim, g->out_shape, NULL, n);
}

static int reduces_empty(const geometry *g) {
  for (int d = 0; d < g->ndim; d++)
    if (g->shape[d] == 0 && g->out_shape[d] == 1) return 1;
  return 0;
}

/* Runs code on geometry g and checks every output against the twin. */
static void check_op(nrt_op_code code, ref_kind kind, const geometry *g, nrt_dtype in_t,
                     nrt_dtype out_t, int nout, int nscalars, const double *scalars, double tol) {
  tensor in = input_of(g, in_t);
  fill_values(&in, kind == R_PROD);
  if (kind == R_LSE || kind == R_VAR || (kind == R_NORM && scalars[0] != 0)) {
    int64_t n = numel_of(&in.view); /* non-integral values for the float stats */
    for (int64_t i = 0; i < n; i++)
      write_value(in_t, element(&in, i), round_to(in_t, (double)(rng() % 2001) / 256.0 - 4));
  }
  tensor outs[2];
  int index_op = code == NRT_OP_ARGMAX || code == NRT_OP_ARGMIN;
  for (int k = 0; k < nout; k++)
    outs[k] = output_of(g, index_op && k == nout - 1 ? NRT_INT64 : (k == 1 ? in_t : out_t));
  nrt_status s = run_op(code, nout, outs, &in, nscalars, scalars);
  int no_identity = kind == R_MAX || kind == R_MIN;
  if (reduces_empty(g) && no_identity && numel_of(&outs[0].view) > 0) {
    CHECK(s == NRT_ERROR_INVALID_ARGUMENT);
  } else if (s != NRT_SUCCESS) {
    fprintf(stderr, "  %s on %s (%s): %s\n", nrt_op_name(code), g->name, nrt_dtype_name(in_t),
            nrt_last_error());
    CHECK(s == NRT_SUCCESS);
  } else {
    double p = nscalars ? scalars[0] : 0;
    ref_acc *acc = reference(&in, &outs[0].view, kind, p);
    int64_t m = numel_of(&outs[0].view), bad = 0;
    for (int64_t j = 0; j < m; j++) {
      double want = ref_result(&acc[j], kind, p, p, nscalars > 1 && scalars[1] != 0);
      int64_t want_int = kind == R_SUM || kind == R_PROD ? (int64_t)acc[j].wrap : (int64_t)want;
      int ok;
      if (index_op) {
        ok = read_int(NRT_INT64, element(&outs[nout - 1], j)) == acc[j].best_index;
        if (nout == 2) ok &= same_result(&outs[0], j, want, (int64_t)want, 0);
      } else {
        ok = same_result(&outs[0], j, want, want_int, tol);
        if (kind == R_VAR && nout == 2)
          ok &= same_result(&outs[1], j, ref_result(&acc[j], R_MEAN, 0, 0, 0), 0, 1e-6);
      }
      if (!ok && bad++ < 3)
        fprintf(stderr, "  %s on %s (%s -> %s): output %lld: got %g, want %g\n",
                nrt_op_name(code), g->name, nrt_dtype_name(in_t), nrt_dtype_name(out_t),
                (long long)j, read_value(outs[0].view.dtype, element(&outs[0], j)), want);
    }
    CHECK(bad == 0);
    free(acc);
  }
  for (int k = 0; k < nout; k++) free_tensor(&outs[k]);
  free_tensor(&in);
}

/* AMINMAX on g: both outputs against AMIN's and AMAX's twins. */
static void check_aminmax(const geometry *g, nrt_dtype t) {
  tensor in = input_of(g, t);
  fill_values(&in, 0);
  tensor outs[2] = {output_of(g, t), output_of(g, t)};
  nrt_status s = run_op(NRT_OP_AMINMAX, 2, outs, &in, 0, NULL);
  if (reduces_empty(g) && numel_of(&outs[0].view) > 0) {
    CHECK(s == NRT_ERROR_INVALID_ARGUMENT);
  } else {
    CHECK_OK(s);
    ref_acc *lo = reference(&in, &outs[0].view, R_MIN, 0), *hi = reference(&in, &outs[0].view, R_MAX, 0);
    int64_t bad = 0;
    for (int64_t j = 0; j < numel_of(&outs[0].view); j++)
      bad += !same_result(&outs[0], j, lo[j].best, (int64_t)lo[j].best, 0) ||
             !same_result(&outs[1], j, hi[j].best, (int64_t)hi[j].best, 0);
    if (bad) fprintf(stderr, "  aminmax on %s (%s): %lld wrong\n", g->name, nrt_dtype_name(t), (long long)bad);
    CHECK(bad == 0);
    free(lo);
    free(hi);
  }
  for (int k = 0; k < 2; k++) free_tensor(&outs[k]);
  free_tensor(&in);
}

static const nrt_dtype all_dtypes[] = {NRT_BOOL,    NRT_UINT8,    NRT_INT8,    NRT_INT16,
                                       NRT_INT32,   NRT_INT64,    NRT_FLOAT16, NRT_BFLOAT16,
                                       NRT_FLOAT32, NRT_FLOAT64};
static const nrt_dtype float_dtypes[] = {NRT_FLOAT16, NRT_BFLOAT16, NRT_FLOAT32, NRT_FLOAT64};

/* Sums, products, counts, any/all and extremes are exact for the test
 * values: bit-for-bit against the twin, every dtype and geometry. */
static void test_exact_reductions(void) {
  for (int gi = 0; gi < NUM_GEOMETRIES; gi++) {
    const geometry *g = &geometries[gi];
    for (int ti = 0; ti < 10; ti++) {
      nrt_dtype t = all_dtypes[ti];
      nrt_dtype wide = is_float(t) ? t : NRT_INT64;
      if (skip_large(g, t)) continue;
      check_op(NRT_OP_SUM, R_SUM, g, t, wide, 1, 0, NULL, 0);
      check_op(NRT_OP_NANSUM, R_SUM, g, t, wide, 1, 0, NULL, 0); /* no NaN here: the sum */
      check_aminmax(g, t);
      check_op(NRT_OP_PROD, R_PROD, g, t, wide, 1, 0, NULL, 0);
      check_op(NRT_OP_COUNT_NONZERO, R_NONZERO, g, t, NRT_INT64, 1, 0, NULL, 0);
      check_op(NRT_OP_ANY, R_ANY, g, t, NRT_BOOL, 1, 0, NULL, 0);
      check_op(NRT_OP_ALL, R_ALL, g, t, NRT_UINT8, 1, 0, NULL, 0);
      check_op(NRT_OP_AMAX, R_MAX, g, t, t, 1, 0, NULL, 0);
      check_op(NRT_OP_AMIN, R_MIN, g, t, t, 1, 0, NULL, 0);
      check_op(NRT_OP_ARGMAX, R_MAX, g, t, t, 2, 0, NULL, 0);
      check_op(NRT_OP_ARGMIN, R_MIN, g, t, t, 1, 0, NULL, 0);
      if (is_float(t)) check_op(NRT_OP_MEAN, R_MEAN, g, t, t, 1, 0, NULL, 0);
    }
  }
}

/* Integer sums wider than the input, float sums into wider floats, and
 * narrowing integer outputs that wrap. */
static void test_output_dtypes(void) {
  const geometry *g = &geometries[1];
  check_op(NRT_OP_SUM, R_SUM, g, NRT_INT8, NRT_INT8, 1, 0, NULL, 0);
  check_op(NRT_OP_SUM, R_SUM, g, NRT_INT32, NRT_INT16, 1, 0, NULL, 0);
  check_op(NRT_OP_SUM, R_SUM, g, NRT_BOOL, NRT_INT32, 1, 0, NULL, 0);
  check_op(NRT_OP_SUM, R_SUM, g, NRT_FLOAT16, NRT_FLOAT32, 1, 0, NULL, 0);
  check_op(NRT_OP_SUM, R_SUM, g, NRT_BFLOAT16, NRT_FLOAT64, 1, 0, NULL, 0);
  check_op(NRT_OP_PROD, R_PROD, g, NRT_INT16, NRT_INT8, 1, 0, NULL, 0);
  check_op(NRT_OP_MEAN, R_MEAN, g, NRT_FLOAT32, NRT_FLOAT64, 1, 0, NULL, 0);
}

/* float32 into float64 outputs: PyTorch converts the input first, so the
 * sum and the norm are float64-accurate (checked with values whose float32
 * partial sums would round). */
static void test_float64_outputs_of_float32_inputs(void) {
  int64_t n = 5000, one = 1;
  tensor in = make_tensor(NRT_FLOAT32, 1, &n, NULL, n);
  long double sum = 0, squares = 0;
  for (int64_t i = 0; i < n; i++) {
    float v = (float)((double)(rng() % 1000003) / 1000003.0 - 0.3);
    write_value(NRT_FLOAT32, element(&in, i), v);
    sum += v;
    squares += (long double)v * v;
  }
  tensor out = make_tensor(NRT_FLOAT64, 1, &one, NULL, 1);
  CHECK_OK(run_op(NRT_OP_SUM, 1, &out, &in, 0, NULL));
  CHECK(fabs(*(double *)out.host - (double)sum) <= 1e-12 * fabs((double)sum));
  CHECK_OK(run_op(NRT_OP_NORM, 1, &out, &in, 1, (double[]){2}));
  CHECK(fabs(*(double *)out.host - (double)sqrtl(squares)) <= 1e-12 * (double)sqrtl(squares));
  free_tensor(&out);
  free_tensor(&in);
}

/* var/std (with the mean), norms and logsumexp within a tolerance. */
static void test_statistics(void) {
  static const double corrections[] = {0, 1, 2.5, 1e9};
  static const double orders[] = {0, 1, 2, INFINITY, -INFINITY, 3, 0.5, -1};
  for (int gi = 0; gi < NUM_GEOMETRIES; gi++) {
    const geometry *g = &geometries[gi];
    for (int ti = 0; ti < 4; ti++) {
      nrt_dtype t = float_dtypes[ti];
      if (skip_large(g, t)) continue;
      double tol = t == NRT_FLOAT64 ? 1e-11 : t == NRT_FLOAT32 ? 2e-6 : 1e-2;
      for (int c = 0; c < 4; c++) {
        double sc[2] = {corrections[c], c & 1};
        check_op(NRT_OP_VAR, R_VAR, g, t, t, 1 + (c & 1), 2, sc, tol);
      }
      for (int o = 0; o < 8; o++) {
        int undefined = reduces_empty(g) && (orders[o] < 0 || orders[o] == INFINITY);
        if (!undefined) check_op(NRT_OP_NORM, R_NORM, g, t, t, 1, 1, &orders[o], tol);
      }
      check_op(NRT_OP_LOGSUMEXP, R_LSE, g, t, t, 1, 0, NULL, tol);
    }
  }
}

/* ---- special values ----------------------------------------------------- */

static tensor vector_of(nrt_dtype t, int n, const double *values) {
  int64_t shape = n;
  tensor x = make_tensor(t, 1, &shape, NULL, n);
  for (int i = 0; i < n; i++) write_value(t, element(&x, i), values[i]);
  return x;
}

static double reduce_vector(nrt_op_code code, nrt_dtype t, int n, const double *values,
                            int64_t *index, int nscalars, const double *scalars) {
  tensor in = vector_of(t, n, values);
  int64_t one = 1;
  int arg = code == NRT_OP_ARGMAX || code == NRT_OP_ARGMIN;
  tensor outs[2] = {make_tensor(t, 1, &one, NULL, 1), make_tensor(NRT_INT64, 1, &one, NULL, 1)};
  CHECK_OK(run_op(code, arg ? 2 : 1, outs, &in, nscalars, scalars));
  double v = read_value(t, outs[0].host);
  if (index) *index = *(int64_t *)outs[1].host;
  free_tensor(&outs[0]);
  free_tensor(&outs[1]);
  free_tensor(&in);
  return v;
}

static void test_nan_and_infinity(void) {
  const double with_nan[] = {1, NAN, 3, NAN, 3};
  int64_t at;
  for (int ti = 0; ti < 4; ti++) {
    nrt_dtype t = float_dtypes[ti];
    CHECK(isnan(reduce_vector(NRT_OP_AMAX, t, 5, with_nan, NULL, 0, NULL)));
    CHECK(isnan(reduce_vector(NRT_OP_AMIN, t, 5, with_nan, NULL, 0, NULL)));
    CHECK(isnan(reduce_vector(NRT_OP_ARGMAX, t, 5, with_nan, &at, 0, NULL)) && at == 1);
    CHECK(isnan(reduce_vector(NRT_OP_ARGMIN, t, 5, with_nan, &at, 0, NULL)) && at == 1);
    CHECK(isnan(reduce_vector(NRT_OP_LOGSUMEXP, t, 5, with_nan, NULL, 0, NULL)));
    CHECK(reduce_vector(NRT_OP_NANSUM, t, 5, with_nan, NULL, 0, NULL) == 7);
    {
      tensor in = vector_of(t, 5, with_nan);
      int64_t one = 1;
      tensor outs[2] = {make_tensor(t, 1, &one, NULL, 1), make_tensor(t, 1, &one, NULL, 1)};
      CHECK_OK(run_op(NRT_OP_AMINMAX, 2, outs, &in, 0, NULL));
      CHECK(isnan(read_value(t, outs[0].host)) && isnan(read_value(t, outs[1].host)));
      for (int k = 0; k < 2; k++) free_tensor(&outs[k]);
      free_tensor(&in);
    }
    const double inf_p = INFINITY, zero = 0;
    CHECK(isnan(reduce_vector(NRT_OP_NORM, t, 5, with_nan, NULL, 1, &inf_p)));
    CHECK(reduce_vector(NRT_OP_NORM, t, 5, with_nan, NULL, 1, &zero) == 5);
    const double infs[] = {-INFINITY, 1, INFINITY};
    CHECK(reduce_vector(NRT_OP_LOGSUMEXP, t, 3, infs, NULL, 0, NULL) == INFINITY);
    const double neg_infs[] = {-INFINITY, -INFINITY};
    CHECK(reduce_vector(NRT_OP_LOGSUMEXP, t, 2, neg_infs, NULL, 0, NULL) == -INFINITY);
    const double ties[] = {1, 3, 3, 0, 0};
    CHECK(reduce_vector(NRT_OP_ARGMAX, t, 5, ties, &at, 0, NULL) == 3 && at == 1);
    CHECK(reduce_vector(NRT_OP_ARGMIN, t, 5, ties, &at, 0, NULL) == 0 && at == 3);
  }
}

/* The branch-free float16 reader of the reduction loops gives the same
 * bits as the runtime's conversion, for every float16 value. */
static void test_float16_reader_is_exact(void) {
  int bad = 0;
  for (uint32_t h = 0; h < 65536; h++) {
    float a = rt_load_f16((rt_half)h), b = rt_half_to_float((rt_half)h);
    bad += memcmp(&a, &b, sizeof a) != 0;
  }
  CHECK(bad == 0);
}

/* A 3x4 view of a 4x3 buffer (transposed) with ties: the first in the
 * view's row-major order wins although memory order differs. */
static void test_ties_follow_logical_order(void) {
  int64_t shape[2] = {3, 4}, strides[2] = {1, 3}, one[2] = {1, 1};
  for (int ti = 0; ti < 10; ti++) {
    nrt_dtype t = all_dtypes[ti];
    tensor in = make_tensor(t, 2, shape, strides, 12);
    for (int i = 0; i < 12; i++) write_value(t, element(&in, i), i == 2 || i == 4 ? 1 : 0);
    tensor outs[2] = {make_tensor(t, 2, one, NULL, 1), make_tensor(NRT_INT64, 2, one, NULL, 1)};
    CHECK_OK(run_op(NRT_OP_ARGMAX, 2, outs, &in, 0, NULL));
    CHECK(*(int64_t *)outs[1].host == 2);
    CHECK_OK(run_op(NRT_OP_ARGMIN, 2, outs, &in, 0, NULL));
    CHECK(*(int64_t *)outs[1].host == 0);
    for (int k = 0; k < 2; k++) free_tensor(&outs[k]);
    free_tensor(&in);
  }
}

static void test_bad_operands(void) {
  int64_t shape[2] = {4, 5}, bad[2] = {3, 1}, good[2] = {4, 1};
  tensor in = make_tensor(NRT_FLOAT32, 2, shape, NULL, 20);
  tensor out = make_tensor(NRT_FLOAT32, 2, bad, NULL, 3);
  CHECK_STATUS(run_op(NRT_OP_SUM, 1, &out, &in, 0, NULL), NRT_ERROR_INVALID_ARGUMENT);
  tensor int_out = make_tensor(NRT_INT64, 2, good, NULL, 4);
  CHECK_STATUS(run_op(NRT_OP_SUM, 1, &int_out, &in, 0, NULL), NRT_ERROR_UNSUPPORTED);
  tensor int_in = make_tensor(NRT_INT32, 2, shape, NULL, 20);
  CHECK_STATUS(run_op(NRT_OP_VAR, 1, &int_out, &int_in, 2, (double[]){1, 0}),
               NRT_ERROR_UNSUPPORTED);
  CHECK_STATUS(run_op(NRT_OP_AMAX, 1, &int_out, &in, 0, NULL), NRT_ERROR_UNSUPPORTED);
  free_tensor(&in);
  free_tensor(&out);
  free_tensor(&int_out);
  free_tensor(&int_in);
}

/* ---- scans -------------------------------------------------------------- */

static void check_scan(nrt_op_code code, const geometry *g, int dim, nrt_dtype in_t,
                       nrt_dtype out_t) {
  tensor in = input_of(g, in_t);
  fill_values(&in, code == NRT_OP_CUMPROD);
  tensor out = make_tensor(out_t, g->ndim, g->shape, NULL, numel_of(&in.view));
  CHECK_OK(run_op(code, 1, &out, &in, 1, (double[]){dim}));
  int64_t n = numel_of(&in.view), bad = 0;
  int64_t len = g->ndim ? g->shape[dim] : 1, inner = 1;
  for (int d = dim + 1; d < g->ndim; d++) inner *= g->shape[d];
  for (int64_t i = 0; i < n; i++) {
    int64_t pos = (i / inner) % len;
    double acc = code == NRT_OP_CUMPROD;
    uint64_t wrap = code == NRT_OP_CUMPROD;
    for (int64_t k = 0; k <= pos; k++) { /* the line from its start, in order */
      const char *e = element(&in, i - (pos - k) * inner);
      double v = read_value(in_t, e);
      uint64_t w = (uint64_t)read_int(in_t, e);
      acc = code == NRT_OP_CUMPROD ? acc * v : acc + v;
      wrap = code == NRT_OP_CUMPROD ? wrap * w : wrap + w;
    }
    if (!same_result(&out, i, acc, (int64_t)wrap, 0) && bad++ < 3)
      fprintf(stderr, "  %s on %s dim %d (%s): element %lld: got %g want %g\n", nrt_op_name(code),
              g->name, dim, nrt_dtype_name(in_t), (long long)i,
              read_value(out_t, element(&out, i)), acc);
  }
  CHECK(bad == 0);
  free_tensor(&out);
  free_tensor(&in);
}

/* CUMMAX/CUMMIN against a twin that walks each line with PyTorch's CPU rule
 * (a NaN or a value >= (max) / <= (min) the running one takes over), on
 * inputs with many ties and, for floats, NaNs. */
static void check_extreme_scan(nrt_op_code code, const geometry *g, int dim, nrt_dtype t) {
  tensor in = input_of(g, t);
  fill_values(&in, 0);
  int64_t n = numel_of(&in.view);
  if (is_float(t))
    for (int64_t i = 3; i < n; i += 11) write_value(t, element(&in, i), NAN);
  tensor outs[2] = {make_tensor(t, g->ndim, g->shape, NULL, n), make_tensor(NRT_INT64, g->ndim, g->shape, NULL, n)};
  CHECK_OK(run_op(code, 2, outs, &in, 1, (double[]){dim}));
  int64_t bad = 0, len = g->ndim ? g->shape[dim] : 1, inner = 1;
  for (int d = dim + 1; d < g->ndim; d++) inner *= g->shape[d];
  for (int64_t i = 0; i < n; i++) {
    int64_t pos = (i / inner) % len, at = 0;
    double best = read_value(t, element(&in, i - pos * inner));
    for (int64_t k = 0; k <= pos; k++) {
      double v = read_value(t, element(&in, i - (pos - k) * inner));
      if (v != v || (best == best && (code == NRT_OP_CUMMAX ? v >= best : v <= best))) best = v, at = k;
    }
    int ok = same_result(&outs[0], i, best, (int64_t)best, 0) && *(int64_t *)element(&outs[1], i) == at;
    if (!ok && bad++ < 3)
      fprintf(stderr, "  %s on %s dim %d (%s): element %lld: got %g at %lld, want %g at %lld\n", nrt_op_name(code),
              g->name, dim, nrt_dtype_name(t), (long long)i, read_value(t, element(&outs[0], i)),
              (long long)*(int64_t *)element(&outs[1], i), best, (long long)at);
  }
  CHECK(bad == 0);
  for (int k = 0; k < 2; k++) free_tensor(&outs[k]);
  free_tensor(&in);
}

static void test_scans(void) {
  static const int scan_geometries[] = {0, 1, 3, 6, 8, 15, 18};
  for (size_t gi = 0; gi < sizeof scan_geometries / sizeof scan_geometries[0]; gi++) {
    const geometry *g = &geometries[scan_geometries[gi]];
    for (int dim = 0; dim < (g->ndim ? g->ndim : 1); dim++)
      for (int ti = 0; ti < 10; ti++) {
        nrt_dtype t = all_dtypes[ti], wide = is_float(t) ? t : NRT_INT64;
        check_scan(NRT_OP_CUMSUM, g, dim, t, wide);
        check_scan(NRT_OP_CUMPROD, g, dim, t, wide);
        check_extreme_scan(NRT_OP_CUMMAX, g, dim, t);
        check_extreme_scan(NRT_OP_CUMMIN, g, dim, t);
      }
  }
  check_scan(NRT_OP_CUMSUM, &geometries[1], 1, NRT_INT32, NRT_INT8);
  check_scan(NRT_OP_CUMSUM, &geometries[1], 0, NRT_FLOAT16, NRT_FLOAT32);
}

/* ---- thread-count independence ----------------------------------------- */

/* Large reductions of non-exact values (where blocking decides rounding),
 * written to the file named by REDUCE_TEST_OUT. */
static int write_thread_case(void) {
  const char *path = getenv("REDUCE_TEST_OUT");
  FILE *f = path ? fopen(path, "wb") : NULL;
  if (!f) return 1;
  static const int cases[] = {10, 11, 12, 13, 0, 1, 2};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    const geometry *g = &geometries[cases[c]];
    for (int ti = 0; ti < 4; ti++) {
      rng_state = 12345;
      tensor in = input_of(g, float_dtypes[ti]);
      int64_t n = numel_of(&in.view);
      for (int64_t i = 0; i < n; i++)
        write_value(float_dtypes[ti], element(&in, i),
                    round_to(float_dtypes[ti], (double)(rng() % 1000003) / 1000003.0 - 0.3));
      static const nrt_op_code codes[] = {NRT_OP_SUM, NRT_OP_VAR, NRT_OP_LOGSUMEXP, NRT_OP_NORM};
      for (int k = 0; k < 4; k++) {
        tensor out = output_of(g, NRT_FLOAT64);
        double sc[2] = {1, 0};
        if (run_op(codes[k], 1, &out, &in, 2, sc) != NRT_SUCCESS) return 1;
        fwrite(out.host, 8, (size_t)numel_of(&out.view), f);
        free_tensor(&out);
      }
      free_tensor(&in);
    }
  }
  fclose(f);
  return check_failures;
}

static void test_thread_count_independence(void) {
  CHECK(child_results_agree_across_threads("REDUCE_TEST_OUT", "reduce"));
}

int main(int argc, char **argv) {
  if (child_is_case(argc, argv)) return write_thread_case();
  RUN(test_exact_reductions);
  RUN(test_output_dtypes);
  RUN(test_float64_outputs_of_float32_inputs);
  RUN(test_statistics);
  RUN(test_nan_and_infinity);
  RUN(test_float16_reader_is_exact);
  RUN(test_ties_follow_logical_order);
  RUN(test_bad_operands);
  RUN(test_scans);
  RUN(test_thread_count_independence);
  return CHECK_MAIN_RESULT();
}
