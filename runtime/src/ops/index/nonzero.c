/* Ops whose output size depends on the data, and their helpers:
 * NONZERO_COUNT, NONZERO, MASKED_SELECT and INDEX_BOUNDS.
 *
 * Their outputs follow the row-major order of the input's elements, whatever
 * its strides, so these kernels walk positions in row-major order (not the
 * memory order the iteration engine prefers). The positions are cut into
 * chunks by the element count alone; each chunk is counted on one thread,
 * and a prefix sum over the chunks tells each chunk where its output
 * starts, so chunks are written in parallel and the output is the same for
 * any number of threads. The caller learns the size from NONZERO_COUNT
 * (a synchronisation), then passes its counts on, so the writer reads the
 * input once more rather than twice.
 *
 * "Nonzero" is a bit test: -0.0 is zero and NaN is not, as in PyTorch.
 */
#include <string.h>
#include "internal.h"
#include "ops/engine/elementwise.h"
#include "ops/engine/thread_pool.h"

#define CHUNK_ELEMS 16384

static int64_t chunk_count(int64_t numel) {
  if (numel == 0) return 0;
  int64_t chunks = (numel + CHUNK_ELEMS - 1) / CHUNK_ELEMS;
  return chunks < NRT_NONZERO_CHUNKS ? chunks : NRT_NONZERO_CHUNKS;
}

static int64_t chunk_begin(int64_t numel, int64_t chunks, int64_t c) { return numel * c / chunks; }

/* The bits that make an element of dtype nonzero (the sign bit of a float
 * does not). */
static uint64_t nonzero_mask(nrt_dtype t) {
  switch (t) {
    case NRT_FLOAT16: case NRT_BFLOAT16: return 0x7fffu;
    case NRT_FLOAT32: return 0x7fffffffu;
    case NRT_FLOAT64: return 0x7fffffffffffffffu;
    default: return UINT64_MAX >> (64 - 8 * nrt_dtype_size(t));
  }
}

/* ---- row-major walks ---------------------------------------------------- */

typedef struct row_major {
  int nops;
  int ndim;
  int64_t numel;
  int64_t shape[NRT_MAX_DIMS];
  int64_t strides[3][NRT_MAX_DIMS]; /* bytes */
  char *data[3];
} row_major;

/* A run of n elements along the last dim; coord holds the position of its
 * first element (all dims, when the walk keeps them). */
typedef void (*row_fn)(void *ctx, char *const *data, const int64_t *strides, int64_t n,
                       const int64_t *coord);

/* merge: fuse dims that row-major order crosses contiguously (the caller
 * then gets no meaningful coordinates). */
static void row_major_init(row_major *w, int nops, const nrt_tensor_view *views, int merge) {
  w->nops = nops;
  w->ndim = 0;
  w->numel = nrt_view_numel(&views[0]);
  for (int k = 0; k < nops; k++) w->data[k] = views[k].data;
  for (int32_t d = 0; d < views[0].ndim; d++) {
    int64_t size = views[0].shape[d];
    if (merge && size == 1) continue;
    int n = w->ndim;
    int fuse = merge && n > 0;
    for (int k = 0; k < nops && fuse; k++)
      fuse = w->strides[k][n - 1] == views[k].strides[d] * size * (int64_t)nrt_dtype_size(views[k].dtype);
    if (fuse) {
      w->shape[n - 1] *= size;
      for (int k = 0; k < nops; k++)
        w->strides[k][n - 1] = views[k].strides[d] * (int64_t)nrt_dtype_size(views[k].dtype);
      continue;
    }
    w->shape[n] = size;
    for (int k = 0; k < nops; k++)
      w->strides[k][n] = views[k].strides[d] * (int64_t)nrt_dtype_size(views[k].dtype);
    w->ndim++;
  }
}

