/* Compiled graphs over random DAGs of pointwise ops (neuronrt/graph.h):
 * views dense, flipped (negative strides), shifted and broadcast over
 * shapes of symbolic sizes, temporaries rewritten and updated in place,
 * flattened nodes that break chains, and GEMMs (outer products of a
 * column and a row, so exact) whose readers become their epilogues. Each graph is compiled with and
 * without fusion and run at random bindings: the memory plan passes
 * rt_graph_plan_check, the arena is no bigger than the temporaries (and
 * smaller for a chain), and the outputs are bitwise those of the same ops
 * run one by one. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "graph/program.h"
#include "graph_writer.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t next_u64(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return rng;
}
static int pick(int n) { return (int)(next_u64() % (uint64_t)n); }

#define MAX_BUFS 40
#define MAX_NODES 24

/* A view kind of a buffer of numel s0*s1 (+ s1 for SHIFTED), over (s0, s1);
 * COL0 and ROW0, a GEMM's inputs: a buffer's first column (s0, 1) and an
 * s1-element buffer as a row (1, s1). */
enum { DENSE, FLIPPED, SHIFTED, ROW, FLAT, COL0, ROW0 };

typedef struct rbuf {
  uint32_t kind, slot;
  nrt_dtype dtype;
  int row;     /* numel s1 (an input broadcast along dim 0) */
  int shifted; /* numel s0*s1 + s1 */
} rbuf;

typedef struct rview {
  int buf, kind;
} rview;

typedef struct rnode {
  nrt_op_code code;
  int nin, flat, num_outputs;
  rview out, in[2];
  nrt_scalar scalar[2];
  int num_scalars;
} rnode;

typedef struct rgraph {
  int num_bufs, num_nodes, num_inputs, num_outputs;
  rbuf bufs[MAX_BUFS];
  rnode nodes[MAX_NODES];
  int written[MAX_BUFS];
} rgraph;

static int64_t buf_numel(const rbuf *b, int64_t s0, int64_t s1) {
  return b->row ? s1 : s0 * s1 + (b->shifted ? s1 : 0);
}

/* ---- the IR of a random graph ----------------------------------------------- */

typedef struct exprs {
  uint32_t s0, s1, zero, one, minus1, n, last, minus_s1, s1x;
} exprs;

static gw_operand ir_view(const exprs *e, const rgraph *r, rview v, int flat) {
  gw_operand o;
  memset(&o, 0, sizeof o);
  o.buffer = v.buf;
  o.dtype = r->bufs[v.buf].dtype;
  o.offset = e->zero;
  if (flat) {
    o.ndim = 1, o.shape[0] = e->n, o.stride[0] = e->one;
    return o;
  }
  o.ndim = 2;
  o.shape[0] = e->s0, o.shape[1] = e->s1;
  o.stride[0] = e->s1x, o.stride[1] = e->one;
  if (v.kind == FLIPPED) o.offset = e->last, o.stride[0] = e->minus_s1, o.stride[1] = e->minus1;
  if (v.kind == SHIFTED) o.offset = e->s1;
  if (v.kind == ROW) o.stride[0] = e->zero;
  if (v.kind == COL0) o.shape[1] = e->one;
  if (v.kind == ROW0) o.shape[0] = e->one, o.stride[0] = e->zero;
  return o;
}

static uint8_t *write_ir(const rgraph *r, size_t *size) {
  gw_graph *w = gw_new(2, "random");
  exprs e;
  e.s0 = gw_sym(w, 0), e.s1 = gw_sym(w, 1), e.zero = gw_const(w, 0), e.one = gw_const(w, 1);
  e.minus1 = gw_const(w, -1);
  e.n = gw_bin(w, NRT_EXPR_MUL, e.s0, e.s1);
  e.last = gw_bin(w, NRT_EXPR_SUB, e.n, e.one);
  e.minus_s1 = gw_bin(w, NRT_EXPR_SUB, e.zero, e.s1);
  e.s1x = gw_sym(w, 1); /* the same value under another id */
  uint32_t plus = gw_bin(w, NRT_EXPR_ADD, e.n, e.s1);
  for (int b = 0; b < r->num_bufs; b++) {
    const rbuf *x = &r->bufs[b];
    gw_buffer(w, x->kind, x->dtype, x->slot, x->row ? e.s1 : x->shifted ? plus : e.n);
  }
  for (int i = 0; i < r->num_nodes; i++) {
    const rnode *n = &r->nodes[i];
    gw_operand ops[3];
    ops[0] = ir_view(&e, r, n->out, n->flat);
    for (int k = 0; k < n->nin; k++) ops[1 + k] = ir_view(&e, r, n->in[k], n->flat);
    gw_node(w, n->code, NRT_FLOAT32, (uint32_t)n->num_outputs, (uint32_t)(1 + n->nin), ops,
            (uint32_t)n->num_scalars, n->scalar);
  }
  uint8_t *bytes = gw_finish(w, size);
  gw_free(w);
  return bytes;
}

