/* The instruction-set level of the kernels: detected from the CPU, lowered
 * by TORCHNEURON_ISA (see cpu_isa.h, neuronrt/isa.h). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif
#include "cpu_isa.h"
#include "internal.h"

atomic_int rt_isa_decided = -1;

static pthread_once_t decide_once = PTHREAD_ONCE_INIT;
static nrt_isa host_best = NRT_ISA_BASELINE;
static int host_bf16;
static int host_amx_bf16; /* AMX-TILE and AMX-BF16, and Linux lets us use the tiles */
static int isa_forced;    /* TORCHNEURON_ISA was given */
static char config_error[256]; /* empty when TORCHNEURON_ISA is fine */

static const char *const names[NRT_ISA_COUNT] = {"baseline", "avx2", "avx512"};

const char *rt_isa_name(nrt_isa level) {
  return (int)level >= 0 && (int)level < NRT_ISA_COUNT ? names[level] : NULL;
}

int rt_isa_parse(const char *text, nrt_isa *level) {
  for (int i = 0; i < NRT_ISA_COUNT; i++)
    if (strcmp(text, names[i]) == 0) {
      *level = (nrt_isa)i;
      return 1;
    }
  return 0;
}

#if defined(__x86_64__) && defined(__GNUC__)
/* AMX's tile data is an XSAVE component Linux (5.16+) hands out only on
 * request: arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA). The
 * permission is per process (threads created before or after share it);
 * a refusal (older kernel, seccomp) leaves the AVX512-BF16 kernels. */
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18
static int detect_amx_bf16(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
  const unsigned amx_bf16 = 1u << 22, amx_tile = 1u << 24;
  if ((d & (amx_bf16 | amx_tile)) != (amx_bf16 | amx_tile)) return 0;
  return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
}
#endif

/* The x86-64 levels as the compiler's variants assume them (GCC names the
 * levels; elsewhere the features the hand-written kernels use). The checks
 * include the OS's support for saving the wider registers. */
static void detect_host(void) {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
#if !defined(__clang__)
  int v3 = __builtin_cpu_supports("x86-64-v3"), v4 = __builtin_cpu_supports("x86-64-v4");
#else
  int v3 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("f16c");
  int v4 = v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vl");
#endif
  host_best = v4 ? NRT_ISA_AVX512 : v3 ? NRT_ISA_AVX2 : NRT_ISA_BASELINE;
  host_bf16 = v4 && __builtin_cpu_supports("avx512bf16");
  host_amx_bf16 = host_bf16 && detect_amx_bf16();
#endif
}

static void decide(void) {
  detect_host();
  nrt_isa level = host_best;
  const char *text = getenv("TORCHNEURON_ISA");
  if (text && *text) {
    isa_forced = 1;
    nrt_isa want;
    if (!rt_isa_parse(text, &want))
      snprintf(config_error, sizeof config_error,
               "TORCHNEURON_ISA='%s' must be baseline, avx2 or avx512", text);
    else if (want > host_best)
      snprintf(config_error, sizeof config_error,
               "TORCHNEURON_ISA='%s' asks for more than this CPU supports (at most %s)", text,
               names[host_best]);
    else
      level = want;
    if (config_error[0]) level = NRT_ISA_BASELINE; /* runs nothing it cannot */
  }
  atomic_store(&rt_isa_decided, (int)level);
}

nrt_isa rt_isa_decide(void) {
  pthread_once(&decide_once, decide);
  return (nrt_isa)atomic_load(&rt_isa_decided);
}

nrt_isa rt_isa_host_best(void) {
  pthread_once(&decide_once, decide);
  return host_best;
}

int rt_isa_avx512_bf16(void) { return rt_isa() >= NRT_ISA_AVX512 && host_bf16; }

int rt_isa_amx_bf16(void) {
  return rt_isa() >= NRT_ISA_AVX512 && host_amx_bf16 && !isa_forced;
}

const char *rt_isa_config_error(void) {
  pthread_once(&decide_once, decide);
  return config_error[0] ? config_error : NULL;
}

nrt_status nrt_isa_get(nrt_isa *active, nrt_isa *best) {
  nrt_status s = rt_ensure_init();
  if (s) return s;
  if (active) *active = rt_isa();
  if (best) *best = rt_isa_host_best();
  return NRT_SUCCESS;
}

nrt_status nrt_isa_name(nrt_isa level, const char **name) {
  if (!name) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_isa_name: name is NULL");
  *name = rt_isa_name(level);
  if (!*name)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_isa_name: %d is not an ISA level", (int)level);
  return NRT_SUCCESS;
}
