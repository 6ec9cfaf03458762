/* Fused groups (neuronrt/fuse.h): random groups of pointwise ops over
 * random shapes, dtypes, broadcasts and layouts, compared bitwise with
 * running the same ops one by one through nrt_op_execute (each
 * intermediate stored in a device tensor of its register's dtype); the
 * checks of malformed groups; failures inside a group; launches on a
 * stream; zero-size, 0-d, strided, in-place and many-tile groups.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "fuse/replay.h"
#include "fuse/tape.h"
#include "neuronrt/metrics.h"
#include "neuronrt/fuse.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t next_u64(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return rng;
}
static int pick(int n) { return (int)(next_u64() % (uint64_t)n); }

static void *dev_alloc(size_t bytes) {
  void *p = NULL;
  CHECK_OK(nrt_malloc(0, bytes ? bytes : 1, &p));
  return p;
}
static void *host(void *dev) { return nrt_device_to_host(dev); }

static int64_t numel_of(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= shape[d];
  return n;
}

/* A contiguous tensor of the group's shape. */
static nrt_tensor_view dense(nrt_dtype t, int ndim, const int64_t *shape) {
  nrt_tensor_view v;
  memset(&v, 0, sizeof v);
  v.dtype = t;
  v.ndim = ndim;
  int64_t stride = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    v.shape[d] = shape[d];
    v.strides[d] = stride;
    stride *= shape[d];
  }
  v.data = dev_alloc((size_t)stride * nrt_dtype_size(t));
  return v;
}

/* Random bits, but float values kept ordinary (some NaN, inf, zero). */
static void fill_random(void *dev, nrt_dtype t, int64_t n) {
  char *p = host(dev);
  size_t w = nrt_dtype_size(t);
  for (int64_t i = 0; i < n; i++) {
    double x = ((double)(next_u64() % 20001) - 10000.0) / 1000.0;
    int r = pick(64);
    if (r == 0) x = NAN;
    if (r == 1) x = INFINITY;
    if (r == 2) x = 0.0;
    uint16_t h;
    switch (t) {
      case NRT_FLOAT32: { float f = (float)x; memcpy(p + i * w, &f, 4); break; }
      case NRT_FLOAT64: memcpy(p + i * w, &x, 8); break;
      case NRT_BFLOAT16: { float f = (float)x; uint32_t b; memcpy(&b, &f, 4); h = (uint16_t)(b >> 16); memcpy(p + i * w, &h, 2); break; }
      case NRT_FLOAT16: { _Float16 f = (_Float16)x; memcpy(p + i * w, &f, 2); break; }
      case NRT_BOOL: p[i] = (char)(next_u64() & 1); break;
      default: { int64_t v = (int64_t)(next_u64() % 41) - 20; memcpy(p + i * w, &v, w); break; }
    }
  }
}

/* An input: of the group's shape, broadcast (stride 0) along some dims,
 * its storage laid out in a random dimension order. */
static nrt_tensor_view random_input(nrt_dtype t, int ndim, const int64_t *shape) {
  nrt_tensor_view v;
  memset(&v, 0, sizeof v);
  v.dtype = t;
  v.ndim = ndim;
  int order[NRT_MAX_DIMS];
  for (int d = 0; d < ndim; d++) order[d] = d;
  for (int d = ndim - 1; d > 0; d--) {
    int j = pick(d + 1), tmp = order[d];
    order[d] = order[j], order[j] = tmp;
  }
  int64_t stride = 1;
  for (int q = ndim - 1; q >= 0; q--) {
    int d = order[q];
    v.shape[d] = shape[d];
    int broadcast = pick(4) == 0;
    v.strides[d] = broadcast ? 0 : stride;
    if (!broadcast) stride *= shape[d];
  }
  v.data = dev_alloc((size_t)stride * nrt_dtype_size(t));
  fill_random(v.data, t, stride);
  return v;
}

/* ---- a random group and its op-by-op twin ---------------------------------- */

enum { MAX_VALUES = NRT_FUSE_MAX_INPUTS + NRT_FUSE_MAX_REGISTERS };

typedef struct built {
  int ndim;
  int64_t shape[NRT_MAX_DIMS];
  int num_inputs, num_registers, num_insts;
  nrt_tensor_view inputs[NRT_FUSE_MAX_INPUTS];
  nrt_dtype registers[NRT_FUSE_MAX_REGISTERS];
  nrt_fuse_inst insts[NRT_FUSE_MAX_INSTS];
} built;

static nrt_dtype promote(nrt_dtype a, nrt_dtype b) {
  if (a == b) return a;
  if (a == NRT_FLOAT64 || b == NRT_FLOAT64) return NRT_FLOAT64;
  return NRT_FLOAT32; /* float32 with anything, or float16 with bfloat16 */
}

static nrt_dtype ref_dtype(const built *b, const nrt_fuse_ref *r) {
  return r->kind == NRT_FUSE_INPUT ? b->inputs[r->index].dtype
         : r->kind == NRT_FUSE_REGISTER ? b->registers[r->index]
                                        : r->dtype;
}

/* A float operand: an input, a float register, or now and then an immediate. */
static nrt_fuse_ref float_operand(const built *b, int allow_immediate) {
  nrt_fuse_ref r;
  memset(&r, 0, sizeof r);
  for (;;) {
    int choice = pick(b->num_inputs + b->num_registers + (allow_immediate ? 1 : 0));
    if (choice < b->num_inputs) {
      r.kind = NRT_FUSE_INPUT, r.index = choice;
      if (b->inputs[choice].dtype != NRT_BOOL) return r;
    } else if (choice < b->num_inputs + b->num_registers) {
      r.kind = NRT_FUSE_REGISTER, r.index = choice - b->num_inputs;
      if (b->registers[r.index] != NRT_BOOL) return r;
    } else {
      r.kind = NRT_FUSE_IMMEDIATE;
      r.dtype = pick(2) ? NRT_FLOAT64 : NRT_FLOAT32;
      r.value = (nrt_scalar){.is_float = 1, .f = (double)pick(9) / 4.0 - 1.0};
      return r;
    }
  }
}

static nrt_fuse_ref new_register(built *b, nrt_dtype t) {
  b->registers[b->num_registers] = t;
  return (nrt_fuse_ref){.kind = NRT_FUSE_REGISTER, .index = b->num_registers++};
}

