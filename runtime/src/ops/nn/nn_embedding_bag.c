/* EMBEDDING_BAG and its backward ops (see ops/nn.h).
 *
 * The forward op sums in float (double for float64 data), as the CPU does;
 * the backward ops convert rows to double and sum in double, then store
 * once in the output dtype. Bags are independent, so the forward op splits
 * them across threads (float32 tables with contiguous rows take a row path
 * that prefetches rows ahead; the general loop is its reference); the dense
 * backward gives each thread a block of weight rows that it alone writes,
 * visiting the indices in order, so every row sums its terms in one order
 * for any number of threads. Bad data (offsets, indices) is found before
 * the bags are computed, and the error reported is always the first one, as
 * on the CPU; it is an INDEX_OUT_OF_RANGE error (raised at the next
 * synchronisation as a RuntimeError and IndexError), data found wrong on
 * the device.
 */
#include <stdatomic.h>
#include <string.h>
#include "ops/nn/nn_common.h"
#include "ops/index/index_walk.h"

enum { BAG_SUM = 0, BAG_MEAN = 1, BAG_MAX = 2 };

static inline int64_t bag_int_at(const nrt_tensor_view *v, int64_t i) {
  return rt_index_load((const char *)v->data + i * v->strides[0] * (int64_t)rt_dtype_size(v->dtype), v->dtype);
}

static inline int64_t *bag_i64(const nrt_tensor_view *v, int64_t i, int64_t j) {
  return (int64_t *)v->data + i * v->strides[0] + (v->ndim > 1 ? j * v->strides[1] : 0);
}

/* One element of a floating view as double. */
static inline double bag_value(const nrt_tensor_view *v, int64_t i) {
  double x;
  nn_convert(&x, NRT_FLOAT64, 8, (const char *)v->data + i * v->strides[0] * (int64_t)nrt_dtype_size(v->dtype),
             v->dtype, 0, 1);
  return x;
}

/* Row r of a [rows, D] view, as D doubles in buf. */
static inline void bag_row(const nrt_tensor_view *v, int64_t r, double *buf) {
  int64_t size = (int64_t)nrt_dtype_size(v->dtype);
  nn_convert(buf, NRT_FLOAT64, 8, (const char *)v->data + r * v->strides[0] * size, v->dtype,
             v->strides[1] * size, v->shape[1]);
}

static inline void bag_store_row(const nrt_tensor_view *v, int64_t r, const double *buf) {
  int64_t size = (int64_t)nrt_dtype_size(v->dtype);
  nn_convert((char *)v->data + r * v->strides[0] * size, v->dtype, v->strides[1] * size, buf, NRT_FLOAT64, 8,
             v->shape[1]);
}

static int bag_is_index(nrt_dtype t) { return t == NRT_INT32 || t == NRT_INT64; }

/* ---- forward ------------------------------------------------------------- */

typedef struct bag_job {
  const nrt_op *op;
  int64_t bags, n, padding_idx;
  int mode;
  atomic_int out_of_memory;
} bag_job;

static int64_t bag_begin(const nrt_tensor_view *offsets, int64_t b) { return bag_int_at(offsets, b); }
static int64_t bag_end(const bag_job *job, const nrt_tensor_view *offsets, int64_t b) {
  return b + 1 < offsets->shape[0] ? bag_int_at(offsets, b + 1) : job->n;
}

/* Bags [b0, b1) computed in C (float, or double for float64 data): rows
 * are read in place when they are contiguous C data, as the CPU's kernels
 * accumulate float rows in float. */
