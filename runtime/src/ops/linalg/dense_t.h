/* Row-major dense routines for one element type, included once per type
 * with LA_T (float, double or their _Complex), LA_R (its real type),
 * LA_CPLX (1 for complex), LA_DTYPE (its nrt_dtype) and LA_NAME(x) (the
 * name with a type suffix) defined. Matrices are packed into row-major scratch so that every inner
 * loop runs along a contiguous row and vectorises; arithmetic stays in the
 * element type, as LAPACK's does. Complex products are spelt out on the
 * parts (mul below): C's operator checks every product for NaN and calls
 * the runtime library, which keeps the loops from vectorising. */
#include <complex.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "ops/engine/thread_pool.h"
#include "ops/gemm/gemm.h"

#if LA_CPLX
static inline LA_T LA_NAME(mul)(LA_T a, LA_T b) {
  const LA_R ar = __real__ a, ai = __imag__ a, br = __real__ b, bi = __imag__ b;
  return LA_CX(ar * br - ai * bi, ar * bi + ai * br);
}

/* a / b by Smith's algorithm (no overflow from squaring |b|). */
static inline LA_T LA_NAME(div)(LA_T a, LA_T b) {
  const LA_R ar = __real__ a, ai = __imag__ a, br = __real__ b, bi = __imag__ b;
  if (fabs(br) >= fabs(bi)) {
    const LA_R r = bi / br, d = br + bi * r;
    return LA_CX((ar + ai * r) / d, (ai - ar * r) / d);
  }
  const LA_R r = br / bi, d = bi + br * r;
  return LA_CX((ar * r + ai) / d, (ai * r - ar) / d);
}

static inline LA_T LA_NAME(conj)(LA_T a) { return LA_CX(__real__ a, -__imag__ a); }
/* |re| + |im|: LAPACK's i?amax measure, by which its LU chooses pivots. */
static inline LA_R LA_NAME(abs1)(LA_T a) { return fabs(__real__ a) + fabs(__imag__ a); }
static inline LA_R LA_NAME(re)(LA_T a) { return __real__ a; }
#else
static inline LA_T LA_NAME(mul)(LA_T a, LA_T b) { return a * b; }
static inline LA_T LA_NAME(div)(LA_T a, LA_T b) { return a / b; }
static inline LA_T LA_NAME(conj)(LA_T a) { return a; }
static inline LA_R LA_NAME(abs1)(LA_T a) { return fabs(a); }
static inline LA_R LA_NAME(re)(LA_T a) { return a; }
#endif

/* dst (rows x cols, row-major) = the matrix at src with element strides rs, cs. */
static inline void LA_NAME(pack)(const char *src, int64_t rows, int64_t cols, int64_t rs,
                                 int64_t cs, void *dst_) {
  const LA_T *s = (const LA_T *)src;
  LA_T *dst = dst_;
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) dst[i * cols + j] = s[i * rs + j * cs];
}

static inline void LA_NAME(unpack)(const void *src_, int64_t rows, int64_t cols, char *dst,
                                   int64_t rs, int64_t cs) {
  const LA_T *src = src_;
  LA_T *d = (LA_T *)dst;
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) d[i * rs + j * cs] = src[i * cols + j];
}

/* pack of the conjugate (for solves with A^H or conj(A)). */
static inline void LA_NAME(pack_conj)(const char *src, int64_t rows, int64_t cols, int64_t rs,
                                      int64_t cs, void *dst_) {
  const LA_T *s = (const LA_T *)src;
  LA_T *dst = dst_;
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) dst[i * cols + j] = LA_NAME(conj)(s[i * rs + j * cs]);
}

/* y[0..n) -= a * x[0..n) */
static inline void LA_NAME(axpy_neg)(LA_T *restrict y, LA_T a, const LA_T *restrict x, int64_t n) {
  for (int64_t j = 0; j < n; j++) y[j] -= LA_NAME(mul)(a, x[j]);
}

/* Dot product with eight running sums, so the loop vectorises without
 * reassociation flags; the order is fixed, so results do not depend on
 * anything but the inputs. */
static inline LA_T LA_NAME(dot)(const LA_T *x, const LA_T *y, int64_t n) {
  LA_T acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int t = 0; t < 8; t++) acc[t] += LA_NAME(mul)(x[i + t], y[i + t]);
  LA_T s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  for (; i < n; i++) s += LA_NAME(mul)(x[i], y[i]);
  return s;
}

