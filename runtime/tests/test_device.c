/* Device configuration from the environment, and the fork rule.
 *
 * The runtime configures itself once per process, so every configuration
 * runs in a child process (child.h): the parent never touches the runtime,
 * it only spawns `test_device --child-case NAME` with the environment under
 * test and checks the exit code. NRT_TEST_* variables tell a case what to
 * expect.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"
#include "child.h"

#define GIB (1024ull * 1024ull * 1024ull)
#define KIB 1024u

typedef struct expected_gen {
  const char *target_name;
  const char *core_name;
  nrt_target target;
  uint64_t chip_hbm_bytes;
  uint64_t chip_hbm_bytes_per_s;
  uint32_t sbuf_partition_bytes;
  uint64_t tensor_hz, vector_hz, scalar_hz, gpsimd_hz, dma_bytes_per_s;
  uint64_t chip_link_bytes_per_s, chip_efa_bytes_per_s;
} expected_gen;

static const expected_gen TRN1 = {"trn1", "NeuronCore-v2", NRT_TARGET_TRN1, 32 * GIB,
                                  820000000000ull, 192 * KIB, 1400000000ull, 1400000000ull,
                                  1400000000ull, 1400000000ull, 272000000000ull,
                                  384000000000ull, 6250000000ull};
static const expected_gen TRN2 = {"trn2", "NeuronCore-v3", NRT_TARGET_TRN2, 96 * GIB,
                                  2900000000000ull, 224 * KIB, 2400000000ull, 960000000ull,
                                  1200000000ull, 1200000000ull, 368000000000ull,
                                  1280000000000ull, 25000000000ull};
static const expected_gen TRN3 = {"trn3", "NeuronCore-v4", NRT_TARGET_TRN3, 144 * GIB,
                                  4800000000000ull, 256 * KIB, 2400000000ull, 960000000ull,
                                  1200000000ull, 1200000000ull, 528000000000ull,
                                  2560000000000ull, 25000000000ull};

/* Checks every property of device d. cores_per_chip is the number of
 * logical cores of one chip (the HBM share), hbm_bytes the enforced
 * capacity (0: the chip's share). */
static void check_device(int32_t d, const expected_gen *g, int32_t lnc, int32_t cores_per_chip,
                         int32_t logical_core, uint64_t hbm_bytes) {
  nrt_device_properties p;
  memset(&p, 0xa5, sizeof p);
  CHECK_OK(nrt_device_get_properties(d, &p));
  char name[64];
  snprintf(name, sizeof name, "%s (%s, simulated)", g->core_name, g->target_name);
  CHECK(strcmp(p.name, name) == 0);
  CHECK(strcmp(p.target_name, g->target_name) == 0);
  CHECK(p.target == g->target);
  CHECK(p.logical_core == logical_core);
  CHECK(p.logical_nc_config == lnc);
  CHECK(p.hbm_bytes == (hbm_bytes ? hbm_bytes : g->chip_hbm_bytes / (uint64_t)cores_per_chip));
  CHECK(p.hbm_bytes_per_s == g->chip_hbm_bytes_per_s / (uint64_t)cores_per_chip);
  CHECK(p.sbuf_partitions == 128);
  CHECK(p.sbuf_partition_bytes == g->sbuf_partition_bytes);
  CHECK(p.psum_partitions == 128);
  CHECK(p.psum_partition_bytes == 16 * KIB);
  CHECK(p.psum_banks == 8);
  CHECK(p.tensor_engine_hz == g->tensor_hz);
  CHECK(p.vector_engine_hz == g->vector_hz);
  CHECK(p.scalar_engine_hz == g->scalar_hz);
  CHECK(p.gpsimd_engine_hz == g->gpsimd_hz);
  CHECK(p.dma_bytes_per_s == g->dma_bytes_per_s);
  CHECK(p.link_bytes_per_s == g->chip_link_bytes_per_s / (uint64_t)cores_per_chip);
  CHECK(p.efa_bytes_per_s == g->chip_efa_bytes_per_s / (uint64_t)cores_per_chip);
}

