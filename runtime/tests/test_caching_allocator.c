/* The caching allocator: reuse, stream ordering, record_stream, splitting
 * and merging, statistics, empty_cache, the out-of-memory path (flush and
 * retry, waiting for pending frees, the message) and threads.
 *
 * main sets NEURON_RT_HBM_BYTES to 64 MiB before the first runtime call, so
 * out-of-memory is cheap. Tests that count segments or bytes start from an
 * empty cache with zeroed statistics; each test frees what it allocates.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "check.h"
#include "view1d.h"
#include "gate.h"

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)
#define CAPACITY (64 * MIB)

static nrt_stream_t default_stream(int32_t device) {
  nrt_stream_t s = NULL;
  CHECK_OK(nrt_stream_get_default(device, &s));
  return s;
}

static nrt_stream_t other_stream(int32_t device) {
  nrt_stream_t s = NULL;
  CHECK_OK(nrt_stream_get_pooled(device, NRT_STREAM_PRIORITY_NORMAL, &s));
  CHECK(s != default_stream(device));
  return s;
}

static nrt_cache_stats stats_of(int32_t device) {
  nrt_cache_stats st;
  CHECK_OK(nrt_cache_get_stats(device, &st));
  return st;
}

static void clean_slate(int32_t device) {
  CHECK_OK(nrt_cache_empty(device));
  CHECK_OK(nrt_cache_reset_accumulated(device));
  CHECK_OK(nrt_cache_reset_peak(device));
  nrt_cache_stats st = stats_of(device);
  CHECK(st.reserved_bytes[NRT_POOL_ALL].current == 0);
}

static void *cache_alloc(nrt_stream_t s, size_t bytes) {
  void *p = NULL;
  CHECK_OK(nrt_cache_alloc(s, bytes, &p));
  CHECK(p != NULL);
  return p;
}

static size_t device_free_bytes(int32_t device) {
  size_t free_b = 0, total = 0;
  CHECK_OK(nrt_mem_get_info(device, &free_b, &total));
  return free_b;
}

static void *open_gate_later(void *arg) {
  struct timespec delay = {.tv_nsec = 200 * 1000 * 1000};
  nanosleep(&delay, NULL);
  gate_open(arg);
  return NULL;
}

/* ---- reuse and layout ------------------------------------------------- */

static void test_freed_block_is_reused_on_its_stream(void) {
  nrt_stream_t s = default_stream(0);
  char *a = cache_alloc(s, 1000), *b = cache_alloc(s, 1000), *c = cache_alloc(s, 1000);
  CHECK(((uintptr_t)a & 511) == 0);
  CHECK(b == a + 1024 && c == b + 1024);
  CHECK_OK(nrt_cache_free(b));
  char *again = cache_alloc(s, 1024);
  CHECK(again == b); /* best fit: b's 1 KiB beats the rest of the segment */
  unsigned char *h = nrt_device_to_host(again);
  memset(h, 0xab, 1024);
  CHECK_OK(nrt_cache_free(again));
  CHECK_OK(nrt_cache_free(a));
  CHECK_OK(nrt_cache_free(c));
  CHECK(cache_alloc(s, 1) == a);
  CHECK_OK(nrt_cache_free(a));
}

static void test_small_blocks_split_and_merge(void) {
  clean_slate(0);
  nrt_stream_t s = default_stream(0);
  char *a = cache_alloc(s, 512 * KIB), *b = cache_alloc(s, 512 * KIB), *c = cache_alloc(s, MIB);
  CHECK(b == a + 512 * KIB && c == b + 512 * KIB);
  nrt_cache_stats st = stats_of(0);
  CHECK(st.segment[NRT_POOL_SMALL].current == 1);
  CHECK(st.inactive_split[NRT_POOL_SMALL].current == 0); /* the segment is used up */
  CHECK_OK(nrt_cache_free(a));
  CHECK_OK(nrt_cache_free(b));
  st = stats_of(0);
  CHECK(st.inactive_split[NRT_POOL_SMALL].current == 1);
  CHECK(st.inactive_split_bytes[NRT_POOL_SMALL].current == (int64_t)MIB);
  char *d = cache_alloc(s, MIB);
  CHECK(d == a); /* a and b merged */
  CHECK_OK(nrt_cache_free(c));
  CHECK_OK(nrt_cache_free(d));
  st = stats_of(0);
  CHECK(st.inactive_split[NRT_POOL_ALL].current == 0);
  CHECK(st.segment[NRT_POOL_SMALL].current == 1);
  CHECK_OK(nrt_cache_empty(0));
  CHECK(stats_of(0).segment[NRT_POOL_ALL].current == 0);
}

