/* The fused-expression VM: runs a group tile by tile.
 *
 * A tile is a [rows, cols] block of the last two walk dimensions at one
 * index of the dimensions before them (whole rows when a row is short, so
 * that a tile holds about RT_FUSE_TILE elements). Chunks are balanced, so
 * every tile of a group with two or more elements has two or more (an
 * operand is then a single value on a tile exactly when it is one on the
 * whole tensors, which some kernels ask; group.c refuses the cases where a
 * broadcast input would still differ). For each tile every instruction
 * calls its op's own kernel on [rows, cols] views, or, once the kernel's
 * loop is captured, that loop directly (replay.h): registers are
 * contiguous blocks of a per-thread scratch, inputs are views into the
 * tensors. Then each output receives its register. A group with a tape
 * (tape.h) runs each tile through its register-level loop instead.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fuse/fuse_group.h"
#include "ops/engine/iterate.h"
#include "ops/engine/thread_pool.h"
#include "fuse/replay.h"
#include "fuse/codegen.h"

void rt_fuse_plan_tiles(rt_fuse_walk *w) {
  if (w->ndim == 0) {
    w->rows = w->cols = w->outer = w->row_chunks = w->col_chunks = 1;
  } else {
    w->cols = w->shape[w->ndim - 1];
    w->rows = w->ndim >= 2 ? w->shape[w->ndim - 2] : 1;
    w->outer = 1;
    for (int d = 0; d + 2 < w->ndim; d++) w->outer *= w->shape[d];
    w->col_chunks = (w->cols + RT_FUSE_TILE - 1) / RT_FUSE_TILE;
    if (w->col_chunks == 1) {
      int64_t per_tile = RT_FUSE_TILE / w->cols;
      w->row_chunks = (w->rows + per_tile - 1) / per_tile;
    } else {
      w->row_chunks = w->rows;
    }
  }
  w->tiles = w->outer * w->row_chunks * w->col_chunks;
}

int64_t rt_fuse_min_tile_rows(const rt_fuse_walk *w) { return w->rows / w->row_chunks; }

typedef struct vm_run {
  const struct nrt_fuse_group *g;
  atomic_int fail_inst; /* instructions from here on are not run */
  pthread_mutex_t mu;
  int failed_inst;      /* the earliest instruction that failed, -1 for the scratch */
  nrt_status status;
  char message[1024];
} vm_run;

/* Records a failure of instruction inst (-1: before any). The earliest
 * instruction wins, as it would unfused: an op runs over every element
 * before the next op starts. */
static void record_failure(vm_run *run, int inst, nrt_status status) {
  pthread_mutex_lock(&run->mu);
  if (run->status == NRT_SUCCESS || inst < run->failed_inst) {
    run->failed_inst = inst;
    run->status = status;
    snprintf(run->message, sizeof run->message, "%s", nrt_last_error());
    atomic_store(&run->fail_inst, inst < 0 ? 0 : inst);
  }
  pthread_mutex_unlock(&run->mu);
}

static void tile_view(nrt_tensor_view *v, char *data, nrt_dtype dtype, int64_t rows, int64_t cols,
                      int64_t row_stride, int64_t col_stride) {
  v->data = data;
  v->dtype = dtype;
  v->ndim = 2;
  v->shape[0] = rows;
  v->shape[1] = cols;
  v->strides[0] = row_stride;
  v->strides[1] = col_stride;
}

/* Where tensor t's part of a tile starts (the tile at outer multi-index
 * index, first row r0, first column c0), and its row and column strides. */
static char *tile_origin(const rt_fuse_tensor *t, const rt_fuse_walk *w, const int64_t *index,
                         int64_t r0, int64_t c0, int64_t *row_stride, int64_t *col_stride) {
  int64_t off = 0;
  for (int d = 0; d + 2 < w->ndim; d++) off += index[d] * t->strides[d];
  *row_stride = w->ndim >= 2 ? t->strides[w->ndim - 2] : 0;
  *col_stride = w->ndim >= 1 ? t->strides[w->ndim - 1] : 0;
  off += r0 * *row_stride + c0 * *col_stride;
  return t->data + off * (int64_t)nrt_dtype_size(t->dtype);
}

