/* See thread_pool.h. A job is published with a new generation number; each
 * participant claims range indices from an atomic counter, and the caller
 * waits until every range is done and every helper has let go of the job.
 * Work is cut into a few ranges per thread, so a helper that is descheduled
 * (the machine is shared) holds up at most one small range. Between jobs a
 * helper polls briefly for the next generation, then sleeps; the caller
 * polls briefly for the helpers' last ranges. Light jobs (element loops)
 * are cut finer and may leave sleeping helpers asleep (below).
 *
 * The caller claims ranges from the front and helpers from the back, so
 * that in a run of ops over the same tensors each core mostly reads what
 * it wrote itself: on the AMD EPYC VM the two vCPUs are at times on cores
 * that share no L3, and a line written by the other core then costs 3-4
 * times an L2 hit (a 65 ns round trip between the cores becomes 350-400);
 * with both sides claiming from the front, the CNN step's max pooling and
 * other memory-bound ops took 1.7-2.4 times the CPU time on two threads
 * that they took on one. */
#include "ops/engine/thread_pool.h"
#include "kernel_threads.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include "internal.h"

#define MAX_THREADS 256
#define RANGES_PER_THREAD 4
/* A helper's poll for the next job before it sleeps, yielding its core on
 * every poll after the first HELPER_YIELD_AFTER_NS: the gap between two
 * products that a program synchronises on (launch, wake the stream worker,
 * kernel, wake the synchroniser) is 40-60 us, and a helper that slept
 * through it must be woken by a futex call in the kernel's own critical
 * path (4 us until it ran, on the Xeon host, when its core was free). */
#define HELPER_SPIN_NS 200000
#define HELPER_YIELD_AFTER_NS 10000
#define CALLER_SPIN_NS 30000 /* the caller's poll for the helpers' last ranges */

/* Light jobs (rt_parallel_for_light). Waking a sleeping helper costs the
 * caller 15-20 us in the futex call, and the helper runs 40-60 us after
 * the call began (the Xeon host, a VM; a few us on bare metal). A light
 * job whose helpers sleep wakes them at once when it is long
 * (LIGHT_WAKE_AT_ONCE grains or more) or follows another light job closely
 * (a program's run of ops: the woken helper then polls between them);
 * otherwise the caller starts alone and wakes them once its first ranges
 * show that the work left takes more than 1.5 wake latencies (two threads
 * then finish first: the caller loses the futex call, the helper arrives
 * a wake latency late). The latency is measured: the helpers' average.
 * Light ranges are finer than a heavy job's, so that a helper that starts
 * late still finds work, and the last range it runs is short. */
#define LIGHT_RANGES_PER_THREAD 16
#define LIGHT_WAKE_AT_ONCE 16
#define INITIAL_WAKE_LATENCY_NS 50000

typedef struct job {
  rt_range_fn fn;
  void *ctx;
  int64_t n;
  int64_t ranges;
  atomic_llong claims;  /* ranges claimed from the front (low 32 bits) and from the back (high) */
  atomic_llong pending; /* ranges not yet finished */
  int helpers;          /* helpers holding this job (pool_mu) */
} job;

static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_cv = PTHREAD_COND_INITIALIZER;
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t busy_mu = PTHREAD_MUTEX_INITIALIZER; /* one job at a time */
static job *current;
static atomic_uint_fast64_t generation; /* written under pool_mu */
static int sleepers;                     /* helpers waiting on work_cv (pool_mu) */
static atomic_uint_fast64_t light_job_end; /* rt_now_ns() when the last split light job ended */
static atomic_uint_fast64_t woken_at;       /* rt_now_ns() of the last wake of sleeping helpers */
static atomic_uint_fast64_t wake_latency = INITIAL_WAKE_LATENCY_NS; /* from woken_at to a helper running */
static int num_threads = 1;
static int caller_core = -1; /* the core helpers leave to callers, or -1 (all float) */

static void run_range(job *j, int64_t r) {
  int64_t begin = j->n * r / j->ranges, end = j->n * (r + 1) / j->ranges;
  j->fn(begin, end, j->ctx);
  if (atomic_fetch_sub(&j->pending, 1) == 1) {
    pthread_mutex_lock(&pool_mu);
    pthread_cond_broadcast(&done_cv);
    pthread_mutex_unlock(&pool_mu);
  }
}

/* Claims the first unclaimed range (the caller) or the last (helpers);
 * -1 once none is left. One atomic add a claim, never retried: a
 * compare-and-swap loop cost two transfers of the line between the cores
 * a claim, which made 1-2 us ranges slower on the far cores. */
#define CLAIMED_FROM_BACK (1LL << 32)

static int64_t claimed(long long c) { return (c & (CLAIMED_FROM_BACK - 1)) + (c >> 32); }

static int64_t claim_range(job *j, int from_back) {
  long long c = atomic_fetch_add_explicit(&j->claims, from_back ? CLAIMED_FROM_BACK : 1, memory_order_relaxed);
  if (claimed(c) >= j->ranges) return -1;
  return from_back ? j->ranges - 1 - (c >> 32) : c & (CLAIMED_FROM_BACK - 1);
}

