/* The GEMM (rt_gemm and the GEMM op) against a reference twin.
 *
 * The twin is the definition as a triple loop in double, reading every
 * operand through its strides with converters of its own. Exact cases use
 * multiples of 1/2 in [-4, 4] (and alpha, beta in {0.5, 2, -1.5, ...}) so
 * that every partial sum is exact in float32: whatever the summation order,
 * the product must equal the twin rounded once to the output dtype, bit for
 * bit. Rounding cases use arbitrary values and bound the error by
 * k * eps * sum |a||b|. Every kernel the CPU runs (AVX-512, AVX2, portable,
 * and AVX512_BF16 pairs for bfloat16) is checked; sizes are odd (1, 7, 17, 129, 513, ...) and cross the k, n
 * and m block boundaries; operands are row-major, column-major, padded or
 * reversed; C may be transposed. A child process per thread count checks
 * that results are bitwise identical with 1 and 2 kernel threads.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "cpu_isa.h"
#include "child.h"
#include "ops/engine/scalar_types.h"
#include "neuronrt/device.h"
#include "ops/gemm/gemm.h"

/* ---- element access (independent of the runtime's converters) ---------- */

static size_t elem_size(nrt_dtype t) {
  static const size_t sizes[] = {1, 1, 1, 2, 4, 8, 2, 2, 4, 8};
  return sizes[t];
}

static double half_value(uint16_t h) {
  double sign = (h & 0x8000) ? -1.0 : 1.0;
  int exp = (h >> 10) & 31, mant = h & 1023;
  if (exp == 31) return mant ? NAN : sign * INFINITY;
  if (exp == 0) return sign * ldexp(mant, -24);
  return sign * ldexp(1024 + mant, exp - 25);
}

/* v rounded to nearest even with `bits` significant bits (normal range). */
static double round_bits(double v, int bits) {
  if (v == 0 || v != v || isinf(v)) return v;
  int e;
  frexp(v, &e);
  double q = ldexp(1.0, e - bits);
  return rint(v / q) * q;
}

static uint16_t half_of(double v) { /* v exactly representable, normal or 0 */
  uint16_t sign = v < 0 ? 0x8000 : 0;
  v = fabs(v);
  if (v == 0) return sign;
  int e;
  double m = frexp(v, &e);
  return (uint16_t)(sign | ((e + 14) << 10) | (uint16_t)((m * 2 - 1) * 1024));
}

ORACLE_CODE static double read_value(nrt_dtype t, const void *p) {
  switch (t) {
    case NRT_UINT8: return *(const uint8_t *)p;
    case NRT_INT8: return *(const int8_t *)p;
    case NRT_INT16: return *(const int16_t *)p;
    case NRT_INT32: return *(const int32_t *)p;
    case NRT_INT64: return (double)*(const int64_t *)p;
    case NRT_FLOAT16: return half_value(*(const uint16_t *)p);
    case NRT_BFLOAT16: {
      uint32_t bits = (uint32_t)*(const uint16_t *)p << 16;
      float f;
      memcpy(&f, &bits, 4);
      return f;
    }
    case NRT_FLOAT32: return *(const float *)p;
    default: return *(const double *)p;
  }
}

/* Rounds v to t and stores it (16-bit floats: v must lie in their normal range). */
ORACLE_CODE static void write_value(nrt_dtype t, void *p, double v) {
  switch (t) {
    case NRT_UINT8: *(uint8_t *)p = (uint8_t)v; break;
    case NRT_INT8: *(int8_t *)p = (int8_t)v; break;
    case NRT_INT16: *(int16_t *)p = (int16_t)v; break;
    case NRT_INT32: *(int32_t *)p = (int32_t)v; break;
    case NRT_INT64: *(int64_t *)p = (int64_t)v; break;
    case NRT_FLOAT16: *(uint16_t *)p = v != v ? 0x7e00 : half_of(round_bits(v, 11)); break;
    case NRT_BFLOAT16: {
      float f = (float)round_bits(v, 8);
      uint32_t bits;
      memcpy(&bits, &f, 4);
      *(uint16_t *)p = v != v ? 0x7fc0 : (uint16_t)(bits >> 16);
      break;
    }
    case NRT_FLOAT32: *(float *)p = (float)v; break;
    default: *(double *)p = v; break;
  }
}

ORACLE_CODE static double rounded(nrt_dtype t, double v) {
  switch (t) {
    case NRT_FLOAT16: return round_bits(v, 11);
    case NRT_BFLOAT16: return round_bits((float)v, 8);
    case NRT_FLOAT32: return (float)v;
    default: return v;
  }
}

static int is_float(nrt_dtype t) { return t >= NRT_FLOAT16; }

