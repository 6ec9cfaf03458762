/* Streams: in-order queues of device work, each served by a worker thread.
 *
 * A producer appends a command to the stream's ring and signals the worker;
 * the worker runs commands one at a time in order and publishes the sequence
 * number it completed. Synchronisation waits for that number to reach the
 * last submitted one. Kernel errors are sticky on the stream (see stream.h).
 *
 * Small ops take a microsecond or two, about what waking a sleeping thread
 * costs, so both sides spin briefly before they sleep: a worker that just
 * ran out of work polls for the next command, and a synchroniser polls for
 * completion. A synchroniser that sleeps says which completion it awaits,
 * so that the worker makes the futex call only then. One thread at a time
 * runs a stream's commands, the holder of its claim: the worker while it
 * has work, else a synchroniser may run the small commands it waits for
 * itself (run_inline), sparing the two thread switches of a hand-off.
 * Streams live in a per-device table indexed by id: 0 is the default stream,
 * then two pools (normal and high priority) handed out round robin, then
 * streams created explicitly. The worker thread starts on first submission.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "event.h"
#include "fuse/adaptive.h"
#include "internal.h"
#include "profiling.h"
#include "ops/engine/thread_pool.h"
#include "stream_free_log.h"
#include "stream_impl.h"

/* The ring starts small (most streams queue a few commands) and doubles
 * when a producer finds it full, up to RING_DEPTH_MAX: a training step
 * queues hundreds of launches behind one long kernel, and a ring too small
 * for them would stall the host at every step. Past the cap producers wait
 * for room, as CUDA's launch queue makes them. A command is ~2.3 KiB. */
#define RING_DEPTH_MIN 256
#define RING_DEPTH_MAX 8192
/* Tests lower the largest depth to make full rings frequent. */
static atomic_uint_fast64_t ring_depth_limit = RING_DEPTH_MAX;

void rt_stream_limit_ring_depth(uint64_t depth) {
  atomic_store(&ring_depth_limit, depth >= 2 && depth <= RING_DEPTH_MAX ? depth : RING_DEPTH_MAX);
}
#define MAX_STREAMS_PER_DEVICE 4096
#define POOL_BASE_ID 1 /* ids 1..32 normal priority, 33..64 high */
#define FIRST_CREATED_ID (POOL_BASE_ID + 2 * NRT_STREAM_POOL_SIZE)

typedef struct device_streams {
  _Atomic(nrt_stream_t) table[MAX_STREAMS_PER_DEVICE];
  atomic_uint pool_next[2];
  int64_t next_created_id;
} device_streams;

static device_streams streams_of[NRT_MAX_DEVICES];
static pthread_mutex_t table_mu = PTHREAD_MUTEX_INITIALIZER;

/* ---- sticky errors ---------------------------------------------------- */

/* Hands the stream's sticky error to the caller (as its status and thread
 * message). The error stays until nrt_stream_clear_error: the work skipped
 * after it left its outputs unwritten, so every later reader must hear of
 * it, not only the first. Caller holds s->mu. */
static nrt_status report_error_locked(nrt_stream_t s) {
  if (s->error) rt_set_error(s->error_message);
  return s->error;
}

static void record_error_locked(nrt_stream_t s, nrt_status status, const char *what) {
  if (s->error) return; /* the first error is the one worth reporting */
  s->error = status;
  atomic_store(&s->failed, 1);
  snprintf(s->error_message, sizeof s->error_message,
           "%.700s (asynchronous error on neuron:%d stream %lld; the work queued after it was "
           "skipped, and the stream refuses new work until the error is cleared)",
           what, s->device, (long long)s->id);
  rt_log(NRT_LOG_ERROR, "%s", s->error_message);
}

/* ---- the worker ------------------------------------------------------- */

static nrt_status run_copy(const command *c) {
  rt_copy_bytes(c->u.copy.dst, c->u.copy.src, c->u.copy.bytes);
  return NRT_SUCCESS;
}

static void execute(nrt_stream_t s, command *c) {
  int skip_work = atomic_load(&s->failed);
  nrt_status status = NRT_SUCCESS;
  const char *name = "";
  switch (c->kind) {
    case CMD_OP:
      name = nrt_op_name(c->u.op.code);
      if (!skip_work) status = rt_op_run(&c->u.op);
      break;
    case CMD_COPY:
      name = "memcpy";
      if (!skip_work) status = run_copy(c);
      for (int i = 0; i < 2; i++)
        if (c->u.copy.pinned[i]) rt_host_pin_release(c->u.copy.pinned[i]);
      break;
    case CMD_HOST_FUNC:
      c->u.host.fn(c->u.host.arg);
      break;
    case CMD_HOST_TASK:
      name = c->u.task.name;
      if (!skip_work) status = c->u.task.run(c->u.task.arg);
      break; /* released below, once its error message is recorded */
    case CMD_RECORD: /* completed by the worker once the stream has passed it */
      break;
    case CMD_WAIT: {
      char cause[NRT_EVENT_FAILURE_MAX];
      rt_event_wait(c->u.event.event, c->u.event.generation);
      nrt_status failed = rt_event_failure(c->u.event.event, c->u.event.generation, cause,
                                           sizeof cause);
      rt_event_release(c->u.event.event);
      if (failed) { /* what follows depends on work that did not happen */
        char what[NRT_EVENT_FAILURE_MAX + 64];
        snprintf(what, sizeof what, "waited on an event whose work failed: %.600s", cause);
        pthread_mutex_lock(&s->mu);
        record_error_locked(s, failed, what);
        pthread_mutex_unlock(&s->mu);
      }
      break;
    }
  }
  if (status) {
    char what[900];
    const char *message = nrt_last_error();
    size_t name_len = strlen(name);
    /* Kernel messages usually name their op already: do not repeat it. */
    if (strncmp(message, name, name_len) == 0 && message[name_len] == ':')
      snprintf(what, sizeof what, "%s", message);
    else
      snprintf(what, sizeof what, "%s: %s", name, message);
    pthread_mutex_lock(&s->mu);
    record_error_locked(s, status, what);
    pthread_mutex_unlock(&s->mu);
  }
  if (c->kind == CMD_HOST_TASK && c->u.task.release) c->u.task.release(c->u.task.arg);
}

