/* Dense linear algebra (see op_list.h): LU with partial pivoting, row
 * interchanges, triangular solves, Cholesky, Householder QR (GEQRF,
 * ORMQR), matrix_exp, EIGH, SVD, LSTSQ and LDL on float32, float64,
 * complex64 or complex128 matrices in
 * any strides, batched over any leading dims. Every operand has
 * the same batch dims (the shim expands broadcast operands with stride 0).
 * Decompositions work in place on an output that holds the input on entry,
 * so the shim's copy of the input is also the result's storage.
 *
 *   LINALG_LU_FACTOR        outputs [LU (..., m, n), pivots (..., min(m, n)) int32,
 *                                    info (...) int32]
 *       P A = L U as LAPACK's getrf: in column k the row with the largest
 *       |a| (|re| + |im| for complex, as LAPACK; the first of equals) is
 *       swapped into place; pivots are 1-based
 *       row numbers; L (unit diagonal, not stored) below the diagonal of LU
 *       and U on and above it. info is 0, or the first k (1-based) with
 *       U[k-1, k-1] == 0 (the factorisation still completes).
 *   LINALG_LU_PIVOT         outputs [X (..., n, k)]  inputs [pivots (..., p) int32]
 *                           scalars [reverse]
 *       Swaps rows i and pivots[i] - 1 of X for i = 0 .. p-1 (p-1 .. 0 when
 *       reverse): applies P^T (forward) or P (reverse) of a factorisation.
 *       A pivot outside [1, n] is an error, not a wild write.
 *   LINALG_TRIANGULAR_SOLVE outputs [X (..., n, k)]  inputs [A (..., n, n)]
 *                           scalars [upper, unitriangular, conj (optional, 0)]
 *       X holds B on entry; solves A X = B reading only A's upper or lower
 *       triangle, and not its diagonal when unitriangular (taken as ones);
 *       with conj, conj(A) X = B. A transposed view of A solves A^T X = B
 *       (and with conj, A^H X = B).
 *   LINALG_CHOLESKY         outputs [L (..., n, n), info (...) int32]
 *       L holds A on entry; reads its lower triangle and writes the lower
 *       factor L L^T = A (L L^H = A for complex; the imaginary parts of the
 *       diagonal are not read), zeroing the strict upper triangle. info is 0, or
 *       the order (1-based) of the first leading minor that is not positive
 *       definite, where the factorisation stops.
 *   LINALG_GEQRF            outputs [A (..., m, n), tau (..., min(m, n))]
 *       A = Q R by Householder reflections as LAPACK's geqrf: A holds the
 *       input on entry, R on and above the diagonal on exit and the
 *       reflector vectors v_j (v_j[j] = 1 not stored) below it; Q = H_0 H_1
 *       ... H_{k-1}, H_j = I - tau_j v_j v_j^H, each chosen so that
 *       R[j, j] = -sign(re a) ||x|| (tau_j = 0 when nothing is below the
 *       diagonal to annihilate and, for complex, a is real; otherwise a
 *       complex tau_j makes R's diagonal real, as LAPACK's zlarfg). Blocked (compact WY) with the trailing
 *       updates on the runtime's GEMM for large matrices.
 *   LINALG_ORMQR            outputs [C (..., m, c)]  inputs [V (..., m, p), tau (..., k)]
 *                           scalars [transpose, conj (optional, 0)]
 *       C holds the input on entry; overwritten by Q C, or Q^H C when
 *       transpose (conj(Q) in place of Q with conj), where Q = H_0 ... H_{k-1} (order m) is given as geqrf
 *       leaves it: reflector j in column j of V below the diagonal (the
 *       diagonal and above are not read), k <= min(m, p). The right-hand
 *       forms (C Q, C Q^T) are these on the transposed view C^T.
 *   LINALG_EIGH             outputs [W (..., n), V (..., n, n)]  scalars [upper, compute_v]
 *       Symmetric eigendecomposition A = V diag(W) V^T: below n = 64 by
 *       cyclic Jacobi rotations (accurate to the last bits of the smallest
 *       eigenvalues, O(n^3) per sweep), from n = 64 by Householder
 *       tridiagonalisation and implicit QL in double (eigh.c). V holds A on
 *       entry, of which only the lower (or upper) triangle is read; W gets
 *       the eigenvalues in ascending order, as LAPACK's syevd returns them,
 *       and V the orthonormal eigenvectors in its columns when compute_v
 *       (V is scratch otherwise). Signs of the columns are not LAPACK's.
 *       Complex (Hermitian) V: A = V diag(W) V^H with W real (float32 for
 *       complex64): complex Jacobi rotations below n = 64, from there the
 *       Householder reduction to a real tridiagonal form (as zhetrd) and
 *       the same QL; the diagonal's imaginary parts are not read; column
 *       phases are not LAPACK's.
 *   LINALG_SVD              outputs [S (..., k), U (..., m, ku), Vh (..., kv, n)]
 *                           inputs [A (..., m, n)]  scalars [full_matrices]
 *       A = U diag(S) Vh, k = min(m, n), by Householder QR of A (or A^T
 *       when wide) and one-sided Jacobi rotations of R's columns, computed
 *       in double for both dtypes (svd.c). S descends, as LAPACK returns
 *       it; ku = kv = k, or ku = m and kv = n when full_matrices. U and Vh
 *       are optional (1 output S and the input A: singular values only).
 *       Columns of zero singular values are completed to an orthonormal
 *       basis; signs are not LAPACK's. A non-finite A gives NaN results.
 *       Complex A: S real (float32 for complex64), U and Vh unitary,
 *       computed in complex128; unit phases of the pairs are not LAPACK's.
 *   LINALG_LSTSQ            outputs [X (..., max(m, n), k), info (...) int32,
 *                                    rank (...) int64, S (..., min(m, n))]
 *                           inputs [A (..., m, n)]  scalars [driver, rcond]
 *       Least squares min ||A X - B|| as LAPACK's drivers (0 gels, 1 gelsy,
 *       2 gelsd, 3 gelss; lstsq.c): X holds B in its first m rows on entry
 *       and the solution in its first n rows on exit; when m > n (gels, or
 *       the SVD drivers at full rank) rows n..m-1 hold values whose squares
 *       sum to each column's residual. gels needs full rank (info = the
 *       1-based index of a zero on R's diagonal; X is then left as it was);
 *       the others give the minimum-norm solution of the effective rank
 *       and write it to rank: gelsy the rank of a column-pivoted QR by
 *       incremental condition estimation of R (as LAPACK's gelsy), gelsd
 *       and gelss #{s_i > rcond s_1} from the SVD, with the singular
 *       values in S (rcond < 0: the dtype's eps). info, rank and S may be
 *       empty (not written). Complex A as LAPACK's z-drivers (Q^H, A^H;
 *       S real), computed in complex128; gelsy's pivoted QR unblocked.
 *   LINALG_MATRIX_EXP       outputs [E (..., n, n)]  inputs [A (..., n, n)]
 *       E = exp(A) by scaling and squaring with the diagonal Pade
 *       approximant of degree 3, 5, 7, 9 or 13 chosen by ||A||_1 (Higham
 *       2005; matrix_exp.c), computed in double for both dtypes, the
 *       products on the runtime's GEMM. A non-finite A gives NaN.
 *   LINALG_LDL_FACTOR       outputs [LD (..., n, n), pivots (..., n) int32, info (...) int32]
 *       A = L D L^T (L carrying the interchanges) as LAPACK's sytrf with uplo 'L' (Bunch-Kaufman
 *       diagonal pivoting with 1x1 and 2x2 blocks; ldl.c): LD holds A on
 *       entry, of which only the lower triangle is read; on exit L below
 *       the diagonal (unit diagonal not stored), D's diagonal and 2x2
 *       off-diagonal entries in place, zeros above. pivots in LAPACK's
 *       convention: k (1-based) for a 1x1 block at k whose rows k and
 *       pivots[k] were interchanged, equal negative -p for both rows of a
 *       2x2 block whose second row was interchanged with p. info is 0, or
 *       the first k with a zero D block (the factorisation completes).
 *       info may be empty (not written). Optional scalar [hermitian]
 *       (default 0): complex A = L D L^H as hetrf (|re| of diagonal
 *       entries, whose imaginary parts are not read; D's diagonal real);
 *       otherwise complex A = L D L^T as sytrf. Complex: unblocked, in
 *       complex128.
 *   LINALG_LDL_SOLVE        outputs [X (..., n, k)]  inputs [LD (..., n, n), pivots (..., n) int32]
 *                           scalars [hermitian (optional, 0)]
 *       X holds B on entry; solves A X = B for A factored as
 *       LINALG_LDL_FACTOR leaves it (as sytrs, or hetrs when hermitian).
 *       Pivots that no factorisation writes are an error, not a wild access.
 *   LINALG_EIG              outputs [W (..., n) complex, info (...) int32, V (..., n, n) complex
 *                                    (optional)]  inputs [A (..., n, n)]
 *       General eigendecomposition A V = V diag(W) as LAPACK's geev
 *       (eig.h): balancing, Hessenberg reduction, shifted QR to Schur form
 *       (Francis double shifts for real A: exactly conjugate pairs,
 *       positive imaginary part first), eigenvectors by back substitution,
 *       in double for every dtype. W and V are complex64 for float32 or
 *       complex64 A, complex128 otherwise; each column of V has unit
 *       2-norm, complex ones their largest component real. info is 0, or
 *       1 + the row where the QR iteration did not converge (W and V NaN).
 */
#ifndef NEURONRT_OPS_LINALG_H
#define NEURONRT_OPS_LINALG_H

#define NRT_LINALG_OPS(X)                           \
  X(LINALG_LU_FACTOR, linalg_lu_factor)             \
  X(LINALG_LU_PIVOT, linalg_lu_pivot)               \
  X(LINALG_TRIANGULAR_SOLVE, linalg_triangular_solve) \
  X(LINALG_CHOLESKY, linalg_cholesky)                 \
  X(LINALG_GEQRF, linalg_geqrf)                       \
  X(LINALG_ORMQR, linalg_ormqr)                       \
  X(LINALG_EIGH, linalg_eigh)                         \
  X(LINALG_SVD, linalg_svd)                           \
  X(LINALG_LSTSQ, linalg_lstsq)                       \
  X(LINALG_MATRIX_EXP, linalg_matrix_exp)             \
  X(LINALG_LDL_FACTOR, linalg_ldl_factor)             \
  X(LINALG_LDL_SOLVE, linalg_ldl_solve)             \
  X(LINALG_EIG, linalg_eig)

#endif
