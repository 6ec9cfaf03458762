/* LINALG_LSTSQ against a plain reference twin and by the least-squares
 * optimality conditions, as LAPACK's tests check them.
 *
 * Twin: the normal equations A^T A x = A^T b solved by plain Gaussian
 * elimination in double (well-conditioned full-rank tall A), and for wide
 * full-rank A the minimum-norm x = A^T (A A^T)^-1 b. Checked for every
 * driver: the solution against the twin, the residual rows (their sum of
 * squares is ||A x - b||^2), rank and singular values where the driver
 * gives them, gels' info on an exactly rank-deficient A, the minimum-norm
 * solution of a rank-deficient A for the SVD drivers (A^T (A x - b) = 0 and
 * x orthogonal to A's null space), layouts, batches and refusals.
 * gelsy against a plain twin of its own method (unblocked pivoted QR,
 * the condition estimate, the minimum-norm truncated solution) on larger,
 * rank-deficient, graded, tall and wide matrices: equal rank and solution.
 * Complex64/128: every driver against the closed-form minimum-norm
 * solution of A = P Q (full rank and rank-deficient), rank and residual
 * rows. */
#include <complex.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

#include "linalg_mats.h"

/* Solves g x = r (n x n, row-major; both destroyed) by Gaussian
 * elimination with partial pivoting; x in r. */
static void plain_solve(double *g, double *r, int64_t n) {
  for (int64_t c = 0; c < n; c++) {
    int64_t p = c;
    for (int64_t i = c + 1; i < n; i++)
      if (fabs(g[i * n + c]) > fabs(g[p * n + c])) p = i;
    for (int64_t j = 0; j < n; j++) {
      const double t = g[c * n + j];
      g[c * n + j] = g[p * n + j], g[p * n + j] = t;
    }
    const double t = r[c];
    r[c] = r[p], r[p] = t;
    for (int64_t i = c + 1; i < n; i++) {
      const double f = g[i * n + c] / g[c * n + c];
      for (int64_t j = c; j < n; j++) g[i * n + j] -= f * g[c * n + j];
      r[i] -= f * r[c];
    }
  }
  for (int64_t i = n - 1; i >= 0; i--) {
    for (int64_t j = i + 1; j < n; j++) r[i] -= g[i * n + j] * r[j];
    r[i] /= g[i * n + i];
  }
}

/* x (n) for one column b (m) of a (m x n, row-major): least squares
 * (m >= n) or minimum norm (m < n), full rank. */
static void plain_lstsq(const double *a, const double *b, int64_t m, int64_t n, double *x) {
  const int64_t p = m >= n ? n : m;
  double *g = malloc((size_t)(p * p) * sizeof(double) + 8), *r = malloc((size_t)p * sizeof(double) + 8);
  for (int64_t i = 0; i < p; i++) {
    for (int64_t j = 0; j < p; j++) {
      double s = 0;
      if (m >= n)
        for (int64_t t = 0; t < m; t++) s += a[t * n + i] * a[t * n + j];
      else
        for (int64_t t = 0; t < n; t++) s += a[i * n + t] * a[j * n + t];
      g[i * p + j] = s;
    }
    double s = 0;
    if (m >= n)
      for (int64_t t = 0; t < m; t++) s += a[t * n + i] * b[t];
    else
      s = b[i];
    r[i] = s;
  }
  plain_solve(g, r, p);
  if (m >= n)
    memcpy(x, r, (size_t)n * sizeof(double));
  else
    for (int64_t j = 0; j < n; j++) {
      double s = 0;
      for (int64_t i = 0; i < m; i++) s += a[i * n + j] * r[i];
      x[j] = s;
    }
  free(g), free(r);
}

typedef struct lstsq_out {
  mats a, x, info, rank, s;
} lstsq_out;

