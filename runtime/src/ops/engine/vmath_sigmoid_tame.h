/* rt_vm_sigmoidf for |x| <= 86 (no NaN, no infinity), in fewer
 * instructions and with the same bits. Both the eager sigmoid kernel
 * (pointwise_unary.c) and the generated code of fused groups (codegen.c
 * embeds this text) run it per block of values whose largest |x| is within
 * the bound, and rt_vm_sigmoidf on the other blocks. Include vmath.h first.
 *
 * There -|x| >= -86 needs no clamp and the result is no NaN; n =
 * round(-|x| / ln 2) >= -125 and the polynomial's y lies in [0.70, 1.42],
 * so y 2^n is a normal float and adding n to y's exponent field gives it
 * exactly, as the two exact scalings by 2^n1 and 2^n2 do (whose split
 * exists for subnormal results only). The rest is rt_vm_sigmoidf's text. On
 * a Zen 4 the vectorised loop is 34 instructions per 16 elements against 48
 * (GCC duplicates the clamped path and selects). runtime/tests/
 * test_fuse_codegen.c and test_sigmoid_tame.c check the bits over a sweep
 * of the domain and its edges. */
#ifndef NEURONRT_VMATH_SIGMOID_TAME_H
#define NEURONRT_VMATH_SIGMOID_TAME_H

#define RT_VM_SIGMOID_TAME_BITS 0x42ac0000u /* 86.0f's bits */

RT_VM_INLINE float rt_vm_sigmoidf_tame(float x) {
  float nx = -fabsf(x);
  const float shifter = 12582912.0f;
  float t = nx * 1.44269504088896341f + shifter;
  float n = t - shifter;
  int32_t ni = (int32_t)(rt_vm_bits(t) - rt_vm_bits(shifter));
  float r = fmaf(n, 2.12194440e-4f, nx - n * 0.693359375f);
  float p = 0.0013814610429108143f;
  p = fmaf(p, r, 0.008368710055947304f);
  p = fmaf(p, r, 0.04166838899254799f);
  p = fmaf(p, r, 0.1666652113199234f);
  p = fmaf(p, r, 0.4999999403953552f);
  float y = 1.0f + fmaf(r * r, p, r);
  float e = rt_vm_float(rt_vm_bits(y) + ((uint32_t)ni << 23));
  float d = 1.0f + e;
  float c = (1.0f - d) + e;
  uint32_t pos = 0u - (uint32_t)(x >= 0.0f);
  float q = rt_vm_float((rt_vm_bits(1.0f) & pos) | (rt_vm_bits(e) & ~pos)) / d;
  float inv = x >= 0.0f ? q : 1.0f - q;
  return q - q * (c * inv);
}

#endif
