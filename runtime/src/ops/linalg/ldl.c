/* LINALG_LDL_FACTOR and LINALG_LDL_SOLVE (layouts in neuronrt/ops/linalg.h):
 * the symmetric indefinite factorisation A = L D L^T by Bunch and
 * Kaufman's diagonal pivoting (1x1 and 2x2 blocks, alpha = (1 + sqrt 17) / 8),
 * with the lower triangle and pivots in the convention of LAPACK's sytrf
 * (uplo = 'L'), and the solve with it as sytrs does.
 *
 * Factor, column k of what is left (0-based below; pivots 1-based):
 *   colmax = max_{i>k} |a_ik| at the first such imax. If a_kk and the
 *   column are all zero (or a_kk is NaN), info = k + 1 (the first such k)
 *   and the step is 1x1 with no interchange. Else a 1x1 pivot in place if
 *   |a_kk| >= alpha colmax, or |a_kk| rowmax >= alpha colmax^2 (rowmax:
 *   the largest off-diagonal |a| in row/column imax of what is left); a
 *   1x1 pivot a_{imax,imax} (rows and columns k and imax interchanged) if
 *   |a_{imax,imax}| >= alpha rowmax; else a 2x2 pivot on rows k, k+1 with
 *   k+1 and imax interchanged. The interchange touches only the trailing
 *   matrix (the columns of L already computed keep their rows), as LAPACK
 *   stores it; pivots[k] = imax + 1 (1x1) or pivots[k] = pivots[k+1] =
 *   -(imax + 1) (2x2). LD gets L below the diagonal (unit diagonal not
 *   stored; zero at (k+1, k) of a 2x2 block, where D's off-diagonal entry
 *   is), D's diagonal on it, and zeros above.
 * From n = LDL_BLOCKED_MIN on, the same pivots come from a blocked form (as
 * LAPACK's lasyf): panels of up to LDL_BLOCK columns are factored
 * left-looking, each new column (and, when needed, column imax for rowmax)
 * brought up to date from the panel's L and W = L D columns before its
 * pivot is chosen; the panel's interchanges are applied to its own earlier
 * rows meanwhile, the trailing lower triangle gets A22 -= L21 W21^T as
 * GEMMs by block rows, and then the interchanges are undone in the panel's
 * earlier columns to leave sytf2's storage.
 * Solve: X <- P and L^-1 forward, D^-1 per block, L^-T and P back.
 * Arithmetic in double for both dtypes; one matrix per thread. Complex
 * matrices (ldl_complex.h): the same, unblocked, in complex128, symmetric
 * (sytrf) or, with the hermitian scalar, Hermitian (hetrf). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"
#include "ops/engine/thread_pool.h"
#include "ops/linalg/batch.h"
#include "ops/linalg/ldl_complex.h"
#include "ops/linalg/qr.h"

enum { LDL_BLOCK = 32, LDL_BLOCKED_MIN = 96, LDL_ROW_BLOCK = 128 };

typedef struct ldl_job {
  const nrt_tensor_view *ld, *piv, *info, *x;
  int64_t n, k;
  int herm; /* complex: L D L^H (hetrf) rather than L D L^T (sytrf) */
  la_failure failure;
} ldl_job;

/* Complex elements of either complex dtype, as complex128. */
static inline ldl_c ldc_at(const char *p, nrt_dtype d, int64_t off) {
  return d == NRT_COMPLEX128 ? ((const ldl_c *)p)[off] : (ldl_c)((const float _Complex *)p)[off];
}
static inline void stc_at(char *p, nrt_dtype d, int64_t off, ldl_c v) {
  if (d == NRT_COMPLEX128)
    ((ldl_c *)p)[off] = v;
  else
    ((float _Complex *)p)[off] = (float _Complex)v;
}
static inline int is_cplx(nrt_dtype d) { return d == NRT_COMPLEX64 || d == NRT_COMPLEX128; }

