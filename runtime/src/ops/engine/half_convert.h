/* float16 <-> float32 over blocks with the CPU's conversion instructions:
 * F16C's VCVTPH2PS / VCVTPS2PH at the AVX2 level, their 16-wide AVX-512
 * forms at AVX-512, the C conversions of scalar_types.h at the baseline.
 *
 * Why: rt_half_from_float and rt_half_to_float, vectorised by the compiler
 * in a loop that also computes (RT_BINARY_LOOPS16), cost about 1 ns per
 * element each way on the AMX Xeon: float16 x * y ran at 0.55x of the CPU,
 * in-register x * 2 at 0.21x. One instruction converts 16.
 *
 * The bits are the C conversions' (test_pointwise checks every float16 and
 * a sweep of floats at each level): rounding is to nearest even (stated in
 * the instruction, not read from MXCSR); a NaN written is made sign | 0x7e00
 * after the instruction, as rt_half_from_float makes it. Read, a
 * signalling NaN comes back quiet (sign and payload kept), where
 * rt_half_to_float keeps it signalling; written back through
 * rt_half_block_from_float or rt_half_from_float, both give the same
 * canonical NaN of the same sign.
 */
#ifndef NEURONRT_OPS_HALF_CONVERT_H
#define NEURONRT_OPS_HALF_CONVERT_H

#include <stdint.h>

void rt_half_block_to_float(float *dst, const uint16_t *src, int64_t n);
void rt_half_block_from_float(uint16_t *dst, const float *src, int64_t n);

#endif