/* ---- a random graph ------------------------------------------------------------ */

static int add_buf(rgraph *r, uint32_t kind) {
  int b = r->num_bufs++;
  rbuf *x = &r->bufs[b];
  memset(x, 0, sizeof *x);
  x->kind = kind;
  x->dtype = NRT_FLOAT32;
  if (kind == NRT_BUFFER_INPUT) {
    x->slot = (uint32_t)r->num_inputs++;
    int v = r->num_inputs == 1 ? 4 : pick(5); /* the first is plain: flat nodes can read it */
    x->row = v == 0;
    x->shifted = v == 1;
    r->written[b] = 1;
  } else if (kind == NRT_BUFFER_OUTPUT) {
    x->slot = (uint32_t)r->num_outputs++;
  }
  return b;
}

static rview read_view(const rgraph *r, int b, int flat) {
  rview v = {b, DENSE};
  if (r->bufs[b].row) v.kind = ROW;
  else if (r->bufs[b].shifted) v.kind = SHIFTED;
  else if (!flat && pick(6) == 0) v.kind = FLIPPED;
  return v;
}

static void random_graph(rgraph *r, int chain) {
  memset(r, 0, sizeof *r);
  int inputs = 1 + pick(3);
  for (int i = 0; i < inputs; i++) add_buf(r, NRT_BUFFER_INPUT);
  int nodes = 3 + pick(MAX_NODES - 6);
  int last = 0;
  for (int i = 0; i < nodes; i++) {
    rnode *n = &r->nodes[r->num_nodes++];
    memset(n, 0, sizeof *n);
    static const nrt_op_code unary[] = {NRT_OP_EXP, NRT_OP_NEG, NRT_OP_TANH, NRT_OP_ABS, NRT_OP_SIGMOID};
    static const nrt_op_code binary[] = {NRT_OP_ADD, NRT_OP_MUL, NRT_OP_MAXIMUM, NRT_OP_MINIMUM};
    n->nin = chain ? 1 : 1 + pick(2);
    n->code = n->nin == 1 ? unary[pick(5)] : binary[pick(4)];
    if (n->code == NRT_OP_ADD) n->num_scalars = 1, n->scalar[0] = (nrt_scalar){.is_float = 1, .f = 0.5};
    n->num_outputs = 1;
    /* flat nodes read and write only full-size dense buffers */
    n->flat = !chain && pick(8) == 0;
    for (int k = 0; k < n->nin; k++) {
      int b;
      do b = chain && k == 0 ? last : pick(r->num_bufs);
      while (!r->written[b] || (n->flat && (r->bufs[b].row || r->bufs[b].shifted)));
      n->in[k] = read_view(r, b, n->flat);
    }
    if (!chain && pick(6) == 0) { /* a GEMM: out = column 0 of one buffer times row 0 of another */
      n->code = NRT_OP_GEMM, n->nin = 2, n->flat = 0, n->num_scalars = 2;
      n->scalar[0] = (nrt_scalar){.is_float = 1, .f = 1.0};
      n->scalar[1] = (nrt_scalar){.is_float = 1, .f = 0.0};
      int a;
      do a = pick(r->num_bufs);
      while (!r->written[a] || r->bufs[a].row || r->bufs[a].shifted);
      /* The row: an input of s1 elements (a buffer's first row would not
       * exist at s0 = 0). */
      int b = -1;
      for (int x = 0; x < r->num_bufs; x++)
        if (r->bufs[x].row) b = x;
      if (b < 0) {
        b = add_buf(r, NRT_BUFFER_INPUT);
        r->bufs[b].row = 1, r->bufs[b].shifted = 0;
      }
      n->in[0] = (rview){a, COL0};
      n->in[1] = (rview){b, ROW0};
      int out = add_buf(r, i == nodes - 1 || pick(5) == 0 ? NRT_BUFFER_OUTPUT : NRT_BUFFER_TEMP);
      n->out = (rview){out, pick(5) == 0 ? FLIPPED : DENSE};
      r->written[out] = 1;
      last = out;
      if (r->num_bufs >= MAX_BUFS - 1) break;
      continue;
    }
    int choice = chain ? 0 : pick(10);
    int out;
    if (choice == 0 || choice > 3 || i == nodes - 1) {
      out = add_buf(r, i == nodes - 1 || choice == 9 ? NRT_BUFFER_OUTPUT : NRT_BUFFER_TEMP);
    } else if (choice == 1 && !r->bufs[n->in[0].buf].row && !r->bufs[n->in[0].buf].shifted &&
               r->bufs[n->in[0].buf].kind != NRT_BUFFER_INPUT) {
      out = n->in[0].buf; /* in place */
    } else {
      out = -1; /* rewrite a temporary */
      for (int b = 0; b < r->num_bufs; b++)
        if (r->bufs[b].kind == NRT_BUFFER_TEMP && r->written[b] && pick(2)) out = b;
      if (out < 0) out = add_buf(r, NRT_BUFFER_TEMP);
    }
    if (r->num_bufs >= MAX_BUFS - 1) nodes = i + 1;
    n->out = (rview){out, DENSE};
    if (out == n->in[0].buf) n->out.kind = n->in[0].kind; /* in place: the exact view */
    if (n->nin == 2 && out == n->in[1].buf) n->out.kind = n->in[1].kind;
    if (!n->flat && n->out.kind == DENSE && pick(8) == 0) n->out.kind = FLIPPED;
    /* now and then a copy that counts no outputs: not fusible */
    if (!chain && n->nin == 1 && pick(10) == 0) n->code = NRT_OP_COPY, n->num_outputs = 0, n->num_scalars = 0;
    r->written[out] = 1;
    last = out;
  }
}

