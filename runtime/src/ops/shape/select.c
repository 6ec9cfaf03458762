/* TOPK and KTHVALUE: selection by radix select, in linear time.
 *
 * For each slice, keys are made so that the wanted elements are the k
 * smallest (complemented for largest). The k-th smallest key T is found a
 * byte at a time from the top: a histogram of the candidates' byte picks
 * the bucket holding rank k, and only that bucket's keys stay candidates.
 * Then the slice is scanned in index order, taking every key below T and
 * the first (k - #below) keys equal to T: equal values are taken in index
 * order, deterministically. TOPK sorts the taken pairs by key (stable, so
 * ties stay in index order); KTHVALUE wants only the last of them. A TOPK
 * with k small against the slice keeps a heap of the best k instead. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "ops/engine/scalar_types.h"
#include "ops/shape/shape_common.h"
#include "ops/shape/sort_keys.h"
#include "ops/engine/thread_pool.h"

typedef struct select_job {
  rt_slices slices; /* operands: values, indices, in */
  char *values, *indices;
  const char *in;
  int64_t n, k, values_stride, indices_stride, in_stride; /* strides in bytes */
  nrt_dtype dtype;
  int largest, nan_mode, topk, wide;
  atomic_int out_of_memory;
} select_job;

typedef struct select_scratch {
  void *keys, *cand;     /* keys of the slice; candidates of the select */
  void *top_keys[2];     /* the k taken pairs and sort scratch (TOPK) */
  uint32_t *top_idx[2];
} select_scratch;

/* Finds the k-th smallest of keys[0, n) (1 <= k <= n), using cand (n
 * entries) as scratch; *equal_rank receives how many keys equal to it are
 * among the k smallest. */
#define DEFINE_SELECT(K, SUFFIX)                                                      \
  static K kth_key_##SUFFIX(const K *keys, K *cand, int64_t n, int64_t k,            \
                            int64_t *equal_rank) {                                   \
    const K *c = keys;                                                                \
    int64_t count = n;                                                                \
    K prefix = 0;                                                                     \
    for (int shift = 8 * (int)sizeof(K) - 8; shift >= 0; shift -= 8) {               \
      int64_t hist[256] = {0};                                                        \
      for (int64_t i = 0; i < count; i++) hist[(c[i] >> shift) & 0xff]++;            \
      int v = 0;                                                                      \
      while (k > hist[v]) k -= hist[v++];                                             \
      prefix |= (K)v << shift;                                                        \
      if (hist[v] != count) { /* keep only bucket v */                                \
        int64_t m = 0;                                                                \
        for (int64_t i = 0; i < count; i++)                                           \
          if (((c[i] >> shift) & 0xff) == (K)v) cand[m++] = c[i];                     \
        c = cand;                                                                     \
        count = m;                                                                    \
      }                                                                               \
    }                                                                                 \
    *equal_rank = k;                                                                  \
    return prefix;                                                                    \
  }                                                                                   \
                                                                                      \
  /* Takes the k smallest in index order into (top_keys, top_idx); returns the     \
   * index of the last one taken equal to the k-th key. */                           \
  static int64_t take_##SUFFIX(const K *keys, int64_t n, K kth, int64_t equal_rank,  \
                               K *top_keys, uint32_t *top_idx) {                     \
    int64_t m = 0, last = -1;                                                         \
    for (int64_t i = 0; i < n; i++) {                                                 \
      K key = keys[i];                                                                \
      if (key < kth || (key == kth && equal_rank > 0)) {                              \
        if (key == kth && --equal_rank == 0) last = i;                                \
        if (top_keys) top_keys[m] = key, top_idx[m] = (uint32_t)i;                    \
        m++;                                                                          \
      }                                                                               \
    }                                                                                 \
    return last;                                                                      \
  }

DEFINE_SELECT(uint32_t, 32)
DEFINE_SELECT(uint64_t, 64)

/* Small k: one scan keeping the k smallest (key, index) pairs seen so far
 * in a max-heap; a new element enters only if it beats the heap's largest,
 * which for most data is rare. Indices grow during the scan, so an equal
 * key never displaces an earlier one: the same k pairs as radix select.
 * The heap is then sorted in place into ascending (key, index) order. */