static inline double ld_at(const char *p, nrt_dtype d, int64_t off) {
  return d == NRT_FLOAT64 ? ((const double *)p)[off] : (double)((const float *)p)[off];
}
static inline void st_at(char *p, nrt_dtype d, int64_t off, double v) {
  if (d == NRT_FLOAT64)
    ((double *)p)[off] = v;
  else
    ((float *)p)[off] = (float)v;
}
static inline void swap_d(double *x, double *y) {
  const double t = *x;
  *x = *y, *y = t;
}

/* Bunch-Kaufman on the lower triangle of a (n x n, row-major; a[i * n + j]
 * for i >= j is read and written). Returns info. */
static int32_t bunch_kaufman(double *a, int64_t n, int32_t *piv) {
  const double alpha = (1.0 + sqrt(17.0)) / 8.0;
#define A(i, j) a[(i) * n + (j)]
  int32_t info = 0;
  int64_t k = 0;
  while (k < n) {
    int64_t kstep = 1, kp = k, imax = k;
    const double absakk = fabs(A(k, k));
    double colmax = 0;
    for (int64_t i = k + 1; i < n; i++)
      if (fabs(A(i, k)) > colmax) colmax = fabs(A(i, k)), imax = i;
    if ((absakk == 0 && colmax == 0) || isnan(absakk)) {
      if (info == 0) info = (int32_t)(k + 1);
    } else {
      if (!(absakk >= alpha * colmax) && imax > k) {
        double rowmax = 0;
        for (int64_t j = k; j < imax; j++) rowmax = fmax(rowmax, fabs(A(imax, j)));
        for (int64_t j = imax + 1; j < n; j++) rowmax = fmax(rowmax, fabs(A(j, imax)));
        if (absakk >= alpha * colmax * (colmax / rowmax)) {
          kp = k;
        } else if (fabs(A(imax, imax)) >= alpha * rowmax) {
          kp = imax;
        } else {
          kp = imax;
          kstep = 2;
        }
      }
      const int64_t kk = k + kstep - 1;
      if (kp != kk) { /* symmetric interchange of kk and kp (> kk) in the trailing matrix */
        for (int64_t i = kp + 1; i < n; i++) swap_d(&A(i, kk), &A(i, kp));
        for (int64_t j = kk + 1; j < kp; j++) swap_d(&A(j, kk), &A(kp, j));
        swap_d(&A(kk, kk), &A(kp, kp));
        if (kstep == 2) swap_d(&A(k + 1, k), &A(kp, k));
      }
      if (kstep == 1) {
        const double r = 1.0 / A(k, k);
        for (int64_t j = k + 1; j < n; j++) {
          const double xj = A(j, k) * r;
          if (xj == 0) continue;
          for (int64_t i = j; i < n; i++) A(i, j) -= A(i, k) * xj;
        }
        for (int64_t i = k + 1; i < n; i++) A(i, k) *= r;
      } else if (k + 2 < n) {
        double d21 = A(k + 1, k);
        const double d11 = A(k + 1, k + 1) / d21, d22 = A(k, k) / d21;
        const double t = 1.0 / (d11 * d22 - 1.0);
        d21 = t / d21;
        for (int64_t j = k + 2; j < n; j++) {
          const double wk = d21 * (d11 * A(j, k) - A(j, k + 1));
          const double wkp1 = d21 * (d22 * A(j, k + 1) - A(j, k));
          for (int64_t i = j; i < n; i++) A(i, j) -= A(i, k) * wk + A(i, k + 1) * wkp1;
          A(j, k) = wk;
          A(j, k + 1) = wkp1;
        }
      }
    }
    if (kstep == 1) {
      piv[k] = (int32_t)(kp + 1);
    } else {
      piv[k] = piv[k + 1] = (int32_t)(-(kp + 1));
    }
    k += kstep;
  }
#undef A
  return info;
}

/* The blocked form of bunch_kaufman (same contract, same pivots up to
 * rounding); wt is scratch for (LDL_BLOCK + 1) x n doubles. The upper
 * triangle of a is scratch too. */