static void check_count(int32_t expected) {
  int32_t n = -1;
  CHECK_OK(nrt_device_count(&n));
  CHECK(n == expected);
  nrt_device_properties p;
  CHECK_STATUS(nrt_device_get_properties(expected, &p), NRT_ERROR_INVALID_DEVICE);
  CHECK(strstr(nrt_last_error(), "invalid device index") != NULL);
  CHECK_STATUS(nrt_device_get_properties(-1, &p), NRT_ERROR_INVALID_DEVICE);
  CHECK_STATUS(nrt_device_set_current(expected), NRT_ERROR_INVALID_DEVICE);
}

/* ---- child cases ------------------------------------------------------ */

static void *current_device_thread(void *arg) {
  int32_t *out = arg;
  CHECK_OK(nrt_device_get_current(out));
  CHECK_OK(nrt_device_set_current(1));
  return NULL;
}

static void case_default(void) {
  CHECK_OK(nrt_init());
  CHECK_OK(nrt_init()); /* idempotent */
  check_count(4);
  for (int32_t d = 0; d < 4; d++) check_device(d, &TRN2, 2, 4, d, 24 * GIB);
  CHECK(nrt_launch_blocking() == 0);
  CHECK(nrt_in_bad_fork() == 0);

  /* The current device is per thread and defaults to 0. */
  int32_t cur = -1;
  CHECK_OK(nrt_device_get_current(&cur));
  CHECK(cur == 0);
  CHECK_OK(nrt_device_set_current(3));
  CHECK_OK(nrt_device_get_current(&cur));
  CHECK(cur == 3);
  pthread_t t;
  int32_t other = -1;
  CHECK(pthread_create(&t, NULL, current_device_thread, &other) == 0);
  pthread_join(t, NULL);
  CHECK(other == 0);
  CHECK_OK(nrt_device_get_current(&cur));
  CHECK(cur == 3); /* the other thread's set_current did not leak here */
  CHECK_STATUS(nrt_device_set_current(-1), NRT_ERROR_INVALID_DEVICE);
  CHECK_OK(nrt_device_set_current(0));

  /* NULL out-parameters are rejected, not written. */
  CHECK_STATUS(nrt_device_count(NULL), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_device_get_properties(0, NULL), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_device_get_current(NULL), NRT_ERROR_INVALID_ARGUMENT);

  /* The memory capacity is the HBM share. */
  size_t free_bytes = 0, total = 0;
  CHECK_OK(nrt_mem_get_info(0, &free_bytes, &total));
  CHECK(total == 24 * GIB);
  CHECK(free_bytes <= total);
  CHECK_OK(nrt_device_synchronize(3));
  CHECK_STATUS(nrt_device_synchronize(4), NRT_ERROR_INVALID_DEVICE);
}

static const expected_gen *gen_from_env(void) {
  const char *t = getenv("NEURON_PLATFORM_TARGET_OVERRIDE");
  if (t && strcmp(t, "trn1") == 0) return &TRN1;
  if (t && strcmp(t, "trn3") == 0) return &TRN3;
  return &TRN2;
}

/* Generic configuration check. NRT_TEST_LNC: expected physical cores per
 * device; NRT_TEST_PER_CHIP: logical cores per chip; NRT_TEST_CORES: the
 * expected logical core of each device, comma separated; NRT_TEST_HBM:
 * expected capacity in bytes (absent: the chip's share). */