#define DEFINE_HEAP(K, SUFFIX)                                                         \
  static void sift_down_##SUFFIX(K *hk, uint32_t *hi, int64_t size, int64_t i) {      \
    for (;;) {                                                                         \
      int64_t big = i, l = 2 * i + 1, r = l + 1;                                       \
      if (l < size && (hk[l] > hk[big] || (hk[l] == hk[big] && hi[l] > hi[big]))) big = l; \
      if (r < size && (hk[r] > hk[big] || (hk[r] == hk[big] && hi[r] > hi[big]))) big = r; \
      if (big == i) return;                                                            \
      K tk = hk[i]; hk[i] = hk[big]; hk[big] = tk;                                     \
      uint32_t ti = hi[i]; hi[i] = hi[big]; hi[big] = ti;                              \
      i = big;                                                                         \
    }                                                                                  \
  }                                                                                    \
                                                                                       \
  static void heap_smallest_##SUFFIX(const K *keys, int64_t n, int64_t k, K *hk,      \
                                     uint32_t *hi) {                                   \
    for (int64_t i = 0; i < k; i++) { /* the first k, heapified bottom-up after */     \
      hk[i] = keys[i];                                                                 \
      hi[i] = (uint32_t)i;                                                             \
    }                                                                                  \
    for (int64_t i = k / 2 - 1; i >= 0; i--) sift_down_##SUFFIX(hk, hi, k, i);        \
    for (int64_t i = k; i < n; i++)                                                    \
      if (keys[i] < hk[0]) {                                                           \
        hk[0] = keys[i];                                                               \
        hi[0] = (uint32_t)i;                                                           \
        sift_down_##SUFFIX(hk, hi, k, 0);                                              \
      }                                                                                \
    for (int64_t end = k - 1; end > 0; end--) { /* heap sort: largest to the back */   \
      K tk = hk[0]; hk[0] = hk[end]; hk[end] = tk;                                     \
      uint32_t ti = hi[0]; hi[0] = hi[end]; hi[end] = ti;                              \
      sift_down_##SUFFIX(hk, hi, end, 0);                                              \
    }                                                                                  \
  }

DEFINE_HEAP(uint32_t, 32)
DEFINE_HEAP(uint64_t, 64)

/* Below this share of the slice, TOPK keeps a heap instead of selecting. */
#define HEAP_RATIO 64

static int64_t first_nan(const select_job *j, const char *in, int64_t *nan_count) {
  int64_t first = -1, count = 0;
  if (!nrt_dtype_is_floating(j->dtype)) return -1;
  for (int64_t i = 0; i < j->n; i++) {
    int nan = rt_elem_is_nan(j->dtype, in + i * j->in_stride);
    if (nan && first < 0) first = i;
    count += nan;
  }
  *nan_count = count;
  return first;
}

static void write_one(const select_job *j, int64_t r, int64_t pos, int64_t index) {
  char *values = j->values + rt_slices_offset(&j->slices, 0, r);
  char *indices = j->indices + rt_slices_offset(&j->slices, 1, r);
  const char *in = j->in + rt_slices_offset(&j->slices, 2, r);
  int64_t elem = (int64_t)nrt_dtype_size(j->dtype);
  memcpy(values + pos * j->values_stride, in + index * j->in_stride, (size_t)elem);
  *(int64_t *)(indices + pos * j->indices_stride) = index;
}

static void select_slice(const select_job *j, const select_scratch *s, int64_t r) {
  const char *in = j->in + rt_slices_offset(&j->slices, 2, r);
  int64_t k = j->k, nans = 0;
  if (j->nan_mode) {
    int64_t nan_at = first_nan(j, in, &nans);
    if (nan_at >= 0 && (j->nan_mode == 1 || nans == j->n)) {
      write_one(j, r, 0, nan_at);
      return;
    }
    k = (j->n - nans - 1) / 2 + 1; /* the lower median of the numbers */
  }
  int64_t rank, last = -1;
  int swapped = 0;
  if (j->topk && k * HEAP_RATIO <= j->n) {
    if (j->wide) {
      rt_make_keys64(j->dtype, in, j->in_stride, j->n, j->largest, s->keys);
      heap_smallest_64(s->keys, j->n, k, s->top_keys[0], s->top_idx[0]);
    } else {
      rt_make_keys32(j->dtype, in, j->in_stride, j->n, j->largest, s->keys);
      heap_smallest_32(s->keys, j->n, k, s->top_keys[0], s->top_idx[0]);
    }
  } else if (j->wide) {
    rt_make_keys64(j->dtype, in, j->in_stride, j->n, j->largest, s->keys);
    uint64_t kth = kth_key_64(s->keys, s->cand, j->n, k, &rank);
    last = take_64(s->keys, j->n, kth, rank, j->topk ? s->top_keys[0] : NULL, s->top_idx[0]);
    if (j->topk)
      swapped = rt_sort_pairs64(s->top_keys[0], s->top_idx[0], s->top_keys[1], s->top_idx[1], k, 0);
  } else {
    rt_make_keys32(j->dtype, in, j->in_stride, j->n, j->largest, s->keys);
    uint32_t kth = kth_key_32(s->keys, s->cand, j->n, k, &rank);
    last = take_32(s->keys, j->n, kth, rank, j->topk ? s->top_keys[0] : NULL, s->top_idx[0]);
    if (j->topk)
      swapped = rt_sort_pairs32(s->top_keys[0], s->top_idx[0], s->top_keys[1], s->top_idx[1], k, 0);
  }
  if (!j->topk) {
    write_one(j, r, 0, last);
    return;
  }
  char *values = j->values + rt_slices_offset(&j->slices, 0, r);
  char *indices = j->indices + rt_slices_offset(&j->slices, 1, r);
  const uint32_t *idx = s->top_idx[swapped];
  rt_gather_elements(values, j->values_stride, in, j->in_stride, idx, k,
                     (int64_t)nrt_dtype_size(j->dtype));
  for (int64_t i = 0; i < k; i++) *(int64_t *)(indices + i * j->indices_stride) = idx[i];
}

