/* Pinned host memory: page-locked buffers that copies may use asynchronously.
 *
 * nrt_host_alloc maps whole pages and locks them when RLIMIT_MEMLOCK allows
 * (best effort: an unlocked buffer still works, it is merely pageable), then
 * registers [base, base + size) in an address-sorted table so that any
 * interior pointer is recognised. A queued copy holds its buffer with
 * rt_host_pin_acquire until it has run. nrt_host_free of a held buffer marks
 * it freed (it no longer counts as pinned) but leaves it registered and
 * mapped; the last rt_host_pin_release unmaps it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "internal.h"

typedef struct pinned {
  uintptr_t base;
  size_t size;   /* bytes asked for */
  size_t mapped; /* size rounded up to pages */
  uint64_t holds; /* copies in flight */
  int freed;      /* nrt_host_free came while held */
} pinned;

static pthread_mutex_t pin_lock = PTHREAD_MUTEX_INITIALIZER;
static pinned *pins; /* sorted by base */
static size_t pin_count, pin_cap;

/* Index of the first buffer starting after p (lock held). */
static size_t pin_upper_bound(uintptr_t p) {
  size_t lo = 0, hi = pin_count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (pins[mid].base <= p) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* Index of the registered buffer containing p, or pin_count (lock held). */
static size_t pin_find(uintptr_t p) {
  size_t i = pin_upper_bound(p);
  return i > 0 && p - pins[i - 1].base < pins[i - 1].size ? i - 1 : pin_count;
}

/* Unregisters buffer i (lock held); the caller unmaps it after unlocking. */
static pinned pin_remove(size_t i) {
  pinned p = pins[i];
  memmove(&pins[i], &pins[i + 1], (pin_count - i - 1) * sizeof *pins);
  pin_count--;
  return p;
}

nrt_status nrt_host_alloc(size_t bytes, void **host_ptr) {
  nrt_status s = rt_ensure_init();
  if (s) return s;
  if (!host_ptr) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_host_alloc: host_ptr is NULL");
  *host_ptr = NULL;
  if (bytes == 0) return NRT_SUCCESS;
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  if (bytes > SIZE_MAX - page)
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "cannot allocate %zu bytes of pinned host memory",
                   bytes);
  size_t mapped = (bytes + page - 1) / page * page;
  void *p = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "cannot allocate %zu bytes of pinned host memory: %s",
                   bytes, strerror(errno));
  (void)mlock(p, mapped);

  pthread_mutex_lock(&pin_lock);
  if (pin_count == pin_cap) {
    size_t cap = pin_cap ? 2 * pin_cap : 64;
    pinned *v = realloc(pins, cap * sizeof *v);
    if (!v) {
      pthread_mutex_unlock(&pin_lock);
      munmap(p, mapped);
      return rt_fail(NRT_ERROR_SYSTEM, "out of host memory registering a pinned buffer");
    }
    pins = v;
    pin_cap = cap;
  }
  size_t i = pin_upper_bound((uintptr_t)p);
  memmove(&pins[i + 1], &pins[i], (pin_count - i) * sizeof *pins);
  pins[i] = (pinned){.base = (uintptr_t)p, .size = bytes, .mapped = mapped};
  pin_count++;
  pthread_mutex_unlock(&pin_lock);
  *host_ptr = p;
  return NRT_SUCCESS;
}

nrt_status nrt_host_free(void *host_ptr) {
  nrt_status s = rt_ensure_init();
  if (s) return s;
  if (!host_ptr) return NRT_SUCCESS;
  pthread_mutex_lock(&pin_lock);
  size_t i = pin_find((uintptr_t)host_ptr);
  if (i == pin_count || pins[i].base != (uintptr_t)host_ptr || pins[i].freed) {
    pthread_mutex_unlock(&pin_lock);
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "nrt_host_free: %p is not a live pinned buffer from nrt_host_alloc (already "
                   "freed, an interior pointer, or pageable memory)",
                   host_ptr);
  }
  if (pins[i].holds) {
    pins[i].freed = 1;
    pthread_mutex_unlock(&pin_lock);
    return NRT_SUCCESS;
  }
  pinned p = pin_remove(i);
  pthread_mutex_unlock(&pin_lock);
  munmap((void *)p.base, p.mapped);
  return NRT_SUCCESS;
}

int nrt_host_is_pinned(const void *ptr, void **base, size_t *size) {
  if (rt_ensure_init()) return 0;
  pthread_mutex_lock(&pin_lock);
  size_t i = pin_find((uintptr_t)ptr);
  int live = i < pin_count && !pins[i].freed;
  if (live && base) *base = (void *)pins[i].base;
  if (live && size) *size = pins[i].size;
  pthread_mutex_unlock(&pin_lock);
  return live;
}

int rt_host_pin_acquire(const void *ptr) {
  pthread_mutex_lock(&pin_lock);
  size_t i = pin_find((uintptr_t)ptr);
  int live = i < pin_count && !pins[i].freed;
  if (live) pins[i].holds++;
  pthread_mutex_unlock(&pin_lock);
  return live;
}

void rt_host_pin_release(const void *ptr) {
  pthread_mutex_lock(&pin_lock);
  size_t i = pin_find((uintptr_t)ptr);
  pinned p = {0};
  if (i < pin_count && --pins[i].holds == 0 && pins[i].freed) p = pin_remove(i);
  pthread_mutex_unlock(&pin_lock);
  if (p.base) munmap((void *)p.base, p.mapped);
}
