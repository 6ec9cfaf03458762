/* Device discovery and configuration.
 *
 * The simulated machine is configured once, from the environment, the first
 * time any runtime function runs. Generation facts (memory, on-chip
 * geometry, clocks, DMA bandwidth) come from the table below; the visible
 * logical cores come from NEURON_RT_VISIBLE_CORES / NEURON_RT_NUM_CORES.
 * A malformed variable is remembered as the configuration error and returned
 * by every later call, so a typo never silently becomes a default.
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cpu_isa.h"
#include "internal.h"
#include "kernel_threads.h"

#define GIB (1024ull * 1024ull * 1024ull)
#define KIB 1024u

typedef struct generation {
  const char *name;            /* NEURON_PLATFORM_TARGET_OVERRIDE value */
  const char *core_name;
  nrt_target target;
  int32_t physical_cores_per_chip;
  int32_t default_lnc;
  int32_t max_lnc;
  uint64_t hbm_bytes_per_chip;
  uint64_t hbm_bytes_per_s_per_chip;
  uint32_t sbuf_partition_bytes;
  uint64_t tensor_hz, vector_hz, scalar_hz, gpsimd_hz;
  uint64_t dma_bytes_per_s;
  uint64_t link_bytes_per_s_per_chip; /* NeuronLink, chip to chip */
  uint64_t efa_bytes_per_s_per_chip;  /* the instance's EFA over its 16 chips */
} generation;

/* Published figures (AWS Neuron documentation, instance pages). EFA:
 * trn1.32xlarge 800 Gbps, trn2.48xlarge 3.2 Tbps, each over 16 chips; the
 * Trn3 pages give no EFA figure, so trn3 assumes trn2's. */
static const generation generations[] = {
    {.name = "trn1", .core_name = "NeuronCore-v2", .target = NRT_TARGET_TRN1,
     .physical_cores_per_chip = 2, .default_lnc = 1, .max_lnc = 1,
     .hbm_bytes_per_chip = 32 * GIB, .hbm_bytes_per_s_per_chip = 820000000000ull,
     .sbuf_partition_bytes = 192 * KIB,
     .tensor_hz = 1400000000ull, .vector_hz = 1400000000ull,
     .scalar_hz = 1400000000ull, .gpsimd_hz = 1400000000ull,
     .dma_bytes_per_s = 272000000000ull,
     .link_bytes_per_s_per_chip = 384000000000ull, .efa_bytes_per_s_per_chip = 6250000000ull},
    {.name = "trn2", .core_name = "NeuronCore-v3", .target = NRT_TARGET_TRN2,
     .physical_cores_per_chip = 8, .default_lnc = 2, .max_lnc = 2,
     .hbm_bytes_per_chip = 96 * GIB, .hbm_bytes_per_s_per_chip = 2900000000000ull,
     .sbuf_partition_bytes = 224 * KIB,
     .tensor_hz = 2400000000ull, .vector_hz = 960000000ull,
     .scalar_hz = 1200000000ull, .gpsimd_hz = 1200000000ull,
     .dma_bytes_per_s = 368000000000ull,
     .link_bytes_per_s_per_chip = 1280000000000ull, .efa_bytes_per_s_per_chip = 25000000000ull},
    {.name = "trn3", .core_name = "NeuronCore-v4", .target = NRT_TARGET_TRN3,
     .physical_cores_per_chip = 8, .default_lnc = 2, .max_lnc = 2,
     .hbm_bytes_per_chip = 144 * GIB, .hbm_bytes_per_s_per_chip = 4800000000000ull,
     .sbuf_partition_bytes = 256 * KIB,
     .tensor_hz = 2400000000ull, .vector_hz = 960000000ull,
     .scalar_hz = 1200000000ull, .gpsimd_hz = 1200000000ull,
     .dma_bytes_per_s = 528000000000ull,
     .link_bytes_per_s_per_chip = 2560000000000ull, .efa_bytes_per_s_per_chip = 25000000000ull},
};

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static nrt_status config_status;
static char config_error[512];
static atomic_int started; /* threads or memory exist: forking is no longer safe */
static volatile int forked_child;
static int launch_blocking;
static int kernel_threads;
static int core_offset; /* the first of this process's cores its kernel threads keep to */
static int pin_kernel_threads = 1;
static int top_enabled = 1;
static int32_t device_count;
static nrt_device_properties device_props[NRT_MAX_DEVICES];
static _Thread_local int32_t current_device;

static nrt_status config_fail(const char *fmt, ...) RT_PRINTF(1, 2);
static nrt_status config_fail(const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  vsnprintf(config_error, sizeof config_error, fmt, args);
  va_end(args);
  return NRT_ERROR_INVALID_CONFIG;
}

