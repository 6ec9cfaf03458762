/* EMBEDDING_DENSE_BACKWARD: grad_weight[r] = sum of grad[i] over i with
 * indices[i] == r (r != padding_idx), each term divided by r's count when
 * scale_grad_by_freq.
 *
 * Each thread owns a block of grad_weight rows: it zeroes them, counts their
 * occurrences if scaling, then walks all indices in order and adds the grad
 * rows that land in its block. Every row therefore sums its terms in index
 * order, for any number of threads, and each grad row is read once. Every
 * thread checks every index, so each one stops at the same (first) bad
 * index, which is the one reported.
 */
#include <stdlib.h>
#include <string.h>
#include "ops/index/combine.h"
#include "ops/engine/thread_pool.h"
#include "ops/index/index_walk.h"

typedef struct embedding_job {
  const nrt_tensor_view *gw, *grad, *indices;
  int64_t padding_idx;
  int scale;
  int64_t owners;
  rt_combine sum;
  atomic_int failed;
  atomic_int out_of_memory;
  atomic_llong bad_value; /* every failing thread stores the same value */
} embedding_job;

static inline int64_t index_at(const nrt_tensor_view *v, int64_t i) {
  return rt_index_load((const char *)v->data + i * v->strides[0] * (int64_t)nrt_dtype_size(v->dtype),
                       v->dtype);
}

static void zero_rows(const nrt_tensor_view *gw, int64_t r0, int64_t r1) {
  int64_t size = (int64_t)nrt_dtype_size(gw->dtype), d = gw->shape[1];
  for (int64_t r = r0; r < r1; r++) {
    char *row = (char *)gw->data + r * gw->strides[0] * size;
    if (gw->strides[1] == 1) {
      memset(row, 0, (size_t)(d * size));
    } else {
      for (int64_t j = 0; j < d; j++) memset(row + j * gw->strides[1] * size, 0, (size_t)size);
    }
  }
}

static void owner_rows(int64_t begin, int64_t end, void *arg) {
  embedding_job *job = arg;
  const nrt_tensor_view *gw = job->gw, *grad = job->grad, *indices = job->indices;
  int64_t v = gw->shape[0], n = indices->shape[0], d = gw->shape[1];
  int64_t r0 = v * begin / job->owners, r1 = v * end / job->owners;
  int64_t size = (int64_t)nrt_dtype_size(gw->dtype);
  zero_rows(gw, r0, r1);
  int64_t *counts = NULL;
  if (job->scale && r1 > r0) {
    counts = calloc((size_t)(r1 - r0), sizeof *counts);
    if (!counts) {
      atomic_store(&job->out_of_memory, 1);
      return;
    }
    for (int64_t i = 0; i < n; i++) {
      int64_t r = index_at(indices, i);
      if (r >= r0 && r < r1) counts[r - r0]++;
    }
  }
  rt_combine_args args = {.alpha = 1.0, .alpha_int = 1};
  rt_index_part part = {.ctx = &args};
  for (int64_t i = 0; i < n; i++) {
    int64_t r = index_at(indices, i);
    if (r < 0 || r >= v) {
      atomic_store(&job->bad_value, r);
      atomic_store(&job->failed, 1);
      break;
    }
    if (r == job->padding_idx || r < r0 || r >= r1) continue;
    if (counts) {
      args.alpha = 1.0 / (double)counts[r - r0];
      args.alpha_int = (int64_t)args.alpha;
    }
    job->sum.run(&part, (char *)grad->data + i * grad->strides[0] * size, grad->strides[1] * size,
                 (char *)gw->data + r * gw->strides[0] * size, gw->strides[1] * size, d);
  }
  free(counts);
}

nrt_status rt_kernel_embedding_dense_backward(const nrt_op *op) {
  const char *name = "embedding_dense_backward";
  if (op->num_operands != 3 || op->num_outputs != 1 || op->num_scalars < 2)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects operands [grad_weight, grad, indices] and 2 scalars",
                   name);
  const nrt_tensor_view *gw = &op->operands[0], *grad = &op->operands[1], *indices = &op->operands[2];
  if (gw->ndim != 2 || grad->ndim != 2 || indices->ndim != 1 || grad->shape[0] != indices->shape[0] ||
      grad->shape[1] != gw->shape[1] || grad->dtype != gw->dtype ||
      indices->dtype < NRT_UINT8 || indices->dtype > NRT_INT64)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "%s: expects grad_weight [V, D], grad [N, D] of its dtype and integer indices [N]", name);
  embedding_job job = {.gw = gw, .grad = grad, .indices = indices, .padding_idx = op->scalars[0].i,
                       .scale = op->scalars[1].i != 0,
                       .sum = rt_combine_loops(gw->dtype, NRT_INDEX_SUM)};
  atomic_init(&job.failed, 0);
  atomic_init(&job.out_of_memory, 0);
  atomic_init(&job.bad_value, 0);
  int64_t work = nrt_view_numel(grad) + nrt_view_numel(gw);
  job.owners = work >= RT_PARALLEL_GRAIN && gw->shape[0] >= rt_num_threads() ? rt_num_threads() : 1;
  rt_parallel_for(job.owners, 1, owner_rows, &job);
  if (atomic_load(&job.out_of_memory))
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for the index counts", name);
  if (atomic_load(&job.failed))
    return rt_fail(NRT_ERROR_INDEX_OUT_OF_RANGE, "%s: index %lld is out of bounds for dimension 0 with size %lld",
                   name, (long long)atomic_load(&job.bad_value), (long long)gw->shape[0]);
  return NRT_SUCCESS;
}
