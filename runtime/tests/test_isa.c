/* TORCHNEURON_ISA and the level the kernels run at (cpu_isa.c).
 *
 * Each configuration runs in a child process (the level is decided once per
 * process). The kernels themselves are tested at every level by ctest, which
 * runs each kernel test once per level through isa_gate; this file tests the
 * knob: what it accepts, what it rejects, and that it reaches the kernels'
 * dispatch. It prints the host's levels, so a run's log says which paths
 * this CPU could test. */
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "child.h"
#include "cpu_isa.h"

#define ENV(...) ((const char *const[]){__VA_ARGS__, NULL})

/* The child's expected level comes in its case name: "level:avx2". */
static void case_level(const char *want_name) {
  nrt_isa want, active = NRT_ISA_COUNT, best = NRT_ISA_COUNT;
  CHECK(rt_isa_parse(want_name, &want));
  CHECK_OK(nrt_isa_get(&active, &best));
  CHECK(active == want);
  CHECK(best == rt_isa_host_best());
  CHECK(rt_isa() == want);
  /* AVX512-BF16 kernels only at the AVX-512 level. */
  if (want < NRT_ISA_AVX512) CHECK(!rt_isa_avx512_bf16());
  /* AMX only at the host's own level: a forced level, even avx512, is the
   * vector kernels. */
  const char *forced = getenv("TORCHNEURON_ISA");
  if (forced && *forced) CHECK(!rt_isa_amx_bf16());
}

/* A rejected value: every call fails with a message naming the variable. */
static void case_rejected(void) {
  int32_t count = -1;
  nrt_isa active;
  CHECK_STATUS(nrt_init(), NRT_ERROR_INVALID_CONFIG);
  CHECK(strstr(nrt_last_error(), "TORCHNEURON_ISA") != NULL);
  CHECK_STATUS(nrt_device_count(&count), NRT_ERROR_INVALID_CONFIG);
  CHECK_STATUS(nrt_isa_get(&active, NULL), NRT_ERROR_INVALID_CONFIG);
  /* Nothing runs above the host's level meanwhile. */
  CHECK(rt_isa() == NRT_ISA_BASELINE);
}

static int run_case(const char *name) {
  if (strncmp(name, "level:", 6) == 0)
    case_level(name + 6);
  else if (strcmp(name, "rejected") == 0)
    case_rejected();
  else {
    fprintf(stderr, "unknown case %s\n", name);
    return 2;
  }
  return CHECK_MAIN_RESULT();
}

static void expect_child(const char *name, const char *const *vars) {
  int code = child_run(name, vars);
  if (code != 0) fprintf(stderr, "  child case %s with %s exited with %d\n", name, vars[0], code);
  CHECK(code == 0);
}

static void test_names_round_trip(void) {
  for (int i = 0; i < NRT_ISA_COUNT; i++) {
    const char *name = NULL;
    nrt_isa back;
    CHECK_OK(nrt_isa_name((nrt_isa)i, &name));
    CHECK(name && rt_isa_parse(name, &back) && back == (nrt_isa)i);
  }
  const char *name = "untouched";
  CHECK_STATUS(nrt_isa_name(NRT_ISA_COUNT, &name), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_isa_name((nrt_isa)-1, &name), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_isa_name(NRT_ISA_AVX2, NULL), NRT_ERROR_INVALID_ARGUMENT);
}

static int host_has_avx512_bf16(void) {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16");
#else
  return 0;
#endif
}

/* The host's best level agrees with the CPU's own feature flags. */
static void test_host_level_matches_cpu_features(void) {
  nrt_isa best = rt_isa_host_best();
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  CHECK((best >= NRT_ISA_AVX2) == avx2);
  CHECK((best >= NRT_ISA_AVX512) == (avx2 && avx512));
#else
  CHECK(best == NRT_ISA_BASELINE);
#endif
  CHECK(rt_isa_avx512_bf16() == (rt_isa() >= NRT_ISA_AVX512 && host_has_avx512_bf16()));
  if (rt_isa_amx_bf16()) CHECK(rt_isa_avx512_bf16());
  printf("neuron ISA paths: host supports");
  for (int i = best; i >= 0; i--) printf(" %s", rt_isa_name((nrt_isa)i));
  /* The bfloat16 pair products (GEMM, conv) of the avx512 level. */
  printf("%s\n", rt_isa_host_best() >= NRT_ISA_AVX512 && host_has_avx512_bf16()
                     ? "; avx512_bf16 pair products at avx512"
                     : "; no avx512_bf16 (its bfloat16 pair products are not tested here)");
  printf("neuron ISA paths: %s\n", rt_isa_amx_bf16() ? "amx_bf16 tile products (when TORCHNEURON_ISA is unset)"
                                                      : "no amx_bf16 tile products (CPU, kernel or TORCHNEURON_ISA)");
}

/* Unset or empty: the host's best; each supported level when asked for. */
static void test_levels_the_host_supports(void) {
  char want[32], var[48];
  snprintf(want, sizeof want, "level:%s", rt_isa_name(rt_isa_host_best()));
  expect_child(want, ENV("TORCHNEURON_ISA="));
  for (int i = 0; i <= (int)rt_isa_host_best(); i++) {
    snprintf(want, sizeof want, "level:%s", rt_isa_name((nrt_isa)i));
    snprintf(var, sizeof var, "TORCHNEURON_ISA=%s", rt_isa_name((nrt_isa)i));
    expect_child(want, ENV(var));
  }
}

/* Above the host's best is an error, not a quiet step down; so is any
 * spelling but the three names. */
static void test_rejected_values(void) {
  if (rt_isa_host_best() < NRT_ISA_AVX512) expect_child("rejected", ENV("TORCHNEURON_ISA=avx512"));
  if (rt_isa_host_best() < NRT_ISA_AVX2) expect_child("rejected", ENV("TORCHNEURON_ISA=avx2"));
  expect_child("rejected", ENV("TORCHNEURON_ISA=AVX2"));
  expect_child("rejected", ENV("TORCHNEURON_ISA=sse2"));
  expect_child("rejected", ENV("TORCHNEURON_ISA=avx512f"));
  expect_child("rejected", ENV("TORCHNEURON_ISA= baseline"));
  expect_child("rejected", ENV("TORCHNEURON_ISA=native"));
}

int main(int argc, char **argv) {
  if (child_is_case(argc, argv)) return run_case(argv[2]);
  RUN(test_names_round_trip);
  RUN(test_host_level_matches_cpu_features);
  RUN(test_levels_the_host_supports);
  RUN(test_rejected_values);
  return CHECK_MAIN_RESULT();
}