static lstsq_out run_lstsq(nrt_dtype d, int64_t batch, int64_t m, int64_t n, int64_t k, int layout, int driver,
                           const double *av, const double *bv, double rcond) {
  const int64_t M = m > n ? m : n, N = m < n ? m : n;
  lstsq_out o;
  o.a = make_mats(d, batch, m, n, layout);
  o.x = make_mats(d, batch, M, k, layout);
  o.info = make_mats(NRT_INT32, batch, 1, 1, 0);
  o.rank = make_mats(NRT_INT64, batch, 1, 1, 0);
  o.s = make_mats(d, batch, N, 1, 0);
  o.info.view.ndim = 1, o.rank.view.ndim = 1, o.s.view.ndim = 2;
  for (int64_t b = 0; b < batch; b++) {
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) put(&o.a, b, i, j, av[(b * m + i) * n + j]);
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < k; j++) put(&o.x, b, i, j, i < m ? bv[(b * m + i) * k + j] : 0);
  }
  nrt_tensor_view ov[5] = {o.x.view, o.info.view, o.rank.view, o.s.view, o.a.view};
  nrt_op op = op_of(NRT_OP_LINALG_LSTSQ, 4, 5, ov);
  op.num_scalars = 2;
  op.scalars[0].i = driver;
  op.scalars[1].f = rcond;
  CHECK_OK(nrt_op_execute(&op));
  return o;
}

static void free_out(lstsq_out *o) {
  nrt_free(o->a.dev), nrt_free(o->x.dev), nrt_free(o->info.dev), nrt_free(o->rank.dev), nrt_free(o->s.dev);
}

static int64_t rank_at(const lstsq_out *o, int64_t b) {
  return *(int64_t *)((char *)nrt_device_to_host(o->rank.dev) + b * 8);
}

static void full_rank_case(nrt_dtype d, int64_t batch, int64_t m, int64_t n, int64_t k, int layout, int driver) {
  const int64_t M = m > n ? m : n;
  double *a = malloc((size_t)(batch * m * n) * sizeof(double)), *bb = malloc((size_t)(batch * m * k) * sizeof(double));
  for (int64_t i = 0; i < batch * m * n; i++) a[i] = urand() * 2 - 1;
  for (int64_t b = 0; b < batch; b++) /* well conditioned: a dominant diagonal */
    for (int64_t i = 0; i < (m < n ? m : n); i++) a[(b * m + i) * n + i] += 3;
  for (int64_t i = 0; i < batch * m * k; i++) bb[i] = urand() * 2 - 1;
  if (d == NRT_FLOAT32) /* the values the kernel sees */
    for (int64_t i = 0; i < batch * m * n; i++) a[i] = (float)a[i];
  if (d == NRT_FLOAT32)
    for (int64_t i = 0; i < batch * m * k; i++) bb[i] = (float)bb[i];
  lstsq_out o = run_lstsq(d, batch, m, n, k, layout, driver, a, bb, -1);
  double *col = malloc((size_t)m * sizeof(double)), *x = malloc((size_t)n * sizeof(double));
  double worst = 0, worst_res = 0;
  for (int64_t b = 0; b < batch; b++) {
    CHECK(get(&o.info, b, 0, 0) == 0);
    if (driver) CHECK(rank_at(&o, b) == (m < n ? m : n));
    for (int64_t j = 0; j < k; j++) {
      for (int64_t i = 0; i < m; i++) col[i] = bb[(b * m + i) * k + j];
      plain_lstsq(a + b * m * n, col, m, n, x);
      double xn = 1, err = 0, r2 = 0, rows2 = 0;
      for (int64_t i = 0; i < n; i++) {
        xn = fmax(xn, fabs(x[i]));
        err = fmax(err, fabs(get(&o.x, b, i, j) - x[i]));
      }
      worst = fmax(worst, err / xn);
      if (m > n) {
        for (int64_t i = 0; i < m; i++) {
          double r = -col[i];
          for (int64_t p = 0; p < n; p++) r += a[(b * m + i) * n + p] * x[p];
          r2 += r * r;
        }
        for (int64_t i = n; i < M; i++) rows2 += get(&o.x, b, i, j) * get(&o.x, b, i, j);
        worst_res = fmax(worst_res, fabs(rows2 - r2) / fmax(r2, 1));
      }
    }
  }
  const double tol = 200 * eps_of(d) * (double)M;
  if (!(worst <= tol && worst_res <= tol))
    fprintf(stderr, "  lstsq %s driver %d batch %lld %lldx%lld k %lld layout %d: x %g res %g\n", nrt_dtype_name(d),
            driver, (long long)batch, (long long)m, (long long)n, (long long)k, layout, worst / eps_of(d),
            worst_res / eps_of(d));
  CHECK(worst <= tol);
  if (driver == 0 || driver >= 2) CHECK(worst_res <= tol);
  free(a), free(bb), free(col), free(x);
  free_out(&o);
}

