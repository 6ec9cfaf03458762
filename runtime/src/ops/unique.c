/* UNIQUE_SCAN and UNIQUE_COLLECT: runs of equal values in a 1-d tensor.
 *
 * unique is a stable sort followed by these two; unique_consecutive is
 * these two alone. A run starts at element 0 and wherever an element
 * differs from the one before it (by ==, so NaN starts a run of its own
 * and -0.0 continues a run of 0.0). The tensor is cut into fixed blocks:
 * each block counts its run starts, a prefix sum numbers the runs, and the
 * blocks then write in parallel; the numbering does not depend on threads.
 * SCAN learns the run count (the caller reads it to size the outputs) and
 * writes the inverse mapping; COLLECT writes each run's value and length. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "scalar_types.h"
#include "shape_common.h"
#include "thread_pool.h"

#define BLOCK 65536

enum walk_mode { COUNT_RUNS, WRITE_INVERSE, WRITE_RUNS };

typedef struct walk_job {
  enum walk_mode mode;
  const char *in;
  int64_t n, in_stride, elem;
  int64_t *block_runs; /* runs starting in each block; then runs before it */
  /* WRITE_INVERSE */
  char *inverse;
  const char *perm;
  int64_t inverse_stride, perm_stride;
  atomic_int bad_perm;
  /* WRITE_RUNS */
  char *values, *counts;
  int64_t values_stride, counts_stride;
} walk_job;

#define NEQ_PLAIN(a, b) ((a) != (b))
#define NEQ_HALF(a, b) (rt_half_to_float(a) != rt_half_to_float(b))
#define NEQ_BF16(a, b) (rt_bfloat16_to_float(a) != rt_bfloat16_to_float(b))

/* Walks [lo, hi) with run = the number of the run in progress at lo - 1
 * (-1 at the start); returns the number of runs starting in [lo, hi). */
#define DEFINE_WALK(NAME, T, NEQ)                                                     \
  static int64_t walk_##NAME(walk_job *w, int64_t lo, int64_t hi, int64_t run) {     \
    const char *p = w->in;                                                            \
    int64_t s = w->in_stride, starts = 0;                                             \
    for (int64_t i = lo; i < hi; i++) {                                               \
      if (i == 0 || NEQ(*(const T *)(p + (i - 1) * s), *(const T *)(p + i * s))) {   \
        starts++;                                                                     \
        run++;                                                                        \
        if (w->mode == WRITE_RUNS) {                                                  \
          *(T *)(w->values + run * w->values_stride) = *(const T *)(p + i * s);        \
          if (w->counts) *(int64_t *)(w->counts + run * w->counts_stride) = i;        \
        }                                                                             \
      }                                                                               \
      if (w->mode == WRITE_INVERSE) {                                                 \
        int64_t at = i;                                                               \
        if (w->perm) {                                                                \
          at = *(const int64_t *)(w->perm + i * w->perm_stride);                      \
          if (at < 0 || at >= w->n) {                                                 \
            atomic_store(&w->bad_perm, 1);                                            \
            return starts;                                                            \
          }                                                                           \
        }                                                                             \
        *(int64_t *)(w->inverse + at * w->inverse_stride) = run;                      \
      }                                                                               \
    }                                                                                 \
    return starts;                                                                    \
  }

DEFINE_WALK(u8, uint8_t, NEQ_PLAIN)
DEFINE_WALK(i8, int8_t, NEQ_PLAIN)
DEFINE_WALK(i16, int16_t, NEQ_PLAIN)
DEFINE_WALK(i32, int32_t, NEQ_PLAIN)
DEFINE_WALK(i64, int64_t, NEQ_PLAIN)
DEFINE_WALK(f16, uint16_t, NEQ_HALF)
DEFINE_WALK(bf16, uint16_t, NEQ_BF16)
DEFINE_WALK(f32, float, NEQ_PLAIN)
DEFINE_WALK(f64, double, NEQ_PLAIN)

typedef int64_t (*walk_fn)(walk_job *w, int64_t lo, int64_t hi, int64_t run);

static walk_fn walk_for(nrt_dtype dtype) {
  switch (dtype) {
    case NRT_BOOL:
    case NRT_UINT8: return walk_u8;
    case NRT_INT8: return walk_i8;
    case NRT_INT16: return walk_i16;
    case NRT_INT32: return walk_i32;
    case NRT_INT64: return walk_i64;
    case NRT_FLOAT16: return walk_f16;
    case NRT_BFLOAT16: return walk_bf16;
    case NRT_FLOAT32: return walk_f32;
    default: return walk_f64;
  }
}

typedef struct blocks_job {
  walk_job *walk;
  walk_fn fn;
} blocks_job;

