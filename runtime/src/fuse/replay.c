/* See replay.h. */
#include "fuse/replay.h"

#include <stdlib.h>
#include <string.h>
#include "ops/engine/loops.h"

struct rt_fuse_replays {
  int32_t num_insts;
  struct {
    atomic_int state; /* RT_REPLAY_*, or CLAIMED while a thread writes r */
    rt_fuse_replay r;
  } inst[];
};

enum { CLAIMED = 2 };

rt_fuse_replays *rt_fuse_replays_create(int32_t num_insts) {
  rt_fuse_replays *r = calloc(1, sizeof *r + (size_t)num_insts * sizeof r->inst[0]);
  if (!r) return NULL;
  r->num_insts = num_insts;
  for (int32_t i = 0; i < num_insts; i++) atomic_init(&r->inst[i].state, RT_REPLAY_UNKNOWN);
  return r;
}

void rt_fuse_replays_destroy(rt_fuse_replays *r) { free(r); }

int rt_fuse_replays_state(const rt_fuse_replays *r, int32_t i) {
  return atomic_load_explicit((atomic_int *)&r->inst[i].state, memory_order_acquire);
}

static rt_fuse_replays *shared_of(const struct nrt_fuse_group *g) {
  return g->replays && g->replays->num_insts == g->num_insts ? g->replays : NULL;
}

/* The state instruction i uses: the step's shared one once decided, else
 * the thread's own. */
static const rt_fuse_replay *effective(const struct nrt_fuse_group *g, int i, const rt_fuse_replay *st) {
  rt_fuse_replays *shared = shared_of(g);
  if (shared && atomic_load_explicit(&shared->inst[i].state, memory_order_acquire) == RT_REPLAY_DIRECT)
    return &shared->inst[i].r;
  return st;
}

void rt_fuse_replay_begin(const struct nrt_fuse_group *g, rt_fuse_replay *states) {
  rt_fuse_replays *shared = shared_of(g);
  for (int i = 0; i < g->num_insts; i++) {
    int s = shared ? atomic_load_explicit(&shared->inst[i].state, memory_order_acquire) : 0;
    states[i].state = s == RT_REPLAY_KERNEL ? RT_REPLAY_KERNEL : RT_REPLAY_UNKNOWN;
  }
}

/* Bit k set when operand k of a [rows, cols] block is one value: an
 * immediate, or a view whose every dimension has size 1 or stride 0. */
static unsigned single_values(const nrt_fuse_inst *in, int64_t rows, int64_t cols,
                              const int64_t *in_rs, const int64_t *in_cs) {
  unsigned mask = 0;
  for (int k = 0; k < in->num_operands; k++) {
    const nrt_fuse_ref *ref = &in->operands[k];
    int single;
    if (ref->kind == NRT_FUSE_IMMEDIATE) {
      single = 1;
    } else if (ref->kind == NRT_FUSE_INPUT) {
      single = (rows == 1 || in_rs[ref->index] == 0) && (cols == 1 || in_cs[ref->index] == 0);
    } else {
      single = rows * cols == 1;
    }
    mask |= (unsigned)single << k;
  }
  return mask;
}

int rt_fuse_replay_capture_start(const struct nrt_fuse_group *g, int i, rt_fuse_replay *st) {
  if (st->state != RT_REPLAY_UNKNOWN || effective(g, i, st) != st) return 0;
  memset(&st->cap, 0, sizeof st->cap);
  rt_loop_capture_set(&st->cap);
  return 1;
}

void rt_fuse_replay_capture_end(const struct nrt_fuse_group *g, int i, rt_fuse_replay *st,
                                const nrt_op *op, const rt_fuse_box *b, nrt_status status) {
  rt_loop_capture_set(NULL);
  if (status != NRT_SUCCESS) return; /* decided by a later run: the error may be this data's */
  int same = st->cap.usable && st->cap.num_operands == op->num_operands;
  for (int k = 0; same && k < op->num_operands; k++) same = st->cap.data[k] == op->operands[k].data;
  st->state = same ? RT_REPLAY_DIRECT : RT_REPLAY_KERNEL;
  st->single_mask = single_values(&g->insts[i], b->rows, b->cols, b->in_rs, b->in_cs);
  /* Offered to the step's other runs: the first thread to decide writes. */
  rt_fuse_replays *shared = shared_of(g);
  int expected = RT_REPLAY_UNKNOWN;
  if (shared && atomic_compare_exchange_strong(&shared->inst[i].state, &expected, CLAIMED)) {
    shared->inst[i].r = *st;
    atomic_store_explicit(&shared->inst[i].state, st->state, memory_order_release);
  }
}

int rt_fuse_replay_run(const struct nrt_fuse_group *g, int i, const rt_fuse_replay *own,
                       const rt_fuse_box *b, char *scratch) {
  const rt_fuse_replay *st = effective(g, i, own);
  if (st->state != RT_REPLAY_DIRECT) return 0;
  const nrt_fuse_inst *in = &g->insts[i];
  if (single_values(in, b->rows, b->cols, b->in_rs, b->in_cs) != st->single_mask) return 0;
  char *data[NRT_MAX_OPERANDS];
  int64_t cs[NRT_MAX_OPERANDS], rs[NRT_MAX_OPERANDS];
  int flat = 1;
  for (int k = 0; k < in->num_operands; k++) {
    const nrt_fuse_ref *ref = &in->operands[k];
    if (ref->kind == NRT_FUSE_REGISTER) {
      cs[k] = (int64_t)nrt_dtype_size(g->registers[ref->index]);
      rs[k] = b->cols * cs[k];
      data[k] = scratch + g->register_offset[ref->index];
    } else if (ref->kind == NRT_FUSE_INPUT) {
      int64_t size = (int64_t)nrt_dtype_size(g->inputs[ref->index].dtype);
      cs[k] = b->in_cs[ref->index] * size;
      rs[k] = b->in_rs[ref->index] * size;
      data[k] = b->in[ref->index];
    } else {
      data[k] = st->cap.converted_mask & (1u << k) ? (char *)&st->cap.converted[k]
                                                   : (char *)&g->immediates[i][k];
      cs[k] = rs[k] = 0;
    }
    flat &= rs[k] == b->cols * cs[k];
  }
  rt_loop_ctx ctx;
  ctx.sc = st->cap.sc;
  atomic_init(&ctx.fault, 0);
  if (flat || b->rows == 1) {
    st->cap.loop(data, cs, b->rows * b->cols, &ctx);
  } else {
    for (int64_t r = 0; r < b->rows; r++) {
      char *row[NRT_MAX_OPERANDS];
      for (int k = 0; k < in->num_operands; k++) row[k] = data[k] + r * rs[k];
      st->cap.loop(row, cs, b->cols, &ctx);
    }
  }
  return !atomic_load_explicit(&ctx.fault, memory_order_relaxed);
}
