/* Device memory (arenas, nrt_malloc/nrt_free, the host alias) and pinned
 * host memory (the registry, deferred frees).
 *
 * main sets NEURON_RT_HBM_BYTES to 64 MiB before the first runtime call, so
 * running out of device memory is cheap. The fault check runs in a fresh
 * process (child.h), since this one must not fork after initialising.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <unistd.h>
#include "check.h"
#include "gate.h"
#include "child.h"
#include "internal.h"

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)
#define CAPACITY (64 * MIB)

/* Child case: dereferencing a device pointer on the host must fault. The
 * default SIGSEGV action is restored so that a sanitizer's handler does not
 * turn the signal into an exit code. */
static int child_dereference_device_pointer(void) {
  void *p;
  if (nrt_malloc(0, 4096, &p) != NRT_SUCCESS || !nrt_device_to_host(p)) return 2;
  signal(SIGSEGV, SIG_DFL);
  signal(SIGBUS, SIG_DFL);
  volatile char *q = p;
  q[0] = 1;
  return 0;
}

static void test_host_dereference_of_device_pointer_faults(void) {
  int code = child_run("dereference_device_pointer", NULL);
  CHECK(code == 128 + SIGSEGV || code == 128 + SIGBUS);
}

/* Child case, default capacities: when the devices together could hold more
 * than the host can back, filling them must stop at what the host has
 * available (not at its total RAM), with a message saying so, and the
 * caching allocator must pass that reason on. Nothing is touched, so
 * nothing is committed. Returns 0 on success. */
/* One fill of every device until the host's backing limit stops it: 0, or
 * the code of the check that failed. Frees what it took either way. */
static int fill_host_once(int32_t count, size_t ram) {
  enum { MAX_CHUNKS = 1 << 16 };
  static void *chunks[MAX_CHUNKS];
  size_t n = 0, allocated = 0;
  uint64_t available = rt_host_available();
  int code = 0;
  for (size_t chunk = (size_t)1 << 30; chunk >= MIB && !code; chunk >>= 10) {
    int host_limited = 0;
    for (int32_t d = 0; d < count && !host_limited; d++) {
      while (n < MAX_CHUNKS && nrt_malloc(d, chunk, &chunks[n]) == NRT_SUCCESS) {
        allocated += chunk;
        n++;
      }
      host_limited = strstr(nrt_last_error(), "backed by host memory") != NULL;
    }
    if (!host_limited) code = 3;
  }
  /* Stopped short of what was available (a margin stays for the heap), and
   * not far short: other processes may take or give memory meanwhile. */
  if (!code && (allocated > available || allocated > ram || allocated < available / 2)) code = 4;
  int cause_passed_on = 0;
  for (int32_t d = 0; d < count && !code; d++) {
    size_t free_b, total_b;
    nrt_stream_t s;
    void *p;
    if (nrt_mem_get_info(d, &free_b, &total_b) || free_b < 20 * MIB) continue;
    if (nrt_stream_get_default(d, &s)) {
      code = 5;
      break;
    }
    /* Memory another process gave back since the fill lets the request
     * succeed: take that memory too (1 MiB chunks until the host limit
     * stops them again) and ask again. */
    nrt_status got = NRT_SUCCESS;
    for (int retry = 0; retry < 64 && (got = nrt_cache_alloc(s, 3 * MIB, &p)) == NRT_SUCCESS; retry++) {
      nrt_cache_free(p);
      nrt_stream_synchronize(s);
      nrt_cache_empty(d); /* or the next request reuses the cached block */
      while (n < MAX_CHUNKS && nrt_malloc(d, MIB, &chunks[n]) == NRT_SUCCESS) {
        allocated += MIB;
        n++;
      }
    }
    if (got != NRT_ERROR_OUT_OF_MEMORY) {
      code = 5;
      break;
    }
    cause_passed_on = strstr(nrt_last_error(), "out of memory: tried to allocate 3.00 MiB") &&
                      strstr(nrt_last_error(), "backed by host memory");
    break;
  }
  if (!code && !cause_passed_on) code = 7;
  for (size_t i = 0; i < n; i++)
    if (nrt_free(chunks[i]) && !code) code = 6;
  if (code)
    fprintf(stderr, "host fill: check %d failed (%zu MiB allocated, %llu MiB available at the start)\n",
            code, allocated / MIB, (unsigned long long)(available / MIB));
  return code;
}