static void test_large_blocks_split_only_when_the_rest_exceeds_1mib(void) {
  clean_slate(0);
  nrt_stream_t s = default_stream(0);
  char *x = cache_alloc(s, 5 * MIB);
  nrt_cache_stats st = stats_of(0);
  CHECK(st.reserved_bytes[NRT_POOL_LARGE].current == (int64_t)(20 * MIB));
  CHECK(st.inactive_split_bytes[NRT_POOL_LARGE].current == (int64_t)(15 * MIB));
  char *y = cache_alloc(s, 14 * MIB + 512 * KIB);
  CHECK(y == x + 5 * MIB);
  st = stats_of(0);
  CHECK(st.allocated_bytes[NRT_POOL_LARGE].current == (int64_t)(20 * MIB));
  CHECK(st.inactive_split[NRT_POOL_LARGE].current == 0);
  CHECK_OK(nrt_cache_free(x));
  CHECK_OK(nrt_cache_free(y));
  CHECK_OK(nrt_cache_empty(0));
  char *z = cache_alloc(s, 19 * MIB + 512 * KIB); /* a 20 MiB segment, not split */
  st = stats_of(0);
  CHECK(st.reserved_bytes[NRT_POOL_LARGE].current == (int64_t)(20 * MIB));
  CHECK(st.allocated_bytes[NRT_POOL_LARGE].current == (int64_t)(20 * MIB));
  CHECK(st.requested_bytes[NRT_POOL_LARGE].current == (int64_t)(19 * MIB + 512 * KIB));
  CHECK_OK(nrt_cache_free(z));
  CHECK_OK(nrt_cache_empty(0));
}

static void test_streams_do_not_share_cached_blocks(void) {
  clean_slate(0);
  nrt_stream_t a = default_stream(0), b = other_stream(0);
  void *p = cache_alloc(a, 4096);
  CHECK_OK(nrt_cache_free(p));
  void *q = cache_alloc(b, 4096);
  CHECK(q != p);
  CHECK(stats_of(0).segment[NRT_POOL_SMALL].current == 2);
  CHECK_OK(nrt_cache_free(q));
  CHECK(cache_alloc(a, 4096) == p);
  CHECK_OK(nrt_cache_free(p));
  CHECK_OK(nrt_cache_empty(0));
}

static void test_recorded_stream_delays_reuse_until_its_work_is_done(void) {
  clean_slate(0);
  gate g;
  gate_init(&g);
  nrt_stream_t a = default_stream(0), b = other_stream(0);
  char *p = cache_alloc(a, 4096);
  CHECK_OK(nrt_launch_host_func(b, gate_wait, &g));
  CHECK_OK(nrt_cache_record_stream(p, b));
  CHECK_OK(nrt_cache_record_stream(p, b));
  CHECK_OK(nrt_cache_record_stream(p, a));
  CHECK_OK(nrt_cache_free(p));
  nrt_cache_stats st = stats_of(0);
  CHECK(st.allocation[NRT_POOL_ALL].current == 0);
  CHECK(st.active[NRT_POOL_ALL].current == 1);
  CHECK(st.active_bytes[NRT_POOL_ALL].current == 4096);
  char *q = cache_alloc(a, 4096);
  CHECK(q != p);
  CHECK_OK(nrt_cache_free(q));
  CHECK_OK(nrt_cache_empty(0)); /* the pending block keeps its segment */
  CHECK(stats_of(0).segment[NRT_POOL_ALL].current == 1);
  gate_open(&g);
  CHECK_OK(nrt_stream_synchronize(b));
  CHECK(cache_alloc(a, 4096) == p);
  CHECK_OK(nrt_cache_free(p));
  st = stats_of(0);
  CHECK(st.active[NRT_POOL_ALL].current == 0);
  CHECK_OK(nrt_cache_empty(0));
  CHECK(stats_of(0).segment[NRT_POOL_ALL].current == 0);
}