static void test_lstsq_full_rank(void) {
  const int64_t dims[][2] = {{1, 1}, {4, 4}, {9, 4}, {4, 9}, {30, 12}, {12, 30}, {5, 1}, {1, 5}};
  for (int c = 0; c < 8; c++)
    for (int driver = 0; driver < 4; driver++)
      for (int layout = 0; layout < 3; layout++) {
        full_rank_case(NRT_FLOAT64, 2, dims[c][0], dims[c][1], 3, layout, driver);
        full_rank_case(NRT_FLOAT32, 2, dims[c][0], dims[c][1], 2, layout, driver);
      }
}

/* A = P Q (m x r times r x n): rank r. gels reports it through info; the
 * SVD drivers find rank r and the minimum-norm solution: A^T (A x - b) = 0
 * and x in A's row space (x = A^T y for some y; checked as x orthogonal to
 * the null space through ||x - pinv-projection||, via Q's rows). */
static void test_lstsq_rank_deficient(void) {
  const int64_t m = 8, n = 6, r = 3, k = 2;
  double *p = malloc(m * r * sizeof(double)), *q = malloc(r * n * sizeof(double));
  double *a = malloc(m * n * sizeof(double)), *bb = malloc(m * k * sizeof(double));
  for (int64_t i = 0; i < m * r; i++) p[i] = urand() * 2 - 1;
  for (int64_t i = 0; i < r * n; i++) q[i] = urand() * 2 - 1;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double s = 0;
      for (int64_t t = 0; t < r; t++) s += p[i * r + t] * q[t * n + j];
      a[i * n + j] = s;
    }
  for (int64_t i = 0; i < m * k; i++) bb[i] = urand() * 2 - 1;
  for (int driver = 1; driver < 4; driver++) {
    lstsq_out o = run_lstsq(NRT_FLOAT64, 1, m, n, k, 0, driver, a, bb, 1e-10);
    CHECK(rank_at(&o, 0) == r);
    if (driver >= 2) CHECK(get(&o.s, 0, r, 0) < 1e-12 * get(&o.s, 0, 0, 0));
    double worst_normal = 0, worst_row = 0;
    for (int64_t j = 0; j < k; j++) {
      double res[8];
      for (int64_t i = 0; i < m; i++) {
        res[i] = -bb[i * k + j];
        for (int64_t t = 0; t < n; t++) res[i] += a[i * n + t] * get(&o.x, 0, t, j);
      }
      for (int64_t t = 0; t < n; t++) { /* A^T (A x - b) = 0 */
        double s = 0;
        for (int64_t i = 0; i < m; i++) s += a[i * n + t] * res[i];
        worst_normal = fmax(worst_normal, fabs(s));
      }
      /* x in the row space of Q: x - Q^T (Q Q^T)^-1 Q x = 0 */
      double g[9], y[3];
      for (int64_t s1 = 0; s1 < r; s1++) {
        y[s1] = 0;
        for (int64_t t = 0; t < n; t++) y[s1] += q[s1 * n + t] * get(&o.x, 0, t, j);
        for (int64_t s2 = 0; s2 < r; s2++) {
          g[s1 * r + s2] = 0;
          for (int64_t t = 0; t < n; t++) g[s1 * r + s2] += q[s1 * n + t] * q[s2 * n + t];
        }
      }
      plain_solve(g, y, r);
      for (int64_t t = 0; t < n; t++) {
        double proj = 0;
        for (int64_t s1 = 0; s1 < r; s1++) proj += q[s1 * n + t] * y[s1];
        worst_row = fmax(worst_row, fabs(get(&o.x, 0, t, j) - proj));
      }
    }
    CHECK(worst_normal <= 1e-10);
    CHECK(worst_row <= 1e-10);
    free_out(&o);
  }
  /* gels: an exact zero column makes R's diagonal zero there. */
  for (int64_t i = 0; i < m; i++) a[i * n + 2] = 0;
  lstsq_out o = run_lstsq(NRT_FLOAT64, 1, m, n, k, 1, 0, a, bb, -1);
  CHECK(get(&o.info, 0, 0, 0) == 3);
  CHECK(get(&o.x, 0, 0, 0) == bb[0]); /* B left as it was */
  free_out(&o);
  free(p), free(q), free(a), free(bb);
}