/* Parses a whole decimal number in [lo, hi]; rejects junk and overflow. */
static int parse_int(const char *text, long long lo, long long hi, long long *out) {
  char *end;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (errno || end == text || v < lo || v > hi) return 0;
  while (isspace((unsigned char)*end)) end++;
  if (*end) return 0;
  *out = v;
  return 1;
}

static nrt_status parse_target(const generation **gen) {
  const char *text = getenv("NEURON_PLATFORM_TARGET_OVERRIDE");
  *gen = &generations[1];
  if (!text || !*text) return NRT_SUCCESS;
  for (size_t i = 0; i < sizeof generations / sizeof generations[0]; i++) {
    if (strcmp(text, generations[i].name) == 0) {
      *gen = &generations[i];
      return NRT_SUCCESS;
    }
  }
  return config_fail("NEURON_PLATFORM_TARGET_OVERRIDE='%s' is not a known target "
                     "(expected trn1, trn2 or trn3)", text);
}

static nrt_status parse_lnc(const generation *gen, int32_t *lnc) {
  const char *text = getenv("NEURON_LOGICAL_NC_CONFIG");
  long long v;
  *lnc = gen->default_lnc;
  if (!text || !*text) return NRT_SUCCESS;
  if (!parse_int(text, 1, 2, &v))
    return config_fail("NEURON_LOGICAL_NC_CONFIG='%s' must be 1 or 2", text);
  if (v > gen->max_lnc)
    return config_fail("NEURON_LOGICAL_NC_CONFIG=%lld is not supported on %s "
                       "(at most %d)", v, gen->name, gen->max_lnc);
  *lnc = (int32_t)v;
  return NRT_SUCCESS;
}

/* Parses "0-3", "1,3", "0,2-3" into ascending distinct core indices. */
static nrt_status parse_visible_cores(const char *text, int32_t *cores, int32_t *count) {
  const char *p = text;
  int32_t n = 0;
  int seen[NRT_MAX_DEVICES] = {0};
  while (*p) {
    char *end;
    while (isspace((unsigned char)*p)) p++;
    if (!isdigit((unsigned char)*p)) goto bad;
    long first = strtol(p, &end, 10), last = first;
    p = end;
    while (isspace((unsigned char)*p)) p++;
    if (*p == '-') {
      p++;
      while (isspace((unsigned char)*p)) p++;
      if (!isdigit((unsigned char)*p)) goto bad;
      last = strtol(p, &end, 10);
      p = end;
      while (isspace((unsigned char)*p)) p++;
    }
    if (first > last || last >= NRT_MAX_DEVICES)
      return config_fail("NEURON_RT_VISIBLE_CORES='%s': range %ld-%ld is empty or "
                         "beyond core %d", text, first, last, NRT_MAX_DEVICES - 1);
    for (long c = first; c <= last; c++) {
      if (seen[c])
        return config_fail("NEURON_RT_VISIBLE_CORES='%s' names core %ld twice", text, c);
      seen[c] = 1;
      cores[n++] = (int32_t)c;
    }
    if (*p == ',') {
      p++;
      if (!*p) goto bad;
    } else if (*p) {
      goto bad;
    }
  }
  if (n == 0) goto bad;
  *count = n;
  return NRT_SUCCESS;
bad:
  return config_fail("NEURON_RT_VISIBLE_CORES='%s' is malformed (expected e.g. "
                     "\"0-3\" or \"1,3\")", text);
}

static nrt_status parse_cores(const generation *gen, int32_t lnc, int32_t *cores,
                              int32_t *count) {
  const char *visible = getenv("NEURON_RT_VISIBLE_CORES");
  const char *num = getenv("NEURON_RT_NUM_CORES");
  int32_t n = gen->physical_cores_per_chip / lnc;
  for (int32_t i = 0; i < NRT_MAX_DEVICES; i++) cores[i] = i;
  if (visible && *visible) {
    nrt_status s = parse_visible_cores(visible, cores, &n);
    if (s) return s;
  }
  if (num && *num) {
    long long v;
    int32_t limit = (visible && *visible) ? n : NRT_MAX_DEVICES;
    if (!parse_int(num, 1, limit, &v))
      return config_fail("NEURON_RT_NUM_CORES='%s' must be a whole number from 1 to %d%s",
                         num, limit, (visible && *visible) ? " (the visible cores)" : "");
    n = (int32_t)v;
  }
  *count = n;
  return NRT_SUCCESS;
}