static int child_host_ram_limits_all_devices(void) {
  /* Two of these at once (the fault sweep runs tests in parallel) would
   * each see the other's allocations and stop far short of what was
   * available: they take turns. Released when the process ends. */
  int lock = open("/tmp/neuronrt-test-fills-host-memory.lock", O_CREAT | O_RDWR | O_CLOEXEC, 0666);
  if (lock < 0 || flock(lock, LOCK_EX) != 0) return 8;
  int32_t count;
  if (nrt_device_count(&count)) return 2;
  size_t ram = (size_t)sysconf(_SC_PHYS_PAGES) * (size_t)sysconf(_SC_PAGESIZE), total = 0;
  for (int32_t d = 0; d < count; d++) total += rt_memory_capacity(d);
  if (total <= rt_host_available()) {
    fprintf(stderr, "skipped: the devices' capacity fits in what the host has available\n");
    return 0;
  }
  /* Other processes (the sweep's other test under ASan) take and give back
   * memory while we fill: a bound missed because of them is tried again. */
  int code = 0;
  for (int attempt = 0; attempt < 3; attempt++)
    if ((code = fill_host_once(count, ram)) != 4 && code != 5 && code != 7) break;
  return code;
}

static void test_host_ram_limits_all_devices(void) {
  CHECK(child_run("host_ram_limits_all_devices", NULL) == 0);
}

static size_t free_bytes(int32_t device) {
  size_t free_b = 0, total = 0;
  CHECK_OK(nrt_mem_get_info(device, &free_b, &total));
  CHECK(total == CAPACITY);
  return free_b;
}

static void test_capacity_is_enforced_with_a_clear_message(void) {
  CHECK(free_bytes(0) == CAPACITY);
  CHECK(rt_memory_capacity(0) == CAPACITY);
  void *a, *b, *refused = (void *)1;
  CHECK_OK(nrt_malloc(0, 60 * MIB, &a));
  CHECK(free_bytes(0) == 4 * MIB);
  CHECK_STATUS(nrt_malloc(0, 8 * MIB, &refused), NRT_ERROR_OUT_OF_MEMORY);
  CHECK(refused == NULL);
  CHECK(strcmp(nrt_last_error(),
               "device 0: cannot allocate 8.00 MiB: 60.00 MiB of 64.00 MiB in use") == 0);
  CHECK_STATUS(nrt_malloc(0, SIZE_MAX, &refused), NRT_ERROR_OUT_OF_MEMORY);
  CHECK_OK(nrt_malloc(0, 4 * MIB, &b));
  CHECK(free_bytes(0) == 0);
  CHECK_STATUS(nrt_malloc(0, 1, &refused), NRT_ERROR_OUT_OF_MEMORY);
  CHECK_OK(nrt_free(a));
  CHECK_OK(nrt_free(b));
  CHECK(free_bytes(0) == CAPACITY);
  CHECK_OK(nrt_malloc(0, CAPACITY, &a));
  CHECK_OK(nrt_free(a));
}

static void test_capacity_is_per_device(void) {
  int32_t count;
  CHECK_OK(nrt_device_count(&count));
  CHECK(count >= 2);
  void *a, *b;
  CHECK_OK(nrt_malloc(0, CAPACITY, &a));
  CHECK_OK(nrt_malloc(1, CAPACITY, &b));
  CHECK(free_bytes(0) == 0 && free_bytes(1) == 0);
  CHECK_OK(nrt_free(a));
  CHECK_OK(nrt_free(b));
}

static void test_free_ranges_coalesce(void) {
  void *p[16], *big;
  for (int i = 0; i < 16; i++) CHECK_OK(nrt_malloc(0, 4 * MIB, &p[i]));
  for (int i = 0; i < 16; i += 2) CHECK_OK(nrt_free(p[i]));
  CHECK(free_bytes(0) == 32 * MIB);
  CHECK_STATUS(nrt_malloc(0, 8 * MIB, &big), NRT_ERROR_OUT_OF_MEMORY);
  CHECK(strstr(nrt_last_error(), "contiguous"));
  CHECK_OK(nrt_malloc(0, 4 * MIB, &big));
  CHECK(big == p[0]);
  CHECK_OK(nrt_free(big));
  for (int i = 1; i < 16; i += 2) CHECK_OK(nrt_free(p[i]));
  CHECK_OK(nrt_malloc(0, CAPACITY, &big));
  CHECK(big == p[0]);
  CHECK_OK(nrt_free(big));
}

