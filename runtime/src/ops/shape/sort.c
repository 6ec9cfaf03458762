/* SORT: a stable sort of every slice along one dim (see sort_keys.h for
 * the order). Each slice is turned into (key, index) pairs, radix sorted,
 * and written back: values by inverting the sorted keys (reading the
 * input only where a key stands for several bit patterns: zeros, NaNs, so
 * -0.0 and NaN payloads come out exactly as they went in), indices as
 * int64. Many short slices are spread across threads; a long slice is
 * sorted by all threads together. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "ops/shape/shape_common.h"
#include "ops/shape/sort_keys.h"
#include "ops/engine/thread_pool.h"

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

/* Sorts the n elements at in (byte stride in_stride) with the scratch;
 * returns which half of the scratch holds the sorted pairs. */
static int sort_elements(const sort_job *j, const sort_scratch *s, const char *in,
                         int64_t in_stride, int parallel) {
  for (int64_t i = 0; i < j->n; i++) s->idx[0][i] = (uint32_t)i;
  if (j->wide) {
    rt_make_keys64(j->dtype, in, in_stride, j->n, j->descending, s->keys[0]);
    return rt_sort_pairs64(s->keys[0], s->idx[0], s->keys[1], s->idx[1], j->n, parallel);
  }
  rt_make_keys32(j->dtype, in, in_stride, j->n, j->descending, s->keys[0]);
  return rt_sort_pairs32(s->keys[0], s->idx[0], s->keys[1], s->idx[1], j->n, parallel);
}

static int sort_slice(const sort_job *j, const sort_scratch *s, int64_t r, int parallel) {
  return sort_elements(j, s, j->in + rt_slices_offset(&j->slices, 2, r), j->in_stride, parallel);
}

/* Sorted values of n keys to dst (byte stride dst_stride); src is the input
 * slice the keys were made from. */
static void write_values(const sort_job *j, const void *keys, const uint32_t *idx,
                         const char *src, int64_t src_stride, char *dst, int64_t dst_stride,
                         int64_t n) {
  if (j->wide)
    rt_values_from_keys64(j->dtype, keys, idx, j->descending, src, src_stride, dst, dst_stride, n);
  else
    rt_values_from_keys32(j->dtype, keys, idx, j->descending, src, src_stride, dst, dst_stride, n);
}

static void write_slice(const sort_job *j, int64_t r, const void *keys, const uint32_t *idx,
                        int64_t begin, int64_t end) {
  char *values = j->values + rt_slices_offset(&j->slices, 0, r) + begin * j->values_stride;
  char *indices = j->indices + rt_slices_offset(&j->slices, 1, r);
  const char *in = j->in + rt_slices_offset(&j->slices, 2, r);
  const char *key_at = (const char *)keys + begin * (j->wide ? 8 : 4);
  write_values(j, key_at, idx + begin, in, j->in_stride, values, j->values_stride, end - begin);
  for (int64_t i = begin; i < end; i++)
    *(int64_t *)(indices + i * j->indices_stride) = idx[i];
}

/* ---- tiles of neighbouring slices ------------------------------------------
 * When the slices run across memory (sorting along a dim that is not the
 * innermost) but neighbouring slices are neighbouring elements, a slice
 * alone would touch a cache line per element. TILE neighbours are instead
 * read row by row into contiguous scratch, sorted there, and written back
 * row by row, so each line is loaded once for all of them. */

#define TILE 16

typedef struct tile_scratch {
  char *in, *values; /* TILE slices of n elements, slice after slice */
  uint32_t *idx;
} tile_scratch;

/* The slices run across memory while the innermost outer dim has unit
 * stride in every operand and room for a tile. */