static int64_t ranges_left(job *j) {
  int64_t left = j->ranges - claimed(atomic_load_explicit(&j->claims, memory_order_relaxed));
  return left > 0 ? left : 0;
}

static void run_ranges(job *j, int from_back) {
  for (int64_t r; (r = claim_range(j, from_back)) >= 0;) run_range(j, r);
}

/* Wakes the helpers sleeping for work (after a job was published: one
 * that checks for work after this sees it). */
static void wake_helpers(void) {
  atomic_store_explicit(&woken_at, rt_now_ns(), memory_order_relaxed);
  pthread_cond_broadcast(&work_cv);
}

static void wake_sleepers(void) {
  pthread_mutex_lock(&pool_mu);
  int sleeping = sleepers;
  pthread_mutex_unlock(&pool_mu);
  if (sleeping) wake_helpers();
}

/* A woken helper's time from the wake to running, into the average: a
 * quarter of the way to each sample, a sample counting for at most four
 * times the average (a helper kept off its core for milliseconds by
 * another process says little about the next wake). */
static void note_wake_latency(void) {
  uint64_t stamp = atomic_load_explicit(&woken_at, memory_order_relaxed), now = rt_now_ns();
  if (!stamp || now < stamp) return;
  uint64_t average = atomic_load_explicit(&wake_latency, memory_order_relaxed), sample = now - stamp;
  if (sample > 4 * average) sample = 4 * average;
  atomic_store_explicit(&wake_latency, average - average / 4 + sample / 4, memory_order_relaxed);
}

/* The caller's share of a light job whose sleeping helpers were left
 * asleep: wakes them once the ranges done so far say the unclaimed ones
 * take this thread more than 1.5 wake latencies. A job that wakes no one
 * lowers the latency a little: under a load that kept the helpers from
 * their cores it rose, and only wakes measure it again. */
static void run_ranges_then_wake(job *j) {
  const uint64_t start = rt_now_ns(), latency = atomic_load_explicit(&wake_latency, memory_order_relaxed);
  int woken = 0;
  for (int64_t r, done = 0; (r = claim_range(j, 0)) >= 0;) {
    run_range(j, r);
    done++;
    if (woken) continue;
    int64_t left = ranges_left(j);
    double left_ns = (double)(rt_now_ns() - start) * (double)left / (double)done;
    if (left > 0 && 2 * left_ns > 3 * (double)latency) {
      wake_sleepers();
      woken = 1;
    }
  }
  if (!woken) atomic_store_explicit(&wake_latency, latency - latency / 32, memory_order_relaxed);
}

/* Polls while busy(arg) holds, for up to spin_ns; after yield_after_ns
 * each poll also yields the core (to whatever else waits for it). */
static void poll_while(int (*busy)(const void *), const void *arg, uint64_t spin_ns, uint64_t yield_after_ns) {
  uint64_t start = 0;
  for (unsigned i = 0; busy(arg); i++) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    if ((i & 63) == 63) {
      uint64_t t = rt_now_ns();
      if (!start) start = t;
      else if (t - start > spin_ns) return;
      else if (t - start > yield_after_ns) sched_yield();
    }
  }
}

static int generation_is(const void *seen) {
  return atomic_load_explicit(&generation, memory_order_relaxed) == *(const uint64_t *)seen;
}

static int ranges_pending(const void *j) {
  return atomic_load_explicit(&((job *)j)->pending, memory_order_acquire) > 0;
}

static void *helper_main(void *arg) {
  (void)arg;
  uint64_t seen = 0;
  pthread_mutex_lock(&pool_mu);
  for (;;) {
    if (atomic_load(&generation) == seen) {
      pthread_mutex_unlock(&pool_mu);
      poll_while(generation_is, &seen, HELPER_SPIN_NS, HELPER_YIELD_AFTER_NS);
      pthread_mutex_lock(&pool_mu);
    }
    sleepers++;
    int slept = 0;
    while (atomic_load(&generation) == seen) {
      pthread_cond_wait(&work_cv, &pool_mu);
      slept = 1;
    }
    sleepers--;
    if (slept) note_wake_latency();
    seen = atomic_load(&generation);
    job *j = current;
    if (!j) continue;
    j->helpers++;
    pthread_mutex_unlock(&pool_mu);
    run_ranges(j, 1);
    pthread_mutex_lock(&pool_mu);
    if (--j->helpers == 0) pthread_cond_broadcast(&done_cv);
  }
  return NULL;
}

/* With as many cores as threads, helper i keeps to the i-th core this
 * process may use, and callers (stream workers) to the first. Left to
 * itself, the scheduler often wakes a helper on the core of the thread that
 * woke it, and two kernel threads then share one core for milliseconds (a
 * 512^3 product ran at 70-100 GFLOP/s in such blocks instead of 180). A
 * floating caller fares no better: it ends up on its helper's core, and as
 * the two take turns there each stays "cache hot", so the idle core does
 * not pull either (a 256^3 product ran at 85 GFLOP/s instead of 160, each
 * thread waiting 10 ms per 10 ms block). */
