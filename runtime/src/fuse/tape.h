/* The register-level loop of a fused group: the whole expression evaluated
 * per block of elements.
 *
 * The VM's general path (vm.c) calls each instruction's kernel loop on a
 * tile of RT_FUSE_TILE elements, every intermediate a tile-sized buffer in
 * L2: eight ops over a tile read and write eight such buffers. A group
 * whose instructions are all float32 ops of float_exprs.h (their values
 * float32, bfloat16 or float16) is instead translated, when it is built, into a tape: for each
 * block of RT_TAPE_BLOCK elements (a row's piece; a few vector registers'
 * worth, a few KB in L1 for all its live values) every op of the tape runs
 * in turn, reading inputs in place, then the outputs are stored. One pass
 * over memory, no per-op calls, intermediates that never leave L1.
 *
 * The ops compute the very expressions the unfused kernels compute
 * (ops/pointwise/float_exprs.h), compiled for each ISA level as those are
 * (RT_SIMD_*), so the results are bitwise those of running the ops one by
 * one (the fusion contract). A bfloat16 or float16 value lives in its
 * slot as its float32: 16-bit inputs are converted into their gather
 * slots, an op whose result register is 16-bit rounds its slot to it
 * (round to nearest even, NaN as scalar_types.h converts), 16-bit outputs
 * are stored converted; exactly what the unfused kernels' converting path
 * does (each admitted op checked: tape.c, admits16). rt_fuse_tape_run_reference is the scalar
 * twin: one element at a time through the whole tape.
 */
#ifndef NEURONRT_FUSE_TAPE_H
#define NEURONRT_FUSE_TAPE_H

#include <stdint.h>
#include <string.h>
#include "neuronrt/fuse.h"

/* Elements of a block: 1 KB per live float32 value. */
#define RT_TAPE_BLOCK 256

/* Where an op's source lives in a block. */
enum { RT_TAPE_SLOT = 0, RT_TAPE_INPUT = 1, RT_TAPE_IMM = 2 };

typedef struct rt_tape_src {
  uint8_t kind;
  uint8_t index; /* slot or input */
  float imm;     /* RT_TAPE_IMM: the immediate in float32, as the kernel's loop reads it */
} rt_tape_src;

/* A 16-bit format a value is held in (rt_tape_op.round, the inputs' and
 * outputs' kinds): its block slot holds the float32 of that value. */
enum { RT_TAPE_F32 = 0, RT_TAPE_BF16 = 1, RT_TAPE_F16 = 2 };

/* Whether float16 values take the tape. Not yet: scalar_types.h's float16
 * converters (branches for subnormals, overflow, NaN) do not vectorise, and
 * float16 groups ran slower on the tape than on the kernels' loops (8192 x
 * 768, one thread: (x*2+1).abs() 11-13.6 ms against 7.8-8.6;
 * docs/performance.md). The code is complete and tested when this is 1. */
#define RT_TAPE_TAKES_F16 0

typedef struct rt_tape_op {
  uint8_t code; /* an rt_tape_code (tape.c) */
  uint8_t dst;  /* slot written; never one of the op's sources */
  uint8_t num_src;
  uint8_t round; /* RT_TAPE_BF16/F16: the result rounded to it, as the unfused op stores it */
  rt_tape_src src[2];
  double scalars[2]; /* the op's scalars as rt_scalars.f reads them */
} rt_tape_op;

typedef struct rt_fuse_tape {
  int32_t num_ops; /* 0: no tape; the group runs instruction by instruction */
  int32_t num_slots; /* block registers of the values, then one per input (gathers) */
  int32_t input_slot0; /* the first gather slot: input k gathers into input_slot0 + k */
  uint8_t out_slot[NRT_FUSE_MAX_OUTPUTS];
  /* Whether any input, output or op result is 16-bit (then no generated
   * code: codegen.c knows float32 tapes only), and each one's kind. */
  uint8_t has16;
  uint8_t in_kind[NRT_FUSE_MAX_INPUTS];
  uint8_t out_kind[NRT_FUSE_MAX_OUTPUTS];
  rt_tape_op ops[NRT_FUSE_MAX_INSTS];
} rt_fuse_tape;

struct nrt_fuse_group;
struct rt_fuse_box;

/* Stores n block values v to a row of an output whose elements are cs
 * floats apart (the planes of a complex tensor: 2). */
static inline void rt_tape_store_row(float *o, const float *v, int64_t n, int64_t cs) {
  if (cs == 1) {
    memcpy(o, v, (size_t)n * sizeof(float));
  } else if (cs == 2) {
    for (int64_t e = 0; e < n; e++) o[2 * e] = v[e];
  } else {
    for (int64_t e = 0; e < n; e++) o[e * cs] = v[e];
  }
}

/* Fills g->tape from g's instructions (already checked), or sets num_ops
 * to 0 when one of them is outside the tape's vocabulary. */
void rt_fuse_tape_build(struct nrt_fuse_group *g);

/* The name of the float_exprs.h macro that op code computes (its source
 * count in *arity), or NULL for a copy: for generated code (codegen.h),
 * which evaluates the very same text. */
const char *rt_fuse_tape_expr(int code, int *arity);

/* Bytes of a thread's block registers. */
size_t rt_fuse_tape_scratch_bytes(const rt_fuse_tape *t);

/* Runs g's tape over box b (scratch: rt_fuse_tape_scratch_bytes, 64-byte
 * aligned) and stores its outputs. Float ops cannot fail. */
void rt_fuse_tape_run(const struct nrt_fuse_group *g, const struct rt_fuse_box *b, char *scratch);

/* The scalar twin: the same, one element at a time through the whole tape,
 * no vector code. For tests. */
void rt_fuse_tape_run_reference(const struct nrt_fuse_group *g, const struct rt_fuse_box *b);

#endif