static void case_config(void) {
  const expected_gen *g = gen_from_env();
  int32_t lnc = atoi(getenv("NRT_TEST_LNC"));
  int32_t per_chip = atoi(getenv("NRT_TEST_PER_CHIP"));
  const char *hbm = getenv("NRT_TEST_HBM");
  uint64_t hbm_bytes = hbm ? strtoull(hbm, NULL, 10) : 0;
  int32_t cores[NRT_MAX_DEVICES], n = 0;
  for (const char *p = getenv("NRT_TEST_CORES"); *p;) {
    char *end;
    cores[n++] = (int32_t)strtol(p, &end, 10);
    p = *end == ',' ? end + 1 : end;
  }
  CHECK_OK(nrt_init());
  check_count(n);
  for (int32_t d = 0; d < n; d++) check_device(d, g, lnc, per_chip, cores[d], hbm_bytes);
  if (n > 0) {
    size_t free_bytes = 0, total = 0;
    CHECK_OK(nrt_mem_get_info(n - 1, &free_bytes, &total));
    CHECK(total == (hbm_bytes ? hbm_bytes : g->chip_hbm_bytes / (uint64_t)per_chip));
    /* The capacity is enforced: one byte more is out of memory. */
    void *p = NULL;
    CHECK_STATUS(nrt_malloc(n - 1, total + 1, &p), NRT_ERROR_OUT_OF_MEMORY);
    if (total <= (64u << 20)) { /* small enough to take whole */
      CHECK_OK(nrt_malloc(n - 1, total, &p));
      void *q = NULL;
      CHECK_STATUS(nrt_malloc(n - 1, 4096, &q), NRT_ERROR_OUT_OF_MEMORY);
      CHECK_OK(nrt_free(p));
    }
  }
}

static void case_blocking(void) {
  int expected = atoi(getenv("NRT_TEST_BLOCKING"));
  CHECK_OK(nrt_init());
  CHECK(nrt_launch_blocking() == expected);
}

static void *bad_config_thread(void *arg) {
  const char *var = arg;
  int32_t n = 123;
  CHECK_STATUS(nrt_device_count(&n), NRT_ERROR_INVALID_CONFIG);
  CHECK(strstr(nrt_last_error(), var) != NULL);
  CHECK(n == 123);
  return NULL;
}

/* NRT_TEST_VAR names the malformed variable, which every call must name. */
static void case_bad_config(void) {
  const char *var = getenv("NRT_TEST_VAR");
  CHECK_STATUS(nrt_init(), NRT_ERROR_INVALID_CONFIG);
  CHECK(strstr(nrt_last_error(), var) != NULL);
  if (!strstr(nrt_last_error(), var))
    fprintf(stderr, "  message was: %s\n", nrt_last_error());
  /* Every later call fails the same way, on any thread. */
  CHECK_STATUS(nrt_init(), NRT_ERROR_INVALID_CONFIG);
  int32_t n = 123;
  CHECK_STATUS(nrt_device_count(&n), NRT_ERROR_INVALID_CONFIG);
  CHECK(n == 123);
  CHECK(strstr(nrt_last_error(), var) != NULL);
  nrt_device_properties p;
  CHECK_STATUS(nrt_device_get_properties(0, &p), NRT_ERROR_INVALID_CONFIG);
  CHECK_STATUS(nrt_device_set_current(0), NRT_ERROR_INVALID_CONFIG);
  nrt_stream_t s;
  CHECK_STATUS(nrt_stream_get_default(0, &s), NRT_ERROR_INVALID_CONFIG);
  CHECK_STATUS(nrt_stream_create(0, 0, &s), NRT_ERROR_INVALID_CONFIG);
  nrt_event_t e;
  CHECK_STATUS(nrt_event_create(0, &e), NRT_ERROR_INVALID_CONFIG);
  void *ptr;
  CHECK_STATUS(nrt_malloc(0, 4096, &ptr), NRT_ERROR_INVALID_CONFIG);
  CHECK_STATUS(nrt_device_synchronize(0), NRT_ERROR_INVALID_CONFIG);
  CHECK(strstr(nrt_last_error(), var) != NULL);
  CHECK(nrt_launch_blocking() == 0);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, bad_config_thread, (void *)var) == 0);
  pthread_join(t, NULL);
}

static int host_func_runs;
static void count_run(void *arg) {
  (void)arg;
  host_func_runs++;
}