static const nrt_dtype float_types[] = {NRT_FLOAT32, NRT_FLOAT64, NRT_BFLOAT16, NRT_FLOAT16};

/* One instruction over the values so far; its result is a new register. */
static void add_random_inst(built *b) {
  static const nrt_op_code unary[] = {NRT_OP_EXP,  NRT_OP_TANH, NRT_OP_SIGMOID, NRT_OP_NEG,
                                      NRT_OP_ABS,  NRT_OP_GELU, NRT_OP_SILU,    NRT_OP_SQRT,
                                      NRT_OP_RECIPROCAL};
  static const nrt_op_code binary[] = {NRT_OP_ADD,     NRT_OP_MUL,     NRT_OP_DIV,
                                       NRT_OP_MAXIMUM, NRT_OP_MINIMUM, NRT_OP_LERP,
                                       NRT_OP_DIV_FLOOR, NRT_OP_LT};
  nrt_fuse_inst in;
  memset(&in, 0, sizeof in);
  int kind = pick(10);
  nrt_dtype compute;
  if (kind < 4) {
    in.code = unary[pick((int)(sizeof unary / sizeof unary[0]))];
    in.num_operands = 2;
    in.operands[1] = float_operand(b, 0);
    compute = ref_dtype(b, &in.operands[1]);
  } else if (kind < 8) {
    in.code = binary[pick((int)(sizeof binary / sizeof binary[0]))];
    in.num_operands = 3;
    in.operands[1] = float_operand(b, 0);
    in.operands[2] = float_operand(b, 1);
    compute = promote(ref_dtype(b, &in.operands[1]), in.operands[2].kind == NRT_FUSE_IMMEDIATE
                                                          ? ref_dtype(b, &in.operands[1])
                                                          : ref_dtype(b, &in.operands[2]));
    if (in.code == NRT_OP_ADD || in.code == NRT_OP_LERP) {
      in.num_scalars = 1;
      in.scalars[0] = (nrt_scalar){.is_float = 1, .f = (double)pick(7) / 2.0 - 1.5};
    }
  } else {
    /* where(a < b, x, y) in two instructions, or addcmul */
    if (kind == 8) {
      in.code = NRT_OP_ADDCMUL;
      in.num_operands = 4;
      for (int k = 1; k < 4; k++) in.operands[k] = float_operand(b, 0);
      compute = promote(promote(ref_dtype(b, &in.operands[1]), ref_dtype(b, &in.operands[2])),
                        ref_dtype(b, &in.operands[3]));
      in.num_scalars = 1;
      in.scalars[0] = (nrt_scalar){.is_float = 1, .f = 0.5};
    } else {
      int cond = -1;
      for (int r = 0; r < b->num_registers; r++)
        if (b->registers[r] == NRT_BOOL) cond = r;
      if (cond < 0) return add_random_inst(b);
      in.code = NRT_OP_WHERE;
      in.num_operands = 4;
      in.operands[1] = (nrt_fuse_ref){.kind = NRT_FUSE_REGISTER, .index = cond};
      in.operands[2] = float_operand(b, 0);
      in.operands[3] = float_operand(b, 1);
      compute = in.operands[3].kind == NRT_FUSE_IMMEDIATE
                    ? ref_dtype(b, &in.operands[2])
                    : promote(ref_dtype(b, &in.operands[2]), ref_dtype(b, &in.operands[3]));
    }
  }
  in.compute_dtype = compute;
  in.num_outputs = 1;
  /* Mostly the compute dtype; sometimes stored narrower or wider, as an
   * out= tensor of another dtype would be. */
  nrt_dtype out = in.code == NRT_OP_LT ? NRT_BOOL
                  : pick(5) == 0       ? float_types[pick(4)]
                                       : compute;
  in.operands[0] = new_register(b, out);
  b->insts[b->num_insts++] = in;
}

static void random_shape(built *b) {
  static const int64_t sizes[] = {1, 2, 3, 5, 17, 64, 129};
  int big = pick(6) == 0;
  b->ndim = pick(4);
  for (int d = 0; d < b->ndim; d++) b->shape[d] = sizes[pick(7)];
  if (big) { /* many tiles, and the kernel threads */
    b->ndim = 2;
    b->shape[0] = 3 + pick(40);
    b->shape[1] = 2000 + pick(12000); /* rows shorter and longer than a tile */
  }
}

/* Runs the instructions one by one over full tensors (registers become
 * device tensors); returns the tensors. */
static void run_unfused(const built *b, nrt_tensor_view *regs) {
  for (int r = 0; r < b->num_registers; r++) regs[r] = dense(b->registers[r], b->ndim, b->shape);
  for (int i = 0; i < b->num_insts; i++) {
    const nrt_fuse_inst *in = &b->insts[i];
    nrt_op op;
    memset(&op, 0, sizeof op);
    op.code = in->code;
    op.compute_dtype = in->compute_dtype;
    op.num_operands = in->num_operands;
    op.num_outputs = in->num_outputs;
    op.num_scalars = in->num_scalars;
    memcpy(op.scalars, in->scalars, sizeof op.scalars);
    for (int k = 0; k < in->num_operands; k++) {
      const nrt_fuse_ref *r = &in->operands[k];
      if (r->kind == NRT_FUSE_REGISTER) {
        op.operands[k] = regs[r->index];
      } else if (r->kind == NRT_FUSE_INPUT) {
        op.operands[k] = b->inputs[r->index];
      } else {
        nrt_tensor_view *v = &op.operands[k];
        v->dtype = r->dtype;
        v->ndim = b->ndim;
        for (int d = 0; d < b->ndim; d++) v->shape[d] = b->shape[d];
        op.immediate_mask |= 1u << k;
        op.immediates[k] = r->value;
      }
    }
    CHECK_OK(nrt_op_execute(&op));
  }
}

static int same_bytes(const nrt_tensor_view *a, const nrt_tensor_view *b, int64_t n) {
  return memcmp(host(a->data), host(b->data), (size_t)n * nrt_dtype_size(a->dtype)) == 0;
}

