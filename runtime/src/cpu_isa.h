/* The instruction-set level the kernels run at (cpu_isa.c).
 *
 * One place decides it, once per process: the host's best level, or the
 * lower one TORCHNEURON_ISA names. Every ISA dispatch in the kernels asks
 * here (the RT_SIMD_* variants of ops/engine/elementwise.h and the hand-written
 * micro-kernels alike), so that forcing a level reaches all of them.
 */
#ifndef NEURONRT_CPU_ISA_H
#define NEURONRT_CPU_ISA_H

#include <stdatomic.h>
#include "neuronrt/isa.h"

/* The decided level, or -1 before the first rt_isa call. */
extern atomic_int rt_isa_decided;
nrt_isa rt_isa_decide(void);

/* The level kernels run at: a relaxed load once decided, so that a kernel
 * may ask on every call. */
static inline nrt_isa rt_isa(void) {
  int level = atomic_load_explicit(&rt_isa_decided, memory_order_relaxed);
  return level >= 0 ? (nrt_isa)level : rt_isa_decide();
}

/* The highest level this CPU and OS support, whatever TORCHNEURON_ISA says. */
nrt_isa rt_isa_host_best(void);

/* Nonzero when the AVX-512 level is in use and the CPU has AVX512-BF16
 * (dot products of bfloat16 pairs), which x86-64-v4 does not include. */
int rt_isa_avx512_bf16(void);

/* Nonzero when the CPU has AMX-TILE and AMX-BF16 (tile dot products of
 * bfloat16 pairs), Linux granted this process the tile state, the AVX-512
 * level is in use, and TORCHNEURON_ISA is not set: a forced level (even
 * avx512) runs the vector kernels only, so that every level's kernels
 * stay testable on an AMX host. */
int rt_isa_amx_bf16(void);

/* The message of a bad TORCHNEURON_ISA (naming the variable), or NULL.
 * The device configuration reports it at first use; until the error is
 * fixed, rt_isa is the baseline. */
const char *rt_isa_config_error(void);

/* TORCHNEURON_ISA spelling of a level, or NULL; and the reverse (0 if the
 * text names no level). */
const char *rt_isa_name(nrt_isa level);
int rt_isa_parse(const char *text, nrt_isa *level);

#endif