static void test_recording_the_allocation_stream_changes_nothing(void) {
  nrt_stream_t a = default_stream(0);
  void *p = cache_alloc(a, 4096);
  CHECK_OK(nrt_cache_record_stream(p, a));
  CHECK_OK(nrt_cache_free(p));
  CHECK(cache_alloc(a, 4096) == p);
  CHECK_OK(nrt_cache_free(p));
}

static void test_empty_cache_releases_only_free_segments(void) {
  clean_slate(0);
  CHECK(device_free_bytes(0) == CAPACITY);
  nrt_stream_t s = default_stream(0);
  void *large = cache_alloc(s, 3 * MIB), *small = cache_alloc(s, 100);
  CHECK_OK(nrt_cache_free(small));
  CHECK(device_free_bytes(0) == CAPACITY - 22 * MIB);
  CHECK_OK(nrt_cache_empty(0));
  nrt_cache_stats st = stats_of(0);
  CHECK(st.segment[NRT_POOL_ALL].current == 1);
  CHECK(st.reserved_bytes[NRT_POOL_ALL].current == (int64_t)(20 * MIB));
  CHECK(st.num_device_free == 1);
  CHECK(device_free_bytes(0) == CAPACITY - 20 * MIB);
  CHECK_OK(nrt_cache_free(large));
  CHECK_OK(nrt_cache_empty(0));
  CHECK(stats_of(0).reserved_bytes[NRT_POOL_ALL].current == 0);
  CHECK(device_free_bytes(0) == CAPACITY);
}

/* Work queued on a block's stream may still read it after the free: giving
 * its segment back (which drops the pages) must wait for that work, as
 * cudaFree synchronises. The reader here is a copy held behind a gate. */
static void fill_words(void *dev, size_t bytes, uint32_t value) {
  uint32_t *h = nrt_device_to_host(dev);
  for (size_t i = 0; i < bytes / 4; i++) h[i] = value;
}

static int holds_words(void *dev, size_t bytes, uint32_t value) {
  const uint32_t *h = nrt_device_to_host(dev);
  for (size_t i = 0; i < bytes / 4; i++)
    if (h[i] != value) return 0;
  return 1;
}

static void test_empty_cache_waits_for_queued_readers(void) {
  clean_slate(0);
  nrt_stream_t s = default_stream(0);
  void *copy;
  CHECK_OK(nrt_malloc(0, MIB, &copy));
  void *p = cache_alloc(s, 3 * MIB);
  fill_words(p, MIB, 0x3f800000u);
  gate g;
  gate_init(&g);
  CHECK_OK(nrt_launch_host_func(s, gate_wait, &g));
  CHECK_OK(nrt_memcpy_async(s, copy, p, MIB)); /* device to device: queued */
  CHECK_OK(nrt_cache_free(p));
  pthread_t opener;
  CHECK(pthread_create(&opener, NULL, open_gate_later, &g) == 0);
  CHECK_OK(nrt_cache_empty(0));
  CHECK(stats_of(0).reserved_bytes[NRT_POOL_ALL].current == 0); /* released all the same */
  CHECK_OK(nrt_stream_synchronize(s));
  CHECK(holds_words(copy, MIB, 0x3f800000u));
  pthread_join(opener, NULL);
  gate_destroy(&g);
  CHECK_OK(nrt_free(copy));
}

/* The retry after a failed allocation releases cached segments: one whose
 * stream still has a queued reader must not go to another stream first. */