static void test_random_groups_match_ops_one_by_one(void) {
  int fused = 0, refused = 0, replayed = 0;
  for (int trial = 0; trial < 300; trial++) {
    built b;
    memset(&b, 0, sizeof b);
    random_shape(&b);
    b.num_inputs = 1 + pick(4);
    for (int k = 0; k < b.num_inputs; k++)
      b.inputs[k] = random_input(float_types[pick(4)], b.ndim, b.shape);
    int insts = 1 + pick(8);
    while (b.num_insts < insts) add_random_inst(&b);
    int64_t n = numel_of(b.ndim, b.shape);
    nrt_tensor_view regs[NRT_FUSE_MAX_REGISTERS];
    run_unfused(&b, regs);
    /* Outputs: the last register and, sometimes, an earlier one. */
    nrt_tensor_view outs[2];
    int32_t out_regs[2] = {b.num_registers - 1, pick(b.num_registers)};
    int num_outputs = pick(2) ? 2 : 1;
    for (int j = 0; j < num_outputs; j++) outs[j] = dense(b.registers[out_regs[j]], b.ndim, b.shape);
    nrt_fuse_group_desc d = {.ndim = b.ndim, .num_inputs = b.num_inputs, .inputs = b.inputs,
                             .num_registers = b.num_registers, .registers = b.registers,
                             .num_insts = b.num_insts, .insts = b.insts,
                             .num_outputs = num_outputs, .outputs = outs,
                             .output_registers = out_regs};
    memcpy(d.shape, b.shape, sizeof d.shape);
    nrt_fuse_group_t g;
    nrt_status s = nrt_fuse_group_create(&d, &g);
    if (s == NRT_ERROR_UNSUPPORTED && strstr(nrt_last_error(), "not fusible")) {
      refused++;
    } else {
      CHECK_OK(s);
      /* Run 0 captures its loops per thread; runs 1 and 2 share them as a
       * compiled step does: run 1 captures, run 2 replays the step's. */
      rt_fuse_replays *shared = NULL;
      for (int run = 0; run < 3; run++) {
        if (run == 1) g->replays = shared = rt_fuse_replays_create(b.num_insts);
        for (int j = 0; j < num_outputs; j++)
          memset(host(outs[j].data), 0xa5, (size_t)n * nrt_dtype_size(outs[j].dtype));
        CHECK_OK(nrt_fuse_group_execute(g));
        for (int j = 0; j < num_outputs; j++) {
          int ok = same_bytes(&outs[j], &regs[out_regs[j]], n);
          CHECK(ok);
          if (!ok)
            fprintf(stderr, "  trial %d run %d: output %d (register %d) differs, %d ops, %lld elements\n",
                    trial, run, j, out_regs[j], b.num_insts, (long long)n);
        }
      }
      for (int i = 0; i < b.num_insts && shared; i++)
        replayed += rt_fuse_replays_state(shared, i) == RT_REPLAY_DIRECT;
      rt_fuse_replays_destroy(shared);
      nrt_fuse_group_destroy(g);
      fused++;
    }
    for (int r = 0; r < b.num_registers; r++) nrt_free(regs[r].data);
    for (int j = 0; j < num_outputs; j++) nrt_free(outs[j].data);
    for (int k = 0; k < b.num_inputs; k++) nrt_free(b.inputs[k].data);
  }
  fprintf(stderr, "  %d groups fused, %d refused as not fusible; %d instructions replayed their loops\n",
          fused, refused, replayed);
  CHECK(fused > 250);
  CHECK(replayed > 500);
}

/* ---- a fixed chain ---------------------------------------------------------- */

typedef struct chain {
  int64_t shape[2];
  nrt_tensor_view x, y, out;
  nrt_dtype regs[3];
  nrt_fuse_inst insts[3];
  int32_t out_reg;
  nrt_fuse_group_desc desc;
} chain;

static nrt_fuse_ref reg(int r) { return (nrt_fuse_ref){.kind = NRT_FUSE_REGISTER, .index = r}; }
static nrt_fuse_ref input(int k) { return (nrt_fuse_ref){.kind = NRT_FUSE_INPUT, .index = k}; }

static nrt_fuse_inst inst2(nrt_op_code code, nrt_dtype t, nrt_fuse_ref out, nrt_fuse_ref a,
                           nrt_fuse_ref b) {
  nrt_fuse_inst in;
  memset(&in, 0, sizeof in);
  in.code = code;
  in.compute_dtype = t;
  in.num_operands = 3;
  in.num_outputs = 1;
  in.operands[0] = out, in.operands[1] = a, in.operands[2] = b;
  if (code == NRT_OP_ADD) {
    in.num_scalars = 1;
    in.scalars[0] = (nrt_scalar){.is_float = 0, .i = 1};
  }
  return in;
}

/* out = ((x * y) + x) / y over int32, or float32 with div. */
static void make_chain(chain *c, nrt_dtype t, int64_t rows, int64_t cols) {
  memset(c, 0, sizeof *c);
  c->shape[0] = rows, c->shape[1] = cols;
  c->x = dense(t, 2, c->shape);
  c->y = dense(t, 2, c->shape);
  c->out = dense(t, 2, c->shape);
  fill_random(c->x.data, t, rows * cols);
  fill_random(c->y.data, t, rows * cols);
  for (int r = 0; r < 3; r++) c->regs[r] = t;
  nrt_op_code div = t == NRT_INT32 ? NRT_OP_DIV_TRUNC : NRT_OP_DIV;
  c->insts[0] = inst2(NRT_OP_MUL, t, reg(0), input(0), input(1));
  c->insts[1] = inst2(NRT_OP_ADD, t, reg(1), reg(0), input(0));
  c->insts[2] = inst2(div, t, reg(2), reg(1), input(1));
  c->out_reg = 2;
  c->desc = (nrt_fuse_group_desc){.ndim = 2, .num_inputs = 2, .inputs = &c->x, .num_registers = 3,
                                  .registers = c->regs, .num_insts = 3, .insts = c->insts,
                                  .num_outputs = 1, .outputs = &c->out,
                                  .output_registers = &c->out_reg};
  c->desc.shape[0] = rows, c->desc.shape[1] = cols;
}

static void free_chain(chain *c) {
  nrt_free(c->x.data);
  nrt_free(c->y.data);
  nrt_free(c->out.data);
}

/* Inputs x and y are adjacent in struct chain, as desc.inputs expects. */
_Static_assert(offsetof(chain, y) == offsetof(chain, x) + sizeof(nrt_tensor_view),
               "chain inputs must be adjacent");

