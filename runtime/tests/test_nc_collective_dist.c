/* Group runs spread over processes (nrt_nc_programs_run_dist), with two
 * threads standing for two processes and an in-memory all-gather as the
 * exchange: a reduction then a swap across the "processes" (the same
 * numbers as one process running both programs), a process whose program
 * ends without the call the other waits at (both fail with the same
 * deadlock error instead of hanging), and processes that fail on their own
 * (out of host memory; a launch that never runs): the peer stops with
 * "process N stopped". Every process must take part in every round: a
 * process still waiting in a round after its peer's run returned is a bug
 * (the runtime left it waiting, as a real transport would until its
 * timeout), reported with exit code 3 (the fault-injection sweep counts it
 * as bad). The exchange then fails that round (NRT_ERROR_DISTRIBUTED), as a
 * transport whose peer exited does, so the test ends either way. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "neuronrt/host_error.h"
#include "neuronrt/nc_dist.h"
#include "nc_collective_program.h"

enum { PROCS = 2 };

typedef struct shared {
  pthread_mutex_t lock;
  pthread_cond_t turn;
  int arrived;
  int departed; /* processes whose run returned: a closed connection */
  int stranded; /* a process was left waiting by one whose run returned */
  long generation;
  void *slot[2][PROCS]; /* double-buffered by round parity */
  size_t bytes[2][PROCS];
} shared;

typedef struct endpoint {
  shared *sh;
  int me;
  long round;
  void *held[PROCS]; /* the last round's messages, the exchange's storage */
} endpoint;

static nrt_status gather(void *ctx, const void *send, size_t bytes, void **recv, size_t *recv_bytes) {
  endpoint *e = ctx;
  shared *sh = e->sh;
  int parity = (int)(e->round & 1);
  void *copy = malloc(bytes ? bytes : 1);
  if (!copy) return NRT_ERROR_OUT_OF_MEMORY;
  memcpy(copy, send, bytes);
  pthread_mutex_lock(&sh->lock);
  free(sh->slot[parity][e->me]);
  sh->slot[parity][e->me] = copy;
  sh->bytes[parity][e->me] = bytes;
  long gen = sh->generation;
  if (++sh->arrived == PROCS) {
    sh->arrived = 0;
    sh->generation++;
    pthread_cond_broadcast(&sh->turn);
  } else {
    while (sh->generation == gen && !sh->departed) pthread_cond_wait(&sh->turn, &sh->lock);
    if (sh->generation == gen) { /* a peer left without this round */
      sh->arrived--;
      sh->stranded = 1;
      pthread_mutex_unlock(&sh->lock);
      return nrt_host_error(NRT_ERROR_DISTRIBUTED, "a peer process left the group");
    }
  }
  for (int q = 0; q < PROCS; q++) {
    free(e->held[q]);
    e->held[q] = malloc(sh->bytes[parity][q] ? sh->bytes[parity][q] : 1);
    memcpy(e->held[q], sh->slot[parity][q], sh->bytes[parity][q]);
    recv[q] = e->held[q];
    recv_bytes[q] = sh->bytes[parity][q];
  }
  pthread_mutex_unlock(&sh->lock);
  e->round++;
  return NRT_SUCCESS;
}


typedef struct job {
  nrt_nc_program_t program;
  void **hbm;
  const char *skip; /* not NULL: this process does not run, it fails a round with this */
  endpoint end;
  nrt_status status;
  char error[512];
} job;

static void *run(void *arg) {
  job *j = arg;
  void *const *hbm[] = {j->hbm};
  nrt_nc_exchange ex = {.fn = gather, .ctx = &j->end, .process = j->end.me, .processes = PROCS};
  j->status = j->skip ? nrt_nc_exchange_fail(&ex, 1, j->skip)
                     : nrt_nc_programs_run_dist(&j->program, 1, hbm, &ex);
  snprintf(j->error, sizeof j->error, "%s", j->status ? nrt_last_error() : "");
  pthread_mutex_lock(&j->end.sh->lock);
  j->end.sh->departed++;
  pthread_cond_broadcast(&j->end.sh->turn);
  pthread_mutex_unlock(&j->end.sh->lock);
  return NULL;
}