static void test_allocations_are_aligned_disjoint_and_reused(void) {
  const size_t sizes[] = {1, 100, 4095, 4096, 4097, MIB + 1, 3 * KIB};
  enum { N = sizeof sizes / sizeof *sizes };
  void *p[N];
  for (int i = 0; i < N; i++) {
    CHECK_OK(nrt_malloc(0, sizes[i], &p[i]));
    CHECK(((uintptr_t)p[i] & 4095) == 0);
  }
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++)
      if (i != j)
        CHECK((uintptr_t)p[i] + sizes[i] <= (uintptr_t)p[j] ||
              (uintptr_t)p[j] + sizes[j] <= (uintptr_t)p[i]);
  void *again;
  CHECK_OK(nrt_free(p[3]));
  CHECK_OK(nrt_malloc(0, 4096, &again));
  CHECK(again == p[3]);
  p[3] = again;
  for (int i = 0; i < N; i++) CHECK_OK(nrt_free(p[i]));
  CHECK(free_bytes(0) == CAPACITY);
}

static void test_zero_bytes_and_null(void) {
  void *p = (void *)1;
  CHECK_OK(nrt_malloc(0, 0, &p));
  CHECK(p == NULL);
  CHECK_OK(nrt_free(NULL));
}

static void test_bad_frees_are_rejected_without_damage(void) {
  int local;
  void *p;
  CHECK_OK(nrt_malloc(0, 8 * KIB, &p));
  CHECK_STATUS(nrt_free(&local), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(nrt_last_error(), "not a device address"));
  CHECK_STATUS(nrt_free((char *)p + 4096), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(nrt_last_error(), "not the start of a live allocation"));
  CHECK_STATUS(nrt_free(nrt_device_to_host(p)), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(free_bytes(0) == CAPACITY - 8 * KIB);
  CHECK_OK(nrt_free(p));
  CHECK_STATUS(nrt_free(p), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(nrt_last_error(), "already freed"));
  CHECK(free_bytes(0) == CAPACITY);
}

static void test_invalid_arguments(void) {
  void *p;
  size_t f, t;
  CHECK_STATUS(nrt_malloc(-1, 16, &p), NRT_ERROR_INVALID_DEVICE);
  CHECK_STATUS(nrt_malloc(NRT_MAX_DEVICES, 16, &p), NRT_ERROR_INVALID_DEVICE);
  CHECK_STATUS(nrt_malloc(0, 16, NULL), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_mem_get_info(99, &f, &t), NRT_ERROR_INVALID_DEVICE);
  CHECK_STATUS(nrt_mem_get_info(0, NULL, &t), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_pointer_get_device(&f, NULL), NRT_ERROR_INVALID_ARGUMENT);
}

static void test_pointer_device_and_host_alias_round_trip(void) {
  int32_t count;
  CHECK_OK(nrt_device_count(&count));
  for (int32_t d = 0; d < count; d++) {
    void *p;
    int32_t owner = -1;
    CHECK_OK(nrt_malloc(d, 3 * 4096, &p));
    CHECK_OK(nrt_pointer_get_device(p, &owner));
    CHECK(owner == d);
    CHECK_OK(nrt_pointer_get_device((char *)p + 3 * 4096 - 1, &owner));
    CHECK(owner == d);
    unsigned char *h = nrt_device_to_host(p);
    CHECK(h != NULL && (void *)h != p);
    CHECK(nrt_device_to_host((char *)p + 5000) == h + 5000);
    for (int i = 0; i < 3 * 4096; i++) h[i] = (unsigned char)(i * 7 + d);
    const unsigned char *again = nrt_device_to_host(p);
    int same = 1;
    for (int i = 0; i < 3 * 4096; i++) same &= again[i] == (unsigned char)(i * 7 + d);
    CHECK(same);
    CHECK_STATUS(nrt_pointer_get_device(h, &owner), NRT_ERROR_INVALID_ARGUMENT);
    CHECK_OK(nrt_free(p));
  }
  int local;
  int32_t owner;
  CHECK(nrt_device_to_host(&local) == NULL);
  CHECK(nrt_device_to_host(NULL) == NULL);
  CHECK_STATUS(nrt_pointer_get_device(&local, &owner), NRT_ERROR_INVALID_ARGUMENT);
}

/* Number of resident pages among the first n bytes at p. */
static size_t resident_pages(void *p, size_t n) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE), pages = n / page, resident = 0;
  unsigned char *vec = malloc(pages);
  CHECK(vec && mincore(p, n, vec) == 0);
  for (size_t i = 0; vec && i < pages; i++) resident += vec[i] & 1;
  free(vec);
  return resident;
}