#define BAG_FORWARD(C, CT)                                                                                  \
  static void bag_forward_##C(const bag_job *job, int64_t b0, int64_t b1, C *acc, C *buf) {                 \
    const nrt_op *op = job->op;                                                                             \
    const nrt_tensor_view *out = &op->operands[0], *offset2bag = &op->operands[1],                          \
                          *bag_size = &op->operands[2], *max_indices = &op->operands[3],                    \
                          *weight = &op->operands[4], *indices = &op->operands[5],                          \
                          *offsets = &op->operands[6], *psw = &op->operands[7];                             \
    int64_t d = weight->shape[1], wsize = (int64_t)nrt_dtype_size(weight->dtype);                           \
    int64_t osize = (int64_t)nrt_dtype_size(out->dtype);                                                    \
    int has_psw = op->num_operands > 7 && nn_present(psw);                                                  \
    for (int64_t b = b0; b < b1; b++) {                                                                     \
      int64_t i0 = bag_begin(offsets, b), i1 = bag_end(job, offsets, b), count = 0;                         \
      for (int64_t j = 0; j < d; j++) acc[j] = 0;                                                           \
      for (int64_t i = i0; i < i1; i++) {                                                                   \
        *bag_i64(offset2bag, i, 0) = b;                                                                     \
        int64_t r = bag_int_at(indices, i);                                                                 \
        if (r == job->padding_idx) continue;                                                                \
        const C *row = nn_load((const char *)weight->data + r * weight->strides[0] * wsize,                \
                               weight->strides[1] * wsize, weight->dtype, CT, d, buf);                      \
        if (job->mode == BAG_MAX) {                                                                         \
          for (int64_t j = 0; j < d; j++)                                                                   \
            if (count == 0 || row[j] > acc[j]) {                                                            \
              acc[j] = row[j];                                                                              \
              *bag_i64(max_indices, b, j) = r;                                                              \
            }                                                                                               \
        } else if (has_psw) {                                                                               \
          C s = (C)bag_value(psw, i);                                                                       \
          for (int64_t j = 0; j < d; j++) acc[j] += s * row[j];                                             \
        } else {                                                                                            \
          for (int64_t j = 0; j < d; j++) acc[j] += row[j];                                                 \
        }                                                                                                   \
        count++;                                                                                            \
      }                                                                                                     \
      if (job->mode == BAG_MEAN && count > 0)                                                               \
        for (int64_t j = 0; j < d; j++) acc[j] /= (C)count;                                                 \
      if (job->mode == BAG_MAX && count == 0)                                                               \
        for (int64_t j = 0; j < d; j++) *bag_i64(max_indices, b, j) = 0;                                    \
      if (job->mode != BAG_MAX) *bag_i64(max_indices, b, 0) = count;                                        \
      *bag_i64(bag_size, b, 0) = count;                                                                     \
      if (d > 0) nn_store((char *)out->data + b * out->strides[0] * osize, out->strides[1] * osize,        \
                          out->dtype, CT, d, acc);                                                          \
    }                                                                                                       \
  }
BAG_FORWARD(float, NRT_FLOAT32)
BAG_FORWARD(double, NRT_FLOAT64)

/* The fast path: float32 rows contiguous in weight and out (the usual
 * embedding table). The gather is bound by the latency of random rows, so
 * the row BAG_PREFETCH indices ahead is requested while this one is added;
 * each bag accumulates in its output row, in the order of its indices as
 * bag_forward_float (the reference) does, so sums match it bit for bit
 * (with per_sample_weights the AVX2/AVX-512 variants may fuse s * row + acc,
 * as the CPU's FBGEMM kernel does). */
/* A max bag takes row r where it is greater: selects with no branch, and
 * restrict so that the compiler vectorises them. */
static inline void bag_max_row(float *restrict acc, int64_t *restrict arg, const float *restrict row, int64_t r,
                               int64_t d) {
  for (int64_t j = 0; j < d; j++) {
    int take = row[j] > acc[j];
    acc[j] = take ? row[j] : acc[j];
    arg[j] = take ? r : arg[j];
  }
}

enum { BAG_PREFETCH = 16 };