static int32_t bunch_kaufman_blocked(double *a, int64_t n, int32_t *piv, double *wt) {
  const double alpha = (1.0 + sqrt(17.0)) / 8.0;
  const int64_t nb = LDL_BLOCK;
#define A(i, j) a[(i) * n + (j)]
#define W(p, i) wt[(p) * n + (i)] /* W(i, p) of the panel, stored transposed */
  int32_t info = 0;
  for (int64_t k0 = 0; k0 < n;) {
    int64_t k = k0;
    while (k < n && k - k0 < nb) {
      const int64_t j = k - k0;
      /* W(k:n, j) = A(k:n, k) - L(k:n, panel) W(k, panel)^T */
      for (int64_t i = k; i < n; i++) {
        double s = A(i, k);
        const double *li = a + i * n + k0;
        for (int64_t p = 0; p < j; p++) s -= li[p] * W(p, k);
        W(j, i) = s;
      }
      int64_t kstep = 1, kp = k, imax = k;
      const double absakk = fabs(W(j, k));
      double colmax = 0;
      for (int64_t i = k + 1; i < n; i++)
        if (fabs(W(j, i)) > colmax) colmax = fabs(W(j, i)), imax = i;
      const int zero = (absakk == 0 && colmax == 0) || isnan(absakk);
      if (zero) {
        if (info == 0) info = (int32_t)(k + 1);
      } else if (!(absakk >= alpha * colmax) && imax > k) {
        /* W(k:n, j+1) = column imax of the updated trailing matrix */
        for (int64_t i = k; i < n; i++) {
          double s = i < imax ? A(imax, i) : A(i, imax);
          const double *li = a + i * n + k0;
          for (int64_t p = 0; p < j; p++) s -= li[p] * W(p, imax);
          W(j + 1, i) = s;
        }
        double rowmax = 0;
        for (int64_t i = k; i < n; i++)
          if (i != imax) rowmax = fmax(rowmax, fabs(W(j + 1, i)));
        if (absakk >= alpha * colmax * (colmax / rowmax)) {
          kp = k;
        } else if (fabs(W(j + 1, imax)) >= alpha * rowmax) {
          kp = imax;
          memcpy(&W(j, k), &W(j + 1, k), (size_t)(n - k) * sizeof(double));
        } else {
          kp = imax;
          kstep = 2;
        }
      }
      const int64_t kk = k + kstep - 1;
      if (kp != kk) {
        /* The trailing matrix (not yet updated by the panel): column kp takes
         * column kk's entries; column kk itself comes from W. */
        A(kp, kp) = A(kk, kk);
        for (int64_t c = kk + 1; c < kp; c++) A(kp, c) = A(c, kk);
        for (int64_t i = kp + 1; i < n; i++) A(i, kp) = A(i, kk);
        /* Rows kk and kp of the panel's L and W so far. */
        for (int64_t c = k0; c < kk; c++) swap_d(&A(kk, c), &A(kp, c));
        for (int64_t p = 0; p < j + kstep; p++) swap_d(&W(p, kk), &W(p, kp));
      }
      if (kstep == 1) {
        for (int64_t i = k; i < n; i++) A(i, k) = W(j, i);
        if (!zero) {
          const double r = 1.0 / A(k, k);
          for (int64_t i = k + 1; i < n; i++) A(i, k) *= r;
        }
        piv[k] = (int32_t)(kp + 1);
      } else {
        double d21 = W(j, k + 1);
        const double d11 = W(j + 1, k + 1) / d21, d22 = W(j, k) / d21;
        const double t = 1.0 / (d11 * d22 - 1.0);
        d21 = t / d21;
        for (int64_t i = k + 2; i < n; i++) {
          A(i, k) = d21 * (d11 * W(j, i) - W(j + 1, i));
          A(i, k + 1) = d21 * (d22 * W(j + 1, i) - W(j, i));
        }
        A(k, k) = W(j, k), A(k + 1, k) = W(j, k + 1), A(k + 1, k + 1) = W(j + 1, k + 1);
        piv[k] = piv[k + 1] = (int32_t)(-(kp + 1));
      }
      k += kstep;
    }
    const int64_t kb = k - k0;
    /* Trailing lower triangle: A(i, c) -= L(i, panel) W(c, panel)^T for
     * k <= c <= i, by block rows (each GEMM also writes the upper part of
     * its diagonal block, which is scratch). */
    for (int64_t i0 = k; i0 < n; i0 += LDL_ROW_BLOCK) {
      const int64_t i1 = n - i0 < LDL_ROW_BLOCK ? n : i0 + LDL_ROW_BLOCK;
      la_gemm_f64(i1 - i0, i1 - k, kb, -1, a + i0 * n + k0, n, 1, wt + k, n, 1, a + i0 * n + k, n);
    }
    /* sytf2's storage: undo, last first, each interchange in the panel
     * columns before its block. */
    for (int64_t q = k - 1; q >= k0;) {
      const int64_t jj = q;
      int64_t jp = piv[q], start = q;
      if (jp < 0) jp = -jp, start = q - 1;
      jp -= 1;
      if (jp != jj)
        for (int64_t c = k0; c < start; c++) swap_d(&A(jj, c), &A(jp, c));
      q = start - 1;
    }
    k0 = k;
  }
#undef W
#undef A
  return info;
}