/* Starts a stream worker, forks: the child is refused with a message
 * pointing at 'spawn' (and never hangs); the parent carries on. */
static void case_fork(void) {
  nrt_stream_t s;
  CHECK_OK(nrt_stream_get_default(0, &s));
  CHECK_OK(nrt_launch_host_func(s, count_run, NULL));
  CHECK_OK(nrt_stream_synchronize(s));
  nrt_event_t e;
  CHECK_OK(nrt_event_create(0, &e));
  fflush(NULL);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    alarm(20); /* a hang is a failure, not a stuck test */
    int bad = 0;
    int32_t n = -1;
    bad += nrt_in_bad_fork() == 0;
    bad += nrt_device_count(&n) != NRT_ERROR_FORKED;
    bad += n != -1;
    bad += strstr(nrt_last_error(), "spawn") == NULL;
    bad += strstr(nrt_last_error(), "fork") == NULL;
    bad += nrt_init() != NRT_ERROR_FORKED;
    nrt_stream_t s2;
    bad += nrt_stream_get_default(0, &s2) != NRT_ERROR_FORKED;
    bad += nrt_launch_host_func(s, count_run, NULL) != NRT_ERROR_FORKED;
    bad += nrt_stream_synchronize(s) != NRT_ERROR_FORKED;
    bad += nrt_stream_query(s) != NRT_ERROR_FORKED;
    bad += nrt_event_record(e, s) != NRT_ERROR_FORKED;
    bad += nrt_event_synchronize(e) != NRT_ERROR_FORKED;
    bad += nrt_device_synchronize(0) != NRT_ERROR_FORKED;
    void *ptr;
    bad += nrt_malloc(0, 4096, &ptr) != NRT_ERROR_FORKED;
    bad += strstr(nrt_last_error(), "spawn") == NULL;
    if (bad) fprintf(stderr, "forked child: %d checks failed; last error: %s\n", bad,
                     nrt_last_error());
    _exit(bad ? 1 : 0);
  }
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  /* The parent keeps working. */
  CHECK(nrt_in_bad_fork() == 0);
  int32_t n = -1;
  CHECK_OK(nrt_device_count(&n));
  CHECK(n == 4);
  CHECK_OK(nrt_launch_host_func(s, count_run, NULL));
  CHECK_OK(nrt_event_record(e, s));
  CHECK_OK(nrt_event_synchronize(e));
  CHECK_OK(nrt_stream_synchronize(s));
  CHECK(host_func_runs == 2);
  CHECK_OK(nrt_event_destroy(e));
}

/* Forks; the child checks that it can use the runtime normally (no
 * streams or device memory existed at the fork). */
static void fork_and_expect_usable_child(void) {
  fflush(NULL);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    alarm(20);
    int32_t n = -1;
    nrt_stream_t s;
    void *p = NULL;
    int bad = nrt_device_count(&n) != NRT_SUCCESS || n != 4 || nrt_in_bad_fork() ||
              nrt_stream_get_default(0, &s) != NRT_SUCCESS ||
              nrt_launch_host_func(s, count_run, NULL) != NRT_SUCCESS ||
              nrt_stream_synchronize(s) != NRT_SUCCESS || host_func_runs != 1 ||
              nrt_malloc(0, 4096, &p) != NRT_SUCCESS || nrt_free(p) != NRT_SUCCESS;
    if (bad) fprintf(stderr, "forked child: %s\n", nrt_last_error());
    _exit(bad);
  }
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* A fork before the runtime is initialised is fine for both sides. */
static void case_fork_before_init(void) {
  fork_and_expect_usable_child();
  int32_t n = -1;
  CHECK_OK(nrt_device_count(&n));
  CHECK(n == 4);
}

/* Initialising and querying devices start nothing: a fork is still fine
 * (as torch.cuda.device_count() before a fork is). */
