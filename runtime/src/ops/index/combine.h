/* Typed loops that combine source elements into destination elements: the
 * reductions of the scatter-like kernels (and embedding backward's sums),
 * for every dtype, in the form the index walk calls them (index_walk.h),
 * with the direct side the source and the indexed side the destination.
 *
 * Arithmetic follows PyTorch's CPU kernels: integers wrap, bool sums are
 * "or" and products "and", float16/bfloat16 compute in float and round on
 * every store, amax/amin propagate NaN, and the mean of integers rounds
 * toward negative infinity.
 */
#ifndef NEURONRT_OPS_COMBINE_H
#define NEURONRT_OPS_COMBINE_H

#include "ops/index/index_walk.h"

/* What a part's ctx points at. */
typedef struct rt_combine_args {
  double alpha;           /* SUM: dst += alpha * src (in float for float16/bfloat16) */
  int64_t alpha_int;      /* the same for integer dtypes */
  unsigned char value[8]; /* FILL: the value stored, in dst's dtype */
} rt_combine_args;

typedef struct rt_combine {
  rt_index_run_fn run;
  rt_index_batch_fn batch;
} rt_combine;

/* Loops for a reduction (ASSIGN copies). MEAN sums and counts each
 * destination's contributions in part->local, an int64_t array indexed by
 * (address - part->lo) / element size. run is NULL where the pair is not
 * supported (MEAN of bool). */
rt_combine rt_combine_loops(nrt_dtype dtype, nrt_index_reduce reduce);

/* Loops that store args->value into every destination visited. */
rt_combine rt_fill_loops(size_t elem_size);

/* The reduction's identity in dtype (0, 1, lowest, highest) into out. */
void rt_combine_identity(nrt_dtype dtype, nrt_index_reduce reduce, void *out);

/* Ends a MEAN over elems destination elements starting at lo: each element
 * with counts[i] > 0 becomes its sum divided by counts[i] + include_self. */
void rt_combine_mean_finish(nrt_dtype dtype, char *lo, int64_t elems, const int64_t *counts,
                            int include_self);

#endif
