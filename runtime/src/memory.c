/* Device memory: one HBM arena per device, in an address space of its own.
 *
 * On first use a device reserves two ranges of host virtual memory as large
 * as its capacity. The device range is mapped without access rights; its
 * addresses are the device pointers handed out, so host code dereferencing
 * one faults, as on hardware. The alias range is readable and writable and
 * holds the bytes. Both are MAP_NORESERVE: nothing is committed until a
 * kernel touches it. nrt_device_to_host adds the fixed distance between them.
 *
 * Inside an arena, nrt_malloc carves 4 KiB-aligned extents first-fit from an
 * address-sorted free list that coalesces on free; live extents sit in a
 * second sorted array so that a bad nrt_free is reported instead of
 * corrupting the lists. nrt_malloc mostly serves the caching allocator's
 * segments, so both arrays stay short. Besides each device's capacity, an
 * allocation must be one the host can back (host_backing.c): the bytes the
 * devices hold but have not yet touched, plus the new ones, must fit in
 * what the host and its memory cgroup still have, less a margin for the
 * process's own heap. Otherwise touching them later would get the process
 * killed by the kernel's OOM killer instead of raising an error now.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "fault.h"
#include "internal.h"

#define ALIGNMENT ((size_t)4096)
/* Frees at least this large hand their host pages back at once; smaller
 * extents are usually reused soon, and a syscall per free would cost more. */
#define RELEASE_MIN ((size_t)64 << 10)

typedef struct extent {
  size_t off, size; /* offset from the arena's base, length */
} extent;

typedef struct extent_array {
  extent *v;
  size_t n, cap;
} extent_array;

typedef struct arena {
  pthread_mutex_t lock;
  int32_t device;
  uintptr_t base;      /* device range */
  char *alias;         /* where the bytes live */
  size_t capacity;     /* the device's hbm_bytes */
  size_t used;         /* bytes in live extents */
  atomic_size_t high_water; /* end of the highest extent ever live */
  extent_array free_list, live;
} arena;

/* Device ranges, appended under arena_lock and published by range_count
 * (release), so lookups read them without a lock. */
typedef struct range {
  uintptr_t base, end;
  uintptr_t to_alias; /* alias - base, modulo 2^N */
  arena *owner;
} range;

static pthread_mutex_t arena_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(arena *) arenas[NRT_MAX_DEVICES];
static range ranges[NRT_MAX_DEVICES];
static atomic_int range_count;

static pthread_once_t host_once = PTHREAD_ONCE_INIT;
static size_t page_size;        /* set once by read_host */
static atomic_size_t host_used; /* live bytes over all devices */
/* Serialises the check that the host can back an allocation with its
 * charge, so two devices cannot both take the last of the host's memory. */
static pthread_mutex_t host_charge_lock = PTHREAD_MUTEX_INITIALIZER;

static size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }
static size_t align_down(size_t x, size_t a) { return x / a * a; }

static void read_host(void) {
  long page = sysconf(_SC_PAGESIZE);
  page_size = page > 0 ? (size_t)page : ALIGNMENT;
}

size_t rt_memory_capacity(int32_t device) {
  const nrt_device_properties *props = rt_device_props(device);
  return props ? (size_t)props->hbm_bytes : 0;
}

/* ---- sorted extent arrays --------------------------------------------- */