/* Calls fn for each run of positions [begin, end) in row-major order. */
static void row_major_walk(const row_major *w, int64_t begin, int64_t end, row_fn fn, void *ctx) {
  int64_t coord[NRT_MAX_DIMS] = {0};
  char *data[3];
  int64_t inner[3] = {0, 0, 0};
  if (begin >= end) return;
  if (w->ndim == 0) {
    fn(ctx, w->data, inner, 1, coord);
    return;
  }
  int last = w->ndim - 1;
  int64_t rest = begin;
  for (int d = last; d >= 0; d--) {
    coord[d] = rest % w->shape[d];
    rest /= w->shape[d];
  }
  for (int k = 0; k < w->nops; k++) {
    data[k] = w->data[k];
    for (int d = 0; d <= last; d++) data[k] += coord[d] * w->strides[k][d];
    inner[k] = w->strides[k][last];
  }
  for (int64_t remaining = end - begin;;) {
    int64_t n = w->shape[last] - coord[last];
    if (n > remaining) n = remaining;
    fn(ctx, data, inner, n, coord);
    remaining -= n;
    if (remaining == 0) return;
    for (int k = 0; k < w->nops; k++) data[k] -= coord[last] * w->strides[k][last];
    coord[last] = 0;
    for (int d = last - 1; d >= 0; d--) {
      for (int k = 0; k < w->nops; k++) data[k] += w->strides[k][d];
      if (++coord[d] < w->shape[d]) break;
      for (int k = 0; k < w->nops; k++) data[k] -= w->strides[k][d] * w->shape[d];
      coord[d] = 0;
    }
  }
}

/* ---- counting ------------------------------------------------------------ */

#define COUNT_LOOP(BITS, T)                                                           \
  RT_SIMD_RETURNS(int64_t, count_##BITS, (const char *p, int64_t stride, int64_t n,   \
                                          uint64_t mask), (p, stride, n, mask)) {     \
    int64_t c = 0;                                                                    \
    if (stride == (int64_t)sizeof(T)) {                                               \
      const T *v = (const T *)p;                                                      \
      for (int64_t i = 0; i < n; i++) c += (v[i] & (T)mask) != 0;                     \
      return c;                                                                       \
    }                                                                                 \
    for (int64_t i = 0; i < n; i++) c += (*(const T *)(p + i * stride) & (T)mask) != 0; \
    return c;                                                                         \
  }
COUNT_LOOP(8, uint8_t)
COUNT_LOOP(16, uint16_t)
COUNT_LOOP(32, uint32_t)
COUNT_LOOP(64, uint64_t)

typedef struct count_job {
  row_major walk;
  size_t size; /* of the counted operand (operand 0 of the walk) */
  uint64_t mask;
  int64_t chunks;
  int64_t counts[NRT_NONZERO_CHUNKS];
} count_job;

typedef struct count_run_ctx {
  const count_job *job;
  int64_t count;
} count_run_ctx;

static void count_row(void *arg, char *const *data, const int64_t *strides, int64_t n,
                      const int64_t *coord) {
  (void)coord;
  count_run_ctx *c = arg;
  switch (c->job->size) {
    case 1: c->count += count_8(data[0], strides[0], n, c->job->mask); break;
    case 2: c->count += count_16(data[0], strides[0], n, c->job->mask); break;
    case 4: c->count += count_32(data[0], strides[0], n, c->job->mask); break;
    default: c->count += count_64(data[0], strides[0], n, c->job->mask); break;
  }
}

static void count_chunks(int64_t begin, int64_t end, void *arg) {
  count_job *job = arg;
  for (int64_t c = begin; c < end; c++) {
    count_run_ctx ctx = {.job = job};
    row_major_walk(&job->walk, chunk_begin(job->walk.numel, job->chunks, c),
                   chunk_begin(job->walk.numel, job->chunks, c + 1), count_row, &ctx);
    job->counts[c] = ctx.count;
  }
}