RT_SIMD_VOID(bag_forward_rows_f32, (const bag_job *job, int64_t b0, int64_t b1), (job, b0, b1)) {
  const nrt_op *op = job->op;
  const nrt_tensor_view *out = &op->operands[0], *offset2bag = &op->operands[1], *bag_size = &op->operands[2],
                        *max_indices = &op->operands[3], *weight = &op->operands[4], *indices = &op->operands[5],
                        *offsets = &op->operands[6], *psw = &op->operands[7];
  const float *w = weight->data;
  const float *s = op->num_operands > 7 && nn_present(psw) ? psw->data : NULL;
  int64_t d = weight->shape[1], ws = weight->strides[0], row_bytes = d * (int64_t)sizeof(float);
  const char *ix = indices->data;
  int64_t ix_step = indices->strides[0] * (int64_t)rt_dtype_size(indices->dtype);
  for (int64_t b = b0; b < b1; b++) {
    int64_t i0 = bag_begin(offsets, b), i1 = bag_end(job, offsets, b), count = 0;
    float *acc = (float *)out->data + b * out->strides[0];
    int is_max = job->mode == BAG_MAX; /* then arg is row b of max_indices (NULL data when D = 0) */
    int64_t *arg = is_max ? bag_i64(max_indices, b, 0) : NULL;
    int64_t arg_step = is_max ? max_indices->strides[1] : 0;
    for (int64_t j = 0; j < d; j++) acc[j] = 0;
    for (int64_t i = i0; i < i1; i++) {
      *bag_i64(offset2bag, i, 0) = b;
      if (i + BAG_PREFETCH < job->n) {
        const char *ahead = (const char *)(w + rt_index_load(ix + (i + BAG_PREFETCH) * ix_step, indices->dtype) * ws);
        for (int64_t k = 0; k < row_bytes; k += 64) __builtin_prefetch(ahead + k, 0, 3);
      }
      int64_t r = rt_index_load(ix + i * ix_step, indices->dtype);
      if (r == job->padding_idx) continue;
      const float *row = w + r * ws;
      if (is_max && count == 0) {
        for (int64_t j = 0; j < d; j++) acc[j] = row[j], arg[j * arg_step] = r;
      } else if (is_max && arg_step == 1) {
        bag_max_row(acc, arg, row, r, d);
      } else if (is_max) {
        for (int64_t j = 0; j < d; j++)
          if (row[j] > acc[j]) acc[j] = row[j], arg[j * arg_step] = r;
      } else if (s) {
        float si = s[i * psw->strides[0]];
        for (int64_t j = 0; j < d; j++) acc[j] += si * row[j];
      } else {
        for (int64_t j = 0; j < d; j++) acc[j] += row[j];
      }
      count++;
    }
    if (job->mode == BAG_MEAN && count > 0)
      for (int64_t j = 0; j < d; j++) acc[j] /= (float)count;
    if (is_max && count == 0)
      for (int64_t j = 0; j < d; j++) arg[j * arg_step] = 0;
    if (!is_max) *bag_i64(max_indices, b, 0) = count;
    *bag_i64(bag_size, b, 0) = count;
  }
}

/* Whether bag_forward_rows_f32 applies: float32 rows of unit stride. */
static int bag_rows_f32(const nrt_op *op) {
  const nrt_tensor_view *out = &op->operands[0], *weight = &op->operands[4];
  return weight->dtype == NRT_FLOAT32 && (weight->strides[1] == 1 || weight->shape[1] <= 1) &&
         (out->strides[1] == 1 || out->shape[1] <= 1);
}

static void bag_forward_range(int64_t b0, int64_t b1, void *arg) {
  bag_job *job = arg;
  if (bag_rows_f32(job->op)) {
    bag_forward_rows_f32(job, b0, b1);
    return;
  }
  int64_t d = job->op->operands[4].shape[1];
  double *scratch = malloc((size_t)(2 * d + 1) * sizeof *scratch); /* room for acc and a row of either type */
  if (!scratch) {
    atomic_store(&job->out_of_memory, 1);
    return;
  }
  if (job->op->operands[4].dtype == NRT_FLOAT64)
    bag_forward_double(job, b0, b1, scratch, scratch + d);
  else
    bag_forward_float(job, b0, b1, (float *)scratch, (float *)scratch + d);
  free(scratch);
}

/* The first index outside [0, rows), found over the thread pool (a serial
 * scan was a third of the forward's time): each block scans its own indices
 * and lowers `first` to its first bad one. */
typedef struct bag_index_scan {
  const nrt_tensor_view *indices;
  int64_t rows;
  _Atomic int64_t first;
} bag_index_scan;

static void bag_scan_range(int64_t i0, int64_t i1, void *arg) {
  bag_index_scan *scan = arg;
  for (int64_t i = i0; i < i1; i++) {
    int64_t r = bag_int_at(scan->indices, i);
    if (r < 0 || r >= scan->rows) {
      int64_t seen = atomic_load(&scan->first);
      while (i < seen && !atomic_compare_exchange_weak(&scan->first, &seen, i)) {
      }
      return;
    }
  }
}

/* The position of the first index outside [0, rows), or N if none is. */
static int64_t bag_first_bad_index(const nrt_tensor_view *indices, int64_t rows) {
  int64_t n = indices->shape[0];
  bag_index_scan scan = {.indices = indices, .rows = rows};
  atomic_init(&scan.first, n);
  rt_parallel_for(n, RT_PARALLEL_GRAIN, bag_scan_range, &scan);
  return atomic_load(&scan.first);
}