static void run_both(job *jobs) {
  shared sh = {.lock = PTHREAD_MUTEX_INITIALIZER, .turn = PTHREAD_COND_INITIALIZER};
  pthread_t t[PROCS];
  for (int k = 0; k < PROCS; k++) {
    jobs[k].end = (endpoint){.sh = &sh, .me = k};
    CHECK(pthread_create(&t[k], NULL, run, &jobs[k]) == 0);
  }
  for (int k = 0; k < PROCS; k++) pthread_join(t[k], NULL);
  for (int b = 0; b < 2; b++)
    for (int q = 0; q < PROCS; q++) free(sh.slot[b][q]);
  for (int k = 0; k < PROCS; k++)
    for (int q = 0; q < PROCS; q++) free(jobs[k].end.held[q]);
  if (sh.stranded) {
    fprintf(stderr, "FAIL: a process was left waiting in a round by a peer whose run returned "
                    "(statuses %d, %d: %s | %s)\n", jobs[0].status, jobs[1].status,
            jobs[0].error, jobs[1].error);
    exit(3);
  }
}

/* Process k runs rank k: out = the sum of both ins (call 0), then in = the
 * other rank's out (call 1), read before its own in is written. */
static void test_reduce_then_swap_across_processes(void) {
  float in[2][R * C], out[2][R * C];
  for (int i = 0; i < R * C; i++) in[0][i] = (float)i, in[1][i] = 0.5f * (float)i + 1;
  job jobs[PROCS];
  void *hbm[PROCS][2];
  for (int k = 0; k < PROCS; k++) {
    nrt_nc_inst insts[3] = {collective(NRT_NC_COLLECTIVE_REDUCE, 1, 0, 3, 0, 0, 3),
                            collective(NRT_NC_COLLECTIVE_NONE, -1, 1, 0, 0, 1, 7),
                            collective(NRT_NC_COLLECTIVE_COPY, 0, -1, 0, 1 - k, 1, 7)};
    hbm[k][0] = in[k];
    hbm[k][1] = out[k];
    jobs[k] = (job){.program = create(insts, 3), .hbm = hbm[k]};
  }
  run_both(jobs);
  CHECK_OK(jobs[0].status);
  CHECK_OK(jobs[1].status);
  int bad = 0;
  for (int i = 0; i < R * C; i++) {
    float sum = (float)i + (0.5f * (float)i + 1);
    bad += out[0][i] != sum || out[1][i] != sum || in[0][i] != sum || in[1][i] != sum;
  }
  CHECK(bad == 0);
  for (int k = 0; k < PROCS; k++) nrt_nc_program_destroy(jobs[k].program);
}

/* Process 1's program makes no call: both processes fail, naming it. */
static void test_a_process_that_ends_early_stops_both(void) {
  nrt_nc_inst barrier = collective(NRT_NC_COLLECTIVE_NONE, -1, -1, 0, 0, 0, 1);
  nrt_nc_inst copy = {.opcode = NRT_NC_DMA_COPY, .engine = NRT_NC_ENGINE_DMA};
  for (int k = 0; k < NRT_NC_MAX_APS; k++) copy.ap[k] = (nrt_nc_ap){.tensor = -1};
  copy.ap[0] = hbm_ap(1);
  copy.ap[1] = hbm_ap(0);
  float in[R * C] = {0}, out[2][R * C];
  void *hbm[PROCS][2] = {{in, out[0]}, {in, out[1]}};
  job jobs[PROCS] = {{.program = create(&barrier, 1), .hbm = hbm[0]},
                     {.program = create(&copy, 1), .hbm = hbm[1]}};
  run_both(jobs);
  /* Statuses first: a process that failed on its own (out of memory, in the
   * fault-injection sweep) is reported as such, before the peer's message. */
  for (int k = 0; k < PROCS; k++) CHECK_STATUS(jobs[k].status, NRT_ERROR_INVALID_ARGUMENT);
  for (int k = 0; k < PROCS; k++) {
    CHECK(strstr(jobs[k].error, "process 0 waits at collective call 0 (core_barrier), but "
                                "process 1 ended") != NULL);
    nrt_nc_program_destroy(jobs[k].program);
  }
}