/* Counts the nonzeros of x per chunk of its row-major order. */
static void count_nonzero(const nrt_tensor_view *x, count_job *job) {
  row_major_init(&job->walk, 1, x, 1);
  job->size = nrt_dtype_size(x->dtype);
  job->mask = nonzero_mask(x->dtype);
  job->chunks = chunk_count(job->walk.numel);
  rt_parallel_for(job->chunks, 1, count_chunks, job);
}

static void store_i64(const nrt_tensor_view *v, int64_t i, int64_t value) {
  memcpy((char *)v->data + i * v->strides[0] * 8, &value, sizeof value);
}

static int64_t load_i64(const nrt_tensor_view *v, int64_t i) {
  int64_t value;
  memcpy(&value, (const char *)v->data + i * v->strides[0] * 8, sizeof value);
  return value;
}

static nrt_status check_counts_view(const char *name, const nrt_tensor_view *v) {
  if (v->dtype != NRT_INT64 || v->ndim != 1 || v->shape[0] < 1 + NRT_NONZERO_CHUNKS)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: counts must be int64[%d]", name,
                   1 + NRT_NONZERO_CHUNKS);
  return NRT_SUCCESS;
}

nrt_status rt_kernel_nonzero_count(const nrt_op *op) {
  if (op->num_operands != 2 || op->num_outputs != 1)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nonzero_count: expects operands [counts, x]");
  nrt_status s = check_counts_view("nonzero_count", &op->operands[0]);
  if (s) return s;
  count_job job;
  count_nonzero(&op->operands[1], &job);
  int64_t total = 0;
  for (int64_t c = 0; c < NRT_NONZERO_CHUNKS; c++) {
    int64_t n = c < job.chunks ? job.counts[c] : 0;
    store_i64(&op->operands[0], 1 + c, n);
    total += n;
  }
  store_i64(&op->operands[0], 0, total);
  return NRT_SUCCESS;
}

/* Reads the chunk counts of a NONZERO_COUNT result (same chunking). Writers
 * still check every output row against the output's size, so counts that
 * do not match the data cannot make them write out of bounds. */
static void counts_from_view(const nrt_tensor_view *v, count_job *job, int64_t numel) {
  job->chunks = chunk_count(numel);
  for (int64_t c = 0; c < job->chunks; c++) job->counts[c] = load_i64(v, 1 + c);
}

/* ---- writing positions and selected elements ------------------------------ */

typedef struct write_job {
  row_major walk;
  const count_job *counts;
  int64_t offsets[NRT_NONZERO_CHUNKS]; /* first output row of each chunk */
  const nrt_tensor_view *out;
  int64_t limit; /* output rows */
  size_t size;   /* of the tested operand */
  uint64_t mask;
  int tested;    /* which walk operand decides (NONZERO: 0; MASKED_SELECT: the mask, 1) */
} write_job;

typedef struct write_ctx {
  const write_job *job;
  int64_t row;
} write_ctx;

static inline int is_set(const char *p, size_t size, uint64_t mask) {
  switch (size) {
    case 1: return (*(const uint8_t *)p & mask) != 0;
    case 2: return (*(const uint16_t *)p & mask) != 0;
    case 4: return (*(const uint32_t *)p & mask) != 0;
    default: return (*(const uint64_t *)p & mask) != 0;
  }
}

static void write_coords(void *arg, char *const *data, const int64_t *strides, int64_t n,
                         const int64_t *coord) {
  write_ctx *c = arg;
  const write_job *job = c->job;
  const nrt_tensor_view *out = job->out;
  int ndim = job->walk.ndim;
  for (int64_t i = 0; i < n; i++) {
    if (!is_set(data[0] + i * strides[0], job->size, job->mask)) continue;
    if (c->row >= job->limit) return;
    char *row = (char *)out->data + c->row * out->strides[0] * 8;
    for (int d = 0; d < ndim; d++) {
      int64_t v = coord[d] + (d == ndim - 1 ? i : 0);
      memcpy(row + d * out->strides[1] * 8, &v, sizeof v);
    }
    c->row++;
  }
}