static void select_slices(int64_t begin, int64_t end, void *arg) {
  select_job *j = arg;
  size_t key = j->wide ? 8 : 4;
  int64_t top = j->topk ? j->k : 0;
  select_scratch s = {malloc((size_t)j->n * key), malloc((size_t)j->n * key),
                      {malloc((size_t)top * key + 1), malloc((size_t)top * key + 1)},
                      {malloc((size_t)top * 4 + 1), malloc((size_t)top * 4 + 1)}};
  if (s.keys && s.cand && s.top_keys[0] && s.top_keys[1] && s.top_idx[0] && s.top_idx[1]) {
    for (int64_t r = begin; r < end; r++) select_slice(j, &s, r);
  } else {
    atomic_store(&j->out_of_memory, 1);
  }
  free(s.keys), free(s.cand);
  for (int b = 0; b < 2; b++) free(s.top_keys[b]), free(s.top_idx[b]);
}

/* Operands [values, indices, in]; values/indices have size out_len along dim. */
static nrt_status run_select(const nrt_op *op, int topk) {
  const char *name = nrt_op_name(op->code);
  nrt_status st = rt_check_arity(op, 3, 3);
  if (st) return st;
  const nrt_tensor_view *values = &op->operands[0], *indices = &op->operands[1],
                        *in = &op->operands[2];
  select_job j;
  int64_t dim = rt_scalar_int(op, 0);
  j.k = rt_scalar_int(op, 1);
  j.largest = topk && rt_scalar_int(op, 2) != 0;
  j.nan_mode = topk ? 0 : (int)rt_scalar_int(op, 2);
  j.topk = topk;
  st = rt_check_selection(op, dim, topk ? j.k : 1);
  if (st) return st;
  j.n = in->ndim == 0 ? 1 : in->shape[dim];
  if (j.nan_mode < 0 || j.nan_mode > 2)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: bad NaN mode %d", name, j.nan_mode);
  int64_t kmin = topk ? 0 : 1;
  if (j.nan_mode == 0 && (j.k < kmin || j.k > j.n))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: k = %lld out of range for a slice of %lld",
                   name, (long long)j.k, (long long)j.n);
  if (j.n > (int64_t)UINT32_MAX)
    return rt_fail(NRT_ERROR_UNSUPPORTED, "%s: slices longer than %u elements are not supported",
                   name, UINT32_MAX);
  if (nrt_view_numel(values) == 0 || j.n == 0) return NRT_SUCCESS;
  const nrt_tensor_view *views[3] = {values, indices, in};
  rt_slices_init(&j.slices, 3, views, in->ndim == 0 ? -1 : (int)dim);
  int64_t elem = (int64_t)nrt_dtype_size(in->dtype);
  j.values = values->data;
  j.indices = indices->data;
  j.in = in->data;
  j.values_stride = in->ndim ? values->strides[dim] * elem : 0;
  j.indices_stride = in->ndim ? indices->strides[dim] * 8 : 0;
  j.in_stride = in->ndim ? in->strides[dim] * elem : 0;
  j.dtype = in->dtype;
  j.wide = rt_key_is_wide(in->dtype);
  atomic_init(&j.out_of_memory, 0);
  int64_t grain = j.n >= 16384 ? 1 : 16384 / j.n;
  rt_parallel_for(j.slices.count, grain, select_slices, &j);
  if (atomic_load(&j.out_of_memory))
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for scratch", name);
  return NRT_SUCCESS;
}

nrt_status rt_kernel_topk(const nrt_op *op) { return run_select(op, 1); }
nrt_status rt_kernel_kthvalue(const nrt_op *op) { return run_select(op, 0); }