static void expect_refused(chain *c, nrt_status status, const char *message) {
  nrt_fuse_group_t g = (nrt_fuse_group_t)1;
  CHECK_STATUS(nrt_fuse_group_create(&c->desc, &g), status);
  CHECK(g == NULL);
  CHECK(strstr(nrt_last_error(), message) != NULL);
  if (!strstr(nrt_last_error(), message)) fprintf(stderr, "  got: %s\n", nrt_last_error());
}

/* A fresh, well-formed chain in place of c's (whose tensors are freed). */
static void remake(chain *c) {
  free_chain(c);
  make_chain(c, NRT_FLOAT32, 4, 8);
}

static void test_malformed_groups_are_refused_with_a_reason(void) {
  chain c;
  make_chain(&c, NRT_FLOAT32, 4, 8);
  c.insts[1].operands[1] = reg(2);
  expect_refused(&c, NRT_ERROR_INVALID_ARGUMENT, "reads register 2, which no earlier instruction writes");
  remake(&c);
  c.insts[1].operands[0] = reg(0);
  expect_refused(&c, NRT_ERROR_INVALID_ARGUMENT, "register 0 is written a second time");
  remake(&c);
  c.insts[1].code = NRT_OP_SUM;
  expect_refused(&c, NRT_ERROR_UNSUPPORTED, "instruction 1: sum is not a pointwise op");
  remake(&c);
  c.insts[2].operands[2] = input(5);
  expect_refused(&c, NRT_ERROR_INVALID_ARGUMENT, "operand 2 names input 5 of 2");
  remake(&c);
  c.insts[0].operands[0] = input(0);
  expect_refused(&c, NRT_ERROR_INVALID_ARGUMENT, "output 0 must be a register");
  remake(&c);
  c.regs[2] = NRT_FLOAT64;
  expect_refused(&c, NRT_ERROR_INVALID_ARGUMENT, "output 0 is float32 but its register 2 is float64");
  remake(&c);
  c.y.shape[1] = 7;
  expect_refused(&c, NRT_ERROR_INVALID_ARGUMENT, "input 1: its shape differs from the group's");
  remake(&c);
  float on_host[32];
  void *saved = c.x.data;
  c.x.data = on_host;
  expect_refused(&c, NRT_ERROR_INVALID_ARGUMENT, "input 0: copy: operand 0 is not entirely in neuron device memory");
  c.x.data = saved;
  c.desc.num_insts = NRT_FUSE_MAX_INSTS + 1;
  expect_refused(&c, NRT_ERROR_INVALID_ARGUMENT, "instructions; allowed");
  c.desc.num_insts = 3;
  c.desc.num_registers = 4;
  nrt_dtype regs4[4] = {NRT_FLOAT32, NRT_FLOAT32, NRT_FLOAT32, NRT_FLOAT32};
  c.desc.registers = regs4;
  expect_refused(&c, NRT_ERROR_INVALID_ARGUMENT, "register 3 is never written");
  c.desc.registers = c.regs;
  c.desc.num_registers = 3;
  c.insts[0].num_outputs = 0;
  expect_refused(&c, NRT_ERROR_INVALID_ARGUMENT, "bad operand, output or scalar count");
  CHECK_STATUS(nrt_fuse_group_create(NULL, NULL), NRT_ERROR_INVALID_ARGUMENT);
  free_chain(&c);
}

/* Integer division by zero fails the group with the op's own message; the
 * first op to fail (in program order) is the one reported, as unfused. */
static void test_a_failing_op_fails_the_group_with_its_message(void) {
  chain c;
  make_chain(&c, NRT_INT32, 40, 3000); /* many tiles */
  int32_t *y = host(c.y.data);
  for (int64_t i = 0; i < 40 * 3000; i++) y[i] = y[i] == 0 ? 1 : y[i];
  y[40 * 3000 - 5] = 0;
  nrt_fuse_group_t g;
  CHECK_OK(nrt_fuse_group_create(&c.desc, &g));
  CHECK_STATUS(nrt_fuse_group_execute(g), NRT_ERROR_ARITHMETIC);
  CHECK(strstr(nrt_last_error(), "fused group (3 ops: mul, add, div_trunc): div_trunc: ZeroDivisionError") != NULL);
  fprintf(stderr, "  %s\n", nrt_last_error());
  /* The same from loops a step shares (the second run replays them): a
   * replayed loop's fault runs the kernel again, for its message. */
  rt_fuse_replays *shared = rt_fuse_replays_create(3);
  CHECK(shared != NULL); /* out of memory (faultinject): the checks below read it */
  g->replays = shared;
  for (int run = 0; run < 2; run++) {
    CHECK_STATUS(nrt_fuse_group_execute(g), NRT_ERROR_ARITHMETIC);
    CHECK(strstr(nrt_last_error(), "div_trunc: ZeroDivisionError") != NULL);
  }
  for (int i = 0; i < 3; i++) CHECK(rt_fuse_replays_state(shared, i) == RT_REPLAY_DIRECT);
  /* A zero in the first tile fails the capturing run without deciding. */
  y[40 * 3000 - 5] = 1;
  y[0] = 0;
  rt_fuse_replays_destroy(shared);
  g->replays = shared = rt_fuse_replays_create(3);
  CHECK(shared != NULL);
  CHECK_STATUS(nrt_fuse_group_execute(g), NRT_ERROR_ARITHMETIC);
  CHECK(rt_fuse_replays_state(shared, 2) != RT_REPLAY_KERNEL);
  y[0] = 1;
  CHECK_OK(nrt_fuse_group_execute(g));
  CHECK_OK(nrt_fuse_group_execute(g));
  CHECK(rt_fuse_replays_state(shared, 2) == RT_REPLAY_DIRECT);
  rt_fuse_replays_destroy(shared);
  nrt_fuse_group_destroy(g);
  free_chain(&c);
}