/* Checks offsets and indices in order; the first problem is the error. */
static nrt_status bag_check_data(const char *name, const nrt_tensor_view *indices, const nrt_tensor_view *offsets,
                                 int64_t rows, int include_last) {
  int64_t n = indices->shape[0], m = offsets->shape[0];
  if (m > 0 && bag_int_at(offsets, 0) != 0)
    return rt_fail(NRT_ERROR_INDEX_OUT_OF_RANGE,
                   "%s: offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from "
                   "position 0. However, got %lld",
                   name, (long long)bag_int_at(offsets, 0));
  for (int64_t b = 1; b < m; b++)
    if (bag_int_at(offsets, b) < bag_int_at(offsets, b - 1))
      return rt_fail(NRT_ERROR_INDEX_OUT_OF_RANGE, "%s: offsets must be non-decreasing, but offsets[%lld] = %lld "
                     "follows %lld", name, (long long)b, (long long)bag_int_at(offsets, b),
                     (long long)bag_int_at(offsets, b - 1));
  if (m > 0 && bag_int_at(offsets, m - 1) > n)
    return rt_fail(NRT_ERROR_INDEX_OUT_OF_RANGE,
                   "%s: offsets[-1] can not be greater than input's length %lld but got offsets[-1] of %lld", name,
                   (long long)n, (long long)bag_int_at(offsets, m - 1));
  (void)include_last;
  int64_t i = bag_first_bad_index(indices, rows);
  if (i < n)
    return rt_fail(NRT_ERROR_INDEX_OUT_OF_RANGE,
                   "%s: Index %lld of input takes value %lld which is not in the valid range [0, %lld)", name,
                   (long long)i, (long long)bag_int_at(indices, i), (long long)rows);
  return NRT_SUCCESS;
}

nrt_status rt_kernel_embedding_bag(const nrt_op *op) {
  const char *name = "embedding_bag";
  if (op->num_operands < 7 || op->num_outputs != 4 || op->num_scalars < 3)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "%s: expects operands [out, offset2bag, bag_size, max_indices, weight, indices, offsets, "
                   "per_sample_weights?] and 3 scalars", name);
  const nrt_tensor_view *out = &op->operands[0], *offset2bag = &op->operands[1], *bag_size = &op->operands[2],
                        *max_indices = &op->operands[3], *weight = &op->operands[4], *indices = &op->operands[5],
                        *offsets = &op->operands[6];
  int mode = (int)op->scalars[0].i, include_last = op->scalars[2].i != 0;
  if (mode < BAG_SUM || mode > BAG_MAX)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: `mode` must be sum, mean, or max.", name);
  if (weight->ndim != 2 || !nn_is_float(weight->dtype) || indices->ndim != 1 || offsets->ndim != 1 ||
      !bag_is_index(indices->dtype) || !bag_is_index(offsets->dtype))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "%s: expects a floating weight [V, D] and int32/int64 indices [N] and offsets", name);
  int64_t bags = offsets->shape[0] - (include_last && offsets->shape[0] > 0);
  int64_t d = weight->shape[1], n = indices->shape[0];
  if (out->ndim != 2 || out->shape[0] != bags || out->shape[1] != d || out->dtype != weight->dtype ||
      offset2bag->ndim != 1 || offset2bag->shape[0] != n || offset2bag->dtype != NRT_INT64 ||
      bag_size->ndim != 1 || bag_size->shape[0] != bags || bag_size->dtype != NRT_INT64 ||
      max_indices->dtype != NRT_INT64 || max_indices->shape[0] != bags ||
      max_indices->ndim != (mode == BAG_MAX ? 2 : 1) || (mode == BAG_MAX && max_indices->shape[1] != d))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "%s: expects out [B, D] of weight's dtype, int64 offset2bag [N], bag_size [B] and "
                   "max_indices ([B, D] in max mode, else [B])", name);
  const nrt_tensor_view *psw = op->num_operands > 7 ? &op->operands[7] : NULL;
  if (psw && nn_present(psw) && (mode != BAG_SUM || psw->ndim != 1 || psw->shape[0] != n || psw->dtype != weight->dtype))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "%s: per_sample_weights must be [N] of weight's dtype, and only with mode='sum'", name);
  nrt_status status = bag_check_data(name, indices, offsets, weight->shape[0], include_last);
  if (status != NRT_SUCCESS) return status;
  /* indices past the last bag (include_last_offset with offsets[-1] < N) belong to none */
  for (int64_t i = bags > 0 ? bag_int_at(offsets, offsets->shape[0] - 1) : 0; include_last && i < n; i++)
    *bag_i64(offset2bag, i, 0) = -1;
  if (!include_last && bags == 0)
    for (int64_t i = 0; i < n; i++) *bag_i64(offset2bag, i, 0) = -1;
  bag_job job = {.op = op, .bags = bags, .n = n, .padding_idx = op->scalars[1].i, .mode = mode};
  atomic_init(&job.out_of_memory, 0);
  int64_t per_bag = (n / (bags > 0 ? bags : 1) + 1) * (d + 1);
  rt_parallel_for(bags, nn_grain(per_bag), bag_forward_range, &job);
  if (atomic_load(&job.out_of_memory))
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for a row buffer", name);
  return NRT_SUCCESS;
}

