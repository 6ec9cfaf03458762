/* UNIQUE_SCAN and UNIQUE_COLLECT: runs of equal items in a 1-d tensor
 * (items are elements) or a 2-d one (items are rows).
 *
 * unique is a stable sort followed by these two; unique_consecutive is
 * these two alone. A run starts at item 0 and wherever an item differs
 * from the one before it (by == on every element, so NaN starts a run of
 * its own and -0.0 continues a run of 0.0). The items are cut into fixed
 * blocks: each block counts its run starts, a prefix sum numbers the runs,
 * and the blocks then write in parallel; the numbering does not depend on
 * threads. SCAN learns the run count (the caller reads it to size the
 * outputs) and writes the inverse mapping; COLLECT writes each run's first
 * item and length. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "ops/engine/scalar_types.h"
#include "ops/shape/shape_common.h"
#include "ops/engine/thread_pool.h"

#define BLOCK 65536

enum walk_mode { COUNT_RUNS, WRITE_INVERSE, WRITE_RUNS };

struct walk_job;
typedef void (*starts_fn)(const struct walk_job *w, int64_t lo, int64_t hi, uint8_t *flags);

typedef struct walk_job {
  enum walk_mode mode;
  const char *in;
  int64_t n, m, in_stride, in_col_stride, elem; /* strides in bytes */
  starts_fn starts_run;
  int64_t *block_runs; /* runs starting in each block; then runs before it */
  /* WRITE_INVERSE */
  char *inverse;
  const char *perm;
  int64_t inverse_stride, perm_stride;
  atomic_int bad_perm;
  /* WRITE_RUNS */
  char *values, *counts;
  int64_t values_stride, values_col_stride, counts_stride;
} walk_job;

#define NEQ_PLAIN(a, b) ((a) != (b))
#define NEQ_HALF(a, b) (rt_half_to_float(a) != rt_half_to_float(b))
#define NEQ_BF16(a, b) (rt_bfloat16_to_float(a) != rt_bfloat16_to_float(b))

/* flags[i - lo] = whether item i of [lo, hi) starts a run: it is the
 * first, or an element differs from the item before. */
#define DEFINE_STARTS(NAME, T, NEQ)                                                     \
  static void starts_##NAME(const walk_job *w, int64_t lo, int64_t hi, uint8_t *flags) { \
    for (int64_t i = lo; i < hi; i++) {                                                 \
      int start = i == 0;                                                               \
      const char *b = w->in + i * w->in_stride, *a = b - w->in_stride;                  \
      for (int64_t k = 0; k < w->m && !start; k++)                                      \
        start = NEQ(*(const T *)(a + k * w->in_col_stride),                             \
                    *(const T *)(b + k * w->in_col_stride));                            \
      flags[i - lo] = (uint8_t)start;                                                   \
    }                                                                                   \
  }

DEFINE_STARTS(u8, uint8_t, NEQ_PLAIN)
DEFINE_STARTS(i8, int8_t, NEQ_PLAIN)
DEFINE_STARTS(i16, int16_t, NEQ_PLAIN)
DEFINE_STARTS(i32, int32_t, NEQ_PLAIN)
DEFINE_STARTS(i64, int64_t, NEQ_PLAIN)
DEFINE_STARTS(f16, uint16_t, NEQ_HALF)
DEFINE_STARTS(bf16, uint16_t, NEQ_BF16)
DEFINE_STARTS(f32, float, NEQ_PLAIN)
DEFINE_STARTS(f64, double, NEQ_PLAIN)

static starts_fn starts_for(nrt_dtype dtype) {
  switch (dtype) {
    case NRT_BOOL:
    case NRT_UINT8: return starts_u8;
    case NRT_INT8: return starts_i8;
    case NRT_INT16:
    case NRT_UINT16: return starts_i16; /* integers: equal bits, equal items */
    case NRT_INT32:
    case NRT_UINT32: return starts_i32;
    case NRT_INT64:
    case NRT_UINT64: return starts_i64;
    case NRT_FLOAT16: return starts_f16;
    case NRT_BFLOAT16: return starts_bf16;
    case NRT_FLOAT32: return starts_f32;
    default: return starts_f64;
  }
}