/* gelsy's plain twin: unblocked QR with column pivoting whose column norms
 * are recomputed exactly at every step (no downdating, no panels), the
 * rank by the same incremental condition estimate written out from its
 * definition (the extreme eigenpairs of a 2 x 2 matrix by the quadratic
 * formula, unscaled), and the minimum-norm solution of the truncated system
 * [R11 R12] P^T x = (Q^T b)[0:r] through the r x r normal equations:
 * x = P R1^T (R1 R1^T)^-1 c. One right-hand side b (m); x (n). */
static double twin_ice(int want_max, double sest, double alpha, double gamma, double *s, double *c) {
  const double p = sest * sest + alpha * alpha, q = alpha * gamma, r = gamma * gamma;
  const double tr = p + r, det = sest * sest * gamma * gamma;
  const double disc = sqrt(fmax(0, tr * tr / 4 - det));
  const double hi = tr / 2 + disc; /* the small root as det / hi: no cancellation */
  const double lam = want_max ? hi : (hi > 0 ? det / hi : 0);
  double vs = q, vc = lam - p;
  if (fabs(vs) + fabs(vc) < fabs(lam - r) + fabs(q)) vs = lam - r, vc = q;
  double nv = hypot(vs, vc);
  if (nv == 0) vs = 1, vc = 0, nv = 1;
  *s = vs / nv, *c = vc / nv;
  return sqrt(lam);
}

