/* Indexing ops (see op_list.h).
 *
 * Gather-like ops: out[p] = src[p + sum_j idx_j[p] * stride_j].
 *   operands [out, src_r, geometry, idx_0, ..., idx_{k-1}], 1 <= k <= 5.
 *   out, src_r and every idx_j share one shape S. src_r is the source tensor
 *   restrided to S (stride 0 along the dims the indices replace); geometry is
 *   the k-d view of the source over its indexed dims, at the same address as
 *   src_r: its shape bounds idx_j, its strides step them. idx_j are integer
 *   tensors (uint8..int64) broadcast to S. out and src_r have one dtype.
 *   scalars [dim_0, ..., dim_{k-1}]: the source dim idx_j selects (messages).
 *   GATHER, INDEX_SELECT: an index must lie in [0, size).
 *   INDEX (advanced indexing), TAKE: negative indices count from the end.
 *
 * Scatter-like ops: dst[p + sum_j idx_j[p] * stride_j] = reduce(dst, src[p]).
 *   operands [dst_r, src, geometry, idx_0, ..., idx_{k-1}], as above with the
 *   roles swapped: dst_r is the destination restrided to S, src (possibly an
 *   immediate) has dst's dtype. Duplicate destinations combine in one fixed
 *   order, src's memory order (row-major when src is broadcast), whatever
 *   the thread count.
 *   scalars [reduce, include_self, alpha, dim_0, ..., dim_{k-1}]
 *     reduce        an nrt_index_reduce
 *     include_self  0: a destination that receives values forgets its old
 *                   value (scatter_reduce's include_self=False)
 *     alpha         SUM multiplies src by alpha (index_add)
 *   SCATTER, SCATTER_ADD, SCATTER_REDUCE, INDEX_ADD, INDEX_COPY: indices in
 *   [0, size). INDEX_PUT, INDEX_FILL, PUT: negative indices count from the
 *   end.
 *
 * Data-dependent sizes (the caller synchronises to learn them):
 *   NONZERO_COUNT  [counts: int64[1 + NRT_NONZERO_CHUNKS], x]
 *                  counts[0] = nonzero elements of x; counts[1 + c] = those in
 *                  chunk c of x's elements in row-major order (the chunking
 *                  depends on x's size only).
 *   NONZERO        [out: int64[m, ndim], x (, counts from NONZERO_COUNT(x))]
 *                  scalars [fill]: out rows are the coordinates of x's first m
 *                  nonzeros in row-major order; rows past the last are fill.
 *   MASKED_SELECT  [out: 1-d, x, mask: bool, counts from NONZERO_COUNT(mask)]
 *                  x and mask share one shape (broadcast with stride 0); out
 *                  has x's dtype and receives x where mask, in row-major order.
 *   INDEX_BOUNDS   [out: int64[2], x: integer, non-empty]  out = [min, max].
 *
 * Others:
 *   EMBEDDING_DENSE_BACKWARD  [grad_weight: [V, D], grad: [N, D], indices: [N]]
 *                  scalars [padding_idx, scale_grad_by_freq]: grad_weight =
 *                  sum of grad rows per index (rows with index padding_idx
 *                  skipped; divided by the index's count when scaling).
 *   SEARCHSORTED   [out: int32|int64 [R, N], sorted: [Rs, M], values: [R, N]
 *                  (, sorter: int64 [Rs, M])], Rs is 1 or R, sorted and values
 *                  of one dtype. scalars [right]: out = first position in the
 *                  row whose element is >= value (> value when right).
 */
#ifndef NEURONRT_OPS_INDEX_H
#define NEURONRT_OPS_INDEX_H

typedef enum nrt_index_reduce {
  NRT_INDEX_ASSIGN = 0,
  NRT_INDEX_SUM,
  NRT_INDEX_PROD,
  NRT_INDEX_MEAN,
  NRT_INDEX_AMAX,
  NRT_INDEX_AMIN
} nrt_index_reduce;

#define NRT_INDEX_MAX_TENSORS 5
#define NRT_NONZERO_CHUNKS 64

#define NRT_INDEX_OPS(X)                                   \
  X(GATHER, gather)                                        \
  X(INDEX_SELECT, index_select)                            \
  X(INDEX, index)                                          \
  X(TAKE, take)                                            \
  X(SCATTER, scatter)                                      \
  X(SCATTER_ADD, scatter_add)                              \
  X(SCATTER_REDUCE, scatter_reduce)                        \
  X(INDEX_ADD, index_add)                                  \
  X(INDEX_PUT, index_put)                                  \
  X(INDEX_COPY, index_copy)                                \
  X(INDEX_FILL, index_fill)                                \
  X(PUT, put)                                              \
  X(NONZERO_COUNT, nonzero_count)                          \
  X(NONZERO, nonzero)                                      \
  X(MASKED_SELECT, masked_select)                          \
  X(INDEX_BOUNDS, index_bounds)                            \
  X(EMBEDDING_DENSE_BACKWARD, embedding_dense_backward)    \
  X(SEARCHSORTED, searchsorted)

#endif
