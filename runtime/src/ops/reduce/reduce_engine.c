/* See reduce.h. The plan: after dropping size-1 dimensions and sorting the
 * rest by input stride, the innermost reduced dimension is the reduction
 * axis (block rows) and the innermost kept dimension the output axis
 * (block columns). The other reduced dimensions ("outer reduced") are
 * walked around the blocks, the other kept ones ("outer kept") around the
 * tiles. When the reduction axis is the innermost of all, blocks are long
 * runs of few columns (row mode); otherwise short runs of many columns, so
 * kernels vectorise across outputs (column mode).
 */
#include "ops/reduce/reduce.h"

#include <stdlib.h>
#include <string.h>
#include "ops/engine/convert.h"
#include "ops/engine/thread_pool.h"

#define TILE_COLS_MAX 4096       /* outputs per tile: long rows of input read at once */
#define ROW_MODE_TILE_WORK 16384 /* row mode: input elements per tile (>= 1 output) */
#define ROW_BLOCK 4096           /* row mode: rows per block */
#define COL_BLOCK 64             /* column mode: rows per block (two-pass blocks stay in cache) */
#define SPLIT_TILES 16           /* fewer tiles than this: split the reduction */
#define SPLIT_WORK 32768         /* input elements per group of a split reduction */
#define PARTIALS_MAX_BYTES ((int64_t)16 << 20)

typedef struct reduce_dim {
  int64_t size;
  int64_t in;              /* input stride, bytes */
  int64_t out[RT_REDUCE_MAX_RESULTS]; /* output strides, bytes (kept dims) */
  int64_t index;           /* reduction index stride (reduced dims) */
  int reduced;
} reduce_dim;

typedef struct reduce_plan {
  const rt_reducer *r;
  const char *x;
  int nout;
  char *out[RT_REDUCE_MAX_RESULTS];
  nrt_dtype out_dtype[RT_REDUCE_MAX_RESULTS];
  int nk, nr; /* outer kept / outer reduced dims, outermost first */
  reduce_dim kept[NRT_MAX_DIMS], red[NRT_MAX_DIMS];
  reduce_dim col, row; /* output axis and reduction axis */
  int64_t count;       /* elements per output */
  int64_t width, height; /* tile width, block height */
  int64_t col_tiles, tiles;
  int64_t chunks_per_outer, chunks; /* blocks per outer reduced index, per tile */
  int64_t groups, group_chunks;
  size_t tile_bytes;
  char *partials; /* split mode: accumulators of every (tile, group) */
} reduce_plan;

nrt_status rt_reduce_check_operands(const nrt_op *op, int min_outputs, int max_outputs) {
  const char *name = nrt_op_name(op->code);
  if (op->num_outputs < min_outputs || op->num_outputs > max_outputs ||
      op->num_operands != op->num_outputs + 1)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects %d to %d outputs and one input", name,
                   min_outputs, max_outputs);
  if (op->immediate_mask)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: operands must be tensors", name);
  return NRT_SUCCESS;
}

static int64_t abs64(int64_t v) { return v < 0 ? -v : v; }

/* Fills the dimension lists of the plan; fails on inconsistent shapes. */
static nrt_status build_dims(const nrt_op *op, reduce_plan *p) {
  const char *name = nrt_op_name(op->code);
  const nrt_tensor_view *in = &op->operands[op->num_outputs];
  reduce_dim dims[NRT_MAX_DIMS];
  int n = 0;
  int64_t index_stride = 1;
  int64_t elem = (int64_t)nrt_dtype_size(in->dtype);
  for (int d = in->ndim - 1; d >= 0; d--) {
    reduce_dim dim = {.size = in->shape[d], .in = in->strides[d] * elem};
    int reduced = -1;
    for (int k = 0; k < p->nout; k++) {
      const nrt_tensor_view *o = &op->operands[k];
      if (o->ndim != in->ndim)
        return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: output %d has rank %d, the input %d", name,
                       k, o->ndim, in->ndim);
      int r = o->shape[d] == 1 && in->shape[d] != 1;
      if (!r && o->shape[d] != in->shape[d])
        return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                       "%s: output %d has size %lld in dim %d where the input has %lld", name, k,
                       (long long)o->shape[d], d, (long long)in->shape[d]);
      if (reduced >= 0 && r != reduced)
        return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: outputs disagree on reduced dims", name);
      reduced = r;
      dim.out[k] = o->strides[d] * (int64_t)nrt_dtype_size(o->dtype);
    }
    if (in->shape[d] == 1) continue;
    dim.reduced = reduced;
    if (reduced) {
      for (int k = 0; k < p->nout; k++) dim.out[k] = 0;
      dim.index = index_stride;
      index_stride *= in->shape[d];
    }
    dims[n++] = dim;
  }
  /* dims is innermost-first in PyTorch's order; sort by input stride,
   * largest first (stable, so ties keep PyTorch's order). */
  reduce_dim sorted[NRT_MAX_DIMS];
  int m = 0;
  for (int i = n - 1; i >= 0; i--) {
    int j = m++;
    while (j > 0 && abs64(sorted[j - 1].in) < abs64(dims[i].in)) {
      sorted[j] = sorted[j - 1];
      j--;
    }
    sorted[j] = dims[i];
  }
  /* Merge an outer dim into the inner one when both walk as one. */
  int merged = 0;
  for (int i = 0; i < m; i++) {
    reduce_dim *prev = merged ? &sorted[merged - 1] : NULL;
    const reduce_dim *cur = &sorted[i];
    int ok = prev && prev->reduced == cur->reduced && prev->in == cur->in * cur->size &&
             prev->index == cur->index * cur->size;
    for (int k = 0; ok && k < p->nout; k++) ok = prev->out[k] == cur->out[k] * cur->size;
    if (ok) {
      int64_t size = prev->size * cur->size;
      *prev = *cur;
      prev->size = size;
    } else {
      sorted[merged++] = *cur;
    }
  }
  p->nk = p->nr = 0;
  for (int i = 0; i < merged; i++) {
    if (sorted[i].reduced)
      p->red[p->nr++] = sorted[i];
    else
      p->kept[p->nk++] = sorted[i];
  }
  reduce_dim unit = {.size = 1};
  p->col = p->nk ? p->kept[--p->nk] : unit;
  p->row = p->nr ? p->red[--p->nr] : unit;
  return NRT_SUCCESS;
}