/* ---- profiling -------------------------------------------------------- */

static const char *command_name(const command *c) {
  switch (c->kind) {
    case CMD_OP: return nrt_op_name(c->u.op.code);
    case CMD_COPY: return "memcpy";
    case CMD_HOST_TASK: return c->u.task.name;
    default: return "";
  }
}

static void execute(nrt_stream_t s, command *c);

/* A command run while profiling: timed, estimated, recorded. */
static void execute_profiled(nrt_stream_t s, command *c) {
  rt_profile_ctx ctx = {.stream = s, .stamp = &c->prof};
  nrt_profile_record r;
  rt_profile_record_init(&r, s, &c->prof, command_name(c));
  rt_profile_current = &ctx;
  r.start_ns = rt_now_ns();
  execute(s, c);
  r.end_ns = rt_now_ns();
  rt_profile_current = NULL;
  if (c->kind == CMD_OP) {
    nrt_roofline_add_op(&c->u.op, 0, &ctx.est);
    ctx.has_est = 1;
  } else if (c->kind == CMD_COPY) {
    ctx.est.bytes = (double)c->u.copy.bytes;
    ctx.has_est = 1;
  }
  if (ctx.has_est) rt_profile_set_estimate(&r, s->device, &ctx.est);
  rt_profile_emit(s, &r);
}

/* How long a thread polls before it sleeps: long enough to cover the gap
 * between two small launches, short enough not to burn a core when idle. */
#define SPIN_NS 40000
/* Polls (about 10 ns each on the Xeon host) before each poll also yields. */
#define PAUSE_POLLS 32


static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/* Polls until pred(s, arg) holds or SPIN_NS pass; returns whether it held.
 * After a fraction of a microsecond each poll yields the core (a
 * sched_yield with nothing else to run costs 0.2 us): the thread we wait
 * for often waits for this core. The scheduler wakes a synchroniser on the
 * core of the worker that woke it, so the two share it until one sleeps;
 * with the yield after 4 us (and 256 pauses first, 2.6 us), a launch
 * followed by a synchronize kept the worker from its command for 8 us and
 * the synchroniser from its return for 10 (gemm.py's one-product blocks,
 * stamped). */
static int spin_until(int (*pred)(nrt_stream_t, uint64_t), nrt_stream_t s, uint64_t arg) {
  uint64_t start = 0;
  for (unsigned i = 0;; i++) {
    if (pred(s, arg)) return 1;
    if (i < PAUSE_POLLS) {
      cpu_relax();
      continue;
    }
    uint64_t t = rt_now_ns();
    if (!start) start = t;
    else if (t - start > SPIN_NS) return 0;
    sched_yield();
  }
}

static int has_work(nrt_stream_t s, uint64_t completed) {
  return atomic_load_explicit(&s->submitted, memory_order_acquire) != completed;
}

static int has_completed(nrt_stream_t s, uint64_t seq) {
  return atomic_load_explicit(&s->completed, memory_order_acquire) >= seq;
}

/* Publishes the completion of command seq and wakes the threads sleeping
 * on done_cv once it reaches the least number one of them awaits (waking a
 * thread costs the core it lands on several microseconds; a synchroniser
 * woken at every completion slows the kernels it waits for). The store of
 * `completed` and the load of `wake_at` are sequentially consistent, as are
 * a sleeper's store of `wake_at` and its check of `completed`: either the
 * sleeper sees the new count or the worker sees what it awaits. */
static void publish_completion(nrt_stream_t s, command *c, uint64_t seq) {
  if (c->kind == CMD_RECORD) {
    /* An event completes only after the stream's count covers its record:
     * whoever sees the event complete also sees the work before it done (a
     * stream whose last command is the record queries idle). Lock order:
     * stream, then event. */
    pthread_mutex_lock(&s->mu);
    atomic_store(&s->completed, seq);
    rt_event_complete(c->u.event.event, c->u.event.generation, s->error,
                      s->error ? s->error_message : NULL);
    rt_event_release(c->u.event.event);
    pthread_mutex_unlock(&s->mu);
  } else {
    atomic_store(&s->completed, seq);
  }
  if (seq >= atomic_load(&s->wake_at)) {
    pthread_mutex_lock(&s->mu);
    atomic_store(&s->wake_at, UINT64_MAX); /* the woken re-register */
    pthread_cond_broadcast(&s->done_cv);
    pthread_mutex_unlock(&s->mu);
  }
}

/* Sleeps, with s->mu held, until command seq has completed. */
static void sleep_until_completed_locked(nrt_stream_t s, uint64_t seq) {
  for (;;) {
    if (seq < atomic_load(&s->wake_at)) atomic_store(&s->wake_at, seq);
    if (atomic_load(&s->completed) >= seq) return;
    pthread_cond_wait(&s->done_cv, &s->mu);
  }
}

/* Adaptive eager execution: when the op after `done` and the ones queued
 * behind it fuse (fuse/adaptive.h), runs them as one group and returns how
 * many (*last: the last of them); 0 leaves the op to run alone. Only what
 * is queued already counts: the worker never waits for more. */
