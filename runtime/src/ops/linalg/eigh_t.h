/* Cyclic Jacobi eigendecomposition of a symmetric (Hermitian) matrix for
 * one element type, included once per type by instantiate.h (see eigh.c). */
#include <complex.h>
#include <math.h>
#include <stdint.h>

#if !LA_CPLX

/* a (n x n, row-major, full symmetric) is diagonalised in place by plane
 * rotations A <- J^T A J, accumulated as rows of vt (n x n: vt = V^T, so
 * that both updates run along contiguous rows). Sweeps over all pairs
 * (p, q) in a fixed order until a sweep finds every a_pq negligible next to
 * its diagonal (|a_pq| <= eps sqrt(|a_pp a_qq|), or below the smallest
 * normal scale of the matrix), at most 100 sweeps. Returns the sweeps. */
static inline int LA_NAME(jacobi)(LA_T *a, int64_t n, LA_T *vt, int want_v) {
  const double eps = sizeof(LA_T) == sizeof(float) ? 5.96e-8 : 1.11e-16;
  double scale = 0;
  for (int64_t i = 0; i < n * n; i++) scale = fmax(scale, fabs((double)a[i]));
  const double tiny = scale * (sizeof(LA_T) == sizeof(float) ? 1e-37 : 1e-300);
  if (want_v)
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++) vt[i * n + j] = i == j;
  int sweep = 0;
  for (; sweep < 100; sweep++) {
    int rotated = 0;
    for (int64_t p = 0; p < n - 1; p++)
      for (int64_t q = p + 1; q < n; q++) {
        const double apq = a[p * n + q], app = a[p * n + p], aqq = a[q * n + q];
        if (fabs(apq) <= eps * sqrt(fabs(app * aqq)) || fabs(apq) <= tiny) {
          a[p * n + q] = a[q * n + p] = 0;
          continue;
        }
        rotated = 1;
        const double theta = (aqq - app) / (2 * apq);
        const double t = (theta >= 0 ? 1.0 : -1.0) / (fabs(theta) + hypot(theta, 1.0));
        const double c = 1 / sqrt(t * t + 1), s = t * c;
        const LA_T cc = (LA_T)c, ss = (LA_T)s;
        LA_T *rp = a + p * n, *rq = a + q * n;
        for (int64_t k = 0; k < n; k++) {
          const LA_T x = rp[k], y = rq[k];
          rp[k] = cc * x - ss * y;
          rq[k] = ss * x + cc * y;
        }
        rp[p] = (LA_T)(app - t * apq);
        rq[q] = (LA_T)(aqq + t * apq);
        rp[q] = rq[p] = 0;
        for (int64_t k = 0; k < n; k++) {
          if (k == p || k == q) continue;
          a[k * n + p] = rp[k];
          a[k * n + q] = rq[k];
        }
        if (want_v) {
          LA_T *vp = vt + p * n, *vq = vt + q * n;
          for (int64_t k = 0; k < n; k++) {
            const LA_T x = vp[k], y = vq[k];
            vp[k] = cc * x - ss * y;
            vq[k] = ss * x + cc * y;
          }
        }
      }
    if (!rotated) break;
  }
  return sweep;
}
#else
/* The Hermitian twin: each a_pq = r e^{i phi} is first made real by
 * scaling row and column q with e^{i phi} (a unitary diagonal similarity),
 * then rotated away as in the real case, so that a <- J^H a J with
 * J = diag(1, e^{-i phi}) R on the pair. vt's row p holds V's column p
 * (V^T, not V^H); the diagonal stays real. */
static inline int LA_NAME(jacobi)(LA_T *a, int64_t n, LA_T *vt, int want_v) {
  const double eps = sizeof(LA_R) == sizeof(float) ? 5.96e-8 : 1.11e-16;
  double scale = 0;
  for (int64_t i = 0; i < n * n; i++) scale = fmax(scale, cabs((double _Complex)a[i]));
  const double tiny = scale * (sizeof(LA_R) == sizeof(float) ? 1e-37 : 1e-300);
  if (want_v)
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++) vt[i * n + j] = i == j;
  int sweep = 0;
  for (; sweep < 100; sweep++) {
    int rotated = 0;
    for (int64_t p = 0; p < n - 1; p++)
      for (int64_t q = p + 1; q < n; q++) {
        const double pr = __real__ a[p * n + q], pi = __imag__ a[p * n + q];
        const double r = hypot(pr, pi), app = __real__ a[p * n + p], aqq = __real__ a[q * n + q];
        if (r <= eps * sqrt(fabs(app * aqq)) || r <= tiny) {
          a[p * n + q] = a[q * n + p] = 0;
          continue;
        }
        rotated = 1;
        const LA_T ph = LA_CX((LA_R)(pr / r), (LA_R)(pi / r)); /* e^{i phi} */
        const double theta = (aqq - app) / (2 * r);
        const double t = (theta >= 0 ? 1.0 : -1.0) / (fabs(theta) + hypot(theta, 1.0));
        const double c = 1 / sqrt(t * t + 1), s = t * c;
        const LA_R cc = (LA_R)c, ss = (LA_R)s;
        LA_T *rp = a + p * n, *rq = a + q * n;
        for (int64_t k = 0; k < n; k++) { /* rows: (J^H a)_p,q */
          const LA_T x = rp[k], y = LA_NAME(mul)(ph, rq[k]);
          rp[k] = cc * x - ss * y;
          rq[k] = ss * x + cc * y;
        }
        rp[p] = (LA_T)(app - t * r);
        rq[q] = (LA_T)(aqq + t * r);
        rp[q] = rq[p] = 0;
        for (int64_t k = 0; k < n; k++) { /* columns mirror the rows */
          if (k == p || k == q) continue;
          a[k * n + p] = LA_NAME(conj)(rp[k]);
          a[k * n + q] = LA_NAME(conj)(rq[k]);
        }
        if (want_v) { /* V <- V J: columns of V are rows of vt */
          const LA_T phc = LA_NAME(conj)(ph);
          LA_T *vp = vt + p * n, *vq = vt + q * n;
          for (int64_t k = 0; k < n; k++) {
            const LA_T x = vp[k], y = LA_NAME(mul)(phc, vq[k]);
            vp[k] = cc * x - ss * y;
            vq[k] = ss * x + cc * y;
          }
        }
      }
    if (!rotated) break;
  }
  return sweep;
}
#endif
