/* CPU instruction-set levels of the kernels.
 *
 * The kernels carry variants for three x86-64 levels and run the highest
 * one the host CPU supports, or the one TORCHNEURON_ISA names:
 *   TORCHNEURON_ISA   baseline | avx2 | avx512   (default: the host's best)
 * A level above the host's best, or any other value, is a configuration
 * error (NRT_ERROR_INVALID_CONFIG naming the variable), never a fallback.
 */
#ifndef NEURONRT_ISA_H
#define NEURONRT_ISA_H

#include "neuronrt/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum nrt_isa {
  NRT_ISA_BASELINE = 0, /* x86-64 (SSE2); the only level off x86-64 */
  NRT_ISA_AVX2 = 1,     /* x86-64-v3: AVX2, FMA, BMI2, F16C */
  NRT_ISA_AVX512 = 2    /* x86-64-v4: AVX-512 F/BW/CD/DQ/VL, and BF16 where present */
} nrt_isa;

#define NRT_ISA_COUNT 3

/* The level the kernels run at and the highest the host supports (either
 * pointer may be NULL). Fails as nrt_init does on a bad configuration. */
nrt_status nrt_isa_get(nrt_isa *active, nrt_isa *host_best);

/* The level's TORCHNEURON_ISA spelling: "baseline", "avx2" or "avx512". */
nrt_status nrt_isa_name(nrt_isa level, const char **name);

#ifdef __cplusplus
}
#endif
#endif
