/* The kernel thread pool (ops/engine/thread_pool.c).
 *
 * rt_parallel_for and rt_parallel_for_light must run every index of [0, n)
 * exactly once, in non-empty ranges no shorter than the grain (or one
 * range, when the job is too small to split), however the helpers find
 * the job: asleep (the light form then starts on the caller alone and may
 * wake them part way through), still polling right after another job, or
 * busy with another caller's job (the second caller then runs alone).
 * Sizes sit around the light form's thresholds (2, 16 and 32 grains) and are
 * odd. How many ranges each thread runs depends on timing; which ones does
 * not: the caller claims from the front and helpers from the back, so the
 * caller's ranges are a prefix of [0, n) (each core then mostly rereads in
 * the next op what it wrote in the last).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#include "check.h"
#include "internal.h"
#include "ops/engine/thread_pool.h"

enum { MAX_RECORDS = 4096 };

typedef struct record {
  int64_t begin, end;
} record;

typedef struct ranges_seen {
  atomic_int count;
  record at[MAX_RECORDS];
  uint64_t busy_ns; /* work each range pretends to do */
} ranges_seen;

static void note_range(int64_t begin, int64_t end, void *ctx) {
  ranges_seen *seen = ctx;
  int i = atomic_fetch_add(&seen->count, 1);
  if (i < MAX_RECORDS) seen->at[i] = (record){begin, end};
  for (uint64_t start = rt_now_ns(); seen->busy_ns && rt_now_ns() - start < seen->busy_ns;) {
  }
}

static void sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

static int by_begin(const void *a, const void *b) {
  int64_t x = ((const record *)a)->begin, y = ((const record *)b)->begin;
  return x < y ? -1 : x > y;
}

/* The ranges tile [0, n) with none empty and, when there are several,
 * none shorter than grain nor more than per_thread for each thread. */
static int tiles(ranges_seen *seen, int64_t n, int64_t grain, int per_thread) {
  int count = atomic_load(&seen->count);
  if (n <= 0) return count == 0;
  if (count < 1 || count > MAX_RECORDS || count > rt_num_threads() * per_thread) return 0;
  qsort(seen->at, (size_t)count, sizeof seen->at[0], by_begin);
  int64_t next = 0;
  for (int i = 0; i < count; i++) {
    const record r = seen->at[i];
    if (r.begin != next || r.end <= r.begin || (count > 1 && r.end - r.begin < grain)) return 0;
    next = r.end;
  }
  return next == n;
}

typedef void (*parallel_fn)(int64_t, int64_t, rt_range_fn, void *);

static int run_and_check(parallel_fn run, int per_thread, int64_t n, int64_t grain, uint64_t busy_ns) {
  static ranges_seen seen; /* one caller at a time uses this one */
  atomic_store(&seen.count, 0);
  seen.busy_ns = busy_ns;
  run(n, grain, note_range, &seen);
  int ok = tiles(&seen, n, grain, per_thread);
  if (!ok)
    fprintf(stderr, "  n=%lld grain=%lld: %d ranges do not tile\n", (long long)n, (long long)grain,
            atomic_load(&seen.count));
  return ok;
}

/* Sizes in grains around the thresholds, plus odd remainders. */
static void sizes_for(int64_t grain, int64_t *sizes, int *count) {
  const int64_t g = grain;
  const int64_t all[] = {0,          1,          g - 1,      g,          g + 1,       2 * g - 1,
                         2 * g,      2 * g + 1,  7 * g + 3,  15 * g + 7, 16 * g,      16 * g + 1,
                         31 * g + 5, 32 * g - 1, 32 * g + 1, 100 * g + 7, 1000 * g + 999};
  *count = 0;
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (all[i] >= 0) sizes[(*count)++] = all[i];
}

static void check_forms(int helpers_asleep) {
  const int64_t grains[] = {1, 3, 32768};
  for (int light = 0; light < 2; light++)
    for (size_t gi = 0; gi < sizeof grains / sizeof grains[0]; gi++) {
      int64_t sizes[17];
      int count;
      sizes_for(grains[gi], sizes, &count);
      for (int i = 0; i < count; i++) {
        if (helpers_asleep) sleep_us(1000); /* past the helpers' 200 us poll */
        CHECK(run_and_check(light ? rt_parallel_for_light : rt_parallel_for, light ? 16 : 4, sizes[i],
                            grains[gi], 0));
      }
    }
}