/* sum x[i] conj(y[i]), the same way. */
static inline LA_T LA_NAME(dotc)(const LA_T *x, const LA_T *y, int64_t n) {
  LA_T acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int t = 0; t < 8; t++) acc[t] += LA_NAME(mul)(x[i + t], LA_NAME(conj)(y[i + t]));
  LA_T s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  for (; i < n; i++) s += LA_NAME(mul)(x[i], LA_NAME(conj)(y[i]));
  return s;
}

/* The trailing update A22 -= L21 U12 of a blocked LU, rows [begin, end)
 * of A22 (rows j0 + begin .. of a). */
typedef struct LA_NAME(lu_update) {
  LA_T *a;
  int64_t n, k0, kb;
} LA_NAME(lu_update);

static void LA_NAME(lu_update_rows)(int64_t begin, int64_t end, void *ctx) {
  const LA_NAME(lu_update) *u = ctx;
  const int64_t n = u->n, j0 = u->k0 + u->kb;
  for (int64_t i = j0 + begin; i < j0 + end; i++) {
    LA_T *row = u->a + i * n;
    for (int64_t p = u->k0; p < j0; p++) {
      const LA_T l = row[p];
      if (l != 0) LA_NAME(axpy_neg)(row + j0, l, u->a + p * n + j0, n - j0);
    }
  }
}

#if !LA_CPLX
/* The same trailing update as one GEMM, A22 = A22 - L21 U12, on the
 * runtime's blocked kernels (all three blocks are disjoint parts of a). */
static inline nrt_status LA_NAME(gemm_update)(LA_T *a, int64_t m, int64_t n, int64_t k0, int64_t kb) {
  const int64_t j0 = k0 + kb;
  rt_gemm_args g;
  memset(&g, 0, sizeof g);
  g.batch = 1, g.m = m - j0, g.n = n - j0, g.k = kb, g.kslices = 1;
  g.ab_dtype = g.c_dtype = LA_DTYPE;
  g.a = a + j0 * n + k0, g.a_rs = n, g.a_cs = 1;
  g.b = a + k0 * n + j0, g.b_rs = n, g.b_cs = 1;
  g.c = a + j0 * n + j0, g.c_rs = n, g.c_cs = 1;
  g.cin = g.c, g.cin_rs = n, g.cin_cs = 1;
  g.alpha = -1.0, g.beta = 1.0;
  return rt_gemm(&g);
}
#else
/* The same for complex on the runtime's real GEMM: T = L21 U12 as four
 * real products of the parts (element stride 2 reaches a part), then
 * A22 -= T, so a is untouched unless all four succeed. t holds
 * (m - j0) x (n - j0) elements. */
static inline nrt_status LA_NAME(gemm_update)(LA_T *a, int64_t m, int64_t n, int64_t k0, int64_t kb,
                                              LA_T *t) {
  const int64_t j0 = k0 + kb, rows = m - j0, cols = n - j0;
  const LA_R *l = (const LA_R *)(a + j0 * n + k0), *u = (const LA_R *)(a + k0 * n + j0);
  /* re T = re L re U - im L im U, im T = re L im U + im L re U: the part
   * (0 re, 1 im) of T, L and U, alpha and beta of each product */
  static const struct { int t, l, u; double alpha, beta; } terms[4] = {
      {0, 0, 0, 1, 0}, {0, 1, 1, -1, 1}, {1, 0, 1, 1, 0}, {1, 1, 0, 1, 1}};
  for (int q = 0; q < 4; q++) {
    rt_gemm_args g;
    memset(&g, 0, sizeof g);
    g.batch = 1, g.m = rows, g.n = cols, g.k = kb, g.kslices = 1;
    g.ab_dtype = g.c_dtype = LA_RDTYPE;
    g.a = l + terms[q].l, g.a_rs = 2 * n, g.a_cs = 2;
    g.b = u + terms[q].u, g.b_rs = 2 * n, g.b_cs = 2;
    g.c = (LA_R *)t + terms[q].t, g.c_rs = 2 * cols, g.c_cs = 2;
    g.cin = terms[q].beta != 0 ? g.c : NULL, g.cin_rs = 2 * cols, g.cin_cs = 2;
    g.alpha = terms[q].alpha, g.beta = terms[q].beta;
    const nrt_status s = rt_gemm(&g);
    if (s != NRT_SUCCESS) return s;
  }
  for (int64_t i = 0; i < rows; i++) {
    LA_T *row = a + (j0 + i) * n + j0;
    const LA_T *ti = t + i * cols;
    for (int64_t j = 0; j < cols; j++) row[j] -= ti[j];
  }
  return NRT_SUCCESS;
}
#endif