/* ---- one-by-one reference ----------------------------------------------------- */

static nrt_tensor_view eval_view(const rgraph *r, void *const *dev, rview v, int flat, int64_t s0, int64_t s1) {
  nrt_tensor_view t;
  memset(&t, 0, sizeof t);
  t.dtype = r->bufs[v.buf].dtype;
  int64_t off = 0;
  if (flat) {
    t.ndim = 1, t.shape[0] = s0 * s1, t.strides[0] = 1;
  } else {
    t.ndim = 2, t.shape[0] = s0, t.shape[1] = s1, t.strides[0] = s1, t.strides[1] = 1;
    if (v.kind == FLIPPED) off = s0 * s1 - 1, t.strides[0] = -s1, t.strides[1] = -1;
    if (v.kind == SHIFTED) off = s1;
    if (v.kind == ROW) t.strides[0] = 0;
    if (v.kind == COL0) t.shape[1] = 1;
    if (v.kind == ROW0) t.shape[0] = 1, t.strides[0] = 0;
  }
  t.data = s0 * s1 != 0 ? (char *)dev[v.buf] + off * 4 : NULL;
  return t;
}

static void run_reference(const rgraph *r, void *const *dev, int64_t s0, int64_t s1) {
  if (s0 * s1 == 0) return;
  for (int i = 0; i < r->num_nodes; i++) {
    const rnode *n = &r->nodes[i];
    nrt_op op;
    memset(&op, 0, sizeof op);
    op.code = n->code, op.compute_dtype = NRT_FLOAT32;
    op.num_operands = 1 + n->nin, op.num_outputs = n->num_outputs;
    op.num_scalars = n->num_scalars, op.scalars[0] = n->scalar[0], op.scalars[1] = n->scalar[1];
    op.operands[0] = eval_view(r, dev, n->out, n->flat, s0, s1);
    for (int k = 0; k < n->nin; k++) op.operands[1 + k] = eval_view(r, dev, n->in[k], n->flat, s0, s1);
    CHECK_OK(nrt_op_execute(&op));
  }
}

