/* float16 and bfloat16 add, mul and div in one pass with the conversion
 * instructions.
 *
 * Why: RT_BINARY_LOOP_F16 converts a block into L1, computes over it and
 * converts back, so every element is stored three times; on Zen 4 (one
 * 256-bit store a cycle) float16 `x * 2` and `x * y` ran at 0.5-0.7x of
 * PyTorch's CPU. Here each vector is loaded, converted (VCVTPH2PS), computed,
 * converted back (VCVTPS2PH, to nearest even) and stored in registers.
 * bfloat16's loop (RT_BINARY_LOOP_CVT) was one pass already, but rounded
 * with a dozen integer operations per vector: where the CPU has AVX512-BF16
 * one VCVTNEPS2BF16 does it.
 *
 * The bits are the C loops' (their twins): the expressions are theirs
 * operation for operation (no fused multiply-add); a float16 NaN written is
 * made sign | 0x7e00 as rt_half_from_float makes it; VCVTNEPS2BF16 reads a
 * float32 subnormal as zero and keeps a NaN's sign and payload, so a vector
 * holding either (VFPCLASSPS) is rounded as rt_bfloat16_from_float rounds. */
#ifndef NEURONRT_OPS_ONE_PASS16_H
#define NEURONRT_OPS_ONE_PASS16_H

#include <stdint.h>
#include "neuronrt/op.h"

typedef enum rt_pass16_op {
  RT_PASS16_ADD, /* a + alpha * b */
  RT_PASS16_MUL, /* a * b, a's NaN where a is NaN */
  RT_PASS16_DIV  /* a / b */
} rt_pass16_op;

/* How an input is stored: in the 16-bit type with the run's stride (2
 * bytes, or 0 for one value), or one float32 value (a number). */
typedef enum rt_pass16_input { RT_PASS16_HALF, RT_PASS16_FLOAT_VALUE } rt_pass16_input;

/* Computes the run in type (NRT_FLOAT16 or NRT_BFLOAT16; data and byte
 * strides as an rt_inner_loop's: output, a, b) and returns 1 where the ISA
 * level has the instructions (float16: AVX2 with F16C, AVX-512; bfloat16:
 * AVX-512 with AVX512-BF16) and the output is contiguous with each 16-bit
 * input contiguous or one value (stride 0); returns 0, touching nothing,
 * otherwise. alpha is read by add only. */
int rt_one_pass16(nrt_dtype type, rt_pass16_op op, rt_pass16_input a_kind, rt_pass16_input b_kind, char **data,
                  const int64_t *strides, int64_t n, float alpha);

#endif