/* P A = L U in place on a (m x n, row-major), as LAPACK's getrf: blocked,
 * right-looking, partial pivoting by the first largest |a|. Writes
 * min(m, n) 1-based pivots; returns info. */
static inline int32_t LA_NAME(lu)(void *a_, int64_t m, int64_t n, int32_t *piv) {
  LA_T *a = a_;
  const int64_t kmax = m < n ? m : n, nb = 48;
  int32_t info = 0;
#if LA_CPLX
  LA_T *product = NULL; /* the trailing update's L21 U12, for the GEMMs */
#endif
  for (int64_t k0 = 0; k0 < kmax; k0 += nb) {
    const int64_t kb = kmax - k0 < nb ? kmax - k0 : nb, j0 = k0 + kb;
    for (int64_t k = k0; k < j0; k++) { /* the panel, unblocked */
      int64_t p = k;
      LA_R best = LA_NAME(abs1)(a[k * n + k]);
      for (int64_t i = k + 1; i < m; i++)
        if (LA_NAME(abs1)(a[i * n + k]) > best) best = LA_NAME(abs1)(a[i * n + k]), p = i;
      piv[k] = (int32_t)(p + 1);
      const LA_T pivot = a[p * n + k];
      if (pivot != 0) {
        if (p != k)
          for (int64_t j = 0; j < n; j++) {
            LA_T t = a[k * n + j];
            a[k * n + j] = a[p * n + j];
            a[p * n + j] = t;
          }
#if LA_CPLX /* by the reciprocal, as LAPACK's zgetf2 scales */
        const LA_T r = LA_NAME(div)(1, pivot);
        for (int64_t i = k + 1; i < m; i++) a[i * n + k] = LA_NAME(mul)(a[i * n + k], r);
#else
        for (int64_t i = k + 1; i < m; i++) a[i * n + k] /= pivot;
#endif
      } else if (info == 0) {
        info = (int32_t)(k + 1);
      }
      for (int64_t i = k + 1; i < m; i++) {
        const LA_T l = a[i * n + k];
        if (l != 0) LA_NAME(axpy_neg)(a + i * n + k + 1, l, a + k * n + k + 1, j0 - k - 1);
      }
    }
    if (j0 >= n) continue;
    for (int64_t k = k0; k < j0; k++) /* U12 = L11^-1 A12 */
      for (int64_t i = k + 1; i < j0; i++) {
        const LA_T l = a[i * n + k];
        if (l != 0) LA_NAME(axpy_neg)(a + i * n + j0, l, a + k * n + j0, n - j0);
      }
    if (j0 >= m) continue;
#if !LA_CPLX
    if ((double)(m - j0) * (double)(n - j0) * (double)kb >= 262144.0 &&
        LA_NAME(gemm_update)(a, m, n, k0, kb) == NRT_SUCCESS)
      continue;
#else
    if ((double)(m - j0) * (double)(n - j0) * (double)kb >= 65536.0) {
      if (!product) product = malloc((size_t)(m * n) * sizeof(LA_T));
      if (product && LA_NAME(gemm_update)(a, m, n, k0, kb, product) == NRT_SUCCESS) continue;
    }
#endif
    /* Small updates, or no memory for the GEMM's packing: row by row. */
    LA_NAME(lu_update) u = {a, n, k0, kb};
    const int64_t row_work = kb * (n - j0);
    rt_parallel_for(m - j0, 32768 / row_work + 1, LA_NAME(lu_update_rows), &u);
  }
#if LA_CPLX
  free(product);
#endif
  return info;
}

/* L L^H = A in place on a (n x n, row-major, lower triangle read; the
 * imaginary part of the diagonal is not read, as LAPACK's potrf): returns
 * info, the order of the first leading minor that is not positive definite. */