/* The op log's line for a fused group: its members, in stream order. */
static void log_fused_group(nrt_stream_t s, nrt_op *const *ops, int m) {
  char line[768];
  int n = snprintf(line, sizeof line, "fused group of %d ops on neuron:%d stream %lld:", m,
                   s->device, (long long)s->id);
  for (int i = 0; i < m && n > 0 && (size_t)n < sizeof line; i++)
    n += snprintf(line + n, sizeof line - (size_t)n, " %s", nrt_op_name(ops[i]->code));
  if (nrt_log_ops_enabled()) nrt_log_op_line(line);
  else rt_log(NRT_LOG_DEBUG, "%s", line);
}

/* A fused group's records: the group, then each member op with the
 * group's time shared out by the members' estimates (one timer covers the
 * whole group), each carrying its own launch. */
static void record_fused(nrt_stream_t s, ring *rg, uint64_t done, nrt_op *const *ops, int m,
                         uint64_t start, uint64_t end) {
  const nrt_device_properties *props = rt_device_props(s->device);
  nrt_roofline group = {0}, member[RT_ADAPTIVE_MAX_RUN];
  double total = 0;
  for (int i = 0; i < m; i++) {
    /* Inside the group, an input an earlier member wrote stays on chip. */
    uint32_t skip = 0;
    for (int k = ops[i]->num_outputs; k < ops[i]->num_operands; k++)
      for (int j = 0; j < i; j++)
        for (int o = 0; o < ops[j]->num_outputs; o++)
          if (ops[i]->operands[k].data && ops[i]->operands[k].data == ops[j]->operands[o].data)
            skip |= 1u << k;
    nrt_roofline_add_op(ops[i], skip, &group);
    member[i] = (nrt_roofline){0};
    nrt_roofline_add_op(ops[i], 0, &member[i]);
    nrt_roofline_finish(props, &member[i]);
    total += member[i].est_ns;
  }
  const command *first = &rg->slots[(done + 1) & (rg->depth - 1)];
  nrt_profile_record rec;
  char name[NRT_PROFILE_NAME_MAX];
  int len = snprintf(name, sizeof name, "fused group:");
  for (int i = 0; i < m && len > 0 && (size_t)len < sizeof name; i++)
    len += snprintf(name + len, sizeof name - (size_t)len, " %s", nrt_op_name(ops[i]->code));
  rt_profile_record_init(&rec, s, &first->prof, name);
  rec.kind = NRT_PROFILE_FUSED;
  rec.launch_ns = rec.launched_ns = 0; /* its launches are the members' */
  rec.correlation = 0;
  rec.start_ns = start;
  rec.end_ns = end;
  rt_profile_set_estimate(&rec, s->device, &group);
  rt_profile_emit(s, &rec);
  double at = (double)start, span = (double)(end - start);
  for (int i = 0; i < m; i++) {
    const command *c = &rg->slots[(done + 1 + (uint64_t)i) & (rg->depth - 1)];
    rt_profile_record_init(&rec, s, &c->prof, nrt_op_name(ops[i]->code));
    rec.kind = NRT_PROFILE_FUSED_MEMBER;
    double share = total > 0 ? member[i].est_ns / total : 1.0 / m;
    rec.start_ns = (uint64_t)at;
    at += share * span;
    rec.end_ns = i == m - 1 ? end : (uint64_t)at;
    rt_profile_set_estimate(&rec, s->device, &member[i]);
    rt_profile_emit(s, &rec);
  }
}

static uint64_t run_fused(nrt_stream_t s, uint64_t done, command **last) {
  uint64_t queued = atomic_load_explicit(&s->submitted, memory_order_acquire) - done;
  if (queued < 2 || atomic_load(&s->failed)) return 0;
  /* After the count, as in worker_main: the ring that holds all of them. */
  ring *r = atomic_load_explicit(&s->ring, memory_order_acquire);
  uint64_t mask = r->depth - 1;
  const nrt_op *first = &r->slots[(done + 1) & mask].u.op;
  if (!rt_adaptive_candidate(first) || nrt_view_numel(&first->operands[0]) < RT_ADAPTIVE_MIN_NUMEL)
    return 0;
  nrt_op *ops[RT_ADAPTIVE_MAX_RUN];
  int n = 0;
  while ((uint64_t)n < queued && n < RT_ADAPTIVE_MAX_RUN) {
    command *c = &r->slots[(done + 1 + (uint64_t)n) & mask];
    if (c->kind != CMD_OP || !rt_adaptive_candidate(&c->u.op)) break;
    ops[n++] = &c->u.op;
  }
  int m = rt_adaptive_plan(s->adaptive, ops, n, done + 1, s);
  if (m < 2) return 0;
  if (nrt_log_ops_enabled() || rt_log_on(NRT_LOG_DEBUG)) log_fused_group(s, ops, m);
  *last = &r->slots[(done + (uint64_t)m) & mask];
  char name[NRT_HOST_TASK_NAME_MAX];
  const command *first_cmd = &r->slots[(done + 1) & mask];
  uint64_t t0 = __builtin_expect(first_cmd->prof.launch_id != 0, 0) ? rt_now_ns() : 0;
  nrt_status status = rt_adaptive_run(s->adaptive, name, sizeof name);
  if (t0) record_fused(s, r, done, ops, m, t0, rt_now_ns());
  if (status) {
    char what[900];
    snprintf(what, sizeof what, "%s: %s", name, nrt_last_error());
    pthread_mutex_lock(&s->mu);
    record_error_locked(s, status, what);
    pthread_mutex_unlock(&s->mu);
  }
  return (uint64_t)m;
}

/* Busy time for neuron-top, kept in one word so that the publisher reads
 * it without a lock: while idle, busy_mark is the busy time so far (>= 0);
 * while busy, that minus the clock at which the period began (< 0, as the
 * busy time so far is less than the clock). The total at time t is then
 * mark >= 0 ? mark : t + mark. The stream is busy while a thread holds its
 * claim (claim_execution), which reads the clock only when it takes and
 * gives back the claim, never per command. */
