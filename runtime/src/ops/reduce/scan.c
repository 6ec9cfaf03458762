/* Scans along one dimension: CUMSUM, CUMPROD, LOGCUMSUMEXP, and CUMMAX and
 * CUMMIN (values and indices).
 *
 * Each line along the scan dimension is accumulated strictly in order, in
 * float64 (floating inputs) or wrapping int64 (integer inputs), as
 * PyTorch's CPU scans do; running values go through a small buffer and are
 * converted to the output's dtype by the conversion loops. When the scan
 * dimension is the input's innermost, lines run one after another (in
 * parallel across lines); otherwise a tile of neighbouring lines advances
 * together, so the loops vectorise across lines. Lines never split, so the
 * thread count cannot change a result.
 */
#include <complex.h>

#include "internal.h"
#include "ops/engine/convert.h"
#include "ops/reduce/reduce.h"
#include "ops/engine/thread_pool.h"

#define SCAN_CHUNK 256   /* line mode: running values buffered before conversion */
#define SCAN_TILE 2048   /* column mode: lines advancing together (long rows read) */

typedef struct scan_plan {
  const char *x;
  char *out, *idx;                /* idx: CUMMAX/CUMMIN's indices, else NULL */
  nrt_dtype acc_dtype, out_dtype;
  int64_t len, in_step, out_step, idx_step; /* the scan dimension (bytes) */
  int ndim;                                 /* other dims, outermost first */
  int64_t shape[NRT_MAX_DIMS], in[NRT_MAX_DIMS], out_strides[NRT_MAX_DIMS], idx_strides[NRT_MAX_DIMS];
  int64_t cols, col_in, col_out, col_idx; /* column mode: lines advancing together */
  void (*line)(const struct scan_plan *p, const char *x, char *out, char *idx);
  void (*tile)(const struct scan_plan *p, const char *x, char *out, char *idx, int64_t w);
} scan_plan;

/* One line, and a tile of w lines whose starts are col_in bytes apart. */
#define DEFINE_SCAN(NAME, T, A, LOAD, OP, IDENT)                                                    \
  RT_SIMD_VOID(NAME##_line, (const scan_plan *p, const char *x, char *out, char *idx),             \
               (p, x, out, idx)) {                                                                  \
    (void)idx;                                                                                      \
    A buffer[SCAN_CHUNK];                                                                           \
    A acc = (IDENT);                                                                                \
    rt_inner_loop store = rt_convert_loops[p->out_dtype][p->acc_dtype];                             \
    for (int64_t i0 = 0; i0 < p->len; i0 += SCAN_CHUNK) {                                           \
      int64_t n = p->len - i0 < SCAN_CHUNK ? p->len - i0 : SCAN_CHUNK;                              \
      for (int64_t i = 0; i < n; i++) {                                                             \
        T v = *(const T *)(x + (i0 + i) * p->in_step);                                              \
        acc = OP(acc, (LOAD));                                                                      \
        buffer[i] = acc;                                                                            \
      }                                                                                             \
      char *pair[2] = {out + i0 * p->out_step, (char *)buffer};                                     \
      int64_t strides[2] = {p->out_step, (int64_t)sizeof(A)};                                       \
      store(pair, strides, n, NULL);                                                                \
    }                                                                                               \
  }                                                                                                 \
  RT_SIMD_VOID(NAME##_tile, (const scan_plan *p, const char *x, char *out, char *idx, int64_t w),   \
               (p, x, out, idx, w)) {                                                               \
    (void)idx;                                                                                      \
    A acc[SCAN_TILE];                                                                               \
    rt_inner_loop store = rt_convert_loops[p->out_dtype][p->acc_dtype];                             \
    for (int64_t j = 0; j < w; j++) acc[j] = (IDENT);                                               \
    for (int64_t i = 0; i < p->len; i++) {                                                          \
      const char *row = x + i * p->in_step;                                                         \
      if (p->col_in == (int64_t)sizeof(T)) {                                                        \
        const T *restrict r = (const T *)row;                                                       \
        for (int64_t j = 0; j < w; j++) {                                                           \
          T v = r[j];                                                                               \
          acc[j] = OP(acc[j], (LOAD));                                                              \
        }                                                                                           \
      } else {                                                                                      \
        for (int64_t j = 0; j < w; j++) {                                                           \
          T v = *(const T *)(row + j * p->col_in);                                                  \
          acc[j] = OP(acc[j], (LOAD));                                                              \
        }                                                                                           \
      }                                                                                             \
      char *pair[2] = {out + i * p->out_step, (char *)acc};                                         \
      int64_t strides[2] = {p->col_out, (int64_t)sizeof(A)};                                        \
      store(pair, strides, w, NULL);                                                                \
    }                                                                                               \
  }