/* ---- dense backward ----------------------------------------------------- */

typedef struct bag_backward_job {
  const nrt_op *op;
  int64_t owners, padding_idx;
  int mode, scale;
  atomic_int out_of_memory;
} bag_backward_job;

/* Sum and mean modes, weight rows [r0, r1): the entries (indices) of each
 * row are grouped by a counting sort, in index order, so a row sums its
 * terms in double in one d-long buffer and is stored once; untouched rows
 * are zeroed as they are passed. (A double buffer over the whole block,
 * zeroed and converted back, took most of the backward's time.) Returns 0 when out of memory. */
static int bag_backward_rows(const bag_backward_job *job, int64_t r0, int64_t r1, double *acc, double *row) {
  const nrt_op *op = job->op;
  const nrt_tensor_view *gw = &op->operands[0], *grad = &op->operands[1], *indices = &op->operands[2],
                        *offset2bag = &op->operands[3], *bag_size = &op->operands[4];
  const nrt_tensor_view *psw = op->num_operands > 6 && nn_present(&op->operands[6]) ? &op->operands[6] : NULL;
  int64_t d = gw->shape[1], n = indices->shape[0], bags = grad->shape[0], rows = r1 - r0;
  int64_t *first = calloc((size_t)(2 * rows + 1), sizeof *first); /* first[k]: row k's entries; then counts */
  int64_t *counts = first + rows + 1;
  int64_t *order = NULL;
  if (!first) return 0;
  int64_t used = 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t r = bag_int_at(indices, i), b = *bag_i64(offset2bag, i, 0);
    if (r < r0 || r >= r1) continue;
    counts[r - r0]++; /* scale_grad_by_freq counts every occurrence */
    if (r != job->padding_idx && b >= 0 && b < bags) first[r - r0 + 1]++, used++;
  }
  for (int64_t k = 0; k < rows; k++) first[k + 1] += first[k];
  order = malloc((size_t)(2 * used + 1) * sizeof *order); /* pairs (i, its bag): read in sequence */
  if (!order) {
    free(first);
    return 0;
  }
  for (int64_t i = 0; i < n; i++) { /* first[k] advances to row k's end */
    int64_t r = bag_int_at(indices, i), b = *bag_i64(offset2bag, i, 0);
    if (r >= r0 && r < r1 && r != job->padding_idx && b >= 0 && b < bags) {
      int64_t e = first[r - r0]++;
      order[2 * e] = i, order[2 * e + 1] = b;
    }
  }
  int64_t size = (int64_t)rt_dtype_size(gw->dtype), begin = 0;
  for (int64_t k = 0; k < rows; begin = first[k], k++) {
    if (begin == first[k] && gw->strides[1] == 1) { /* untouched: zero bits are 0.0 in every float dtype */
      memset((char *)gw->data + (r0 + k) * gw->strides[0] * size, 0, (size_t)(d * size));
      continue;
    }
    for (int64_t j = 0; j < d; j++) acc[j] = 0;
    for (int64_t e = begin; e < first[k]; e++) {
      int64_t i = order[2 * e], b = order[2 * e + 1];
      double s = psw ? bag_value(psw, i) : 1.0;
      if (job->mode == BAG_MEAN) s /= (double)*bag_i64(bag_size, b, 0);
      if (job->scale) s /= (double)counts[k];
      if (grad->dtype == NRT_FLOAT32) { /* read in place: a float widens exactly, as bag_row would */
        const float *g = (const float *)grad->data + b * grad->strides[0];
        for (int64_t j = 0, gs = grad->strides[1]; j < d; j++) acc[j] += s * (double)g[j * gs];
        continue;
      }
      bag_row(grad, b, row);
      for (int64_t j = 0; j < d; j++) acc[j] += s * row[j];
    }
    bag_store_row(gw, r0 + k, acc);
  }
  free(order);
  free(first);
  return 1;
}