static void mark_busy(nrt_stream_t s) {
  int_fast64_t mark = atomic_load_explicit(&s->busy_mark, memory_order_relaxed);
  atomic_store_explicit(&s->busy_mark, mark - (int_fast64_t)rt_now_ns(), memory_order_relaxed);
}

static void mark_idle(nrt_stream_t s) {
  int_fast64_t mark = atomic_load_explicit(&s->busy_mark, memory_order_relaxed);
  atomic_store_explicit(&s->busy_mark, mark + (int_fast64_t)rt_now_ns(), memory_order_relaxed);
}

/* One writer (the claim's holder): a load and a plain store, no locked add. */
static void count_ops_run(nrt_stream_t s, uint64_t n) {
  atomic_store_explicit(&s->ops_run, atomic_load_explicit(&s->ops_run, memory_order_relaxed) + n,
                        memory_order_relaxed);
}

/* Commands run in stream order on one thread at a time: the one holding
 * the stream's claim. It is the worker's as long as the worker has work;
 * a synchroniser that finds it free runs small commands itself (run_inline).
 * Taking the claim acquires what the last holder published, giving it back
 * releases what this one did (counts, profile ring, the fusion planner). */
static int claim_execution(nrt_stream_t s) {
  int free_claim = 0;
  if (!atomic_compare_exchange_strong(&s->executing, &free_claim, 1)) return 0;
  mark_busy(s);
  return 1;
}

static void release_execution(nrt_stream_t s) {
  mark_idle(s);
  atomic_store_explicit(&s->executing, 0, memory_order_release);
}

static int unclaimed(nrt_stream_t s, uint64_t unused) {
  (void)unused;
  return !atomic_load_explicit(&s->executing, memory_order_acquire);
}

/* The command after `done`. Called once the count covering it was read
 * (with acquire): a command committed after a growth is only in the new
 * ring, and the count's acquire makes that ring visible. */
static command *next_command(nrt_stream_t s, uint64_t done) {
  ring *r = atomic_load_explicit(&s->ring, memory_order_acquire);
  return &r->slots[(done + 1) & (r->depth - 1)];
}

/* Runs the command after `done` (with the ones queued behind it, if they
 * fuse and may_fuse), publishes its completion and returns the new count.
 * The caller holds the claim. */
static uint64_t run_next(nrt_stream_t s, uint64_t done, int may_fuse) {
  command *c = next_command(s, done);
  if (may_fuse && c->kind == CMD_OP && rt_adaptive_on()) {
    command *last;
    uint64_t fused = run_fused(s, done, &last);
    if (fused) {
      count_ops_run(s, fused);
      publish_completion(s, last, done + fused);
      return done + fused;
    }
  }
  if (__builtin_expect(c->prof.launch_id != 0, 0)) execute_profiled(s, c);
  else execute(s, c);
  if (c->kind == CMD_OP || c->kind == CMD_COPY || c->kind == CMD_HOST_TASK) count_ops_run(s, 1);
  publish_completion(s, c, done + 1);
  return done + 1;
}

/* Sleeps until work arrives after `done` or the stream stops; returns 0
 * once it is stopping and drained. */
static int sleep_for_work(nrt_stream_t s, uint64_t done) {
  pthread_mutex_lock(&s->mu);
  s->worker_sleeping = 1;
  while (atomic_load(&s->submitted) == done && !s->stopping) pthread_cond_wait(&s->work_cv, &s->mu);
  s->worker_sleeping = 0;
  int stop = atomic_load(&s->submitted) == done; /* stopping and drained */
  pthread_mutex_unlock(&s->mu);
  return !stop;
}

static void *worker_main(void *arg) {
  nrt_stream_t s = arg;
  rt_keep_to_caller_core(); /* away from the kernel pool's helpers */
  if (s->priority < 0) /* best effort: favour high-priority workers */
    setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), -5);
  for (;;) {
    uint64_t done = atomic_load(&s->completed);
    if (!has_work(s, done)) {
      if (!spin_until(has_work, s, done) && !sleep_for_work(s, done)) break;
      continue; /* the count again: a synchroniser may have run the work */
    }
    if (!claim_execution(s)) { /* a synchroniser runs a few small commands */
      spin_until(unclaimed, s, 0);
      continue;
    }
    for (done = atomic_load(&s->completed); has_work(s, done);) done = run_next(s, done, 1);
    release_execution(s);
  }
  return NULL;
}

/* Largest operand (or copy) a synchroniser runs itself: a few
 * microseconds of work, less than the two thread switches it saves. */
#define INLINE_MAX_BYTES 16384

/* Whether a synchroniser may run c on its own thread: ops and copies on
 * small data and event records. Host functions and tasks, event waits and
 * profiled commands (whose records name the worker's thread) stay the
 * worker's. */
static int runs_inline(const command *c) {
  if (c->prof.launch_id) return 0;
  switch (c->kind) {
    case CMD_RECORD: return 1;
    case CMD_COPY: return c->u.copy.bytes <= INLINE_MAX_BYTES;
    case CMD_OP:
      for (int k = 0; k < c->u.op.num_operands; k++) {
        const nrt_tensor_view *v = &c->u.op.operands[k];
        if ((uint64_t)nrt_view_numel(v) * nrt_dtype_size(v->dtype) > INLINE_MAX_BYTES) return 0;
      }
      return 1;
    default: return 0;
  }
}

/* A synchroniser about to wait for command seq runs the small commands
 * before it itself when no thread is running the stream's commands (the
 * worker sleeps, or has not been scheduled yet): it would only wait, and
 * handing the work to the worker and back costs two thread switches or a
 * futex wake, more than a small op. Stops at the first command the worker
 * must run; the worker, woken by its launch, runs the rest. */
