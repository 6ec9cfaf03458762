/* Streams, events, launches and copies.
 *
 * Ordering is observed with host functions: they append to a log, or block
 * on a gate until the test opens it, which holds a stream busy for as long
 * as a test needs. Checks that something does NOT happen while a stream is
 * held sleep briefly first (a few ms), so a bug shows up as a failure, not
 * as a hang; nothing asserts an upper bound on time.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "check.h"
#include "view1d.h"
#include "gate.h"
#include "child.h"
#include "internal.h"

/* ---- helpers ---------------------------------------------------------- */

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Opens a gate from another thread after a delay; `opened` is set (before
 * opening) so the test can tell a call returned only after the gate opened. */
typedef struct delayed_open {
  gate *g;
  int delay_ms;
  atomic_int opened;
  pthread_t thread;
} delayed_open;

static void *delayed_open_main(void *arg) {
  delayed_open *d = arg;
  sleep_ms(d->delay_ms);
  atomic_store(&d->opened, 1);
  gate_open(d->g);
  return NULL;
}

static void delayed_open_start(delayed_open *d, gate *g, int delay_ms) {
  d->g = g;
  d->delay_ms = delay_ms;
  atomic_init(&d->opened, 0);
  CHECK(pthread_create(&d->thread, NULL, delayed_open_main, d) == 0);
}

static void delayed_open_join(delayed_open *d) { pthread_join(d->thread, NULL); }

/* A log that host functions append to. */
#define LOG_CAP 16384
typedef struct log_t {
  pthread_mutex_t mu;
  int n;
  int v[LOG_CAP];
} log_t;

typedef struct log_entry {
  log_t *log;
  int value;
} log_entry;

static void log_init(log_t *l) {
  pthread_mutex_init(&l->mu, NULL);
  l->n = 0;
}

static int log_count(log_t *l) {
  pthread_mutex_lock(&l->mu);
  int n = l->n;
  pthread_mutex_unlock(&l->mu);
  return n;
}

static void log_append(void *arg) {
  log_entry *e = arg;
  pthread_mutex_lock(&e->log->mu);
  if (e->log->n < LOG_CAP) e->log->v[e->log->n++] = e->value;
  pthread_mutex_unlock(&e->log->mu);
}

static void sleep_20ms(void *arg) {
  (void)arg;
  sleep_ms(20);
}

static nrt_op fill_op(void *dst, nrt_dtype dtype, int64_t n, double value) {
  nrt_op op;
  memset(&op, 0, sizeof op);
  op.code = NRT_OP_FILL;
  op.num_operands = 1;
  op.num_scalars = 1;
  op.operands[0] = view_1d(dst, dtype, n, 1);
  op.scalars[0].is_float = 1;
  op.scalars[0].f = value;
  return op;
}

/* A COPY whose source shape differs from the destination's: each view is
 * valid on its own, so the launch is accepted, and the kernel fails. */
static nrt_op bad_copy_op(void *dst, void *src) {
  nrt_op op;
  memset(&op, 0, sizeof op);
  op.code = NRT_OP_COPY;
  op.num_operands = 2;
  op.operands[0] = view_1d(dst, NRT_FLOAT32, 8, 1);
  op.operands[1] = view_1d(src, NRT_FLOAT32, 4, 1);
  return op;
}

static float *host_f32(void *dev) { return (float *)nrt_device_to_host(dev); }

static void *dev_alloc(int32_t device, size_t bytes) {
  void *p = NULL;
  CHECK_OK(nrt_malloc(device, bytes, &p));
  return p;
}

static void bump_counter(void *arg) { atomic_fetch_add((atomic_int *)arg, 1); }
static void do_nothing(void *arg) { (void)arg; }

/* ---- in-order execution ----------------------------------------------- */

static void test_in_order(void) {
  nrt_stream_t streams[3];
  CHECK_OK(nrt_stream_get_default(0, &streams[0]));
  CHECK_OK(nrt_stream_get_pooled(0, NRT_STREAM_PRIORITY_NORMAL, &streams[1]));
  CHECK_OK(nrt_stream_get_pooled(1, NRT_STREAM_PRIORITY_HIGH, &streams[2]));
  static log_t log;
  static log_entry entries[1000];
  for (int k = 0; k < 3; k++) {
    log_init(&log);
    /* More than the ring holds (256): the producer waits for room. */
    for (int i = 0; i < 1000; i++) {
      entries[i] = (log_entry){&log, i};
      CHECK_OK(nrt_launch_host_func(streams[k], log_append, &entries[i]));
    }
    CHECK_OK(nrt_stream_synchronize(streams[k]));
    CHECK(log.n == 1000);
    int in_order = 1;
    for (int i = 0; i < log.n; i++) in_order &= log.v[i] == i;
    CHECK(in_order);
    CHECK_OK(nrt_stream_query(streams[k]));
  }
}

/* Joins a thread, or ends the test program if it has not finished within
 * seconds: a hang becomes a failure (its threads cannot be recovered). */
static void join_or_die(pthread_t thread, int seconds, const char *what) {
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += seconds;
  if (pthread_timedjoin_np(thread, NULL, &deadline) != 0) {
    fprintf(stderr, "FAIL %s: not done after %d s (a hang)\n", what, seconds);
    _exit(3);
  }
}

/* The launches of a training step behind one long kernel: the ring grows
 * instead of stalling the producer (the gate stays shut until they are all
 * queued, so a producer that had to wait for room would never finish). */
#define STEP_LAUNCHES 2000
static void *queue_step(void *arg) {
  nrt_stream_t s = arg;
  static atomic_int counter;
  for (int i = 0; i < STEP_LAUNCHES; i++) CHECK_OK(nrt_launch_host_func(s, bump_counter, &counter));
  return NULL;
}

static void test_ring_grows_for_a_step(void) {
  nrt_stream_t s;
  CHECK_OK(nrt_stream_create(0, 0, &s));
  gate g;
  gate_init(&g);
  CHECK_OK(nrt_launch_host_func(s, gate_wait, &g));
  pthread_t producer;
  CHECK(pthread_create(&producer, NULL, queue_step, s) == 0);
  /* A ring that cannot grow (no host memory: the fault sweep) makes the
   * producer wait for room; the gate then opens to let it finish, and the
   * check fails instead of the test hanging. */
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += 10;
  int queued_without_waiting = pthread_timedjoin_np(producer, NULL, &deadline) == 0;
  gate_open(&g);
  if (!queued_without_waiting) join_or_die(producer, 30, "queueing a step's launches");
  CHECK(queued_without_waiting);
  CHECK_OK(nrt_stream_synchronize(s));
  CHECK_OK(nrt_stream_destroy(s));
  gate_destroy(&g);
}

/* A full ring at its largest while the stream is held: the producer blocks
 * until the gate opens, then everything runs in order. */