/* Max mode, weight rows [r0, r1): each bag's gradient goes to its argmax
 * rows, accumulated in double over the block. Returns 0 when out of memory. */
static int bag_backward_max(const bag_backward_job *job, int64_t r0, int64_t r1, double *row) {
  const nrt_op *op = job->op;
  const nrt_tensor_view *gw = &op->operands[0], *grad = &op->operands[1], *bag_size = &op->operands[4],
                        *max_indices = &op->operands[5];
  int64_t d = gw->shape[1], bags = grad->shape[0];
  double *acc = calloc((size_t)((r1 - r0) * d), sizeof *acc);
  if (!acc) return 0;
  for (int64_t b = 0; b < bags; b++) {
    if (*bag_i64(bag_size, b, 0) == 0) continue;
    int loaded = 0;
    for (int64_t j = 0; j < d; j++) {
      int64_t r = *bag_i64(max_indices, b, j);
      if (r < r0 || r >= r1) continue;
      if (!loaded) bag_row(grad, b, row), loaded = 1;
      acc[(r - r0) * d + j] += row[j];
    }
  }
  for (int64_t r = r0; r < r1; r++) bag_store_row(gw, r, acc + (r - r0) * d);
  free(acc);
  return 1;
}

static void bag_backward_owner(int64_t begin, int64_t end, void *arg) {
  bag_backward_job *job = arg;
  int64_t v = job->op->operands[0].shape[0], d = job->op->operands[0].shape[1];
  double *buf = malloc((size_t)(2 * d + 1) * sizeof *buf); /* a row sum and a gradient row */
  int ok = buf != NULL;
  for (int64_t owner = begin; owner < end && ok; owner++) {
    int64_t r0 = v * owner / job->owners, r1 = v * (owner + 1) / job->owners;
    if (r1 > r0)
      ok = job->mode == BAG_MAX ? bag_backward_max(job, r0, r1, buf) : bag_backward_rows(job, r0, r1, buf, buf + d);
  }
  free(buf);
  if (!ok) atomic_store(&job->out_of_memory, 1);
}

nrt_status rt_kernel_embedding_bag_backward(const nrt_op *op) {
  const char *name = "embedding_bag_backward";
  if (op->num_operands < 6 || op->num_outputs != 1 || op->num_scalars < 3)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "%s: expects operands [grad_weight, grad, indices, offset2bag, bag_size, max_indices, "
                   "per_sample_weights?] and 3 scalars", name);
  const nrt_tensor_view *gw = &op->operands[0], *grad = &op->operands[1], *indices = &op->operands[2],
                        *offset2bag = &op->operands[3], *bag_size = &op->operands[4],
                        *max_indices = &op->operands[5];
  int mode = (int)op->scalars[0].i;
  if (mode < BAG_SUM || mode > BAG_MAX || gw->ndim != 2 || grad->ndim != 2 || grad->shape[1] != gw->shape[1] ||
      !nn_is_float(gw->dtype) || !nn_is_float(grad->dtype) || indices->ndim != 1 ||
      !bag_is_index(indices->dtype) || offset2bag->ndim != 1 || offset2bag->dtype != NRT_INT64 ||
      offset2bag->shape[0] != indices->shape[0] || bag_size->ndim != 1 || bag_size->dtype != NRT_INT64 ||
      bag_size->shape[0] != grad->shape[0] || max_indices->dtype != NRT_INT64 ||
      (mode == BAG_MAX && (max_indices->ndim != 2 || max_indices->shape[0] != grad->shape[0] ||
                           max_indices->shape[1] != gw->shape[1])))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "%s: expects grad_weight [V, D], grad [B, D], indices [N], int64 offset2bag [N], bag_size [B] "
                   "and max_indices [B, D] (max mode)", name);
  for (int64_t i = 0; i < indices->shape[0]; i++) {
    int64_t r = bag_int_at(indices, i);
    if (r < 0 || r >= gw->shape[0])
      return rt_fail(NRT_ERROR_INDEX_OUT_OF_RANGE, "%s: index %lld is out of bounds for dimension 0 with size %lld",
                     name, (long long)r, (long long)gw->shape[0]);
  }
  bag_backward_job job = {.op = op, .padding_idx = op->scalars[1].i, .mode = mode, .scale = op->scalars[2].i != 0};
  atomic_init(&job.out_of_memory, 0);
  int64_t work = nrt_view_numel(grad) + nrt_view_numel(gw) + indices->shape[0];
  job.owners = work >= RT_PARALLEL_GRAIN && gw->shape[0] >= rt_num_threads() ? rt_num_threads() : 1;
  rt_parallel_for(job.owners, 1, bag_backward_owner, &job);
  if (atomic_load(&job.out_of_memory))
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for the row sums", name);
  return NRT_SUCCESS;
}