#define ADD(a, b) ((a) + (b))
#define MUL(a, b) ((a) * (b))
#define INT_SCANS(DT, SUF, T, C, LOAD)                                                              \
  DEFINE_SCAN(cumsum_##SUF, T, uint64_t, (uint64_t)(int64_t)(LOAD), ADD, 0)                         \
  DEFINE_SCAN(cumprod_##SUF, T, uint64_t, (uint64_t)(int64_t)(LOAD), MUL, 1)
#define FLOAT_SCANS(DT, SUF, T, C, LOAD)                                                            \
  DEFINE_SCAN(cumsum_##SUF, T, double, (double)(LOAD), ADD, 0)                                      \
  DEFINE_SCAN(cumprod_##SUF, T, double, (double)(LOAD), MUL, 1)
RT_REDUCE_INT_TYPES(INT_SCANS)
RT_REDUCE_FLOAT_TYPES(FLOAT_SCANS)

/* log(e^acc + e^v) as PyTorch's CPU scan combines them
 * (_log_add_exp_helper(v, acc)): a NaN on either side propagates, two
 * equal infinities give the new value. */
static inline double log_add_exp(double acc, double v) {
  double lo = acc != acc ? acc : acc < v ? acc : v, hi = acc != acc ? acc : v < acc ? acc : v;
  return lo != hi || isfinite(lo) ? log1p(exp(lo - hi)) + hi : v;
}
#define LOGCUMSUMEXP_SCAN(DT, SUF, T, C, LOAD) DEFINE_SCAN(logcumsumexp_##SUF, T, double, (double)(LOAD), log_add_exp, -INFINITY)
RT_REDUCE_FLOAT_TYPES(LOGCUMSUMEXP_SCAN)

/* Complex logcumsumexp, in PyTorch's CPU accumulation type (complex double)
 * and with its log-add-exp (_log_add_exp_helper(v, acc)): the operands
 * ordered by real part, a NaN part on either side wins and gives NaN + NaN i;
 * equal infinite real parts give the lower operand (-inf: e^z is 0 at any
 * angle) or log(e^lo + e^hi) (+inf); otherwise hi + log1p(e^(lo - hi)),
 * with c10's complex log1p. The line runs strictly in order, because the
 * imaginary part (which branch of the logarithm) depends on the order in
 * which terms join: a tree scan lands 2 pi k away from the CPU. */
static inline int cnan(double complex z) { return isnan(creal(z)) || isnan(cimag(z)); }

static double complex c10_log1p(double complex z) {
  double x = creal(z), y = cimag(z), theta = atan2(y, x + 1.0);
  if (cabs(z) < 0.5) {
    double r = x * (2.0 + x) + y * y; /* |1 + z|^2 - 1 without cancellation */
    return r == 0 ? CMPLX(x, theta) : CMPLX(0.5 * log1p(r), theta);
  }
  return CMPLX(log(hypot(x + 1.0, y)), theta);
}

static double complex log_add_exp_complex(double complex acc, double complex v) {
  double complex lo, hi;
  if (cnan(acc)) return CMPLX(NAN, NAN);
  if (cnan(v)) return CMPLX(NAN, NAN);
  if (creal(v) < creal(acc)) lo = v, hi = acc;
  else lo = acc, hi = v;
  if (!isfinite(creal(lo)) && creal(lo) == creal(hi))
    return creal(lo) < 0 ? lo : clog(cexp(lo) + cexp(hi));
  return c10_log1p(cexp(lo - hi)) + hi;
}

#define COMPLEX_LCSE(SUF, R)                                                                        \
  static void logcumsumexp_##SUF##_line(const scan_plan *p, const char *x, char *out, char *idx) {  \
    (void)idx;                                                                                      \
    double complex acc = CMPLX(-INFINITY, 0.0);                                                     \
    for (int64_t i = 0; i < p->len; i++) {                                                          \
      const R *v = (const R *)(x + i * p->in_step);                                                 \
      acc = log_add_exp_complex(acc, CMPLX((double)v[0], (double)v[1]));                            \
      R *o = (R *)(out + i * p->out_step);                                                          \
      o[0] = (R)creal(acc);                                                                         \
      o[1] = (R)cimag(acc);                                                                         \
    }                                                                                               \
  }                                                                                                 \
  static void logcumsumexp_##SUF##_tile(const scan_plan *p, const char *x, char *out, char *idx,    \
                                        int64_t w) {                                                \
    for (int64_t j = 0; j < w; j++) logcumsumexp_##SUF##_line(p, x + j * p->col_in, out + j * p->col_out, idx); \
  }
COMPLEX_LCSE(c64, float)
COMPLEX_LCSE(c128, double)

/* Running extremes, kept in the input's storage type T (values are copied,
 * never converted) and compared as C. TAKES(e, m): does the later element e
 * replace the running extreme m? PyTorch's CPU rule: e is NaN, or m is not
 * NaN and e >= m (<= for the minimum), so the last of equal values wins. */
#define CUMMAX_TAKES(e, m) (((e) != (e)) | (((m) == (m)) & ((e) >= (m))))
#define CUMMIN_TAKES(e, m) (((e) != (e)) | (((m) == (m)) & ((e) <= (m))))
#define DEFINE_EXTREME_SCAN(NAME, T, C, LOAD, TAKES)                                                \
  RT_SIMD_VOID(NAME##_line, (const scan_plan *p, const char *x, char *out, char *idx),             \
               (p, x, out, idx)) {                                                                  \
    T v = *(const T *)x, best = v;                                                                  \
    C m = (LOAD);                                                                                   \
    int64_t at = 0;                                                                                 \
    for (int64_t i = 0; i < p->len; i++) {                                                          \
      v = *(const T *)(x + i * p->in_step);                                                         \
      C e = (LOAD);                                                                                 \
      if (TAKES(e, m)) {                                                                            \
        best = v;                                                                                   \
        m = e;                                                                                      \
        at = i;                                                                                     \
      }                                                                                             \
      *(T *)(out + i * p->out_step) = best;                                                         \
      *(int64_t *)(idx + i * p->idx_step) = at;                                                     \
    }                                                                                               \
  }                                                                                                 \
  RT_SIMD_VOID(NAME##_tile, (const scan_plan *p, const char *x, char *out, char *idx, int64_t w),   \
               (p, x, out, idx, w)) {                                                               \
    C best[SCAN_TILE];                                                                              \
    T keep[SCAN_TILE];                                                                              \
    int64_t at[SCAN_TILE];                                                                          \
    for (int64_t j = 0; j < w; j++) {                                                               \
      T v = *(const T *)(x + j * p->col_in);                                                        \
      keep[j] = v;                                                                                  \
      best[j] = (LOAD);                                                                             \
      at[j] = 0;                                                                                    \
    }                                                                                               \
    for (int64_t i = 0; i < p->len; i++) {                                                          \
      const char *row = x + i * p->in_step;                                                         \
      for (int64_t j = 0; j < w; j++) {                                                             \
        T v = *(const T *)(row + j * p->col_in);                                                    \
        C e = (LOAD);                                                                               \
        int take = TAKES(e, best[j]);                                                               \
        best[j] = take ? e : best[j];                                                               \
        keep[j] = take ? v : keep[j];                                                               \
        at[j] = take ? i : at[j];                                                                   \
      }                                                                                             \
      char *o = out + i * p->out_step, *ix = idx + i * p->idx_step;                                \
      if (p->col_out == (int64_t)sizeof(T) && p->col_idx == (int64_t)sizeof(int64_t)) {             \
        memcpy(o, keep, (size_t)w * sizeof(T));                                                     \
        memcpy(ix, at, (size_t)w * sizeof(int64_t));                                                \
      } else {                                                                                      \
        for (int64_t j = 0; j < w; j++) {                                                           \
          *(T *)(o + j * p->col_out) = keep[j];                                                     \
          *(int64_t *)(ix + j * p->col_idx) = at[j];                                                \
        }                                                                                           \
      }                                                                                             \
    }                                                                                               \
  }
#define EXTREME_SCANS(DT, SUF, T, C, LOAD)                                                          \
  DEFINE_EXTREME_SCAN(cummax_##SUF, T, C, LOAD, CUMMAX_TAKES)                                       \
  DEFINE_EXTREME_SCAN(cummin_##SUF, T, C, LOAD, CUMMIN_TAKES)
RT_REDUCE_ALL_TYPES(EXTREME_SCANS)

typedef struct scan_fns {
  void (*line)(const scan_plan *, const char *, char *, char *);
  void (*tile)(const scan_plan *, const char *, char *, char *, int64_t);
} scan_fns;
#define CUMSUM_ENTRY(DT, SUF, T, C, LOAD) [DT] = {cumsum_##SUF##_line, cumsum_##SUF##_tile},
#define CUMPROD_ENTRY(DT, SUF, T, C, LOAD) [DT] = {cumprod_##SUF##_line, cumprod_##SUF##_tile},
static const scan_fns cumsum_fns[NRT_DTYPE_COUNT] = {RT_REDUCE_ALL_TYPES(CUMSUM_ENTRY)};
static const scan_fns cumprod_fns[NRT_DTYPE_COUNT] = {RT_REDUCE_ALL_TYPES(CUMPROD_ENTRY)};
#define LOGCUMSUMEXP_ENTRY(DT, SUF, T, C, LOAD) [DT] = {logcumsumexp_##SUF##_line, logcumsumexp_##SUF##_tile},
static const scan_fns logcumsumexp_fns[NRT_DTYPE_COUNT] = {
    RT_REDUCE_FLOAT_TYPES(LOGCUMSUMEXP_ENTRY)[NRT_COMPLEX64] = {logcumsumexp_c64_line, logcumsumexp_c64_tile},
    [NRT_COMPLEX128] = {logcumsumexp_c128_line, logcumsumexp_c128_tile}};
#define CUMMAX_ENTRY(DT, SUF, T, C, LOAD) [DT] = {cummax_##SUF##_line, cummax_##SUF##_tile},
#define CUMMIN_ENTRY(DT, SUF, T, C, LOAD) [DT] = {cummin_##SUF##_line, cummin_##SUF##_tile},
static const scan_fns cummax_fns[NRT_DTYPE_COUNT] = {RT_REDUCE_ALL_TYPES(CUMMAX_ENTRY)};
static const scan_fns cummin_fns[NRT_DTYPE_COUNT] = {RT_REDUCE_ALL_TYPES(CUMMIN_ENTRY)};

static void offsets(const scan_plan *p, int64_t i, int64_t *in, int64_t *out, int64_t *idx) {
  *in = *out = *idx = 0;
  for (int d = p->ndim - 1; d >= 0; d--) {
    int64_t pos = i % p->shape[d];
    i /= p->shape[d];
    *in += pos * p->in[d];
    *out += pos * p->out_strides[d];
    *idx += pos * p->idx_strides[d];
  }
}

static void run_lines(int64_t begin, int64_t end, void *arg) {
  const scan_plan *p = arg;
  for (int64_t l = begin; l < end; l++) {
    int64_t in, out, idx;
    offsets(p, l, &in, &out, &idx);
    p->line(p, p->x + in, p->out + out, p->idx ? p->idx + idx : NULL);
  }
}

static void run_tiles(int64_t begin, int64_t end, void *arg) {
  const scan_plan *p = arg;
  int64_t col_tiles = (p->cols + SCAN_TILE - 1) / SCAN_TILE;
  for (int64_t t = begin; t < end; t++) {
    int64_t in, out, idx, c0 = (t % col_tiles) * SCAN_TILE;
    int64_t w = p->cols - c0 < SCAN_TILE ? p->cols - c0 : SCAN_TILE;
    offsets(p, t / col_tiles, &in, &out, &idx);
    p->tile(p, p->x + in + c0 * p->col_in, p->out + out + c0 * p->col_out,
            p->idx ? p->idx + idx + c0 * p->col_idx : NULL, w);
  }
}

static int64_t abs64(int64_t v) { return v < 0 ? -v : v; }

/* with_index: operands [values, indices, in], values in the input's dtype. */
static nrt_status run_scan(const nrt_op *op, const scan_fns *fns, int with_index) {
  const char *name = nrt_op_name(op->code);
  nrt_status s = rt_reduce_check_operands(op, 1 + with_index, 1 + with_index);
  if (s) return s;
  const nrt_tensor_view *out = &op->operands[0], *in = &op->operands[op->num_outputs];
  const nrt_tensor_view *idx = with_index ? &op->operands[1] : NULL;
  if (op->num_scalars < 1) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects scalar [dim]", name);
  int64_t dim = op->scalars[0].is_float ? (int64_t)op->scalars[0].f : op->scalars[0].i;
  int rank = in->ndim > 0 ? in->ndim : 1;
  if (dim < 0 || dim >= rank)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: dim %lld out of range for rank %d", name,
                   (long long)dim, in->ndim);
  if (out->ndim != in->ndim || memcmp(out->shape, in->shape, (size_t)in->ndim * sizeof in->shape[0]))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: output and input shapes differ", name);
  if (idx && (idx->ndim != in->ndim || memcmp(idx->shape, in->shape, (size_t)in->ndim * sizeof in->shape[0])))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: indices and input shapes differ", name);
  if (idx && (out->dtype != in->dtype || idx->dtype != NRT_INT64))
    return rt_fail(NRT_ERROR_UNSUPPORTED, "%s: values must have the input's dtype %s and indices int64", name,
                   nrt_dtype_name(in->dtype));
  if (!fns[in->dtype].line)
    return rt_fail(NRT_ERROR_UNSUPPORTED, "%s: unsupported dtype %s", name, nrt_dtype_name(in->dtype));
  int float_in = nrt_dtype_is_floating(in->dtype);
  if (float_in != nrt_dtype_is_floating(out->dtype))
    return rt_fail(NRT_ERROR_UNSUPPORTED, "%s: cannot scan %s into %s", name,
                   nrt_dtype_name(in->dtype), nrt_dtype_name(out->dtype));
  if (nrt_view_numel(in) == 0) return NRT_SUCCESS;
  int64_t in_elem = (int64_t)nrt_dtype_size(in->dtype), out_elem = (int64_t)nrt_dtype_size(out->dtype);
  scan_plan p = {
      .x = in->data, .out = out->data, .idx = idx ? idx->data : NULL,
      .acc_dtype = float_in ? NRT_FLOAT64 : NRT_INT64, .out_dtype = out->dtype,
      .len = in->ndim ? in->shape[dim] : 1,
      .in_step = in->ndim ? in->strides[dim] * in_elem : 0,
      .out_step = out->ndim ? out->strides[dim] * out_elem : 0,
      .idx_step = idx && idx->ndim ? idx->strides[dim] * 8 : 0,
      .line = fns[in->dtype].line, .tile = fns[in->dtype].tile,
  };
  /* The other dims, outermost first; the one with the smallest input
   * stride becomes the column axis if it is tighter than the scan dim. */
  int col = -1;
  for (int d = 0; d < in->ndim; d++) {
    if (d == dim || in->shape[d] == 1) continue;
    p.shape[p.ndim] = in->shape[d];
    p.in[p.ndim] = in->strides[d] * in_elem;
    p.out_strides[p.ndim] = out->strides[d] * out_elem;
    p.idx_strides[p.ndim] = idx ? idx->strides[d] * 8 : 0;
    if (col < 0 || abs64(p.in[p.ndim]) < abs64(p.in[col])) col = p.ndim;
    p.ndim++;
  }
  if (col >= 0 && (p.len == 1 || abs64(p.in[col]) < abs64(p.in_step))) {
    p.cols = p.shape[col];
    p.col_in = p.in[col];
    p.col_out = p.out_strides[col];
    p.col_idx = p.idx_strides[col];
    for (int d = col; d + 1 < p.ndim; d++) {
      p.shape[d] = p.shape[d + 1];
      p.in[d] = p.in[d + 1];
      p.out_strides[d] = p.out_strides[d + 1];
      p.idx_strides[d] = p.idx_strides[d + 1];
    }
    p.ndim--;
    int64_t tiles = (p.cols + SCAN_TILE - 1) / SCAN_TILE;
    for (int d = 0; d < p.ndim; d++) tiles *= p.shape[d];
    int64_t grain = RT_PARALLEL_GRAIN / (p.len * SCAN_TILE);
    rt_parallel_for(tiles, grain > 1 ? grain : 1, run_tiles, &p);
    return NRT_SUCCESS;
  }
  int64_t lines = 1;
  for (int d = 0; d < p.ndim; d++) lines *= p.shape[d];
  int64_t grain = RT_PARALLEL_GRAIN / p.len;
  rt_parallel_for(lines, grain > 1 ? grain : 1, run_lines, &p);
  return NRT_SUCCESS;
}

nrt_status rt_kernel_cumsum(const nrt_op *op) { return run_scan(op, cumsum_fns, 0); }
nrt_status rt_kernel_cumprod(const nrt_op *op) { return run_scan(op, cumprod_fns, 0); }
nrt_status rt_kernel_cummax(const nrt_op *op) { return run_scan(op, cummax_fns, 1); }
nrt_status rt_kernel_cummin(const nrt_op *op) { return run_scan(op, cummin_fns, 1); }
nrt_status rt_kernel_logcumsumexp(const nrt_op *op) {
  if (op->num_operands == 2 && !nrt_dtype_is_floating(op->operands[1].dtype) &&
      !nrt_dtype_is_complex(op->operands[1].dtype))
    return rt_fail(NRT_ERROR_UNSUPPORTED, "logcumsumexp: floating and complex dtypes only");
  if (op->num_operands == 2 && nrt_dtype_is_complex(op->operands[1].dtype) &&
      op->operands[0].dtype != op->operands[1].dtype)
    return rt_fail(NRT_ERROR_UNSUPPORTED, "logcumsumexp: a complex scan writes the input's dtype");
  return run_scan(op, logcumsumexp_fns, 0);
}
