/* Scatter-like kernels: SCATTER, SCATTER_ADD, SCATTER_REDUCE, INDEX_ADD,
 * INDEX_PUT, INDEX_COPY, INDEX_FILL and PUT, all
 * dst[p + sum_j idx_j[p] * stride_j] = reduce(dst, src[p]).
 *
 * Duplicate indices make the result depend on the order in which values
 * meet, so the order is fixed: every destination element belongs to one
 * thread (the destination's address span is cut into one range per thread)
 * and that thread walks all positions in walk order, combining only the
 * ones that land in its range. The result is then the same for any number
 * of threads, and equal to a serial walk. Each thread reads every index,
 * but each source element is read and each destination written once.
 *
 * include_self = 0 first stores the reduction's identity into every
 * destination that receives a value (as PyTorch does); MEAN then divides
 * each sum by its count of contributions (plus one with include_self).
 */
#include <stdlib.h>
#include "ops/index/combine.h"
#include "ops/engine/thread_pool.h"

typedef struct scatter_job {
  rt_index_walk *walk;
  rt_combine loops;
  rt_combine_args args;
  nrt_dtype dtype;
  nrt_index_reduce reduce;
  int include_self;
  int64_t owners;
  atomic_int out_of_memory;
} scatter_job;

/* Start of owner t's address range; owners cut the span at element bounds. */
static char *owner_start(const scatter_job *job, int64_t t) {
  const rt_index_walk *w = job->walk;
  if (t >= job->owners) return w->extent_hi;
  int64_t elems = (w->extent_hi - w->extent_lo) / (int64_t)w->elem_size;
  return w->extent_lo + (elems / job->owners * t + elems % job->owners * t / job->owners) *
                            (int64_t)w->elem_size;
}

/* Whole rows combined into rows chosen by one index: the plan is [rows, row]
 * with the row contiguous in the destination (and the source, unless it is
 * broadcast): index_add_ / index_put_ of table rows, scatter_add_ with an
 * expanded index. The destination rows ahead are prefetched for writing. */
#define PREFETCH_ROWS 16
#define PREFETCH_MAX_BYTES 1024

static int is_row_scatter(const rt_index_walk *w) {
  const rt_plan *p = &w->plan;
  int64_t size = (int64_t)w->elem_size;
  return w->k == 1 && p->ndim == 2 && p->strides[2][1] == 0 && p->strides[1][0] == 0 &&
         (p->strides[0][1] == size || p->strides[0][1] == 0) && p->strides[1][1] == size;
}

static void walk_rows(rt_index_part *part) {
  rt_index_walk *w = part->walk;
  const rt_plan *p = &w->plan;
  const int64_t rows = p->shape[0], width = p->shape[1];
  const int64_t src_stride = p->strides[0][0], src_inner = p->strides[0][1];
  const int64_t index_stride = p->strides[2][0], step = w->step[0];
  const int64_t row_bytes = width * (int64_t)w->elem_size;
  const int64_t ahead_bytes = row_bytes < PREFETCH_MAX_BYTES ? row_bytes : PREFETCH_MAX_BYTES;
  const nrt_dtype t = w->index_dtype[0];
  char *src = p->data[0], *dst = p->data[1];
  const char *index = p->data[2];
  for (int64_t r = 0; r < rows; r++) {
    if (r + PREFETCH_ROWS < rows) {
      int64_t ahead = rt_index_checked(w, 0, rt_index_load(index + (r + PREFETCH_ROWS) * index_stride, t));
      char *row = ahead >= 0 ? dst + ahead * step : NULL;
      if (row && row + row_bytes > part->lo && row < part->hi)
        for (int64_t b = 0; b < ahead_bytes; b += 64) __builtin_prefetch(row + b, 1);
    }
    int64_t v = rt_index_checked(w, 0, rt_index_load(index + r * index_stride, t));
    if (v < 0) {
      atomic_store_explicit(&w->failed, 1, memory_order_relaxed);
      return;
    }
    rt_index_run_clipped(part, src + r * src_stride, src_inner, dst + v * step, (int64_t)w->elem_size, width);
  }
}