static void run_inline(nrt_stream_t s, uint64_t seq) {
  if (has_completed(s, seq) || !claim_execution(s)) return;
  uint64_t done = atomic_load(&s->completed);
  while (done < seq && runs_inline(next_command(s, done))) done = run_next(s, done, 0);
  release_execution(s);
}

/* ---- submission ------------------------------------------------------- */

static ring *ring_new(uint64_t depth) {
  ring *r = calloc(1, sizeof *r + depth * sizeof(command));
  if (r) r->depth = depth;
  return r;
}

/* Doubles the ring, copying the commands not yet completed; returns whether
 * it grew. Caller holds s->mu, so no producer writes meanwhile; the worker
 * only reads slots, so copying the one it is running is harmless (it takes
 * the next command from the new ring). */
static int grow_ring_locked(nrt_stream_t s) {
  ring *old = atomic_load_explicit(&s->ring, memory_order_relaxed);
  if (old->depth >= atomic_load(&ring_depth_limit)) return 0;
  ring *r = ring_new(2 * old->depth);
  if (!r) return 0; /* no host memory: wait for room instead */
  uint64_t last = atomic_load_explicit(&s->submitted, memory_order_relaxed);
  for (uint64_t seq = atomic_load(&s->completed) + 1; seq <= last; seq++)
    r->slots[seq & (r->depth - 1)] = old->slots[seq & (old->depth - 1)];
  r->older = old;
  atomic_store_explicit(&s->ring, r, memory_order_release);
  return 1;
}

/* Reserves the next ring slot (growing the ring, or waiting while it is
 * full) and starts the worker if needed. Work (ops, copies, host tasks) is
 * refused with the sticky error of a failed stream; bookkeeping (event
 * records and waits, host functions) is always queued, so that nothing
 * waiting on it hangs and resources are still released. Returns with s->mu held and *seq
 * set; the caller fills the slot and calls rt_stream_commit_locked. */
nrt_status rt_stream_reserve_locked(nrt_stream_t s, int bookkeeping, command **slot, uint64_t *seq) {
  pthread_mutex_lock(&s->mu);
  if (s->error && !bookkeeping) { /* refused, as CUDA refuses launches after a sticky error */
    nrt_status status = report_error_locked(s);
    pthread_mutex_unlock(&s->mu);
    return status;
  }
  if (!s->thread_started) {
    /* The worker's planner, made here where a failure can be reported. */
    if (!s->adaptive && !(s->adaptive = rt_adaptive_new())) {
      pthread_mutex_unlock(&s->mu);
      return rt_fail(NRT_ERROR_OUT_OF_MEMORY,
                     "out of host memory starting the worker of neuron:%d stream %lld", s->device,
                     (long long)s->id);
    }
    if (pthread_create(&s->thread, NULL, worker_main, s) != 0) {
      pthread_mutex_unlock(&s->mu);
      return rt_fail(NRT_ERROR_SYSTEM, "cannot start the worker thread of neuron:%d stream %lld",
                     s->device, (long long)s->id);
    }
    s->thread_started = 1;
  }
  /* The worker's count is read only when the last one read says the ring
   * may be full. The submitted count is read afresh on every turn: waiting
   * releases mu, other producers submit meanwhile, and the worker may then
   * complete past a count read before the wait (the difference of a stale
   * count would wrap around and never fall below the depth). A full ring
   * at its largest waits until half of it is free, not for every slot. */
  for (;;) {
    uint64_t last = atomic_load_explicit(&s->submitted, memory_order_relaxed);
    uint64_t depth = atomic_load_explicit(&s->ring, memory_order_relaxed)->depth;
    if (last - s->completed_seen < depth - 1) break;
    s->completed_seen = atomic_load(&s->completed);
    if (last - s->completed_seen < depth - 1) break;
    if (grow_ring_locked(s)) continue;
    /* Until half the ring is free, or (a ring of 2) all of it: waiting for
     * less than makes room would return at once, again and again, with the
     * lock held that the worker needs to wake us. */
    sleep_until_completed_locked(s, last - (depth / 2 < depth - 2 ? depth / 2 : depth - 2));
  }
  ring *r = atomic_load_explicit(&s->ring, memory_order_relaxed);
  *seq = atomic_load_explicit(&s->submitted, memory_order_relaxed) + 1;
  *slot = &r->slots[*seq & (r->depth - 1)];
  return NRT_SUCCESS;
}

void rt_stream_commit_locked(nrt_stream_t s) {
  /* Release: the worker that sees the new count sees the filled slot. */
  atomic_store_explicit(&s->submitted, atomic_load_explicit(&s->submitted, memory_order_relaxed) + 1,
                        memory_order_release); /* producers hold mu */
  if (s->worker_sleeping) pthread_cond_signal(&s->work_cv);
  pthread_mutex_unlock(&s->mu);
}

/* Waits until command seq has completed; then reports any sticky error. */
nrt_status rt_stream_wait_for(nrt_stream_t s, uint64_t seq) {
  run_inline(s, seq);
  /* Through the lock either way: the worker completes an event record
   * inside it, after publishing the count, so a caller that saw the count
   * by polling could otherwise find the event just recorded not complete. */
  int completed = spin_until(has_completed, s, seq);
  pthread_mutex_lock(&s->mu);
  if (!completed) sleep_until_completed_locked(s, seq);
  nrt_status status = report_error_locked(s);
  pthread_mutex_unlock(&s->mu);
  return status;
}

/* ---- the stream table ------------------------------------------------- */