/* Tile and block sizes, tile count and the optional split of the
 * reduction into groups: functions of the shapes only. */
static void choose_blocking(reduce_plan *p) {
  int64_t outer_kept = 1, outer_red = 1, outputs;
  for (int i = 0; i < p->nk; i++) outer_kept *= p->kept[i].size;
  for (int i = 0; i < p->nr; i++) outer_red *= p->red[i].size;
  p->count = outer_red * p->row.size;
  outputs = outer_kept * p->col.size;
  int row_mode = p->row.size > 1 && (p->col.size == 1 || abs64(p->row.in) <= abs64(p->col.in));
  if (row_mode) {
    p->height = ROW_BLOCK;
    p->width = ROW_MODE_TILE_WORK / p->row.size;
    if (p->width < 1) p->width = 1;
  } else {
    p->height = COL_BLOCK;
    p->width = TILE_COLS_MAX;
  }
  if (p->width > TILE_COLS_MAX) p->width = TILE_COLS_MAX;
  if (p->width > p->col.size) p->width = p->col.size;
  p->col_tiles = (p->col.size + p->width - 1) / p->width;
  p->tiles = outer_kept * p->col_tiles;
  p->chunks_per_outer = (p->row.size + p->height - 1) / p->height;
  p->chunks = outer_red * p->chunks_per_outer;
  p->tile_bytes = (size_t)p->r->fields * (size_t)p->width * 8;
  p->groups = 1;
  p->group_chunks = p->chunks;
  if (p->tiles < SPLIT_TILES && p->chunks > 1 && outputs * p->count >= 2 * SPLIT_WORK) {
    int64_t per_chunk = p->height * p->width;
    int64_t g = SPLIT_WORK / per_chunk;
    if (g < 1) g = 1;
    for (;;) {
      int64_t groups = (p->chunks + g - 1) / g;
      if (groups == 1 || p->tiles * groups * (int64_t)p->tile_bytes <= PARTIALS_MAX_BYTES) {
        p->groups = groups;
        p->group_chunks = g;
        break;
      }
      g *= 2;
    }
  }
}

/* Byte offsets of linear index i over dims (outermost first). */
static void offsets(const reduce_dim *dims, int n, int64_t i, int nout, int64_t *in, int64_t *out,
                    int64_t *index) {
  *in = 0;
  if (index) *index = 0;
  for (int k = 0; k < nout; k++) out[k] = 0;
  for (int d = n - 1; d >= 0; d--) {
    int64_t pos = i % dims[d].size;
    i /= dims[d].size;
    *in += pos * dims[d].in;
    if (index) *index += pos * dims[d].index;
    for (int k = 0; k < nout; k++) out[k] += pos * dims[d].out[k];
  }
}

/* Folds blocks [first, last) of tile t into acc. */
static void fold_tile(const reduce_plan *p, int64_t t, int64_t first, int64_t last, rt_acc acc) {
  const rt_reducer *r = p->r;
  int64_t c0 = (t % p->col_tiles) * p->width;
  int64_t w = p->col.size - c0 < p->width ? p->col.size - c0 : p->width;
  int64_t kin, kout[RT_REDUCE_MAX_RESULTS];
  r->init(acc, w, r);
  if (first >= last) return; /* nothing to read (an empty input has no address) */
  offsets(p->kept, p->nk, t / p->col_tiles, 0, &kin, kout, NULL);
  const char *base = p->x + kin + c0 * p->col.in;
  for (int64_t c = first; c < last; c++) {
    int64_t outer = c / p->chunks_per_outer;
    int64_t r0 = (c % p->chunks_per_outer) * p->height;
    int64_t rin, rout[RT_REDUCE_MAX_RESULTS], rindex;
    offsets(p->red, p->nr, outer, 0, &rin, rout, &rindex);
    rt_reduce_block b = {
        .x = base + rin + r0 * p->row.in,
        .rows = p->row.size - r0 < p->height ? p->row.size - r0 : p->height,
        .row_stride = p->row.in,
        .cols = w,
        .col_stride = p->col.in,
        .index = rindex + r0 * p->row.index,
        .index_step = p->row.index,
    };
    r->block(acc, &b, r);
  }
}

