/* Generated code compiled in the background (codegen.h).
 *
 * Running the C compiler for a program's groups costs a few hundred
 * milliseconds of CPU, which the first step of a training run used to
 * wait for. Now the graph compiler asks rt_fuse_codegen_request: a kernel
 * that this process already has, or that the disk cache holds, is set at
 * once; any other is queued to one worker thread, which compiles the
 * queue's groups one at a time at a lower priority (niceness +10, which
 * the compiler process inherits), so that it takes what the training step
 * leaves of the cores. Meanwhile the groups run their tapes, which compute
 * the same bits, so only the speed changes when a kernel arrives.
 *
 * The switch: each group's rt_gen_cell is published with a release store
 * once the kernel is loaded and has passed its probe; a run reads it with
 * an acquire load (graph/exec.c), so it sees NULL (the tape) or a whole
 * kernel. Cells are reference counted, so a program destroyed while its
 * compile is queued or running frees nothing the worker still uses.
 *
 * Exit: an atexit handler drops the queue, stops the running compiler
 * (SIGTERM to its process group: the driver deletes its own temporary
 * files; jit.c removes the source and object it made) and joins the
 * worker, so exit neither hangs nor leaves files behind. Fork: the child
 * has no worker; the queue (with a compile that was running in the parent
 * put back at its head) is kept and a worker is started in the child when
 * it next queues a compile or waits for one.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "fuse/codegen.h"
#include "fuse/fuse_group.h"
#include "internal.h"
#include "neuronrt/graph.h"

rt_gen_cell *rt_gen_cell_new(void) {
  rt_gen_cell *c = malloc(sizeof *c);
  if (!c) return NULL;
  atomic_init(&c->kernel, NULL);
  atomic_init(&c->refs, 1);
  return c;
}

void rt_gen_cell_release(rt_gen_cell *c) {
  if (c && atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) == 1) free(c);
}

const rt_gen_kernel *rt_gen_cell_kernel(const rt_gen_cell *c) {
  return c ? atomic_load_explicit(&((rt_gen_cell *)c)->kernel, memory_order_acquire) : NULL;
}

void rt_gen_cell_set(rt_gen_cell *c, const rt_gen_kernel *k) {
  if (c) atomic_store_explicit(&c->kernel, k, memory_order_release);
}

/* ---- the queue ------------------------------------------------------------------ */

typedef struct job {
  struct nrt_fuse_group *group; /* a copy: the tape to compile */
  rt_gen_cell *cell;            /* a reference */
  struct job *next;
} job;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work = PTHREAD_COND_INITIALIZER; /* a job was queued, or stop */
static pthread_cond_t idle = PTHREAD_COND_INITIALIZER; /* pending went down */
static job *head, *tail;
static job *running;      /* the job the worker compiles now */
static int32_t pending;   /* queued + running */
static int stopping;      /* exit: the worker leaves, no job is taken */
static int have_worker;   /* a worker thread runs in this process */
static pthread_t worker;
static int hooks_done;

static void free_job(job *j) {
  rt_gen_cell_release(j->cell);
  free(j->group);
  free(j);
}

static void *work_loop(void *arg) {
  (void)arg;
  /* Niceness applies to the thread (Linux), and the compilers it spawns
   * inherit it. */
  pid_t tid = (pid_t)syscall(SYS_gettid);
  errno = 0;
  int now = getpriority(PRIO_PROCESS, (id_t)tid);
  if (errno == 0) setpriority(PRIO_PROCESS, (id_t)tid, now + 10 > 19 ? 19 : now + 10);
  rt_jit_track_thread();
  pthread_mutex_lock(&lock);
  for (;;) {
    while (!head && !stopping) pthread_cond_wait(&work, &lock);
    if (stopping) break;
    job *j = head;
    head = j->next;
    if (!head) tail = NULL;
    running = j;
    pthread_mutex_unlock(&lock);
    /* Looks in this process's kernels first: an earlier job may have made
     * the same tape's kernel. */
    const rt_gen_kernel *k = rt_fuse_codegen_get(j->group);
    if (k) rt_gen_cell_set(j->cell, k);
    pthread_mutex_lock(&lock);
    running = NULL;
    free_job(j);
    pending--;
    pthread_cond_broadcast(&idle);
  }
  pthread_mutex_unlock(&lock);
  return NULL;
}

