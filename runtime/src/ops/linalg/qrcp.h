/* QR with column pivoting (LAPACK's geqp3 contract) and the incremental
 * condition estimate that gelsy takes its rank from, on row-major double
 * scratch.
 *
 * la_geqp3: A P = Q R. Columns are chosen greedily, the remaining one of
 * largest partial norm first (the first of equal norms), in panels of up to
 * nb columns: inside a panel the reflectors are not applied to the trailing
 * matrix; each new pivot column and each new row of R is brought up to date
 * from F = A^T V T-like products accumulated for the panel (Quintana-Orti,
 * Sun and Bischof's scheme, as LAPACK's laqps documents it), and the rest of
 * the trailing matrix gets the panel as one GEMM, A22 -= V2 F2^T. The partial
 * column norms are downdated from each new row of R; when cancellation makes
 * a downdate untrustworthy (the norm has lost more than half its digits) the
 * panel ends early and those norms are recomputed after the GEMM. On exit
 * tau[0..min(m, n)) and perm[j], the original index of column j. */
#ifndef NEURONRT_OPS_LINALG_QRCP_H
#define NEURONRT_OPS_LINALG_QRCP_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#include "ops/engine/elementwise.h"
#include "ops/linalg/dense.h"
#include "ops/linalg/qr.h"

/* out[(c - c0) * ldo] = t * (column c of at, rows rk..rk+len) . v for c in
 * [c0, c1): the Level-2 half of the pivoted QR, one dot product per column
 * with eight running sums in a fixed order, compiled per ISA level. */
RT_SIMD_VOID(la_qrcp_dots, (const double *at, int64_t m, int64_t rk, int64_t c0, int64_t c1, const double *v,
                            int64_t len, double t, double *out, int64_t ldo),
             (at, m, rk, c0, c1, v, len, t, out, ldo)) {
  for (int64_t c = c0; c < c1; c++) {
    const double *x = at + c * m + rk;
    double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= len; i += 8)
      for (int q = 0; q < 8; q++) acc[q] += x[i + q] * v[i + q];
    double s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (; i < len; i++) s += x[i] * v[i];
    out[(c - c0) * ldo] = t * s;
  }
}

/* Scratch (doubles) for la_geqp3 on an m x n matrix with panel nb. */
static inline int64_t la_geqp3_scratch(int64_t m, int64_t n, int64_t nb) {
  (void)m;
  return 2 * n + nb * (n > 1 ? n : 1) + 2 * nb + n;
}

/* at holds A^T (n x m, row-major: A column-major, each column of A one
 * contiguous row, as LAPACK stores it); on exit R^T on and below at's
 * diagonal (R[i][j] = at[j * m + i] for i <= j) and the reflectors' v above
 * it (v_j[i] = at[j * m + i] for i > j). */