static void test_out_of_memory_retry_respects_queued_readers(void) {
  const int32_t d = 3;
  clean_slate(d);
  nrt_stream_t a = default_stream(d), b = other_stream(d);
  void *copy;
  CHECK_OK(nrt_malloc(d, MIB, &copy)); /* first, so p's segment is followed by free space */
  void *p = cache_alloc(a, 40 * MIB);
  fill_words(p, MIB, 0x12345678u);
  gate g;
  gate_init(&g);
  CHECK_OK(nrt_launch_host_func(a, gate_wait, &g));
  CHECK_OK(nrt_memcpy_async(a, copy, p, MIB));
  CHECK_OK(nrt_cache_free(p)); /* cached on a, its reader still queued */
  pthread_t opener;
  CHECK(pthread_create(&opener, NULL, open_gate_later, &g) == 0);
  void *q = cache_alloc(b, 50 * MIB); /* only fits once p's segment is released */
  fill_words(q, MIB, 0xdeadbeefu);    /* b's first writer */
  CHECK_OK(nrt_stream_synchronize(a));
  CHECK(holds_words(copy, MIB, 0x12345678u));
  CHECK(stats_of(d).num_alloc_retries == 1);
  pthread_join(opener, NULL);
  gate_destroy(&g);
  CHECK_OK(nrt_cache_free(q));
  CHECK_OK(nrt_cache_empty(d));
  CHECK_OK(nrt_free(copy));
}