/* Parses NEURON_RT_HBM_BYTES: bytes, or with a K/M/G suffix (powers of 1024). */
static nrt_status parse_hbm_limit(uint64_t capacity, uint64_t *limit) {
  const char *text = getenv("NEURON_RT_HBM_BYTES");
  *limit = capacity;
  if (!text || !*text) return NRT_SUCCESS;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(text, &end, 10);
  uint64_t scale = 1;
  if (*end == 'K' || *end == 'k') scale = 1024ull, end++;
  else if (*end == 'M' || *end == 'm') scale = 1024ull * 1024ull, end++;
  else if (*end == 'G' || *end == 'g') scale = GIB, end++;
  if (errno || end == text || *end || text[0] == '-' || v == 0 || v > capacity / scale)
    return config_fail("NEURON_RT_HBM_BYTES='%s' must be a positive size (bytes, or "
                       "with K/M/G) no larger than the device's %llu bytes",
                       text, (unsigned long long)capacity);
  *limit = v * scale;
  return NRT_SUCCESS;
}

static nrt_status parse_launch_blocking(void) {
  const char *text = getenv("NEURON_LAUNCH_BLOCKING");
  if (!text || !*text || strcmp(text, "0") == 0) return NRT_SUCCESS;
  if (strcmp(text, "1") == 0) {
    launch_blocking = 1;
    return NRT_SUCCESS;
  }
  return config_fail("NEURON_LAUNCH_BLOCKING='%s' must be 0 or 1", text);
}

/* Ranks a launcher started on this host (torchrun's LOCAL_WORLD_SIZE) and
 * this one's index among them (LOCAL_RANK), when both are sane. */
static int local_ranks(int *local_rank) {
  const char *size = getenv("LOCAL_WORLD_SIZE"), *rank = getenv("LOCAL_RANK");
  long long n, r;
  if (!size || !rank || !parse_int(size, 1, 65536, &n) || !parse_int(rank, 0, n - 1, &r)) return 1;
  *local_rank = (int)r;
  return (int)n;
}

/* TORCHNEURON_NUM_THREADS: kernel threads per process. Default: the cores
 * this process may run on, divided among the ranks a launcher started on
 * this host, each rank keeping to its own slice of them: two ranks that
 * each used every core would crowd each other's kernels (torchrun's
 * OMP_NUM_THREADS=1 does the same for PyTorch on the CPU). */
static nrt_status parse_num_threads(void) {
  const char *text = getenv("TORCHNEURON_NUM_THREADS");
  long long v;
  cpu_set_t allowed;
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  kernel_threads = online > 0 ? (int)online : 1;
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0) kernel_threads = CPU_COUNT(&allowed);
  core_offset = 0;
  if (!text || !*text) {
    int local_rank = 0, ranks = local_ranks(&local_rank);
    if (ranks > 1) {
      int share = kernel_threads / ranks;
      if (share < 1) share = 1;
      if ((local_rank + 1) * share <= kernel_threads) core_offset = local_rank * share;
      kernel_threads = share;
    }
    return NRT_SUCCESS;
  }
  if (!parse_int(text, 1, 256, &v))
    return config_fail("TORCHNEURON_NUM_THREADS='%s' must be a whole number from 1 to 256", text);
  kernel_threads = (int)v;
  return NRT_SUCCESS;
}

/* TORCHNEURON_PIN_THREADS: 1 (default) or 0, whether kernel threads keep to
 * cores of their own. */
static nrt_status parse_pin_threads(void) {
  const char *text = getenv("TORCHNEURON_PIN_THREADS");
  if (!text || !*text) return NRT_SUCCESS;
  if (strcmp(text, "0") != 0 && strcmp(text, "1") != 0)
    return config_fail("TORCHNEURON_PIN_THREADS='%s' must be 0 or 1", text);
  pin_kernel_threads = text[0] == '1';
  return NRT_SUCCESS;
}

/* TORCHNEURON_TOP: 1 (default) or 0, whether the process publishes a
 * neuron-top page (top.c). */
static nrt_status parse_top(void) {
  const char *text = getenv("TORCHNEURON_TOP");
  if (!text || !*text) return NRT_SUCCESS;
  if (strcmp(text, "0") != 0 && strcmp(text, "1") != 0)
    return config_fail("TORCHNEURON_TOP='%s' must be 0 or 1", text);
  top_enabled = text[0] == '1';
  return NRT_SUCCESS;
}

int rt_top_enabled(void) { return top_enabled; }

static void mark_forked_child(void) {
  if (atomic_load(&started)) forked_child = 1;
}

void rt_mark_started(void) {
  atomic_store(&started, 1);
  rt_top_start(); /* a process using a device is shown by neuron-top */
}