/* Index of the first extent whose offset is >= off. */
static size_t extent_lower_bound(const extent_array *a, size_t off) {
  size_t lo = 0, hi = a->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (a->v[mid].off < off) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* Makes room for one more extent; nonzero if the host is out of memory. */
static int extent_reserve(extent_array *a) {
  if (a->n < a->cap) return 0;
  size_t cap = a->cap ? 2 * a->cap : 16;
  extent *v = realloc(a->v, cap * sizeof *v);
  if (!v) return -1;
  a->v = v;
  a->cap = cap;
  return 0;
}

/* Keeps room in the free list for one more extent than there are live
 * ones. There are at most live + 1 free extents, so a free, which adds at
 * most one, then never needs host memory and cannot fail for want of it. */
static int free_list_reserve(arena *a) {
  size_t cap = a->free_list.cap ? a->free_list.cap : 16;
  while (cap < a->live.n + 1) cap *= 2;
  if (cap == a->free_list.cap) return 0;
  extent *v = realloc(a->free_list.v, cap * sizeof *v);
  if (!v) return -1;
  a->free_list.v = v;
  a->free_list.cap = cap;
  return 0;
}

static void extent_insert(extent_array *a, size_t i, extent e) {
  memmove(&a->v[i + 1], &a->v[i], (a->n - i) * sizeof *a->v);
  a->v[i] = e;
  a->n++;
}

static void extent_erase(extent_array *a, size_t i) {
  memmove(&a->v[i], &a->v[i + 1], (a->n - i - 1) * sizeof *a->v);
  a->n--;
}

/* Returns e to the free list, merging with its neighbours (room for one
 * more extent reserved). Returns the merged free extent. */
static extent free_list_insert(extent_array *f, extent e) {
  size_t i = extent_lower_bound(f, e.off);
  int with_prev = i > 0 && f->v[i - 1].off + f->v[i - 1].size == e.off;
  int with_next = i < f->n && e.off + e.size == f->v[i].off;
  if (with_prev && with_next) {
    f->v[i - 1].size += e.size + f->v[i].size;
    extent_erase(f, i);
    return f->v[i - 1];
  }
  if (with_prev) {
    f->v[i - 1].size += e.size;
    return f->v[i - 1];
  }
  if (with_next) {
    f->v[i].off = e.off;
    f->v[i].size += e.size;
    return f->v[i];
  }
  extent_insert(f, i, e);
  return e;
}

/* ---- arenas ----------------------------------------------------------- */

/* Reserves the arena of device (arena_lock held) and publishes it. */
static nrt_status arena_create(int32_t device, arena **out) {
  size_t capacity = rt_memory_capacity(device);
  size_t span = align_up(capacity ? capacity : 1, page_size);
  arena *a = calloc(1, sizeof *a);
  size_t usable = align_down(capacity, ALIGNMENT);
  if (!a || (usable && extent_reserve(&a->free_list))) {
    free(a);
    return rt_fail(NRT_ERROR_SYSTEM, "device %d: out of host memory creating its arena", device);
  }
  const int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
  void *base = mmap(NULL, span, PROT_NONE, flags, -1, 0);
  void *alias = base == MAP_FAILED ? MAP_FAILED
                                   : mmap(NULL, span, PROT_READ | PROT_WRITE, flags, -1, 0);
  if (alias == MAP_FAILED) {
    int err = errno;
    if (base != MAP_FAILED) munmap(base, span);
    free(a->free_list.v);
    free(a);
    return rt_fail(NRT_ERROR_SYSTEM, "device %d: cannot reserve %s of address space: %s", device,
                   rt_format_size(2 * (uint64_t)span).s, strerror(err));
  }
#ifdef MADV_HUGEPAGE
  /* Transparent huge pages where the host offers them on request: large
   * tensors then cost far fewer TLB misses (HBM is mapped with large pages
   * on the hardware too). Advice only: no error if unsupported. */
  madvise(alias, span, MADV_HUGEPAGE);
#endif
  rt_mark_started();
  pthread_mutex_init(&a->lock, NULL);
  a->device = device;
  a->base = (uintptr_t)base;
  a->alias = alias;
  a->capacity = capacity;
  if (usable) extent_insert(&a->free_list, 0, (extent){.off = 0, .size = usable});

  int n = atomic_load_explicit(&range_count, memory_order_relaxed);
  ranges[n] = (range){.base = a->base,
                      .end = a->base + span,
                      .to_alias = (uintptr_t)alias - a->base,
                      .owner = a};
  atomic_store_explicit(&range_count, n + 1, memory_order_release);
  atomic_store_explicit(&arenas[device], a, memory_order_release);
  *out = a;
  return NRT_SUCCESS;
}

/* The arena of a valid device, created on first use. */
static nrt_status arena_get(int32_t device, arena **out) {
  arena *a = atomic_load_explicit(&arenas[device], memory_order_acquire);
  if (a) {
    *out = a;
    return NRT_SUCCESS;
  }
  pthread_once(&host_once, read_host);
  pthread_mutex_lock(&arena_lock);
  a = atomic_load_explicit(&arenas[device], memory_order_relaxed);
  nrt_status s = a ? NRT_SUCCESS : arena_create(device, &a);
  pthread_mutex_unlock(&arena_lock);
  *out = a;
  return s;
}

/* The published range containing p, or NULL. Lock-free. */
static const range *find_range(uintptr_t p) {
  int n = atomic_load_explicit(&range_count, memory_order_acquire);
  for (int i = 0; i < n; i++)
    if (p >= ranges[i].base && p < ranges[i].end) return &ranges[i];
  return NULL;
}

/* Bytes of the devices' arenas the host has backed with pages so far (up
 * to each arena's high-water mark; pages of freed small extents count too,
 * so this may exceed what live extents hold). */
static size_t resident_device_bytes(void) {
  size_t resident = 0;
  int n = atomic_load_explicit(&range_count, memory_order_acquire);
  for (int i = 0; i < n; i++) {
    size_t span = align_up(atomic_load(&ranges[i].owner->high_water), page_size);
    size_t pages = span / page_size;
    if (!pages) continue;
    unsigned char *vec = malloc(pages);
    if (!vec) return 0; /* assume nothing resident: the cautious answer */
    if (mincore(ranges[i].owner->alias, span, vec) == 0)
      for (size_t p = 0; p < pages; p++) resident += (vec[p] & 1) * page_size;
    free(vec);
  }
  return resident;
}

/* A margin of host memory left to the process's own heap and the rest of
 * the system: a sixteenth of what is available, at most 512 MiB. */
static uint64_t host_margin(uint64_t available) {
  uint64_t m = available / 16;
  return m < ((uint64_t)512 << 20) ? m : (uint64_t)512 << 20;
}

/* Counts size against what the host can back; nonzero (with *available
 * set) if it cannot. The quick test assumes none of the held bytes is
 * resident yet; only near the limit are the resident pages counted. */
static int host_charge(size_t size, uint64_t *available) {
  pthread_mutex_lock(&host_charge_lock);
  uint64_t avail = rt_host_available(), held = atomic_load(&host_used);
  uint64_t room = avail - host_margin(avail);
  int ok = size <= room && held <= room - size;
  if (!ok) {
    size_t resident = resident_device_bytes();
    uint64_t untouched = held > resident ? held - resident : 0;
    ok = size <= room && untouched <= room - size;
  }
  if (ok) atomic_fetch_add(&host_used, size);
  pthread_mutex_unlock(&host_charge_lock);
  *available = avail;
  return !ok;
}

/* Allocates bytes from a (lock held). */
static nrt_status arena_alloc(arena *a, size_t bytes, void **dev_ptr) {
  size_t avail = a->capacity - a->used, size = 0;
  if (bytes > avail || (size = align_up(bytes, ALIGNMENT)) > avail)
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "device %d: cannot allocate %s: %s of %s in use",
                   a->device, rt_format_size(bytes).s, rt_format_size(a->used).s, rt_format_size(a->capacity).s);
  size_t i = 0;
  while (i < a->free_list.n && a->free_list.v[i].size < size) i++;
  if (i == a->free_list.n)
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY,
                   "device %d: cannot allocate %s: %s of %s in use, and no free range that "
                   "large is contiguous",
                   a->device, rt_format_size(bytes).s, rt_format_size(a->used).s, rt_format_size(a->capacity).s);
  uint64_t host_available;
  if (host_charge(size, &host_available))
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY,
                   "device %d: cannot allocate %s: device memory is backed by host memory, "
                   "and the host (with its memory cgroup's limit) has only %s available while "
                   "the devices already hold %s",
                   a->device, rt_format_size(bytes).s, rt_format_size(host_available).s,
                   rt_format_size(atomic_load(&host_used)).s);
  if (extent_reserve(&a->live) || free_list_reserve(a)) {
    atomic_fetch_sub(&host_used, size);
    return rt_fail(NRT_ERROR_SYSTEM, "device %d: out of host memory for allocation records",
                   a->device);
  }
  extent *f = &a->free_list.v[i];
  extent e = {.off = f->off, .size = size};
  f->off += size;
  f->size -= size;
  if (f->size == 0) extent_erase(&a->free_list, i);
  extent_insert(&a->live, extent_lower_bound(&a->live, e.off), e);
  a->used += size;
  if (e.off + size > atomic_load(&a->high_water)) atomic_store(&a->high_water, e.off + size);
  *dev_ptr = (void *)(a->base + e.off);
  return NRT_SUCCESS;
}