static uint64_t rng_state = 88172645463325252ull;
static uint64_t rng(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

/* ---- strided 3-d host arrays --------------------------------------------- */

typedef struct array {
  char *storage, *base; /* base: element (0, 0, 0) */
  nrt_dtype dtype;
  int64_t d0, d1, d2, s0, s1, s2;
} array;

/* Layouts of a d1 x d2 matrix (per batch item). ROW_EVEN and COL_EVEN pad
 * to an even leading dimension (bfloat16 pairs are then 32-bit words). */
enum { ROW_MAJOR, COL_MAJOR, PADDED, REVERSED, LAYOUTS, ROW_EVEN = LAYOUTS, COL_EVEN };

static array make_array(nrt_dtype t, int64_t d0, int64_t d1, int64_t d2, int layout) {
  array x = {.dtype = t, .d0 = d0, .d1 = d1, .d2 = d2};
  switch (layout) {
    case ROW_MAJOR: x.s2 = 1, x.s1 = d2; break;
    case COL_MAJOR: x.s1 = 1, x.s2 = d1; break;
    case PADDED: x.s2 = 2, x.s1 = 2 * d2 + 3; break;
    case ROW_EVEN: x.s2 = 1, x.s1 = d2 + 2 - d2 % 2; break;
    case COL_EVEN: x.s1 = 1, x.s2 = d1 + 2 - d1 % 2; break;
    default: x.s2 = -1, x.s1 = -d2; break; /* both dims reversed */
  }
  int64_t item = d1 * d2 * (layout == PADDED ? 2 : 1) + 3 * d1 + 2 * d2 + 1;
  x.s0 = item;
  int64_t total = item * (d0 > 0 ? d0 : 1);
  x.storage = calloc((size_t)total + 1, elem_size(t));
  x.base = x.storage + (layout == REVERSED ? d1 * d2 - 1 : 0) * (int64_t)elem_size(t);
  return x;
}

ORACLE_CODE static char *at(const array *x, int64_t i0, int64_t i1, int64_t i2) {
  return x->base + (i0 * x->s0 + i1 * x->s1 + i2 * x->s2) * (int64_t)elem_size(x->dtype);
}

/* exact: halves in [-4, 4] (integers in [-8, 8] for integer dtypes);
 * otherwise multiples of 1/997 in [-1.003, 1.003]. */
ORACLE_CODE static void fill(array *x, int exact) {
  for (int64_t a = 0; a < x->d0; a++)
    for (int64_t b = 0; b < x->d1; b++)
      for (int64_t c = 0; c < x->d2; c++) {
        double v = (double)((int)(rng() % 17) - 8);
        /* Inexact values stay within the 16-bit floats' normal range. */
        if (is_float(x->dtype)) v = exact ? v / 2 : (double)((int)(rng() % 2001) - 1000) / 997.0;
        write_value(x->dtype, at(x, a, b, c), v);
      }
}

ORACLE_CODE static void fill_nan(array *x) {
  for (int64_t a = 0; a < x->d0; a++)
    for (int64_t b = 0; b < x->d1; b++)
      for (int64_t c = 0; c < x->d2; c++) write_value(x->dtype, at(x, a, b, c), NAN);
}

/* ---- one case ------------------------------------------------------------ */

typedef struct gemm_case {
  int64_t batch, m, n, k, kslices;
  nrt_dtype ab, c;
  int la, lb, lc; /* layouts */
  double alpha, beta;
  int cin_mode; /* 0: none (NaN in C), 1: cin is c, 2: broadcast row vector, 3: separate array */
  int exact;
} gemm_case;

static array A, B, C, CIN;

static rt_gemm_args setup(const gemm_case *cs) {
  int64_t s = cs->kslices > 1 ? cs->kslices : cs->batch;
  A = make_array(cs->ab, s, cs->m, cs->k, cs->la);
  B = make_array(cs->ab, s, cs->k, cs->n, cs->lb);
  C = make_array(cs->c, cs->batch, cs->m, cs->n, cs->lc);
  fill(&A, cs->exact);
  fill(&B, cs->exact);
  if (cs->cin_mode != 1 && is_float(cs->c)) fill_nan(&C);
  else fill(&C, 1);
  rt_gemm_args g = {
      .batch = cs->batch, .m = cs->m, .n = cs->n, .k = cs->k, .kslices = cs->kslices,
      .ab_dtype = cs->ab, .c_dtype = cs->c,
      .a = A.base, .a_rs = A.s1, .a_cs = A.s2,
      .b = B.base, .b_rs = B.s1, .b_cs = B.s2,
      .c = C.base, .c_bs = C.s0, .c_rs = C.s1, .c_cs = C.s2,
      .alpha = cs->alpha, .beta = cs->beta};
  if (cs->kslices > 1) g.a_ss = A.s0, g.b_ss = B.s0;
  else g.a_bs = A.s0, g.b_bs = B.s0;
  CIN = (array){0};
  if (cs->cin_mode == 1) {
    g.cin = C.base, g.cin_bs = C.s0, g.cin_rs = C.s1, g.cin_cs = C.s2;
  } else if (cs->cin_mode >= 2) {
    CIN = make_array(cs->c, cs->cin_mode == 2 ? 1 : cs->batch, cs->cin_mode == 2 ? 1 : cs->m,
                     cs->n, cs->cin_mode == 2 ? ROW_MAJOR : PADDED);
    fill(&CIN, 1);
    g.cin = CIN.base;
    g.cin_bs = cs->cin_mode == 2 ? 0 : CIN.s0;
    g.cin_rs = cs->cin_mode == 2 ? 0 : CIN.s1;
    g.cin_cs = CIN.s2;
  } else {
    g.beta = 0;
  }
  return g;
}

static void release(void) {
  free(A.storage);
  free(B.storage);
  free(C.storage);
  free(CIN.storage);
}

/* A and B as doubles, read once per case: ad[(s*m + i)*k + p] and
 * bd[(s*k + p)*n + j] for slice (or batch item) s. The twin's inner loop then
 * reads plain arrays (through at() and read_value() it took most of the
 * sanitizer runs). */
typedef struct operands_d {
  double *ad, *bd;
  int64_t m, n, k;
} operands_d;

ORACLE_CODE static operands_d read_operands(const gemm_case *cs) {
  int64_t s = cs->kslices > 1 ? cs->kslices : cs->batch;
  operands_d o = {.m = cs->m, .n = cs->n, .k = cs->k};
  o.ad = malloc((size_t)(s * cs->m * cs->k + 1) * sizeof(double));
  o.bd = malloc((size_t)(s * cs->k * cs->n + 1) * sizeof(double));
  for (int64_t a = 0; a < s; a++)
    for (int64_t p = 0; p < cs->k; p++) {
      for (int64_t i = 0; i < cs->m; i++) o.ad[(a * cs->m + i) * cs->k + p] = read_value(A.dtype, at(&A, a, i, p));
      for (int64_t j = 0; j < cs->n; j++) o.bd[(a * cs->k + p) * cs->n + j] = read_value(B.dtype, at(&B, a, p, j));
    }
  return o;
}

/* The twin: returns the exact (double) value of C[t, i, j] and, in *bound,
 * sum |alpha a b| (for the rounding bound). cin is read from the copy
 * taken before the product ran. */
ORACLE_CODE static double twin(const rt_gemm_args *g, const operands_d *o, const char *cin_copy, int64_t t,
                               int64_t i, int64_t j, double *bound) {
  double acc = 0, mag = 0;
  for (int64_t s = 0; s < g->kslices; s++) {
    int64_t sa = g->kslices > 1 ? s : t;
    const double *x = o->ad + (sa * o->m + i) * o->k, *y = o->bd + sa * o->k * o->n + j;
    for (int64_t p = 0; p < g->k; p++) {
      double xy = x[p] * y[p * o->n];
      acc += xy;
      mag += fabs(xy);
    }
  }
  double v = g->alpha * acc;
  if (g->beta != 0) {
    int64_t off = t * g->cin_bs + i * g->cin_rs + j * g->cin_cs;
    v += g->beta * read_value(C.dtype, cin_copy + off * (int64_t)elem_size(C.dtype));
  }
  *bound = fabs(g->alpha) * mag;
  return v;
}

/* The epilogue every case runs with: each block must arrive once, with
 * its final values (a snapshot of it is compared with C afterwards). */
typedef struct block_log {
  const gemm_case *cs;
  uint8_t *seen;   /* per element of C: times a block covered it */
  double *values;  /* per element: its value when its block arrived */
  int bad_block;   /* a block out of range */
} block_log;

static nrt_status log_block(void *ctx, int64_t t, int64_t i0, int64_t rows, int64_t j0, int64_t cols) {
  block_log *log = ctx;
  const gemm_case *cs = log->cs;
  if (t < 0 || t >= cs->batch || i0 < 0 || rows < 1 || i0 + rows > cs->m || j0 < 0 || cols < 1 ||
      j0 + cols > cs->n) {
    log->bad_block = 1; /* racy but only ever set to 1 */
    return NRT_SUCCESS;
  }
  for (int64_t i = i0; i < i0 + rows; i++)
    for (int64_t j = j0; j < j0 + cols; j++) {
      int64_t e = (t * cs->m + i) * cs->n + j;
      log->seen[e]++;
      log->values[e] = read_value(cs->c, at(&C, t, i, j));
    }
  return NRT_SUCCESS;
}

/* One case as every kernel that runs it sees it: the operands (made once by
 * setup), C as it starts (restored before each kernel: it may be Cin), and
 * the twin's exact value and rounding bound per element of C, computed once
 * (the twin took most of the sanitizer runs' time when each kernel had its
 * own operands and twin). */
typedef struct case_oracle {
  rt_gemm_args g;
  char *c_start; /* C's storage before any kernel ran */
  size_t c_bytes;
  double *want, *bound; /* per element (t*m + i)*n + j */
} case_oracle;

static case_oracle make_oracle(const gemm_case *cs) {
  case_oracle o = {.g = setup(cs)};
  o.c_bytes = (size_t)(C.s0 * (C.d0 > 0 ? C.d0 : 1) + 1) * elem_size(C.dtype);
  o.c_start = malloc(o.c_bytes);
  memcpy(o.c_start, C.storage, o.c_bytes);
  /* Cin as it is before the product (it may be C itself). */
  const char *cin_base = NULL;
  char *copy = NULL;
  if (o.g.cin) {
    const array *src = o.g.cin == C.base ? &C : &CIN;
    size_t bytes = (size_t)(src->s0 * (src->d0 > 0 ? src->d0 : 1) + 1) * elem_size(src->dtype);
    copy = malloc(bytes);
    memcpy(copy, src->storage, bytes);
    cin_base = copy + (src->base - src->storage);
  }
  operands_d ops = read_operands(cs);
  size_t elems = (size_t)(cs->batch * cs->m * cs->n) + 1;
  o.want = malloc(elems * sizeof(double));
  o.bound = malloc(elems * sizeof(double));
  for (int64_t t = 0; t < cs->batch; t++)
    for (int64_t i = 0; i < cs->m; i++)
      for (int64_t j = 0; j < cs->n; j++) {
        int64_t e = (t * cs->m + i) * cs->n + j;
        o.want[e] = twin(&o.g, &ops, cin_base, t, i, j, &o.bound[e]);
      }
  free(copy);
  free(ops.ad);
  free(ops.bd);
  return o;
}

static void free_oracle(case_oracle *o) {
  free(o->c_start);
  free(o->want);
  free(o->bound);
  release();
}

/* Runs one kernel (NULL: the integer path) on the case's operands, from C
 * as it started, and compares every element with the twin. */
static int run_kernel(const gemm_case *cs, const case_oracle *o, const rt_gemm_kernel *kern) {
  memcpy(C.storage, o->c_start, o->c_bytes);
  rt_gemm_args g = o->g;
  g.kernel = kern;
  size_t elems = (size_t)(cs->batch * cs->m * cs->n) + 1;
  block_log log = {.cs = cs, .seen = calloc(elems, 1), .values = calloc(elems, sizeof(double))};
  g.epilogue = log_block;
  g.epilogue_ctx = &log;
  nrt_status s = rt_gemm(&g);
  int bad = 0;
  if (s != NRT_SUCCESS) {
    fprintf(stderr, "rt_gemm failed: %s\n", nrt_last_error());
    bad = 1;
  }
  double eps = cs->c == NRT_FLOAT64 ? 0x1p-52 : 0x1p-23;
  for (int64_t t = 0; t < cs->batch && !bad; t++)
    for (int64_t i = 0; i < cs->m && !bad; i++)
      for (int64_t j = 0; j < cs->n && !bad; j++) {
        int64_t e = (t * cs->m + i) * cs->n + j;
        double bound = o->bound[e], want = o->want[e];
        double got = read_value(cs->c, at(&C, t, i, j));
        int ok;
        if (!is_float(cs->c) || cs->exact) {
          ok = got == rounded(cs->c, want);
        } else {
          double tol = (double)(cs->k * cs->kslices + 2) * eps * (bound + fabs(want) + 1e-30);
          if (cs->c == NRT_FLOAT16 || cs->c == NRT_BFLOAT16)
            tol += fabs(want) * (cs->c == NRT_FLOAT16 ? 0x1p-11 : 0x1p-8);
          ok = fabs(got - want) <= tol;
        }
        if (log.bad_block || log.seen[e] != 1 || !(log.values[e] == got || (isnan(got) && isnan(log.values[e])))) {
          fprintf(stderr, "epilogue [%s] b%lld m%lld n%lld k%lld: element (%lld,%lld,%lld) seen %d times, "
                  "value then %.9g, now %.9g%s\n", kern ? kern->name : "int", (long long)cs->batch,
                  (long long)cs->m, (long long)cs->n, (long long)cs->k, (long long)t, (long long)i,
                  (long long)j, log.seen[e], log.values[e], got, log.bad_block ? " (a block out of range)" : "");
          bad = 1;
        }
        if (!ok) {
          fprintf(stderr,
                  "mismatch [%s] %s->%s b%lld m%lld n%lld k%lld s%lld layouts %d%d%d alpha %g beta %g "
                  "cin %d at (%lld,%lld,%lld): got %.9g want %.9g\n",
                  kern ? kern->name : "int", nrt_dtype_name(cs->ab), nrt_dtype_name(cs->c),
                  (long long)cs->batch, (long long)cs->m, (long long)cs->n, (long long)cs->k,
                  (long long)cs->kslices, cs->la, cs->lb, cs->lc, cs->alpha, cs->beta, cs->cin_mode,
                  (long long)t, (long long)i, (long long)j, got, want);
          bad = 1;
        }
      }
  free(log.seen);
  free(log.values);
  return !bad;
}

/* Runs cs with one kernel (NULL: the integer path), operands and twin of its own. */
static int run_case(const gemm_case *cs, const rt_gemm_kernel *kern) {
  case_oracle o = make_oracle(cs);
  int good = run_kernel(cs, &o, kern);
  free_oracle(&o);
  return good;
}

/* Runs cs with every kernel of its compute dtype, all on one set of
 * operands against one twin (C restored between them). */
static void check_case(const gemm_case *cs) {
  case_oracle o = make_oracle(cs);
  if (!is_float(cs->ab)) {
    CHECK(run_kernel(cs, &o, NULL));
  } else {
    const rt_gemm_kernel *const *list;
    int count = rt_gemm_kernels(cs->ab == NRT_FLOAT64 ? NRT_FLOAT64 : NRT_FLOAT32, &list);
    for (int i = 0; i < count; i++) CHECK(run_kernel(cs, &o, list[i]));
    if (cs->ab == NRT_BFLOAT16) { /* also the pair kernels, where the CPU has them */
      count = rt_gemm_kernels(NRT_BFLOAT16, &list);
      for (int i = 0; i < count; i++) CHECK(run_kernel(cs, &o, list[i]));
    }
  }
  free_oracle(&o);
}

/* ---- tests --------------------------------------------------------------- */

static int has_kernel(nrt_dtype compute, const char *prefix) {
  const rt_gemm_kernel *const *list;
  int count = rt_gemm_kernels(compute, &list), found = 0;
  for (int i = 0; i < count; i++) found |= strncmp(list[i]->name, prefix, strlen(prefix)) == 0;
  return found;
}

/* The kernels offered (and so tested by check_case) are those of the ISA
 * level in use (TORCHNEURON_ISA; ctest runs this file at each level), with
 * the portable ones always there as the reference's twins. */
static void test_kernels_follow_isa_level(void) {
  for (int f64 = 0; f64 < 2; f64++) {
    nrt_dtype compute = f64 ? NRT_FLOAT64 : NRT_FLOAT32;
    CHECK(has_kernel(compute, "portable_"));
    CHECK(has_kernel(compute, "avx2_") == (rt_isa() >= NRT_ISA_AVX2));
    CHECK(has_kernel(compute, "avx512_") == (rt_isa() >= NRT_ISA_AVX512));
  }
  CHECK(has_kernel(NRT_BFLOAT16, "avx512bf16_") == rt_isa_avx512_bf16());
  /* AMX first when there, never under a forced TORCHNEURON_ISA. */
  const rt_gemm_kernel *const *bf16;
  int nbf16 = rt_gemm_kernels(NRT_BFLOAT16, &bf16);
  CHECK(has_kernel(NRT_BFLOAT16, "amxbf16_") == rt_isa_amx_bf16());
  if (rt_isa_amx_bf16()) CHECK(nbf16 >= 1 && strncmp(bf16[0]->name, "amxbf16_", 8) == 0);
  const char *forced = getenv("TORCHNEURON_ISA");
  if (forced && *forced) CHECK(!has_kernel(NRT_BFLOAT16, "amxbf16_"));
  printf("bfloat16 kernels:");
  for (int i = 0; i < nbf16; i++) printf(" %s", bf16[i]->name);
  printf("\n");
}

static const int64_t shapes[][3] = {
    {1, 1, 1},   {7, 17, 1},  {17, 7, 129}, {129, 17, 7}, {1, 129, 17},  {129, 1, 17},
    {13, 33, 300}, {40, 70, 513}, {129, 513, 17}, {7, 1, 513}, {1, 1, 513}};

static void test_layouts_and_shapes_exact_f32(void) {
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int la = 0; la < LAYOUTS; la++)
      for (int lb = 0; lb < LAYOUTS; lb++) {
        int lc = (la + lb) % 3; /* row-major, column-major and padded C */
        gemm_case cs = {.batch = 1, .m = shapes[s][0], .n = shapes[s][1], .k = shapes[s][2],
                        .kslices = 1, .ab = NRT_FLOAT32, .c = NRT_FLOAT32, .la = la, .lb = lb,
                        .lc = lc, .alpha = 1, .beta = 0, .exact = 1};
        check_case(&cs);
      }
}

static void test_alpha_beta_and_cin(void) {
  static const struct { double alpha, beta; int cin; } ab[] = {
      {1, 0, 0}, {0.5, -1.5, 1}, {2, 1, 1}, {-1, 0.5, 2}, {0.5, 2, 3}, {1, 0, 3}};
  static const nrt_dtype types[][2] = {{NRT_FLOAT32, NRT_FLOAT32}, {NRT_FLOAT64, NRT_FLOAT64},
                                       {NRT_BFLOAT16, NRT_BFLOAT16}, {NRT_FLOAT16, NRT_FLOAT16},
                                       {NRT_BFLOAT16, NRT_FLOAT32}, {NRT_INT32, NRT_INT32}};
  static const int64_t sizes[][3] = {{17, 40, 129}, {129, 33, 300}, {5, 70, 7}};
  for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
    for (size_t a = 0; a < sizeof ab / sizeof ab[0]; a++)
      for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++)
        for (int lc = 0; lc < 3; lc++) {
          gemm_case cs = {.batch = 1, .m = sizes[z][0], .n = sizes[z][1], .k = sizes[z][2],
                          .kslices = 1, .ab = types[t][0], .c = types[t][1], .la = (int)z % 2,
                          .lb = lc % 2, .lc = lc, .alpha = ab[a].alpha, .beta = ab[a].beta,
                          .cin_mode = ab[a].cin, .exact = 1};
          if (!is_float(cs.ab)) cs.alpha *= 2, cs.beta *= 2; /* integer scalars */
          check_case(&cs);
        }
}

static void test_batched_and_summed_slices(void) {
  static const nrt_dtype types[] = {NRT_FLOAT32, NRT_FLOAT64, NRT_BFLOAT16, NRT_INT64};
  for (size_t t = 0; t < 4; t++)
    for (int sum = 0; sum < 2; sum++)
      for (int l = 0; l < 3; l++) {
        gemm_case cs = {.batch = sum ? 1 : 3, .m = 20, .n = 37, .k = 90, .kslices = sum ? 3 : 1,
                        .ab = types[t], .c = types[t], .la = l, .lb = (l + 1) % 3, .lc = l,
                        .alpha = 0.5, .beta = -1.5, .cin_mode = 1 + l, .exact = 1};
        if (!is_float(types[t])) cs.alpha = 2, cs.beta = -1;
        check_case(&cs);
        cs.k = 300; /* slices cross k blocks */
        check_case(&cs);
        cs.k = 7; /* odd: bfloat16 pairs straddle slices */
        check_case(&cs);
      }
}