static void case_fork_after_queries(void) {
  int32_t n = -1;
  CHECK_OK(nrt_init());
  CHECK_OK(nrt_device_count(&n));
  nrt_device_properties p;
  CHECK_OK(nrt_device_get_properties(0, &p));
  CHECK_OK(nrt_device_set_current(1));
  fork_and_expect_usable_child();
  CHECK(nrt_in_bad_fork() == 0);
}

/* Device memory alone (no stream) makes a fork unsafe too. */
static void case_fork_after_malloc(void) {
  void *p = NULL;
  CHECK_OK(nrt_malloc(0, 4096, &p));
  fflush(NULL);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    alarm(20);
    void *q = NULL;
    int bad = nrt_in_bad_fork() == 0 || nrt_malloc(0, 4096, &q) != NRT_ERROR_FORKED ||
              strstr(nrt_last_error(), "spawn") == NULL;
    _exit(bad);
  }
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECK_OK(nrt_free(p));
}

static int run_case(const char *name) {
  static const struct {
    const char *name;
    void (*fn)(void);
  } cases[] = {
      {"default", case_default},   {"config", case_config},
      {"blocking", case_blocking}, {"bad_config", case_bad_config},
      {"fork", case_fork},         {"fork_before_init", case_fork_before_init},
      {"fork_after_queries", case_fork_after_queries},
      {"fork_after_malloc", case_fork_after_malloc},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (strcmp(cases[i].name, name) == 0) {
      cases[i].fn();
      return CHECK_MAIN_RESULT();
    }
  }
  fprintf(stderr, "unknown case %s\n", name);
  return 2;
}

/* ---- the parent: one child per configuration -------------------------- */

#define ENV(...) ((const char *const[]){__VA_ARGS__, NULL})

static void expect_child(const char *what, const char *name, const char *const *vars) {
  int code = child_run(name, vars);
  if (code != 0) {
    fprintf(stderr, "  child case %s (%s) exited with %d; environment:", name, what, code);
    for (const char *const *v = vars; v && *v; v++) fprintf(stderr, " %s", *v);
    fprintf(stderr, "\n");
  }
  CHECK(code == 0);
}

static void test_default_configuration(void) {
  expect_child("defaults", "default", NULL);
  /* Empty values mean "not set". */
  expect_child("empty values", "default",
               ENV("NEURON_PLATFORM_TARGET_OVERRIDE=", "NEURON_LOGICAL_NC_CONFIG=",
                   "NEURON_RT_VISIBLE_CORES=", "NEURON_RT_NUM_CORES=", "NEURON_RT_HBM_BYTES=",
                   "NEURON_LAUNCH_BLOCKING="));
  expect_child("explicit trn2", "default",
               ENV("NEURON_PLATFORM_TARGET_OVERRIDE=trn2", "NEURON_LOGICAL_NC_CONFIG=2",
                   "NEURON_LAUNCH_BLOCKING=0"));
}

static void test_targets(void) {
  expect_child("trn1", "config",
               ENV("NEURON_PLATFORM_TARGET_OVERRIDE=trn1", "NRT_TEST_LNC=1",
                   "NRT_TEST_PER_CHIP=2", "NRT_TEST_CORES=0,1"));
  expect_child("trn1 lnc=1", "config",
               ENV("NEURON_PLATFORM_TARGET_OVERRIDE=trn1", "NEURON_LOGICAL_NC_CONFIG=1",
                   "NRT_TEST_LNC=1", "NRT_TEST_PER_CHIP=2", "NRT_TEST_CORES=0,1"));
  expect_child("trn3", "config",
               ENV("NEURON_PLATFORM_TARGET_OVERRIDE=trn3", "NRT_TEST_LNC=2",
                   "NRT_TEST_PER_CHIP=4", "NRT_TEST_CORES=0,1,2,3"));
  expect_child("trn2 lnc=1", "config",
               ENV("NEURON_LOGICAL_NC_CONFIG=1", "NRT_TEST_LNC=1", "NRT_TEST_PER_CHIP=8",
                   "NRT_TEST_CORES=0,1,2,3,4,5,6,7"));
  expect_child("trn3 lnc=1", "config",
               ENV("NEURON_PLATFORM_TARGET_OVERRIDE=trn3", "NEURON_LOGICAL_NC_CONFIG=1",
                   "NRT_TEST_LNC=1", "NRT_TEST_PER_CHIP=8", "NRT_TEST_CORES=0,1,2,3,4,5,6,7"));
}