static nrt_status configure(void) {
  const generation *gen;
  int32_t lnc, cores[NRT_MAX_DEVICES], count = 0;
  uint64_t hbm_limit;
  nrt_status s;
  if ((s = parse_target(&gen)) || (s = parse_lnc(gen, &lnc)) ||
      (s = parse_cores(gen, lnc, cores, &count)) || (s = parse_launch_blocking()) ||
      (s = parse_num_threads()) || (s = parse_pin_threads()) || (s = parse_top()))
    return s;
  const char *isa_error = rt_isa_config_error(); /* TORCHNEURON_ISA, read in cpu_isa.c */
  if (isa_error) return config_fail("%s", isa_error);
  const char *log_error = rt_log_config_error(); /* TORCHNEURON_LOG_LEVEL, read in log.c */
  if (log_error) return config_fail("%s", log_error);
  int32_t per_chip = gen->physical_cores_per_chip / lnc;
  if ((s = parse_hbm_limit(gen->hbm_bytes_per_chip / (uint64_t)per_chip, &hbm_limit)))
    return s;
  for (int32_t i = 0; i < count; i++) {
    nrt_device_properties *p = &device_props[i];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s (%s, simulated)", gen->core_name, gen->name);
    snprintf(p->target_name, sizeof p->target_name, "%s", gen->name);
    p->target = gen->target;
    p->logical_core = cores[i];
    p->logical_nc_config = lnc;
    p->hbm_bytes = hbm_limit;
    p->hbm_bytes_per_s = gen->hbm_bytes_per_s_per_chip / (uint64_t)per_chip;
    p->sbuf_partitions = 128;
    p->sbuf_partition_bytes = gen->sbuf_partition_bytes;
    p->psum_partitions = 128;
    p->psum_partition_bytes = 16 * KIB;
    p->psum_banks = 8;
    p->tensor_engine_hz = gen->tensor_hz;
    p->vector_engine_hz = gen->vector_hz;
    p->scalar_engine_hz = gen->scalar_hz;
    p->gpsimd_engine_hz = gen->gpsimd_hz;
    p->dma_bytes_per_s = gen->dma_bytes_per_s;
    p->link_bytes_per_s = gen->link_bytes_per_s_per_chip / (uint64_t)per_chip;
    p->efa_bytes_per_s = gen->efa_bytes_per_s_per_chip / (uint64_t)per_chip;
  }
  device_count = count;
  rt_log(NRT_LOG_INFO, "%d simulated %s device%s, %s of device memory each", count, gen->name,
         count == 1 ? "" : "s", rt_format_size(hbm_limit).s);
  return NRT_SUCCESS;
}

static void init_once_fn(void) {
  config_status = configure();
  pthread_atfork(NULL, NULL, mark_forked_child);
}

nrt_status rt_ensure_init(void) {
  pthread_once(&init_once, init_once_fn);
  if (forked_child)
    return rt_fail(NRT_ERROR_FORKED,
                   "the neuron runtime had started (streams or device memory) before "
                   "this process was forked; a forked child cannot use the neuron "
                   "device. Use the "
                   "'spawn' start method (multiprocessing.set_start_method('spawn'))");
  if (config_status) {
    rt_set_error(config_error);
    return config_status;
  }
  return NRT_SUCCESS;
}

nrt_status nrt_init(void) { return rt_ensure_init(); }

int nrt_in_bad_fork(void) { return forked_child; }

int nrt_launch_blocking(void) {
  return rt_ensure_init() == NRT_SUCCESS && launch_blocking;
}

int32_t rt_device_count(void) { return device_count; }

int rt_kernel_threads(void) { return kernel_threads > 0 ? kernel_threads : 1; }

int rt_pin_kernel_threads(void) { return pin_kernel_threads; }

int rt_kernel_core_offset(void) { return core_offset; }

const nrt_device_properties *rt_device_props(int32_t device) {
  return &device_props[device];
}

nrt_status rt_check_device(int32_t device) {
  if (device < 0 || device >= device_count)
    return rt_fail(NRT_ERROR_INVALID_DEVICE,
                   "invalid device index %d: %d neuron device%s visible", device,
                   device_count, device_count == 1 ? " is" : "s are");
  return NRT_SUCCESS;
}

nrt_status nrt_device_count(int32_t *count) {
  nrt_status s = rt_ensure_init();
  if (s) return s;
  if (!count) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_device_count: count is NULL");
  *count = device_count;
  return NRT_SUCCESS;
}

nrt_status nrt_device_get_properties(int32_t device, nrt_device_properties *out) {
  nrt_status s = rt_ensure_init();
  if (s || (s = rt_check_device(device))) return s;
  if (!out) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_device_get_properties: out is NULL");
  *out = device_props[device];
  return NRT_SUCCESS;
}

nrt_status nrt_device_get_current(int32_t *device) {
  nrt_status s = rt_ensure_init();
  if (s) return s;
  if (!device) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_device_get_current: device is NULL");
  *device = current_device;
  return NRT_SUCCESS;
}

nrt_status nrt_device_set_current(int32_t device) {
  nrt_status s = rt_ensure_init();
  if (s || (s = rt_check_device(device))) return s;
  current_device = device;
  return NRT_SUCCESS;
}