static void factor_range_c(int64_t begin, int64_t end, ldl_job *job) {
  const int64_t n = job->n;
  ldl_c *a = malloc((size_t)(n * n) * sizeof(ldl_c) + (size_t)n * sizeof(int32_t) + 16);
  if (!a) {
    la_fail_at(&job->failure, NRT_ERROR_OUT_OF_MEMORY, begin, (int64_t)((size_t)(n * n) * sizeof(ldl_c)));
    return;
  }
  int32_t *pw = (int32_t *)(a + n * n);
  const nrt_tensor_view *v = job->ld, *pv = job->piv;
  const int64_t rs = v->strides[v->ndim - 2], cs = v->strides[v->ndim - 1], ps = pv->strides[pv->ndim - 1];
  for (int64_t b = begin; b < end; b++) {
    char *p = la_batch_at(v, 2, b);
    int32_t *pp = (int32_t *)la_batch_at(pv, 1, b);
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++) a[i * n + j] = j <= i ? ldc_at(p, v->dtype, i * rs + j * cs) : 0;
    const int32_t info = ldl_factor_c(a, n, pw, job->herm);
    for (int64_t i = 0; i < n; i++) {
      pp[i * ps] = pw[i];
      for (int64_t j = 0; j < n; j++) stc_at(p, v->dtype, i * rs + j * cs, j <= i ? a[i * n + j] : 0);
    }
    if (job->info) ((int32_t *)la_batch_at(job->info, 0, b))[0] = info;
  }
  free(a);
}

static void factor_range(int64_t begin, int64_t end, void *ctx) {
  ldl_job *job = ctx;
  if (is_cplx(job->ld->dtype)) {
    factor_range_c(begin, end, job);
    return;
  }
  const int64_t n = job->n;
  const int blocked = n >= LDL_BLOCKED_MIN;
  const int64_t elems = n * n + (blocked ? (LDL_BLOCK + 1) * n : 0);
  double *a = malloc((size_t)elems * sizeof(double) + 8);
  if (!a) {
    la_fail_at(&job->failure, NRT_ERROR_OUT_OF_MEMORY, begin, (int64_t)((size_t)elems * sizeof(double)));
    return;
  }
  const nrt_tensor_view *v = job->ld, *pv = job->piv;
  const int64_t rs = v->strides[v->ndim - 2], cs = v->strides[v->ndim - 1], ps = pv->strides[pv->ndim - 1];
  for (int64_t b = begin; b < end; b++) {
    char *p = la_batch_at(v, 2, b);
    int32_t *pp = (int32_t *)la_batch_at(pv, 1, b);
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++) a[i * n + j] = j <= i ? ld_at(p, v->dtype, i * rs + j * cs) : 0;
    int32_t piv[64], *pw = n <= 64 ? piv : malloc((size_t)n * sizeof(int32_t));
    if (!pw) {
      la_fail_at(&job->failure, NRT_ERROR_OUT_OF_MEMORY, b, (int64_t)((size_t)n * sizeof(int32_t)));
      break;
    }
    const int32_t info = blocked ? bunch_kaufman_blocked(a, n, pw, a + n * n) : bunch_kaufman(a, n, pw);
    for (int64_t i = 0; i < n; i++) {
      pp[i * ps] = pw[i];
      for (int64_t j = 0; j < n; j++) st_at(p, v->dtype, i * rs + j * cs, j <= i ? a[i * n + j] : 0);
    }
    if (pw != piv) free(pw);
    if (job->info) ((int32_t *)la_batch_at(job->info, 0, b))[0] = info;
  }
  free(a);
}