/* ---- the test ------------------------------------------------------------------ */

static void *dev_alloc(size_t bytes) {
  void *p = NULL;
  CHECK_OK(nrt_malloc(0, bytes ? bytes : 1, &p));
  return p;
}

static void fill(void *dev, int64_t n) {
  float *p = nrt_device_to_host(dev);
  for (int64_t i = 0; i < n; i++) p[i] = (float)(pick(2001) - 1000) / 512.0f;
}

static int checked_plans, chain_plans;

/* The plan of a binding: checked, and its arena against the temporaries. */
static void check_plan(nrt_program_t p, const int64_t *syms, int chain, int fuse) {
  rt_plan *plan = NULL;
  CHECK_OK(rt_program_plan_get(p, syms, 2, &plan));
  if (!plan) return;
  const struct nrt_graph *g = p->graph;
  CHECK_OK(rt_graph_plan_check((int32_t)g->num_buffers, plan->offset, plan->bytes, p->first_step,
                               p->last_step, plan->arena_bytes));
  size_t sum = 0;
  int planned = 0;
  for (uint32_t b = 0; b < g->num_buffers; b++) {
    if (plan->bytes[b]) planned++;
    sum += plan->bytes[b];
    if (g->buffers[b].kind == NRT_BUFFER_TEMP && p->elided[b]) CHECK(plan->bytes[b] == 0);
  }
  CHECK(plan->arena_bytes <= sum);
  if (chain && !fuse && planned >= 3) {
    CHECK(plan->arena_bytes < sum);
    chain_plans++;
  }
  checked_plans++;
  rt_plan_release(plan);
}