static void test_visible_cores(void) {
  expect_child("1,3", "config",
               ENV("NEURON_RT_VISIBLE_CORES=1,3", "NRT_TEST_LNC=2", "NRT_TEST_PER_CHIP=4",
                   "NRT_TEST_CORES=1,3"));
  expect_child("0-2", "config",
               ENV("NEURON_RT_VISIBLE_CORES=0-2", "NRT_TEST_LNC=2", "NRT_TEST_PER_CHIP=4",
                   "NRT_TEST_CORES=0,1,2"));
  expect_child("0,2-3", "config",
               ENV("NEURON_RT_VISIBLE_CORES=0,2-3", "NRT_TEST_LNC=2", "NRT_TEST_PER_CHIP=4",
                   "NRT_TEST_CORES=0,2,3"));
  expect_child("single core", "config",
               ENV("NEURON_RT_VISIBLE_CORES=2", "NRT_TEST_LNC=2", "NRT_TEST_PER_CHIP=4",
                   "NRT_TEST_CORES=2"));
  expect_child("spaces", "config",
               ENV("NEURON_RT_VISIBLE_CORES= 1 , 2 - 3 ", "NRT_TEST_LNC=2",
                   "NRT_TEST_PER_CHIP=4", "NRT_TEST_CORES=1,2,3"));
  /* Cores of a second chip (the host may have several). */
  expect_child("second chip", "config",
               ENV("NEURON_RT_VISIBLE_CORES=4-7", "NRT_TEST_LNC=2", "NRT_TEST_PER_CHIP=4",
                   "NRT_TEST_CORES=4,5,6,7"));
  expect_child("trn2 lnc=1 visible", "config",
               ENV("NEURON_LOGICAL_NC_CONFIG=1", "NEURON_RT_VISIBLE_CORES=5,7",
                   "NRT_TEST_LNC=1", "NRT_TEST_PER_CHIP=8", "NRT_TEST_CORES=5,7"));
}

static void test_num_cores(void) {
  expect_child("num 2", "config",
               ENV("NEURON_RT_NUM_CORES=2", "NRT_TEST_LNC=2", "NRT_TEST_PER_CHIP=4",
                   "NRT_TEST_CORES=0,1"));
  expect_child("num 1", "config",
               ENV("NEURON_RT_NUM_CORES=1", "NRT_TEST_LNC=2", "NRT_TEST_PER_CHIP=4",
                   "NRT_TEST_CORES=0"));
  expect_child("num 1 of visible 1,3", "config",
               ENV("NEURON_RT_VISIBLE_CORES=1,3", "NEURON_RT_NUM_CORES=1", "NRT_TEST_LNC=2",
                   "NRT_TEST_PER_CHIP=4", "NRT_TEST_CORES=1"));
  expect_child("num 2 of visible 1,3", "config",
               ENV("NEURON_RT_VISIBLE_CORES=1,3", "NEURON_RT_NUM_CORES=2", "NRT_TEST_LNC=2",
                   "NRT_TEST_PER_CHIP=4", "NRT_TEST_CORES=1,3"));
}