static void test_launch_runs_in_stream_order_and_errors_are_sticky(void) {
  chain c;
  make_chain(&c, NRT_FLOAT32, 16, 1000);
  nrt_tensor_view want = dense(NRT_FLOAT32, 2, c.shape);
  nrt_fuse_group_t g;
  CHECK_OK(nrt_fuse_group_create(&c.desc, &g));
  CHECK_OK(nrt_fuse_group_execute(g));
  memcpy(host(want.data), host(c.out.data), 16 * 1000 * sizeof(float));
  memset(host(c.out.data), 0, 16 * 1000 * sizeof(float));
  nrt_stream_t s;
  CHECK_OK(nrt_stream_create(0, NRT_STREAM_PRIORITY_NORMAL, &s));
  CHECK_OK(nrt_fuse_group_launch(s, g));
  nrt_fuse_group_destroy(g); /* the launch keeps it */
  CHECK_OK(nrt_stream_synchronize(s));
  CHECK(same_bytes(&c.out, &want, 16 * 1000));
  free_chain(&c);

  make_chain(&c, NRT_INT32, 4, 8);
  memset(host(c.y.data), 0, 32 * sizeof(int32_t));
  CHECK_OK(nrt_fuse_group_create(&c.desc, &g));
  CHECK_OK(nrt_fuse_group_launch(s, g));
  nrt_fuse_group_destroy(g);
  CHECK_STATUS(nrt_stream_synchronize(s), NRT_ERROR_ARITHMETIC);
  CHECK(strstr(nrt_last_error(), "fused group (3 ops: mul, add, div_trunc)") != NULL);
  CHECK(strstr(nrt_last_error(), "ZeroDivisionError") != NULL);
  CHECK_OK(nrt_stream_clear_error(s));
  CHECK_OK(nrt_stream_destroy(s));
  free_chain(&c);
  nrt_free(want.data);
}

/* Zero elements run nothing; a 0-d group is one element. */
static void test_zero_size_and_0d_groups(void) {
  chain c;
  make_chain(&c, NRT_FLOAT32, 0, 8);
  nrt_fuse_group_t g;
  CHECK_OK(nrt_fuse_group_create(&c.desc, &g));
  CHECK_OK(nrt_fuse_group_execute(g));
  nrt_fuse_group_destroy(g);
  free_chain(&c);
  make_chain(&c, NRT_FLOAT32, 1, 1);
  c.desc.ndim = 0;
  c.x.ndim = c.y.ndim = c.out.ndim = 0;
  float *x = host(c.x.data), *y = host(c.y.data);
  x[0] = 3.0f, y[0] = 2.0f;
  CHECK_OK(nrt_fuse_group_create(&c.desc, &g));
  CHECK_OK(nrt_fuse_group_execute(g));
  CHECK(*(float *)host(c.out.data) == (3.0f * 2.0f + 3.0f) / 2.0f);
  int32_t insts, inputs, registers;
  int64_t numel;
  CHECK_OK(nrt_fuse_group_info(g, &insts, &inputs, &registers, &numel));
  CHECK(insts == 3 && inputs == 2 && registers == 3 && numel == 1);
  nrt_fuse_group_destroy(g);
  free_chain(&c);
}

/* In place (the output is input 0's storage), contiguous (the tape's last
 * op must not write over the input it still reads) and over a transposed
 * layout. */
static void check_in_place(int transposed) {
  chain c;
  make_chain(&c, NRT_FLOAT32, 300, 70);
  if (transposed) {
    /* View every tensor as its transpose: [70, 300], strides (1, 70). */
    nrt_tensor_view *all[] = {&c.x, &c.y, &c.out};
    for (int k = 0; k < 3; k++) {
      all[k]->shape[0] = 70, all[k]->shape[1] = 300;
      all[k]->strides[0] = 1, all[k]->strides[1] = 70;
    }
    c.desc.shape[0] = 70, c.desc.shape[1] = 300;
  }
  float *x = host(c.x.data), *y = host(c.y.data);
  float want[300 * 70];
  for (int i = 0; i < 300 * 70; i++) {
    y[i] = y[i] == 0.0f || isnan(y[i]) ? 1.0f : y[i];
    want[i] = (x[i] * y[i] + x[i]) / y[i];
  }
  nrt_free(c.out.data);
  c.out.data = c.x.data;
  nrt_fuse_group_t g;
  CHECK_OK(nrt_fuse_group_create(&c.desc, &g));
  CHECK_OK(nrt_fuse_group_execute(g));
  int same = 1;
  for (int i = 0; i < 300 * 70; i++)
    same &= (isnan(x[i]) && isnan(want[i])) || memcmp(&x[i], &want[i], 4) == 0;
  CHECK(same);
  nrt_fuse_group_destroy(g);
  c.out.data = NULL;
  free_chain(&c);
}

static void test_in_place_over_a_transposed_layout(void) {
  check_in_place(0);
  check_in_place(1);
}

/* bfloat16 floor division by a divisor broadcast along the last dim only:
 * on a one-row tile it would look like a single value, which takes
 * another loop, so the group is refused; a full divisor is fine. */
static void test_a_group_that_would_differ_on_tiles_is_refused(void) {
  int64_t shape[2] = {3000, 5000};
  nrt_tensor_view x = dense(NRT_BFLOAT16, 2, shape), out = dense(NRT_BFLOAT16, 2, shape);
  nrt_tensor_view y = x;
  y.data = dev_alloc(3000 * 2);
  y.strides[0] = 1, y.strides[1] = 0;
  nrt_tensor_view inputs[2] = {x, y};
  nrt_dtype regs[1] = {NRT_BFLOAT16};
  nrt_fuse_inst in = inst2(NRT_OP_DIV_FLOOR, NRT_BFLOAT16, reg(0), input(0), input(1));
  int32_t out_reg = 0;
  nrt_fuse_group_desc d = {.ndim = 2, .shape = {3000, 5000}, .num_inputs = 2, .inputs = inputs,
                           .num_registers = 1, .registers = regs, .num_insts = 1, .insts = &in,
                           .num_outputs = 1, .outputs = &out, .output_registers = &out_reg};
  nrt_fuse_group_t g;
  CHECK_STATUS(nrt_fuse_group_create(&d, &g), NRT_ERROR_UNSUPPORTED);
  CHECK(strstr(nrt_last_error(), "not fusible: instruction 0 (div_floor) would see input 1 as a single value") != NULL);
  inputs[1] = x;
  CHECK_OK(nrt_fuse_group_create(&d, &g));
  nrt_fuse_group_destroy(g);
  nrt_free(x.data);
  nrt_free(y.data);
  nrt_free(out.data);
}

/* ---- the register-level loop (fuse/tape.h) ------------------------------------ */