/* X (n x k, row-major) <- A^-1 X for A = P L D L^T P^T given as
 * bunch_kaufman leaves it (l: its lower triangle, column-major, so that
 * both sweeps read L's columns contiguously). Pivots were checked. */
static void ldl_solve_one(const double *l, const int32_t *piv, int64_t n, double *x, int64_t k) {
#define L(i, j) l[(j) * n + (i)]
#define SWAP_ROWS(r, s)                                                          \
  do {                                                                            \
    if ((r) != (s))                                                               \
      for (int64_t c = 0; c < k; c++) swap_d(&x[(r) * k + c], &x[(s) * k + c]);   \
  } while (0)
  for (int64_t i = 0; i < n;) { /* forward: D Y = L^-1 P^T B, and D^-1 */
    if (piv[i] > 0) {
      SWAP_ROWS(i, (int64_t)piv[i] - 1);
      for (int64_t r = i + 1; r < n; r++) {
        const double f = L(r, i);
        if (f != 0)
          for (int64_t c = 0; c < k; c++) x[r * k + c] -= f * x[i * k + c];
      }
      const double d = L(i, i);
      for (int64_t c = 0; c < k; c++) x[i * k + c] /= d;
      i += 1;
    } else {
      SWAP_ROWS(i + 1, (int64_t)(-piv[i]) - 1);
      for (int64_t r = i + 2; r < n; r++) {
        const double f0 = L(r, i), f1 = L(r, i + 1);
        for (int64_t c = 0; c < k; c++) x[r * k + c] -= f0 * x[i * k + c] + f1 * x[(i + 1) * k + c];
      }
      const double d21 = L(i + 1, i), d11 = L(i, i) / d21, d22 = L(i + 1, i + 1) / d21;
      const double denom = d11 * d22 - 1.0;
      for (int64_t c = 0; c < k; c++) {
        const double b1 = x[i * k + c] / d21, b2 = x[(i + 1) * k + c] / d21;
        x[i * k + c] = (d22 * b1 - b2) / denom;
        x[(i + 1) * k + c] = (d11 * b2 - b1) / denom;
      }
      i += 2;
    }
  }
  for (int64_t i = n - 1; i >= 0;) { /* back: X = P L^-T Y */
    if (piv[i] > 0) {
      for (int64_t r = i + 1; r < n; r++) {
        const double f = L(r, i);
        if (f != 0)
          for (int64_t c = 0; c < k; c++) x[i * k + c] -= f * x[r * k + c];
      }
      SWAP_ROWS(i, (int64_t)piv[i] - 1);
      i -= 1;
    } else { /* the 2x2 block's rows i-1, i */
      for (int64_t r = i + 1; r < n; r++) {
        const double f0 = L(r, i - 1), f1 = L(r, i);
        for (int64_t c = 0; c < k; c++) {
          x[(i - 1) * k + c] -= f0 * x[r * k + c];
          x[i * k + c] -= f1 * x[r * k + c];
        }
      }
      SWAP_ROWS(i, (int64_t)(-piv[i]) - 1);
      i -= 2;
    }
  }
#undef SWAP_ROWS
#undef L
}

/* Pivots as bunch_kaufman writes them: 1x1 in [1, n]; 2x2 pairs, equal,
 * negative, in [-n, -1], at most one row past their block's second row... */
static int pivots_valid(const int32_t *piv, int64_t n) {
  for (int64_t i = 0; i < n;) {
    const int64_t p = piv[i];
    if (p > 0) {
      if (p < i + 1 || p > n) return 0;
      i += 1;
    } else {
      if (i + 1 >= n || piv[i + 1] != p || -p < i + 2 || -p > n) return 0;
      i += 2;
    }
  }
  return 1;
}