static void walk_with(rt_index_part *part, rt_combine loops) {
  part->run = loops.run;
  part->batch = loops.batch;
  if (is_row_scatter(part->walk))
    walk_rows(part);
  else
    rt_index_walk_range(part, 0, part->walk->plan.numel);
}

static void scatter_owners(int64_t begin, int64_t end, void *arg) {
  scatter_job *job = arg;
  rt_index_part part = {.walk = job->walk, .ctx = &job->args, .filtered = 1,
                        .lo = owner_start(job, begin), .hi = owner_start(job, end)};
  if (part.lo >= part.hi) return;
  int reducing = job->reduce != NRT_INDEX_ASSIGN;
  if (reducing && !job->include_self) walk_with(&part, rt_fill_loops(job->walk->elem_size));
  int64_t elems = (part.hi - part.lo) / (int64_t)job->walk->elem_size;
  int64_t *counts = NULL;
  if (job->reduce == NRT_INDEX_MEAN) {
    counts = calloc((size_t)elems, sizeof *counts);
    if (!counts) {
      atomic_store(&job->out_of_memory, 1);
      return;
    }
    part.local = counts;
  }
  walk_with(&part, job->loops);
  if (counts) {
    if (!atomic_load_explicit(&job->walk->failed, memory_order_relaxed))
      rt_combine_mean_finish(job->dtype, part.lo, elems, counts, job->include_self);
    free(counts);
  }
}

static nrt_status run_scatter(const nrt_op *op, int wrap) {
  const char *name = nrt_op_name(op->code);
  if (op->num_outputs != 1 || op->num_scalars < 3)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects one output and 3 scalars", name);
  scatter_job job = {.reduce = (nrt_index_reduce)op->scalars[0].i,
                     .include_self = op->scalars[1].i != 0};
  if (job.reduce < NRT_INDEX_ASSIGN || job.reduce > NRT_INDEX_AMIN)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: unknown reduction %d", name, (int)job.reduce);
  rt_index_walk w;
  nrt_status s = rt_index_walk_init(&w, op, 1, 0, 3, wrap);
  if (s) return s;
  job.walk = &w;
  job.dtype = op->operands[0].dtype;
  job.loops = rt_combine_loops(job.dtype, job.reduce);
  if (!job.loops.run)
    return rt_fail(NRT_ERROR_UNSUPPORTED, "%s: this reduction is not implemented for dtype %s", name,
                   nrt_dtype_name(job.dtype));
  const nrt_scalar *alpha = &op->scalars[2];
  job.args.alpha = alpha->is_float ? alpha->f : (double)alpha->i;
  job.args.alpha_int = alpha->is_float ? (int64_t)alpha->f : alpha->i;
  rt_combine_identity(job.dtype, job.reduce, job.args.value);
  atomic_init(&job.out_of_memory, 0);
  int64_t span = (w.extent_hi - w.extent_lo) / (int64_t)w.elem_size;
  job.owners = w.plan.numel >= RT_PARALLEL_GRAIN && span >= 2 * rt_num_threads() ? rt_num_threads() : 1;
  rt_parallel_for(job.owners, 1, scatter_owners, &job);
  if (atomic_load(&job.out_of_memory))
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for the mean's counts", name);
  return rt_index_walk_status(&w);
}

nrt_status rt_kernel_scatter(const nrt_op *op) { return run_scatter(op, 0); }
nrt_status rt_kernel_scatter_add(const nrt_op *op) { return run_scatter(op, 0); }
nrt_status rt_kernel_scatter_reduce(const nrt_op *op) { return run_scatter(op, 0); }
nrt_status rt_kernel_index_add(const nrt_op *op) { return run_scatter(op, 0); }
nrt_status rt_kernel_index_put(const nrt_op *op) { return run_scatter(op, 1); }
nrt_status rt_kernel_index_copy(const nrt_op *op) { return run_scatter(op, 0); }
nrt_status rt_kernel_index_fill(const nrt_op *op) { return run_scatter(op, 1); }
nrt_status rt_kernel_put(const nrt_op *op) { return run_scatter(op, 1); }
