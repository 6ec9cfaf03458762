/* A synchroniser runs small queued work itself (stream.c, run_inline).
 *
 * When no thread is running a stream's commands, a synchronize runs the
 * small ops, copies and event records it waits for on its own thread
 * instead of handing them to the worker. These tests check that stream
 * order, errors and events are what they are with the worker alone: host
 * functions (always the worker's) observe the ops queued before them, a
 * failing op is reported by the synchronize that ran it, several threads
 * synchronizing while another launches never run two commands at once.
 * The worker is left to fall asleep (it polls for tens of microseconds)
 * before some launches, so that the synchronize usually finds it idle;
 * every check holds whichever thread runs the work.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include "check.h"
#include "view1d.h"
#include "internal.h"

static void sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
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

static void *dev_alloc(size_t bytes) {
  void *p = NULL;
  CHECK_OK(nrt_malloc(0, bytes, &p));
  return p;
}

/* A host function that checks the fill queued just before it has run:
 * every element of the buffer holds `expect`. */
typedef struct observe {
  const float *host; /* the buffer's host alias */
  int64_t n;
  float expect;
  atomic_int *mismatches;
} observe;

static void observe_fill(void *arg) {
  observe *o = arg;
  for (int64_t i = 0; i < o->n; i++)
    if (o->host[i] != o->expect) {
      atomic_fetch_add(o->mismatches, 1);
      return;
    }
}

#define ROUNDS 600
#define SMALL_N 16
#define LARGE_N (1 << 16) /* beyond what a synchroniser runs itself */

/* Fills interleaved with host functions that read what the fills wrote,
 * synchronized at varying points: between a fill and its observer (the
 * synchronize runs the fill, or the worker does), after the observer (it
 * stops at the host function and leaves the rest to the worker), after a
 * sleep that lets the worker fall asleep; small and large fills. */
static void test_order_with_host_functions(void) {
  nrt_stream_t s;
  CHECK_OK(nrt_stream_create(0, 0, &s));
  float *small = dev_alloc(SMALL_N * sizeof(float)), *large = dev_alloc(LARGE_N * sizeof(float));
  static observe obs[ROUNDS];
  atomic_int mismatches;
  atomic_init(&mismatches, 0);
  for (int i = 0; i < ROUNDS; i++) {
    int use_large = i % 7 == 3;
    float *buf = use_large ? large : small;
    int64_t n = use_large ? LARGE_N : SMALL_N;
    if (i % 5 == 0) sleep_us(200);
    nrt_op fill = fill_op(buf, NRT_FLOAT32, n, (double)i);
    CHECK_OK(nrt_launch(s, &fill));
    if (i % 3 == 0) CHECK_OK(nrt_stream_synchronize(s));
    obs[i] = (observe){nrt_device_to_host(buf), n, (float)i, &mismatches};
    CHECK_OK(nrt_launch_host_func(s, observe_fill, &obs[i]));
    if (i % 3 == 1) CHECK_OK(nrt_stream_synchronize(s));
  }
  CHECK_OK(nrt_stream_synchronize(s));
  CHECK(atomic_load(&mismatches) == 0);
  CHECK(nrt_stream_query(s) == NRT_SUCCESS);
  CHECK_OK(nrt_free(small));
  CHECK_OK(nrt_free(large));
  CHECK_OK(nrt_stream_destroy(s));
}

/* Threads that synchronize one stream while another launches to it: each
 * fill must have run, alone, before the host function queued after it. */
typedef struct shared_stream {
  nrt_stream_t s;
  atomic_int launching;
} shared_stream;

static void *synchronize_main(void *arg) {
  shared_stream *sh = arg;
  while (atomic_load(&sh->launching)) CHECK_OK(nrt_stream_synchronize(sh->s));
  return NULL;
}

static void test_concurrent_synchronizers(void) {
  shared_stream sh;
  CHECK_OK(nrt_stream_create(0, 0, &sh.s));
  atomic_init(&sh.launching, 1);
  pthread_t threads[3];
  for (int t = 0; t < 3; t++) CHECK(pthread_create(&threads[t], NULL, synchronize_main, &sh) == 0);
  float *buf = dev_alloc(SMALL_N * sizeof(float));
  static observe obs[4 * ROUNDS];
  atomic_int mismatches;
  atomic_init(&mismatches, 0);
  for (int i = 0; i < 4 * ROUNDS; i++) {
    nrt_op first = fill_op(buf, NRT_FLOAT32, SMALL_N, (double)i - 0.5);
    nrt_op second = fill_op(buf, NRT_FLOAT32, SMALL_N, (double)i);
    CHECK_OK(nrt_launch(sh.s, &first));
    CHECK_OK(nrt_launch(sh.s, &second));
    obs[i] = (observe){nrt_device_to_host(buf), SMALL_N, (float)i, &mismatches};
    CHECK_OK(nrt_launch_host_func(sh.s, observe_fill, &obs[i]));
    if (i % 50 == 0) sleep_us(100);
  }
  atomic_store(&sh.launching, 0);
  for (int t = 0; t < 3; t++) pthread_join(threads[t], NULL);
  CHECK_OK(nrt_stream_synchronize(sh.s));
  CHECK(atomic_load(&mismatches) == 0);
  CHECK_OK(nrt_free(buf));
  CHECK_OK(nrt_stream_destroy(sh.s));
}