/* Items per call of the typed run-start test. */
#define CHUNK 1024

/* Walks items [lo, hi) with run = the run in progress before lo (-1 at the
 * start); returns the number of runs starting in [lo, hi). */
static int64_t walk(walk_job *w, int64_t lo, int64_t hi, int64_t run) {
  int64_t starts = 0;
  uint8_t flags[CHUNK];
  for (int64_t c = lo; c < hi; c += CHUNK) {
    int64_t end = c + CHUNK < hi ? c + CHUNK : hi;
    w->starts_run(w, c, end, flags);
    if (w->mode == COUNT_RUNS) {
      for (int64_t i = c; i < end; i++) starts += flags[i - c];
      continue;
    }
    for (int64_t i = c; i < end; i++) {
      if (flags[i - c]) {
        starts++;
        run++;
        if (w->mode == WRITE_RUNS) {
          const char *src = w->in + i * w->in_stride;
          char *dst = w->values + run * w->values_stride;
          for (int64_t k = 0; k < w->m; k++)
            memcpy(dst + k * w->values_col_stride, src + k * w->in_col_stride, (size_t)w->elem);
          if (w->counts) *(int64_t *)(w->counts + run * w->counts_stride) = i;
        }
      }
      if (w->mode == WRITE_INVERSE) {
        int64_t at = i;
        if (w->perm) {
          at = *(const int64_t *)(w->perm + i * w->perm_stride);
          if (at < 0 || at >= w->n) {
            atomic_store(&w->bad_perm, 1);
            return starts;
          }
        }
        *(int64_t *)(w->inverse + at * w->inverse_stride) = run;
      }
    }
  }
  return starts;
}

static void walk_blocks(int64_t begin, int64_t end, void *arg) {
  walk_job *w = arg;
  for (int64_t k = begin; k < end; k++) {
    int64_t lo = k * BLOCK, hi = lo + BLOCK < w->n ? lo + BLOCK : w->n;
    int64_t runs = walk(w, lo, hi, w->mode == COUNT_RUNS ? 0 : w->block_runs[k] - 1);
    if (w->mode == COUNT_RUNS) w->block_runs[k] = runs;
  }
}

/* Counts the run starts of every block and numbers the runs (block_runs,
 * to be freed by the caller); returns the number of runs, or -1 when out
 * of memory. */
static int64_t number_runs(walk_job *w) {
  int64_t blocks = (w->n + BLOCK - 1) / BLOCK;
  w->block_runs = malloc((size_t)(blocks + 1) * sizeof(int64_t));
  if (!w->block_runs) return -1;
  w->mode = COUNT_RUNS;
  rt_parallel_for(blocks, 1, walk_blocks, w);
  int64_t total = 0;
  for (int64_t k = 0; k < blocks; k++) {
    int64_t runs = w->block_runs[k];
    w->block_runs[k] = total;
    total += runs;
  }
  return total;
}

/* After number_runs: writes what mode says, block by block. */
static void write_runs(walk_job *w, enum walk_mode mode) {
  w->mode = mode;
  rt_parallel_for((w->n + BLOCK - 1) / BLOCK, 1, walk_blocks, w);
}

/* Reads the items of in (1-d or 2-d) into w. */
static nrt_status init_walk(const char *name, walk_job *w, const nrt_tensor_view *in) {
  if (in->ndim != 1 && in->ndim != 2)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects a 1-d or 2-d input", name);
  memset(w, 0, sizeof *w);
  w->elem = (int64_t)nrt_dtype_size(in->dtype);
  w->in = in->data;
  w->n = in->shape[0];
  w->m = in->ndim == 2 ? in->shape[1] : 1;
  w->in_stride = in->strides[0] * w->elem;
  w->in_col_stride = in->ndim == 2 ? in->strides[1] * w->elem : 0;
  w->starts_run = starts_for(in->dtype);
  atomic_init(&w->bad_perm, 0);
  return NRT_SUCCESS;
}