static nrt_status stream_new(int32_t device, int32_t priority, int64_t id, nrt_stream_t *out) {
  nrt_stream_t s = aligned_alloc(_Alignof(struct nrt_stream), sizeof *s); /* a multiple of it */
  if (s) memset(s, 0, sizeof *s);
  uint64_t limit = atomic_load(&ring_depth_limit);
  ring *r = s ? ring_new(limit < RING_DEPTH_MIN ? limit : RING_DEPTH_MIN) : NULL;
  if (!r) {
    free(s);
    return rt_fail(NRT_ERROR_SYSTEM, "out of host memory creating a neuron stream");
  }
  rt_mark_started();
  s->device = device;
  s->priority = priority;
  s->id = id;
  atomic_init(&s->ring, r);
  atomic_init(&s->refs, 1);
  atomic_init(&s->wake_at, UINT64_MAX);
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->work_cv, NULL);
  pthread_cond_init(&s->done_cv, NULL);
  pthread_mutex_init(&s->free_mu, NULL);
  rt_log(NRT_LOG_DEBUG, "neuron:%d stream %lld created (priority %d)", device, (long long)id,
         (int)priority);
  *out = s;
  return NRT_SUCCESS;
}

/* Drops a reference; the last one frees the stream. */
static void stream_release(nrt_stream_t s) {
  if (atomic_fetch_sub(&s->refs, 1) != 1) return;
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->work_cv);
  pthread_cond_destroy(&s->done_cv);
  pthread_mutex_destroy(&s->free_mu);
  rt_adaptive_free(s->adaptive);
  for (int i = 0; i < PROF_CHUNKS; i++) free(s->prof_chunk[i]);
  for (ring *r = atomic_load(&s->ring), *older; r; r = older) {
    older = r->older;
    free(r);
  }
  free(s);
}

static int32_t clamp_priority(int32_t priority) {
  return priority < NRT_STREAM_PRIORITY_HIGH ? NRT_STREAM_PRIORITY_HIGH
         : priority > NRT_STREAM_PRIORITY_NORMAL ? NRT_STREAM_PRIORITY_NORMAL
                                                 : priority;
}

/* Returns the stream with a fixed id (default or pooled), creating it on
 * first use. */
static nrt_status fixed_stream(int32_t device, int64_t id, int32_t priority, nrt_stream_t *out) {
  _Atomic(nrt_stream_t) *slot = &streams_of[device].table[id];
  nrt_stream_t s = atomic_load_explicit(slot, memory_order_acquire);
  if (s) {
    *out = s;
    return NRT_SUCCESS;
  }
  pthread_mutex_lock(&table_mu);
  s = atomic_load_explicit(slot, memory_order_relaxed);
  nrt_status status = NRT_SUCCESS;
  if (!s && (status = stream_new(device, priority, id, &s)) == NRT_SUCCESS)
    atomic_store_explicit(slot, s, memory_order_release);
  pthread_mutex_unlock(&table_mu);
  *out = s;
  return status;
}

nrt_status nrt_stream_priority_range(int32_t *least, int32_t *greatest) {
  if (!least || !greatest)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_stream_priority_range: NULL argument");
  *least = NRT_STREAM_PRIORITY_NORMAL;
  *greatest = NRT_STREAM_PRIORITY_HIGH;
  return NRT_SUCCESS;
}

nrt_status nrt_stream_get_default(int32_t device, nrt_stream_t *out) {
  nrt_status s = rt_ensure_init();
  if (s || (s = rt_check_device(device))) return s;
  return fixed_stream(device, 0, NRT_STREAM_PRIORITY_NORMAL, out);
}

nrt_status nrt_stream_get_pooled(int32_t device, int32_t priority, nrt_stream_t *out) {
  nrt_status s = rt_ensure_init();
  if (s || (s = rt_check_device(device))) return s;
  priority = clamp_priority(priority);
  int high = priority < 0;
  unsigned n = atomic_fetch_add(&streams_of[device].pool_next[high], 1u) % NRT_STREAM_POOL_SIZE;
  int64_t id = POOL_BASE_ID + (int64_t)high * NRT_STREAM_POOL_SIZE + n;
  return fixed_stream(device, id, priority, out);
}

nrt_status nrt_stream_create(int32_t device, int32_t priority, nrt_stream_t *out) {
  nrt_status s = rt_ensure_init();
  if (s || (s = rt_check_device(device))) return s;
  if (!out) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_stream_create: out is NULL");
  pthread_mutex_lock(&table_mu);
  device_streams *ds = &streams_of[device];
  if (ds->next_created_id == 0) ds->next_created_id = FIRST_CREATED_ID;
  if (ds->next_created_id >= MAX_STREAMS_PER_DEVICE) {
    pthread_mutex_unlock(&table_mu);
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY,
                   "neuron:%d: cannot create more than %d streams", device,
                   MAX_STREAMS_PER_DEVICE - FIRST_CREATED_ID);
  }
  int64_t id = ds->next_created_id;
  nrt_stream_t stream;
  s = stream_new(device, clamp_priority(priority), id, &stream);
  if (!s) {
    ds->next_created_id++;
    atomic_store_explicit(&ds->table[id], stream, memory_order_release);
    *out = stream;
  }
  pthread_mutex_unlock(&table_mu);
  return s;
}

nrt_status nrt_stream_destroy(nrt_stream_t stream) {
  if (!stream) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_stream_destroy: NULL stream");
  if (stream->id < FIRST_CREATED_ID)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "nrt_stream_destroy: the default and pooled streams cannot be destroyed");
  nrt_status status = nrt_stream_synchronize(stream);
  pthread_mutex_lock(&table_mu);
  atomic_store_explicit(&streams_of[stream->device].table[stream->id], NULL, memory_order_release);
  pthread_mutex_unlock(&table_mu);
  pthread_mutex_lock(&stream->mu);
  stream->stopping = 1;
  pthread_cond_signal(&stream->work_cv);
  int started = stream->thread_started;
  pthread_mutex_unlock(&stream->mu);
  if (started) pthread_join(stream->thread, NULL);
  stream_release(stream); /* a concurrent nrt_device_synchronize may hold it */
  return status;
}

