/* Shape ops (see op_list.h): data movement, factories, sorting. Scalars are
 * integers (.i) unless marked float (.f). A negative or out-of-range dim is
 * an error: the caller wraps dims.
 *
 *   CAT        operands [out, in_1 .. in_k] (k <= 7)   scalars [dim, offset]
 *              in_j is written to out narrowed along dim at offset plus the
 *              sizes of in_1 .. in_{j-1}; inputs may have any dtype and are
 *              converted to out's (PyTorch's rules). Inputs with no elements
 *              are skipped; the caller drops legacy 1-d empty inputs.
 *   ROLL       operands [out, in]  scalars [dim_1, shift_1, ..., dim_k, shift_k]
 *              (k <= 4) out = in rolled by shift_j along dim_j (same shape
 *              and dtype); shifts are taken modulo the size.
 *   TRIL TRIU  operands [out, in]  scalars [diagonal]
 *              over the last two dims: elements on and below (TRIL) or on and
 *              above (TRIU) the diagonal are copied, the others become 0. out
 *              may be in itself.
 *   TRIL_INDICES TRIU_INDICES  operands [out (2, count), int32 or int64]
 *              scalars [rows, cols, offset]
 *              the (row, column) coordinates of the lower (upper) triangle
 *              of a rows x cols matrix, row by row; count must be the
 *              triangle's size.
 *   ARANGE     operands [out] (1-d)  scalars [start, step] (float or int)
 *              out[i] = start + step * i, computed as PyTorch's CPU kernel
 *              does: in double for float32/float64, in float for the 16-bit
 *              floats, in int64 for integers, then cast.
 *   LINSPACE   operands [out] (1-d)  scalars [start, end] (as out's dtype)
 *              steps = numel; the first half counts up from start, the
 *              second half down from end, as PyTorch's CPU kernel does.
 *   LOGSPACE   operands [out] (1-d)  scalars [start, end, base]
 *              out[i] = base ^ (linspace value i), PyTorch's CPU formula.
 *   SORT       operands [values, indices (int64), in]  scalars [dim, descending]
 *              a stable sort of every slice along dim; NaN is greater than
 *              every number (last ascending, first descending), -0.0 == 0.0.
 *   TOPK       operands [values, indices (int64), in]  scalars [dim, k, largest]
 *              the k largest (or smallest) of each slice, in sorted order;
 *              equal values are taken and listed in index order. NaN is the
 *              largest value.
 *   KTHVALUE   operands [values, indices (int64), in]  scalars [dim, k, nan_mode]
 *              values/indices have size 1 along dim: the k-th smallest
 *              (1-based) of each slice, with the same order as TOPK.
 *              nan_mode 0: NaN is the largest value (kthvalue);
 *              1: a slice holding NaN gives NaN and its first NaN's index,
 *              otherwise k is (n - 1) / 2 + 1 (median);
 *              2: NaNs are ignored, k is (non-NaN count - 1) / 2 + 1, and
 *              an all-NaN slice gives its first NaN (nanmedian).
 *   MODE       operands [values, indices (int64), in]  scalars [dim]
 *              values/indices have size 1 along dim: the most frequent
 *              value of each slice, the smallest of equally frequent ones,
 *              and its last index; NaN equals nothing, -0.0 == 0.0.
 *   SORT_ROWS  operands [values (n, m), indices (int64, n), in (n, m)]
 *              the rows of in in stable lexicographic order (elements
 *              ordered as SORT ascending); values are the sorted rows,
 *              indices their row numbers in in. scalars [cpu_order]
 *              (optional, 0 by default): 1 puts rows holding NaN in the
 *              order PyTorch's CPU unique(dim=) leaves them (its
 *              std::sort, where NaN orders neither way).
 *   UNIQUE_SCAN     operands [count (int64 0-d), inverse (int64, n), in (n) or
 *                   (n, m), perm (int64, n)]  scalars [has_inverse, has_perm]
 *              splits in into runs of equal items (elements, or rows of a
 *              2-d in; NaN equals nothing, -0.0 == 0.0); count = number of
 *              runs; inverse[perm[i]] (or inverse[i] without perm) = run
 *              number of item i. Absent operands are present as empty views.
 *   UNIQUE_COLLECT  operands [values (u) or (u, m), counts (int64, u), in (n)
 *                   or (n, m)]  scalars [has_counts]
 *              values[r] = first item of run r, counts[r] = its length;
 *              u must be the count UNIQUE_SCAN found.
 */
#ifndef NEURONRT_OPS_SHAPE_H
#define NEURONRT_OPS_SHAPE_H

#define NRT_SHAPE_OPS(X)          \
  X(CAT, cat)                     \
  X(ROLL, roll)                   \
  X(TRIL, tril)                   \
  X(TRIU, triu)                   \
  X(TRIL_INDICES, tril_indices)   \
  X(TRIU_INDICES, triu_indices)   \
  X(ARANGE, arange)               \
  X(LINSPACE, linspace)           \
  X(LOGSPACE, logspace)           \
  X(SORT, sort)                   \
  X(SORT_ROWS, sort_rows)         \
  X(TOPK, topk)                   \
  X(KTHVALUE, kthvalue)           \
  X(UNIQUE_SCAN, unique_scan)     \
  X(UNIQUE_COLLECT, unique_collect) \
  X(MODE, mode)

#endif