/* Sizes that disagree (rank 1 receives from rank 0 more than it sends):
 * both fail with the same message when they meet. */
static void test_sizes_that_disagree_stop_both(void) {
  float in[2][R * C] = {{0}}, out[2][R * C];
  job jobs[PROCS];
  void *hbm[PROCS][2];
  for (int k = 0; k < PROCS; k++) {
    nrt_nc_inst insts[2] = {collective(NRT_NC_COLLECTIVE_NONE, -1, 0, 0, 0, 0, 7),
                            collective(NRT_NC_COLLECTIVE_COPY, 1, -1, 0, 1 - k, 0, 7)};
    if (k == 0) insts[0].ap[1].partitions = R / 2; /* rank 0 sends half */
    hbm[k][0] = in[k];
    hbm[k][1] = out[k];
    jobs[k] = (job){.program = create(insts, 2), .hbm = hbm[k]};
  }
  run_both(jobs);
  for (int k = 0; k < PROCS; k++) CHECK_STATUS(jobs[k].status, NRT_ERROR_INVALID_ARGUMENT);
  for (int k = 0; k < PROCS; k++) {
    CHECK(strstr(jobs[k].error, "program 1 receives 128 elements of dtype") != NULL);
    nrt_nc_program_destroy(jobs[k].program);
  }
}

/* The reduce-then-swap programs, process k's. */
static nrt_nc_program_t reduce_then_swap(int k) {
  nrt_nc_inst insts[3] = {collective(NRT_NC_COLLECTIVE_REDUCE, 1, 0, 3, 0, 0, 3),
                          collective(NRT_NC_COLLECTIVE_NONE, -1, 1, 0, 0, 1, 7),
                          collective(NRT_NC_COLLECTIVE_COPY, 0, -1, 0, 1 - k, 1, 7)};
  return create(insts, 3);
}

/* One process runs out of host memory as its run starts (whichever takes
 * the injected failure): it reports that, and the other stops at once with
 * "process N stopped: out of host memory ...". Then a process that never
 * runs the kernel (nrt_nc_exchange_fail, as a launch that failed or a
 * stream that skips it): the other stops with its reason. */
static void test_a_process_that_fails_alone_stops_the_other(void) {
  float in[2][R * C] = {{0}}, out[2][R * C];
  void *hbm[PROCS][2] = {{in[0], out[0]}, {in[1], out[1]}};
  job jobs[PROCS];
  for (int k = 0; k < PROCS; k++) jobs[k] = (job){.program = reduce_then_swap(k), .hbm = hbm[k]};
  nrt_nc_inject_run_failures(1);
  run_both(jobs);
  nrt_nc_inject_run_failures(0);
  int oom = jobs[0].status == NRT_ERROR_OUT_OF_MEMORY ? 0 : 1, other = 1 - oom;
  CHECK_STATUS(jobs[oom].status, NRT_ERROR_OUT_OF_MEMORY);
  CHECK_STATUS(jobs[other].status, NRT_ERROR_INVALID_ARGUMENT);
  char want[64];
  snprintf(want, sizeof want, "process %d stopped: ", oom);
  CHECK(strstr(jobs[other].error, want) != NULL);
  CHECK(strstr(jobs[other].error, "out of host memory") != NULL);

  jobs[0].skip = "its stream skipped the kernel";
  jobs[1].skip = NULL;
  run_both(jobs);
  CHECK_OK(jobs[0].status);
  CHECK_STATUS(jobs[1].status, NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(jobs[1].error, "process 0 stopped: its stream skipped the kernel") != NULL);
  for (int k = 0; k < PROCS; k++) nrt_nc_program_destroy(jobs[k].program);
}

int main(void) {
  RUN(test_reduce_then_swap_across_processes);
  RUN(test_a_process_that_ends_early_stops_both);
  RUN(test_sizes_that_disagree_stop_both);
  RUN(test_a_process_that_fails_alone_stops_the_other);
  return CHECK_MAIN_RESULT();
}