/* ---- per_sample_weights backward ---------------------------------------- */

static void bag_psw_range(int64_t i0, int64_t i1, void *arg) {
  bag_backward_job *job = arg;
  const nrt_op *op = job->op;
  const nrt_tensor_view *out = &op->operands[0], *grad = &op->operands[1], *weight = &op->operands[2],
                        *indices = &op->operands[3], *offset2bag = &op->operands[4];
  int64_t d = weight->shape[1];
  double *rows = malloc((size_t)(2 * d + 1) * sizeof *rows);
  if (!rows) {
    atomic_store(&job->out_of_memory, 1);
    return;
  }
  int64_t size = (int64_t)nrt_dtype_size(out->dtype);
  for (int64_t i = i0; i < i1; i++) {
    int64_t r = bag_int_at(indices, i), b = *bag_i64(offset2bag, i, 0);
    double dot = 0;
    if (r != job->padding_idx && b >= 0 && b < grad->shape[0]) {
      bag_row(weight, r, rows);
      bag_row(grad, b, rows + d);
      for (int64_t j = 0; j < d; j++) dot += rows[j] * rows[d + j];
    }
    nn_convert((char *)out->data + i * out->strides[0] * size, out->dtype, size, &dot, NRT_FLOAT64, 8, 1);
  }
  free(rows);
}

nrt_status rt_kernel_embedding_bag_psw_backward(const nrt_op *op) {
  const char *name = "embedding_bag_per_sample_weights_backward";
  if (op->num_operands != 5 || op->num_outputs != 1 || op->num_scalars < 2)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "%s: expects operands [out, grad, weight, indices, offset2bag] and 2 scalars", name);
  const nrt_tensor_view *out = &op->operands[0], *grad = &op->operands[1], *weight = &op->operands[2],
                        *indices = &op->operands[3], *offset2bag = &op->operands[4];
  if (op->scalars[0].i != BAG_SUM)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: per_sample_weights only supported for mode='sum'", name);
  int64_t n = indices->ndim == 1 ? indices->shape[0] : -1;
  if (out->ndim != 1 || out->shape[0] != n || !nn_is_float(out->dtype) || grad->ndim != 2 || weight->ndim != 2 ||
      grad->shape[1] != weight->shape[1] || !nn_is_float(grad->dtype) || !nn_is_float(weight->dtype) ||
      !bag_is_index(indices->dtype) || offset2bag->ndim != 1 || offset2bag->shape[0] != n ||
      offset2bag->dtype != NRT_INT64)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "%s: expects out [N], grad [B, D], weight [V, D], indices [N] and int64 offset2bag [N]", name);
  for (int64_t i = 0; i < n; i++) {
    int64_t r = bag_int_at(indices, i);
    if (r < 0 || r >= weight->shape[0])
      return rt_fail(NRT_ERROR_INDEX_OUT_OF_RANGE, "%s: index %lld is out of bounds for dimension 0 with size %lld",
                     name, (long long)r, (long long)weight->shape[0]);
  }
  bag_backward_job job = {.op = op, .padding_idx = op->scalars[1].i, .mode = BAG_SUM};
  atomic_init(&job.out_of_memory, 0);
  rt_parallel_for(n, nn_grain(2 * weight->shape[1] + 1), bag_psw_range, &job);
  if (atomic_load(&job.out_of_memory))
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for a row buffer", name);
  return NRT_SUCCESS;
}