/* Bitwise equal values of dtype t (float32, bfloat16 or float16), except
 * that two NaNs match whatever their sign and payload: where two NaNs meet
 * in one op, which one propagates depends on the operand order the
 * compiler picked for a commutative instruction (as between a kernel's own
 * vector body and scalar tail). */
static int same_values(nrt_dtype t, const void *a, const void *b, int64_t n, int64_t *where) {
  for (int64_t e = 0; e < n; e++) {
    if (t == NRT_FLOAT32) {
      float x, y;
      memcpy(&x, (const char *)a + 4 * e, 4), memcpy(&y, (const char *)b + 4 * e, 4);
      if (memcmp(&x, &y, 4) != 0 && !(x != x && y != y)) return *where = e, 0;
    } else {
      uint16_t x, y;
      memcpy(&x, (const char *)a + 2 * e, 2), memcpy(&y, (const char *)b + 2 * e, 2);
      const uint16_t exp = t == NRT_BFLOAT16 ? 0x7f80u : 0x7c00u;
      int nan_x = (x & 0x7fffu) > exp, nan_y = (y & 0x7fffu) > exp;
      if (x != y && !(nan_x && nan_y)) return *where = e, 0;
    }
  }
  return 1;
}
/* Runs random group b (its inputs, registers and instructions built) one op
 * at a time, then fused with two outputs (the last register and a random
 * one), through the tape's block loop and through its scalar twin; both must
 * give the ops' bits (NaNs of a dtype count as equal). 1 if the group took
 * the tape. Frees b's buffers. */
static int tape_matches_ops(built *b, int trial) {
  int64_t n = numel_of(2, b->shape);
  nrt_tensor_view regs[NRT_FUSE_MAX_REGISTERS];
  run_unfused(b, regs);
  int32_t out_regs[2] = {b->num_registers - 1, pick(b->num_registers)};
  nrt_tensor_view outs[2];
  for (int j = 0; j < 2; j++) outs[j] = dense(b->registers[out_regs[j]], 2, b->shape);
  nrt_fuse_group_desc d = {.ndim = 2, .num_inputs = b->num_inputs, .inputs = b->inputs,
                           .num_registers = b->num_registers, .registers = b->registers,
                           .num_insts = b->num_insts, .insts = b->insts, .num_outputs = 2,
                           .outputs = outs, .output_registers = out_regs};
  memcpy(d.shape, b->shape, sizeof d.shape);
  nrt_fuse_group_t g;
  CHECK_OK(nrt_fuse_group_create(&d, &g));
  CHECK(g->tape.num_ops == b->num_insts);
  int taped = g->tape.num_ops > 0;
  for (int twin = 0; twin < 2; twin++) {
    for (int j = 0; j < 2; j++) memset(host(outs[j].data), 0xa5, (size_t)n * nrt_dtype_size(outs[j].dtype));
    if (twin) {
      rt_fuse_box box = {.rows = b->shape[0], .cols = b->shape[1]};
      for (int k = 0; k < b->num_inputs; k++) {
        box.in[k] = host(b->inputs[k].data);
        box.in_rs[k] = b->inputs[k].strides[0], box.in_cs[k] = b->inputs[k].strides[1];
      }
      for (int j = 0; j < 2; j++) {
        box.out[j] = host(outs[j].data);
        box.out_rs[j] = outs[j].strides[0], box.out_cs[j] = outs[j].strides[1];
      }
      rt_fuse_tape_run_reference(g, &box);
    } else {
      CHECK_OK(nrt_fuse_group_execute(g));
    }
    for (int j = 0; j < 2; j++) {
      int64_t e = 0;
      int ok = same_values(outs[j].dtype, host(outs[j].data), host(regs[out_regs[j]].data), n, &e);
      CHECK(ok);
      if (!ok) {
        fprintf(stderr, "  trial %d (%s): output %d (%s) differs at %lld, %d ops, %lld x %lld\n", trial,
                twin ? "scalar twin" : "block loop", j, nrt_dtype_name(outs[j].dtype), (long long)e,
                b->num_insts, (long long)b->shape[0], (long long)b->shape[1]);
        for (int i = 0; i < b->num_insts; i++)
          fprintf(stderr, "    inst %d %s compute %s -> %s\n", i, nrt_op_name(b->insts[i].code),
                  nrt_dtype_name(b->insts[i].compute_dtype),
                  nrt_dtype_name(b->registers[b->insts[i].operands[0].index]));
      }
    }
  }
  nrt_fuse_group_destroy(g);
  for (int r = 0; r < b->num_registers; r++) nrt_free(regs[r].data);
  for (int j = 0; j < 2; j++) nrt_free(outs[j].data);
  for (int k = 0; k < b->num_inputs; k++) nrt_free(b->inputs[k].data);
  return taped;
}

/* Random float32 groups of the tape's ops over 2-d shapes (broadcast and
 * permuted inputs, NaN and inf among the values): the group takes the
 * tape, and its results, and those of the tape's scalar twin, are bitwise
 * those of the ops one by one (tape_matches_ops). */