static int helper_cores(int wanted, int *cores) {
  cpu_set_t allowed;
  const int skip = rt_kernel_core_offset(); /* the slices of the host's other ranks */
  if (!rt_pin_kernel_threads() || wanted < 2 || sched_getaffinity(0, sizeof allowed, &allowed) != 0 ||
      CPU_COUNT(&allowed) < skip + wanted)
    return 0;
  for (int cpu = 0, seen = 0, found = 0; cpu < CPU_SETSIZE && found < wanted; cpu++)
    if (CPU_ISSET(cpu, &allowed) && seen++ >= skip) cores[found++] = cpu;
  return 1;
}

static void start_pool(void) {
  int wanted = rt_kernel_threads();
  if (wanted > MAX_THREADS) wanted = MAX_THREADS;
  int cores[MAX_THREADS];
  int pin = helper_cores(wanted, cores);
  if (pin) caller_core = cores[0];
  for (int i = 1; i < wanted; i++) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    if (pin) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cores[i], &one);
      pthread_attr_setaffinity_np(&attr, sizeof one, &one);
    }
    pthread_t thread;
    int failed = pthread_create(&thread, &attr, helper_main, NULL) != 0;
    pthread_attr_destroy(&attr);
    if (failed) break;
    pthread_detach(thread);
    num_threads++;
  }
}

int rt_num_threads(void) {
  pthread_once(&pool_once, start_pool);
  return num_threads;
}

void rt_keep_to_caller_core(void) {
  pthread_once(&pool_once, start_pool);
  if (caller_core < 0) return;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(caller_core, &one);
  pthread_setaffinity_np(pthread_self(), sizeof one, &one); /* best effort */
}

/* Runs [0, n) as `ranges` ranges over the pool (the caller holds busy_mu).
 * A light job leaves sleeping helpers asleep unless wake_now (see "Light
 * jobs" above); a helper still polling joins either way. */
static void run_job(int64_t n, int64_t ranges, rt_range_fn fn, void *ctx, int wake_now) {
  job j = {.fn = fn, .ctx = ctx, .n = n, .ranges = ranges};
  atomic_init(&j.claims, 0);
  atomic_init(&j.pending, ranges);
  pthread_mutex_lock(&pool_mu);
  current = &j;
  atomic_fetch_add(&generation, 1);
  int sleeping = sleepers;
  pthread_mutex_unlock(&pool_mu);
  /* Outside pool_mu: a woken helper does not then wait for it. One that
   * was about to sleep checks the generation under pool_mu first. */
  if (sleeping && wake_now) wake_helpers();
  if (sleeping && !wake_now) run_ranges_then_wake(&j);
  else run_ranges(&j, 0);
  /* Ranges still running on helpers usually end within microseconds: poll
   * before sleeping, since a futex wake-up costs tens of them. */
  poll_while(ranges_pending, &j, CALLER_SPIN_NS, CALLER_SPIN_NS);
  pthread_mutex_lock(&pool_mu);
  /* The job lives on this stack: wait until no helper still holds it. */
  while (atomic_load(&j.pending) > 0 || j.helpers > 0) pthread_cond_wait(&done_cv, &pool_mu);
  current = NULL;
  pthread_mutex_unlock(&pool_mu);
}

/* How many ranges [0, n) splits into: none shorter than grain, at most
 * per_thread for each thread; 1 runs on the caller alone. */
static int64_t ranges_for(int64_t n, int64_t grain, int threads, int64_t per_thread) {
  int64_t ranges = grain > 0 ? n / grain : n;
  return threads == 1 ? 1 : ranges < (int64_t)threads * per_thread ? ranges : (int64_t)threads * per_thread;
}

/* Runs [0, n) over the pool, or on the caller alone when it does not
 * split or another job holds the pool. */
static void parallel_for(int64_t n, int64_t grain, rt_range_fn fn, void *ctx, int light) {
  if (n <= 0) return;
  int64_t ranges = ranges_for(n, grain, rt_num_threads(), light ? LIGHT_RANGES_PER_THREAD : RANGES_PER_THREAD);
  if (ranges <= 1 || pthread_mutex_trylock(&busy_mu) != 0) {
    fn(0, n, ctx);
    return;
  }
  if (!light) {
    run_job(n, ranges, fn, ctx, 1);
  } else {
    uint64_t now = rt_now_ns();
    int wake_now = (grain > 0 ? n / grain : n) >= LIGHT_WAKE_AT_ONCE ||
                   now - atomic_load_explicit(&light_job_end, memory_order_relaxed) < HELPER_SPIN_NS;
    run_job(n, ranges, fn, ctx, wake_now);
    atomic_store_explicit(&light_job_end, rt_now_ns(), memory_order_relaxed);
  }
  pthread_mutex_unlock(&busy_mu);
}

void rt_parallel_for(int64_t n, int64_t grain, rt_range_fn fn, void *ctx) { parallel_for(n, grain, fn, ctx, 0); }

void rt_parallel_for_light(int64_t n, int64_t grain, rt_range_fn fn, void *ctx) {
  parallel_for(n, grain, fn, ctx, 1);
}