int64_t nrt_stream_id(nrt_stream_t stream) { return stream->id; }
int32_t nrt_stream_device(nrt_stream_t stream) { return stream->device; }
int32_t nrt_stream_priority(nrt_stream_t stream) { return stream->priority; }

nrt_status nrt_stream_from_id(int32_t device, int64_t id, nrt_stream_t *out) {
  nrt_status s = rt_ensure_init();
  if (s || (s = rt_check_device(device))) return s;
  if (id < 0 || id >= MAX_STREAMS_PER_DEVICE)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "neuron:%d has no stream with id %lld", device,
                   (long long)id);
  if (id < FIRST_CREATED_ID) {
    int32_t priority = id > POOL_BASE_ID + NRT_STREAM_POOL_SIZE - 1 ? NRT_STREAM_PRIORITY_HIGH
                                                                   : NRT_STREAM_PRIORITY_NORMAL;
    return fixed_stream(device, id, priority, out);
  }
  nrt_stream_t stream = atomic_load_explicit(&streams_of[device].table[id], memory_order_acquire);
  if (!stream)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "neuron:%d has no stream with id %lld", device,
                   (long long)id);
  *out = stream;
  return NRT_SUCCESS;
}

void rt_stream_retain(nrt_stream_t stream) { atomic_fetch_add(&stream->refs, 1); }
void rt_stream_release(nrt_stream_t stream) { stream_release(stream); }

uint64_t rt_stream_submitted(nrt_stream_t stream) { return atomic_load(&stream->submitted); }

int rt_stream_passed(nrt_stream_t stream, uint64_t seq) { return has_completed(stream, seq); }

void rt_stream_note_free(nrt_stream_t s, uintptr_t addr, size_t size, uint64_t seq) {
  if (!rt_adaptive_on()) return; /* only fusion reads the log */
  pthread_mutex_lock(&s->free_mu);
  uint32_t i = s->free_next++ % FREE_LOG_SIZE;
  s->frees[i].lo = addr;
  s->frees[i].hi = addr + size;
  s->frees[i].seq = seq;
  pthread_mutex_unlock(&s->free_mu);
}

int rt_stream_freed_within(nrt_stream_t s, uintptr_t lo, uintptr_t hi, uint64_t from, uint64_t to) {
  int found = 0;
  pthread_mutex_lock(&s->free_mu);
  uint32_t n = s->free_next < FREE_LOG_SIZE ? s->free_next : FREE_LOG_SIZE;
  for (uint32_t i = 0; i < n && !found; i++)
    found = s->frees[i].seq >= from && s->frees[i].seq <= to && s->frees[i].lo <= lo &&
            hi <= s->frees[i].hi;
  pthread_mutex_unlock(&s->free_mu);
  return found;
}

void rt_stream_wait_passed(nrt_stream_t stream, uint64_t seq) {
  if (spin_until(has_completed, stream, seq)) return;
  pthread_mutex_lock(&stream->mu);
  sleep_until_completed_locked(stream, seq);
  pthread_mutex_unlock(&stream->mu);
}

/* ---- synchronisation -------------------------------------------------- */

nrt_status nrt_stream_synchronize(nrt_stream_t stream) {
  nrt_status s = rt_ensure_init();
  if (s) return s;
  if (!stream) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_stream_synchronize: NULL stream");
  rt_metric_add(NRT_METRIC_STREAM_SYNCS, 1);
  return rt_stream_wait_for(stream, atomic_load(&stream->submitted));
}

/* A device synchronisation's wait on one of its streams (counted once, as
 * the device's). */
static nrt_status drain_stream(nrt_stream_t stream) {
  return rt_stream_wait_for(stream, atomic_load(&stream->submitted));
}

nrt_status nrt_stream_query(nrt_stream_t stream) {
  nrt_status s = rt_ensure_init();
  if (s) return s;
  if (!stream) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_stream_query: NULL stream");
  int idle = atomic_load(&stream->completed) == atomic_load(&stream->submitted);
  if (!idle) return NRT_ERROR_NOT_READY;
  if (!atomic_load(&stream->failed)) return NRT_SUCCESS;
  pthread_mutex_lock(&stream->mu);
  s = report_error_locked(stream);
  pthread_mutex_unlock(&stream->mu);
  return s;
}

nrt_status nrt_stream_clear_error(nrt_stream_t stream) {
  nrt_status s = rt_ensure_init();
  if (s) return s;
  if (!stream) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_stream_clear_error: NULL stream");
  /* Drain first: what was queued behind the error is skipped, as the user
   * was told, rather than run on inputs the failed work never wrote. */
  rt_stream_wait_for(stream, atomic_load(&stream->submitted));
  pthread_mutex_lock(&stream->mu);
  stream->error = NRT_SUCCESS;
  stream->error_message[0] = 0;
  atomic_store(&stream->failed, 0);
  pthread_mutex_unlock(&stream->mu);
  return NRT_SUCCESS;
}

/* Applies fn to every stream of the device (each held by a reference
 * meanwhile); returns the first failure, with its message. */