/* Finishes tile t from acc and stores the results in the outputs. */
static void store_tile(const reduce_plan *p, int64_t t, rt_acc acc) {
  const rt_reducer *r = p->r;
  _Alignas(64) char buffers[RT_REDUCE_MAX_RESULTS][TILE_COLS_MAX * 8];
  char *results[RT_REDUCE_MAX_RESULTS] = {buffers[0], buffers[1]};
  int64_t c0 = (t % p->col_tiles) * p->width;
  int64_t w = p->col.size - c0 < p->width ? p->col.size - c0 : p->width;
  int64_t kin, kout[RT_REDUCE_MAX_RESULTS];
  offsets(p->kept, p->nk, t / p->col_tiles, p->nout, &kin, kout, NULL);
  r->finish(acc, w, p->count, results, r);
  for (int k = 0; k < p->nout; k++) {
    int res = r->first_result + k;
    nrt_dtype have = r->result_dtype[res];
    char *pair[2] = {p->out[k] + kout[k] + c0 * p->col.out[k], results[res]};
    int64_t strides[2] = {p->col.out[k], (int64_t)nrt_dtype_size(have)};
    rt_convert_loops[p->out_dtype[k]][have](pair, strides, w, NULL);
  }
}

static void run_tiles(int64_t begin, int64_t end, void *arg) {
  const reduce_plan *p = arg;
  _Alignas(64) char storage[RT_ACC_MAX_FIELDS * TILE_COLS_MAX * 8];
  rt_acc acc = {.base = storage, .cap = p->width};
  for (int64_t t = begin; t < end; t++) {
    fold_tile(p, t, 0, p->chunks, acc);
    store_tile(p, t, acc);
  }
}

static void run_groups(int64_t begin, int64_t end, void *arg) {
  const reduce_plan *p = arg;
  for (int64_t item = begin; item < end; item++) {
    int64_t t = item / p->groups, g = item % p->groups;
    int64_t first = g * p->group_chunks;
    int64_t last = first + p->group_chunks < p->chunks ? first + p->group_chunks : p->chunks;
    rt_acc acc = {.base = p->partials + (size_t)item * p->tile_bytes, .cap = p->width};
    fold_tile(p, t, first, last, acc);
  }
}

nrt_status rt_reduce(const nrt_op *op, const rt_reducer *r) {
  reduce_plan p;
  memset(&p, 0, sizeof p);
  p.r = r;
  p.nout = op->num_outputs;
  if (p.nout < 1 || p.nout > r->results - r->first_result || r->fields > RT_ACC_MAX_FIELDS)
    return rt_fail(NRT_ERROR_INTERNAL, "%s: reducer and op disagree", nrt_op_name(op->code));
  for (int k = 0; k < p.nout; k++) {
    p.out[k] = op->operands[k].data;
    p.out_dtype[k] = op->operands[k].dtype;
  }
  p.x = op->operands[p.nout].data;
  nrt_status s = build_dims(op, &p);
  if (s) return s;
  for (int k = 0; k < p.nout; k++)
    if (nrt_view_numel(&op->operands[k]) == 0) return NRT_SUCCESS;
  choose_blocking(&p);
  int64_t tile_work = p.width * (p.count > 0 ? p.count : 1);
  if (p.groups == 1) {
    int64_t grain = RT_PARALLEL_GRAIN / tile_work;
    rt_parallel_for(p.tiles, grain > 1 ? grain : 1, run_tiles, &p);
    return NRT_SUCCESS;
  }
  p.partials = malloc((size_t)(p.tiles * p.groups) * p.tile_bytes);
  if (!p.partials)
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: no host memory for partial results",
                   nrt_op_name(op->code));
  rt_parallel_for(p.tiles * p.groups, 1, run_groups, &p);
  for (int64_t t = 0; t < p.tiles; t++) { /* combine in group order */
    rt_acc acc = {.base = p.partials + (size_t)(t * p.groups) * p.tile_bytes, .cap = p.width};
    int64_t c0 = (t % p.col_tiles) * p.width;
    int64_t w = p.col.size - c0 < p.width ? p.col.size - c0 : p.width;
    for (int64_t g = 1; g < p.groups; g++) {
      rt_acc later = {.base = acc.base + (size_t)g * p.tile_bytes, .cap = p.width};
      r->combine(acc, later, w, r);
    }
    store_tile(&p, t, acc);
  }
  free(p.partials);
  return NRT_SUCCESS;
}