/* Frees the live extent starting at off (lock held). */
static nrt_status arena_free(arena *a, size_t off) {
  size_t i = extent_lower_bound(&a->live, off);
  if (i == a->live.n || a->live.v[i].off != off)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "nrt_free: %p is not the start of a live allocation on device %d (already "
                   "freed, or not returned by nrt_malloc)",
                   (void *)(a->base + off), a->device);
  extent e = a->live.v[i]; /* free_list_reserve left room for it */
  extent_erase(&a->live, i);
  extent merged = free_list_insert(&a->free_list, e);
  a->used -= e.size;
  atomic_fetch_sub(&host_used, e.size);
  if (e.size >= RELEASE_MIN) {
    /* Whole pages covering e that lie entirely in free space. The lock is
     * held, so no new allocation can be written there meanwhile. */
    size_t lo = align_up(merged.off, page_size);
    size_t hi = align_down(merged.off + merged.size, page_size);
    if (lo < align_down(e.off, page_size)) lo = align_down(e.off, page_size);
    if (hi > align_up(e.off + e.size, page_size)) hi = align_up(e.off + e.size, page_size);
    if (lo < hi) madvise(a->alias + lo, hi - lo, MADV_DONTNEED);
  }
  return NRT_SUCCESS;
}

/* ---- public API ------------------------------------------------------- */