/* Batched bfloat16 products of attention's shapes, whose items run as
 * jobs on the kernel threads (batch_jobs in gemm.c): exact against the
 * twin, with bfloat16 and float32 C, beta 0 and Cin, a row count that ends
 * in a short panel and an odd k. */
static void test_bf16_batch_jobs(void) {
  static const int64_t sizes[][4] = {{12, 128, 64, 128}, {12, 128, 128, 64}, {5, 70, 40, 33}};
  for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++)
    for (int v = 0; v < 2; v++) {
      gemm_case cs = {.batch = sizes[z][0], .m = sizes[z][1], .n = sizes[z][2], .k = sizes[z][3], .kslices = 1,
                      .ab = NRT_BFLOAT16, .c = v ? NRT_FLOAT32 : NRT_BFLOAT16, .la = v, .lb = 0, .lc = 0,
                      .alpha = v ? 0.5 : 1, .beta = v ? -1.5 : 0, .cin_mode = v ? 1 : 0, .exact = 1};
      check_case(&cs);
    }
}

static void test_block_boundaries(void) {
  /* k beyond one packed B chunk, n beyond one column block, m beyond one row block. */
  static const int64_t big[][3] = {{13, 1100, 2300}, {300, 40, 600}, {250, 260, 256}};
  for (size_t z = 0; z < 3; z++)
    for (int l = 0; l < 2; l++) {
      gemm_case cs = {.batch = 1, .m = big[z][0], .n = big[z][1], .k = big[z][2], .kslices = 1,
                      .ab = NRT_FLOAT32, .c = NRT_FLOAT32, .la = l, .lb = 1 - l, .lc = l,
                      .alpha = 1, .beta = 0.5, .cin_mode = 3, .exact = 1};
      check_case(&cs);
    }
}

/* The driver's three plans: B packed once and shared, in one k chunk or
 * several (C accumulates them in place, or a workspace takes all of k when
 * C is bfloat16), units split by rows and, for few rows, by columns; and B
 * too large to share (each range packs its own chunks). The plans do not
 * depend on the micro-kernel: these run with the best one only (every
 * kernel against the twin took most of the TSan run's 10 minutes). */
static void test_shared_b_chunks_and_fallback(void) {
  static const struct { int64_t m, n, k; nrt_dtype ab, c; } cases[] = {
      {30, 1100, 1500, NRT_FLOAT32, NRT_FLOAT32},   /* shared B, 6 k chunks */
      {30, 1100, 1500, NRT_BFLOAT16, NRT_BFLOAT16}, /* shared B, workspace, all k at once */
      {30, 1100, 1500, NRT_BFLOAT16, NRT_FLOAT32},  /* shared B pairs, k chunks */
      {40, 700, 300, NRT_FLOAT32, NRT_FLOAT32},     /* few rows: units split columns */
      {5, 2100, 2050, NRT_FLOAT32, NRT_FLOAT32},    /* B too large to share */
      {700, 45, 37, NRT_FLOAT64, NRT_FLOAT64},      /* many rows, a short k */
      /* weight gradients' shapes: few rows, a long k, several column
       * blocks, in each compute type */
      {128, 512, 2048, NRT_FLOAT32, NRT_FLOAT32},
      {100, 300, 1100, NRT_FLOAT64, NRT_FLOAT64},
      {90, 400, 1500, NRT_BFLOAT16, NRT_FLOAT32},
  };
  for (size_t z = 0; z < sizeof cases / sizeof cases[0]; z++)
    for (int l = 0; l < 3; l++) {
      gemm_case cs = {.batch = 1, .m = cases[z].m, .n = cases[z].n, .k = cases[z].k, .kslices = 1,
                      .ab = cases[z].ab, .c = cases[z].c, .la = l == 1 ? COL_MAJOR : ROW_MAJOR,
                      .lb = l == 2 ? COL_MAJOR : l == 1 ? PADDED : ROW_MAJOR, .lc = ROW_MAJOR,
                      .alpha = 0.5, .beta = l == 0 ? 0 : -1.5, .cin_mode = l == 0 ? 0 : 1 + l,
                      .exact = 1};
      CHECK(run_case(&cs, NULL));
    }
  /* Batched, with B items sharing the buffer and chunked together. */
  gemm_case cs = {.batch = 3, .m = 17, .n = 300, .k = 900, .kslices = 1, .ab = NRT_FLOAT32,
                  .c = NRT_FLOAT32, .la = ROW_MAJOR, .lb = COL_MAJOR, .lc = PADDED, .alpha = 2,
                  .beta = 0.5, .cin_mode = 3, .exact = 1};
  CHECK(run_case(&cs, NULL));
  /* Batched, float32 B rows of 4 KiB and more: packed by k ranges of whole rows. */
  gemm_case rows = {.batch = 2, .m = 20, .n = 1056, .k = 700, .kslices = 1, .ab = NRT_FLOAT32,
                    .c = NRT_FLOAT32, .la = COL_MAJOR, .lb = ROW_MAJOR, .lc = ROW_MAJOR, .alpha = 1,
                    .beta = 0, .exact = 1};
  CHECK(run_case(&rows, NULL));
}

/* B read where it lies (no packing): float32/float64 B with unit column
 * stride, n a multiple of every kernel's nr, at most 256 KiB per item; with
 * row strides of n and more (ROW_EVEN pads), batches, k across k blocks,
 * partial row panels, C direct, transposed or through a workspace (padded),
 * and B too large in all to share (65 items: each range reads its own). */
static void test_b_read_in_place(void) {
  static const int64_t sizes[][4] = {/* batch, m, n, k */
                                     {1, 129, 64, 300}, {3, 40, 96, 200}, {2, 13, 128, 513},
                                     {1, 250, 256, 255}};
  static const nrt_dtype types[] = {NRT_FLOAT32, NRT_FLOAT64};
  for (size_t t = 0; t < 2; t++)
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++)
      for (int l = 0; l < 3; l++)
        for (int exact = 0; exact < 2; exact++) {
          gemm_case cs = {.batch = sizes[z][0], .m = sizes[z][1], .n = sizes[z][2], .k = sizes[z][3],
                          .kslices = 1, .ab = types[t], .c = types[t], .la = l == 2 ? COL_MAJOR : ROW_MAJOR,
                          .lb = l == 1 ? ROW_EVEN : ROW_MAJOR, .lc = l, .alpha = 0.5,
                          .beta = l == 0 ? 0 : -1.5, .cin_mode = l == 0 ? 0 : l, .exact = exact};
          check_case(&cs);
        }
  gemm_case many = {.batch = 65, .m = 2, .n = 1024, .k = 64, .kslices = 1, .ab = NRT_FLOAT32,
                    .c = NRT_FLOAT32, .la = ROW_MAJOR, .lb = ROW_MAJOR, .lc = ROW_MAJOR, .alpha = 1,
                    .beta = 0.5, .cin_mode = 1, .exact = 1};
  CHECK(run_case(&many, NULL));
}

/* float32 A read where it lies (a_in_place), by every kernel: rows of a
 * row-major A and k rows of a transposed one, with padded strides, a last
 * partial row panel (packed; with one k block and beta 0 a full tile
 * shifted up over the panel before: 131, 128 and 140 rows) or none, fewer rows than a panel (packed), k
 * across k blocks and chunks, batches, alpha/beta/Cin, C transposed (the
 * roles swap), and B wider than the in-place limit (A packed). */
static void test_a_read_in_place(void) {
  static const int64_t sizes[][4] = {/* batch, m, n, k */
                                     {1, 131, 64, 300}, {3, 48, 96, 70}, {2, 25, 128, 513},
                                     {1, 5, 40, 33},    {1, 96, 520, 40}, {1, 37, 512, 1100},
                                     {4, 128, 64, 128}, {3, 140, 32, 64}};
  static const int layouts[] = {ROW_MAJOR, ROW_EVEN, COL_MAJOR, COL_EVEN};
  for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++)
    for (int l = 0; l < 4; l++)
      for (int exact = 0; exact < 2; exact++) {
        gemm_case cs = {.batch = sizes[z][0], .m = sizes[z][1], .n = sizes[z][2], .k = sizes[z][3],
                        .kslices = 1, .ab = NRT_FLOAT32, .c = NRT_FLOAT32, .la = layouts[l],
                        .lb = l % 2 ? COL_MAJOR : ROW_MAJOR, .lc = exact ? l % 3 : ROW_MAJOR,
                        .alpha = exact ? 0.5 : 1, .beta = l % 2 ? -1.5 : 0, .cin_mode = l % 2 ? 1 + l / 2 : 0,
                        .exact = exact};
        check_case(&cs);
      }
}

/* The row-major twin of each float32 tile (f32_rows) against the tile on
 * the same values packed k-major (lda = mr), and on a k-major A read with a
 * wider stride: bit for bit, whatever the values (the same products, summed
 * in the same order), for any k, B stride, C stride, alpha and beta. */
static void test_rows_microkernel_twin(void) {
  const rt_gemm_kernel *const *list;
  int count = rt_gemm_kernels(NRT_FLOAT32, &list), twins = 0;
  static const int64_t ks[] = {1, 3, 4, 5, 17, 64, 257};
  static const float scalars[][2] = {{1, 0}, {0.75f, -1.25f}};
  for (int kx = 0; kx < count; kx++) {
    const rt_gemm_kernel *kern = list[kx];
    if (!kern->f32_rows) continue;
    twins++;
    const int64_t mr = kern->mr, nr = kern->nr, ldb = nr + 7, ldc = nr + 3;
    for (size_t z = 0; z < sizeof ks / sizeof ks[0]; z++)
      for (size_t sc = 0; sc < 2; sc++) {
        const int64_t k = ks[z], lda = k + 5, ldk = mr + 9; /* row-major and k-major strides */
        float *rows = malloc((size_t)(mr * lda) * 4), *packed = malloc((size_t)(k * mr) * 4);
        float *kmaj = malloc((size_t)(k * ldk) * 4), *b = malloc((size_t)(k * ldb) * 4);
        float *c[3];
        for (int v = 0; v < 3; v++) c[v] = malloc((size_t)(mr * ldc) * 4);
        for (int64_t q = 0; q < mr * lda; q++) rows[q] = (float)((int)(rng() % 20001) - 10000) / 997.0f;
        for (int64_t q = 0; q < k * ldb; q++) b[q] = (float)((int)(rng() % 20001) - 10000) / 991.0f;
        for (int64_t i = 0; i < mr; i++)
          for (int64_t p = 0; p < k; p++) packed[p * mr + i] = kmaj[p * ldk + i] = rows[i * lda + p];
        for (int64_t q = 0; q < mr * ldc; q++) c[0][q] = c[1][q] = c[2][q] = (float)((int)(rng() % 2001) - 1000) / 997.0f;
        kern->f32(k, packed, mr, b, ldb, c[0], ldc, scalars[sc][0], scalars[sc][1]);
        kern->f32_rows(k, rows, lda, b, ldb, c[1], ldc, scalars[sc][0], scalars[sc][1]);
        kern->f32(k, kmaj, ldk, b, ldb, c[2], ldc, scalars[sc][0], scalars[sc][1]);
        int same = memcmp(c[0], c[1], (size_t)(mr * ldc) * 4) == 0 && memcmp(c[0], c[2], (size_t)(mr * ldc) * 4) == 0;
        if (!same)
          fprintf(stderr, "rows twin [%s] k=%lld alpha %g beta %g: results differ\n", kern->name, (long long)k,
                  scalars[sc][0], scalars[sc][1]);
        CHECK(same);
        free(rows), free(packed), free(kmaj), free(b);
        for (int v = 0; v < 3; v++) free(c[v]);
      }
  }
  /* The SIMD levels have one (AVX-512: both 12 x 32 tiles); the portable tile packs row-major A. */
  CHECK(twins == 2 * (rt_isa() >= NRT_ISA_AVX512) + (rt_isa() >= NRT_ISA_AVX2));
}

/* The hand-scheduled AVX-512 float32 tile (avx512_12x32) against its
 * compiler-scheduled twin (avx512cc_12x32): bit for bit on arbitrary values,
 * for k around the unrolling and C-prefetch boundaries, packed and strided A
 * and B, C rows close together or 8 KiB apart, each alpha/beta case of its C
 * update; C starts as NaN where beta is 0 (never read), and what lies
 * between C's rows must stay untouched. */