static void walk_blocks(int64_t begin, int64_t end, void *arg) {
  const blocks_job *b = arg;
  walk_job *w = b->walk;
  for (int64_t k = begin; k < end; k++) {
    int64_t lo = k * BLOCK, hi = lo + BLOCK < w->n ? lo + BLOCK : w->n;
    int64_t runs = b->fn(w, lo, hi, w->mode == COUNT_RUNS ? 0 : w->block_runs[k] - 1);
    if (w->mode == COUNT_RUNS) w->block_runs[k] = runs;
  }
}

/* Counts the run starts of every block and numbers the runs (block_runs,
 * to be freed by the caller); returns the number of runs, or -1 when out
 * of memory. */
static int64_t number_runs(walk_job *w, nrt_dtype dtype) {
  int64_t blocks = (w->n + BLOCK - 1) / BLOCK;
  w->block_runs = malloc((size_t)(blocks + 1) * sizeof(int64_t));
  if (!w->block_runs) return -1;
  blocks_job b = {w, walk_for(dtype)};
  w->mode = COUNT_RUNS;
  rt_parallel_for(blocks, 1, walk_blocks, &b);
  int64_t total = 0;
  for (int64_t k = 0; k < blocks; k++) {
    int64_t runs = w->block_runs[k];
    w->block_runs[k] = total;
    total += runs;
  }
  return total;
}

/* After number_runs: writes what mode says, block by block. */
static void write_runs(walk_job *w, nrt_dtype dtype, enum walk_mode mode) {
  blocks_job b = {w, walk_for(dtype)};
  w->mode = mode;
  rt_parallel_for((w->n + BLOCK - 1) / BLOCK, 1, walk_blocks, &b);
}

static nrt_status check_1d(const char *name, const nrt_tensor_view *v, int64_t n, int int64,
                           const char *what) {
  if (v->ndim != 1 || v->shape[0] != n || (int64 && v->dtype != NRT_INT64))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: %s must be 1-d of %lld elements%s", name,
                   what, (long long)n, int64 ? " (int64)" : "");
  return NRT_SUCCESS;
}

nrt_status rt_kernel_unique_scan(const nrt_op *op) {
  nrt_status st = rt_check_arity(op, 4, 2);
  if (st) return st;
  const nrt_tensor_view *count = &op->operands[0], *inverse = &op->operands[1],
                        *in = &op->operands[2], *perm = &op->operands[3];
  int has_inverse = rt_scalar_int(op, 0) != 0, has_perm = rt_scalar_int(op, 1) != 0;
  if (in->ndim != 1 || count->ndim != 0 || count->dtype != NRT_INT64)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "unique_scan: expects a 1-d input and a 0-d int64 count");
  int64_t n = in->shape[0];
  if ((has_inverse && (st = check_1d("unique_scan", inverse, n, 1, "inverse"))) ||
      (has_perm && (st = check_1d("unique_scan", perm, n, 1, "perm"))))
    return st;
  walk_job w;
  memset(&w, 0, sizeof w);
  w.in = in->data;
  w.n = n;
  w.in_stride = in->strides[0] * (int64_t)nrt_dtype_size(in->dtype);
  if (has_inverse) {
    w.inverse = inverse->data;
    w.inverse_stride = inverse->strides[0] * 8;
  }
  if (has_perm) {
    w.perm = perm->data;
    w.perm_stride = perm->strides[0] * 8;
  }
  atomic_init(&w.bad_perm, 0);
  int64_t runs = number_runs(&w, in->dtype);
  if (runs < 0) return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "unique_scan: out of host memory");
  if (has_inverse) write_runs(&w, in->dtype, WRITE_INVERSE);
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
  if (in->ndim != 1 || values->ndim != 1 || values->dtype != in->dtype)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "unique_collect: expects 1-d values and input of one dtype");
  int64_t n = in->shape[0], u = values->shape[0];
  if (has_counts && (st = check_1d("unique_collect", counts, u, 1, "counts"))) return st;
  if (n == 0 && u == 0) return NRT_SUCCESS;
  walk_job w;
  memset(&w, 0, sizeof w);
  w.in = in->data;
  w.n = n;
  w.in_stride = in->strides[0] * (int64_t)nrt_dtype_size(in->dtype);
  int64_t runs = number_runs(&w, in->dtype);
  if (runs < 0) return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "unique_collect: out of host memory");
  if (runs != u) {
    free(w.block_runs);
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "unique_collect: %lld outputs for %lld runs",
                   (long long)u, (long long)runs);
  }
  w.values = values->data;
  w.values_stride = values->strides[0] * (int64_t)nrt_dtype_size(values->dtype);
  if (has_counts) {
    w.counts = counts->data;
    w.counts_stride = counts->strides[0] * 8;
  }
  write_runs(&w, in->dtype, WRITE_RUNS);
  free(w.block_runs);
  if (has_counts) /* run starts become lengths */
    for (int64_t r = 0; r < u; r++) {
      int64_t *c = (int64_t *)(w.counts + r * w.counts_stride);
      int64_t next = r + 1 < u ? *(int64_t *)(w.counts + (r + 1) * w.counts_stride) : n;
      *c = next - *c;
    }
  return NRT_SUCCESS;
}
