/* Statistics over floating inputs, accumulated in float64: VAR (and std,
 * and the mean alongside), NORM (vector p-norms) and LOGSUMEXP.
 *
 * VAR works block by block: the block's mean, then the squared deviations
 * from it (both passes over a block still in cache), merged into the
 * running (count, mean, M2) with Chan's formula; stable where one pass of
 * sums of squares is not. LOGSUMEXP likewise keeps a running maximum m and
 * sum of exp(x - m), rescaling the sum when a block raises the maximum, so
 * each element costs one exp.
 */
#include "ops/reduce/reduce.h"

/* ---- VAR: fields n, mean, M2 -------------------------------------------- */

RT_INLINE void var_merge(double *n, double *mean, double *m2, double nb, double mean_b,
                             double m2_b) {
  if (nb == 0) return;
  if (*n == 0) {
    *n = nb;
    *mean = mean_b;
    *m2 = m2_b;
    return;
  }
  double total = *n + nb, delta = mean_b - *mean;
  *mean += delta * (nb / total);
  *m2 += m2_b + delta * delta * (*n * nb / total);
  *n = total;
}

#define DEFINE_VAR(SUF, T, C, LOAD)                                                                 \
  RT_INLINE void var_run_##SUF(const T *x, int64_t n, double *mean, double *m2) {                   \
    double lanes[RT_LANES] = {0};                                                                   \
    int64_t i = 0;                                                                                  \
    for (; i + RT_LANES <= n; i += RT_LANES)                                                        \
      RT_LANE_LOOP for (int k = 0; k < RT_LANES; k++) {                                             \
        T v = x[i + k];                                                                             \
        lanes[k] += (double)(LOAD);                                                                 \
      }                                                                                             \
    for (int k = 0; i < n; i++, k++) {                                                              \
      T v = x[i];                                                                                   \
      lanes[k] += (double)(LOAD);                                                                   \
    }                                                                                               \
    for (int w = RT_LANES / 2; w > 0; w /= 2)                                                       \
      for (int k = 0; k < w; k++) lanes[k] += lanes[k + w];                                         \
    double mu = lanes[0] / (double)n;                                                               \
    for (int k = 0; k < RT_LANES; k++) lanes[k] = 0;                                                \
    for (i = 0; i + RT_LANES <= n; i += RT_LANES)                                                   \
      RT_LANE_LOOP for (int k = 0; k < RT_LANES; k++) {                                             \
        T v = x[i + k];                                                                             \
        double d = (double)(LOAD)-mu;                                                               \
        lanes[k] += d * d;                                                                          \
      }                                                                                             \
    for (int k = 0; i < n; i++, k++) {                                                              \
      T v = x[i];                                                                                   \
      double d = (double)(LOAD)-mu;                                                                 \
      lanes[k] += d * d;                                                                            \
    }                                                                                               \
    for (int w = RT_LANES / 2; w > 0; w /= 2)                                                       \
      for (int k = 0; k < w; k++) lanes[k] += lanes[k + w];                                         \
    *mean = mu;                                                                                     \
    *m2 = lanes[0];                                                                                 \
  }                                                                                                 \
  /* Mean (into sum) and M2 (into dev) of each of w columns of a block. */                          \
  RT_INLINE void var_cols_##SUF(const char *x, int64_t rows, int64_t rs, int64_t w, int64_t cs,     \
                                double *sum, double *dev) {                                         \
    for (int64_t j = 0; j < w; j++) sum[j] = dev[j] = 0;                                            \
    for (int64_t i = 0; i < rows; i++)                                                              \
      for (int64_t j = 0; j < w; j++) {                                                             \
        T v = *(const T *)(x + i * rs + j * cs);                                                    \
        sum[j] += (double)(LOAD);                                                                   \
      }                                                                                             \
    for (int64_t j = 0; j < w; j++) sum[j] /= (double)rows;                                         \
    for (int64_t i = 0; i < rows; i++)                                                              \
      for (int64_t j = 0; j < w; j++) {                                                             \
        T v = *(const T *)(x + i * rs + j * cs);                                                    \
        double d = (double)(LOAD)-sum[j];                                                           \
        dev[j] += d * d;                                                                            \
      }                                                                                             \
  }                                                                                                 \
  RT_SIMD_VOID(var_##SUF, (rt_acc acc, const rt_reduce_block *b, const rt_reducer *r),              \
                          (acc, b, r)) {                                                            \
    (void)r;                                                                                        \
    double *an = RT_ACC(acc, 0, double), *am = RT_ACC(acc, 1, double);                              \
    double *am2 = RT_ACC(acc, 2, double);                                                           \
    double rows = (double)b->rows;                                                                  \
    if (b->rows == 0) return;                                                                       \
    if (b->row_stride == (int64_t)sizeof(T)) {                                                      \
      for (int64_t j = 0; j < b->cols; j++) {                                                       \
        double mean, m2;                                                                            \
        var_run_##SUF((const T *)(b->x + j * b->col_stride), b->rows, &mean, &m2);                  \
        var_merge(&an[j], &am[j], &am2[j], rows, mean, m2);                                         \
      }                                                                                             \
      return;                                                                                       \
    }                                                                                               \
    /* Two passes over the block, all columns at a time. */                                         \
    double sum[512], dev[512];                                                                      \
    for (int64_t j0 = 0; j0 < b->cols; j0 += 512) {                                                 \
      int64_t w = b->cols - j0 < 512 ? b->cols - j0 : 512;                                          \
      const char *x = b->x + j0 * b->col_stride;                                                    \
      if (b->col_stride == (int64_t)sizeof(T)) /* inlined with a constant stride */                 \
        var_cols_##SUF(x, b->rows, b->row_stride, w, (int64_t)sizeof(T), sum, dev);                 \
      else                                                                                          \
        var_cols_##SUF(x, b->rows, b->row_stride, w, b->col_stride, sum, dev);                      \
      for (int64_t j = 0; j < w; j++)                                                               \
        var_merge(&an[j0 + j], &am[j0 + j], &am2[j0 + j], rows, sum[j], dev[j]);                    \
    }                                                                                               \
  }