static int64_t plain_gelsy(const double *a0, const double *b0, int64_t m, int64_t n, double rcond, double *x) {
  const int64_t N = m < n ? m : n;
  double *a = malloc((size_t)(m * n) * sizeof(double) + 8), *b = malloc((size_t)m * sizeof(double) + 8);
  int64_t *perm = malloc((size_t)n * sizeof(int64_t) + 8);
  memcpy(a, a0, (size_t)(m * n) * sizeof(double));
  memcpy(b, b0, (size_t)m * sizeof(double));
  for (int64_t j = 0; j < n; j++) perm[j] = j;
  for (int64_t k = 0; k < N; k++) {
    int64_t pv = k;
    double best = -1;
    for (int64_t j = k; j < n; j++) {
      double s = 0;
      for (int64_t i = k; i < m; i++) s += a[i * n + j] * a[i * n + j];
      if (s > best) best = s, pv = j;
    }
    for (int64_t i = 0; i < m; i++) {
      const double t = a[i * n + k];
      a[i * n + k] = a[i * n + pv], a[i * n + pv] = t;
    }
    const int64_t tp = perm[k];
    perm[k] = perm[pv], perm[pv] = tp;
    /* Householder v = x - beta e1 on column k, rows k..m-1, applied to
     * columns k..n-1 and to b. */
    double norm = 0;
    for (int64_t i = k; i < m; i++) norm += a[i * n + k] * a[i * n + k];
    norm = sqrt(norm);
    if (norm == 0) continue;
    const double beta = a[k * n + k] > 0 ? -norm : norm;
    double *v = malloc((size_t)m * sizeof(double) + 8);
    for (int64_t i = k; i < m; i++) v[i] = a[i * n + k];
    v[k] -= beta;
    double vv = 0;
    for (int64_t i = k; i < m; i++) vv += v[i] * v[i];
    for (int64_t j = k; j < n; j++) {
      double s = 0;
      for (int64_t i = k; i < m; i++) s += v[i] * a[i * n + j];
      for (int64_t i = k; i < m; i++) a[i * n + j] -= 2 * s / vv * v[i];
    }
    double s = 0;
    for (int64_t i = k; i < m; i++) s += v[i] * b[i];
    for (int64_t i = k; i < m; i++) b[i] -= 2 * s / vv * v[i];
    free(v);
  }
  int64_t r = 0;
  if (N > 0 && a[0] != 0) {
    double *xmin = calloc((size_t)n + 1, sizeof(double)), *xmax = calloc((size_t)n + 1, sizeof(double));
    double smax = fabs(a[0]), smin = smax;
    xmin[0] = xmax[0] = 1;
    for (r = 1; r < N; r++) {
      double amin = 0, amax = 0, s1, c1, s2, c2;
      for (int64_t p = 0; p < r; p++) amin += xmin[p] * a[p * n + r], amax += xmax[p] * a[p * n + r];
      const double lo = twin_ice(0, smin, amin, a[r * n + r], &s1, &c1);
      const double hi = twin_ice(1, smax, amax, a[r * n + r], &s2, &c2);
      if (!(hi * rcond <= lo)) break;
      for (int64_t p = 0; p < r; p++) xmin[p] *= s1, xmax[p] *= s2;
      xmin[r] = c1, xmax[r] = c2, smin = lo, smax = hi;
    }
    free(xmin), free(xmax);
  }
  memset(x, 0, (size_t)n * sizeof(double));
  if (r > 0) {
    double *g = malloc((size_t)(r * r) * sizeof(double) + 8), *y = malloc((size_t)r * sizeof(double) + 8);
    for (int64_t i = 0; i < r; i++) {
      for (int64_t j = 0; j < r; j++) {
        double s = 0;
        for (int64_t t = 0; t < n; t++) s += (t >= i ? a[i * n + t] : 0) * (t >= j ? a[j * n + t] : 0);
        g[i * r + j] = s;
      }
      y[i] = b[i];
    }
    plain_solve(g, y, r);
    for (int64_t t = 0; t < n; t++) {
      double s = 0;
      for (int64_t i = 0; i < r && i <= t; i++) s += a[i * n + t] * y[i];
      x[perm[t]] = s;
    }
    free(g), free(y);
  }
  free(a), free(b), free(perm);
  return r;
}

/* gelsy against its twin on matrices large enough for several panels and
 * the blocked trailing updates: full rank, rank-deficient (a product of
 * thin factors), graded columns cut by rcond, tall and wide. */