/* A small op that fails in its kernel, launched to an idle stream: the
 * synchronize reports it with the op's name, it stays sticky, later work
 * is refused until it is cleared, and the stream then works again. */
static void test_error_reported_by_the_synchronize(void) {
  nrt_stream_t s;
  CHECK_OK(nrt_stream_create(0, 0, &s));
  float *a = dev_alloc(8 * sizeof(float)), *b = dev_alloc(8 * sizeof(float));
  nrt_op bad;
  memset(&bad, 0, sizeof bad); /* a COPY whose shapes differ: accepted, fails in the kernel */
  bad.code = NRT_OP_COPY;
  bad.num_operands = 2;
  bad.operands[0] = view_1d(b, NRT_FLOAT32, 8, 1);
  bad.operands[1] = view_1d(a, NRT_FLOAT32, 4, 1);
  for (int round = 0; round < 20; round++) {
    sleep_us(round % 2 ? 200 : 0);
    CHECK_OK(nrt_launch(s, &bad));
    CHECK_STATUS(nrt_stream_synchronize(s), NRT_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(nrt_last_error(), "copy") != NULL);
    CHECK(strstr(nrt_last_error(), "asynchronous error") != NULL);
    CHECK_STATUS(nrt_stream_synchronize(s), NRT_ERROR_INVALID_ARGUMENT);
    nrt_op fill = fill_op(a, NRT_FLOAT32, 8, 5.0);
    CHECK_STATUS(nrt_launch(s, &fill), NRT_ERROR_INVALID_ARGUMENT);
    CHECK_OK(nrt_stream_clear_error(s));
    fill = fill_op(a, NRT_FLOAT32, 8, (double)round);
    CHECK_OK(nrt_launch(s, &fill));
    CHECK_OK(nrt_stream_synchronize(s));
    const float *h = nrt_device_to_host(a);
    CHECK(h[0] == (float)round && h[7] == (float)round);
  }
  CHECK_OK(nrt_free(a));
  CHECK_OK(nrt_free(b));
  CHECK_OK(nrt_stream_destroy(s));
}

/* An event recorded after small work completes with the stream's
 * synchronize, and a second stream waiting on it sees the work done. */
static void test_event_recorded_after_small_work(void) {
  nrt_stream_t s, other;
  CHECK_OK(nrt_stream_create(0, 0, &s));
  CHECK_OK(nrt_stream_create(0, 0, &other));
  nrt_event_t e;
  CHECK_OK(nrt_event_create(0, &e));
  float *buf = dev_alloc(SMALL_N * sizeof(float));
  atomic_int mismatches;
  atomic_init(&mismatches, 0);
  for (int i = 0; i < 50; i++) {
    sleep_us(i % 2 ? 200 : 0);
    nrt_op fill = fill_op(buf, NRT_FLOAT32, SMALL_N, (double)i);
    CHECK_OK(nrt_launch(s, &fill));
    CHECK_OK(nrt_event_record(e, s));
    CHECK_OK(nrt_stream_synchronize(s));
    CHECK_OK(nrt_event_query(e));
    observe o = {nrt_device_to_host(buf), SMALL_N, (float)i, &mismatches};
    CHECK_OK(nrt_stream_wait_event(other, e));
    CHECK_OK(nrt_launch_host_func(other, observe_fill, &o));
    CHECK_OK(nrt_stream_synchronize(other));
  }
  CHECK(atomic_load(&mismatches) == 0);
  CHECK_OK(nrt_event_destroy(e));
  CHECK_OK(nrt_free(buf));
  CHECK_OK(nrt_stream_destroy(s));
  CHECK_OK(nrt_stream_destroy(other));
}

int main(void) {
  RUN(test_order_with_host_functions);
  RUN(test_concurrent_synchronizers);
  RUN(test_error_reported_by_the_synchronize);
  RUN(test_event_recorded_after_small_work);
  return CHECK_MAIN_RESULT();
}