static void test_float32_groups_take_the_register_loop(void) {
  static const nrt_op_code unary[] = {NRT_OP_EXP,  NRT_OP_TANH, NRT_OP_SIGMOID, NRT_OP_NEG,
                                      NRT_OP_ABS,  NRT_OP_GELU, NRT_OP_SILU,    NRT_OP_SQRT,
                                      NRT_OP_RECIPROCAL, NRT_OP_RELU, NRT_OP_LOG, NRT_OP_HARDTANH};
  static const nrt_op_code binary[] = {NRT_OP_ADD, NRT_OP_MUL, NRT_OP_DIV, NRT_OP_MAXIMUM,
                                       NRT_OP_MINIMUM, NRT_OP_SIGMOID_BACKWARD,
                                       NRT_OP_THRESHOLD_BACKWARD};
  static const int64_t sizes[] = {1, 3, 17, 255, 256, 257, 1000};
  int taped = 0;
  uint64_t loops_before = nrt_metric_value(NRT_METRIC_FUSE_REGISTER_LOOPS);
  for (int trial = 0; trial < 120; trial++) {
    built b;
    memset(&b, 0, sizeof b);
    b.ndim = 2;
    b.shape[0] = sizes[pick(7)], b.shape[1] = sizes[pick(7)];
    b.num_inputs = 1 + pick(3);
    for (int k = 0; k < b.num_inputs; k++) b.inputs[k] = random_input(NRT_FLOAT32, 2, b.shape);
    int insts = 1 + pick(10);
    while (b.num_insts < insts) {
      nrt_fuse_inst in;
      memset(&in, 0, sizeof in);
      in.compute_dtype = NRT_FLOAT32;
      in.num_outputs = 1;
      if (pick(2)) {
        in.code = unary[pick((int)(sizeof unary / sizeof unary[0]))];
        in.num_operands = 2;
        in.operands[1] = float_operand(&b, 0);
      } else {
        in.code = binary[pick((int)(sizeof binary / sizeof binary[0]))];
        in.num_operands = 3;
        in.operands[1] = float_operand(&b, 0);
        in.operands[2] = float_operand(&b, 1);
      }
      if (in.code == NRT_OP_ADD || in.code == NRT_OP_THRESHOLD_BACKWARD) {
        in.num_scalars = 1;
        in.scalars[0] = (nrt_scalar){.is_float = 1, .f = (double)pick(7) / 2.0 - 1.5};
      } else if (in.code == NRT_OP_HARDTANH) {
        in.num_scalars = 2;
        in.scalars[0] = (nrt_scalar){.is_float = 0, .i = -1};
        in.scalars[1] = (nrt_scalar){.is_float = 1, .f = 2.5};
      }
      in.operands[0] = new_register(&b, NRT_FLOAT32);
      b.insts[b.num_insts++] = in;
    }
    taped += tape_matches_ops(&b, trial);
  }
  CHECK(taped == 120);
  CHECK(nrt_metric_value(NRT_METRIC_FUSE_REGISTER_LOOPS) >= loops_before + 120);
}

/* 16-bit values the conversions must get right: NaNs of several payloads
 * and signs, infinities, zeros, subnormals of both formats, the largest
 * finite values, values beyond float16's range, and float32 values on and
 * next to the midpoints of bfloat16 and float16 (ties to even). */
static float special16(nrt_dtype t) {
  static const uint32_t bits[] = {
      0x7fc00000u, 0xffc00000u, 0x7f810000u, 0xff812345u, 0x7f800001u, 0x7f800000u, 0xff800000u,
      0x00000000u, 0x80000000u, 0x00010000u, 0x80400000u, 0x00000001u, 0x33800000u, 0xb3c00000u,
      0x38800000u, 0x387fc000u, 0x477fe000u, 0x477ff000u, 0xc77fefffu, 0x7f7f0000u, 0x7f7fffffu,
      0x3f808000u, 0x3f818000u, 0x3f807fffu, 0x3f808001u, 0xbf818000u, 0x3f801000u, 0x3f803000u,
      0x3f800fffu, 0x3f801001u, 0x40490fdbu, 0xc2f6e979u, 0x4b800001u, 0x00800000u};
  uint32_t b = bits[pick((int)(sizeof bits / sizeof bits[0]))];
  float f;
  memcpy(&f, &b, 4);
  (void)t;
  return f;
}

static void fill16(const nrt_tensor_view *v, int64_t n) {
  char *p = host(v->data);
  for (int64_t i = 0; i < n; i++) {
    if (pick(3)) continue; /* fill_random's ordinary values */
    float f = special16(v->dtype);
    uint32_t u;
    memcpy(&u, &f, 4);
    if (v->dtype == NRT_FLOAT32) {
      memcpy(p + 4 * i, &f, 4);
    } else if (v->dtype == NRT_BFLOAT16) {
      uint16_t h = (uint16_t)(u >> 16); /* truncated: keeps NaN payloads */
      memcpy(p + 2 * i, &h, 2);
    } else {
      static const uint16_t h16[] = {0x7e00u, 0xfe00u, 0x7c01u, 0xfd23u, 0x7c00u, 0xfc00u, 0x0001u,
                                     0x8200u, 0x03ffu, 0x0400u, 0x7bffu, 0xfbffu, 0x3c01u, 0x8000u};
      uint16_t h = h16[pick((int)(sizeof h16 / sizeof h16[0]))];
      memcpy(p + 2 * i, &h, 2);
    }
  }
}

/* Random groups of bfloat16, float16 and float32 values (inputs, registers
 * and outputs; mixed, as autocast makes them) over the ops the tape admits
 * in 16 bits: every group takes the tape, and its results and its scalar
 * twin's are bitwise those of the ops one by one. */