static void test_hand_tile_twin(void) {
  const rt_gemm_kernel *const *list, *hand = NULL, *twin = NULL;
  int count = rt_gemm_kernels(NRT_FLOAT32, &list);
  for (int i = 0; i < count; i++) {
    if (!strcmp(list[i]->name, "avx512_12x32")) hand = list[i];
    if (!strcmp(list[i]->name, "avx512cc_12x32")) twin = list[i];
  }
  CHECK((hand != NULL) == (rt_isa() >= NRT_ISA_AVX512) && (twin != NULL) == (hand != NULL));
  if (!hand) return;
  CHECK(hand == list[0] && hand->mr == twin->mr && hand->nr == twin->nr);
  static const int64_t ks[] = {1, 2, 3, 4, 5, 7, 15, 16, 17, 19, 20, 21, 24, 64, 255, 256, 257};
  static const float scalars[][2] = {{1, 0}, {1, 1}, {0.75f, 0}, {0.75f, -1.25f}, {1, -1}};
  const int64_t mr = hand->mr, nr = hand->nr;
  for (size_t z = 0; z < sizeof ks / sizeof ks[0]; z++)
    for (int strided = 0; strided < 2; strided++)
      for (size_t sc = 0; sc < sizeof scalars / sizeof scalars[0]; sc++) {
        const int64_t k = ks[z], lda = strided ? mr + 9 : mr, ldb = strided ? nr + 7 : nr;
        const int64_t ldc = strided ? 2048 : nr + 3;
        float *a = malloc((size_t)(k * lda) * 4), *b = malloc((size_t)(k * ldb) * 4), *c[2];
        for (int v = 0; v < 2; v++) c[v] = malloc((size_t)(mr * ldc) * 4);
        for (int64_t q = 0; q < k * lda; q++) a[q] = (float)((int)(rng() % 20001) - 10000) / 997.0f;
        for (int64_t q = 0; q < k * ldb; q++) b[q] = (float)((int)(rng() % 20001) - 10000) / 991.0f;
        for (int64_t q = 0; q < mr * ldc; q++)
          c[0][q] = c[1][q] = scalars[sc][1] == 0 ? NAN : (float)((int)(rng() % 2001) - 1000) / 997.0f;
        hand->f32(k, a, lda, b, ldb, c[0], ldc, scalars[sc][0], scalars[sc][1]);
        twin->f32(k, a, lda, b, ldb, c[1], ldc, scalars[sc][0], scalars[sc][1]);
        int same = memcmp(c[0], c[1], (size_t)(mr * ldc) * 4) == 0, finite = 1;
        for (int64_t i = 0; i < mr; i++)
          for (int64_t j = 0; j < nr; j++) finite &= isfinite(c[0][i * ldc + j]) != 0;
        if (!same || !finite)
          fprintf(stderr, "hand tile k=%lld strided %d alpha %g beta %g: %s\n", (long long)k, strided,
                  scalars[sc][0], scalars[sc][1], same ? "not finite" : "differs from its twin");
        CHECK(same && finite);
        free(a), free(b), free(c[0]), free(c[1]);
      }
}

/* bfloat16 pair packing: k pairs read as 32-bit words (even leading
 * dimension, contiguous k), k-major rows merged, odd k and short panels. */
static void test_bfloat16_pair_packing(void) {
  static const int64_t sizes[][3] = {{19, 45, 301}, {40, 70, 513}, {13, 33, 7}, {129, 17, 1030}, {8, 9, 3}};
  static const int layouts[][2] = {{ROW_EVEN, ROW_MAJOR}, {ROW_EVEN, COL_EVEN}, {COL_MAJOR, COL_EVEN},
                                   {ROW_MAJOR, ROW_EVEN}};
  for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++)
    for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++)
      for (int exact = 0; exact < 2; exact++) {
        gemm_case cs = {.batch = 2, .m = sizes[z][0], .n = sizes[z][1], .k = sizes[z][2], .kslices = 1,
                        .ab = NRT_BFLOAT16, .c = exact ? NRT_FLOAT32 : NRT_BFLOAT16,
                        .la = layouts[l][0], .lb = layouts[l][1], .lc = ROW_MAJOR, .alpha = 0.5,
                        .beta = 2, .cin_mode = 1, .exact = exact};
        check_case(&cs);
      }
}

/* The k-major bfloat16 pair packing (pair_panels_avx512's permutes, or the
 * portable gather) against its definition: panel q, pair p, row r holds
 * k rows 2p and 2p + 1 of row q*R + r (low half the even one; an odd last
 * k pairs with 0), rows past the end zero; panel widths 12 and 32, sizes
 * that leave short panels and odd k, pairs ahead of the prefetch and fewer. */
static void test_bf16_kmajor_pair_twin(void) {
  static const int64_t sizes[][2] = {{5, 1}, {12, 7}, {40, 64}, {77, 513}, {32, 30}, {129, 17}};
  static const int widths[] = {12, 32};
  for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++)
    for (size_t w = 0; w < 2; w++) {
      const int R = widths[w];
      const int64_t rows = sizes[z][0], kc = sizes[z][1], s_k = rows + 3, k2 = (kc + 1) / 2;
      const int64_t panels = (rows + R - 1) / R;
      uint16_t *src = malloc((size_t)(kc * s_k) * 2);
      uint32_t *dst = malloc((size_t)(panels * R * k2) * 4);
      for (int64_t q = 0; q < kc * s_k; q++) src[q] = (uint16_t)rng();
      memset(dst, 0xa5, (size_t)(panels * R * k2) * 4);
      const rt_gemm_src sa = {.base = (const char *)src, .dtype = NRT_BFLOAT16, .s_r = 1, .s_k = s_k, .s_slice = 0, .k = kc};
      rt_gemm_pack_panels_bf16x2(dst, R, &sa, 0, rows, 0, kc);
      int64_t bad = -1;
      for (int64_t pn = 0; pn < panels && bad < 0; pn++)
        for (int64_t p = 0; p < k2 && bad < 0; p++)
          for (int64_t r = 0; r < R && bad < 0; r++) {
            const int64_t row = pn * R + r, at = pn * R * k2 + p * R + r;
            uint32_t want = 0;
            if (row < rows)
              want = src[2 * p * s_k + row] | (2 * p + 1 < kc ? (uint32_t)src[(2 * p + 1) * s_k + row] << 16 : 0);
            if (dst[at] != want) bad = at;
          }
      if (bad >= 0)
        fprintf(stderr, "k-major pairs rows %lld kc %lld R %d: word %lld wrong\n", (long long)rows, (long long)kc, R,
                (long long)bad);
      CHECK(bad < 0);
      free(src), free(dst);
    }
}

/* float16 packing converts every one of the 65536 values exactly
 * (subnormals included; NaN stays NaN), from both layouts, with whole and
 * partial panels and the zero padding. */
static void test_float16_packing_exact(void) {
  uint16_t *h = malloc(65536 * 2);
  float *dst = malloc((size_t)(256 + 32) * 256 * 4);
  for (int i = 0; i < 65536; i++) h[i] = (uint16_t)i;
  static const int Rs[] = {12, 32, 6};
  for (int layout = 0; layout < 2; layout++)
    for (size_t ri = 0; ri < sizeof Rs / sizeof Rs[0]; ri++)
      for (int z = 0; z < 2; z++) {
        const int R = Rs[ri];
        const int64_t rows = z ? 13 : 256;
        /* value (row r, k p) is h[r * 256 + p] in both layouts */
        rt_gemm_src src_t = {.base = (const char *)h, .dtype = NRT_FLOAT16, .s_r = 256, .s_k = 1, .k = 256};
        if (layout) { /* the same values stored k-major: transpose h first */
          static uint16_t ht[65536];
          for (int r = 0; r < 256; r++)
            for (int p = 0; p < 256; p++) ht[p * 256 + r] = h[r * 256 + p];
          src_t.base = (const char *)ht, src_t.s_r = 1, src_t.s_k = 256;
        }
        rt_gemm_pack_panels_f32(dst, R, &src_t, 0, rows, 0, 256);
        int bad = 0;
        for (int64_t r = 0; r < (rows + R - 1) / R * R && !bad; r++)
          for (int64_t p = 0; p < 256 && !bad; p++) {
            float got = dst[r / R * R * 256 + p * R + r % R];
            float want = r < rows ? half_value(h[r * 256 + p]) : 0.0f;
            if (memcmp(&got, &want, 4) != 0 && !(isnan(got) && isnan(want))) {
              fprintf(stderr, "float16 pack layout %d R %d rows %lld at (%lld,%lld): got %a want %a\n", layout, R,
                      (long long)rows, (long long)r, (long long)p, got, want);
              bad = 1;
            }
          }
        CHECK(!bad);
      }
  free(h), free(dst);
}

/* ---- the AVX512_BF16 micro-kernel against its bit-exact twin ------------- */

/* One VDPBF16PS lane, as the instruction is defined (Intel SDM; checked
 * bit for bit on AMD Zen 4 too): bfloat16 and accumulator subnormals read
 * as zero, the high pair's exact product added first and rounded once
 * (nearest even), then the low pair's, each sum flushed to zero when
 * subnormal. Whole-GEMM tests cannot pin this down (their oracle bounds
 * the rounding); this one holds the kernel to every bit. */
ORACLE_CODE static float daz(float v) { return fpclassify(v) == FP_SUBNORMAL ? copysignf(0.0f, v) : v; }
ORACLE_CODE static float bf16_value(uint32_t h) {
  float f;
  uint32_t bits = (h & 0xffffu) << 16;
  memcpy(&f, &bits, 4);
  return daz(f);
}
ORACLE_CODE static float dpbf16_lane(float acc, uint32_t a, uint32_t b) {
  acc = daz(fmaf(bf16_value(a >> 16), bf16_value(b >> 16), daz(acc)));
  return daz(fmaf(bf16_value(a), bf16_value(b), acc));
}

/* The twin of rt_gemm_ukr_bf16: the tile through dpbf16_lane, then
 * alpha and beta as the kernel applies them (a product, then one fused
 * multiply-add, in the caller's rounding mode). */
ORACLE_CODE static void ukr_bf16_twin(int mr, int nr, int64_t k2, const uint32_t *a, const uint32_t *b,
                                      float *c, int64_t ldc, float alpha, float beta) {
  for (int i = 0; i < mr; i++)
    for (int j = 0; j < nr; j++) {
      float acc = 0;
      for (int64_t q = 0; q < k2; q++) acc = dpbf16_lane(acc, a[q * mr + i], b[q * nr + j]);
      float r = acc * alpha, *cp = c + i * ldc + j;
      *cp = beta == 0 ? r : fmaf(*cp, beta, r);
    }
}

/* TDPBF16PS as measured on an AMX Xeon (see gemm_amx.c): per C element
 * and tile step of 16 k pairs, the low (even k) products and the high
 * ones are summed apart, each in k order from +0 with a rounding per
 * step, then acc += (even + odd); subnormal inputs are zero and every
 * subnormal result is flushed. Pairs past k2 are the kernel's zero
 * padding (they can turn a -0 partial sum into +0). */
ORACLE_CODE static float amx_step_sum(float acc, int64_t k2, int64_t s0, const uint32_t *a, int64_t a_step,
                                      const uint32_t *b, int64_t b_step) {
  float even = 0, odd = 0;
  for (int64_t q = s0; q < s0 + 16; q++) {
    uint32_t x = q < k2 ? a[q * a_step] : 0, y = q < k2 ? b[q * b_step] : 0;
    even = daz(fmaf(bf16_value(x), bf16_value(y), even));
    odd = daz(fmaf(bf16_value(x >> 16), bf16_value(y >> 16), odd));
  }
  return daz(acc + daz(even + odd));
}

/* The twin of the AMX kernel, a k-major as for ukr_bf16_twin. */
ORACLE_CODE static void ukr_bf16_amx_twin(int mr, int nr, int64_t k2, const uint32_t *a, const uint32_t *b,
                                          float *c, int64_t ldc, float alpha, float beta) {
  for (int i = 0; i < mr; i++)
    for (int j = 0; j < nr; j++) {
      float acc = 0;
      for (int64_t s0 = 0; s0 < k2; s0 += 16) acc = amx_step_sum(acc, k2, s0, a + i, mr, b + j, nr);
      float r = acc * alpha, *cp = c + i * ldc + j;
      *cp = beta == 0 ? r : fmaf(*cp, beta, r);
    }
}

/* A bfloat16 of a random sign and mantissa whose exponent field is drawn
 * from [lo, hi] (0: zero or subnormal). */
static uint32_t random_bf16(int lo, int hi) {
  uint32_t e = (uint32_t)(lo + (int)(rng() % (uint64_t)(hi - lo + 1)));
  return (uint32_t)(rng() & 1) << 15 | e << 7 | (uint32_t)(rng() & 127);
}

