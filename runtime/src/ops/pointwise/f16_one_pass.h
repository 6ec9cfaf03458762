/* float16 add, mul and div in one pass with the conversion instructions.
 *
 * Why: RT_BINARY_LOOP_F16 converts a block into L1, computes over it and
 * converts back, so every element is stored three times; on Zen 4 (one
 * 256-bit store a cycle) float16 `x * 2` and `x * y` ran at 0.5-0.7x of
 * PyTorch's CPU. Here each vector is loaded, converted (VCVTPH2PS), computed,
 * converted back (VCVTPS2PH, to nearest even) and stored in registers.
 *
 * The bits are the block loops' (their twin): the expressions are theirs
 * operation for operation (no fused multiply-add), and a NaN written is made
 * sign | 0x7e00 as rt_half_from_float makes it. */
#ifndef NEURONRT_OPS_F16_ONE_PASS_H
#define NEURONRT_OPS_F16_ONE_PASS_H

#include <stdint.h>

typedef enum rt_f16_pass_op {
  RT_F16_PASS_ADD, /* a + alpha * b */
  RT_F16_PASS_MUL, /* a * b, a's NaN where a is NaN */
  RT_F16_PASS_DIV  /* a / b */
} rt_f16_pass_op;

/* How an input is stored: float16 with the run's stride (2 bytes, or 0 for
 * one value), or one float32 value (a number). */
typedef enum rt_f16_pass_input { RT_F16_PASS_HALF, RT_F16_PASS_FLOAT_VALUE } rt_f16_pass_input;

/* Computes the run (data and byte strides as an rt_inner_loop's: output,
 * a, b) and returns 1 where the ISA level has the instructions (AVX2 with
 * F16C, AVX-512) and the output is contiguous float16 with each float16
 * input contiguous or one value (stride 0); returns 0, touching nothing,
 * otherwise. alpha is read by add only. */
int rt_f16_one_pass(rt_f16_pass_op op, rt_f16_pass_input a_kind, rt_f16_pass_input b_kind, char **data,
                    const int64_t *strides, int64_t n, float alpha);

#endif