static void test_16bit_groups_take_the_register_loop(void) {
  static const nrt_op_code unary[] = {NRT_OP_NEG,  NRT_OP_ABS,  NRT_OP_RELU, NRT_OP_HARDTANH,
                                      NRT_OP_LEAKY_RELU, NRT_OP_LOG, NRT_OP_TANH, NRT_OP_SIGMOID,
                                      NRT_OP_SQRT, NRT_OP_RSQRT, NRT_OP_RECIPROCAL, NRT_OP_ERF,
                                      NRT_OP_COPY};
  static const nrt_op_code binary[] = {NRT_OP_ADD, NRT_OP_MUL, NRT_OP_DIV, NRT_OP_MAXIMUM,
                                       NRT_OP_MINIMUM};
  /* float16 only where the tape takes it (RT_TAPE_TAKES_F16) */
  static const nrt_dtype types[] = {NRT_BFLOAT16, RT_TAPE_TAKES_F16 ? NRT_FLOAT16 : NRT_BFLOAT16,
                                    NRT_FLOAT32};
  static const int64_t sizes[] = {1, 3, 17, 255, 256, 257, 1000};
  int taped = 0;
  uint64_t loops_before = nrt_metric_value(NRT_METRIC_FUSE_REGISTER_LOOPS);
  for (int trial = 0; trial < 160; trial++) {
    built b;
    memset(&b, 0, sizeof b);
    b.ndim = 2;
    b.shape[0] = sizes[pick(7)], b.shape[1] = sizes[pick(7)];
    /* mostly one 16-bit dtype, as a bfloat16 or float16 model runs */
    const nrt_dtype main16 = types[pick(2)];
    const int mixed = pick(3) == 0;
    b.num_inputs = 1 + pick(3);
    for (int k = 0; k < b.num_inputs; k++) {
      b.inputs[k] = random_input(mixed ? types[pick(3)] : main16, 2, b.shape);
      int64_t extent = 1;
      for (int d = 0; d < 2; d++)
        if (b.inputs[k].strides[d]) extent *= b.shape[d];
      fill16(&b.inputs[k], extent);
    }
    int insts = 1 + pick(8);
    while (b.num_insts < insts) {
      nrt_fuse_inst in;
      memset(&in, 0, sizeof in);
      in.num_outputs = 1;
      nrt_dtype compute;
      if (pick(2)) {
        in.code = unary[pick((int)(sizeof unary / sizeof unary[0]))];
        in.num_operands = 2;
        in.operands[1] = float_operand(&b, 0);
        compute = ref_dtype(&b, &in.operands[1]);
      } else {
        in.code = binary[pick((int)(sizeof binary / sizeof binary[0]))];
        in.num_operands = 3;
        in.operands[1] = float_operand(&b, 0);
        in.operands[2] = float_operand(&b, 1);
        compute = promote(ref_dtype(&b, &in.operands[1]), in.operands[2].kind == NRT_FUSE_IMMEDIATE
                                                              ? ref_dtype(&b, &in.operands[1])
                                                              : ref_dtype(&b, &in.operands[2]));
      }
      if (in.code == NRT_OP_ADD) {
        in.num_scalars = 1;
        in.scalars[0] = (nrt_scalar){.is_float = 1, .f = pick(2) ? 1.0 : (double)pick(7) / 3.0 - 1.1};
      } else if (in.code == NRT_OP_LEAKY_RELU) {
        in.num_scalars = 1;
        in.scalars[0] = (nrt_scalar){.is_float = 1, .f = 0.01};
      } else if (in.code == NRT_OP_HARDTANH) {
        in.num_scalars = 2;
        in.scalars[0] = (nrt_scalar){.is_float = 0, .i = -1};
        in.scalars[1] = (nrt_scalar){.is_float = 1, .f = 2.5};
      }
      in.compute_dtype = compute;
      nrt_dtype out = pick(4) == 0 ? types[pick(3)] : compute;
      /* a copy to its own 16-bit dtype keeps NaN payloads: the kernel's */
      if (in.code == NRT_OP_COPY && out == compute) out = compute == NRT_FLOAT32 ? main16 : NRT_FLOAT32;
      in.operands[0] = new_register(&b, out);
      b.insts[b.num_insts++] = in;
    }
    taped += tape_matches_ops(&b, trial);
  }
  CHECK(taped == 160);
  CHECK(nrt_metric_value(NRT_METRIC_FUSE_REGISTER_LOOPS) >= loops_before + 160);
}

static nrt_fuse_inst inst1(nrt_op_code code, nrt_dtype t, nrt_fuse_ref out, nrt_fuse_ref a) {
  nrt_fuse_inst in = inst2(code, t, out, a, a);
  in.num_operands = 2;
  in.operands[2] = (nrt_fuse_ref){0};
  return in;
}

/* exp, gelu, silu of bfloat16 use correctly rounded tables, not the float32
 * expression rounded: such a group keeps the kernels; neg takes the tape. */
static void test_16bit_table_ops_keep_the_kernels(void) {
  int64_t shape[2] = {4, 8};
  nrt_tensor_view x = dense(NRT_BFLOAT16, 2, shape), out = dense(NRT_BFLOAT16, 2, shape);
  nrt_dtype regs[1] = {NRT_BFLOAT16};
  nrt_fuse_inst in = inst1(NRT_OP_EXP, NRT_BFLOAT16, reg(0), input(0));
  int32_t out_reg = 0;
  nrt_fuse_group_desc d = {.ndim = 2, .shape = {4, 8}, .num_inputs = 1, .inputs = &x,
                           .num_registers = 1, .registers = regs, .num_insts = 1, .insts = &in,
                           .num_outputs = 1, .outputs = &out, .output_registers = &out_reg};
  nrt_fuse_group_t g;
  CHECK_OK(nrt_fuse_group_create(&d, &g));
  CHECK(g->tape.num_ops == 0);
  nrt_fuse_group_destroy(g);
  in = inst1(NRT_OP_NEG, NRT_BFLOAT16, reg(0), input(0));
  CHECK_OK(nrt_fuse_group_create(&d, &g));
  CHECK(g->tape.num_ops == 1 && g->tape.has16);
  nrt_fuse_group_destroy(g);
  /* float16: the kernels, until RT_TAPE_TAKES_F16 */
  x.dtype = out.dtype = regs[0] = NRT_FLOAT16;
  in = inst1(NRT_OP_NEG, NRT_FLOAT16, reg(0), input(0));
  CHECK_OK(nrt_fuse_group_create(&d, &g));
  CHECK(g->tape.num_ops == (RT_TAPE_TAKES_F16 ? 1 : 0));
  nrt_fuse_group_destroy(g);
  nrt_free(x.data);
  nrt_free(out.data);
}

/* A float64 register keeps a group on the instruction-by-instruction path. */
static void test_other_dtypes_keep_the_kernels(void) {
  chain c;
  make_chain(&c, NRT_INT32, 4, 8);
  nrt_fuse_group_t g;
  CHECK_OK(nrt_fuse_group_create(&c.desc, &g));
  CHECK(g->tape.num_ops == 0);
  nrt_fuse_group_destroy(g);
  free_chain(&c);
  make_chain(&c, NRT_FLOAT32, 4, 8);
  CHECK_OK(nrt_fuse_group_create(&c.desc, &g));
  CHECK(g->tape.num_ops == 3);
  nrt_fuse_group_destroy(g);
  free_chain(&c);
}

int main(void) {
  RUN(test_random_groups_match_ops_one_by_one);
  RUN(test_malformed_groups_are_refused_with_a_reason);
  RUN(test_a_failing_op_fails_the_group_with_its_message);
  RUN(test_launch_runs_in_stream_order_and_errors_are_sticky);
  RUN(test_zero_size_and_0d_groups);
  RUN(test_in_place_over_a_transposed_layout);
  RUN(test_a_group_that_would_differ_on_tiles_is_refused);
  RUN(test_float32_groups_take_the_register_loop);
  RUN(test_16bit_groups_take_the_register_loop);
  RUN(test_16bit_table_ops_keep_the_kernels);
  RUN(test_other_dtypes_keep_the_kernels);
  return CHECK_MAIN_RESULT();
}