static void test_bf16_microkernel_twin(void) {
  const rt_gemm_kernel *const *list;
  int count = rt_gemm_kernels(NRT_BFLOAT16, &list);
  if (count == 0) {
    fprintf(stderr, "skip test_bf16_microkernel_twin: this CPU (or TORCHNEURON_ISA level) has no AVX512_BF16 kernel\n");
    return;
  }
  /* Exponent ranges: ordinary values; values near the bottom of the range
   * (subnormal inputs, products and sums, which the instruction flushes);
   * the full range (overflow to infinity, inf - inf = NaN). */
  static const int ranges[][2] = {{118, 134}, {0, 40}, {0, 254}};
  static const int64_t k2s[] = {1, 2, 3, 8, 15, 16, 17, 37, 256};
  static const float scalars[][2] = {{1, 0}, {0.75f, -1.25f}, {-2, 0.5f}};
  for (int kx = 0; kx < count; kx++) {
    const rt_gemm_kernel *kern = list[kx];
    const int mr = kern->mr, nr = kern->nr, ldc = nr + 5;
    for (size_t r = 0; r < 3; r++)
      for (size_t z = 0; z < sizeof k2s / sizeof k2s[0]; z++)
        for (size_t sc = 0; sc < 3; sc++) {
          int64_t k2 = k2s[z];
          uint32_t *a = malloc((size_t)(k2 * mr) * 4), *b = malloc((size_t)(k2 * nr) * 4);
          float *c = malloc((size_t)(mr * ldc) * 4), *want = malloc((size_t)(mr * ldc) * 4);
          for (int64_t q = 0; q < k2 * mr; q++) a[q] = random_bf16(ranges[r][0], ranges[r][1]) | random_bf16(ranges[r][0], ranges[r][1]) << 16;
          for (int64_t q = 0; q < k2 * nr; q++) b[q] = random_bf16(ranges[r][0], ranges[r][1]) | random_bf16(ranges[r][0], ranges[r][1]) << 16;
          for (int q = 0; q < mr * ldc; q++) c[q] = want[q] = (float)((int)(rng() % 2001) - 1000) / 997.0f;
          if (kern->bf16_pack_a) { /* AMX: its own A layout, its own sums */
            /* The same words as a row-major bfloat16 matrix, packed by the kernel. */
            uint16_t *ar = malloc((size_t)(k2 * mr) * 4);
            uint32_t *al = malloc((size_t)(k2 * mr) * 4);
            for (int i = 0; i < mr; i++)
              for (int64_t q = 0; q < k2; q++)
                ar[i * 2 * k2 + 2 * q] = (uint16_t)a[q * mr + i], ar[i * 2 * k2 + 2 * q + 1] = (uint16_t)(a[q * mr + i] >> 16);
            const rt_gemm_src src = {.base = (const char *)ar, .dtype = NRT_BFLOAT16, .s_r = 2 * k2, .s_k = 1, .k = 2 * k2};
            kern->bf16_pack_a(al, &src, 0, mr, 0, 2 * k2);
            if (kern->begin) kern->begin();
            kern->bf16(k2, al, b, nr, c, ldc, scalars[sc][0], scalars[sc][1]);
            if (kern->end) kern->end();
            ukr_bf16_amx_twin(mr, nr, k2, a, b, want, ldc, scalars[sc][0], scalars[sc][1]);
            free(al), free(ar);
          } else {
            kern->bf16(k2, a, b, nr, c, ldc, scalars[sc][0], scalars[sc][1]);
            ukr_bf16_twin(mr, nr, k2, a, b, want, ldc, scalars[sc][0], scalars[sc][1]);
          }
          int bad = 0;
          for (int i = 0; i < mr && !bad; i++)
            for (int j = 0; j < ldc && !bad; j++) {
              float g = c[i * ldc + j], w = want[i * ldc + j];
              if (memcmp(&g, &w, 4) != 0 && !(isnan(g) && isnan(w))) {
                fprintf(stderr, "[%s] k2 %lld exponents %d..%d alpha %g beta %g at (%d,%d): got %a want %a\n",
                        kern->name, (long long)k2, ranges[r][0], ranges[r][1], scalars[sc][0], scalars[sc][1],
                        i, j, g, w);
                bad = 1;
              }
            }
          CHECK(!bad);
          free(a), free(b), free(c), free(want);
        }
  }
}

/* Through rt_gemm on AMX: every layout of A and B, batched, m, n, k off
 * the tile sizes, one and several k blocks, against the exact model (the
 * k blocks of the plan, each summed in tile steps, added in order). */
static void test_amx_gemm_exact_model(void) {
  const rt_gemm_kernel *const *list;
  int count = rt_gemm_kernels(NRT_BFLOAT16, &list);
  if (count == 0 || !list[0]->bf16_pack_a) {
    fprintf(stderr, "skip test_amx_gemm_exact_model: this CPU (or TORCHNEURON_ISA) has no AMX-BF16 kernel\n");
    return;
  }
  const rt_gemm_kernel *kern = list[0];
  static const int64_t shapes[][4] = {{1, 37, 45, 70}, {3, 5, 33, 31}, {2, 64, 96, 512},
                                      {1, 70, 40, 1000}, {2, 33, 65, 17}, {1, 96, 64, 1}};
  for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++)
    for (int layout = 0; layout < 4; layout++) {
      const int64_t batch = shapes[sh][0], m = shapes[sh][1], n = shapes[sh][2], k = shapes[sh][3];
      const int ta = layout & 1, tb = layout >> 1, k2 = (int)((k + 1) / 2);
      uint16_t *a = malloc((size_t)(batch * m * k) * 2), *b = malloc((size_t)(batch * k * n) * 2);
      float *c = malloc((size_t)(batch * m * n) * 4);
      uint32_t *aw = malloc((size_t)(m * k2) * 4), *bw = malloc((size_t)(k2 * n) * 4);
      for (int64_t q = 0; q < batch * m * k; q++) a[q] = (uint16_t)random_bf16(q % 13 ? 110 : 0, 140);
      for (int64_t q = 0; q < batch * k * n; q++) b[q] = (uint16_t)random_bf16(q % 11 ? 110 : 0, 140);
      rt_gemm_args g = {.batch = batch, .m = m, .n = n, .k = k, .kslices = 1, .ab_dtype = NRT_BFLOAT16,
                        .c_dtype = NRT_FLOAT32, .a = a, .a_bs = m * k, .a_rs = ta ? 1 : k, .a_cs = ta ? m : 1,
                        .b = b, .b_bs = k * n, .b_rs = tb ? 1 : n, .b_cs = tb ? k : 1,
                        .c = c, .c_bs = m * n, .c_rs = n, .c_cs = 1, .alpha = 1, .kernel = sh % 2 ? kern : NULL};
      CHECK_OK(rt_gemm(&g));
      /* The plan's k blocks: equal, at most kc, whole pairs. */
      const int64_t blocks = (k + kern->kc - 1) / kern->kc, kc = ((k + blocks - 1) / blocks + 1) / 2 * 2;
      int bad = 0;
      for (int64_t t = 0; t < batch && !bad; t++) {
        const uint16_t *at = a + t * m * k, *bt = b + t * k * n;
        for (int64_t i = 0; i < m; i++)
          for (int64_t q = 0; q < k2; q++) {
            uint32_t lo = at[ta ? 2 * q * m + i : i * k + 2 * q];
            uint32_t hi = 2 * q + 1 < k ? at[ta ? (2 * q + 1) * m + i : i * k + 2 * q + 1] : 0;
            aw[i * k2 + q] = lo | hi << 16;
          }
        for (int64_t q = 0; q < k2; q++)
          for (int64_t j = 0; j < n; j++) {
            uint32_t lo = bt[tb ? j * k + 2 * q : 2 * q * n + j];
            uint32_t hi = 2 * q + 1 < k ? bt[tb ? j * k + 2 * q + 1 : (2 * q + 1) * n + j] : 0;
            bw[q * n + j] = lo | hi << 16;
          }
        for (int64_t i = 0; i < m && !bad; i++)
          for (int64_t j = 0; j < n && !bad; j++) {
            float total = 0;
            for (int64_t q0 = 0; q0 < k2; q0 += kc / 2) {
              const int64_t q1 = q0 + kc / 2 < k2 ? q0 + kc / 2 : k2;
              float acc = 0;
              for (int64_t s0 = q0; s0 < q1; s0 += 16) acc = amx_step_sum(acc, q1, s0, aw + i * k2, 1, bw + j, n);
              total = q0 == 0 ? acc : total + acc;
            }
            float got = c[t * m * n + i * n + j];
            if (memcmp(&got, &total, 4) != 0) {
              fprintf(stderr, "amx gemm %lldx%lldx%lld batch %lld layout %d at (%lld,%lld,%lld): got %a want %a\n",
                      (long long)m, (long long)n, (long long)k, (long long)batch, layout, (long long)t,
                      (long long)i, (long long)j, got, total);
              bad = 1;
            }
          }
      }
      CHECK(!bad);
      free(a), free(b), free(c), free(aw), free(bw);
    }
}

/* bfloat16 C straight from the AMX kernel (bf16_c: one k block, no Cin,
 * A packed or read in place):
 * every element the exact model's float32 sum (times alpha) rounded by
 * rt_bfloat16_from_float, bit for bit. Inputs in an ordinary range, with
 * zeros and subnormals, in the bottom range (sums the instruction
 * flushes), and with NaNs carrying payloads (0x7fc0 in C); whole 32 x 32
 * tiles (the vector rounding) and ragged ones, alpha 1 and 0.5, a C row
 * stride longer than n. */
static void test_amx_gemm_bf16_c(void) {
  const rt_gemm_kernel *const *list;
  int count = rt_gemm_kernels(NRT_BFLOAT16, &list);
  if (count == 0 || !list[0]->bf16_c) {
    fprintf(stderr, "skip test_amx_gemm_bf16_c: this CPU (or TORCHNEURON_ISA) has no AMX-BF16 kernel\n");
    return;
  }
  /* 64x96x256 and 64x40x70 read A in place (a short last step in the
   * second), the others pack it. */
  static const int64_t shapes[][3] = {{64, 96, 256}, {64, 40, 70}, {37, 45, 70}, {96, 64, 1}, {32, 32, 1000}};
  static const int ranges[][2] = {{110, 140}, {0, 40}};
  for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++)
    for (int variant = 0; variant < 6; variant++) {
      const int64_t m = shapes[sh][0], n = shapes[sh][1], k = shapes[sh][2], ldc = n + 3, k2 = (k + 1) / 2;
      const int ta = variant == 5, tb = variant % 2, r = variant / 2 % 2, nans = variant >= 4;
      const float alpha = variant % 3 == 2 ? 0.5f : 1.0f;
      uint16_t *a = malloc((size_t)(m * k) * 2), *b = malloc((size_t)(k * n) * 2), *c = malloc((size_t)(m * ldc) * 2);
      uint32_t *aw = malloc((size_t)(m * k2) * 4), *bw = malloc((size_t)(k2 * n) * 4);
      for (int64_t q = 0; q < m * k; q++) a[q] = (uint16_t)random_bf16(q % 13 ? ranges[r][0] : 0, ranges[r][1]);
      for (int64_t q = 0; q < k * n; q++) b[q] = (uint16_t)random_bf16(q % 11 ? ranges[r][0] : 0, ranges[r][1]);
      if (nans)
        for (int64_t q = 5; q < m * k; q += 97) a[q] = q % 2 ? 0x7f81 : 0xffc1;
      memset(c, 0xa5, (size_t)(m * ldc) * 2);
      rt_gemm_args g = {.batch = 1, .m = m, .n = n, .k = k, .kslices = 1, .ab_dtype = NRT_BFLOAT16,
                        .c_dtype = NRT_BFLOAT16, .a = a, .a_rs = ta ? 1 : k, .a_cs = ta ? m : 1, .b = b,
                        .b_rs = tb ? 1 : n, .b_cs = tb ? k : 1, .c = c, .c_rs = ldc, .c_cs = 1, .alpha = alpha};
      CHECK_OK(rt_gemm(&g));
      for (int64_t i = 0; i < m; i++)
        for (int64_t q = 0; q < k2; q++) {
          uint32_t lo = a[ta ? 2 * q * m + i : i * k + 2 * q];
          uint32_t hi = 2 * q + 1 < k ? a[ta ? (2 * q + 1) * m + i : i * k + 2 * q + 1] : 0;
          aw[i * k2 + q] = lo | hi << 16;
        }
      for (int64_t q = 0; q < k2; q++)
        for (int64_t j = 0; j < n; j++) {
          uint32_t lo = b[tb ? j * k + 2 * q : 2 * q * n + j];
          uint32_t hi = 2 * q + 1 < k ? b[tb ? j * k + 2 * q + 1 : (2 * q + 1) * n + j] : 0;
          bw[q * n + j] = lo | hi << 16;
        }
      int bad = 0;
      for (int64_t i = 0; i < m && !bad; i++)
        for (int64_t j = 0; j < ldc && !bad; j++) {
          uint16_t want = 0xa5a5;
          if (j < n) {
            float acc = 0;
            for (int64_t s0 = 0; s0 < k2; s0 += 16) acc = amx_step_sum(acc, k2, s0, aw + i * k2, 1, bw + j, n);
            want = rt_bfloat16_from_float(acc * alpha);
          }
          if (c[i * ldc + j] != want) {
            fprintf(stderr, "amx bf16 C %lldx%lldx%lld variant %d at (%lld,%lld): got %04x want %04x\n", (long long)m,
                    (long long)n, (long long)k, variant, (long long)i, (long long)j, c[i * ldc + j], want);
            bad = 1;
          }
        }
      CHECK(!bad);
      free(a), free(b), free(c), free(aw), free(bw);
    }
}