static void test_freeing_returns_host_pages(void) {
  void *p;
  CHECK_OK(nrt_malloc(0, 8 * MIB, &p));
  char *h = nrt_device_to_host(p);
  memset(h, 1, 8 * MIB);
  CHECK(resident_pages(h, 8 * MIB) > 0);
  CHECK_OK(nrt_free(p));
  CHECK(resident_pages(h, 8 * MIB) == 0);
}

typedef struct worker_arg {
  int32_t device;
  int id;
  int failures;
} worker_arg;

/* Counts a failed call of a worker, saying why (CHECK is not thread-safe). */
static void worker_failed(worker_arg *w, const char *call, nrt_status s) {
  fprintf(stderr, "worker %d: %s returned %s (%s)\n", w->id, call, nrt_status_string(s),
          nrt_last_error());
  w->failures++;
}

/* Allocates, stamps, checks and frees many extents from one device. */
static void *malloc_worker(void *arg) {
  worker_arg *w = arg;
  unsigned seed = (unsigned)w->id * 2654435761u;
  enum { LIVE = 8 };
  void *live[LIVE] = {0};
  size_t sizes[LIVE] = {0};
  for (int iter = 0; iter < 3000; iter++) {
    int slot = (int)(rand_r(&seed) % LIVE);
    if (live[slot]) {
      const unsigned char *h = nrt_device_to_host(live[slot]);
      if (h[0] != (unsigned char)w->id || h[sizes[slot] - 1] != (unsigned char)w->id) w->failures++;
      nrt_status s = nrt_free(live[slot]);
      if (s != NRT_SUCCESS) worker_failed(w, "nrt_free", s);
      live[slot] = NULL;
    } else {
      sizes[slot] = 1 + rand_r(&seed) % (512 * KIB);
      nrt_status s = nrt_malloc(w->device, sizes[slot], &live[slot]);
      if (s != NRT_SUCCESS) {
        worker_failed(w, "nrt_malloc", s);
        continue;
      }
      unsigned char *h = nrt_device_to_host(live[slot]);
      h[0] = h[sizes[slot] - 1] = (unsigned char)w->id;
    }
  }
  for (int i = 0; i < LIVE; i++) {
    nrt_status s = live[i] ? nrt_free(live[i]) : NRT_SUCCESS;
    if (s != NRT_SUCCESS) worker_failed(w, "nrt_free", s);
  }
  return NULL;
}

static void test_concurrent_malloc_and_free(void) {
  enum { THREADS = 4 };
  pthread_t t[THREADS];
  worker_arg args[THREADS];
  for (int i = 0; i < THREADS; i++) {
    args[i] = (worker_arg){.device = 1, .id = i + 1};
    CHECK(pthread_create(&t[i], NULL, malloc_worker, &args[i]) == 0);
  }
  for (int i = 0; i < THREADS; i++) {
    pthread_join(t[i], NULL);
    CHECK(args[i].failures == 0);
  }
  CHECK(free_bytes(1) == CAPACITY);
}

/* ---- pinned host memory ----------------------------------------------- */

/* Whether [p, p + n) is mapped in this process. */
static int is_mapped(void *p, size_t n) { return msync(p, n, MS_ASYNC) == 0 || errno != ENOMEM; }

static void test_pinned_registry_answers_for_interior_pointers(void) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  void *p[3];
  const size_t sizes[3] = {10000, 1, 3 * MIB};
  for (int i = 0; i < 3; i++) {
    CHECK_OK(nrt_host_alloc(sizes[i], &p[i]));
    CHECK(((uintptr_t)p[i] & (page - 1)) == 0);
    memset(p[i], i, sizes[i]);
  }
  for (int i = 0; i < 3; i++) {
    void *base = NULL;
    size_t size = 0;
    CHECK(nrt_host_is_pinned(p[i], &base, &size));
    CHECK(base == p[i] && size == sizes[i]);
    base = NULL;
    CHECK(nrt_host_is_pinned((char *)p[i] + sizes[i] - 1, &base, NULL));
    CHECK(base == p[i]);
    if (sizes[i] % page) /* the rest of the last page is not part of it */
      CHECK(!nrt_host_is_pinned((char *)p[i] + sizes[i], NULL, NULL));
  }
  int local;
  CHECK(!nrt_host_is_pinned(&local, NULL, NULL));
  CHECK(!nrt_host_is_pinned(NULL, NULL, NULL));
  CHECK_OK(nrt_host_free(p[1]));
  CHECK(!nrt_host_is_pinned(p[1], NULL, NULL));
  CHECK(nrt_host_is_pinned(p[0], NULL, NULL) && nrt_host_is_pinned(p[2], NULL, NULL));
  CHECK_OK(nrt_host_free(p[0]));
  CHECK_OK(nrt_host_free(p[2]));
  CHECK(!is_mapped(p[2], 3 * MIB));
}