static void var_init(rt_acc acc, int64_t n, const rt_reducer *r) {
  (void)r;
  for (int k = 0; k < 3; k++) {
    double *a = RT_ACC(acc, k, double);
    for (int64_t j = 0; j < n; j++) a[j] = 0;
  }
}

static void var_combine(rt_acc acc, rt_acc later, int64_t n, const rt_reducer *r) {
  (void)r;
  double *an = RT_ACC(acc, 0, double), *am = RT_ACC(acc, 1, double), *am2 = RT_ACC(acc, 2, double);
  const double *bn = RT_ACC(later, 0, double), *bm = RT_ACC(later, 1, double);
  const double *bm2 = RT_ACC(later, 2, double);
  for (int64_t j = 0; j < n; j++) var_merge(&an[j], &am[j], &am2[j], bn[j], bm[j], bm2[j]);
}

/* param[0]: correction; variant: take the square root. */
static void var_finish(rt_acc acc, int64_t n, int64_t count, char *const *results,
                       const rt_reducer *r) {
  (void)count;
  const double *an = RT_ACC(acc, 0, double), *am = RT_ACC(acc, 1, double);
  const double *am2 = RT_ACC(acc, 2, double);
  double *var = (double *)(void *)results[0], *mean = (double *)(void *)results[1];
  for (int64_t j = 0; j < n; j++) {
    double dof = an[j] - r->param[0];
    double v = am2[j] / (dof > 0 ? dof : 0);
    var[j] = r->variant ? sqrt(v) : v;
    mean[j] = an[j] > 0 ? am[j] : NAN;
  }
}

/* ---- NORM: field 0 is the sum (or extreme) ------------------------------- */

enum { NORM_ZERO, NORM_ONE, NORM_TWO, NORM_INF, NORM_NEG_INF, NORM_P };

#define TAKES_MAX(x, m) (((x) > (m)) | (((x) != (x)) & ((m) == (m))))
#define TAKES_MIN(x, m) (((x) < (m)) | (((x) != (x)) & ((m) == (m))))
#define ADD_TO(a, e) ((a) + (e))
#define MAX_OF(a, e) (TAKES_MAX(e, a) ? (e) : (a))
#define MIN_OF(a, e) (TAKES_MIN(e, a) ? (e) : (a))

/* NAME folds f(e) with OP over a run of storage type T (e: an element read
 * as P, f computed in P); p is the order. Contiguous runs fold groups of
 * RT_LANES * 16 elements into lanes of P (float for the float inputs, half
 * the vector width of double) and the groups into lanes of double. */