static nrt_status check_1d(const char *name, const nrt_tensor_view *v, int64_t n, const char *what) {
  if (v->ndim != 1 || v->shape[0] != n || v->dtype != NRT_INT64)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: %s must be 1-d int64 of %lld elements", name,
                   what, (long long)n);
  return NRT_SUCCESS;
}

nrt_status rt_kernel_unique_scan(const nrt_op *op) {
  nrt_status st = rt_check_arity(op, 4, 2);
  if (st) return st;
  const nrt_tensor_view *count = &op->operands[0], *inverse = &op->operands[1],
                        *in = &op->operands[2], *perm = &op->operands[3];
  int has_inverse = rt_scalar_int(op, 0) != 0, has_perm = rt_scalar_int(op, 1) != 0;
  walk_job w;
  if ((st = init_walk("unique_scan", &w, in))) return st;
  if (count->ndim != 0 || count->dtype != NRT_INT64)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "unique_scan: the count must be 0-d int64");
  if ((has_inverse && (st = check_1d("unique_scan", inverse, w.n, "inverse"))) ||
      (has_perm && (st = check_1d("unique_scan", perm, w.n, "perm"))))
    return st;
  if (has_inverse) {
    w.inverse = inverse->data;
    w.inverse_stride = inverse->strides[0] * 8;
  }
  if (has_perm) {
    w.perm = perm->data;
    w.perm_stride = perm->strides[0] * 8;
  }
  int64_t runs = number_runs(&w);
  if (runs < 0) return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "unique_scan: out of host memory");
  if (has_inverse) write_runs(&w, WRITE_INVERSE);
  free(w.block_runs);
  if (atomic_load(&w.bad_perm))
    return rt_fail(NRT_ERROR_INDEX_OUT_OF_RANGE, "unique_scan: permutation index out of range");
  *(int64_t *)count->data = runs;
  return NRT_SUCCESS;
}

nrt_status rt_kernel_unique_collect(const nrt_op *op) {
  nrt_status st = rt_check_arity(op, 3, 1);
  if (st) return st;
  const nrt_tensor_view *values = &op->operands[0], *counts = &op->operands[1],
                        *in = &op->operands[2];
  int has_counts = rt_scalar_int(op, 0) != 0;
  walk_job w;
  if ((st = init_walk("unique_collect", &w, in))) return st;
  int64_t u = values->ndim >= 1 ? values->shape[0] : -1;
  if (values->ndim != in->ndim || values->dtype != in->dtype ||
      (in->ndim == 2 && values->shape[1] != w.m))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "unique_collect: values must have the input's dtype and row length");
  if (has_counts && (st = check_1d("unique_collect", counts, u, "counts"))) return st;
  if (w.n == 0 && u == 0) return NRT_SUCCESS;
  int64_t runs = number_runs(&w);
  if (runs < 0) return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "unique_collect: out of host memory");
  if (runs != u) {
    free(w.block_runs);
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "unique_collect: %lld outputs for %lld runs",
                   (long long)u, (long long)runs);
  }
  w.values = values->data;
  w.values_stride = values->strides[0] * w.elem;
  w.values_col_stride = values->ndim == 2 ? values->strides[1] * w.elem : 0;
  if (has_counts) {
    w.counts = counts->data;
    w.counts_stride = counts->strides[0] * 8;
  }
  write_runs(&w, WRITE_RUNS);
  free(w.block_runs);
  if (has_counts) /* run starts become lengths */
    for (int64_t r = 0; r < u; r++) {
      int64_t *c = (int64_t *)(w.counts + r * w.counts_stride);
      int64_t next = r + 1 < u ? *(int64_t *)(w.counts + (r + 1) * w.counts_stride) : w.n;
      *c = next - *c;
    }
  return NRT_SUCCESS;
}