static void test_gelsy_twin(void) {
  const int64_t cases[][3] = {{100, 80, 50}, {80, 100, 60}, {70, 70, 70}, {200, 40, 40}, {40, 130, 40},
                              {150, 150, 149}, {90, 110, 90}, {33, 33, 7}};
  for (int c = 0; c < 8; c++) {
    const int64_t m = cases[c][0], n = cases[c][1], r = cases[c][2], k = 3;
    double *p = malloc((size_t)(m * r) * sizeof(double)), *q = malloc((size_t)(r * n) * sizeof(double));
    double *a = malloc((size_t)(m * n) * sizeof(double)), *bb = malloc((size_t)(m * k) * sizeof(double));
    for (int64_t i = 0; i < m * r; i++) p[i] = urand() * 2 - 1;
    for (int64_t i = 0; i < r * n; i++) q[i] = urand() * 2 - 1;
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double s = 0;
        for (int64_t t = 0; t < r; t++) s += p[i * r + t] * q[t * n + j];
        a[i * n + j] = s;
      }
    for (int64_t i = 0; i < m * k; i++) bb[i] = urand() * 2 - 1;
    for (int layout = 0; layout < 2; layout++) {
      lstsq_out o = run_lstsq(NRT_FLOAT64, 1, m, n, k, layout, 1, a, bb, 1e-10);
      double *col = malloc((size_t)m * sizeof(double)), *x = malloc((size_t)n * sizeof(double));
      double worst = 0;
      for (int64_t j = 0; j < k; j++) {
        for (int64_t i = 0; i < m; i++) col[i] = bb[i * k + j];
        const int64_t rt = plain_gelsy(a, col, m, n, 1e-10, x);
        CHECK(rt == r);
        double xn = 1e-300;
        for (int64_t i = 0; i < n; i++) xn = fmax(xn, fabs(x[i]));
        for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs(get(&o.x, 0, i, j) - x[i]) / xn);
      }
      CHECK(rank_at(&o, 0) == r);
      if (!(worst <= 1e-8)) fprintf(stderr, "  gelsy %lldx%lld rank %lld: rel err %g\n", (long long)m, (long long)n, (long long)r, worst);
      CHECK(worst <= 1e-8);
      free(col), free(x);
      free_out(&o);
    }
    free(p), free(q), free(a), free(bb);
  }
  /* Graded columns: rank set by rcond through the condition estimate. */
  const int64_t m = 60, n = 45, k = 2;
  double *a = malloc((size_t)(m * n) * sizeof(double)), *bb = malloc((size_t)(m * k) * sizeof(double));
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) a[i * n + j] = (urand() * 2 - 1) * pow(0.6, (double)j);
  for (int64_t i = 0; i < m * k; i++) bb[i] = urand() * 2 - 1;
  const double rconds[] = {1e-2, 1e-5, 1e-8, 0.3};
  for (int t = 0; t < 4; t++) {
    lstsq_out o = run_lstsq(NRT_FLOAT64, 1, m, n, k, 0, 1, a, bb, rconds[t]);
    double *col = malloc((size_t)m * sizeof(double)), *x = malloc((size_t)n * sizeof(double));
    for (int64_t i = 0; i < m; i++) col[i] = bb[i * k];
    const int64_t rt = plain_gelsy(a, col, m, n, rconds[t], x);
    CHECK(rank_at(&o, 0) == rt);
    CHECK(rt > 0 && rt < n);
    double worst = 0, xn = 1e-300;
    for (int64_t i = 0; i < n; i++) xn = fmax(xn, fabs(x[i]));
    for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs(get(&o.x, 0, i, 0) - x[i]) / xn);
    CHECK(worst <= 1e-7);
    free(col), free(x);
    free_out(&o);
  }
  free(a), free(bb);
}

/* ---- complex ------------------------------------------------------------- */

/* Solves g x = r (n x n complex, row-major; both destroyed, k right-hand
 * sides in r) by Gaussian elimination with partial pivoting; x in r. */
static void plain_csolve(double complex *g, double complex *r, int64_t n, int64_t k) {
  for (int64_t c = 0; c < n; c++) {
    int64_t p = c;
    for (int64_t i = c + 1; i < n; i++)
      if (cabs(g[i * n + c]) > cabs(g[p * n + c])) p = i;
    for (int64_t j = 0; j < n; j++) {
      const double complex t = g[c * n + j];
      g[c * n + j] = g[p * n + j], g[p * n + j] = t;
    }
    for (int64_t j = 0; j < k; j++) {
      const double complex t = r[c * k + j];
      r[c * k + j] = r[p * k + j], r[p * k + j] = t;
    }
    for (int64_t i = c + 1; i < n; i++) {
      const double complex f = g[i * n + c] / g[c * n + c];
      for (int64_t j = c; j < n; j++) g[i * n + j] -= f * g[c * n + j];
      for (int64_t j = 0; j < k; j++) r[i * k + j] -= f * r[c * k + j];
    }
  }
  for (int64_t i = n - 1; i >= 0; i--)
    for (int64_t j = 0; j < k; j++) {
      double complex v = r[i * k + j];
      for (int64_t q = i + 1; q < n; q++) v -= g[i * n + q] * r[q * k + j];
      r[i * k + j] = v / g[i * n + i];
    }
}

/* A = P Q (P m x r, Q r x n, both of full rank r with a dominant
 * diagonal): the minimum-norm least-squares solution is, in closed form,
 * x = Q^H (Q Q^H)^-1 (P^H P)^-1 P^H b: the twin, by plain complex solves.
 * Checked: x against it, rank (gelsy, gelsd, gelss), and the residual
 * rows' sum of |.|^2 against ||A x - b||^2. */
