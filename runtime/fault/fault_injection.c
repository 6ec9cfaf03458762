/* Fault injection for the runtime's tests, in the manner of SQLite's
 * malloc tests: every allocation the runtime makes is counted, and the Nth
 * one fails as if the host (or the device) were out of memory.
 *
 * Built only with -DNRT_FAULT_INJECTION=ON. The runtime's own code is not
 * edited for host allocations: after the runtime library is archived, its
 * objects have their calls to malloc, calloc, realloc, aligned_alloc,
 * posix_memalign, strdup, mmap and pthread_create renamed (objcopy, see
 * redirect.syms) to the rt_fault_* functions here, which count and then
 * call the real ones.
 * This file lives outside runtime/src so that its own calls are not renamed;
 * the test programs and libc keep allocating normally. Device allocations
 * (nrt_malloc) ask rt_fault_fails() in memory.c (fault.h).
 *
 * Environment, read at the first allocation:
 *   NRT_FAULT_AT=N       fail the Nth allocation (1-based); 0 or unset: none
 *   NRT_FAULT_PERSIST=1  fail every allocation from the Nth on
 * The failure is announced on stderr as it happens,
 *   nrt-fault: pid=P failing allocation N
 * and when NRT_FAULT_AT is set, exit prints
 *   nrt-fault: pid=P allocations=K injected=0|1
 * so that a runner knows when N has passed the last allocation (and, with
 * the pid, which process of a test that spawns children said so). One counter
 * serves all threads (an atomic), so with worker threads the Nth allocation
 * may differ between runs; every one is still an allocation that can fail.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "fault.h"

static pthread_once_t config_once = PTHREAD_ONCE_INIT;
static uint64_t fail_at;   /* 0: never */
static int persist;
static int reporting;      /* NRT_FAULT_AT was set */
static atomic_uint_least64_t seen;
static atomic_int injected;

static void report_at_exit(void) {
  fprintf(stderr, "\nnrt-fault: pid=%ld allocations=%llu injected=%d\n", (long)getpid(),
          (unsigned long long)atomic_load(&seen), atomic_load(&injected));
}

static void read_config(void) {
  const char *at = getenv("NRT_FAULT_AT");
  const char *p = getenv("NRT_FAULT_PERSIST");
  if (at) {
    char *end;
    unsigned long long n = strtoull(at, &end, 10);
    /* A malformed count would silently test nothing: say so and stop. */
    if (*at == 0 || *end != 0) {
      fprintf(stderr, "nrt-fault: NRT_FAULT_AT=%s is not a count\n", at);
      exit(2);
    }
    fail_at = n;
    reporting = 1;
    atexit(report_at_exit);
  }
  persist = p && strcmp(p, "1") == 0;
}

int rt_fault_should_fail(void) {
  pthread_once(&config_once, read_config);
  uint64_t n = atomic_fetch_add(&seen, 1) + 1;
  int fail = fail_at != 0 && (n == fail_at || (persist && n > fail_at));
  if (fail) {
    /* Said at once, since a process may end without the exit report (a
     * forked child's _exit, a crash). */
    /* The leading newline ends a line of the test's own output that the
     * pipe may have cut anywhere (stdout is fully buffered into a pipe). */
    if (!atomic_exchange(&injected, 1))
      fprintf(stderr, "\nnrt-fault: pid=%ld failing allocation %llu\n", (long)getpid(),
              (unsigned long long)n);
  }
  return fail;
}

void *rt_fault_malloc(size_t size) {
  if (rt_fault_should_fail()) {
    errno = ENOMEM;
    return NULL;
  }
  return malloc(size);
}

void *rt_fault_calloc(size_t count, size_t size) {
  if (rt_fault_should_fail()) {
    errno = ENOMEM;
    return NULL;
  }
  return calloc(count, size);
}

void *rt_fault_realloc(void *ptr, size_t size) {
  if (rt_fault_should_fail()) {
    errno = ENOMEM;
    return NULL; /* ptr stays valid, as with a real failure */
  }
  return realloc(ptr, size);
}

void *rt_fault_aligned_alloc(size_t alignment, size_t size) {
  if (rt_fault_should_fail()) {
    errno = ENOMEM;
    return NULL;
  }
  return aligned_alloc(alignment, size);
}

int rt_fault_posix_memalign(void **out, size_t alignment, size_t size) {
  if (rt_fault_should_fail()) return ENOMEM;
  return posix_memalign(out, alignment, size);
}

char *rt_fault_strdup(const char *s) {
  if (rt_fault_should_fail()) {
    errno = ENOMEM;
    return NULL;
  }
  return strdup(s);
}

void *rt_fault_mmap(void *addr, size_t length, int prot, int flags, int fd, off_t offset) {
  if (rt_fault_should_fail()) {
    errno = ENOMEM;
    return MAP_FAILED;
  }
  return mmap(addr, length, prot, flags, fd, offset);
}

/* A thread is host memory too (its stack), and creating one can fail. */
int rt_fault_pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *),
                            void *arg) {
  if (rt_fault_should_fail()) return EAGAIN;
  return pthread_create(thread, attr, start, arg);
}
