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

/* Annotation for kernel loops: compiled for the x86-64 ISA levels v4
 * (AVX-512), v3 (AVX2+FMA) and the baseline, the variant chosen at load time
 * from the CPU's features. (ISA levels are tested by feature; "arch=haswell"
 * would test the CPU model and pick the baseline on anything but a Haswell,
 * AMD processors included.) */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define RT_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define RT_SIMD_CLONES
#endif

#endif