/* The AMX block kernel (bf16_c_block: tiles rounded one tile late, in
 * row or column panel order) writes what bf16_c writes tile by tile, bit
 * for bit (test_amx_gemm_bf16_c holds bf16_c to the TDPBF16PS model), on
 * blocks rt_gemm's units rarely make in a test-sized product: B blocks
 * over 1 MiB (column panels outer) as well as small ones, ragged rows and
 * columns, a short last k step, A packed and read in place, alpha 1 and
 * 0.5, NaNs. */
static void test_amx_block_matches_tiles(void) {
  const rt_gemm_kernel *const *list;
  int count = rt_gemm_kernels(NRT_BFLOAT16, &list);
  if (count == 0 || !list[0]->bf16_c_block) {
    fprintf(stderr, "skip test_amx_block_matches_tiles: this CPU (or TORCHNEURON_ISA) has no AMX-BF16 kernel\n");
    return;
  }
  const rt_gemm_kernel *kern = list[0];
  /* rows, cols, k, A in place; 40 x 1050 x 520 sweeps 1.1 MiB of B. */
  static const int64_t shapes[][4] = {{40, 1050, 520, 0}, {96, 200, 256, 0}, {64, 1040, 512, 1}, {64, 72, 70, 1}};
  for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++)
    for (int variant = 0; variant < 2; variant++) {
      const int64_t m = shapes[sh][0], n = shapes[sh][1], k = shapes[sh][2], k2 = (k + 1) / 2, ldc = n + 5;
      const int in_place = (int)shapes[sh][3];
      const int64_t mpad = (m + 31) / 32 * 32, npad = (n + 31) / 32 * 32;
      const float alpha = variant ? 0.5f : 1.0f;
      uint16_t *a = malloc((size_t)(m * k) * 2), *b = malloc((size_t)(k * n) * 2);
      uint16_t *c_block = malloc((size_t)(m * ldc) * 2), *c_tiles = malloc((size_t)(m * ldc) * 2);
      uint32_t *ap = aligned_alloc(64, (size_t)(mpad * k2) * 4), *bp = aligned_alloc(64, (size_t)(npad * k2) * 4);
      for (int64_t q = 0; q < m * k; q++) a[q] = (uint16_t)random_bf16(q % 13 ? 110 : 0, 140);
      for (int64_t q = 0; q < k * n; q++) b[q] = (uint16_t)random_bf16(q % 11 ? 110 : 0, 140);
      for (int64_t q = 7; variant && q < m * k; q += 301) a[q] = 0x7fc1;
      const rt_gemm_src sa = {.base = (const char *)a, .dtype = NRT_BFLOAT16, .s_r = k, .s_k = 1, .s_slice = 0, .k = k};
      const rt_gemm_src sb = {.base = (const char *)b, .dtype = NRT_BFLOAT16, .s_r = 1, .s_k = n, .s_slice = 0, .k = k};
      kern->bf16_pack_a(ap, &sa, 0, m, 0, k);
      rt_gemm_pack_panels_bf16x2(bp, 32, &sb, 0, n, 0, k);
      memset(c_block, 0xa5, (size_t)(m * ldc) * 2);
      memset(c_tiles, 0xa5, (size_t)(m * ldc) * 2);
      /* In place: A's rows as words (k even, rows whole panels). */
      const uint32_t *a_words = in_place ? (const uint32_t *)(const void *)a : ap;
      const int64_t lda = in_place ? k / 2 : 0, a_panel = in_place ? 32 * k / 2 : 32 * k2;
      kern->begin();
      kern->bf16_c_block(k2, a_words, a_panel, lda, bp, 32 * k2, 32, c_block, ldc, m, n, alpha);
      for (int64_t i = 0; i < m; i += 32)
        for (int64_t j = 0; j < n; j += 32)
          kern->bf16_c(k2, a_words + i / 32 * a_panel, lda, bp + j / 32 * 32 * k2, 32, c_tiles + i * ldc + j, ldc,
                       m - i < 32 ? m - i : 32, n - j < 32 ? n - j : 32, alpha);
      kern->end();
      int64_t bad = -1;
      for (int64_t q = 0; q < m * ldc && bad < 0; q++)
        if (c_block[q] != c_tiles[q]) bad = q;
      if (bad >= 0)
        fprintf(stderr, "amx block %lldx%lldx%lld variant %d at (%lld,%lld): got %04x, tiles %04x\n", (long long)m,
                (long long)n, (long long)k, variant, (long long)(bad / ldc), (long long)(bad % ldc), c_block[bad],
                c_tiles[bad]);
      CHECK(bad < 0);
      free(a), free(b), free(c_block), free(c_tiles), free(ap), free(bp);
    }
}

/* The AVX512-BF16 flush of bfloat16 C (gemm_round.c) rounds every float32
 * as rt_bfloat16_from_float: ties to even, subnormals kept (the
 * instruction alone reads them as zero), NaN as 0x7fc0 (the instruction
 * alone keeps the payload), with and without beta * Cin, whole 32-wide
 * rows and ragged ones. */
static void test_bf16_flush_rounding(void) {
  const int64_t rows = 5, n = 77, ld = 80, c_rs = 83;
  float *w = calloc((size_t)(rows * ld), 4);
  uint16_t *in = malloc((size_t)(rows * c_rs) * 2), *c = malloc((size_t)(rows * c_rs) * 2);
  static const uint32_t specials[] = {0x7fc00000u, 0xffc00001u, 0x7f800001u, 0xff812345u, 0x7f800000u,
                                      0xff800000u, 0x00000001u, 0x80000001u, 0x007fffffu, 0x807fffffu,
                                      0x00008000u, 0x00018000u, 0x00800000u, 0x3f808000u, 0x3f818000u,
                                      0x3f807fffu, 0x7f7fffffu, 0x00000000u, 0x80000000u, 0x0000ffffu};
  const int nspec = (int)(sizeof specials / sizeof specials[0]);
  if (!rt_gemm_flush_bf16_rows(c, c_rs, w, ld, NULL, 0, 0, 0, 0)) {
    fprintf(stderr, "skip test_bf16_flush_rounding: this CPU (or TORCHNEURON_ISA level) has no AVX512-BF16\n");
    free(w), free(in), free(c);
    return;
  }
  for (int round = 0; round < 40; round++) {
    /* Mostly ordinary values; a special one in some 32-value groups only,
     * so that both the vector and the fallback paths write. */
    for (int64_t q = 0; q < rows * ld; q++) {
      uint32_t x = (uint32_t)rng();
      if (rng() % 4 == 0) x = (x & 0x8000ffffu) | (uint32_t)(100 + rng() % 60) << 23;
      if ((q / 32 + round) % 3 == 0 && rng() % 8 == 0) x = specials[rng() % (uint64_t)nspec];
      memcpy(&w[q], &x, 4);
    }
    for (int64_t q = 0; q < rows * c_rs; q++) in[q] = (uint16_t)rng();
    const int with_in = round % 2, width = round % 4 < 2 ? 32 : (int)n;
    const float beta = round % 3 ? 0.75f : -3.0f;
    memset(c, 0xa5, (size_t)(rows * c_rs) * 2);
    CHECK(rt_gemm_flush_bf16_rows(c, c_rs, w, ld, with_in ? in : NULL, c_rs, beta, rows, width));
    for (int64_t i = 0; i < rows; i++)
      for (int64_t j = 0; j < c_rs; j++) {
        uint16_t want = 0xa5a5;
        if (j < width) {
          float v = w[i * ld + j];
          if (with_in) v = v + beta * rt_bfloat16_to_float(in[i * c_rs + j]);
          want = rt_bfloat16_from_float(v);
        }
        if (c[i * c_rs + j] != want) {
          fprintf(stderr, "bf16 flush (in %d, width %d) at (%lld,%lld): %08x -> %04x, want %04x\n", with_in,
                  width, (long long)i, (long long)j, *(const uint32_t *)(const void *)&w[i * ld + j],
                  c[i * c_rs + j], want);
          CHECK(0);
          free(w), free(in), free(c);
          return;
        }
      }
  }
  free(w), free(in), free(c);
}

/* Through rt_gemm: bfloat16 subnormal inputs count as zero in the pair
 * kernels and exactly in the float32 ones (each against its own exact
 * oracle: products of the normal inputs only, or of all). */
static void test_bf16_subnormal_inputs(void) {
  const rt_gemm_kernel *const *pairs, *const *f32;
  int npairs = rt_gemm_kernels(NRT_BFLOAT16, &pairs), nf32 = rt_gemm_kernels(NRT_FLOAT32, &f32);
  const int64_t m = 19, n = 40, k = 33;
  uint16_t *a = malloc((size_t)(m * k) * 2), *b = malloc((size_t)(k * n) * 2);
  float *c = malloc((size_t)(m * n) * 4);
  /* Even rows of A subnormal (or zero), odd rows in [1, 2); B about 2^99,
   * so that every product is a normal float32 and every sum exact: the
   * even rows are zero where subnormals are flushed, not elsewhere. */
  for (int64_t q = 0; q < m * k; q++) a[q] = (uint16_t)(q / k % 2 ? 0x3f80 + (rng() % 8) * 16 : random_bf16(0, 0));
  for (int64_t q = 0; q < k * n; q++) b[q] = (uint16_t)(0x7100 + (rng() % 8) * 16);
  for (int flush = 0; flush < 2; flush++)
    for (int kx = 0; kx < (flush ? npairs : nf32); kx++) {
      rt_gemm_args g = {.batch = 1, .m = m, .n = n, .k = k, .kslices = 1, .ab_dtype = NRT_BFLOAT16,
                        .c_dtype = NRT_FLOAT32, .a = a, .a_rs = k, .a_cs = 1, .b = b, .b_rs = n, .b_cs = 1,
                        .c = c, .c_rs = n, .c_cs = 1, .alpha = 1, .kernel = flush ? pairs[kx] : f32[kx]};
      CHECK_OK(rt_gemm(&g));
      int bad = 0;
      for (int64_t i = 0; i < m && !bad; i++)
        for (int64_t j = 0; j < n && !bad; j++) {
          double want = 0;
          for (int64_t p = 0; p < k; p++) {
            double x = read_value(NRT_BFLOAT16, a + i * k + p), y = read_value(NRT_BFLOAT16, b + p * n + j);
            if (flush && (fpclassify((float)x) == FP_SUBNORMAL || fpclassify((float)y) == FP_SUBNORMAL)) continue;
            want += x * y;
          }
          if ((double)c[i * n + j] != (double)(float)want) {
            fprintf(stderr, "subnormal bf16 [%s] at (%lld,%lld): got %a want %a\n", g.kernel->name,
                    (long long)i, (long long)j, c[i * n + j], (double)(float)want);
            bad = 1;
          }
        }
      CHECK(!bad);
    }
  free(a), free(b), free(c);
}

static void test_rounding_within_bound(void) {
  static const nrt_dtype types[][2] = {{NRT_FLOAT32, NRT_FLOAT32}, {NRT_FLOAT64, NRT_FLOAT64},
                                       {NRT_BFLOAT16, NRT_BFLOAT16}, {NRT_FLOAT16, NRT_FLOAT16}};
  for (size_t t = 0; t < 4; t++)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
      gemm_case cs = {.batch = 2, .m = shapes[s][0], .n = shapes[s][1], .k = shapes[s][2],
                      .kslices = 1, .ab = types[t][0], .c = types[t][1], .la = (int)s % 4,
                      .lb = (int)(s / 2) % 4, .lc = (int)s % 3, .alpha = 0.75, .beta = 0.3,
                      .cin_mode = 1, .exact = 0};
      check_case(&cs);
    }
}

static void test_zero_sizes(void) {
  /* k == 0: C = beta * Cin, or zeros (over NaN) when beta == 0. */
  gemm_case cs = {.batch = 2, .m = 5, .n = 6, .k = 0, .kslices = 1, .ab = NRT_FLOAT32,
                  .c = NRT_FLOAT32, .alpha = 1, .beta = 0, .cin_mode = 0, .exact = 1};
  check_case(&cs);
  cs.beta = -1.5, cs.cin_mode = 3;
  check_case(&cs);
  cs.m = 0;
  check_case(&cs);
  cs.m = 5, cs.batch = 0;
  check_case(&cs);
}

