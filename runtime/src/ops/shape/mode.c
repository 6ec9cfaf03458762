/* MODE: the most frequent value of each slice along dim, as PyTorch's CPU
 * kernel defines it. The slice is sorted (here stably, by the sort keys)
 * and split into runs of equal values: NaN equals nothing (the CPU compares
 * with !=), so each NaN is a run of its own; -0.0 and 0.0 are one value.
 * The longest run wins, the first of equally long ones (the smallest
 * value); the value and index written are those of the run's last element,
 * which after a stable sort is the value's last occurrence in the slice. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "ops/engine/scalar_types.h"
#include "ops/engine/thread_pool.h"
#include "ops/shape/shape_common.h"
#include "ops/shape/sort_keys.h"

typedef struct mode_job {
  rt_slices slices; /* operands: values, indices, in */
  char *values, *indices;
  const char *in;
  int64_t n, in_stride; /* stride in bytes */
  nrt_dtype dtype;
  int wide;
  atomic_int out_of_memory;
} mode_job;

/* The index (into the slice) of the mode, from its sorted (key, index)
 * pairs: the last element of the first longest run. */
#define DEFINE_MODE_OF(K, SUFFIX)                                                   \
  static uint32_t mode_of_##SUFFIX(const mode_job *j, const char *in, const K *keys, \
                                   const uint32_t *idx) {                          \
    int64_t best_len = 0, run = 0;                                                 \
    uint32_t best = 0;                                                             \
    for (int64_t i = 0; i < j->n; i++) {                                           \
      run++;                                                                       \
      int ends = i + 1 == j->n || keys[i + 1] != keys[i] ||                        \
                 rt_elem_is_nan(j->dtype, in + (int64_t)idx[i] * j->in_stride);            \
      if (!ends) continue;                                                         \
      if (run > best_len) best_len = run, best = idx[i];                           \
      run = 0;                                                                     \
    }                                                                              \
    return best;                                                                   \
  }

DEFINE_MODE_OF(uint32_t, 32)
DEFINE_MODE_OF(uint64_t, 64)

static void mode_slices(int64_t begin, int64_t end, void *arg) {
  mode_job *j = arg;
  size_t key = j->wide ? 8 : 4, n = (size_t)j->n;
  void *keys[2] = {malloc(n * key), malloc(n * key)};
  uint32_t *idx[2] = {malloc(n * 4), malloc(n * 4)};
  if (!keys[0] || !keys[1] || !idx[0] || !idx[1]) {
    atomic_store(&j->out_of_memory, 1);
  } else {
    int64_t elem = (int64_t)nrt_dtype_size(j->dtype);
    for (int64_t r = begin; r < end; r++) {
      const char *in = j->in + rt_slices_offset(&j->slices, 2, r);
      for (int64_t i = 0; i < j->n; i++) idx[0][i] = (uint32_t)i;
      uint32_t at;
      if (j->wide) {
        rt_make_keys64(j->dtype, in, j->in_stride, j->n, 0, keys[0]);
        int s = rt_sort_pairs64(keys[0], idx[0], keys[1], idx[1], j->n, 0);
        at = mode_of_64(j, in, keys[s], idx[s]);
      } else {
        rt_make_keys32(j->dtype, in, j->in_stride, j->n, 0, keys[0]);
        int s = rt_sort_pairs32(keys[0], idx[0], keys[1], idx[1], j->n, 0);
        at = mode_of_32(j, in, keys[s], idx[s]);
      }
      memcpy(j->values + rt_slices_offset(&j->slices, 0, r), in + (int64_t)at * j->in_stride,
             (size_t)elem);
      *(int64_t *)(j->indices + rt_slices_offset(&j->slices, 1, r)) = at;
    }
  }
  free(keys[0]), free(keys[1]), free(idx[0]), free(idx[1]);
}

/* Operands [values, indices (int64), in]; values/indices have size 1 along
 * dim. scalars [dim]. */
nrt_status rt_kernel_mode(const nrt_op *op) {
  const char *name = nrt_op_name(op->code);
  nrt_status st = rt_check_arity(op, 3, 1);
  if (st) return st;
  const nrt_tensor_view *values = &op->operands[0], *indices = &op->operands[1],
                        *in = &op->operands[2];
  int64_t dim = rt_scalar_int(op, 0);
  st = rt_check_selection(op, dim, 1);
  if (st) return st;
  mode_job j;
  j.n = in->ndim == 0 ? 1 : in->shape[dim];
  if (j.n > (int64_t)UINT32_MAX)
    return rt_fail(NRT_ERROR_UNSUPPORTED, "%s: slices longer than %u elements are not supported",
                   name, UINT32_MAX);
  if (nrt_view_numel(values) == 0 || j.n == 0) return NRT_SUCCESS;
  const nrt_tensor_view *views[3] = {values, indices, in};
  rt_slices_init(&j.slices, 3, views, in->ndim == 0 ? -1 : (int)dim);
  j.values = values->data;
  j.indices = indices->data;
  j.in = in->data;
  j.in_stride = in->ndim ? in->strides[dim] * (int64_t)nrt_dtype_size(in->dtype) : 0;
  j.dtype = in->dtype;
  j.wide = rt_key_is_wide(in->dtype);
  atomic_init(&j.out_of_memory, 0);
  int64_t grain = j.n >= 16384 ? 1 : 16384 / j.n;
  rt_parallel_for(j.slices.count, grain, mode_slices, &j);
  if (atomic_load(&j.out_of_memory))
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for scratch", name);
  return NRT_SUCCESS;
}