static void test_ranges_tile_with_helpers_asleep(void) { check_forms(1); }

static void test_ranges_tile_with_helpers_polling(void) { check_forms(0); }

/* Ranges that take 50-400 us each: a light job after the helpers fell asleep
 * starts alone and (usually) wakes them after its first ranges. */
static void test_light_jobs_that_wake_part_way(void) {
  const int64_t grain = 32768;
  const int64_t sizes[] = {2 * grain, 3 * grain + 1, 8 * grain - 1, 8 * grain + 5, 31 * grain};
  const uint64_t busy[] = {50000, 400000};
  for (size_t b = 0; b < sizeof busy / sizeof busy[0]; b++)
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
      sleep_us(1000);
      CHECK(run_and_check(rt_parallel_for_light, 16, sizes[i], grain, busy[b]));
    }
}

/* Slow ranges, so that helpers take part: every range the caller ran lies
 * before every range a helper ran, for both forms, helpers asleep or not. */
typedef struct sides_seen {
  pthread_t caller;
  atomic_llong caller_end, helper_begin; /* the caller's last end, the helpers' first begin */
  atomic_int helper_ranges;
} sides_seen;

static void note_side(int64_t begin, int64_t end, void *ctx) {
  sides_seen *s = ctx;
  if (pthread_equal(pthread_self(), s->caller)) {
    if (end > atomic_load(&s->caller_end)) atomic_store(&s->caller_end, end); /* only the caller writes it */
  } else {
    long long seen = atomic_load(&s->helper_begin);
    while (begin < seen && !atomic_compare_exchange_weak(&s->helper_begin, &seen, begin)) {
    }
    atomic_fetch_add(&s->helper_ranges, 1);
  }
  for (uint64_t start = rt_now_ns(); rt_now_ns() - start < 100000;) {
  }
}

static void test_caller_takes_the_front(void) {
  const int64_t n = 64 * 1000 + 7, grain = 1000;
  int helped = 0;
  for (int k = 0; k < 8; k++) {
    sides_seen s = {.caller = pthread_self()};
    atomic_init(&s.caller_end, 0);
    atomic_init(&s.helper_begin, n);
    atomic_init(&s.helper_ranges, 0);
    if (k % 2) sleep_us(1000);
    (k % 4 < 2 ? rt_parallel_for : rt_parallel_for_light)(n, grain, note_side, &s);
    CHECK(atomic_load(&s.caller_end) <= atomic_load(&s.helper_begin));
    helped += atomic_load(&s.helper_ranges) > 0;
  }
  CHECK(helped > 0 || rt_num_threads() == 1);
}

/* Two callers at once: one holds the pool, the other runs its jobs alone. */
typedef struct caller {
  ranges_seen seen;
  int failures;
} caller;

static void *call_repeatedly(void *arg) {
  caller *c = arg;
  for (int k = 0; k < 300; k++) {
    const int64_t grain = 1 + k % 5, n = (int64_t)(k % 7) * 13 * grain + k % 3;
    atomic_store(&c->seen.count, 0);
    c->seen.busy_ns = k % 10 == 0 ? 20000 : 0;
    if (k % 4 == 0) sleep_us(300);
    (k % 2 ? rt_parallel_for_light : rt_parallel_for)(n, grain, note_range, &c->seen);
    if (!tiles(&c->seen, n, grain, k % 2 ? 16 : 4)) c->failures++;
  }
  return NULL;
}

static void test_concurrent_callers(void) {
  static caller callers[3];
  pthread_t threads[3];
  for (int i = 0; i < 3; i++) CHECK(pthread_create(&threads[i], NULL, call_repeatedly, &callers[i]) == 0);
  for (int i = 0; i < 3; i++) {
    pthread_join(threads[i], NULL);
    CHECK(callers[i].failures == 0);
  }
}

int main(void) {
  /* Several helpers, whatever the host: more than its cores if need be. */
  setenv("TORCHNEURON_NUM_THREADS", "3", 0);
  CHECK_OK(nrt_init());
  CHECK(rt_num_threads() >= 2 || getenv("TORCHNEURON_NUM_THREADS")[0] == '1');
  RUN(test_ranges_tile_with_helpers_asleep);
  RUN(test_ranges_tile_with_helpers_polling);
  RUN(test_light_jobs_that_wake_part_way);
  RUN(test_caller_takes_the_front);
  RUN(test_concurrent_callers);
  return CHECK_MAIN_RESULT();
}