static void test_hbm_bytes(void) {
  expect_child("1G", "config",
               ENV("NEURON_RT_HBM_BYTES=1G", "NRT_TEST_HBM=1073741824", "NRT_TEST_LNC=2",
                   "NRT_TEST_PER_CHIP=4", "NRT_TEST_CORES=0,1,2,3"));
  expect_child("512M", "config",
               ENV("NEURON_RT_HBM_BYTES=512M", "NRT_TEST_HBM=536870912", "NRT_TEST_LNC=2",
                   "NRT_TEST_PER_CHIP=4", "NRT_TEST_CORES=0,1,2,3"));
  expect_child("64k", "config",
               ENV("NEURON_RT_HBM_BYTES=64k", "NRT_TEST_HBM=65536", "NRT_TEST_LNC=2",
                   "NRT_TEST_PER_CHIP=4", "NRT_TEST_CORES=0,1,2,3"));
  expect_child("plain bytes", "config",
               ENV("NEURON_RT_HBM_BYTES=100000000", "NRT_TEST_HBM=100000000", "NRT_TEST_LNC=2",
                   "NRT_TEST_PER_CHIP=4", "NRT_TEST_CORES=0,1,2,3"));
  expect_child("exactly the capacity", "config",
               ENV("NEURON_RT_HBM_BYTES=24G", "NRT_TEST_HBM=25769803776", "NRT_TEST_LNC=2",
                   "NRT_TEST_PER_CHIP=4", "NRT_TEST_CORES=0,1,2,3"));
  expect_child("trn1 2G", "config",
               ENV("NEURON_PLATFORM_TARGET_OVERRIDE=trn1", "NEURON_RT_HBM_BYTES=2G",
                   "NRT_TEST_HBM=2147483648", "NRT_TEST_LNC=1", "NRT_TEST_PER_CHIP=2",
                   "NRT_TEST_CORES=0,1"));
}

static void test_launch_blocking(void) {
  expect_child("blocking 1", "blocking", ENV("NEURON_LAUNCH_BLOCKING=1", "NRT_TEST_BLOCKING=1"));
  expect_child("blocking 0", "blocking", ENV("NEURON_LAUNCH_BLOCKING=0", "NRT_TEST_BLOCKING=0"));
  expect_child("blocking unset", "blocking", ENV("NRT_TEST_BLOCKING=0"));
}

static void bad(const char *var, const char *assignment, const char *extra) {
  char expect[128];
  snprintf(expect, sizeof expect, "NRT_TEST_VAR=%s", var);
  expect_child(assignment, "bad_config", ENV(assignment, expect, extra ? extra : "NRT_TEST_=1"));
}