static void test_bad_arguments(void) {
  float x = 0;
  rt_gemm_args g = {.batch = 1, .m = 1, .n = 1, .k = 1, .kslices = 1, .ab_dtype = NRT_FLOAT32,
                    .c_dtype = NRT_FLOAT64, .a = &x, .b = &x, .c = &x, .alpha = 1};
  CHECK_STATUS(rt_gemm(&g), NRT_ERROR_UNSUPPORTED);
  g.c_dtype = NRT_FLOAT32, g.ab_dtype = NRT_BOOL;
  CHECK_STATUS(rt_gemm(&g), NRT_ERROR_UNSUPPORTED);
  g.ab_dtype = NRT_FLOAT32, g.k = -1;
  CHECK_STATUS(rt_gemm(&g), NRT_ERROR_INVALID_ARGUMENT);
}

/* ---- the GEMM op through the runtime ---------------------------------------- */

static nrt_tensor_view device_view(void **dev, nrt_dtype t, int ndim, const int64_t *shape) {
  nrt_tensor_view v = {.dtype = t, .ndim = ndim};
  int64_t n = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    v.shape[d] = shape[d];
    v.strides[d] = n;
    n *= shape[d];
  }
  CHECK_OK(nrt_malloc(0, (size_t)n * elem_size(t), dev));
  v.data = *dev;
  float *h = nrt_device_to_host(*dev);
  for (int64_t i = 0; i < n; i++) h[i] = (float)(i % 5) - 2;
  return v;
}

static void test_gemm_op_descriptor(void) {
  void *dout, *da, *db;
  nrt_op op = {.code = NRT_OP_GEMM, .num_operands = 3, .num_outputs = 1, .num_scalars = 2};
  op.scalars[0] = (nrt_scalar){.is_float = 1, .f = 1};
  op.operands[0] = device_view(&dout, NRT_FLOAT32, 2, (int64_t[]){4, 6});
  op.operands[1] = device_view(&da, NRT_FLOAT32, 3, (int64_t[]){3, 4, 5});
  op.operands[2] = device_view(&db, NRT_FLOAT32, 3, (int64_t[]){3, 5, 6});
  CHECK_OK(nrt_op_execute(&op)); /* addbmm-shaped: sums the 3 products */
  const float *o = nrt_device_to_host(dout), *a = nrt_device_to_host(da), *b = nrt_device_to_host(db);
  double want = 0;
  for (int s = 0; s < 3; s++)
    for (int p = 0; p < 5; p++) want += a[s * 20 + 1 * 5 + p] * b[s * 30 + p * 6 + 2];
  CHECK(o[1 * 6 + 2] == (float)want);
  op.operands[2].shape[1] = 4; /* k mismatch */
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(nrt_last_error(), "gemm") != NULL);
  CHECK_OK(nrt_free(dout));
  CHECK_OK(nrt_free(da));
  CHECK_OK(nrt_free(db));
}

/* A single product below the kernel's serial_flops runs on the calling
 * thread alone; its bits are those of the same rows inside a product
 * large enough to be split over the pool (256^3 against 512x256 @
 * 256x256 with the same top 256 rows of A), B plain and transposed, C
 * bfloat16 and float32. */
static void test_serial_product_matches_split(void) {
  const rt_gemm_kernel *const *list;
  if (rt_gemm_kernels(NRT_BFLOAT16, &list) == 0 || list[0]->serial_flops <= 0) {
    fprintf(stderr, "skip test_serial_product_matches_split: no bfloat16 kernel with serial_flops here\n");
    return;
  }
  const int64_t n = 256, k = 256, m_small = 256, m_big = 512;
  CHECK(2.0 * m_small * n * k < list[0]->serial_flops && 2.0 * m_big * n * k >= list[0]->serial_flops);
  uint16_t *a = malloc((size_t)(m_big * k) * 2), *b = malloc((size_t)(k * n) * 2);
  float *c_small = malloc((size_t)(m_small * n) * 4), *c_big = malloc((size_t)(m_big * n) * 4);
  for (int64_t q = 0; q < m_big * k; q++) a[q] = (uint16_t)random_bf16(100, 140);
  for (int64_t q = 0; q < k * n; q++) b[q] = (uint16_t)random_bf16(100, 140);
  for (int variant = 0; variant < 4; variant++) {
    const int tb = variant % 2, f32 = variant / 2;
    const size_t es = f32 ? 4 : 2;
    for (int big = 0; big < 2; big++) {
      rt_gemm_args g = {.batch = 1, .m = big ? m_big : m_small, .n = n, .k = k, .kslices = 1,
                        .ab_dtype = NRT_BFLOAT16, .c_dtype = f32 ? NRT_FLOAT32 : NRT_BFLOAT16, .a = a,
                        .a_rs = k, .a_cs = 1, .b = b, .b_rs = tb ? 1 : n, .b_cs = tb ? k : 1,
                        .c = big ? c_big : c_small, .c_rs = n, .c_cs = 1, .alpha = 1};
      CHECK_OK(rt_gemm(&g));
    }
    if (memcmp(c_small, c_big, (size_t)(m_small * n) * es) != 0) {
      fprintf(stderr, "serial 256^3 differs from the split product (B %s, C %s)\n", tb ? "transposed" : "plain",
              f32 ? "float32" : "bfloat16");
      CHECK(0);
    }
  }
  free(a), free(b), free(c_small), free(c_big);
}

/* ---- small m, B transposed: the product computed as C^T = B^T A^T -------------- */

static float arbitrary_f32(void) { return (float)((int64_t)(rng() % 20001) - 10000) * 1.37e-4f; }

/* C = alpha * A W^T + beta * Cin with A [m, k] and W [n, k] row-major, as
 * linear/addmm hand it over; cin_mode 0: beta 0, 1: a bias row broadcast
 * (row stride 0), 2: a full matrix, 3: Cin is C (preloaded with cin). */
static nrt_status small_m_product(float *c, const float *a, const float *w, const float *cin, int64_t m, int64_t n,
                                  int64_t k, int cin_mode, double alpha, double beta, int straight,
                                  const rt_gemm_kernel *kern) {
  if (cin_mode == 3) memcpy(c, cin, (size_t)(m * n) * sizeof(float));
  rt_gemm_args g = {.batch = 1, .m = m, .n = n, .k = k, .kslices = 1, .ab_dtype = NRT_FLOAT32,
                    .c_dtype = NRT_FLOAT32, .a = a, .a_rs = k, .a_cs = 1, .b = w, .b_rs = 1, .b_cs = k,
                    .c = c, .c_rs = n, .c_cs = 1, .cin = cin_mode == 3 ? c : cin_mode ? cin : NULL,
                    .cin_rs = cin_mode == 1 ? 0 : n, .cin_cs = 1, .alpha = alpha,
                    .beta = cin_mode ? beta : 0, .straight = straight, .kernel = kern};
  return rt_gemm(&g);
}

/* The transposed plan (small_m_transposed) against its twin, the straight
 * plan (args.straight), bit for bit on arbitrary values, with every
 * float32 kernel that reads A's rows: row counts that fill whole 32-column
 * tiles and ones that do not (a last column panel of at most 8, 16 or 24
 * columns runs the narrow tiles, f32_rows_narrow), k in one block and
 * across blocks (Cin then joins after the first block in both), Cin as a
 * bias row, a full matrix and C itself (transposed only with alpha = beta
 * = 1: else the kernel fuses beta * C), alpha/beta 1 and not, and a B of
 * 32 MiB (taken transposed at any m). Both plans are also checked against
 * the double twin's rounding bound by the cases above; thread counts by
 * write_thread_case. */
static void test_small_m_transposed_matches_straight(void) {
  static const int64_t sizes[][3] = {/* m, n, k */
                                     {2, 200, 70},   {13, 200, 70},  {16, 520, 400}, {20, 64, 1100},
                                     {32, 1024, 256}, {64, 96, 777}, {96, 300, 385}, {128, 130, 64},
                                     {3, 100, 70},   {4, 256, 800},  {5, 77, 33},    {8, 64, 385},
                                     {9, 150, 50},   {12, 200, 900}, {33, 90, 400},  {41, 70, 70},
                                     {50, 260, 130}, {72, 64, 1000}, {83, 100, 60},  {100, 128, 300},
                                     {127, 65, 129}, {4, 2048, 4096}};
  static const double scalars[][2] = {{1, 1}, {0.7, -1.3}};
  const rt_gemm_kernel *const *list;
  const int nkern = rt_gemm_kernels(NRT_FLOAT32, &list);
  for (int kk = 0; kk < nkern; kk++) {
  const rt_gemm_kernel *kern = list[kk];
  if (!kern->f32_rows) continue;
  for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
    if (kk && z == sizeof sizes / sizeof sizes[0] - 1) continue; /* the big one: the best kernel only */
    const int64_t m = sizes[z][0], n = sizes[z][1], k = sizes[z][2];
    float *a = malloc((size_t)(m * k) * 4), *w = malloc((size_t)(n * k) * 4), *cin = malloc((size_t)(m * n) * 4);
    float *c0 = malloc((size_t)(m * n) * 4), *c1 = malloc((size_t)(m * n) * 4);
    rng_state = 4242 + z;
    for (int64_t q = 0; q < m * k; q++) a[q] = arbitrary_f32();
    for (int64_t q = 0; q < n * k; q++) w[q] = arbitrary_f32();
    for (int64_t q = 0; q < m * n; q++) cin[q] = arbitrary_f32();
    for (int mode = 0; mode < 4; mode++)
      for (size_t sc = 0; sc < 2; sc++) {
        if (z == sizeof sizes / sizeof sizes[0] - 1 && (mode % 2 || sc)) continue; /* the big one: twice */
        CHECK_OK(small_m_product(c0, a, w, cin, m, n, k, mode, scalars[sc][0], scalars[sc][1], 1, kern));
        CHECK_OK(small_m_product(c1, a, w, cin, m, n, k, mode, scalars[sc][0], scalars[sc][1], 0, kern));
        if (memcmp(c0, c1, (size_t)(m * n) * 4) != 0) {
          fprintf(stderr, "small m %lldx%lldx%lld cin mode %d alpha %g beta %g, %s: transposed differs from straight\n",
                  (long long)m, (long long)n, (long long)k, mode, scalars[sc][0], scalars[sc][1], kern->name);
          CHECK(0);
        }
      }
    free(a), free(w), free(cin), free(c0), free(c1);
  }
  }
}

/* The same twins for bfloat16 inputs, with every bfloat16 kernel that reads
 * W's rows (bf16_rows: AVX512-BF16; AMX kernels and CPUs without it keep
 * the straight plan, and the test then compares it with itself): the same
 * m and n lists, k made even (W's k pairs are words in place; an odd k
 * stays straight) and at least 512 (shorter rows stay straight for m > 16:
 * gemm.c SMALL_M_BF16_MIN_K), C (and Cin) bfloat16 or float32. */
static nrt_status small_m_product_bf16(void *c, const uint16_t *a, const uint16_t *w, const void *cin,
                                       nrt_dtype cd, int64_t m, int64_t n, int64_t k, int cin_mode, double alpha,
                                       double beta, int straight, const rt_gemm_kernel *kern) {
  const size_t cb = cd == NRT_FLOAT32 ? 4 : 2;
  if (cin_mode == 3) memcpy(c, cin, (size_t)(m * n) * cb);
  rt_gemm_args g = {.batch = 1, .m = m, .n = n, .k = k, .kslices = 1, .ab_dtype = NRT_BFLOAT16,
                    .c_dtype = cd, .a = a, .a_rs = k, .a_cs = 1, .b = w, .b_rs = 1, .b_cs = k,
                    .c = c, .c_rs = n, .c_cs = 1, .cin = cin_mode == 3 ? c : cin_mode ? cin : NULL,
                    .cin_rs = cin_mode == 1 ? 0 : n, .cin_cs = 1, .alpha = alpha,
                    .beta = cin_mode ? beta : 0, .straight = straight, .kernel = kern};
  return rt_gemm(&g);
}