static nrt_status for_each_stream(int32_t device, nrt_status (*fn)(nrt_stream_t)) {
  nrt_status s = rt_ensure_init();
  if (s || (s = rt_check_device(device))) return s;
  nrt_status first = NRT_SUCCESS;
  char message[1024] = "";
  for (int64_t id = 0; id < MAX_STREAMS_PER_DEVICE; id++) {
    nrt_stream_t stream;
    if (id < FIRST_CREATED_ID) {
      /* The default and pooled streams are never destroyed: no lock, no
       * reference (a device synchronize passes all 65 ids every time). */
      stream = atomic_load_explicit(&streams_of[device].table[id], memory_order_acquire);
      if (!stream) continue;
    } else {
      /* Under table_mu: a stream destroyed meanwhile stays allocated until
       * its reference is dropped, and next_created_id is written under it. */
      pthread_mutex_lock(&table_mu);
      int64_t next_created_id = streams_of[device].next_created_id;
      stream = atomic_load_explicit(&streams_of[device].table[id], memory_order_relaxed);
      if (stream) atomic_fetch_add(&stream->refs, 1);
      pthread_mutex_unlock(&table_mu);
      if (!stream) {
        if (id >= next_created_id) break;
        continue;
      }
    }
    nrt_status status = fn(stream);
    if (id >= FIRST_CREATED_ID) stream_release(stream);
    if (status && !first) {
      first = status;
      snprintf(message, sizeof message, "%s", nrt_last_error());
    }
  }
  if (first) rt_set_error(message);
  return first;
}

nrt_status nrt_device_synchronize(int32_t device) {
  rt_metric_add(NRT_METRIC_DEVICE_SYNCS, 1);
  return for_each_stream(device, drain_stream);
}

nrt_status nrt_device_clear_errors(int32_t device) {
  return for_each_stream(device, nrt_stream_clear_error);
}

nrt_status nrt_stream_wait_event(nrt_stream_t stream, nrt_event_t event) {
  nrt_status s = rt_ensure_init();
  if (s) return s;
  if (!stream || !event)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_stream_wait_event: NULL argument");
  uint64_t generation;
  /* Nothing to wait for, unless the record completed on a failed stream:
   * then the wait is queued all the same, to pass the failure on in order. */
  if (!rt_event_pending(event, &generation) &&
      !rt_event_failure(event, generation, NULL, 0))
    return NRT_SUCCESS;
  command *c;
  uint64_t seq;
  if ((s = rt_stream_reserve_locked(stream, 1, &c, &seq))) return s;
  rt_event_retain(event);
  c->kind = CMD_WAIT;
  c->prof.launch_id = 0;
  c->u.event.event = event;
  c->u.event.generation = generation;
  rt_stream_commit_locked(stream);
  return NRT_SUCCESS;
}

nrt_status rt_stream_record(nrt_stream_t stream, nrt_event_t event, uint64_t generation) {
  command *c;
  uint64_t seq;
  nrt_status s = rt_stream_reserve_locked(stream, 1, &c, &seq);
  if (s) return s;
  rt_event_retain(event);
  c->kind = CMD_RECORD;
  c->prof.launch_id = 0;
  c->u.event.event = event;
  c->u.event.generation = generation;
  rt_stream_commit_locked(stream);
  return NRT_SUCCESS;
}

/* ---- neuron-top ---------------------------------------------------------- */

void rt_stream_activity(int32_t device, void (*fn)(const nrt_top_stream *, void *), void *arg) {
  /* One pass under the table lock: a stream in the table is alive (destroy
   * takes it out under this lock first). Streams never used are left out. */
  pthread_mutex_lock(&table_mu);
  int64_t next_created_id = streams_of[device].next_created_id;
  for (int64_t id = 0; id < MAX_STREAMS_PER_DEVICE; id++) {
    nrt_stream_t s = atomic_load_explicit(&streams_of[device].table[id], memory_order_relaxed);
    if (!s) {
      if (id >= FIRST_CREATED_ID && id >= next_created_id) break;
      continue;
    }
    uint64_t submitted = atomic_load_explicit(&s->submitted, memory_order_acquire);
    if (!submitted) continue;
    uint64_t completed = atomic_load_explicit(&s->completed, memory_order_acquire);
    int_fast64_t mark = atomic_load_explicit(&s->busy_mark, memory_order_relaxed);
    /* The clock after the mark: an open period began before it. */
    int_fast64_t busy = mark >= 0 ? mark : (int_fast64_t)rt_now_ns() + mark;
    nrt_top_stream t = {
        .id = s->id,
        .priority = s->priority,
        .queued = submitted > completed ? submitted - completed : 0,
        .submitted = submitted,
        .ops = atomic_load_explicit(&s->ops_run, memory_order_relaxed),
        .busy_ns = busy > 0 ? (uint64_t)busy : 0,
    };
    fn(&t, arg);
  }
  pthread_mutex_unlock(&table_mu);
}

/* ---- profile records -------------------------------------------------- */

static pthread_mutex_t drain_mu = PTHREAD_MUTEX_INITIALIZER;

uint64_t nrt_profile_drain(void (*fn)(const nrt_profile_record *, void *), void *arg) {
  uint64_t dropped = 0;
  pthread_mutex_lock(&drain_mu); /* one drainer: the rings have one reader */
  for (int32_t device = 0; device < rt_device_count(); device++)
    for (int64_t id = 0; id < MAX_STREAMS_PER_DEVICE; id++) {
      pthread_mutex_lock(&table_mu);
      int64_t next_created_id = streams_of[device].next_created_id;
      nrt_stream_t stream = atomic_load_explicit(&streams_of[device].table[id], memory_order_relaxed);
      if (stream) atomic_fetch_add(&stream->refs, 1);
      pthread_mutex_unlock(&table_mu);
      if (!stream) {
        if (id >= FIRST_CREATED_ID && id >= next_created_id) break;
        continue;
      }
      dropped += rt_stream_drain_records(stream, fn, arg);
      stream_release(stream);
    }
  pthread_mutex_unlock(&drain_mu);
  return dropped;
}