static void test_malformed(void) {
  const char *T = "NEURON_PLATFORM_TARGET_OVERRIDE";
  bad(T, "NEURON_PLATFORM_TARGET_OVERRIDE=trn4", NULL);
  bad(T, "NEURON_PLATFORM_TARGET_OVERRIDE=inf2", NULL);

  const char *L = "NEURON_LOGICAL_NC_CONFIG";
  bad(L, "NEURON_LOGICAL_NC_CONFIG=3", NULL);
  bad(L, "NEURON_LOGICAL_NC_CONFIG=0", NULL);
  bad(L, "NEURON_LOGICAL_NC_CONFIG=x", NULL);
  bad(L, "NEURON_LOGICAL_NC_CONFIG=1x", NULL);
  bad(L, "NEURON_LOGICAL_NC_CONFIG=2", "NEURON_PLATFORM_TARGET_OVERRIDE=trn1");

  const char *V = "NEURON_RT_VISIBLE_CORES";
  bad(V, "NEURON_RT_VISIBLE_CORES=3-1", NULL);
  bad(V, "NEURON_RT_VISIBLE_CORES=0,,1", NULL);
  bad(V, "NEURON_RT_VISIBLE_CORES=a", NULL);
  bad(V, "NEURON_RT_VISIBLE_CORES=1a", NULL);
  bad(V, "NEURON_RT_VISIBLE_CORES=1,1", NULL);
  bad(V, "NEURON_RT_VISIBLE_CORES=0-2,1", NULL);
  bad(V, "NEURON_RT_VISIBLE_CORES=64", NULL);
  bad(V, "NEURON_RT_VISIBLE_CORES=0-64", NULL);
  bad(V, "NEURON_RT_VISIBLE_CORES=99999999999999999999", NULL);
  bad(V, "NEURON_RT_VISIBLE_CORES=-1", NULL);
  bad(V, "NEURON_RT_VISIBLE_CORES=1-", NULL);
  bad(V, "NEURON_RT_VISIBLE_CORES=0,", NULL);
  bad(V, "NEURON_RT_VISIBLE_CORES=,0", NULL);
  bad(V, "NEURON_RT_VISIBLE_CORES=1;2", NULL);
  bad(V, "NEURON_RT_VISIBLE_CORES= ", NULL);

  const char *N = "NEURON_RT_NUM_CORES";
  bad(N, "NEURON_RT_NUM_CORES=3", "NEURON_RT_VISIBLE_CORES=1,3");
  bad(N, "NEURON_RT_NUM_CORES=0", NULL);
  bad(N, "NEURON_RT_NUM_CORES=-2", NULL);
  bad(N, "NEURON_RT_NUM_CORES=abc", NULL);
  bad(N, "NEURON_RT_NUM_CORES=2x", NULL);
  bad(N, "NEURON_RT_NUM_CORES=65", NULL);

  const char *H = "NEURON_RT_HBM_BYTES";
  bad(H, "NEURON_RT_HBM_BYTES=25G", NULL);
  bad(H, "NEURON_RT_HBM_BYTES=24577M", NULL);
  bad(H, "NEURON_RT_HBM_BYTES=25769803777", NULL);
  bad(H, "NEURON_RT_HBM_BYTES=17G", "NEURON_PLATFORM_TARGET_OVERRIDE=trn1");
  bad(H, "NEURON_RT_HBM_BYTES=13G", "NEURON_LOGICAL_NC_CONFIG=1");
  bad(H, "NEURON_RT_HBM_BYTES=0", NULL);
  bad(H, "NEURON_RT_HBM_BYTES=0G", NULL);
  bad(H, "NEURON_RT_HBM_BYTES=junk", NULL);
  bad(H, "NEURON_RT_HBM_BYTES=1.5G", NULL);
  bad(H, "NEURON_RT_HBM_BYTES=1GB", NULL);
  bad(H, "NEURON_RT_HBM_BYTES=-1", NULL);
  bad(H, "NEURON_RT_HBM_BYTES= -1", NULL);
  bad(H, "NEURON_RT_HBM_BYTES=G", NULL);
  bad(H, "NEURON_RT_HBM_BYTES=99999999999999999999", NULL);

  const char *B = "NEURON_LAUNCH_BLOCKING";
  bad(B, "NEURON_LAUNCH_BLOCKING=2", NULL);
  bad(B, "NEURON_LAUNCH_BLOCKING=yes", NULL);
  bad(B, "NEURON_LAUNCH_BLOCKING=true", NULL);

  const char *K = "TORCHNEURON_NUM_THREADS";
  bad(K, "TORCHNEURON_NUM_THREADS=0", NULL);
  bad(K, "TORCHNEURON_NUM_THREADS=257", NULL);
  bad(K, "TORCHNEURON_NUM_THREADS=two", NULL);

  const char *P = "TORCHNEURON_PIN_THREADS";
  bad(P, "TORCHNEURON_PIN_THREADS=2", NULL);
  bad(P, "TORCHNEURON_PIN_THREADS=yes", NULL);
}

static void test_fork(void) {
  expect_child("fork after init", "fork", NULL);
  expect_child("fork before init", "fork_before_init", NULL);
  expect_child("fork after device queries", "fork_after_queries", NULL);
  expect_child("fork after nrt_malloc", "fork_after_malloc", NULL);
}

int main(int argc, char **argv) {
  if (child_is_case(argc, argv)) return run_case(argv[2]);
  RUN(test_default_configuration);
  RUN(test_targets);
  RUN(test_visible_cores);
  RUN(test_num_cores);
  RUN(test_hbm_bytes);
  RUN(test_launch_blocking);
  RUN(test_malformed);
  RUN(test_fork);
  return CHECK_MAIN_RESULT();
}