static void test_bf16_small_m_transposed_matches_straight(void) {
  static const int64_t sizes[][3] = {/* m, n, k (made even) */
                                     {2, 200, 70},   {13, 200, 70},  {16, 520, 400}, {20, 64, 1100},
                                     {32, 1024, 256}, {64, 96, 777}, {96, 300, 385}, {128, 130, 64},
                                     {3, 100, 70},   {4, 256, 800},  {5, 77, 33},    {8, 64, 385},
                                     {9, 150, 50},   {12, 200, 900}, {33, 90, 400},  {41, 70, 70},
                                     {50, 260, 130}, {72, 64, 1000}, {83, 100, 60},  {100, 128, 300},
                                     {127, 65, 129}, {4, 2048, 4096}};
  static const double scalars[][2] = {{1, 1}, {0.7, -1.3}};
  static const nrt_dtype cds[] = {NRT_FLOAT32, NRT_BFLOAT16};
  const rt_gemm_kernel *const *list;
  const int nkern = rt_gemm_kernels(NRT_BFLOAT16, &list);
  int ran = 0;
  for (int kk = 0; kk < nkern; kk++) {
    const rt_gemm_kernel *kern = list[kk];
    if (!kern->bf16_rows) continue;
    ran = 1;
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
      const int big = z == sizeof sizes / sizeof sizes[0] - 1;
      /* k made even, and 512 more when shorter (m > 16 needs k >= 512 for the transposed plan) */
      const int64_t m = sizes[z][0], n = sizes[z][1], k0 = sizes[z][2] + sizes[z][2] % 2, k = k0 < 512 ? k0 + 512 : k0;
      uint16_t *a = malloc((size_t)(m * k) * 2), *w = malloc((size_t)(n * k) * 2);
      void *cin = malloc((size_t)(m * n) * 4), *c0 = malloc((size_t)(m * n) * 4), *c1 = malloc((size_t)(m * n) * 4);
      rng_state = 5151 + z;
      for (int64_t q = 0; q < m * k; q++) a[q] = (uint16_t)random_bf16(110, 135);
      for (int64_t q = 0; q < n * k; q++) w[q] = (uint16_t)random_bf16(110, 135);
      for (size_t d = 0; d < 2; d++) {
        const size_t cb = cds[d] == NRT_FLOAT32 ? 4 : 2;
        for (int64_t q = 0; q < m * n; q++) {
          const uint32_t v = random_bf16(115, 130);
          if (cb == 4) {
            const uint32_t bits = v << 16;
            memcpy((char *)cin + q * 4, &bits, 4);
          } else {
            ((uint16_t *)cin)[q] = (uint16_t)v;
          }
        }
        for (int mode = 0; mode < 4; mode++)
          for (size_t sc = 0; sc < 2; sc++) {
            if (big && (mode % 2 || sc || d)) continue; /* the big one: twice */
            CHECK_OK(small_m_product_bf16(c0, a, w, cin, cds[d], m, n, k, mode, scalars[sc][0], scalars[sc][1], 1, kern));
            CHECK_OK(small_m_product_bf16(c1, a, w, cin, cds[d], m, n, k, mode, scalars[sc][0], scalars[sc][1], 0, kern));
            if (memcmp(c0, c1, (size_t)(m * n) * cb) != 0) {
              fprintf(stderr, "bf16 small m %lldx%lldx%lld C %s cin mode %d alpha %g beta %g, %s: transposed differs from straight\n",
                      (long long)m, (long long)n, (long long)k, nrt_dtype_name(cds[d]), mode, scalars[sc][0],
                      scalars[sc][1], kern->name);
              CHECK(0);
            }
          }
      }
      free(a), free(w), free(cin), free(c0), free(c1);
    }
  }
  if (!ran) fprintf(stderr, "skip test_bf16_small_m_transposed_matches_straight: no bfloat16 kernel reads rows here\n");
}

/* ---- thread-count independence ------------------------------------------------ */

static uint64_t hash_bytes(uint64_t h, const char *p, size_t n) {
  for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)p[i]) * 1099511628211ull;
  return h;
}

static int write_thread_case(void) {
  uint64_t h = 14695981039346656037ull;
  /* The pool reads TORCHNEURON_NUM_THREADS at initialisation: without it
   * every child ran on one thread. */
  if (nrt_init() != NRT_SUCCESS) return 1;
  /* The last two: weight gradients, shared B pipelined over k chunks
   * (one column block) and, A read in place, column jobs on two threads. */
  static const int64_t sizes[][3] = {{300, 260, 700}, {129, 513, 17}, {1, 900, 333}, {2000, 1, 40},
                                     {40, 1100, 1500}, {5, 2100, 2050}, {384, 128, 2048}, {128, 512, 2048}};
  static const nrt_dtype types[] = {NRT_FLOAT32, NRT_FLOAT64, NRT_BFLOAT16};
  for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++)
    for (size_t t = 0; t < 3; t++) {
      rng_state = 777 + z;
      gemm_case cs = {.batch = 2, .m = sizes[z][0], .n = sizes[z][1], .k = sizes[z][2],
                      .kslices = 1, .ab = types[t], .c = types[t], .la = (int)z % 2, .lb = 0,
                      .lc = 0, .alpha = 0.7, .beta = 0.3, .cin_mode = 3, .exact = 0};
      rt_gemm_args g = setup(&cs);
      if (rt_gemm(&g) != NRT_SUCCESS) return 1;
      h = hash_bytes(h, C.storage, (size_t)(C.s0 * 2 + 1) * elem_size(C.dtype));
      release();
    }
  /* Attention's batched bfloat16 products: items as jobs on two threads. */
  for (int lc = 0; lc < 2; lc++) {
    rng_state = 991 + (uint64_t)lc;
    gemm_case cs = {.batch = 12, .m = 128, .n = 64, .k = 128, .kslices = 1, .ab = NRT_BFLOAT16,
                    .c = NRT_BFLOAT16, .la = 0, .lb = 0, .lc = lc, .alpha = 1, .beta = 0, .cin_mode = 0, .exact = 0};
    rt_gemm_args g = setup(&cs);
    if (rt_gemm(&g) != NRT_SUCCESS) return 1;
    h = hash_bytes(h, C.storage, (size_t)(C.s0 * 12) * elem_size(C.dtype));
    release();
  }
  /* Small-m products with B transposed, computed as C^T = B^T A^T (m = 5:
   * the narrow 8-column tile). */
  for (int mode = 0; mode < 8; mode += 3) {
    const int64_t m = mode < 4 ? 32 : 5, n = 1024, k = 700;
    float *a = malloc((size_t)(m * k) * 4), *w = malloc((size_t)(n * k) * 4), *cin = malloc((size_t)(m * n) * 4);
    float *c = malloc((size_t)(m * n) * 4);
    rng_state = 31 + (uint64_t)mode;
    for (int64_t q = 0; q < m * k; q++) a[q] = arbitrary_f32();
    for (int64_t q = 0; q < n * k; q++) w[q] = arbitrary_f32();
    for (int64_t q = 0; q < m * n; q++) cin[q] = arbitrary_f32();
    if (small_m_product(c, a, w, cin, m, n, k, mode % 4, 0.7, 0.3, 0, NULL) != NRT_SUCCESS) return 1;
    h = hash_bytes(h, (const char *)c, (size_t)(m * n) * 4);
    free(a), free(w), free(cin), free(c);
  }
  /* ... and bfloat16 ones (m = 5, 20: the 8- and 24-column rows tiles), C
   * bfloat16 then float32, with a bias row. */
  for (int d = 0; d < 2; d++) {
    const int64_t m = d ? 20 : 5, n = 1024, k = 700;
    const nrt_dtype cd = d ? NRT_FLOAT32 : NRT_BFLOAT16;
    const size_t cb = d ? 4 : 2;
    uint16_t *a = malloc((size_t)(m * k) * 2), *w = malloc((size_t)(n * k) * 2);
    void *cin = calloc((size_t)(m * n), 4), *c = malloc((size_t)(m * n) * 4);
    rng_state = 57 + (uint64_t)d;
    for (int64_t q = 0; q < m * k; q++) a[q] = (uint16_t)random_bf16(110, 135);
    for (int64_t q = 0; q < n * k; q++) w[q] = (uint16_t)random_bf16(110, 135);
    for (int64_t q = 0; q < n; q++) {
      const uint32_t v = random_bf16(115, 130);
      if (d)
        ((uint32_t *)cin)[q] = v << 16; /* a float32 bias of bfloat16 precision */
      else
        ((uint16_t *)cin)[q] = (uint16_t)v;
    }
    if (small_m_product_bf16(c, a, w, cin, cd, m, n, k, 1, 0.7, 0.3, 0, NULL) != NRT_SUCCESS) return 1;
    h = hash_bytes(h, (const char *)c, (size_t)(m * n) * cb);
    free(a), free(w), free(cin), free(c);
  }
  const char *path = getenv("GEMM_TEST_OUT");
  FILE *f = path ? fopen(path, "w") : NULL;
  if (!f) return 1;
  fprintf(f, "%016llx\n", (unsigned long long)h);
  fclose(f);
  return 0;
}

static int read_hash(const char *path, char *out, size_t size) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  int ok = fgets(out, (int)size, f) != NULL;
  fclose(f);
  remove(path);
  return ok;
}

static void test_thread_count_independence(void) {
  char one[64], two[64], env_one[96], env_two[96], h1[32] = "1", h2[32] = "2";
  snprintf(one, sizeof one, "/tmp/test_gemm_%d_1.txt", (int)getpid());
  snprintf(two, sizeof two, "/tmp/test_gemm_%d_2.txt", (int)getpid());
  snprintf(env_one, sizeof env_one, "GEMM_TEST_OUT=%s", one);
  snprintf(env_two, sizeof env_two, "GEMM_TEST_OUT=%s", two);
  CHECK(child_run("threads", (const char *[]){"TORCHNEURON_NUM_THREADS=1", env_one, NULL}) == 0);
  CHECK(child_run("threads", (const char *[]){"TORCHNEURON_NUM_THREADS=2", env_two, NULL}) == 0);
  CHECK(read_hash(one, h1, sizeof h1) && read_hash(two, h2, sizeof h2) && strcmp(h1, h2) == 0);
}

/* An epilogue's failure stops the product and is rt_gemm's status, on
 * every path (blocked, shared B, vector, integer, k == 0). */
static nrt_status fail_first_block(void *ctx, int64_t t, int64_t i0, int64_t rows, int64_t j0, int64_t cols) {
  (void)rows, (void)cols;
  int *calls = ctx;
  __atomic_fetch_add(calls, 1, __ATOMIC_RELAXED);
  return t == 0 && i0 == 0 && j0 == 0 ? NRT_ERROR_INTERNAL : NRT_SUCCESS;
}

static void test_epilogue_failure(void) {
  static const gemm_case cases[] = {
      {.batch = 1, .m = 300, .n = 260, .k = 256, .kslices = 1, .ab = NRT_FLOAT32, .c = NRT_FLOAT32},
      {.batch = 3, .m = 40, .n = 48, .k = 30, .kslices = 1, .ab = NRT_FLOAT64, .c = NRT_FLOAT64},
      {.batch = 2, .m = 1, .n = 70, .k = 9, .kslices = 1, .ab = NRT_FLOAT32, .c = NRT_FLOAT32},
      {.batch = 1, .m = 9, .n = 9, .k = 5, .kslices = 1, .ab = NRT_INT32, .c = NRT_INT32},
      {.batch = 1, .m = 9, .n = 9, .k = 0, .kslices = 1, .ab = NRT_FLOAT32, .c = NRT_FLOAT32},
      {.batch = 1, .m = 64, .n = 64, .k = 64, .kslices = 1, .ab = NRT_BFLOAT16, .c = NRT_BFLOAT16},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    gemm_case cs = cases[c];
    cs.alpha = 1;
    rt_gemm_args g = setup(&cs);
    int calls = 0;
    g.epilogue = fail_first_block;
    g.epilogue_ctx = &calls;
    CHECK(rt_gemm(&g) == NRT_ERROR_INTERNAL);
    CHECK(calls >= 1);
    release();
  }
}

int main(int argc, char **argv) {
  if (child_is_case(argc, argv)) return write_thread_case();
  /* The kernel pool as the extension has it (all cores unless
   * TORCHNEURON_NUM_THREADS), so that the plans of several threads are
   * checked too. */
  CHECK(nrt_init() == NRT_SUCCESS);
  RUN(test_kernels_follow_isa_level);
  RUN(test_layouts_and_shapes_exact_f32);
  RUN(test_alpha_beta_and_cin);
  RUN(test_batched_and_summed_slices);
  RUN(test_bf16_batch_jobs);
  RUN(test_block_boundaries);
  RUN(test_shared_b_chunks_and_fallback);
  RUN(test_b_read_in_place);
  RUN(test_a_read_in_place);
  RUN(test_rows_microkernel_twin);
  RUN(test_hand_tile_twin);
  RUN(test_bfloat16_pair_packing);
  RUN(test_bf16_kmajor_pair_twin);
  RUN(test_float16_packing_exact);
  RUN(test_bf16_microkernel_twin);
  RUN(test_amx_gemm_exact_model);
  RUN(test_amx_gemm_bf16_c);
  RUN(test_amx_block_matches_tiles);
  RUN(test_serial_product_matches_split);
  RUN(test_small_m_transposed_matches_straight);
  RUN(test_bf16_small_m_transposed_matches_straight);
  RUN(test_bf16_subnormal_inputs);
  RUN(test_bf16_flush_rounding);
  RUN(test_rounding_within_bound);
  RUN(test_zero_sizes);
  RUN(test_bad_arguments);
  RUN(test_gemm_op_descriptor);
  RUN(test_thread_count_independence);
  RUN(test_epilogue_failure);
  return CHECK_MAIN_RESULT();
}
