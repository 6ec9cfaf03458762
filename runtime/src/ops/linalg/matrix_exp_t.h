/* The scaling-and-squaring matrix exponential of matrix_exp.c for one
 * element type, included once per type with LA_T (double or double
 * _Complex: every input is computed in double), LA_CPLX, LA_ABS(x) (its
 * modulus), LA_NAME(x) (this file's names) and LA_NAME2(x) (dense_t.h's
 * routines of the type) defined. */

/* dst = sum_i w[i] * p[i] (n x n each; p[0] is the identity, not read). */
static void LA_NAME(combine)(LA_T *dst, int64_t n, const double *w, LA_T *const *p, int count) {
  const int64_t nn = n * n;
  for (int64_t t = 0; t < nn; t++) dst[t] = 0;
  for (int64_t i = 0; i < n; i++) dst[i * n + i] = w[0];
  for (int q = 1; q < count; q++) {
    if (w[q] == 0) continue;
    for (int64_t t = 0; t < nn; t++) dst[t] += w[q] * p[q][t];
  }
}

/* c = a b (n x n, row-major); beta 1 adds to c. Complex products run as
 * loops along contiguous rows (the runtime's GEMM is real). */
static void LA_NAME(mul)(int64_t n, const LA_T *a, const LA_T *b, double beta, LA_T *c) {
#if LA_CPLX
  for (int64_t i = 0; i < n; i++) {
    LA_T *ci = c + i * n;
    if (beta == 0)
      for (int64_t j = 0; j < n; j++) ci[j] = 0;
    for (int64_t p = 0; p < n; p++) {
      const LA_T f = a[i * n + p];
      if (f == 0) continue;
      const LA_T *bp = b + p * n;
      for (int64_t j = 0; j < n; j++) ci[j] += la_mul_c128(f, bp[j]);
    }
  }
#else
  la_gemm_f64(n, n, n, 1.0, a, n, 1, b, n, beta, c, n);
#endif
}

/* r = exp(a) (n x n, row-major; a is overwritten). w holds 7 n^2
 * elements, piv n ints. */
static void LA_NAME(matrix_exp)(LA_T *a, int64_t n, LA_T *r, LA_T *w, int32_t *piv) {
  const int64_t nn = n * n;
  double norm = 0;
  for (int64_t j = 0; j < n; j++) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += LA_ABS(a[i * n + j]);
    if (!(s <= norm)) norm = s; /* also takes a NaN */
  }
  if (!isfinite(norm)) {
    for (int64_t t = 0; t < nn; t++) r[t] = NAN;
    return;
  }
  int d = 4, s = 0;
  for (int q = 0; q < 4; q++)
    if (norm <= kExpTheta[q]) {
      d = q;
      break;
    }
  if (d == 4 && norm > kExpTheta[4]) {
    s = (int)ceil(log2(norm / kExpTheta[4]));
    if (s < 0) s = 0;
    const double scale = ldexp(1.0, -s); /* exact: a power of two */
    for (int64_t t = 0; t < nn; t++) a[t] *= scale;
  }
  const int m = kExpDegree[d];
  double c[14];
  pade_coefficients(m, c);
  /* Even powers A^2, A^4, A^6 (A^8 for m = 9) in w; U and V after them. */
  LA_T *p[5] = {NULL, w, w + nn, w + 2 * nn, w + 3 * nn};
  LA_T *u = w + 4 * nn, *v = w + 5 * nn, *t = w + 6 * nn;
  const int powers = m == 13 ? 3 : (m - 1) / 2; /* highest even power / 2 */
  LA_NAME(mul)(n, a, a, 0, p[1]);
  if (powers >= 2) LA_NAME(mul)(n, p[1], p[1], 0, p[2]);
  if (powers >= 3) LA_NAME(mul)(n, p[2], p[1], 0, p[3]);
  if (powers >= 4) LA_NAME(mul)(n, p[2], p[2], 0, p[4]);
  if (m < 13) {
    double wu[5], wv[5];
    for (int q = 0; q <= powers; q++) wu[q] = c[2 * q + 1], wv[q] = c[2 * q];
    LA_NAME(combine)(t, n, wu, p, powers + 1);
    LA_NAME(combine)(v, n, wv, p, powers + 1);
  } else {
    /* U = A [A^6 (c13 A^6 + c11 A^4 + c9 A^2) + c7 A^6 + c5 A^4 + c3 A^2 + c1 I],
     * V = A^6 (c12 A^6 + c10 A^4 + c8 A^2) + c6 A^6 + c4 A^4 + c2 A^2 + c0 I. */
    const double hu[4] = {0, c[9], c[11], c[13]}, lu[4] = {c[1], c[3], c[5], c[7]};
    const double hv[4] = {0, c[8], c[10], c[12]}, lv[4] = {c[0], c[2], c[4], c[6]};
    LA_NAME(combine)(u, n, hu, p, 4);
    LA_NAME(combine)(t, n, lu, p, 4);
    LA_NAME(mul)(n, p[3], u, 1, t);
    LA_NAME(combine)(u, n, hv, p, 4);
    LA_NAME(combine)(v, n, lv, p, 4);
    LA_NAME(mul)(n, p[3], u, 1, v);
  }
  LA_NAME(mul)(n, a, t, 0, u);
  /* (V - U) R = V + U */
  for (int64_t q = 0; q < nn; q++) {
    const LA_T vq = v[q], uq = u[q];
    t[q] = vq - uq;
    r[q] = vq + uq;
  }
  LA_NAME2(lu)(t, n, n, piv);
  for (int64_t i = 0; i < n; i++) {
    const int64_t pi = piv[i] - 1;
    if (pi != i)
      for (int64_t j = 0; j < n; j++) {
        const LA_T x = r[i * n + j];
        r[i * n + j] = r[pi * n + j];
        r[pi * n + j] = x;
      }
  }
  LA_NAME2(trsm)((const char *)t, n, 1, n, r, n, /*upper=*/0, /*unit=*/1);
  LA_NAME2(trsm)((const char *)t, n, 1, n, r, n, /*upper=*/1, /*unit=*/0);
  for (int q = 0; q < s; q++) { /* r <- r^2, through t */
    LA_NAME(mul)(n, r, r, 0, t);
    memcpy(r, t, (size_t)nn * sizeof(LA_T));
  }
}