/* A thread's working memory for a run: the registers of one tile, then the
 * instructions' replay states. */
static size_t states_offset(const struct nrt_fuse_group *g) {
  return (g->scratch_bytes + 63) & ~(size_t)63;
}
static size_t thread_bytes(const struct nrt_fuse_group *g) {
  size_t bytes = states_offset(g) + (size_t)g->num_insts * sizeof(rt_fuse_replay);
  return (bytes + 63) & ~(size_t)63; /* aligned_alloc takes multiples of the alignment */
}
static rt_fuse_replay *thread_states(const struct nrt_fuse_group *g, char *scratch) {
  return (rt_fuse_replay *)(scratch + states_offset(g));
}

/* Instruction i through its kernel on block b (registers at scratch, row
 * stride b->cols), capturing the kernel's loop when st asks for it. */
static nrt_status kernel_inst(const struct nrt_fuse_group *g, int i, const rt_fuse_box *b,
                              char *scratch, rt_fuse_replay *st) {
  const nrt_fuse_inst *in = &g->insts[i];
  nrt_op op;
  memset(&op, 0, sizeof op);
  op.code = in->code;
  op.compute_dtype = in->compute_dtype;
  op.num_operands = in->num_operands;
  op.num_outputs = in->num_outputs;
  op.num_scalars = in->num_scalars;
  memcpy(op.scalars, in->scalars, sizeof op.scalars);
  for (int k = 0; k < in->num_operands; k++) {
    const nrt_fuse_ref *ref = &in->operands[k];
    nrt_tensor_view *v = &op.operands[k];
    if (ref->kind == NRT_FUSE_REGISTER) {
      tile_view(v, scratch + g->register_offset[ref->index], g->registers[ref->index], b->rows,
                b->cols, b->cols, 1);
    } else if (ref->kind == NRT_FUSE_INPUT) {
      tile_view(v, b->in[ref->index], g->inputs[ref->index].dtype, b->rows, b->cols,
                b->in_rs[ref->index], b->in_cs[ref->index]);
    } else {
      tile_view(v, (char *)&g->immediates[i][k], ref->dtype, b->rows, b->cols, 0, 0);
      op.immediate_mask |= 1u << k;
      op.immediates[k] = ref->value;
    }
  }
  int capturing = st && rt_fuse_replay_capture_start(g, i, st);
  nrt_status s = g->kernels[i](&op);
  if (capturing) rt_fuse_replay_capture_end(g, i, st, &op, b, s);
  return s;
}

/* Runs g's instructions over block b and stores its outputs. Instructions
 * from limit on are not run. states (NULL: always call the kernels) are
 * the thread's replay states. Returns -1, or the index of the instruction
 * that failed (num_insts: a store) with its status in *status. */
static int run_block(const struct nrt_fuse_group *g, const rt_fuse_box *b, char *scratch,
                     rt_fuse_replay *states, atomic_int *limit, nrt_status *status) {
  if (g->tape.num_ops) {
    if (g->gen)
      rt_fuse_codegen_run(g, b, scratch);
    else
      rt_fuse_tape_run(g, b, scratch);
    return -1;
  }
  for (int i = 0; i < g->num_insts && (!limit || i < atomic_load_explicit(limit, memory_order_relaxed));
       i++) {
    rt_fuse_replay *st = states ? &states[i] : NULL;
    if (st && rt_fuse_replay_run(g, i, st, b, scratch)) continue;
    if ((*status = kernel_inst(g, i, b, scratch, st)) != NRT_SUCCESS) return i;
  }
  if (limit && atomic_load_explicit(limit, memory_order_relaxed) <= g->num_insts) return -1;
  for (int j = 0; j < g->num_outputs; j++) {
    int32_t r = g->output_registers[j];
    nrt_op copy;
    memset(&copy, 0, sizeof copy);
    copy.code = NRT_OP_COPY;
    copy.num_operands = 2;
    copy.num_outputs = 1;
    tile_view(&copy.operands[0], b->out[j], g->outputs[j].dtype, b->rows, b->cols, b->out_rs[j],
              b->out_cs[j]);
    tile_view(&copy.operands[1], scratch + g->register_offset[r], g->registers[r], b->rows, b->cols,
              b->cols, 1);
    if ((*status = rt_kernel_copy(&copy)) != NRT_SUCCESS) return g->num_insts;
  }
  return -1;
}