static int tiled_layout(const sort_job *j) {
  const rt_slices *sl = &j->slices;
  int64_t elem = (int64_t)nrt_dtype_size(j->dtype);
  if (sl->ndim == 0 || j->in_stride == elem) return 0;
  int d = sl->ndim - 1;
  return sl->strides[0][d] == elem && sl->strides[1][d] == 8 && sl->strides[2][d] == elem &&
         sl->shape[d] >= TILE;
}

/* Slices r .. r + TILE - 1 are in [r, end) and neighbours in memory. */
static int tileable(const sort_job *j, int64_t r, int64_t end) {
  int64_t inner = j->slices.shape[j->slices.ndim - 1];
  return r + TILE <= end && r % inner + TILE <= inner;
}

#define TRANSPOSE_IN(T)                                                         \
  for (int64_t i = 0; i < n; i++) {                                             \
    const T *row = (const T *)(in + i * j->in_stride);                         \
    for (int b = 0; b < TILE; b++) ((T *)t->in)[b * n + i] = row[b];            \
  }
#define TRANSPOSE_OUT(T)                                                        \
  for (int64_t i = 0; i < n; i++) {                                             \
    T *row = (T *)(values + i * j->values_stride);                              \
    for (int b = 0; b < TILE; b++) row[b] = ((const T *)t->values)[b * n + i];  \
  }

static void sort_tile(const sort_job *j, const sort_scratch *s, const tile_scratch *t, int64_t r) {
  int64_t n = j->n, elem = (int64_t)nrt_dtype_size(j->dtype);
  const char *in = j->in + rt_slices_offset(&j->slices, 2, r);
  char *values = j->values + rt_slices_offset(&j->slices, 0, r);
  char *indices = j->indices + rt_slices_offset(&j->slices, 1, r);
  switch (elem) {
    case 1: TRANSPOSE_IN(uint8_t) break;
    case 2: TRANSPOSE_IN(uint16_t) break;
    case 4: TRANSPOSE_IN(uint32_t) break;
    default: TRANSPOSE_IN(uint64_t) break;
  }
  for (int b = 0; b < TILE; b++) {
    const char *src = t->in + b * n * elem;
    int half = sort_elements(j, s, src, elem, 0);
    write_values(j, s->keys[half], s->idx[half], src, elem, t->values + b * n * elem, elem, n);
    memcpy(t->idx + b * n, s->idx[half], (size_t)n * 4);
  }
  switch (elem) {
    case 1: TRANSPOSE_OUT(uint8_t) break;
    case 2: TRANSPOSE_OUT(uint16_t) break;
    case 4: TRANSPOSE_OUT(uint32_t) break;
    default: TRANSPOSE_OUT(uint64_t) break;
  }
  for (int64_t i = 0; i < n; i++) {
    int64_t *row = (int64_t *)(indices + i * j->indices_stride);
    for (int b = 0; b < TILE; b++) row[b] = t->idx[b * n + i];
  }
}

static void sort_slices(int64_t begin, int64_t end, void *arg) {
  sort_job *j = arg;
  sort_scratch s;
  int64_t elem = (int64_t)nrt_dtype_size(j->dtype);
  int tiles = tiled_layout(j);
  size_t tile_bytes = tiles ? (size_t)(TILE * j->n) : 0;
  tile_scratch t = {malloc(tile_bytes * (size_t)elem + 1), malloc(tile_bytes * (size_t)elem + 1),
                    malloc(tile_bytes * 4 + 1)};
  if (!scratch_alloc(&s, j->n, j->wide) || !t.in || !t.values || !t.idx) {
    atomic_store(&j->out_of_memory, 1);
  } else {
    for (int64_t r = begin; r < end;) {
      if (tiles && tileable(j, r, end)) {
        sort_tile(j, &s, &t, r);
        r += TILE;
        continue;
      }
      int half = sort_slice(j, &s, r, 0);
      write_slice(j, r, s.keys[half], s.idx[half], 0, j->n);
      r++;
    }
  }
  scratch_free(&s);
  free(t.in), free(t.values), free(t.idx);
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