static inline void la_geqp3(double *at, int64_t m, int64_t n, double *tau, int64_t *perm, int64_t nb,
                            double *scratch) {
  const int64_t kmax = m < n ? m : n;
  double *vn1 = scratch, *vn2 = vn1 + n, *f = vn2 + n, *aux = f + nb * (n > 1 ? n : 1);
  double *vrow = aux + nb;                  /* V[rk, 0:j] */
  int64_t *redo = (int64_t *)(vrow + nb); /* n entries: columns whose norm is recomputed */
  const double tol3z = sqrt(2.220446049250313e-16);
#define COL(c) (at + (c) * m) /* column c of A */
  for (int64_t j = 0; j < n; j++) {
    perm[j] = j;
    vn1[j] = vn2[j] = la_norm2_f64(COL(j), m, 1);
  }
  for (int64_t k = 0; k < kmax;) {
    /* f[(c - k) * nb + p] = F(c, p) of the panel for columns c >= k */
    const int64_t nbk = kmax - k < nb ? kmax - k : nb;
    int64_t kb = 0, nredo = 0;
#define F(c, p) f[((c) - k) * nb + (p)]
    for (int64_t j = 0; j < nbk && nredo == 0; j++) {
      const int64_t rk = k + j;
      /* Pivot: the first column of largest partial norm. */
      int64_t pvt = rk;
      for (int64_t c = rk + 1; c < n; c++)
        if (vn1[c] > vn1[pvt]) pvt = c;
      if (pvt != rk) {
        double *x = COL(pvt), *y = COL(rk);
        for (int64_t i = 0; i < m; i++) {
          const double t = x[i];
          x[i] = y[i], y[i] = t;
        }
        for (int64_t p = 0; p < j; p++) {
          const double t = F(pvt, p);
          F(pvt, p) = F(rk, p), F(rk, p) = t;
        }
        const int64_t tp = perm[pvt];
        perm[pvt] = perm[rk], perm[rk] = tp;
        vn1[pvt] = vn1[rk], vn2[pvt] = vn2[rk];
      }
      double *v = COL(rk) + rk; /* rows rk..m-1 of column rk */
      const int64_t len = m - rk;
      /* Column rk gets the panel's earlier reflectors: a[rk:, rk] -= V[rk:, 0:j] F(rk, 0:j)^T. */
      for (int64_t p = 0; p < j; p++) la_axpy_neg_f64(v, F(rk, p), COL(k + p) + rk, len);
      tau[rk] = len > 1 ? la_reflector_f64(v, v + 1, len - 1, 1) : 0;
      const double diag = v[0];
      v[0] = 1;
      const double t = tau[rk];
      /* F(rk+1:, j) = tau A[rk:, rk+1:]^T v - tau F(rk+1:, 0:j) V[rk:, 0:j]^T v */
      for (int64_t p = 0; p < j; p++) aux[p] = -t * la_dot_f64(COL(k + p) + rk, v, len);
      if (rk + 1 < n) {
        if (t != 0)
          la_qrcp_dots(at, m, rk, rk + 1, n, v, len, t, &F(rk + 1, j), nb);
        else
          for (int64_t c = rk + 1; c < n; c++) F(c, j) = 0;
      }
      if (j > 0)
        for (int64_t c = rk + 1; c < n; c++) {
          const double *fc = &F(c, 0);
          double s = F(c, j);
          for (int64_t p = 0; p < j; p++) s += fc[p] * aux[p];
          F(c, j) = s;
        }
      /* Row rk of R: a[rk, rk+1:] -= V[rk, 0:j+1] F(rk+1:, 0:j+1)^T. */
      for (int64_t p = 0; p < j; p++) vrow[p] = COL(k + p)[rk];
      for (int64_t c = rk + 1; c < n; c++) {
        const double *fc = &F(c, 0);
        double s = fc[j]; /* V[rk, j] = 1 */
        for (int64_t p = 0; p < j; p++) s += vrow[p] * fc[p];
        COL(c)[rk] -= s;
      }
      /* Downdate the partial norms from the new row of R. */
      if (rk < m - 1)
        for (int64_t c = rk + 1; c < n; c++) {
          if (vn1[c] == 0) continue;
          double t1 = fabs(COL(c)[rk]) / vn1[c];
          t1 = 1 - t1 * t1;
          if (t1 < 0) t1 = 0;
          const double q = vn1[c] / vn2[c];
          if (t1 * q * q <= tol3z)
            redo[nredo++] = c;
          else
            vn1[c] *= sqrt(t1);
        }
      v[0] = diag;
      kb = j + 1;
    }
    /* The rest of the trailing matrix, transposed: A[k+kb:, k+kb:]^T -= F(k+kb:, 0:kb) V[k+kb:, 0:kb]^T. */
    const int64_t r0 = k + kb;
    if (r0 < m && r0 < n)
      la_gemm_f64(n - r0, m - r0, kb, -1, &F(r0, 0), nb, 1, COL(k) + r0, m, 1, COL(r0) + r0, m);
#undef F
    for (int64_t q = 0; q < nredo; q++) {
      const int64_t c = redo[q];
      vn1[c] = vn2[c] = r0 < m ? la_norm2_f64(COL(c) + r0, m - r0, 1) : 0;
    }
    k = r0;
  }
#undef COL
}