#define DEFINE_NORM_RUN(NAME, T, P, LOAD, F, OP, IDENT)                                             \
  RT_INLINE double NAME(const char *base, int64_t n, int64_t stride, double p) {                    \
    (void)p;                                                                                        \
    double lanes[RT_LANES];                                                                         \
    for (int k = 0; k < RT_LANES; k++) lanes[k] = (IDENT);                                          \
    int64_t i = 0;                                                                                  \
    if (stride == (int64_t)sizeof(T)) {                                                             \
      const T *x = (const T *)base;                                                                 \
      while (i + RT_LANES <= n) {                                                                   \
        P part[RT_LANES];                                                                           \
        for (int k = 0; k < RT_LANES; k++) part[k] = (P)(IDENT);                                    \
        int64_t end = i + RT_LANES * 16 < n ? i + RT_LANES * 16 : n;                                \
        for (; i + RT_LANES <= end; i += RT_LANES)                                                  \
          RT_LANE_LOOP for (int k = 0; k < RT_LANES; k++) {                                         \
            T v = x[i + k];                                                                         \
            P e = (P)(LOAD);                                                                        \
            part[k] = OP(part[k], (F));                                                             \
          }                                                                                         \
        for (int k = 0; k < RT_LANES; k++) lanes[k] = OP(lanes[k], (double)part[k]);                \
      }                                                                                             \
    }                                                                                               \
    for (int k = 0; i < n; i++, k = (k + 1) % RT_LANES) {                                           \
      T v = *(const T *)(base + i * stride);                                                        \
      P e = (P)(LOAD);                                                                              \
      lanes[k] = OP(lanes[k], (double)(F));                                                         \
    }                                                                                               \
    for (int w = RT_LANES / 2; w > 0; w /= 2)                                                       \
      for (int k = 0; k < w; k++) lanes[k] = OP(lanes[k], lanes[k + w]);                            \
    return lanes[0];                                                                                \
  }

/* Folds f(e) of each element e of a block into its column's accumulator a[j]
 * (contiguous columns, so the loop vectorises across outputs). */
#define NORM_COLS(T, LOAD, F, OP)                                                                   \
  for (int64_t i = 0; i < b->rows; i++) {                                                           \
    const T *restrict row = (const T *)(b->x + i * b->row_stride);                                  \
    for (int64_t j = 0; j < b->cols; j++) {                                                         \
      T v = row[j];                                                                                 \
      double e = (double)(LOAD);                                                                    \
      a[j] = OP(a[j], (F));                                                                         \
    }                                                                                               \
  }

#define ABS_float fabsf
#define ABS_double fabs