static inline int32_t LA_NAME(cholesky)(LA_T *a, int64_t n) {
  for (int64_t j = 0; j < n; j++) {
    LA_T *rj = a + j * n;
    const LA_R s = LA_NAME(re)(rj[j]) - LA_NAME(re)(LA_NAME(dotc)(rj, rj, j));
    if (!(s > 0)) {
      rj[j] = s;
      return (int32_t)(j + 1);
    }
    const LA_R d = sqrt(s);
    rj[j] = d;
    for (int64_t i = j + 1; i < n; i++) {
      LA_T *ri = a + i * n;
      ri[j] = (ri[j] - LA_NAME(dotc)(ri, rj, j)) / d;
    }
  }
  return 0;
}

/* The factor as LINALG_CHOLESKY returns it: L with its strict upper
 * triangle zeroed. */
static inline int32_t LA_NAME(cholesky_lower)(void *a_, int64_t n) {
  LA_T *a = a_;
  const int32_t info = LA_NAME(cholesky)(a, n);
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = i + 1; j < n; j++) a[i * n + j] = 0;
  return info;
}

/* Solves A X = B in place on x (n x k, row-major); A (n x n) is read at
 * element strides rs, cs, its upper or lower triangle only. */
static inline void LA_NAME(trsm)(const char *a_bytes, int64_t rs, int64_t cs, int64_t n, void *x_,
                                 int64_t k, int upper, int unit) {
  const LA_T *a = (const LA_T *)a_bytes;
  LA_T *x = x_;
  if (!upper) {
    for (int64_t i = 0; i < n; i++) {
      LA_T *xi = x + i * k;
      for (int64_t j = 0; j < i; j++) {
        const LA_T l = a[i * rs + j * cs];
        if (l != 0) LA_NAME(axpy_neg)(xi, l, x + j * k, k);
      }
      if (!unit) {
        const LA_T d = a[i * rs + i * cs];
        for (int64_t c = 0; c < k; c++) xi[c] = LA_NAME(div)(xi[c], d);
      }
    }
  } else {
    for (int64_t i = n - 1; i >= 0; i--) {
      LA_T *xi = x + i * k;
      for (int64_t j = i + 1; j < n; j++) {
        const LA_T u = a[i * rs + j * cs];
        if (u != 0) LA_NAME(axpy_neg)(xi, u, x + j * k, k);
      }
      if (!unit) {
        const LA_T d = a[i * rs + i * cs];
        for (int64_t c = 0; c < k; c++) xi[c] = LA_NAME(div)(xi[c], d);
      }
    }
  }
}

/* Solves A x = b in place on one contiguous vector x, A (n x n) with rows
 * contiguous (row stride lda): the dot-product form, for few right-hand
 * sides, where the row form's axpys would be a handful of elements long. */
static inline void LA_NAME(trsv_rows)(const void *a_, int64_t lda, int64_t n, void *x_, int upper,
                                      int unit) {
  const LA_T *a = a_;
  LA_T *x = x_;
  if (!upper) {
    for (int64_t i = 0; i < n; i++) {
      const LA_T v = x[i] - LA_NAME(dot)(a + i * lda, x, i);
      x[i] = unit ? v : LA_NAME(div)(v, a[i * lda + i]);
    }
  } else {
    for (int64_t i = n - 1; i >= 0; i--) {
      const LA_T v = x[i] - LA_NAME(dot)(a + i * lda + i + 1, x + i + 1, n - 1 - i);
      x[i] = unit ? v : LA_NAME(div)(v, a[i * lda + i]);
    }
  }
}

/* The same with A's columns contiguous (column stride lda), as PyTorch's
 * LU factors are: each solved x[j] is subtracted along column j. */
static inline void LA_NAME(trsv_cols)(const void *a_, int64_t lda, int64_t n, void *x_, int upper,
                                      int unit) {
  const LA_T *a = a_;
  LA_T *x = x_;
  if (!upper) {
    for (int64_t j = 0; j < n; j++) {
      if (!unit) x[j] = LA_NAME(div)(x[j], a[j * lda + j]);
      LA_NAME(axpy_neg)(x + j + 1, x[j], a + j * lda + j + 1, n - 1 - j);
    }
  } else {
    for (int64_t j = n - 1; j >= 0; j--) {
      if (!unit) x[j] = LA_NAME(div)(x[j], a[j * lda + j]);
      LA_NAME(axpy_neg)(x, x[j], a + j * lda, j);
    }
  }
}
