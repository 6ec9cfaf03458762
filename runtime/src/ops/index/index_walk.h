/* The engine of indexed access, shared by the gather-like and scatter-like
 * kernels (see neuronrt/ops/index.h for their operands).
 *
 * A walk visits the positions of a shape S over a "direct" tensor (gather:
 * out; scatter: src), an "indexed" tensor restrided to S (stride 0 along the
 * dims the indices replace) and k index tensors broadcast to S. At each
 * position the indexed address moves by idx_j * step_j after a bounds check.
 * The walk reuses the iteration plan (dims coalesced, ordered by the direct
 * tensor's memory order) and hands the op's typed loops either a run, when no
 * index varies along the innermost dim (both sides then advance by fixed
 * strides, so whole rows copy or combine as vectors), or a batch of element
 * addresses.
 *
 * A part may be limited to indexed addresses in [lo, hi): a scatter kernel
 * gives each thread one address range of the destination, so that every
 * destination element is combined by one thread, in walk order, whatever
 * the number of threads.
 *
 * An index out of bounds raises a flag that stops every part. The kernel
 * then asks rt_index_walk_status, which finds the first bad index in walk
 * order on one thread (so the message never depends on timing).
 */
#ifndef NEURONRT_OPS_INDEX_WALK_H
#define NEURONRT_OPS_INDEX_WALK_H

#include <stdatomic.h>
#include "internal.h"
#include "ops/engine/iterate.h"

/* Elements per batch handed to an op's batch loop. */
#define RT_INDEX_BATCH 256

typedef struct rt_index_part rt_index_part;

/* n elements: direct ones at d + i * ds, indexed ones at x + i * xs. */
typedef void (*rt_index_run_fn)(rt_index_part *part, char *d, int64_t ds, char *x, int64_t xs,
                                int64_t n);
/* n elements: direct ones at d[i], indexed ones at x[i], in walk order. */
typedef void (*rt_index_batch_fn)(rt_index_part *part, char *const *d, char *const *x, int64_t n);

typedef struct rt_index_walk {
  const char *op;  /* for messages */
  int k;           /* index tensors */
  int wrap;        /* negative indices count from the end */
  int64_t bound[NRT_INDEX_MAX_TENSORS];
  int64_t step[NRT_INDEX_MAX_TENSORS]; /* bytes */
  int64_t dim[NRT_INDEX_MAX_TENSORS];  /* the indexed tensor's dim, for messages */
  nrt_dtype index_dtype[NRT_INDEX_MAX_TENSORS];
  size_t elem_size;                    /* of the direct and indexed tensors */
  rt_plan plan;                        /* operands: direct, indexed, idx_0, ... */
  char *extent_lo, *extent_hi;         /* every address the indexed side may touch */
  atomic_int failed;
} rt_index_walk;

struct rt_index_part {
  rt_index_walk *walk;
  rt_index_run_fn run;
  rt_index_batch_fn batch;
  void *ctx;       /* the op's shared state */
  void *local;     /* the part's own state */
  int filtered;    /* only indexed addresses in [lo, hi) are visited */
  char *lo, *hi;
};

/* The value of an index element of dtype t. */
static inline int64_t rt_index_load(const char *p, nrt_dtype t) {
  switch (t) {
    case NRT_INT64: return *(const int64_t *)p;
    case NRT_INT32: return *(const int32_t *)p;
    case NRT_INT16: return *(const int16_t *)p;
    case NRT_INT8: return *(const int8_t *)p;
    default: return *(const uint8_t *)p;
  }
}

/* Value v of index j made non-negative (wrapping if allowed), or -1 when it
 * is out of bounds. */
static inline int64_t rt_index_checked(const rt_index_walk *w, int j, int64_t v) {
  if (v < 0 && w->wrap) v += w->bound[j];
  return (uint64_t)v < (uint64_t)w->bound[j] ? v : -1;
}

/* Reads the op's operands: operands[direct] and operands[indexed] (one
 * dtype), operands[2] the geometry, operands[3...] the indices; the
 * message dims from scalars[dims_at...]. Validates shapes and dtypes. */
nrt_status rt_index_walk_init(rt_index_walk *w, const nrt_op *op, int direct, int indexed,
                              int dims_at, int wrap);

/* Visits positions [begin, end) of the walk order. Thread-safe for
 * disjoint parts. */
void rt_index_walk_range(rt_index_part *part, int64_t begin, int64_t end);

/* Calls the part's run loop on the elements of a run whose indexed address
 * lies in the part's range (all of them when the part is not filtered). */
void rt_index_run_clipped(rt_index_part *part, char *d, int64_t ds, char *x, int64_t xs, int64_t n);

/* NRT_SUCCESS, or NRT_ERROR_INDEX_OUT_OF_RANGE naming the first bad index
 * in walk order if a walk failed. */
nrt_status rt_index_walk_status(rt_index_walk *w);

#endif