nrt_status nrt_malloc(int32_t device, size_t bytes, void **dev_ptr) {
  nrt_status s = rt_ensure_init();
  if (s) return s;
  if (!dev_ptr) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_malloc: dev_ptr is NULL");
  *dev_ptr = NULL;
  if ((s = rt_check_device(device))) return s;
  if (bytes == 0) return NRT_SUCCESS;
  if (rt_fault_fails())
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "device %d: cannot allocate %s: injected fault",
                   device, rt_format_size(bytes).s);
  arena *a;
  if ((s = arena_get(device, &a))) return s;
  pthread_mutex_lock(&a->lock);
  s = arena_alloc(a, bytes, dev_ptr);
  pthread_mutex_unlock(&a->lock);
  return s;
}

nrt_status nrt_free(void *dev_ptr) {
  nrt_status s = rt_ensure_init();
  if (s) return s;
  if (!dev_ptr) return NRT_SUCCESS;
  const range *r = find_range((uintptr_t)dev_ptr);
  if (!r)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_free: %p is not a device address", dev_ptr);
  pthread_mutex_lock(&r->owner->lock);
  s = arena_free(r->owner, (uintptr_t)dev_ptr - r->owner->base);
  pthread_mutex_unlock(&r->owner->lock);
  return s;
}

/* free_bytes is the device's unused capacity (the host RAM limit, shared by
 * all devices, is not folded in). */
nrt_status nrt_mem_get_info(int32_t device, size_t *free_bytes, size_t *total_bytes) {
  nrt_status s = rt_ensure_init();
  if (s) return s;
  if (!free_bytes || !total_bytes)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_mem_get_info: NULL output pointer");
  if ((s = rt_check_device(device))) return s;
  size_t used = 0;
  arena *a = atomic_load_explicit(&arenas[device], memory_order_acquire);
  if (a) {
    pthread_mutex_lock(&a->lock);
    used = a->used;
    pthread_mutex_unlock(&a->lock);
  }
  *total_bytes = rt_memory_capacity(device);
  *free_bytes = *total_bytes - used;
  return NRT_SUCCESS;
}

nrt_status nrt_pointer_get_device(const void *ptr, int32_t *device) {
  nrt_status s = rt_ensure_init();
  if (s) return s;
  if (!device) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_pointer_get_device: device is NULL");
  const range *r = find_range((uintptr_t)ptr);
  if (!r) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%p is not a device address", ptr);
  *device = r->owner->device;
  return NRT_SUCCESS;
}

/* Called by every kernel for every operand, so it skips rt_ensure_init: an
 * arena exists only after initialisation, and before that nothing is found. */
void *nrt_device_to_host(const void *dev_ptr) {
  const range *r = find_range((uintptr_t)dev_ptr);
  return r ? (void *)((uintptr_t)dev_ptr + r->to_alias) : NULL;
}
