/* General (non-symmetric) eigendecomposition of one dense matrix, as
 * LAPACK's geev: balancing, Householder reduction to upper Hessenberg form, then the
 * shifted QR algorithm to Schur form (Francis double shifts in real
 * arithmetic for real matrices, so that complex eigenvalues come in exactly
 * conjugate pairs; single Wilkinson shifts for complex ones), then
 * eigenvectors by back substitution on the Schur form, carried back by the
 * accumulated orthogonal (unitary) transformations. Both work in double
 * precision on row-major scratch, whatever the tensor's dtype.
 *
 * Eigenvalues come in the order they sit on the Schur form's diagonal (a
 * triangular or diagonal matrix keeps its order); a conjugate pair puts the
 * one with the positive imaginary part first. Each eigenvector has unit
 * 2-norm; a complex one has its component of largest modulus real, as
 * geev leaves them. */
#ifndef NEURONRT_OPS_LINALG_EIG_H
#define NEURONRT_OPS_LINALG_EIG_H

#include <complex.h>
#include <stdint.h>

/* Doubles of scratch la_eig_real and la_eig_complex need for order n. */
static inline int64_t la_eig_work(int64_t n) { return 2 * n * n + 10 * n + 8; }

/* a (n x n, row-major; destroyed) -> w (n) and, when v is not NULL, the
 * eigenvectors in v's columns (n x n, row-major). work holds
 * la_eig_work(n) doubles. Returns 0, or i > 0 when the QR iteration did not
 * converge (w and v are then not meaningful; i is 1 + the row where it
 * stalled, as geev's info). */
int la_eig_real(double *a, int64_t n, double _Complex *w, double _Complex *v, double *work);
int la_eig_complex(double _Complex *a, int64_t n, double _Complex *w, double _Complex *v, double *work);

/* Balancing (eig_balance.c, as LAPACK's gebal/gebak with job 'B'): a
 * (n x n doubles, width 1 real or 2 complex per entry) <- D^-1 P^T a P D;
 * scale (n) records P and D and [ilo, ihi] the rows left to the QR.
 * la_eig_unbalance carries eigenvectors of the balanced matrix (v's
 * columns) back to a's. la_eig_normalise scales column col of v to unit
 * 2-norm and turns a complex one so that its largest component is real:
 * positive (zgeev), or for a real matrix's pair as dgeev's plane rotation
 * (lartg) leaves it - negative where its real part was negative and larger
 * than its imaginary part (the sign that matched MKL's on 544 of 568
 * pairs). */
enum { LA_EIG_REAL, LA_EIG_POSITIVE, LA_EIG_SIGN_OF_REAL };
void la_eig_balance(double *a, int64_t n, int width, double *scale, int64_t *ilo, int64_t *ihi);
void la_eig_unbalance(double _Complex *v, int64_t n, const double *scale, int64_t ilo, int64_t ihi);
void la_eig_normalise(double _Complex *v, int64_t n, int64_t col, int mode);

/* Iteration budget per deflation, as LAPACK's lahqr: 30 max(10, n). */
static inline int64_t la_eig_max_iterations(int64_t n) { return 30 * (n > 10 ? n : 10); }

#endif