static void test_random_graphs(void) {
  int fused_groups = 0, elided = 0, inplace = 0, epilogues = 0;
  for (int iter = 0; iter < 150; iter++) {
    int chain = iter % 4 == 0;
    rgraph r;
    random_graph(&r, chain);
    size_t size;
    uint8_t *bytes = write_ir(&r, &size);
    nrt_graph_t g = NULL;
    CHECK_OK(nrt_graph_load(bytes, size, &g));
    free(bytes);
    if (!g) continue;
    nrt_program_t prog[2] = {NULL, NULL};
    for (int f = 0; f < 2; f++) {
      nrt_program_options o = {.fuse = f};
      CHECK_OK(nrt_program_compile(g, &o, &prog[f]));
    }
    nrt_graph_destroy(g);
    nrt_program_info info;
    CHECK_OK(nrt_program_info_get(prog[1], &info));
    fused_groups += info.num_fused_groups;
    elided += info.num_elided;
    inplace += info.num_inplace;
    epilogues += info.num_gemm_epilogues;
    CHECK_OK(nrt_program_info_get(prog[0], &info));
    inplace += info.num_inplace;
    for (int bind = 0; bind < 3; bind++) {
      int64_t syms[2] = {pick(12) == 0 ? 0 : 1 + pick(9), 1 + pick(70)};
      int64_t s0 = syms[0], s1 = syms[1];
      void *ref[MAX_BUFS], *got[2][MAX_BUFS];
      int64_t caps[MAX_BUFS];
      void *in_ptrs[MAX_BUFS], *out_ptrs[2][MAX_BUFS];
      for (int b = 0; b < r.num_bufs; b++) {
        int64_t n = buf_numel(&r.bufs[b], s0, s1);
        ref[b] = dev_alloc((size_t)n * 4);
        fill(ref[b], n);
        for (int f = 0; f < 2; f++) {
          got[f][b] = dev_alloc((size_t)n * 4);
          memcpy(nrt_device_to_host(got[f][b]), nrt_device_to_host(ref[b]), (size_t)n * 4);
        }
        if (r.bufs[b].kind == NRT_BUFFER_INPUT) caps[r.bufs[b].slot] = n;
      }
      run_reference(&r, ref, s0, s1);
      for (int f = 0; f < 2; f++) {
        check_plan(prog[f], syms, chain, f);
        for (int b = 0; b < r.num_bufs; b++) {
          if (r.bufs[b].kind == NRT_BUFFER_INPUT) in_ptrs[r.bufs[b].slot] = got[f][b];
          if (r.bufs[b].kind == NRT_BUFFER_OUTPUT) out_ptrs[f][r.bufs[b].slot] = got[f][b];
        }
        size_t arena_bytes = 0;
        int64_t numels[MAX_BUFS];
        CHECK_OK(nrt_program_prepare(prog[f], syms, 2, caps, &arena_bytes, numels));
        void *arena = arena_bytes ? dev_alloc(arena_bytes) : NULL;
        nrt_stream_t stream;
        CHECK_OK(nrt_stream_get_default(0, &stream));
        CHECK_OK(nrt_program_launch(stream, prog[f], syms, 2, in_ptrs, caps, out_ptrs[f], arena));
        CHECK_OK(nrt_stream_synchronize(stream));
        if (arena) nrt_free(arena);
        for (int b = 0; b < r.num_bufs; b++) {
          if (r.bufs[b].kind == NRT_BUFFER_TEMP) continue;
          size_t n = (size_t)buf_numel(&r.bufs[b], s0, s1) * 4;
          if (memcmp(nrt_device_to_host(got[f][b]), nrt_device_to_host(ref[b]), n)) {
            fprintf(stderr, "graph %d fuse %d binding (%lld, %lld): buffer %d differs\n", iter, f,
                    (long long)s0, (long long)s1, b);
            char *text = NULL;
            if (nrt_program_plan_text(prog[f], syms, 2, &text) == NRT_SUCCESS) fprintf(stderr, "%s", text);
            free(text);
            check_failed();
          }
        }
      }
      for (int b = 0; b < r.num_bufs; b++) {
        nrt_free(ref[b]);
        nrt_free(got[0][b]);
        nrt_free(got[1][b]);
      }
    }
    nrt_program_destroy(prog[0]);
    nrt_program_destroy(prog[1]);
  }
  nrt_program_counters counts;
  nrt_program_get_counters(&counts);
  fprintf(stderr, "  %d plans checked (%d chains), %d fused groups, %d elided temporaries, "
          "%d written in place, %d gemm epilogues (runs: %llu on blocks, %llu after)\n", checked_plans,
          chain_plans, fused_groups, elided, inplace, epilogues,
          (unsigned long long)counts.gemm_epilogues_on_blocks, (unsigned long long)counts.gemm_epilogues_after);
  CHECK(fused_groups > 50 && elided > 20 && chain_plans > 10 && inplace > 20 && epilogues > 10);
  CHECK(counts.gemm_epilogues_on_blocks > 10 && counts.gemm_epilogues_after > 0);
}

/* More than RT_PLAN_CACHE bindings, revisited: evicted plans are rebuilt. */
static void test_plan_cache(void) {
  rgraph r;
  random_graph(&r, 1);
  size_t size;
  uint8_t *bytes = write_ir(&r, &size);
  nrt_graph_t g = NULL;
  CHECK_OK(nrt_graph_load(bytes, size, &g));
  free(bytes);
  nrt_program_t p = NULL;
  CHECK_OK(nrt_program_compile(g, NULL, &p));
  nrt_graph_destroy(g);
  int64_t caps[MAX_BUFS];
  for (int i = 0; i < 3 * RT_PLAN_CACHE; i++) {
    int64_t syms[2] = {1 + i % (RT_PLAN_CACHE + 3), 5};
    for (int b = 0; b < r.num_bufs; b++)
      if (r.bufs[b].kind == NRT_BUFFER_INPUT) caps[r.bufs[b].slot] = buf_numel(&r.bufs[b], syms[0], syms[1]);
    size_t arena;
    int64_t numels[MAX_BUFS];
    CHECK_OK(nrt_program_prepare(p, syms, 2, caps, &arena, numels));
    rt_plan *plan = NULL;
    CHECK_OK(rt_program_plan_get(p, syms, 2, &plan));
    CHECK(plan && plan->arena_bytes == arena && plan->symbols[0] == syms[0]);
    rt_plan_release(plan);
  }
  nrt_program_destroy(p);
}

int main(void) {
  CHECK_OK(nrt_init());
  RUN(test_random_graphs);
  RUN(test_plan_cache);
  return CHECK_MAIN_RESULT();
}