static void test_bad_pointers_and_arguments_are_rejected(void) {
  nrt_stream_t s = default_stream(0);
  void *p = (void *)1, *raw;
  int local;
  CHECK_OK(nrt_cache_alloc(s, 0, &p));
  CHECK(p == NULL);
  CHECK_OK(nrt_cache_free(NULL));
  CHECK_STATUS(nrt_cache_alloc(NULL, 16, &p), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_cache_alloc(s, 16, NULL), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_cache_free(&local), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(nrt_last_error(), "not a live block of the caching allocator"));
  CHECK_OK(nrt_malloc(0, 4096, &raw));
  CHECK_STATUS(nrt_cache_free(raw), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_OK(nrt_free(raw));
  p = cache_alloc(s, 4096);
  CHECK_STATUS(nrt_cache_free((char *)p + 512), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_cache_record_stream((char *)p + 512, s), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_cache_record_stream(p, NULL), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_OK(nrt_cache_free(p));
  CHECK_STATUS(nrt_cache_free(p), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_cache_record_stream(p, s), NRT_ERROR_INVALID_ARGUMENT);
  nrt_cache_stats st;
  CHECK_STATUS(nrt_cache_get_stats(99, &st), NRT_ERROR_INVALID_DEVICE);
  CHECK_STATUS(nrt_cache_get_stats(0, NULL), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_cache_empty(-1), NRT_ERROR_INVALID_DEVICE);
  CHECK_STATUS(nrt_cache_reset_peak(99), NRT_ERROR_INVALID_DEVICE);
  CHECK_STATUS(nrt_cache_reset_accumulated(99), NRT_ERROR_INVALID_DEVICE);
}

/* ---- statistics ------------------------------------------------------- */

static int stat_is(nrt_stat s, int64_t current, int64_t peak, int64_t allocated, int64_t freed) {
  return s.current == current && s.peak == peak && s.allocated == allocated && s.freed == freed;
}

static void test_stats_follow_a_known_sequence(void) {
  const int32_t d = 2;
  clean_slate(d);
  const int64_t K = 1024, M = (int64_t)MIB;
  nrt_stream_t s = default_stream(d);
  void *a = cache_alloc(s, 1000);    /* small: 1 KiB from a new 2 MiB segment */
  void *b = cache_alloc(s, 3 * MIB); /* large: 3 MiB from a new 20 MiB segment */
  void *c = cache_alloc(s, 1000);    /* small: the next 1 KiB */
  nrt_cache_stats st = stats_of(d);
  CHECK(stat_is(st.allocation[NRT_POOL_ALL], 3, 3, 3, 0));
  CHECK(stat_is(st.allocation[NRT_POOL_SMALL], 2, 2, 2, 0));
  CHECK(stat_is(st.allocation[NRT_POOL_LARGE], 1, 1, 1, 0));
  CHECK(stat_is(st.segment[NRT_POOL_ALL], 2, 2, 2, 0));
  CHECK(stat_is(st.allocated_bytes[NRT_POOL_ALL], 2 * K + 3 * M, 2 * K + 3 * M, 2 * K + 3 * M, 0));
  CHECK(stat_is(st.requested_bytes[NRT_POOL_SMALL], 2000, 2000, 2000, 0));
  CHECK(stat_is(st.reserved_bytes[NRT_POOL_ALL], 22 * M, 22 * M, 22 * M, 0));
  CHECK(stat_is(st.active_bytes[NRT_POOL_SMALL], 2 * K, 2 * K, 2 * K, 0));
  CHECK(stat_is(st.inactive_split[NRT_POOL_SMALL], 1, 1, 1, 0));
  CHECK(stat_is(st.inactive_split_bytes[NRT_POOL_SMALL], 2 * M - 2 * K, 2 * M - K, 2 * M - K, K));
  CHECK(stat_is(st.inactive_split_bytes[NRT_POOL_LARGE], 17 * M, 17 * M, 17 * M, 0));
  CHECK(st.num_device_alloc == 2 && st.num_device_free == 0);

  CHECK_OK(nrt_cache_free(a)); /* a free 1 KiB split block appears */
  st = stats_of(d);
  CHECK(stat_is(st.inactive_split[NRT_POOL_SMALL], 2, 2, 2, 0));
  CHECK(stat_is(st.inactive_split_bytes[NRT_POOL_SMALL], 2 * M - K, 2 * M - K, 2 * M, K));
  CHECK(stat_is(st.allocation[NRT_POOL_SMALL], 1, 2, 2, 1));
  CHECK(stat_is(st.requested_bytes[NRT_POOL_SMALL], 1000, 2000, 2000, 1000));

  CHECK_OK(nrt_cache_free(c)); /* merges both neighbours: the segment is whole */
  CHECK_OK(nrt_cache_free(b));
  st = stats_of(d);
  CHECK(stat_is(st.allocation[NRT_POOL_ALL], 0, 3, 3, 3));
  CHECK(stat_is(st.active[NRT_POOL_ALL], 0, 3, 3, 3));
  CHECK(stat_is(st.allocated_bytes[NRT_POOL_ALL], 0, 2 * K + 3 * M, 2 * K + 3 * M, 2 * K + 3 * M));
  CHECK(stat_is(st.inactive_split[NRT_POOL_SMALL], 0, 2, 2, 2));
  CHECK(stat_is(st.inactive_split_bytes[NRT_POOL_SMALL], 0, 2 * M - K, 2 * M, 2 * M));
  CHECK(stat_is(st.inactive_split[NRT_POOL_LARGE], 0, 1, 1, 1));
  CHECK(stat_is(st.reserved_bytes[NRT_POOL_ALL], 22 * M, 22 * M, 22 * M, 0));

  CHECK_OK(nrt_cache_empty(d));
  st = stats_of(d);
  CHECK(stat_is(st.segment[NRT_POOL_ALL], 0, 2, 2, 2));
  CHECK(stat_is(st.reserved_bytes[NRT_POOL_LARGE], 0, 20 * M, 20 * M, 20 * M));
  CHECK(st.num_device_alloc == 2 && st.num_device_free == 2);
  CHECK(st.num_alloc_retries == 0 && st.num_ooms == 0 && st.num_sync_all_streams == 0);
}

static void test_reset_peak_and_accumulated(void) {
  const int32_t d = 2;
  nrt_stream_t s = default_stream(d);
  void *p = cache_alloc(s, 4096);
  CHECK_OK(nrt_cache_free(p));
  CHECK_OK(nrt_cache_reset_peak(d));
  nrt_cache_stats st = stats_of(d);
  CHECK(st.allocation[NRT_POOL_ALL].peak == 0 && st.allocated_bytes[NRT_POOL_ALL].peak == 0);
  CHECK(st.reserved_bytes[NRT_POOL_ALL].peak == (int64_t)(2 * MIB));
  CHECK(st.allocation[NRT_POOL_ALL].allocated > 0);
  CHECK_OK(nrt_cache_reset_accumulated(d));
  st = stats_of(d);
  CHECK(stat_is(st.allocation[NRT_POOL_ALL], 0, 0, 0, 0));
  CHECK(stat_is(st.segment[NRT_POOL_ALL], 1, 1, 0, 0));
  CHECK(st.num_device_alloc == 0 && st.num_device_free == 0);
  p = cache_alloc(s, 4096); /* served from the cache */
  st = stats_of(d);
  CHECK(stat_is(st.allocation[NRT_POOL_ALL], 1, 1, 1, 0));
  CHECK(st.num_device_alloc == 0);
  CHECK_OK(nrt_cache_free(p));
  CHECK_OK(nrt_cache_empty(d));
}

/* ---- out of memory ---------------------------------------------------- */

static void test_out_of_memory_reports_the_numbers(void) {
  const int32_t d = 3;
  clean_slate(d);
  nrt_stream_t s = default_stream(d);
  void *p = cache_alloc(s, 40 * MIB), *q = (void *)1;
  CHECK_STATUS(nrt_cache_alloc(s, 30 * MIB, &q), NRT_ERROR_OUT_OF_MEMORY);
  CHECK(q == NULL);
  CHECK(strcmp(nrt_last_error(),
               "neuron device 3 out of memory: tried to allocate 30.00 MiB; capacity 64.00 MiB, "
               "24.00 MiB free; 40.00 MiB allocated by the caching allocator, 40.00 MiB reserved "
               "(0 bytes reserved but unallocated)") == 0);
  nrt_cache_stats st = stats_of(d);
  CHECK(st.num_ooms == 1 && st.num_alloc_retries == 1 && st.num_sync_all_streams == 0);
  CHECK_STATUS(nrt_cache_alloc(s, SIZE_MAX, &q), NRT_ERROR_OUT_OF_MEMORY);
  CHECK(strstr(nrt_last_error(), "neuron device 3 out of memory: tried to allocate "));
  CHECK(stats_of(d).num_ooms == 2);
  CHECK_OK(nrt_cache_free(p));
  CHECK_OK(nrt_cache_empty(d));
}

static void test_out_of_memory_flushes_the_cache_and_retries(void) {
  const int32_t d = 3;
  clean_slate(d);
  nrt_stream_t a = default_stream(d), b = other_stream(d);
  void *p = cache_alloc(b, 40 * MIB);
  CHECK_OK(nrt_cache_free(p)); /* cached, on another stream */
  void *q = cache_alloc(a, 50 * MIB);
  nrt_cache_stats st = stats_of(d);
  CHECK(st.num_alloc_retries == 1 && st.num_ooms == 0);
  CHECK(st.num_device_free == 1 && st.num_device_alloc == 2);
  CHECK(st.reserved_bytes[NRT_POOL_ALL].current == (int64_t)(50 * MIB));
  CHECK_OK(nrt_cache_free(q));
  CHECK_OK(nrt_cache_empty(d));
}

static void test_out_of_memory_waits_for_pending_frees(void) {
  const int32_t d = 3;
  clean_slate(d);
  gate g;
  gate_init(&g);
  nrt_stream_t a = default_stream(d), b = other_stream(d);
  CHECK_OK(nrt_launch_host_func(b, gate_wait, &g));
  void *p = cache_alloc(a, 40 * MIB);
  CHECK_OK(nrt_cache_record_stream(p, b));
  CHECK_OK(nrt_cache_free(p));
  pthread_t opener;
  CHECK(pthread_create(&opener, NULL, open_gate_later, &g) == 0);
  void *q = cache_alloc(a, 50 * MIB);
  pthread_join(opener, NULL);
  nrt_cache_stats st = stats_of(d);
  CHECK(st.num_sync_all_streams == 1 && st.num_alloc_retries == 1 && st.num_ooms == 0);
  CHECK(st.active[NRT_POOL_ALL].current == 1);
  CHECK_OK(nrt_cache_free(q));
  CHECK_OK(nrt_stream_synchronize(b));
  CHECK_OK(nrt_cache_empty(d));
}

/* ---- threads ---------------------------------------------------------- */

enum { THREADS = 4, LIVE = 6, ITERATIONS = 20000 };

typedef struct stress_arg {
  nrt_stream_t own, shared;
  int id;
  int failures;
} stress_arg;

/* Hands pointers between threads, so that blocks are freed by a thread that
 * did not allocate them. */
static pthread_mutex_t mailbox_mu = PTHREAD_MUTEX_INITIALIZER;
static void *mailbox;
static size_t mailbox_size;

static int stamp_ok(const void *p, size_t size) {
  const unsigned char *h = nrt_device_to_host(p);
  unsigned char tag = (unsigned char)((uintptr_t)p >> 9);
  return h[0] == tag && h[size - 1] == tag;
}

static void stamp(void *p, size_t size) {
  unsigned char *h = nrt_device_to_host(p);
  h[0] = h[size - 1] = (unsigned char)((uintptr_t)p >> 9);
}

/* Counts a failed call of a stress worker, saying why (CHECK is not
 * thread-safe). */
static void stress_failed(stress_arg *w, const char *call, nrt_status s) {
  fprintf(stderr, "stress worker %d: %s returned %s (%s)\n", w->id, call, nrt_status_string(s),
          nrt_last_error());
  w->failures++;
}

static void *stress_worker(void *arg) {
  stress_arg *w = arg;
  unsigned seed = (unsigned)w->id * 2654435761u;
  nrt_stream_t own = w->own, shared = w->shared;
  void *live[LIVE] = {0};
  size_t sizes[LIVE] = {0};
  for (int iter = 0; iter < ITERATIONS; iter++) {
    int slot = (int)(rand_r(&seed) % LIVE);
    if (!live[slot]) {
      sizes[slot] = 1 + rand_r(&seed) % (256 * KIB);
      nrt_status s = nrt_cache_alloc(own, sizes[slot], &live[slot]);
      if (s != NRT_SUCCESS) {
        stress_failed(w, "nrt_cache_alloc", s);
        continue;
      }
      stamp(live[slot], sizes[slot]);
      if (rand_r(&seed) % 16 == 0 && (s = nrt_cache_record_stream(live[slot], shared)))
        stress_failed(w, "nrt_cache_record_stream", s);
      continue;
    }
    if (!stamp_ok(live[slot], sizes[slot])) w->failures++;
    if (rand_r(&seed) % 8 == 0) { /* swap with the mailbox */
      pthread_mutex_lock(&mailbox_mu);
      void *p = mailbox;
      size_t size = mailbox_size;
      mailbox = live[slot];
      mailbox_size = sizes[slot];
      pthread_mutex_unlock(&mailbox_mu);
      live[slot] = p;
      sizes[slot] = size;
      continue;
    }
    nrt_status s = nrt_cache_free(live[slot]);
    if (s != NRT_SUCCESS) stress_failed(w, "nrt_cache_free", s);
    live[slot] = NULL;
  }
  for (int i = 0; i < LIVE; i++) {
    nrt_status s = live[i] ? nrt_cache_free(live[i]) : NRT_SUCCESS;
    if (s != NRT_SUCCESS) stress_failed(w, "nrt_cache_free", s);
  }
  return NULL;
}

static void test_threads_allocate_and_free_concurrently(void) {
  const int32_t d = 1;
  clean_slate(d);
  pthread_t t[THREADS];
  stress_arg args[THREADS];
  for (int i = 0; i < THREADS; i++) {
    args[i] = (stress_arg){.own = other_stream(d), .shared = default_stream(d), .id = i + 1};
    CHECK(pthread_create(&t[i], NULL, stress_worker, &args[i]) == 0);
  }
  for (int i = 0; i < THREADS; i++) {
    pthread_join(t[i], NULL);
    CHECK(args[i].failures == 0);
  }
  if (mailbox) {
    CHECK(stamp_ok(mailbox, mailbox_size));
    CHECK_OK(nrt_cache_free(mailbox));
  }
  CHECK_OK(nrt_stream_synchronize(default_stream(d)));
  CHECK_OK(nrt_cache_empty(d));
  nrt_cache_stats st = stats_of(d);
  CHECK(st.allocation[NRT_POOL_ALL].current == 0 && st.active[NRT_POOL_ALL].current == 0);
  CHECK(st.allocation[NRT_POOL_ALL].allocated > THREADS * ITERATIONS / 4);
  CHECK(st.num_ooms == 0);
  CHECK(st.reserved_bytes[NRT_POOL_ALL].current == 0);
  CHECK(device_free_bytes(d) == CAPACITY);
}

/* Stress for the relatives of the two bugs above: blocks of every size,
 * filled and read by queued work on two streams held busy by slow host
 * functions, freed at once, while empty_cache and allocations that need
 * the retry path (large ones on the other stream) keep releasing segments.
 * Each reader copies its block's first 4 KiB to a slot of its own; at the
 * end every slot must hold the value its block was filled with. */
#define CHURN_ROUNDS 120
static void sleep_1ms(void *arg) {
  (void)arg;
  struct timespec t = {.tv_nsec = 1000 * 1000};
  nanosleep(&t, NULL);
}

static nrt_tensor_view words_view(void *dev, int64_t n) { return view_1d(dev, NRT_FLOAT32, n, 1); }

static void test_released_segments_never_reach_queued_work(void) {
  const int32_t d = 2;
  clean_slate(d);
  nrt_stream_t streams[2] = {default_stream(d), other_stream(d)};
  const size_t sizes[] = {4 * KIB, 600 * KIB, 3 * MIB, 12 * MIB};
  char *slots;
  CHECK_OK(nrt_malloc(d, CHURN_ROUNDS * 4 * KIB, (void **)&slots));
  for (int r = 0; r < CHURN_ROUNDS; r++) {
    nrt_stream_t s = streams[r % 2];
    size_t bytes = sizes[(r * 7 + r / 3) % 4];
    void *p = cache_alloc(s, bytes);
    nrt_op fill;
    memset(&fill, 0, sizeof fill);
    fill.code = NRT_OP_FILL;
    fill.num_operands = 1;
    fill.num_scalars = 1;
    fill.operands[0] = words_view(p, (int64_t)(bytes / 4));
    fill.scalars[0].is_float = 1;
    fill.scalars[0].f = (double)(r + 1);
    CHECK_OK(nrt_launch_host_func(s, sleep_1ms, NULL));
    CHECK_OK(nrt_launch(s, &fill));
    CHECK_OK(nrt_launch_host_func(s, sleep_1ms, NULL));
    CHECK_OK(nrt_memcpy_async(s, slots + (size_t)r * 4 * KIB, p, 4 * KIB));
    CHECK_OK(nrt_cache_free(p));
    if (r % 5 == 4) CHECK_OK(nrt_cache_empty(d));
    if (r % 9 == 8) { /* needs the segments the other stream still reads */
      void *big = cache_alloc(streams[(r + 1) % 2], 40 * MIB);
      CHECK_OK(nrt_cache_free(big));
    }
  }
  CHECK_OK(nrt_device_synchronize(d));
  int good = 1;
  for (int r = 0; r < CHURN_ROUNDS; r++) {
    const float *h = nrt_device_to_host(slots + (size_t)r * 4 * KIB);
    for (int i = 0; i < 1024; i++) good &= h[i] == (float)(r + 1);
  }
  CHECK(good);
  CHECK_OK(nrt_cache_empty(d));
  CHECK_OK(nrt_free(slots));
}

int main(void) {
  setenv("NEURON_RT_HBM_BYTES", "64M", 1);
  int32_t count = 0;
  CHECK_OK(nrt_device_count(&count));
  if (count < 4) {
    fprintf(stderr, "needs 4 devices, found %d\n", count);
    return 1;
  }
  RUN(test_freed_block_is_reused_on_its_stream);
  RUN(test_small_blocks_split_and_merge);
  RUN(test_large_blocks_split_only_when_the_rest_exceeds_1mib);
  RUN(test_streams_do_not_share_cached_blocks);
  RUN(test_recorded_stream_delays_reuse_until_its_work_is_done);
  RUN(test_recording_the_allocation_stream_changes_nothing);
  RUN(test_empty_cache_releases_only_free_segments);
  RUN(test_empty_cache_waits_for_queued_readers);
  RUN(test_out_of_memory_retry_respects_queued_readers);
  RUN(test_bad_pointers_and_arguments_are_rejected);
  RUN(test_stats_follow_a_known_sequence);
  RUN(test_reset_peak_and_accumulated);
  RUN(test_out_of_memory_reports_the_numbers);
  RUN(test_out_of_memory_flushes_the_cache_and_retries);
  RUN(test_out_of_memory_waits_for_pending_frees);
  RUN(test_threads_allocate_and_free_concurrently);
  RUN(test_released_segments_never_reach_queued_work);
  return CHECK_MAIN_RESULT();
}