static void run_tile(vm_run *run, int64_t t, char *scratch, rt_fuse_replay *states) {
  const struct nrt_fuse_group *g = run->g;
  const rt_fuse_walk *w = &g->walk;
  int64_t per_outer = w->row_chunks * w->col_chunks, o = t / per_outer, rc = t % per_outer;
  int64_t ri = rc / w->col_chunks, ci = rc % w->col_chunks;
  int64_t r0 = w->rows * ri / w->row_chunks, r1 = w->rows * (ri + 1) / w->row_chunks;
  int64_t c0 = w->cols * ci / w->col_chunks, c1 = w->cols * (ci + 1) / w->col_chunks;
  /* The outer index as a multi-index over the dims before the tile's. */
  int64_t index[NRT_MAX_DIMS] = {0};
  for (int d = w->ndim - 3; d >= 0; d--) {
    index[d] = o % w->shape[d];
    o /= w->shape[d];
  }
  rt_fuse_box b = {.rows = r1 - r0, .cols = c1 - c0};
  for (int k = 0; k < g->num_inputs; k++)
    b.in[k] = tile_origin(&g->inputs[k], w, index, r0, c0, &b.in_rs[k], &b.in_cs[k]);
  for (int j = 0; j < g->num_outputs; j++)
    b.out[j] = tile_origin(&g->outputs[j], w, index, r0, c0, &b.out_rs[j], &b.out_cs[j]);
  nrt_status s = NRT_SUCCESS;
  int failed = run_block(g, &b, scratch, states, &run->fail_inst, &s);
  if (failed >= 0) record_failure(run, failed, s);
}

static void run_tiles(int64_t begin, int64_t end, void *arg) {
  vm_run *run = arg;
  char *scratch = aligned_alloc(64, thread_bytes(run->g));
  if (!scratch) {
    rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for its registers (%s)", run->g->name,
            rt_format_size(thread_bytes(run->g)).s);
    record_failure(run, -1, NRT_ERROR_OUT_OF_MEMORY);
    return;
  }
  /* One tile and nothing shared: a capture would never be replayed. */
  rt_fuse_replay *states = end - begin > 1 || run->g->replays ? thread_states(run->g, scratch) : NULL;
  if (states) rt_fuse_replay_begin(run->g, states);
  for (int64_t t = begin; t < end; t++) {
    if (atomic_load_explicit(&run->fail_inst, memory_order_relaxed) == 0) break;
    run_tile(run, t, scratch, states);
  }
  free(scratch);
}

nrt_status rt_fuse_run(const struct nrt_fuse_group *g) {
  if (g->numel == 0) return NRT_SUCCESS;
  if (g->tape.num_ops) rt_metric_add(NRT_METRIC_FUSE_REGISTER_LOOPS, 1);
  if (g->gen) rt_metric_add(NRT_METRIC_FUSE_CODEGEN_RUNS, 1);
  vm_run run = {.g = g, .failed_inst = 0, .status = NRT_SUCCESS};
  atomic_init(&run.fail_inst, g->num_insts + 1);
  pthread_mutex_init(&run.mu, NULL);
  /* Small groups stay on one thread, as small unfused ops do. */
  int64_t per_tile = g->numel / g->walk.tiles;
  int64_t grain = RT_PARALLEL_GRAIN / (per_tile > 0 ? per_tile : 1);
  if (grain < 1) grain = 1;
  rt_parallel_for(g->walk.tiles, grain, run_tiles, &run);
  pthread_mutex_destroy(&run.mu);
  if (run.status != NRT_SUCCESS) return rt_fail(run.status, "%s", run.message);
  return NRT_SUCCESS;
}