static void complex_case(nrt_dtype d, int64_t m, int64_t n, int64_t k, int64_t r, int layout, int driver) {
  const int64_t M = m > n ? m : n, N = m < n ? m : n;
  double complex *pm = malloc((size_t)(m * r) * sizeof(double complex) + 16);
  double complex *qm = malloc((size_t)(r * n) * sizeof(double complex) + 16);
  double complex *a = malloc((size_t)(m * n) * sizeof(double complex) + 16);
  double complex *bv = malloc((size_t)(m * k) * sizeof(double complex) + 16);
  double complex *g = malloc((size_t)(r * r) * sizeof(double complex) + 16);
  double complex *y = malloc((size_t)(r * k) * sizeof(double complex) + 16);
  double complex *x = malloc((size_t)(n * k) * sizeof(double complex) + 16);
  for (int64_t i = 0; i < m * r; i++) pm[i] = CMPLX(urand() * 2 - 1, urand() * 2 - 1) + (i % r == i / r ? 3 : 0);
  for (int64_t i = 0; i < r * n; i++) qm[i] = CMPLX(urand() * 2 - 1, urand() * 2 - 1) + (i % n == i / n ? 3 : 0);
  for (int64_t i = 0; i < m * k; i++) bv[i] = CMPLX(urand() * 2 - 1, urand() * 2 - 1);
  lstsq_out o;
  o.a = make_mats(d, 1, m, n, layout);
  o.x = make_mats(d, 1, M, k, layout);
  o.info = make_mats(NRT_INT32, 1, 1, 1, 0);
  o.rank = make_mats(NRT_INT64, 1, 1, 1, 0);
  o.s = make_mats(d == NRT_COMPLEX64 ? NRT_FLOAT32 : NRT_FLOAT64, 1, N, 1, 0);
  o.info.view.ndim = 1, o.rank.view.ndim = 1, o.s.view.ndim = 2;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double complex t = 0;
      for (int64_t q = 0; q < r; q++) t += pm[i * r + q] * qm[q * n + j];
      cput(&o.a, 0, i, j, t);
      a[i * n + j] = cget(&o.a, 0, i, j); /* the values the kernel sees */
    }
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < k; j++) {
      cput(&o.x, 0, i, j, i < m ? bv[i * k + j] : 0);
      if (i < m) bv[i * k + j] = cget(&o.x, 0, i, j);
    }
  nrt_tensor_view ov[5] = {o.x.view, o.info.view, o.rank.view, o.s.view, o.a.view};
  nrt_op op = op_of(NRT_OP_LINALG_LSTSQ, 4, 5, ov);
  op.num_scalars = 2;
  op.scalars[0].i = driver;
  op.scalars[1].f = -1;
  CHECK_OK(nrt_op_execute(&op));
  /* the twin: y = (P^H P)^-1 P^H b, then x = Q^H (Q Q^H)^-1 y */
  for (int64_t i = 0; i < r; i++) {
    for (int64_t j = 0; j < r; j++) {
      double complex t = 0;
      for (int64_t q = 0; q < m; q++) t += conj(pm[q * r + i]) * pm[q * r + j];
      g[i * r + j] = t;
    }
    for (int64_t j = 0; j < k; j++) {
      double complex t = 0;
      for (int64_t q = 0; q < m; q++) t += conj(pm[q * r + i]) * bv[q * k + j];
      y[i * k + j] = t;
    }
  }
  plain_csolve(g, y, r, k);
  for (int64_t i = 0; i < r; i++)
    for (int64_t j = 0; j < r; j++) {
      double complex t = 0;
      for (int64_t q = 0; q < n; q++) t += qm[i * n + q] * conj(qm[j * n + q]);
      g[i * r + j] = t;
    }
  plain_csolve(g, y, r, k);
  double xn = 1, err = 0, worst_res = 0;
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < k; j++) {
      double complex t = 0;
      for (int64_t q = 0; q < r; q++) t += conj(qm[q * n + i]) * y[q * k + j];
      x[i * k + j] = t;
      xn = fmax(xn, cabs(t));
    }
  CHECK(get(&o.info, 0, 0, 0) == 0);
  {
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < k; j++) err = fmax(err, cabs(cget(&o.x, 0, i, j) - x[i * k + j]));
    if (driver) CHECK(rank_at(&o, 0) == r);
    if (m > n && r == n && driver != 1)
      for (int64_t j = 0; j < k; j++) {
        double r2 = 0, rows2 = 0;
        for (int64_t i = 0; i < m; i++) {
          double complex v = -bv[i * k + j];
          for (int64_t q = 0; q < n; q++) v += a[i * n + q] * x[q * k + j];
          r2 += creal(v * conj(v));
        }
        for (int64_t i = n; i < M; i++) rows2 += creal(cget(&o.x, 0, i, j) * conj(cget(&o.x, 0, i, j)));
        worst_res = fmax(worst_res, fabs(rows2 - r2) / fmax(r2, 1));
      }
  }
  const double tol = 200 * eps_of(d) * (double)M;
  if (!(err / xn <= tol && worst_res <= tol))
    fprintf(stderr, "  lstsq %s driver %d %lldx%lld rank %lld k %lld layout %d: x %g res %g\n", nrt_dtype_name(d),
            driver, (long long)m, (long long)n, (long long)r, (long long)k, layout, err / xn / eps_of(d),
            worst_res / eps_of(d));
  CHECK(err / xn <= tol);
  CHECK(worst_res <= tol);
  free(pm), free(qm), free(a), free(bv), free(g), free(y), free(x);
  free_out(&o);
}