static void test_pinned_free_rejects_bad_pointers(void) {
  void *p = (void *)1;
  CHECK_OK(nrt_host_alloc(0, &p));
  CHECK(p == NULL);
  CHECK_OK(nrt_host_free(NULL));
  CHECK_STATUS(nrt_host_alloc(16, NULL), NRT_ERROR_INVALID_ARGUMENT);
  int local;
  CHECK_STATUS(nrt_host_free(&local), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_OK(nrt_host_alloc(4096, &p));
  CHECK_STATUS(nrt_host_free((char *)p + 8), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(nrt_host_is_pinned(p, NULL, NULL));
  CHECK_OK(nrt_host_free(p));
  CHECK_STATUS(nrt_host_free(p), NRT_ERROR_INVALID_ARGUMENT);
}

static void test_pinned_free_is_deferred_while_held(void) {
  char *p;
  CHECK_OK(nrt_host_alloc(64 * KIB, (void **)&p));
  int local;
  CHECK(!rt_host_pin_acquire(&local));
  CHECK(rt_host_pin_acquire(p + 100));
  CHECK(rt_host_pin_acquire(p + 200));
  CHECK_OK(nrt_host_free(p));
  CHECK(!nrt_host_is_pinned(p, NULL, NULL));
  CHECK(!rt_host_pin_acquire(p));
  CHECK_STATUS(nrt_host_free(p), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(is_mapped(p, 64 * KIB));
  p[0] = 42; /* still mapped: a held buffer stays valid */
  rt_host_pin_release(p + 100);
  CHECK(is_mapped(p, 64 * KIB));
  rt_host_pin_release(p + 200);
  CHECK(!is_mapped(p, 64 * KIB));
}

static void test_queued_copy_keeps_freed_pinned_buffer(void) {
  gate g;
  gate_init(&g);
  nrt_stream_t s;
  CHECK_OK(nrt_stream_get_pooled(0, NRT_STREAM_PRIORITY_NORMAL, &s));
  unsigned char *src;
  void *dst;
  CHECK_OK(nrt_host_alloc(256 * KIB, (void **)&src));
  CHECK_OK(nrt_malloc(0, 256 * KIB, &dst));
  for (size_t i = 0; i < 256 * KIB; i++) src[i] = (unsigned char)(i % 251);
  CHECK_OK(nrt_launch_host_func(s, gate_wait, &g));
  CHECK_OK(nrt_memcpy_async(s, dst, src, 256 * KIB));
  CHECK_OK(nrt_host_free(src));
  CHECK(is_mapped(src, 256 * KIB));
  gate_open(&g);
  CHECK_OK(nrt_stream_synchronize(s));
  const unsigned char *h = nrt_device_to_host(dst);
  int same = 1;
  for (size_t i = 0; i < 256 * KIB; i++) same &= h[i] == (unsigned char)(i % 251);
  CHECK(same);
  CHECK(!is_mapped(src, 256 * KIB));
  CHECK_OK(nrt_free(dst));
}

int main(int argc, char **argv) {
  if (child_is_case(argc, argv)) {
    const char *name = argv[2];
    if (strcmp(name, "dereference_device_pointer") == 0) return child_dereference_device_pointer();
    if (strcmp(name, "host_ram_limits_all_devices") == 0) return child_host_ram_limits_all_devices();
    return 99;
  }
  setenv("NEURON_RT_HBM_BYTES", "64M", 1);
  RUN(test_host_dereference_of_device_pointer_faults);
  RUN(test_host_ram_limits_all_devices);
  RUN(test_capacity_is_enforced_with_a_clear_message);
  RUN(test_capacity_is_per_device);
  RUN(test_free_ranges_coalesce);
  RUN(test_allocations_are_aligned_disjoint_and_reused);
  RUN(test_zero_bytes_and_null);
  RUN(test_bad_frees_are_rejected_without_damage);
  RUN(test_invalid_arguments);
  RUN(test_pointer_device_and_host_alias_round_trip);
  RUN(test_freeing_returns_host_pages);
  RUN(test_concurrent_malloc_and_free);
  RUN(test_pinned_registry_answers_for_interior_pointers);
  RUN(test_pinned_free_rejects_bad_pointers);
  RUN(test_pinned_free_is_deferred_while_held);
  RUN(test_queued_copy_keeps_freed_pinned_buffer);
  return CHECK_MAIN_RESULT();
}