#define DEFINE_NORM(SUF, T, C, LOAD)                                                                \
  DEFINE_NORM_RUN(norm0_##SUF, T, C, LOAD, (C)(e != 0), ADD_TO, 0)                                  \
  DEFINE_NORM_RUN(norm1_##SUF, T, C, LOAD, ABS_##C(e), ADD_TO, 0)                                   \
  DEFINE_NORM_RUN(norm2_##SUF, T, C, LOAD, e * e, ADD_TO, 0)                                        \
  DEFINE_NORM_RUN(norminf_##SUF, T, C, LOAD, ABS_##C(e), MAX_OF, 0)                                 \
  DEFINE_NORM_RUN(normneginf_##SUF, T, C, LOAD, ABS_##C(e), MIN_OF, INFINITY)                       \
  DEFINE_NORM_RUN(normp_##SUF, T, double, LOAD, pow(fabs(e), p), ADD_TO, 0)                         \
  RT_SIMD_VOID(norm_##SUF, (rt_acc acc, const rt_reduce_block *b, const rt_reducer *r),             \
                           (acc, b, r)) {                                                           \
    double *a = RT_ACC(acc, 0, double);                                                             \
    double p = r->param[0];                                                                         \
    if (b->row_stride != (int64_t)sizeof(T) && b->col_stride == (int64_t)sizeof(T)) {               \
      switch (r->variant) {                                                                         \
        case NORM_ZERO: NORM_COLS(T, LOAD, (double)(e != 0), ADD_TO); return;                       \
        case NORM_ONE: NORM_COLS(T, LOAD, fabs(e), ADD_TO); return;                                 \
        case NORM_TWO: NORM_COLS(T, LOAD, e * e, ADD_TO); return;                                   \
        case NORM_INF: NORM_COLS(T, LOAD, fabs(e), MAX_OF); return;                                 \
        case NORM_NEG_INF: NORM_COLS(T, LOAD, fabs(e), MIN_OF); return;                             \
        default: NORM_COLS(T, LOAD, pow(fabs(e), p), ADD_TO); return;                               \
      }                                                                                             \
    }                                                                                               \
    /* Otherwise along each output's run. */                                                        \
    for (int64_t j = 0; j < b->cols; j++) {                                                         \
      const char *x = b->x + j * b->col_stride;                                                     \
      switch (r->variant) {                                                                         \
        case NORM_ZERO: a[j] += norm0_##SUF(x, b->rows, b->row_stride, p); break;                   \
        case NORM_ONE: a[j] += norm1_##SUF(x, b->rows, b->row_stride, p); break;                    \
        case NORM_TWO: a[j] += norm2_##SUF(x, b->rows, b->row_stride, p); break;                    \
        case NORM_INF: a[j] = MAX_OF(a[j], norminf_##SUF(x, b->rows, b->row_stride, p)); break;     \
        case NORM_NEG_INF:                                                                          \
          a[j] = MIN_OF(a[j], normneginf_##SUF(x, b->rows, b->row_stride, p));                      \
          break;                                                                                    \
        default: a[j] += normp_##SUF(x, b->rows, b->row_stride, p); break;                          \
      }                                                                                             \
    }                                                                                               \
  }

static void norm_init(rt_acc acc, int64_t n, const rt_reducer *r) {
  double *a = RT_ACC(acc, 0, double);
  for (int64_t j = 0; j < n; j++) a[j] = r->variant == NORM_NEG_INF ? INFINITY : 0;
}

static void norm_combine(rt_acc acc, rt_acc later, int64_t n, const rt_reducer *r) {
  double *a = RT_ACC(acc, 0, double);
  const double *b = RT_ACC(later, 0, double);
  for (int64_t j = 0; j < n; j++) {
    if (r->variant == NORM_INF)
      a[j] = MAX_OF(a[j], b[j]);
    else if (r->variant == NORM_NEG_INF)
      a[j] = MIN_OF(a[j], b[j]);
    else
      a[j] += b[j];
  }
}

static void norm_finish(rt_acc acc, int64_t n, int64_t count, char *const *results,
                        const rt_reducer *r) {
  (void)count;
  const double *a = RT_ACC(acc, 0, double);
  double *out = (double *)(void *)results[0];
  for (int64_t j = 0; j < n; j++) {
    if (r->variant == NORM_TWO)
      out[j] = sqrt(a[j]);
    else if (r->variant == NORM_P)
      out[j] = pow(a[j], 1.0 / r->param[0]);
    else
      out[j] = a[j];
  }
}

/* ---- LOGSUMEXP: fields m (running max), s (sum of exp(x - m)) ------------ */

/* exp(x) in float for the arguments of logsumexp, x - max <= 0: x = n ln2
 * + r, exp(r) by Cephes' expf polynomial, 2^n by building the exponent
 * bits from the rounding constant (no float-to-int conversion). Below the
 * normal range (and for NaN) the result is 0; positive x, which only occur
 * while the max is infinite and the sum is never read, give garbage. */
RT_INLINE float lse_expf(float x) {
  float xc = x >= -87.3f ? x : -87.3f;
  float shifted = xc * 1.44269504088896341f + 12582912.0f; /* 1.5 * 2^23: rounds */
  float n = shifted - 12582912.0f;
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float r2 = r * r; /* the polynomial by Estrin's scheme: shorter dependency chains */
  float p01 = 1.9875691500e-4f * r + 1.3981999507e-3f;
  float p23 = 8.3334519073e-3f * r + 4.1665795894e-2f;
  float p45 = 1.6666665459e-1f * r + 5.0000001201e-1f;
  float poly = (p01 * r2 + p23) * r2 + p45;
  float e = poly * r2 + r + 1.0f;
  float scale = rt_f32_from_bits((rt_f32_bits(shifted) - 0x4b400000u + 127u) << 23);
  return x >= -87.3f ? e * scale : 0.0f;
}

/* Raises the running max to include block max bm (NaN wins). */
RT_INLINE void lse_raise(double *m, double *s, double bm) {
  if (*m != *m) return;
  if (bm != bm) {
    *m = bm;
    return;
  }
  if (bm > *m) {
    if (isfinite(*m) && isfinite(bm)) *s *= exp(*m - bm);
    *m = bm;
  }
}

/* The value subtracted before exp: the max if finite (an infinite or NaN
 * max decides the result alone, and its sum is never read). */
RT_INLINE double lse_shift(double m) { return isfinite(m) ? m : 0; }

#define DEFINE_LSE(SUF, T, C, LOAD, EXP)                                                            \
  RT_INLINE C lse_max_##SUF(const char *base, int64_t n, int64_t stride) {                          \
    C lanes[RT_LANES];                                                                              \
    for (int k = 0; k < RT_LANES; k++) lanes[k] = -INFINITY;                                        \
    int64_t i = 0;                                                                                  \
    if (stride == (int64_t)sizeof(T)) {                                                             \
      const T *x = (const T *)base;                                                                 \
      for (; i + RT_LANES <= n; i += RT_LANES)                                                      \
        RT_LANE_LOOP for (int k = 0; k < RT_LANES; k++) {                                           \
          T v = x[i + k];                                                                           \
          C e = LOAD;                                                                               \
          lanes[k] = TAKES_MAX(e, lanes[k]) ? e : lanes[k];                                         \
        }                                                                                           \
    }                                                                                               \
    for (int k = 0; i < n; i++, k = (k + 1) % RT_LANES) {                                           \
      T v = *(const T *)(base + i * stride);                                                        \
      C e = LOAD;                                                                                   \
      lanes[k] = TAKES_MAX(e, lanes[k]) ? e : lanes[k];                                             \
    }                                                                                               \
    for (int w = RT_LANES / 2; w > 0; w /= 2)                                                       \
      for (int k = 0; k < w; k++) lanes[k] = TAKES_MAX(lanes[k + w], lanes[k]) ? lanes[k + w] : lanes[k]; \
    return lanes[0];                                                                                \
  }                                                                                                 \
  /* Sum of exp(x - shift): exps are summed in C (float for the 16-bit and                          \
   * float32 inputs, which keeps the loop vectorisable) over groups of                              \
   * RT_LANES * 16 elements, and the groups in double. */                                           \
  RT_INLINE double lse_sum_##SUF(const char *base, int64_t n, int64_t stride, C shift) {            \
    double total[RT_LANES] = {0};                                                                   \
    int64_t i = 0;                                                                                  \
    if (stride == (int64_t)sizeof(T)) {                                                             \
      const T *x = (const T *)base;                                                                 \
      while (i + RT_LANES <= n) {                                                                   \
        C part[RT_LANES] = {0};                                                                     \
        int64_t end = i + RT_LANES * 16 < n ? i + RT_LANES * 16 : n;                                \
        for (; i + RT_LANES <= end; i += RT_LANES)                                                  \
          RT_LANE_LOOP for (int k = 0; k < RT_LANES; k++) {                                         \
            T v = x[i + k];                                                                         \
            C e = LOAD;                                                                             \
            part[k] += EXP(e - shift);                                                              \
          }                                                                                         \
        for (int k = 0; k < RT_LANES; k++) total[k] += (double)part[k];                             \
      }                                                                                             \
    }                                                                                               \
    for (int k = 0; i < n; i++, k = (k + 1) % RT_LANES) {                                           \
      T v = *(const T *)(base + i * stride);                                                        \
      C e = LOAD;                                                                                   \
      total[k] += (double)EXP(e - shift);                                                           \
    }                                                                                               \
    for (int w = RT_LANES / 2; w > 0; w /= 2)                                                       \
      for (int k = 0; k < w; k++) total[k] += total[k + w];                                         \
    return total[0];                                                                                \
  }                                                                                                 \
  RT_SIMD_VOID(lse_##SUF, (rt_acc acc, const rt_reduce_block *b, const rt_reducer *r),              \
                          (acc, b, r)) {                                                            \
    (void)r;                                                                                        \
    double *am = RT_ACC(acc, 0, double), *as = RT_ACC(acc, 1, double);                              \
    if (b->col_stride != (int64_t)sizeof(T) || b->row_stride == (int64_t)sizeof(T)) {               \
      for (int64_t j = 0; j < b->cols; j++) {                                                       \
        const char *x = b->x + j * b->col_stride;                                                   \
        lse_raise(&am[j], &as[j], (double)lse_max_##SUF(x, b->rows, b->row_stride));                \
        as[j] += lse_sum_##SUF(x, b->rows, b->row_stride, (C)lse_shift(am[j]));                     \
      }                                                                                             \
      return;                                                                                       \
    }                                                                                               \
    /* Contiguous columns: two passes over the block across all columns. */                         \
    C bmax[512], shift[512], sum[512];                                                              \
    for (int64_t j0 = 0; j0 < b->cols; j0 += 512) {                                                 \
      int64_t w = b->cols - j0 < 512 ? b->cols - j0 : 512;                                          \
      const T *x0 = (const T *)(b->x) + j0;                                                         \
      for (int64_t j = 0; j < w; j++) bmax[j] = -INFINITY;                                          \
      for (int64_t i = 0; i < b->rows; i++) {                                                       \
        const T *row = (const T *)((const char *)x0 + i * b->row_stride);                           \
        for (int64_t j = 0; j < w; j++) {                                                           \
          T v = row[j];                                                                             \
          C e = LOAD;                                                                               \
          bmax[j] = TAKES_MAX(e, bmax[j]) ? e : bmax[j];                                            \
        }                                                                                           \
      }                                                                                             \
      for (int64_t j = 0; j < w; j++) {                                                             \
        lse_raise(&am[j0 + j], &as[j0 + j], (double)bmax[j]);                                       \
        shift[j] = (C)lse_shift(am[j0 + j]);                                                        \
        sum[j] = 0;                                                                                 \
      }                                                                                             \
      for (int64_t i = 0; i < b->rows; i++) {                                                       \
        const T *row = (const T *)((const char *)x0 + i * b->row_stride);                           \
        for (int64_t j = 0; j < w; j++) {                                                           \
          T v = row[j];                                                                             \
          C e = LOAD;                                                                               \
          sum[j] += EXP(e - shift[j]);                                                              \
        }                                                                                           \
      }                                                                                             \
      for (int64_t j = 0; j < w; j++) as[j0 + j] += (double)sum[j];                                 \
    }                                                                                               \
  }

static void lse_init(rt_acc acc, int64_t n, const rt_reducer *r) {
  (void)r;
  double *am = RT_ACC(acc, 0, double), *as = RT_ACC(acc, 1, double);
  for (int64_t j = 0; j < n; j++) {
    am[j] = -INFINITY;
    as[j] = 0;
  }
}

static void lse_combine(rt_acc acc, rt_acc later, int64_t n, const rt_reducer *r) {
  (void)r;
  double *am = RT_ACC(acc, 0, double), *as = RT_ACC(acc, 1, double);
  const double *bm = RT_ACC(later, 0, double), *bs = RT_ACC(later, 1, double);
  for (int64_t j = 0; j < n; j++) {
    lse_raise(&am[j], &as[j], bm[j]);
    if (isfinite(am[j]) && isfinite(bm[j])) as[j] += bs[j] * exp(bm[j] - am[j]);
  }
}

static void lse_finish(rt_acc acc, int64_t n, int64_t count, char *const *results,
                       const rt_reducer *r) {
  (void)count;
  (void)r;
  const double *am = RT_ACC(acc, 0, double), *as = RT_ACC(acc, 1, double);
  double *out = (double *)(void *)results[0];
  for (int64_t j = 0; j < n; j++) out[j] = isfinite(am[j]) ? am[j] + log(as[j]) : am[j];
}

/* Norms compute |x|^p in the input's compute type, or in float64 for a
 * float64 output (PyTorch converts the input to the result dtype). */
#define VAR_FLOAT(DT, SUF, T, C, LOAD)                                                              \
  DEFINE_VAR(SUF, T, C, LOAD)                                                                       \
  DEFINE_NORM(SUF, T, C, LOAD)                                                                      \
  DEFINE_NORM(wide_##SUF, T, double, LOAD)
RT_REDUCE_FLOAT_TYPES(VAR_FLOAT)
DEFINE_LSE(f16, rt_half, float, rt_load_f16(v), lse_expf)
DEFINE_LSE(bf16, rt_bfloat16, float, rt_load_bf16(v), lse_expf)
DEFINE_LSE(f32, float, float, (v), lse_expf)
DEFINE_LSE(f64, double, double, (v), exp)

#define VAR_ENTRY(DT, SUF, T, C, LOAD) [DT] = var_##SUF,
#define NORM_ENTRY(DT, SUF, T, C, LOAD) [DT] = norm_##SUF,
#define LSE_ENTRY(DT, SUF, T, C, LOAD) [DT] = lse_##SUF,
static const rt_reduce_block_table var_blocks = {RT_REDUCE_FLOAT_TYPES(VAR_ENTRY)};
static const rt_reduce_block_table norm_blocks = {RT_REDUCE_FLOAT_TYPES(NORM_ENTRY)};
#define NORM_WIDE_ENTRY(DT, SUF, T, C, LOAD) [DT] = norm_wide_##SUF,
static const rt_reduce_block_table norm_wide_blocks = {RT_REDUCE_FLOAT_TYPES(NORM_WIDE_ENTRY)};
static const rt_reduce_block_table lse_blocks = {RT_REDUCE_FLOAT_TYPES(LSE_ENTRY)};

static nrt_status check_floating(const nrt_op *op, int max_outputs) {
  nrt_status s = rt_reduce_check_operands(op, 1, max_outputs);
  if (s) return s;
  for (int k = 0; k <= op->num_outputs; k++)
    if (!nrt_dtype_is_floating(op->operands[k].dtype))
      return rt_fail(NRT_ERROR_UNSUPPORTED, "%s: not implemented for dtype %s",
                     nrt_op_name(op->code), nrt_dtype_name(op->operands[k].dtype));
  return NRT_SUCCESS;
}

nrt_status rt_kernel_var(const nrt_op *op) {
  nrt_status s = check_floating(op, 2);
  if (s) return s;
  if (op->num_scalars < 2)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "var: expects scalars [correction, take_sqrt]");
  rt_reducer r = {
      .fields = 3, .results = 2, .result_dtype = {NRT_FLOAT64, NRT_FLOAT64},
      .init = var_init, .block = var_blocks[op->operands[op->num_outputs].dtype],
      .combine = var_combine, .finish = var_finish,
  };
  const nrt_scalar *c = &op->scalars[0], *root = &op->scalars[1];
  r.param[0] = c->is_float ? c->f : (double)c->i;
  r.variant = root->is_float ? root->f != 0 : root->i != 0;
  return rt_reduce(op, &r);
}

nrt_status rt_kernel_norm(const nrt_op *op) {
  nrt_status s = check_floating(op, 1);
  if (s) return s;
  if (op->num_scalars < 1) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "norm: expects scalar [p]");
  double p = op->scalars[0].is_float ? op->scalars[0].f : (double)op->scalars[0].i;
  if (p != p) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "norm: the order p is NaN");
  rt_reducer r = {
      .fields = 1, .results = 1, .result_dtype = {NRT_FLOAT64},
      .init = norm_init,
      .block = (op->operands[0].dtype == NRT_FLOAT64 ? norm_wide_blocks : norm_blocks)[op->operands[1].dtype],
      .combine = norm_combine, .finish = norm_finish, .param = {p},
  };
  r.variant = p == 0 ? NORM_ZERO : p == 1 ? NORM_ONE : p == 2 ? NORM_TWO
            : p == INFINITY ? NORM_INF : p == -INFINITY ? NORM_NEG_INF : NORM_P;
  if (nrt_view_numel(&op->operands[1]) == 0 && nrt_view_numel(&op->operands[0]) != 0 &&
      (p < 0 || p == INFINITY))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "norm: the %g-norm of an empty dimension is undefined", p);
  return rt_reduce(op, &r);
}

nrt_status rt_kernel_logsumexp(const nrt_op *op) {
  nrt_status s = check_floating(op, 1);
  if (s) return s;
  rt_reducer r = {
      .fields = 2, .results = 1, .result_dtype = {NRT_FLOAT64},
      .init = lse_init, .block = lse_blocks[op->operands[1].dtype],
      .combine = lse_combine, .finish = lse_finish,
  };
  return rt_reduce(op, &r);
}