static void stop_worker(void) {
  pthread_mutex_lock(&lock);
  if (!have_worker) {
    pthread_mutex_unlock(&lock);
    return;
  }
  stopping = 1;
  rt_fuse_codegen_quiet();
  rt_jit_stop_compilers();
  while (head) {
    job *j = head;
    head = j->next;
    free_job(j);
    pending--;
  }
  tail = NULL;
  pthread_cond_broadcast(&work);
  pthread_mutex_unlock(&lock);
  pthread_join(worker, NULL);
  pthread_mutex_lock(&lock);
  have_worker = 0;
  pthread_cond_broadcast(&idle);
  pthread_mutex_unlock(&lock);
}

static void before_fork(void) { pthread_mutex_lock(&lock); }
static void after_fork_parent(void) { pthread_mutex_unlock(&lock); }
static void after_fork_child(void) {
  pthread_mutex_init(&lock, NULL);
  pthread_cond_init(&work, NULL);
  pthread_cond_init(&idle, NULL);
  rt_jit_after_fork_child();
  if (running) { /* the parent's worker was compiling it: this process has none */
    running->next = head;
    head = running;
    if (!tail) tail = running;
    running = NULL;
  }
  have_worker = 0;
}

/* Under lock: a worker for the queue, if there is none. 0 if none could
 * be started. */
static int ensure_worker(void) {
  if (have_worker) return 1;
  if (stopping) return 0;
  if (!hooks_done) {
    if (atexit(stop_worker) || pthread_atfork(before_fork, after_fork_parent, after_fork_child)) return 0;
    hooks_done = 1;
  }
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  int err = pthread_create(&worker, &attr, work_loop, NULL);
  pthread_attr_destroy(&attr);
  if (err) return 0;
  have_worker = 1;
  return 1;
}

void rt_fuse_codegen_request(const struct nrt_fuse_group *g, rt_gen_cell *cell) {
  if (!cell) return;
  int missed = 0;
  const rt_gen_kernel *k = rt_fuse_codegen_lookup(g, &missed);
  if (k) {
    rt_gen_cell_set(cell, k);
    return;
  }
  if (!missed) return; /* no tape, off, or failed (counted) */
  job *j = malloc(sizeof *j);
  struct nrt_fuse_group *copy = malloc(sizeof *copy);
  if (!j || !copy) {
    free(j);
    free(copy);
    k = rt_fuse_codegen_get(g); /* no memory to queue it: compile it now */
    if (k) rt_gen_cell_set(cell, k);
    return;
  }
  memcpy(copy, g, sizeof *copy);
  j->group = copy;
  j->cell = cell;
  j->next = NULL;
  atomic_fetch_add_explicit(&cell->refs, 1, memory_order_relaxed);
  pthread_mutex_lock(&lock);
  if (!ensure_worker()) { /* no thread: compile it now, unless exiting */
    int exiting = stopping;
    pthread_mutex_unlock(&lock);
    free_job(j);
    if (!exiting && (k = rt_fuse_codegen_get(g))) rt_gen_cell_set(cell, k);
    return;
  }
  if (tail)
    tail->next = j;
  else
    head = j;
  tail = j;
  pending++;
  rt_metric_add(NRT_METRIC_FUSE_CODEGEN_BACKGROUND, 1);
  pthread_cond_signal(&work);
  pthread_mutex_unlock(&lock);
}

int32_t rt_fuse_codegen_wait(double timeout) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  if (timeout >= 0) {
    double s = (double)until.tv_sec + until.tv_nsec * 1e-9 + timeout;
    until.tv_sec = (time_t)s;
    until.tv_nsec = (long)((s - (double)until.tv_sec) * 1e9);
    if (until.tv_nsec >= 1000000000L) until.tv_nsec = 999999999L;
  }
  pthread_mutex_lock(&lock);
  if (pending > 0 && !have_worker && !ensure_worker()) { /* a forked child's inherited queue */
    pthread_mutex_unlock(&lock);
    return pending;
  }
  while (pending > 0) {
    int err = timeout < 0 ? pthread_cond_wait(&idle, &lock) : pthread_cond_timedwait(&idle, &lock, &until);
    if (err == ETIMEDOUT || (!have_worker && pending > 0)) break;
  }
  int32_t left = pending;
  pthread_mutex_unlock(&lock);
  return left;
}

int32_t rt_fuse_codegen_pending(void) {
  pthread_mutex_lock(&lock);
  int32_t n = pending;
  pthread_mutex_unlock(&lock);
  return n;
}

int32_t nrt_program_wait_for_kernels(double timeout_seconds) { return rt_fuse_codegen_wait(timeout_seconds); }