static void solve_range_c(int64_t begin, int64_t end, ldl_job *job) {
  const int64_t n = job->n, k = job->k;
  ldl_c *l = malloc((size_t)(n * n + n * k) * sizeof(ldl_c) + (size_t)n * sizeof(int32_t) + 16);
  if (!l) {
    la_fail_at(&job->failure, NRT_ERROR_OUT_OF_MEMORY, begin, (int64_t)((size_t)(n * n + n * k) * sizeof(ldl_c)));
    return;
  }
  ldl_c *x = l + n * n;
  int32_t *piv = (int32_t *)(x + n * k);
  const nrt_tensor_view *v = job->ld, *pv = job->piv, *xv = job->x;
  const int64_t rs = v->strides[v->ndim - 2], cs = v->strides[v->ndim - 1], ps = pv->strides[pv->ndim - 1];
  const int64_t xrs = xv->strides[xv->ndim - 2], xcs = xv->strides[xv->ndim - 1];
  for (int64_t b = begin; b < end; b++) {
    const char *p = la_batch_at(v, 2, b);
    const int32_t *pp = (const int32_t *)la_batch_at(pv, 1, b);
    char *xp = la_batch_at(xv, 2, b);
    for (int64_t i = 0; i < n; i++) piv[i] = pp[i * ps];
    if (!pivots_valid(piv, n)) {
      la_fail_at(&job->failure, NRT_ERROR_INVALID_ARGUMENT, b, 0);
      continue;
    }
    for (int64_t j = 0; j < n; j++)
      for (int64_t i = j; i < n; i++) l[j * n + i] = ldc_at(p, v->dtype, i * rs + j * cs);
    for (int64_t i = 0; i < n; i++)
      for (int64_t c = 0; c < k; c++) x[i * k + c] = ldc_at(xp, xv->dtype, i * xrs + c * xcs);
    ldl_solve_c(l, piv, n, x, k, job->herm);
    for (int64_t i = 0; i < n; i++)
      for (int64_t c = 0; c < k; c++) stc_at(xp, xv->dtype, i * xrs + c * xcs, x[i * k + c]);
  }
  free(l);
}

static void solve_range(int64_t begin, int64_t end, void *ctx) {
  ldl_job *job = ctx;
  if (is_cplx(job->ld->dtype)) {
    solve_range_c(begin, end, job);
    return;
  }
  const int64_t n = job->n, k = job->k;
  double *l = malloc((size_t)(n * n + n * k) * sizeof(double) + (size_t)n * sizeof(int32_t) + 8);
  if (!l) {
    la_fail_at(&job->failure, NRT_ERROR_OUT_OF_MEMORY, begin, (int64_t)((size_t)(n * n + n * k) * sizeof(double)));
    return;
  }
  double *x = l + n * n;
  int32_t *piv = (int32_t *)(x + n * k);
  const nrt_tensor_view *v = job->ld, *pv = job->piv, *xv = job->x;
  const int64_t rs = v->strides[v->ndim - 2], cs = v->strides[v->ndim - 1], ps = pv->strides[pv->ndim - 1];
  const int64_t xrs = xv->strides[xv->ndim - 2], xcs = xv->strides[xv->ndim - 1];
  for (int64_t b = begin; b < end; b++) {
    const char *p = la_batch_at(v, 2, b);
    const int32_t *pp = (const int32_t *)la_batch_at(pv, 1, b);
    char *xp = la_batch_at(xv, 2, b);
    for (int64_t i = 0; i < n; i++) piv[i] = pp[i * ps];
    if (!pivots_valid(piv, n)) {
      la_fail_at(&job->failure, NRT_ERROR_INVALID_ARGUMENT, b, 0);
      continue;
    }
    for (int64_t j = 0; j < n; j++)
      for (int64_t i = j; i < n; i++) l[j * n + i] = ld_at(p, v->dtype, i * rs + j * cs);
    for (int64_t i = 0; i < n; i++)
      for (int64_t c = 0; c < k; c++) x[i * k + c] = ld_at(xp, xv->dtype, i * xrs + c * xcs);
    ldl_solve_one(l, piv, n, x, k);
    for (int64_t i = 0; i < n; i++)
      for (int64_t c = 0; c < k; c++) st_at(xp, xv->dtype, i * xrs + c * xcs, x[i * k + c]);
  }
  free(l);
}