/* Each thread's register scratch for boxes, kept between calls (a GEMM
 * calls once per block). */
static pthread_key_t box_key;
static pthread_once_t box_once = PTHREAD_ONCE_INIT;
static int box_key_ok;
typedef struct box_scratch {
  size_t bytes;
  char *data;
} box_scratch;
static void box_scratch_free(void *p) {
  box_scratch *b = p;
  free(b->data);
  free(b);
}
static void box_init(void) { box_key_ok = pthread_key_create(&box_key, box_scratch_free) == 0; }

static char *thread_scratch(size_t bytes) {
  pthread_once(&box_once, box_init);
  if (!box_key_ok) return NULL;
  box_scratch *b = pthread_getspecific(box_key);
  if (!b) {
    if (!(b = calloc(1, sizeof *b))) return NULL;
    if (pthread_setspecific(box_key, b)) {
      free(b);
      return NULL;
    }
  }
  if (b->bytes < bytes) {
    free(b->data);
    b->data = aligned_alloc(64, bytes);
    b->bytes = b->data ? bytes : 0;
  }
  return b->data;
}

nrt_status rt_fuse_run_box(const struct nrt_fuse_group *g, const rt_fuse_box *box) {
  if (box->rows <= 0 || box->cols <= 0) return NRT_SUCCESS;
  char *scratch = thread_scratch(thread_bytes(g));
  if (!scratch)
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for its registers (%s)", g->name,
                   rt_format_size(thread_bytes(g)).s);
  if (g->tape.num_ops) rt_metric_add(NRT_METRIC_FUSE_REGISTER_LOOPS, 1);
  if (g->gen) rt_metric_add(NRT_METRIC_FUSE_CODEGEN_RUNS, 1);
  rt_fuse_replay *states = thread_states(g, scratch);
  rt_fuse_replay_begin(g, states);
  if (box->rows * box->cols <= RT_FUSE_TILE && !g->replays) states = NULL; /* one tile */
  /* Tiles of at most RT_FUSE_TILE elements: whole rows, or pieces of one. */
  int64_t tile_cols = box->cols < RT_FUSE_TILE ? box->cols : RT_FUSE_TILE;
  int64_t tile_rows = box->cols < RT_FUSE_TILE ? RT_FUSE_TILE / box->cols : 1;
  for (int64_t r0 = 0; r0 < box->rows; r0 += tile_rows)
    for (int64_t c0 = 0; c0 < box->cols; c0 += tile_cols) {
      rt_fuse_box b = {.rows = box->rows - r0 < tile_rows ? box->rows - r0 : tile_rows,
                       .cols = box->cols - c0 < tile_cols ? box->cols - c0 : tile_cols};
      for (int k = 0; k < g->num_inputs; k++) {
        b.in[k] = box->in[k] + (r0 * box->in_rs[k] + c0 * box->in_cs[k]) *
                                   (int64_t)nrt_dtype_size(g->inputs[k].dtype);
        b.in_rs[k] = box->in_rs[k];
        b.in_cs[k] = box->in_cs[k];
      }
      for (int j = 0; j < g->num_outputs; j++) {
        b.out[j] = box->out[j] + (r0 * box->out_rs[j] + c0 * box->out_cs[j]) *
                                     (int64_t)nrt_dtype_size(g->outputs[j].dtype);
        b.out_rs[j] = box->out_rs[j];
        b.out_cs[j] = box->out_cs[j];
      }
      nrt_status s = NRT_SUCCESS;
      if (run_block(g, &b, scratch, states, NULL, &s) >= 0) {
        char why[1024];
        snprintf(why, sizeof why, "%s", nrt_last_error());
        return rt_fail(s, "%s", why);
      }
    }
  return NRT_SUCCESS;
}
