/* SORT: a stable sort of every slice along one dim (see sort_keys.h for
 * the order). Each slice is turned into (key, index) pairs, radix sorted,
 * and written back: values by inverting the sorted keys (reading the
 * input only where a key stands for several bit patterns: zeros, NaNs, so
 * -0.0 and NaN payloads come out exactly as they went in), indices as
 * int64. Many short slices are spread across threads; a long slice is
 * sorted by all threads together. */
#include <stdatomic.h>
#include <stdlib.h>
#include "shape_common.h"
#include "sort_keys.h"
#include "thread_pool.h"

/* Slices at least this long are sorted one at a time by the whole pool. */
#define LONG_SLICE (1 << 17)

typedef struct sort_job {
  rt_slices slices; /* operands: values, indices, in */
  char *values, *indices;
  const char *in;
  int64_t n, values_stride, indices_stride, in_stride; /* bytes */
  nrt_dtype dtype;
  int descending, wide;
  atomic_int out_of_memory;
} sort_job;

/* Scratch for one slice: keys and indices, twice. */
typedef struct sort_scratch {
  void *keys[2];
  uint32_t *idx[2];
} sort_scratch;

static int scratch_alloc(sort_scratch *s, int64_t n, int wide) {
  size_t key_bytes = (size_t)n * (wide ? 8 : 4);
  s->keys[0] = malloc(key_bytes);
  s->keys[1] = malloc(key_bytes);
  s->idx[0] = malloc((size_t)n * 4);
  s->idx[1] = malloc((size_t)n * 4);
  return s->keys[0] && s->keys[1] && s->idx[0] && s->idx[1];
}

static void scratch_free(sort_scratch *s) {
  for (int k = 0; k < 2; k++) free(s->keys[k]), free(s->idx[k]);
}

/* Sorts slice r with the scratch; returns which half of the scratch holds
 * the sorted pairs. */
static int sort_slice(const sort_job *j, const sort_scratch *s, int64_t r,
                                  int parallel) {
  const char *in = j->in + rt_slices_offset(&j->slices, 2, r);
  for (int64_t i = 0; i < j->n; i++) s->idx[0][i] = (uint32_t)i;
  int swapped;
  if (j->wide) {
    rt_make_keys64(j->dtype, in, j->in_stride, j->n, j->descending, s->keys[0]);
    swapped = rt_sort_pairs64(s->keys[0], s->idx[0], s->keys[1], s->idx[1], j->n, parallel);
  } else {
    rt_make_keys32(j->dtype, in, j->in_stride, j->n, j->descending, s->keys[0]);
    swapped = rt_sort_pairs32(s->keys[0], s->idx[0], s->keys[1], s->idx[1], j->n, parallel);
  }
  return swapped;
}

static void write_slice(const sort_job *j, int64_t r, const void *keys, const uint32_t *idx,
                        int64_t begin, int64_t end) {
  char *values = j->values + rt_slices_offset(&j->slices, 0, r) + begin * j->values_stride;
  char *indices = j->indices + rt_slices_offset(&j->slices, 1, r);
  const char *in = j->in + rt_slices_offset(&j->slices, 2, r);
  if (j->wide)
    rt_values_from_keys64(j->dtype, (const uint64_t *)keys + begin, idx + begin, j->descending,
                          in, j->in_stride, values, j->values_stride, end - begin);
  else
    rt_values_from_keys32(j->dtype, (const uint32_t *)keys + begin, idx + begin, j->descending,
                          in, j->in_stride, values, j->values_stride, end - begin);
  for (int64_t i = begin; i < end; i++)
    *(int64_t *)(indices + i * j->indices_stride) = idx[i];
}

static void sort_slices(int64_t begin, int64_t end, void *arg) {
  sort_job *j = arg;
  sort_scratch s;
  if (!scratch_alloc(&s, j->n, j->wide)) {
    atomic_store(&j->out_of_memory, 1);
    scratch_free(&s);
    return;
  }
  for (int64_t r = begin; r < end; r++) {
    int half = sort_slice(j, &s, r, 0);
    write_slice(j, r, s.keys[half], s.idx[half], 0, j->n);
  }
  scratch_free(&s);
}

typedef struct write_job {
  const sort_job *sort;
  int64_t slice;
  const void *keys;
  const uint32_t *idx;
} write_job;

static void write_range(int64_t begin, int64_t end, void *arg) {
  const write_job *w = arg;
  write_slice(w->sort, w->slice, w->keys, w->idx, begin, end);
}

nrt_status rt_kernel_sort(const nrt_op *op) {
  nrt_status st = rt_check_arity(op, 3, 2);
  if (st) return st;
  const nrt_tensor_view *values = &op->operands[0], *indices = &op->operands[1],
                        *in = &op->operands[2];
  int64_t dim = rt_scalar_int(op, 0);
  if (!rt_same_shape(values, in) || !rt_same_shape(indices, in) || values->dtype != in->dtype ||
      indices->dtype != NRT_INT64)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "sort: values must match the input's shape and dtype, indices its shape as int64");
  if (in->ndim == 0 ? dim != 0 : dim < 0 || dim >= in->ndim)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "sort: dim %lld out of range for %d dims",
                   (long long)dim, in->ndim);
  if (nrt_view_numel(in) == 0) return NRT_SUCCESS;
  sort_job j;
  const nrt_tensor_view *views[3] = {values, indices, in};
  rt_slices_init(&j.slices, 3, views, in->ndim == 0 ? -1 : (int)dim);
  j.n = in->ndim == 0 ? 1 : in->shape[dim];
  if (j.n > (int64_t)UINT32_MAX)
    return rt_fail(NRT_ERROR_UNSUPPORTED, "sort: slices longer than %u elements are not supported",
                   UINT32_MAX);
  int64_t elem = (int64_t)nrt_dtype_size(in->dtype);
  j.values = values->data;
  j.indices = indices->data;
  j.in = in->data;
  j.values_stride = in->ndim ? values->strides[dim] * elem : 0;
  j.indices_stride = in->ndim ? indices->strides[dim] * 8 : 0;
  j.in_stride = in->ndim ? in->strides[dim] * elem : 0;
  j.dtype = in->dtype;
  j.descending = rt_scalar_int(op, 1) != 0;
  j.wide = rt_key_is_wide(in->dtype);
  atomic_init(&j.out_of_memory, 0);
  if (j.n < LONG_SLICE) {
    int64_t grain = j.n >= 16384 ? 1 : 16384 / j.n;
    rt_parallel_for(j.slices.count, grain, sort_slices, &j);
  } else {
    sort_scratch s;
    if (!scratch_alloc(&s, j.n, j.wide)) {
      scratch_free(&s);
      atomic_store(&j.out_of_memory, 1);
    } else {
      for (int64_t r = 0; r < j.slices.count; r++) {
        int half = sort_slice(&j, &s, r, 1);
        write_job w = {&j, r, s.keys[half], s.idx[half]};
        rt_parallel_for(j.n, 1 << 16, write_range, &w);
      }
      scratch_free(&s);
    }
  }
  if (atomic_load(&j.out_of_memory))
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "sort: out of host memory for the sort's scratch");
  return NRT_SUCCESS;
}