static void test_lstsq_complex(void) {
  const int64_t dims[][2] = {{1, 1}, {4, 4}, {9, 4}, {4, 9}, {30, 12}, {12, 30}, {5, 1}, {1, 5}};
  for (int c = 0; c < 8; c++)
    for (int driver = 0; driver < 4; driver++)
      for (int layout = 0; layout < 3; layout++) {
        const int64_t m = dims[c][0], n = dims[c][1], N = m < n ? m : n;
        complex_case(NRT_COMPLEX128, m, n, 3, N, layout, driver);
        complex_case(NRT_COMPLEX64, m, n, 2, N, layout, driver);
        if (N > 2 && driver) { /* rank-deficient (not exactly: gels would factor it) */
          complex_case(NRT_COMPLEX128, m, n, 2, N / 2, layout, driver);
          complex_case(NRT_COMPLEX64, m, n, 2, N - 1, layout, driver);
        }
      }
}

static void test_lstsq_refusals(void) {
  double a[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13}, b[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  lstsq_out o = run_lstsq(NRT_FLOAT64, 1, 4, 3, 2, 0, 3, a, b, -1);
  nrt_tensor_view ov[5] = {o.x.view, o.info.view, o.rank.view, o.s.view, o.a.view};
  nrt_op op = op_of(NRT_OP_LINALG_LSTSQ, 4, 5, ov);
  op.num_scalars = 2;
  op.scalars[0].i = 4; /* no such driver */
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  op.scalars[0].i = 3;
  op.operands[0].shape[1] = 3; /* X needs max(m, n) = 4 rows */
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  op.operands[0].shape[1] = 4;
  op.operands[2].dtype = NRT_INT32; /* rank is int64 */
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  op.operands[2].dtype = NRT_INT64;
  op.operands[3].shape[1] = 2; /* S holds min(m, n) */
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  op.operands[3].shape[1] = 3;
  op.operands[4].dtype = NRT_INT32;
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_UNSUPPORTED);
  op.operands[4].dtype = NRT_FLOAT64;
  op.num_scalars = 1;
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  op.num_scalars = 2;
  CHECK_OK(nrt_op_execute(&op));
  free_out(&o);
}

int main(void) {
  RUN(test_lstsq_full_rank);
  RUN(test_lstsq_rank_deficient);
  RUN(test_gelsy_twin);
  RUN(test_lstsq_complex);
  RUN(test_lstsq_refusals);
  return CHECK_MAIN_RESULT();
}