#define FULL_RING_LAUNCHES 9000 /* more than the ring's largest depth */
static void test_full_ring_waits(void) {
  nrt_stream_t s;
  CHECK_OK(nrt_stream_create(0, 0, &s));
  gate g;
  gate_init(&g);
  static log_t log;
  static log_entry entries[FULL_RING_LAUNCHES];
  log_init(&log);
  CHECK_OK(nrt_launch_host_func(s, gate_wait, &g));
  delayed_open d;
  delayed_open_start(&d, &g, 30);
  for (int i = 0; i < FULL_RING_LAUNCHES; i++) {
    entries[i] = (log_entry){&log, i};
    CHECK_OK(nrt_launch_host_func(s, log_append, &entries[i]));
  }
  CHECK(atomic_load(&d.opened) == 1); /* a submission past the largest ring had to wait */
  CHECK_OK(nrt_stream_synchronize(s));
  CHECK(log.n == FULL_RING_LAUNCHES);
  int in_order = 1;
  for (int i = 0; i < log.n; i++) in_order &= log.v[i] == i;
  CHECK(in_order);
  delayed_open_join(&d);
  CHECK_OK(nrt_stream_destroy(s));
  gate_destroy(&g);
}

/* ---- ordering between streams ----------------------------------------- */

static void test_streams_independent(void) {
  /* Without an event, B runs while A is held. */
  nrt_stream_t a, b;
  CHECK_OK(nrt_stream_create(0, 0, &a));
  CHECK_OK(nrt_stream_create(0, 0, &b));
  gate g;
  gate_init(&g);
  static log_t log;
  log_init(&log);
  log_entry eb = {&log, 2};
  CHECK_OK(nrt_launch_host_func(a, gate_wait, &g));
  CHECK_OK(nrt_launch_host_func(b, log_append, &eb));
  CHECK_OK(nrt_stream_synchronize(b));
  CHECK(log_count(&log) == 1);
  CHECK_STATUS(nrt_stream_query(a), NRT_ERROR_NOT_READY);
  gate_open(&g);
  CHECK_OK(nrt_stream_synchronize(a));
  CHECK_OK(nrt_stream_destroy(a));
  CHECK_OK(nrt_stream_destroy(b));
  gate_destroy(&g);
}

static void test_event_orders_streams(void) {
  for (int cross_device = 0; cross_device < 2; cross_device++) {
    nrt_stream_t a, b;
    CHECK_OK(nrt_stream_create(0, NRT_STREAM_PRIORITY_NORMAL, &a));
    CHECK_OK(nrt_stream_create(cross_device ? 1 : 0, NRT_STREAM_PRIORITY_HIGH, &b));
    nrt_event_t e;
    CHECK_OK(nrt_event_create(NRT_EVENT_DEFAULT, &e));
    CHECK(nrt_event_device(e) == -1);
    gate g;
    gate_init(&g);
    static log_t log;
    log_init(&log);
    log_entry ea = {&log, 1}, eb = {&log, 2};

    CHECK_OK(nrt_launch_host_func(a, gate_wait, &g));
    CHECK_OK(nrt_launch_host_func(a, log_append, &ea));
    CHECK_OK(nrt_event_record(e, a));
    CHECK(nrt_event_device(e) == 0);
    CHECK_OK(nrt_stream_wait_event(b, e));
    CHECK_OK(nrt_launch_host_func(b, log_append, &eb));

    sleep_ms(20);
    CHECK(log_count(&log) == 0); /* B's work did not run before A's */
    CHECK_STATUS(nrt_stream_query(a), NRT_ERROR_NOT_READY);
    CHECK_STATUS(nrt_stream_query(b), NRT_ERROR_NOT_READY);
    CHECK_STATUS(nrt_event_query(e), NRT_ERROR_NOT_READY);

    gate_open(&g);
    CHECK_OK(nrt_stream_synchronize(b));
    CHECK(log.n == 2 && log.v[0] == 1 && log.v[1] == 2);
    CHECK_OK(nrt_event_query(e));
    CHECK_OK(nrt_event_synchronize(e));
    CHECK_OK(nrt_stream_synchronize(a));
    CHECK_OK(nrt_stream_query(a));
    CHECK_OK(nrt_stream_query(b));
    CHECK_OK(nrt_event_destroy(e));
    CHECK_OK(nrt_stream_destroy(a));
    CHECK_OK(nrt_stream_destroy(b));
    gate_destroy(&g);
  }
}

/* A wait captures the event's record at the time of the call: a later
 * re-record does not affect it. */
static void test_wait_captures_current_record(void) {
  nrt_stream_t a, b;
  CHECK_OK(nrt_stream_create(0, 0, &a));
  CHECK_OK(nrt_stream_create(0, 0, &b));
  nrt_event_t e;
  CHECK_OK(nrt_event_create(0, &e));
  gate g1, g2;
  gate_init(&g1);
  gate_init(&g2);
  static log_t log;
  log_init(&log);
  log_entry eb = {&log, 7};
  CHECK_OK(nrt_launch_host_func(a, gate_wait, &g1));
  CHECK_OK(nrt_event_record(e, a));
  CHECK_OK(nrt_stream_wait_event(b, e));
  CHECK_OK(nrt_launch_host_func(b, log_append, &eb));
  CHECK_OK(nrt_launch_host_func(a, gate_wait, &g2));
  CHECK_OK(nrt_event_record(e, a)); /* second record, behind g2 */
  gate_open(&g1);
  CHECK_OK(nrt_stream_synchronize(b)); /* needs only the first record */
  CHECK(log_count(&log) == 1);
  CHECK_STATUS(nrt_event_query(e), NRT_ERROR_NOT_READY);
  gate_open(&g2);
  CHECK_OK(nrt_event_synchronize(e));
  CHECK_OK(nrt_event_query(e));
  CHECK_OK(nrt_event_destroy(e));
  CHECK_OK(nrt_stream_destroy(a));
  CHECK_OK(nrt_stream_destroy(b));
  gate_destroy(&g1);
  gate_destroy(&g2);
}

/* ---- events ----------------------------------------------------------- */