static const nrt_tensor_view *present(const nrt_tensor_view *v) {
  int64_t numel = 1;
  for (int d = 0; d < v->ndim; d++) numel *= v->shape[d];
  return v->data && numel > 0 ? v : NULL;
}

static nrt_status check_ld(const char *name, const nrt_tensor_view *ld, const nrt_tensor_view *piv) {
  nrt_status e;
  if ((e = la_check_dtype(name, "LD", ld, LA_OR_COMPLEX))) return e;
  if (ld->ndim < 2 || ld->shape[ld->ndim - 1] != ld->shape[ld->ndim - 2])
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: LD must be a batch of square matrices", name);
  if ((e = la_check_dtype(name, "pivots", piv, 0)) || (e = la_check_batch(name, "pivots", piv, 1, ld, 2))) return e;
  if (piv->shape[piv->ndim - 1] != ld->shape[ld->ndim - 1])
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: pivots must hold n values", name);
  return NRT_SUCCESS;
}

nrt_status rt_kernel_linalg_ldl_factor(const nrt_op *op) {
  static const char *name = "linalg_ldl_factor";
  if (op->num_operands != 3 || op->num_outputs != 3)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expected LD, pivots and info", name);
  const nrt_tensor_view *ld = &op->operands[0], *piv = &op->operands[1];
  const nrt_tensor_view *info = present(&op->operands[2]);
  nrt_status e;
  if ((e = check_ld(name, ld, piv))) return e;
  if (info && (info->dtype != NRT_INT32 || (e = la_check_batch(name, "info", info, 0, ld, 2))))
    return e ? e : rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: info must be int32", name);
  const int64_t batch = la_batch_count(ld, 2), n = ld->shape[ld->ndim - 1];
  if (batch == 0) return NRT_SUCCESS;
  if (n == 0) {
    for (int64_t b = 0; info && b < batch; b++) ((int32_t *)la_batch_at(info, 0, b))[0] = 0;
    return NRT_SUCCESS;
  }
  const int herm = op->num_scalars >= 1 && op->scalars[0].i != 0;
  ldl_job job = {ld, piv, info, NULL, n, 0, herm, {NRT_SUCCESS, 0, 0}};
  rt_parallel_for(batch, la_grain((double)n * (double)n * (double)n / 3.0), factor_range, &job);
  if (job.failure.status != NRT_SUCCESS)
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for %lld bytes of scratch", name,
                   (long long)job.failure.value);
  return NRT_SUCCESS;
}

nrt_status rt_kernel_linalg_ldl_solve(const nrt_op *op) {
  static const char *name = "linalg_ldl_solve";
  if (op->num_operands != 3 || op->num_outputs != 1)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expected X, LD and pivots", name);
  const nrt_tensor_view *x = &op->operands[0], *ld = &op->operands[1], *piv = &op->operands[2];
  nrt_status e;
  if ((e = check_ld(name, ld, piv)) || (e = la_check_batch(name, "X", x, 2, ld, 2))) return e;
  const int64_t n = ld->shape[ld->ndim - 1], k = x->shape[x->ndim - 1];
  if (x->dtype != ld->dtype || x->shape[x->ndim - 2] != n)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: X must be %s with n = %lld rows", name,
                   nrt_dtype_name(ld->dtype), (long long)n);
  const int64_t batch = la_batch_count(ld, 2);
  if (batch == 0 || n == 0 || k == 0) return NRT_SUCCESS;
  const int herm = op->num_scalars >= 1 && op->scalars[0].i != 0;
  ldl_job job = {ld, piv, NULL, x, n, k, herm, {NRT_SUCCESS, 0, 0}};
  rt_parallel_for(batch, la_grain(2.0 * (double)n * (double)n * (double)k), solve_range, &job);
  if (job.failure.status == NRT_ERROR_INVALID_ARGUMENT)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: pivots of batch element %lld are not a Bunch-Kaufman factorisation's",
                   name, (long long)job.failure.batch);
  if (job.failure.status != NRT_SUCCESS)
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for %lld bytes of scratch", name,
                   (long long)job.failure.value);
  return NRT_SUCCESS;
}
