/* Elementwise kernels over operands of mixed dtypes.
 *
 * A kernel is written for the dtypes it computes in (want[k] per operand:
 * float32 for float16/bfloat16 data, as PyTorch's CPU kernels compute them).
 * The engine hands the kernel runs of elements in exactly those dtypes:
 * operands stored in another dtype are converted chunk by chunk through
 * small buffers on the way in (inputs) and out (outputs). When every dtype
 * already matches, the kernel runs on the tensors directly.
 */
#ifndef NEURONRT_OPS_ELEMENTWISE_H
#define NEURONRT_OPS_ELEMENTWISE_H

#include "ops/engine/iterate.h"

/* Scalar attributes as a kernel reads them. */
typedef struct rt_scalars {
  double f[NRT_MAX_SCALARS];
  int64_t i[NRT_MAX_SCALARS];
} rt_scalars;

void rt_scalars_from_op(const nrt_op *op, rt_scalars *out);

/* Runs loop over all operands of op, each presented in want[k]. */
void rt_run_elementwise(const nrt_op *op, const nrt_dtype *want, rt_inner_loop loop, void *ctx);

/* The dtype a kernel computes a value of dtype d in: float32 for the 16-bit
 * floats, d itself otherwise. */
static inline nrt_dtype rt_compute_dtype(nrt_dtype d) {
  return d == NRT_FLOAT16 || d == NRT_BFLOAT16 ? NRT_FLOAT32 : d;
}

/* Kernel loops compiled for each ISA level of cpu_isa.h: x86-64-v4
 * (AVX-512), x86-64-v3 (AVX2+FMA) and the baseline. (Levels are tested by
 * feature; "arch=haswell" would tune for one CPU model.) A definition
 *
 *   RT_SIMD_VOID(name, (float *x, int64_t n), (x, n)) { body }
 *
 * makes three copies of the body, each inlined into a function compiled for
 * its level, and name itself, which calls the copy of the level rt_isa()
 * decided. The level is asked on every call (one load), not fixed at load
 * time as GCC's target_clones would, so TORCHNEURON_ISA reaches it.
 * RT_SIMD_RETURNS(type, name, params, args) is the same for a function that
 * returns a value; RT_SIMD_DEFINE(linkage, attributes, type, return, name,
 * params, args) is the general form (linkage empty for an extern function;
 * return is `return`, or empty for void). */
#include "cpu_isa.h"

#define RT_SIMD_CAT_(a, b) a##b
#define RT_SIMD_CAT(a, b) RT_SIMD_CAT_(a, b)

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__) && \
    !defined(__SANITIZE_THREAD__)
#define RT_SIMD_DEFINE(LINK, ATTRS, RET, RETURN, NAME, PARAMS, ARGS)                                 \
  ATTRS static inline __attribute__((always_inline)) RET RT_SIMD_CAT(NAME, _body) PARAMS;           \
  ATTRS __attribute__((target("arch=x86-64-v4"))) static RET RT_SIMD_CAT(NAME, _avx512) PARAMS {    \
    RETURN RT_SIMD_CAT(NAME, _body) ARGS;                                                            \
  }                                                                                                  \
  ATTRS __attribute__((target("arch=x86-64-v3"))) static RET RT_SIMD_CAT(NAME, _avx2) PARAMS {      \
    RETURN RT_SIMD_CAT(NAME, _body) ARGS;                                                            \
  }                                                                                                  \
  ATTRS static RET RT_SIMD_CAT(NAME, _baseline) PARAMS { RETURN RT_SIMD_CAT(NAME, _body) ARGS; }     \
  ATTRS LINK RET NAME PARAMS {                                                                       \
    nrt_isa isa_ = rt_isa();                                                                         \
    if (isa_ == NRT_ISA_AVX512) {                                                                    \
      RETURN RT_SIMD_CAT(NAME, _avx512) ARGS;                                                        \
    } else if (isa_ == NRT_ISA_AVX2) {                                                               \
      RETURN RT_SIMD_CAT(NAME, _avx2) ARGS;                                                          \
    } else {                                                                                         \
      RETURN RT_SIMD_CAT(NAME, _baseline) ARGS;                                                      \
    }                                                                                                \
  }                                                                                                  \
  ATTRS static inline __attribute__((always_inline)) RET RT_SIMD_CAT(NAME, _body) PARAMS
#else
/* One variant, the compiler's own target: off x86-64, and under the
 * sanitizers, whose builds would take three times as long to compile (there
 * the per-level runs still vary the hand-written kernels). */
#define RT_SIMD_DEFINE(LINK, ATTRS, RET, RETURN, NAME, PARAMS, ARGS) ATTRS LINK RET NAME PARAMS
#endif

#define RT_SIMD_VOID(NAME, PARAMS, ARGS) RT_SIMD_DEFINE(static, , void, , NAME, PARAMS, ARGS)
#define RT_SIMD_RETURNS(RET, NAME, PARAMS, ARGS) RT_SIMD_DEFINE(static, , RET, return, NAME, PARAMS, ARGS)

#endif