static void test_event_basics(void) {
  nrt_event_t e;
  CHECK_STATUS(nrt_event_create(0x100, &e), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_event_create(0, NULL), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_OK(nrt_event_create(NRT_EVENT_TIMING | NRT_EVENT_BLOCKING_SYNC, &e));
  /* Never recorded: complete. */
  CHECK_OK(nrt_event_query(e));
  CHECK_OK(nrt_event_synchronize(e));
  nrt_stream_t s;
  CHECK_OK(nrt_stream_get_pooled(2, 0, &s));
  CHECK_OK(nrt_event_record(e, s));
  CHECK(nrt_event_device(e) == 2);
  CHECK_OK(nrt_event_synchronize(e));
  CHECK_OK(nrt_event_query(e));
  /* Re-recording on an idle stream completes again. */
  CHECK_OK(nrt_event_record(e, s));
  CHECK_OK(nrt_stream_synchronize(s));
  CHECK_OK(nrt_event_query(e));
  CHECK_STATUS(nrt_event_record(NULL, s), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_event_record(e, NULL), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_event_query(NULL), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_event_synchronize(NULL), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_event_destroy(NULL), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_stream_wait_event(s, NULL), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_stream_wait_event(NULL, e), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_OK(nrt_event_destroy(e));
}

static void test_event_synchronize_waits(void) {
  nrt_stream_t s;
  CHECK_OK(nrt_stream_create(0, 0, &s));
  nrt_event_t e;
  CHECK_OK(nrt_event_create(NRT_EVENT_BLOCKING_SYNC, &e));
  gate g;
  gate_init(&g);
  CHECK_OK(nrt_launch_host_func(s, gate_wait, &g));
  CHECK_OK(nrt_event_record(e, s));
  CHECK_STATUS(nrt_event_query(e), NRT_ERROR_NOT_READY);
  delayed_open d;
  delayed_open_start(&d, &g, 20);
  CHECK_OK(nrt_event_synchronize(e));
  CHECK(atomic_load(&d.opened) == 1);
  CHECK_OK(nrt_event_query(e));
  delayed_open_join(&d);
  CHECK_OK(nrt_event_destroy(e));
  CHECK_OK(nrt_stream_destroy(s));
  gate_destroy(&g);
}

static void test_elapsed_time(void) {
  nrt_stream_t s;
  CHECK_OK(nrt_stream_get_pooled(0, 0, &s));
  nrt_event_t start, end, plain, never;
  CHECK_OK(nrt_event_create(NRT_EVENT_TIMING, &start));
  CHECK_OK(nrt_event_create(NRT_EVENT_TIMING, &end));
  CHECK_OK(nrt_event_create(NRT_EVENT_DEFAULT, &plain));
  CHECK_OK(nrt_event_create(NRT_EVENT_TIMING, &never));
  CHECK_OK(nrt_event_record(start, s));
  CHECK_OK(nrt_launch_host_func(s, sleep_20ms, NULL));
  CHECK_OK(nrt_event_record(end, s));
  CHECK_OK(nrt_event_record(plain, s));
  CHECK_OK(nrt_event_synchronize(end));
  float ms = -1.0f;
  CHECK_OK(nrt_event_elapsed_ms(start, end, &ms));
  CHECK(ms >= 15.0f);
  float back = 1.0f;
  CHECK_OK(nrt_event_elapsed_ms(end, start, &back));
  CHECK(back <= -15.0f);
  float same = -1.0f;
  CHECK_OK(nrt_event_elapsed_ms(start, start, &same));
  CHECK(same == 0.0f);

  /* Errors: no timing flag, never recorded, NULLs, not yet completed. */
  CHECK_OK(nrt_event_synchronize(plain));
  CHECK_STATUS(nrt_event_elapsed_ms(start, plain, &ms), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_event_elapsed_ms(plain, end, &ms), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(nrt_last_error(), "timing") != NULL);
  CHECK_STATUS(nrt_event_elapsed_ms(start, never, &ms), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_event_elapsed_ms(never, end, &ms), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(nrt_last_error(), "recorded") != NULL);
  CHECK_STATUS(nrt_event_elapsed_ms(start, end, NULL), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_event_elapsed_ms(NULL, end, &ms), NRT_ERROR_INVALID_ARGUMENT);

  gate g;
  gate_init(&g);
  CHECK_OK(nrt_launch_host_func(s, gate_wait, &g));
  CHECK_OK(nrt_event_record(never, s));
  CHECK_STATUS(nrt_event_elapsed_ms(start, never, &ms), NRT_ERROR_NOT_READY);
  gate_open(&g);
  CHECK_OK(nrt_event_synchronize(never));
  CHECK_OK(nrt_event_elapsed_ms(start, never, &ms));
  CHECK(ms >= 15.0f);
  gate_destroy(&g);

  CHECK_OK(nrt_event_destroy(start));
  CHECK_OK(nrt_event_destroy(end));
  CHECK_OK(nrt_event_destroy(plain));
  CHECK_OK(nrt_event_destroy(never));
}

static void test_wait_never_recorded(void) {
  nrt_stream_t s;
  CHECK_OK(nrt_stream_get_pooled(0, 0, &s));
  nrt_event_t e;
  CHECK_OK(nrt_event_create(0, &e));
  CHECK_OK(nrt_stream_wait_event(s, e)); /* a no-op */
  static log_t log;
  log_init(&log);
  log_entry entry = {&log, 1};
  CHECK_OK(nrt_launch_host_func(s, log_append, &entry));
  CHECK_OK(nrt_stream_synchronize(s));
  CHECK(log.n == 1);
  /* Waiting on a completed event is a no-op too. */
  CHECK_OK(nrt_event_record(e, s));
  CHECK_OK(nrt_event_synchronize(e));
  CHECK_OK(nrt_stream_wait_event(s, e));
  CHECK_OK(nrt_stream_synchronize(s));
  CHECK_OK(nrt_event_destroy(e));
}

static void test_destroy_event_with_work_queued(void) {
  nrt_stream_t a, b;
  CHECK_OK(nrt_stream_create(0, 0, &a));
  CHECK_OK(nrt_stream_create(0, 0, &b));
  gate g;
  gate_init(&g);
  static log_t log;
  log_init(&log);
  log_entry eb = {&log, 1};
  nrt_event_t e;
  CHECK_OK(nrt_event_create(NRT_EVENT_TIMING, &e));
  CHECK_OK(nrt_launch_host_func(a, gate_wait, &g));
  CHECK_OK(nrt_event_record(e, a));     /* record queued behind the gate */
  CHECK_OK(nrt_stream_wait_event(b, e)); /* and a wait on another stream */
  CHECK_OK(nrt_launch_host_func(b, log_append, &eb));
  CHECK_OK(nrt_event_destroy(e));
  sleep_ms(5);
  CHECK(log_count(&log) == 0); /* the wait still holds b */
  gate_open(&g);
  CHECK_OK(nrt_stream_synchronize(a));
  CHECK_OK(nrt_stream_synchronize(b));
  CHECK(log.n == 1);
  CHECK_OK(nrt_stream_destroy(a));
  CHECK_OK(nrt_stream_destroy(b));
  gate_destroy(&g);
}

/* ---- stream identity -------------------------------------------------- */

static void test_stream_ids(void) {
  int32_t least = 99, greatest = 99;
  CHECK_OK(nrt_stream_priority_range(&least, &greatest));
  CHECK(least == NRT_STREAM_PRIORITY_NORMAL && least == 0);
  CHECK(greatest == NRT_STREAM_PRIORITY_HIGH && greatest == -1);
  CHECK_STATUS(nrt_stream_priority_range(NULL, &greatest), NRT_ERROR_INVALID_ARGUMENT);

  int32_t count = 0;
  CHECK_OK(nrt_device_count(&count));
  for (int32_t d = 0; d < count; d++) {
    nrt_stream_t def, def2, back;
    CHECK_OK(nrt_stream_get_default(d, &def));
    CHECK_OK(nrt_stream_get_default(d, &def2));
    CHECK(def == def2);
    CHECK(nrt_stream_id(def) == 0);
    CHECK(nrt_stream_device(def) == d);
    CHECK(nrt_stream_priority(def) == NRT_STREAM_PRIORITY_NORMAL);
    CHECK_OK(nrt_stream_from_id(d, 0, &back));
    CHECK(back == def);
  }
  nrt_stream_t s;
  CHECK_STATUS(nrt_stream_get_default(count, &s), NRT_ERROR_INVALID_DEVICE);
  CHECK_STATUS(nrt_stream_get_pooled(-1, 0, &s), NRT_ERROR_INVALID_DEVICE);
  CHECK_STATUS(nrt_stream_create(count, 0, &s), NRT_ERROR_INVALID_DEVICE);
  CHECK_STATUS(nrt_stream_from_id(count, 0, &s), NRT_ERROR_INVALID_DEVICE);

  /* The pools hand out NRT_STREAM_POOL_SIZE distinct streams round robin. */
  for (int high = 0; high < 2; high++) {
    int32_t priority = high ? NRT_STREAM_PRIORITY_HIGH : NRT_STREAM_PRIORITY_NORMAL;
    nrt_stream_t first[NRT_STREAM_POOL_SIZE];
    for (int i = 0; i < NRT_STREAM_POOL_SIZE; i++) {
      CHECK_OK(nrt_stream_get_pooled(3, priority, &first[i]));
      CHECK(nrt_stream_id(first[i]) != 0);
      CHECK(nrt_stream_device(first[i]) == 3);
      CHECK(nrt_stream_priority(first[i]) == priority);
      for (int j = 0; j < i; j++) CHECK(first[j] != first[i]);
      nrt_stream_t back = NULL;
      CHECK_OK(nrt_stream_from_id(3, nrt_stream_id(first[i]), &back));
      CHECK(back == first[i]);
    }
    for (int i = 0; i < NRT_STREAM_POOL_SIZE; i++) {
      nrt_stream_t again;
      CHECK_OK(nrt_stream_get_pooled(3, priority, &again));
      CHECK(again == first[i]);
    }
  }
  /* Priorities outside the range are clamped into it. */
  CHECK_OK(nrt_stream_get_pooled(3, -7, &s));
  CHECK(nrt_stream_priority(s) == NRT_STREAM_PRIORITY_HIGH);
  CHECK_OK(nrt_stream_get_pooled(3, 5, &s));
  CHECK(nrt_stream_priority(s) == NRT_STREAM_PRIORITY_NORMAL);

  /* A pooled stream looked up by id before being handed out keeps the
   * pool's priority. */
  nrt_stream_t fresh;
  CHECK_OK(nrt_stream_get_pooled(2, NRT_STREAM_PRIORITY_HIGH, &fresh));
  int64_t high_id = nrt_stream_id(fresh);
  CHECK_OK(nrt_stream_from_id(1, high_id, &fresh));
  CHECK(nrt_stream_priority(fresh) == NRT_STREAM_PRIORITY_HIGH);
  CHECK(nrt_stream_device(fresh) == 1);

  CHECK_STATUS(nrt_stream_from_id(0, -1, &s), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_stream_from_id(0, 1 << 20, &s), NRT_ERROR_INVALID_ARGUMENT);
}

static void test_stream_create_destroy(void) {
  nrt_stream_t s, t, back;
  CHECK_STATUS(nrt_stream_create(0, 0, NULL), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_OK(nrt_stream_create(1, NRT_STREAM_PRIORITY_HIGH, &s));
  CHECK_OK(nrt_stream_create(1, -9, &t));
  CHECK(nrt_stream_priority(s) == NRT_STREAM_PRIORITY_HIGH);
  CHECK(nrt_stream_priority(t) == NRT_STREAM_PRIORITY_HIGH);
  CHECK(nrt_stream_device(s) == 1);
  int64_t sid = nrt_stream_id(s), tid = nrt_stream_id(t);
  CHECK(sid > 2 * NRT_STREAM_POOL_SIZE); /* beyond the default and the pools */
  CHECK(tid != sid);
  CHECK_OK(nrt_stream_from_id(1, sid, &back));
  CHECK(back == s);

  /* Destroy waits for the stream's work. */
  gate g;
  gate_init(&g);
  static log_t log;
  log_init(&log);
  log_entry entry = {&log, 5};
  CHECK_OK(nrt_launch_host_func(s, gate_wait, &g));
  CHECK_OK(nrt_launch_host_func(s, log_append, &entry));
  delayed_open d;
  delayed_open_start(&d, &g, 20);
  CHECK_OK(nrt_stream_destroy(s));
  CHECK(atomic_load(&d.opened) == 1);
  CHECK(log.n == 1);
  delayed_open_join(&d);
  CHECK_STATUS(nrt_stream_from_id(1, sid, &back), NRT_ERROR_INVALID_ARGUMENT);
  /* A stream that never ran anything (no worker yet). */
  CHECK_OK(nrt_stream_destroy(t));
  CHECK_STATUS(nrt_stream_from_id(1, tid, &back), NRT_ERROR_INVALID_ARGUMENT);
  /* Ids are not reused. */
  CHECK_OK(nrt_stream_create(1, 0, &s));
  CHECK(nrt_stream_id(s) != sid && nrt_stream_id(s) != tid);
  CHECK_OK(nrt_stream_destroy(s));

  /* The default and pooled streams cannot be destroyed. */
  CHECK_OK(nrt_stream_get_default(0, &s));
  CHECK_STATUS(nrt_stream_destroy(s), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_OK(nrt_stream_get_pooled(0, 0, &s));
  CHECK_STATUS(nrt_stream_destroy(s), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_stream_destroy(NULL), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_stream_synchronize(NULL), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_stream_query(NULL), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_OK(nrt_stream_synchronize(s));
  gate_destroy(&g);
}

static void test_launch_arguments(void) {
  nrt_stream_t s;
  CHECK_OK(nrt_stream_get_default(0, &s));
  nrt_op op = fill_op(NULL, NRT_FLOAT32, 4, 1.0);
  CHECK_STATUS(nrt_launch(NULL, &op), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_launch(s, NULL), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_launch_host_func(s, NULL, NULL), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_launch_host_func(NULL, sleep_20ms, NULL), NRT_ERROR_INVALID_ARGUMENT);
  /* A view outside device memory is refused at launch, not asynchronously. */
  float host[4];
  op = fill_op(host, NRT_FLOAT32, 4, 1.0);
  CHECK_STATUS(nrt_launch(s, &op), NRT_ERROR_INVALID_ARGUMENT);
  op = fill_op(NULL, NRT_FLOAT32, 4, 1.0);
  CHECK_STATUS(nrt_launch(s, &op), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_OK(nrt_stream_synchronize(s)); /* nothing sticky */
}

/* ---- copies ----------------------------------------------------------- */

static void fill_pattern(unsigned char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(i * 31u + seed);
}

static int has_pattern(const unsigned char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != (unsigned char)(i * 31u + seed)) return 0;
  return 1;
}

static void test_memcpy(void) {
  enum { N = 3 * 4096 + 123 };
  nrt_stream_t s0, s1;
  CHECK_OK(nrt_stream_get_default(0, &s0));
  CHECK_OK(nrt_stream_get_pooled(1, 0, &s1));
  unsigned char *host = malloc(N), *back = malloc(N);
  void *d0 = dev_alloc(0, N), *d0b = dev_alloc(0, N), *d1 = dev_alloc(1, N);
  fill_pattern(host, N, 7);
  memset(back, 0, N);

  CHECK_OK(nrt_memcpy_async(s0, d0, host, N));                 /* host -> device */
  CHECK(has_pattern(nrt_device_to_host(d0), N, 7));             /* pageable: done */
  CHECK_OK(nrt_memcpy_async(s0, d0b, d0, N));                  /* same device */
  CHECK_OK(nrt_memcpy_async(s0, d1, d0b, N));                  /* across devices */
  CHECK_OK(nrt_stream_synchronize(s0));
  CHECK(has_pattern(nrt_device_to_host(d0b), N, 7));
  CHECK(has_pattern(nrt_device_to_host(d1), N, 7));
  CHECK_OK(nrt_memcpy_async(s1, back, d1, N));                 /* device -> host */
  CHECK(has_pattern(back, N, 7));
  /* Part of a buffer, at an offset. */
  memset(back, 0, N);
  CHECK_OK(nrt_memcpy_async(s1, back + 5, (char *)d1 + 5, 100));
  CHECK(back[4] == 0 && back[105] == 0);
  CHECK(has_pattern(back + 5, 100, 7 + 5 * 31));
  /* Host to host, through the stream. */
  memset(back, 0, N);
  CHECK_OK(nrt_memcpy_async(s1, back, host, N));
  CHECK(has_pattern(back, N, 7));

  /* Zero bytes is a no-op, even with NULL pointers. */
  CHECK_OK(nrt_memcpy_async(s0, NULL, NULL, 0));
  CHECK_STATUS(nrt_memcpy_async(s0, NULL, host, 4), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_memcpy_async(s0, d0, NULL, 4), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_memcpy_async(NULL, d0, host, 4), NRT_ERROR_INVALID_ARGUMENT);
  /* A device range running past the end of device memory: the first
   * allocation on an untouched device sits at the arena's start, so the
   * capacity past it is the arena's end. */
  size_t free_bytes, total;
  CHECK_OK(nrt_mem_get_info(3, &free_bytes, &total));
  void *big = dev_alloc(3, 1 << 20);
  char *near_end = (char *)big + total - 16;
  int32_t owner = -1;
  if (nrt_pointer_get_device(near_end, &owner) == NRT_SUCCESS && owner == 3) {
    CHECK_STATUS(nrt_memcpy_async(s0, near_end, host, 4096), NRT_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(nrt_memcpy_async(s0, host, near_end, 4096), NRT_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(nrt_last_error(), "past the end") != NULL);
    CHECK_OK(nrt_memcpy_async(s0, host, near_end, 16));
  } else {
    fprintf(stderr, "  (skipped the past-the-end copy: arena layout unknown)\n");
  }
  CHECK_OK(nrt_stream_synchronize(s0));

  CHECK_OK(nrt_free(big));
  CHECK_OK(nrt_free(d0));
  CHECK_OK(nrt_free(d0b));
  CHECK_OK(nrt_free(d1));
  free(host);
  free(back);
}

/* Pinned memory copies are queued and return at once; pageable copies
 * return only when done. */
static void test_pinned_async(void) {
  enum { N = 64 * 1024 };
  nrt_stream_t s;
  CHECK_OK(nrt_stream_create(0, 0, &s));
  unsigned char *pin_src = NULL, *pin_dst = NULL;
  CHECK_OK(nrt_host_alloc(N, (void **)&pin_src));
  CHECK_OK(nrt_host_alloc(N, (void **)&pin_dst));
  CHECK(nrt_host_is_pinned(pin_src, NULL, NULL));
  void *dev = dev_alloc(0, N);
  fill_pattern(pin_src, N, 3);
  memset(pin_dst, 0xee, N);

  gate g;
  gate_init(&g);
  CHECK_OK(nrt_launch_host_func(s, gate_wait, &g));
  CHECK_OK(nrt_memcpy_async(s, dev, pin_src, N)); /* returns while busy */
  CHECK_OK(nrt_memcpy_async(s, pin_dst, dev, N));
  CHECK_STATUS(nrt_stream_query(s), NRT_ERROR_NOT_READY);
  sleep_ms(5);
  CHECK(pin_dst[0] == 0xee && pin_dst[N - 1] == 0xee); /* not copied yet */
  gate_open(&g);
  CHECK_OK(nrt_stream_synchronize(s));
  CHECK(has_pattern(pin_dst, N, 3));
  gate_destroy(&g);

  /* Pageable destination: the call waits for the stream to reach it. */
  gate_init(&g);
  unsigned char *pageable = malloc(N);
  memset(pageable, 0, N);
  CHECK_OK(nrt_launch_host_func(s, gate_wait, &g));
  delayed_open d;
  delayed_open_start(&d, &g, 30);
  CHECK_OK(nrt_memcpy_async(s, pageable, dev, N));
  CHECK(atomic_load(&d.opened) == 1);
  CHECK(has_pattern(pageable, N, 3));
  CHECK_OK(nrt_stream_query(s));
  delayed_open_join(&d);
  gate_destroy(&g);

  /* Pageable source, too. */
  gate_init(&g);
  fill_pattern(pageable, N, 11);
  CHECK_OK(nrt_launch_host_func(s, gate_wait, &g));
  delayed_open_start(&d, &g, 30);
  CHECK_OK(nrt_memcpy_async(s, dev, pageable, N));
  CHECK(atomic_load(&d.opened) == 1);
  memset(pageable, 0, N); /* the caller may reuse it at once */
  CHECK(has_pattern(nrt_device_to_host(dev), N, 11));
  delayed_open_join(&d);
  gate_destroy(&g);

  /* Freeing a pinned buffer with a copy still queued is safe. */
  gate_init(&g);
  CHECK_OK(nrt_launch_host_func(s, gate_wait, &g));
  CHECK_OK(nrt_memcpy_async(s, dev, pin_src, N));
  CHECK_OK(nrt_host_free(pin_src));
  gate_open(&g);
  CHECK_OK(nrt_stream_synchronize(s));
  CHECK(has_pattern(nrt_device_to_host(dev), N, 3));
  gate_destroy(&g);

  free(pageable);
  CHECK_OK(nrt_host_free(pin_dst));
  CHECK_OK(nrt_free(dev));
  CHECK_OK(nrt_stream_destroy(s));
}

/* ---- sticky asynchronous errors -------------------------------------- */

static void test_sticky_error(void) {
  nrt_stream_t s, other;
  CHECK_OK(nrt_stream_create(0, 0, &s));
  CHECK_OK(nrt_stream_create(0, 0, &other));
  float *a = dev_alloc(0, 4096), *b = dev_alloc(0, 4096);
  nrt_op fill_a = fill_op(a, NRT_FLOAT32, 8, 1.0);
  CHECK_OK(nrt_op_execute(&fill_a));
  static log_t log;
  log_init(&log);
  log_entry entry = {&log, 9};
  nrt_event_t e;
  CHECK_OK(nrt_event_create(0, &e));

  nrt_op bad = bad_copy_op(b, a);
  CHECK_OK(nrt_launch(s, &bad)); /* accepted: it fails in the kernel */
  nrt_op fill_2 = fill_op(a, NRT_FLOAT32, 8, 2.0);
  CHECK_SKIPPED_OR_REFUSED(nrt_launch(s, &fill_2), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_OK(nrt_launch_host_func(s, log_append, &entry)); /* still runs */
  CHECK_OK(nrt_event_record(e, s));                       /* still completes */
  /* The event reached after the failure carries it, and so does a stream
   * that waits on it: what follows there depends on skipped work. */
  CHECK_STATUS(nrt_event_synchronize(e), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(nrt_last_error(), "copy") != NULL);
  CHECK_STATUS(nrt_event_query(e), NRT_ERROR_INVALID_ARGUMENT);
  nrt_stream_t waiter;
  CHECK_OK(nrt_stream_create(0, 0, &waiter));
  CHECK_OK(nrt_stream_wait_event(waiter, e));
  nrt_op fill_3 = fill_op(b, NRT_FLOAT32, 8, 3.0);
  CHECK_STATUS(nrt_stream_synchronize(waiter), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(nrt_last_error(), "waited on an event whose work failed") != NULL);
  CHECK(strstr(nrt_last_error(), "copy") != NULL);
  CHECK_STATUS(nrt_launch(waiter, &fill_3), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_OK(nrt_stream_clear_error(waiter));
  CHECK_OK(nrt_stream_destroy(waiter));
  CHECK_OK(nrt_stream_synchronize(other)); /* other streams are unaffected */

  CHECK_STATUS(nrt_stream_synchronize(s), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(nrt_last_error(), "copy") != NULL);
  CHECK(strstr(nrt_last_error(), "shape") != NULL);
  CHECK(host_f32(a)[0] == 1.0f && host_f32(a)[7] == 1.0f); /* fill skipped */
  CHECK(log.n == 1);
  /* Every later reader hears of it, not only the first. */
  CHECK_STATUS(nrt_stream_synchronize(s), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_stream_query(s), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_device_synchronize(0), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(nrt_last_error(), "copy") != NULL);
  float host[8] = {0};
  CHECK_STATUS(nrt_memcpy_async(s, host, a, sizeof host), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(host[0] == 0.0f); /* refused */
  CHECK_STATUS(nrt_launch(s, &fill_2), NRT_ERROR_INVALID_ARGUMENT); /* refused */
  CHECK(strstr(nrt_last_error(), "copy") != NULL);
  CHECK(strstr(nrt_last_error(), "cleared") != NULL);

  /* Cleared, work runs again. */
  CHECK_OK(nrt_stream_clear_error(s));
  CHECK_OK(nrt_stream_query(s));
  CHECK_OK(nrt_launch(s, &fill_2));
  CHECK_OK(nrt_stream_synchronize(s));
  CHECK(host_f32(a)[0] == 2.0f && host_f32(a)[7] == 2.0f);
  CHECK_OK(nrt_event_record(e, s)); /* a new record on a good stream is good */
  CHECK_OK(nrt_event_synchronize(e));

  /* Only the first error is kept. */
  nrt_op bad_fill = fill_a;
  bad_fill.num_scalars = 0; /* fill needs its value: a kernel error */
  CHECK_OK(nrt_launch(s, &bad));
  CHECK_OK(nrt_launch_host_func(s, do_nothing, NULL)); /* bookkeeping is still taken */
  CHECK_STATUS(nrt_stream_synchronize(s), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_launch(s, &bad_fill), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(nrt_last_error(), "copy") != NULL);
  CHECK_OK(nrt_device_clear_errors(0));
  CHECK_OK(nrt_stream_synchronize(s));

  /* nrt_device_synchronize reports it too. */
  CHECK_OK(nrt_launch(s, &bad_fill));
  CHECK_STATUS(nrt_device_synchronize(0), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(nrt_last_error(), "fill") != NULL);
  CHECK_STATUS(nrt_device_synchronize(0), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_OK(nrt_device_clear_errors(0));
  CHECK_OK(nrt_device_synchronize(0));

  /* A copy that waits for completion (pageable) reports it. */
  CHECK_OK(nrt_launch(s, &bad));
  CHECK_STATUS(nrt_memcpy_async(s, host, a, sizeof host), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(nrt_last_error(), "copy") != NULL);
  CHECK(host[0] == 0.0f); /* the copy itself was skipped */
  CHECK_OK(nrt_stream_clear_error(s));
  CHECK_OK(nrt_memcpy_async(s, host, a, sizeof host));
  CHECK(host[0] == 2.0f);

  CHECK_OK(nrt_event_destroy(e));
  CHECK_OK(nrt_free(a));
  CHECK_OK(nrt_free(b));
  CHECK_OK(nrt_stream_destroy(s));
  CHECK_OK(nrt_stream_destroy(other));
}

/* Destroying a stream whose work failed returns the error. */
/* Host tasks behave like kernels: an error becomes sticky under the task's
 * name, tasks after it are skipped, and release runs exactly once for every
 * task, run or skipped, and at once when queuing fails. */
typedef struct task_counts {
  atomic_int runs, releases;
  nrt_status result;
} task_counts;

static nrt_status task_run(void *arg) {
  task_counts *c = arg;
  atomic_fetch_add(&c->runs, 1);
  return c->result ? rt_fail(c->result, "the task failed") : NRT_SUCCESS;
}

static void task_release(void *arg) { atomic_fetch_add(&((task_counts *)arg)->releases, 1); }

static void test_host_task_errors_are_sticky(void) {
  nrt_stream_t s;
  CHECK_OK(nrt_stream_create(0, 0, &s));
  static task_counts failing = {.result = NRT_ERROR_OUT_OF_MEMORY}, ok;
  CHECK_OK(nrt_launch_host_task(s, "my task", task_run, task_release, &failing));
  CHECK_SKIPPED_OR_REFUSED(nrt_launch_host_task(s, "later", task_run, task_release, &ok),
                           NRT_ERROR_OUT_OF_MEMORY);
  CHECK_STATUS(nrt_stream_synchronize(s), NRT_ERROR_OUT_OF_MEMORY);
  CHECK(strstr(nrt_last_error(), "my task: the task failed") != NULL);
  CHECK(atomic_load(&failing.runs) == 1 && atomic_load(&failing.releases) == 1);
  CHECK(atomic_load(&ok.runs) == 0 && atomic_load(&ok.releases) == 1);
  /* Refused while the error stands, and released at once. */
  CHECK_STATUS(nrt_launch_host_task(s, "refused", task_run, task_release, &ok),
               NRT_ERROR_OUT_OF_MEMORY);
  CHECK(atomic_load(&ok.runs) == 0 && atomic_load(&ok.releases) == 2);
  CHECK_OK(nrt_stream_clear_error(s));
  CHECK_OK(nrt_launch_host_task(s, NULL, task_run, NULL, &ok));
  CHECK_OK(nrt_stream_synchronize(s));
  CHECK(atomic_load(&ok.runs) == 1);
  CHECK_STATUS(nrt_launch_host_task(s, "no run", NULL, task_release, &ok),
               NRT_ERROR_INVALID_ARGUMENT);
  CHECK(atomic_load(&ok.releases) == 3);
  /* A task's own status is the one reported (the c10d backend's). */
  static task_counts peer = {.result = NRT_ERROR_DISTRIBUTED};
  CHECK_OK(nrt_launch_host_task(s, "collective", task_run, task_release, &peer));
  CHECK_STATUS(nrt_stream_synchronize(s), NRT_ERROR_DISTRIBUTED);
  CHECK(strcmp(nrt_status_string(NRT_ERROR_DISTRIBUTED), "NRT_ERROR_DISTRIBUTED") == 0);
  CHECK_OK(nrt_stream_clear_error(s));
  CHECK_OK(nrt_stream_destroy(s));
}

static void test_destroy_reports_error(void) {
  nrt_stream_t s;
  CHECK_OK(nrt_stream_create(0, 0, &s));
  float *a = dev_alloc(0, 4096), *b = dev_alloc(0, 4096);
  nrt_op bad = bad_copy_op(b, a);
  CHECK_OK(nrt_launch(s, &bad));
  CHECK_STATUS(nrt_stream_destroy(s), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(nrt_last_error(), "copy") != NULL);
  CHECK_OK(nrt_free(a));
  CHECK_OK(nrt_free(b));
}

/* Child: NEURON_LAUNCH_BLOCKING=1. */
static void case_launch_blocking(void) {
  CHECK(nrt_launch_blocking() == 1);
  nrt_stream_t s;
  CHECK_OK(nrt_stream_get_default(0, &s));
  float *a = dev_alloc(0, 4096), *b = dev_alloc(0, 4096);
  nrt_op fill_a = fill_op(a, NRT_FLOAT32, 8, 3.0);
  CHECK_OK(nrt_launch(s, &fill_a));
  CHECK(host_f32(a)[7] == 3.0f); /* complete on return, no synchronize */
  nrt_op bad = bad_copy_op(b, a);
  CHECK_STATUS(nrt_launch(s, &bad), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(nrt_last_error(), "copy") != NULL);
  CHECK_STATUS(nrt_stream_synchronize(s), NRT_ERROR_INVALID_ARGUMENT); /* sticky all the same */
  CHECK_OK(nrt_stream_clear_error(s));
  static log_t log;
  log_init(&log);
  log_entry entry = {&log, 1};
  CHECK_OK(nrt_launch_host_func(s, log_append, &entry));
  CHECK(log.n == 1);
  /* Copies between device buffers complete before returning as well. */
  CHECK_OK(nrt_memcpy_async(s, b, a, 32));
  CHECK(host_f32(b)[7] == 3.0f);
  nrt_event_t e;
  CHECK_OK(nrt_event_create(0, &e));
  CHECK_OK(nrt_event_record(e, s));
  CHECK_OK(nrt_event_query(e));
  CHECK_OK(nrt_event_destroy(e));
  CHECK_OK(nrt_free(a));
  CHECK_OK(nrt_free(b));
}

static void test_launch_blocking(void) {
  const char *env[] = {"NEURON_LAUNCH_BLOCKING=1", NULL};
  CHECK(child_run("launch_blocking", env) == 0);
}

/* ---- threads ---------------------------------------------------------- */

#define STRESS_THREADS 4
#define STRESS_ITERS 150
#define STRESS_N 256

typedef struct stress_arg {
  int index;
  nrt_stream_t shared;
  float *region;   /* this thread's part of a shared buffer */
  float *mirror;   /* copied from region on another stream, event-ordered */
  atomic_int *counter;
} stress_arg;

static void bump(void *arg) { atomic_fetch_add((atomic_int *)arg, 1); }

static void *stress_main(void *p) {
  stress_arg *a = p;
  nrt_stream_t own, created;
  CHECK_OK(nrt_stream_get_pooled(a->index % 2, 0, &own));
  CHECK_OK(nrt_stream_create(a->index % 2, 0, &created));
  nrt_event_t e, back;
  CHECK_OK(nrt_event_create(0, &e));
  CHECK_OK(nrt_event_create(0, &back));
  for (int i = 0; i < STRESS_ITERS; i++) {
    /* In-order on the shared stream: the last fill wins. */
    nrt_op fill = fill_op(a->region, NRT_FLOAT32, STRESS_N, (double)(a->index * 1000 + i));
    CHECK_OK(nrt_launch(a->shared, &fill));
    CHECK_OK(nrt_launch_host_func(a->shared, bump, a->counter));
    CHECK_OK(nrt_launch_host_func(own, bump, a->counter));
    if (i % 10 == 0) {
      /* Mirror the region on another stream, after the fill. */
      CHECK_OK(nrt_event_record(e, a->shared));
      CHECK_OK(nrt_stream_wait_event(created, e));
      CHECK_OK(nrt_memcpy_async(created, a->mirror, a->region, STRESS_N * sizeof(float)));
      CHECK_OK(nrt_launch_host_func(created, bump, a->counter));
      /* ... and before the next fill. */
      CHECK_OK(nrt_event_record(back, created));
      CHECK_OK(nrt_stream_wait_event(a->shared, back));
    }
    if (i % 50 == 0) {
      nrt_stream_t temp;
      CHECK_OK(nrt_stream_create(a->index % 2, 0, &temp));
      CHECK_OK(nrt_launch_host_func(temp, bump, a->counter));
      CHECK_OK(nrt_stream_destroy(temp));
    }
    if (i % 37 == 0) CHECK_OK(nrt_device_synchronize(a->index % 2));
  }
  CHECK_OK(nrt_stream_synchronize(created));
  /* The mirror holds the fill of the last multiple of 10. */
  int last = (STRESS_ITERS - 1) / 10 * 10;
  const float *m = nrt_device_to_host(a->mirror);
  CHECK(m[0] == (float)(a->index * 1000 + last) && m[STRESS_N - 1] == m[0]);
  CHECK_OK(nrt_stream_destroy(created));
  CHECK_OK(nrt_event_destroy(e));
  CHECK_OK(nrt_event_destroy(back));
  return NULL;
}

static void test_threads(void) {
  nrt_stream_t shared;
  CHECK_OK(nrt_stream_get_pooled(0, NRT_STREAM_PRIORITY_HIGH, &shared));
  float *buf = dev_alloc(0, STRESS_THREADS * STRESS_N * sizeof(float));
  atomic_int counter;
  atomic_init(&counter, 0);
  pthread_t threads[STRESS_THREADS];
  stress_arg args[STRESS_THREADS];
  for (int t = 0; t < STRESS_THREADS; t++) {
    args[t] = (stress_arg){t, shared, buf + t * STRESS_N,
                           dev_alloc(t % 2, STRESS_N * sizeof(float)), &counter};
    CHECK(pthread_create(&threads[t], NULL, stress_main, &args[t]) == 0);
  }
  for (int t = 0; t < STRESS_THREADS; t++) pthread_join(threads[t], NULL);
  CHECK_OK(nrt_device_synchronize(0));
  CHECK_OK(nrt_device_synchronize(1));
  int per_thread = 2 * STRESS_ITERS + (STRESS_ITERS + 9) / 10 + (STRESS_ITERS + 49) / 50;
  CHECK(atomic_load(&counter) == STRESS_THREADS * per_thread);
  const float *h = nrt_device_to_host(buf);
  for (int t = 0; t < STRESS_THREADS; t++) {
    int ok = 1;
    for (int i = 0; i < STRESS_N; i++)
      ok &= h[t * STRESS_N + i] == (float)(t * 1000 + STRESS_ITERS - 1);
    CHECK(ok);
    CHECK_OK(nrt_free(args[t].mirror));
  }
  CHECK_OK(nrt_free(buf));
}

/* Several producers on one stream with the ring full: each waits for room
 * while the others submit and the worker completes past what it last saw.
 * The stream is held at first so the ring fills to its largest depth; a
 * hang is turned into a failure by join_or_die. */
#define PRODUCER_LAUNCHES 6000
#define PRODUCER_N 64
typedef struct producer_arg {
  nrt_stream_t s;
  float *region; /* device memory of this producer's fills */
  atomic_int *counter;
  int index;
} producer_arg;

static void *producer_main(void *p) {
  producer_arg *a = p;
  for (int i = 0; i < PRODUCER_LAUNCHES; i++) {
    if (i % 2) {
      CHECK_OK(nrt_launch_host_func(a->s, bump_counter, a->counter));
    } else {
      nrt_op fill = fill_op(a->region, NRT_FLOAT32, PRODUCER_N, (double)i);
      CHECK_OK(nrt_launch(a->s, &fill));
    }
    if (i % 1000 == 999 && a->index == 0) CHECK_OK(nrt_stream_synchronize(a->s));
  }
  return NULL;
}

static void run_producers(int producers) {
  nrt_stream_t s;
  CHECK_OK(nrt_stream_create(0, 0, &s));
  gate g;
  gate_init(&g);
  CHECK_OK(nrt_launch_host_func(s, gate_wait, &g));
  delayed_open d;
  delayed_open_start(&d, &g, 20);
  float *buf = dev_alloc(0, (size_t)producers * PRODUCER_N * sizeof(float));
  atomic_int counter;
  atomic_init(&counter, 0);
  pthread_t threads[8];
  producer_arg args[8];
  for (int t = 0; t < producers; t++) {
    args[t] = (producer_arg){s, buf + t * PRODUCER_N, &counter, t};
    CHECK(pthread_create(&threads[t], NULL, producer_main, &args[t]) == 0);
  }
  for (int t = 0; t < producers; t++) join_or_die(threads[t], 120, "producers on one stream");
  CHECK_OK(nrt_stream_synchronize(s));
  CHECK(atomic_load(&counter) == producers * PRODUCER_LAUNCHES / 2);
  const float *h = host_f32(buf);
  for (int t = 0; t < producers; t++) /* each producer's last fill won */
    CHECK(h[t * PRODUCER_N] == (float)(PRODUCER_LAUNCHES - 2) &&
          h[t * PRODUCER_N + PRODUCER_N - 1] == (float)(PRODUCER_LAUNCHES - 2));
  delayed_open_join(&d);
  CHECK_OK(nrt_free(buf));
  CHECK_OK(nrt_stream_destroy(s));
  gate_destroy(&g);
}

static void test_two_producers_full_ring(void) { run_producers(2); }
static void test_four_producers_full_ring(void) { run_producers(4); }

/* A tiny ring is full at almost every launch, so a producer that waited
 * nearly always finds that the others submitted and the worker completed
 * meanwhile: the case the protocol must get right. */
static void test_producers_on_a_tiny_ring(void) {
  for (uint64_t depth = 2; depth <= 16; depth *= 2) {
    rt_stream_limit_ring_depth(depth);
    run_producers(4);
    run_producers(2);
  }
  rt_stream_limit_ring_depth(0);
}

/* Many threads wait on and synchronize one stream at once. */
typedef struct waiter_arg {
  nrt_stream_t s;
  nrt_event_t e;
} waiter_arg;

static void *waiter_main(void *p) {
  waiter_arg *w = p;
  CHECK_OK(nrt_event_synchronize(w->e));
  CHECK_OK(nrt_stream_synchronize(w->s));
  return NULL;
}

static void test_concurrent_waiters(void) {
  nrt_stream_t s;
  CHECK_OK(nrt_stream_create(0, 0, &s));
  nrt_event_t e;
  CHECK_OK(nrt_event_create(0, &e));
  gate g;
  gate_init(&g);
  CHECK_OK(nrt_launch_host_func(s, gate_wait, &g));
  CHECK_OK(nrt_event_record(e, s));
  waiter_arg w = {s, e};
  pthread_t threads[4];
  for (int t = 0; t < 4; t++) CHECK(pthread_create(&threads[t], NULL, waiter_main, &w) == 0);
  sleep_ms(5);
  gate_open(&g);
  for (int t = 0; t < 4; t++) pthread_join(threads[t], NULL);
  CHECK_OK(nrt_event_destroy(e));
  CHECK_OK(nrt_stream_destroy(s));
  gate_destroy(&g);
}

static int run_case(const char *name) {
  if (strcmp(name, "launch_blocking") == 0) {
    case_launch_blocking();
    return CHECK_MAIN_RESULT();
  }
  fprintf(stderr, "unknown case %s\n", name);
  return 2;
}

int main(int argc, char **argv) {
  if (child_is_case(argc, argv)) return run_case(argv[2]);
  double t0 = now_ms();
  RUN(test_in_order);
  RUN(test_ring_grows_for_a_step);
  RUN(test_full_ring_waits);
  RUN(test_streams_independent);
  RUN(test_event_orders_streams);
  RUN(test_wait_captures_current_record);
  RUN(test_event_basics);
  RUN(test_event_synchronize_waits);
  RUN(test_elapsed_time);
  RUN(test_wait_never_recorded);
  RUN(test_destroy_event_with_work_queued);
  RUN(test_stream_ids);
  RUN(test_stream_create_destroy);
  RUN(test_launch_arguments);
  RUN(test_memcpy);
  RUN(test_pinned_async);
  RUN(test_sticky_error);
  RUN(test_host_task_errors_are_sticky);
  RUN(test_destroy_reports_error);
  RUN(test_launch_blocking);
  RUN(test_threads);
  RUN(test_two_producers_full_ring);
  RUN(test_four_producers_full_ring);
  RUN(test_producers_on_a_tiny_ring);
  RUN(test_concurrent_waiters);
  fprintf(stderr, "(%.0f ms)\n", now_ms() - t0);
  return CHECK_MAIN_RESULT();
}