/* Largest (want_max) or smallest singular value estimate of [R w; 0 gamma]
 * from the estimate sest of R's with its singular vector estimate x
 * (||x|| = 1, ||x^T R|| = sest), and the new vector's weights: y = [s x; c]
 * maximises or minimises ||y^T [R w; 0 gamma]||^2 = [s c] M [s c]^T with
 * M = [[sest^2 + alpha^2, alpha gamma], [alpha gamma, gamma^2]],
 * alpha = x^T w, over s^2 + c^2 = 1: M's extreme eigenpair. */
static inline double la_ice_step(int want_max, double sest, double alpha, double gamma, double *s, double *c) {
  const double scale = fmax(fmax(fabs(sest), fabs(alpha)), fabs(gamma));
  if (scale == 0) {
    *s = want_max ? 0 : 1, *c = want_max ? 1 : 0;
    return 0;
  }
  const double se = sest / scale, al = alpha / scale, ga = gamma / scale;
  const double p = se * se + al * al, q = al * ga, r = ga * ga; /* M / scale^2 = [[p, q], [q, r]] */
  const double half = 0.5 * (p - r), disc = hypot(half, q);
  const double mid = 0.5 * (p + r);
  /* Extreme eigenvalues without cancellation: the larger from mid + disc,
   * the smaller from det / larger (det = se^2 ga^2). */
  const double big = mid + disc, det = se * se * ga * ga;
  const double lam = want_max ? big : (big > 0 ? det / big : 0);
  /* Eigenvector of [[p, q], [q, r]] for lam: (q, lam - p) or (lam - r, q), the better scaled. */
  double vs, vc;
  const double a1 = fabs(q) + fabs(lam - p), a2 = fabs(lam - r) + fabs(q);
  if (a1 >= a2)
    vs = q, vc = lam - p;
  else
    vs = lam - r, vc = q;
  const double nv = hypot(vs, vc);
  if (nv == 0) {
    /* q = 0 and lam equals both diagonal entries' choice: pick the axis. */
    const int first = want_max ? p >= r : p < r;
    *s = first ? 1 : 0, *c = first ? 0 : 1;
  } else {
    *s = vs / nv, *c = vc / nv;
  }
  return scale * sqrt(lam > 0 ? lam : 0);
}

/* gelsy's effective rank of the n x n leading part of R (R[i][j] at
 * r[i * rs + j * cs]): the largest r whose leading r x r
 * triangle has estimated condition smax / smin < 1 / rcond, grown one
 * column at a time; 0 when R[0][0] is 0. work holds 2 n doubles. */
static inline int64_t la_ice_rank(const double *r, int64_t rs, int64_t cs, int64_t n, double rcond, double *work) {
  if (n == 0) return 0;
  double *xmin = work, *xmax = work + n;
  double smax = fabs(r[0]), smin = smax;
  if (smax == 0) return 0;
  xmin[0] = xmax[0] = 1;
  int64_t rank = 1;
  while (rank < n) {
    const int64_t i = rank;
    double amin = 0, amax = 0;
    for (int64_t p = 0; p < i; p++) {
      amin += xmin[p] * r[p * rs + i * cs];
      amax += xmax[p] * r[p * rs + i * cs];
    }
    const double gamma = r[i * (rs + cs)];
    double s1, c1, s2, c2;
    const double sminpr = la_ice_step(0, smin, amin, gamma, &s1, &c1);
    const double smaxpr = la_ice_step(1, smax, amax, gamma, &s2, &c2);
    if (!(smaxpr * rcond <= sminpr)) break;
    for (int64_t p = 0; p < i; p++) xmin[p] *= s1, xmax[p] *= s2;
    xmin[i] = c1, xmax[i] = c2;
    smin = sminpr, smax = smaxpr;
    rank++;
  }
  return rank;
}

#endif