static void write_selected(void *arg, char *const *data, const int64_t *strides, int64_t n,
                           const int64_t *coord) {
  (void)coord;
  write_ctx *c = arg;
  const write_job *job = c->job;
  const nrt_tensor_view *out = job->out;
  size_t size = nrt_dtype_size(out->dtype);
  int64_t step = out->strides[0] * (int64_t)size;
  for (int64_t i = 0; i < n; i++) {
    if (!*(const uint8_t *)(data[1] + i * strides[1])) continue;
    if (c->row >= job->limit) return;
    memcpy((char *)out->data + c->row * step, data[0] + i * strides[0], size);
    c->row++;
  }
}

typedef struct write_chunks_args {
  write_job *job;
  row_fn fn;
} write_chunks_args;

static void write_chunks(int64_t begin, int64_t end, void *arg) {
  const write_chunks_args *a = arg;
  write_job *job = a->job;
  int64_t chunks = job->counts->chunks;
  for (int64_t c = begin; c < end; c++) {
    if (job->offsets[c] >= job->limit) continue;
    write_ctx ctx = {.job = job, .row = job->offsets[c]};
    row_major_walk(&job->walk, chunk_begin(job->walk.numel, chunks, c),
                   chunk_begin(job->walk.numel, chunks, c + 1), a->fn, &ctx);
  }
}

/* Prefix sums of the chunk counts; returns the total. */
static int64_t set_offsets(write_job *job) {
  int64_t total = 0;
  for (int64_t c = 0; c < job->counts->chunks; c++) {
    job->offsets[c] = total;
    total += job->counts->counts[c];
  }
  return total;
}

nrt_status rt_kernel_nonzero(const nrt_op *op) {
  if ((op->num_operands != 2 && op->num_operands != 3) || op->num_outputs != 1 || op->num_scalars < 1)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nonzero: expects operands [out, x, (counts)] and a fill scalar");
  const nrt_tensor_view *out = &op->operands[0], *x = &op->operands[1];
  if (out->dtype != NRT_INT64 || out->ndim != 2 || out->shape[1] != x->ndim)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nonzero: out must be int64 [m, %d]", x->ndim);
  count_job counts;
  if (op->num_operands == 3) {
    nrt_status s = check_counts_view("nonzero", &op->operands[2]);
    if (s) return s;
    counts_from_view(&op->operands[2], &counts, nrt_view_numel(x));
  } else {
    count_nonzero(x, &counts);
  }
  write_job job = {.counts = &counts, .out = out, .limit = out->shape[0],
                   .size = nrt_dtype_size(x->dtype), .mask = nonzero_mask(x->dtype)};
  row_major_init(&job.walk, 1, x, 0);
  int64_t total = set_offsets(&job);
  if (x->ndim > 0) {
    write_chunks_args args = {&job, write_coords};
    rt_parallel_for(counts.chunks, 1, write_chunks, &args);
  }
  const nrt_scalar *fill = &op->scalars[0];
  int64_t value = fill->is_float ? (int64_t)fill->f : fill->i;
  for (int64_t r = total; r < out->shape[0]; r++)
    for (int64_t d = 0; d < out->shape[1]; d++)
      memcpy((char *)out->data + (r * out->strides[0] + d * out->strides[1]) * 8, &value, sizeof value);
  return NRT_SUCCESS;
}

nrt_status rt_kernel_masked_select(const nrt_op *op) {
  if (op->num_operands != 4 || op->num_outputs != 1)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "masked_select: expects operands [out, x, mask, counts]");
  const nrt_tensor_view *out = &op->operands[0], *x = &op->operands[1], *mask = &op->operands[2];
  nrt_status s = check_counts_view("masked_select", &op->operands[3]);
  if (s) return s;
  if (out->ndim != 1 || out->dtype != x->dtype || mask->dtype != NRT_BOOL || x->ndim != mask->ndim ||
      memcmp(x->shape, mask->shape, sizeof x->shape[0] * (size_t)x->ndim))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "masked_select: expects a 1-d out of x's dtype and a bool mask of x's shape");
  count_job counts;
  counts_from_view(&op->operands[3], &counts, nrt_view_numel(x));
  write_job job = {.counts = &counts, .out = out, .limit = out->shape[0]};
  nrt_tensor_view views[2] = {*x, *mask};
  row_major_init(&job.walk, 2, views, 1);
  set_offsets(&job);
  write_chunks_args args = {&job, write_selected};
  rt_parallel_for(counts.chunks, 1, write_chunks, &args);
  return NRT_SUCCESS;
}

/* ---- INDEX_BOUNDS --------------------------------------------------------- */

typedef struct bounds_job {
  row_major walk;
  nrt_dtype dtype;
  int64_t chunks;
  int64_t lo[NRT_NONZERO_CHUNKS], hi[NRT_NONZERO_CHUNKS];
} bounds_job;

typedef struct bounds_ctx {
  nrt_dtype dtype;
  int64_t lo, hi;
} bounds_ctx;

#define BOUNDS_CASE(DT, T)                                  \
  case DT:                                                  \
    for (int64_t i = 0; i < n; i++) {                       \
      int64_t v = *(const T *)(data[0] + i * strides[0]);   \
      if (v < c->lo) c->lo = v;                             \
      if (v > c->hi) c->hi = v;                             \
    }                                                       \
    return;

static void bounds_row(void *arg, char *const *data, const int64_t *strides, int64_t n,
                       const int64_t *coord) {
  (void)coord;
  bounds_ctx *c = arg;
  switch (c->dtype) {
    BOUNDS_CASE(NRT_UINT8, uint8_t)
    BOUNDS_CASE(NRT_INT8, int8_t)
    BOUNDS_CASE(NRT_INT16, int16_t)
    BOUNDS_CASE(NRT_INT32, int32_t)
    default: BOUNDS_CASE(NRT_INT64, int64_t)
  }
}

static void bounds_chunks(int64_t begin, int64_t end, void *arg) {
  bounds_job *job = arg;
  for (int64_t c = begin; c < end; c++) {
    bounds_ctx ctx = {.dtype = job->dtype, .lo = INT64_MAX, .hi = INT64_MIN};
    row_major_walk(&job->walk, chunk_begin(job->walk.numel, job->chunks, c),
                   chunk_begin(job->walk.numel, job->chunks, c + 1), bounds_row, &ctx);
    job->lo[c] = ctx.lo;
    job->hi[c] = ctx.hi;
  }
}

nrt_status rt_kernel_index_bounds(const nrt_op *op) {
  if (op->num_operands != 2 || op->num_outputs != 1)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "index_bounds: expects operands [out, x]");
  const nrt_tensor_view *out = &op->operands[0], *x = &op->operands[1];
  if (out->dtype != NRT_INT64 || out->ndim != 1 || out->shape[0] != 2)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "index_bounds: out must be int64[2]");
  if (x->dtype < NRT_UINT8 || x->dtype > NRT_INT64)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "index_bounds: x must be an integer tensor, got %s",
                   nrt_dtype_name(x->dtype));
  bounds_job job = {.dtype = x->dtype};
  row_major_init(&job.walk, 1, x, 1);
  if (job.walk.numel == 0)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "index_bounds: x is empty");
  job.chunks = chunk_count(job.walk.numel);
  rt_parallel_for(job.chunks, 1, bounds_chunks, &job);
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (int64_t c = 0; c < job.chunks; c++) {
    if (job.lo[c] < lo) lo = job.lo[c];
    if (job.hi[c] > hi) hi = job.hi[c];
  }
  store_i64(out, 0, lo);
  store_i64(out, 1, hi);
  return NRT_SUCCESS;
}
