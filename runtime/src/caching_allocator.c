/* The caching device allocator.
 *
 * Tensors come and go far more often than nrt_malloc should be asked, so
 * blocks are carved from cached segments and go back to the cache on free.
 * The semantics follow PyTorch's CUDA caching allocator (written anew):
 * requests round up to 512 B; the small pool (requests up to 1 MiB) uses
 * 2 MiB segments, the large pool 20 MiB segments or the request rounded up
 * to 2 MiB; a request takes the best-fitting free block of its pool and
 * stream, split when the rest is worth keeping; a freed block merges with
 * its free neighbours. A segment belongs to the stream it was allocated for,
 * whose order makes immediate reuse safe. A block that other streams used
 * (nrt_cache_record_stream) is "pending" after free: an event is recorded on
 * each of those streams and the block returns to its pool once all have
 * completed, which every allocation checks without blocking.
 *
 * Giving a segment back to nrt_free (empty_cache, or the retry after a
 * failed allocation) ends stream order's protection: its pages are dropped
 * and its addresses may go to another stream's new segment. So a block
 * remembers the allocation stream's submitted count when it was freed (its
 * last use is no later), and a segment is released only once that stream
 * has completed past it, waiting as cudaFree synchronises. Segments hold a
 * reference on their stream, whose counts outlive nrt_stream_destroy.
 *
 * State is per device behind one mutex: the free blocks of each pool in an
 * array sorted by (stream, size, address), so best fit is a binary search,
 * and the allocated blocks in an open-addressing hash table keyed by
 * address, so free is O(1). Bookkeeping memory is reserved on the
 * allocation path; freeing never allocates and cannot fail for want of it.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "internal.h"
#include "stream_free_log.h"
#include "neuronrt/cache_inspect.h"

#define MIB ((size_t)1 << 20)
#define MIN_BLOCK ((size_t)512)        /* sizes are multiples of this */
#define SMALL_REQUEST_MAX (1 * MIB)    /* largest request of the small pool */
#define SMALL_SEGMENT (2 * MIB)
#define LARGE_SEGMENT (20 * MIB)       /* for large requests below MID_REQUEST */
#define MID_REQUEST (10 * MIB)
#define LARGE_ROUND (2 * MIB)          /* bigger segments round up to this */
#define REQUEST_MAX ((size_t)1 << 62)  /* refused before any rounding */
#define SPARE_BLOCKS_MAX 64

enum { SMALL, LARGE };
enum { BLOCK_FREE, BLOCK_ALLOCATED, BLOCK_PENDING };

typedef struct stream_use {
  nrt_stream_t stream;
  nrt_event_t event; /* NULL once its record completed */
} stream_use;

typedef struct block {
  uintptr_t addr;
  size_t size;
  size_t requested;           /* bytes asked for, while allocated */
  nrt_stream_t stream;        /* the segment's allocation stream */
  uint64_t last_use;          /* stream's submitted count when last freed */
  struct block *prev, *next;  /* address neighbours in the segment */
  struct block *pending_next; /* pending list link (also the spare list's) */
  stream_use *uses;           /* other streams that used the block */
  uint32_t n_uses, cap_uses;
  uint32_t events_left;       /* records not yet completed, while pending */
  uint8_t pool;
  uint8_t state;
} block;

typedef struct pool {
  block **free;  /* sorted by (stream, size, addr) */
  size_t n, cap; /* cap >= blocks, so freeing never grows the array */
  size_t blocks; /* blocks of this pool in any state */
} pool;

typedef struct block_map {
  block **slots; /* 1 << bits slots, at most half full */
  size_t n;
  unsigned bits;
} block_map;

typedef struct cache {
  pthread_mutex_t lock;
  int32_t device;
  pool pools[2];
  block_map live;          /* allocated blocks by address */
  block *pending;          /* freed blocks waiting for events */
  block *spare;            /* recycled block records */
  size_t n_spare;
  nrt_event_t *idle;       /* events free for reuse */
  size_t n_idle, n_events; /* the array has room for all n_events */
  nrt_cache_stats stats;
} cache;

static pthread_mutex_t create_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(cache *) caches[NRT_MAX_DEVICES];

/* ---- events (neuronrt/cache_inspect.h) ---------------------------------- */

typedef void (*observer_fn)(void *ctx, const nrt_cache_event *event);
static _Atomic(observer_fn) observer;
static _Atomic(void *) observer_ctx;

/* Tells the observer, if any, of an event; called with c->lock held. */
static inline void notify(const cache *c, nrt_cache_event_kind kind, uintptr_t addr, size_t size,
                          nrt_stream_t stream) {
  observer_fn fn = atomic_load_explicit(&observer, memory_order_acquire);
  if (__builtin_expect(fn == NULL, 1)) return;
  nrt_cache_event e = {.kind = kind,
                       .device = c->device,
                       .addr = addr,
                       .size = size,
                       .stream_id = stream ? nrt_stream_id(stream) : -1};
  fn(atomic_load_explicit(&observer_ctx, memory_order_acquire), &e);
}

/* The out-of-memory event: the bytes asked for and what the device had free. */
static inline void notify_oom(const cache *c, size_t bytes, size_t device_free) {
  observer_fn fn = atomic_load_explicit(&observer, memory_order_acquire);
  if (__builtin_expect(fn == NULL, 1)) return;
  nrt_cache_event e = {.kind = NRT_CACHE_EVENT_OOM, .device = c->device, .size = bytes,
                       .stream_id = -1, .device_free = device_free};
  fn(atomic_load_explicit(&observer_ctx, memory_order_acquire), &e);
}

/* ---- sizes ------------------------------------------------------------ */

static size_t round_size(size_t bytes) {
  return bytes < MIN_BLOCK ? MIN_BLOCK : (bytes + MIN_BLOCK - 1) / MIN_BLOCK * MIN_BLOCK;
}

static size_t segment_size(size_t size) {
  if (size <= SMALL_REQUEST_MAX) return SMALL_SEGMENT;
  if (size < MID_REQUEST) return LARGE_SEGMENT;
  return (size + LARGE_ROUND - 1) / LARGE_ROUND * LARGE_ROUND;
}

/* Whether the rest of b after taking size is worth a block of its own. */
static int should_split(const block *b, size_t size) {
  size_t rest = b->size - size;
  return b->pool == SMALL ? rest >= MIN_BLOCK : rest > SMALL_REQUEST_MAX;
}

/* ---- statistics ------------------------------------------------------- */

/* Adds amount to the all-pools entry and to pool's entry of a stat array. */
static void stat_inc(nrt_stat s[NRT_POOL_KINDS], int pool, int64_t amount) {
  nrt_stat *both[2] = {&s[NRT_POOL_ALL], &s[pool == SMALL ? NRT_POOL_SMALL : NRT_POOL_LARGE]};
  for (int k = 0; k < 2; k++) {
    nrt_stat *t = both[k];
    t->current += amount;
    t->allocated += amount;
    if (t->current > t->peak) t->peak = t->current;
  }
}

static void stat_dec(nrt_stat s[NRT_POOL_KINDS], int pool, int64_t amount) {
  nrt_stat *both[2] = {&s[NRT_POOL_ALL], &s[pool == SMALL ? NRT_POOL_SMALL : NRT_POOL_LARGE]};
  for (int k = 0; k < 2; k++) {
    nrt_stat *t = both[k];
    t->current -= amount;
    t->freed += amount;
  }
}

/* Resets the peaks to the current values, or else the accumulated counts. */
static void stats_reset(nrt_cache_stats *st, int peaks) {
  nrt_stat *arrays[] = {st->allocation,   st->segment,         st->active,
                        st->inactive_split, st->allocated_bytes, st->reserved_bytes,
                        st->active_bytes,   st->requested_bytes, st->inactive_split_bytes};
  for (size_t i = 0; i < sizeof arrays / sizeof *arrays; i++)
    for (int k = 0; k < NRT_POOL_KINDS; k++) {
      if (peaks) {
        arrays[i][k].peak = arrays[i][k].current;
      } else {
        arrays[i][k].allocated = 0;
        arrays[i][k].freed = 0;
      }
    }
  if (!peaks) {
    st->num_alloc_retries = st->num_ooms = st->num_sync_all_streams = 0;
    st->num_device_alloc = st->num_device_free = 0;
  }
}

/* ---- free-block index ------------------------------------------------- */

/* Index of the first free block not ordered before (stream, size, addr). */
static size_t pool_lower_bound(const pool *p, uintptr_t stream, size_t size, uintptr_t addr) {
  size_t lo = 0, hi = p->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const block *b = p->free[mid];
    uintptr_t bs = (uintptr_t)b->stream;
    int before = bs != stream ? bs < stream : b->size != size ? b->size < size : b->addr < addr;
    if (before) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

static void pool_insert(pool *p, block *b) {
  size_t i = pool_lower_bound(p, (uintptr_t)b->stream, b->size, b->addr);
  memmove(&p->free[i + 1], &p->free[i], (p->n - i) * sizeof *p->free);
  p->free[i] = b;
  p->n++;
}

static void pool_remove(pool *p, const block *b) {
  size_t i = pool_lower_bound(p, (uintptr_t)b->stream, b->size, b->addr);
  memmove(&p->free[i], &p->free[i + 1], (p->n - i - 1) * sizeof *p->free);
  p->n--;
}

/* The smallest free block of stream holding size bytes, or NULL. */
static block *pool_best_fit(const pool *p, nrt_stream_t stream, size_t size) {
  size_t i = pool_lower_bound(p, (uintptr_t)stream, size, 0);
  return i < p->n && p->free[i]->stream == stream ? p->free[i] : NULL;
}

/* Makes room for k more blocks in the pool; nonzero if out of host memory. */
static int pool_reserve(pool *p, size_t k) {
  if (p->cap >= p->blocks + k) return 0;
  size_t cap = 2 * p->cap > p->blocks + k ? 2 * p->cap : p->blocks + k + 16;
  block **v = realloc(p->free, cap * sizeof *v);
  if (!v) return -1;
  p->free = v;
  p->cap = cap;
  return 0;
}

/* ---- allocated-block map ---------------------------------------------- */

static size_t map_home(const block_map *m, uintptr_t addr) {
  return (size_t)(((uint64_t)addr * 0x9E3779B97F4A7C15ull) >> (64 - m->bits));
}

/* Slot holding the block at addr, or SIZE_MAX. */
static size_t map_find(const block_map *m, uintptr_t addr) {
  if (!m->n) return SIZE_MAX;
  size_t mask = ((size_t)1 << m->bits) - 1;
  for (size_t i = map_home(m, addr); m->slots[i]; i = (i + 1) & mask)
    if (m->slots[i]->addr == addr) return i;
  return SIZE_MAX;
}

static void map_put(block_map *m, block *b) {
  size_t mask = ((size_t)1 << m->bits) - 1, i = map_home(m, b->addr);
  while (m->slots[i]) i = (i + 1) & mask;
  m->slots[i] = b;
  m->n++;
}

/* Empties slot i, shifting back later entries of its probe run. */
static void map_erase(block_map *m, size_t i) {
  size_t mask = ((size_t)1 << m->bits) - 1;
  for (size_t j = (i + 1) & mask; m->slots[j]; j = (j + 1) & mask) {
    size_t home = map_home(m, m->slots[j]->addr);
    if (((j - home) & mask) >= ((j - i) & mask)) { /* home not in (i, j] */
      m->slots[i] = m->slots[j];
      i = j;
    }
  }
  m->slots[i] = NULL;
  m->n--;
}

/* Makes room for one more block; nonzero if out of host memory. */
static int map_reserve(block_map *m) {
  if (m->bits && 2 * (m->n + 1) <= (size_t)1 << m->bits) return 0;
  block_map bigger = {.bits = m->bits ? m->bits + 1 : 10};
  bigger.slots = calloc((size_t)1 << bigger.bits, sizeof *bigger.slots);
  if (!bigger.slots) return -1;
  for (size_t i = 0; m->bits && i < (size_t)1 << m->bits; i++)
    if (m->slots[i]) map_put(&bigger, m->slots[i]);
  free(m->slots);
  *m = bigger;
  return 0;
}

/* ---- block records and events ----------------------------------------- */

/* Keeps at least k block records ready; nonzero if out of host memory. */
static int spare_reserve(cache *c, size_t k) {
  while (c->n_spare < k) {
    block *b = malloc(sizeof *b);
    if (!b) return -1;
    b->pending_next = c->spare;
    c->spare = b;
    c->n_spare++;
  }
  return 0;
}

static block *spare_take(cache *c) {
  block *b = c->spare;
  c->spare = b->pending_next;
  c->n_spare--;
  return b;
}

static void spare_give(cache *c, block *b) {
  if (c->n_spare >= SPARE_BLOCKS_MAX) {
    free(b);
    return;
  }
  b->pending_next = c->spare;
  c->spare = b;
  c->n_spare++;
}

/* An event for a stream use: an idle one, or a new one. */
static nrt_status event_take(cache *c, nrt_event_t *out) {
  if (c->n_idle) {
    *out = c->idle[--c->n_idle];
    return NRT_SUCCESS;
  }
  nrt_event_t *idle = realloc(c->idle, (c->n_events + 1) * sizeof *idle);
  if (!idle) return rt_fail(NRT_ERROR_SYSTEM, "out of host memory for the allocator's events");
  c->idle = idle;
  nrt_status s = nrt_event_create(NRT_EVENT_DEFAULT, out);
  if (!s) c->n_events++;
  return s;
}

/* The idle array has room for every event, so this cannot fail. */
static void event_give(cache *c, nrt_event_t event) { c->idle[c->n_idle++] = event; }

/* ---- blocks ----------------------------------------------------------- */

/* Absorbs the free neighbour n into b; returns the bytes absorbed (0 if n
 * is absent or not free). */
static size_t try_merge(cache *c, block *b, block *n) {
  if (!n || n->state != BLOCK_FREE) return 0;
  pool *p = &c->pools[b->pool];
  pool_remove(p, n);
  if (n == b->prev) {
    b->addr = n->addr;
    b->prev = n->prev;
    if (b->prev) b->prev->next = b;
  } else {
    b->next = n->next;
    if (b->next) b->next->prev = b;
  }
  size_t absorbed = n->size;
  b->size += absorbed;
  if (n->last_use > b->last_use) b->last_use = n->last_use;
  p->blocks--;
  spare_give(c, n);
  return absorbed;
}

/* Returns an allocated or pending block (no stream uses left) to its pool. */
static void free_block(cache *c, block *b) {
  size_t size = b->size;
  int64_t split_blocks = 0, split_bytes = 0;
  b->state = BLOCK_FREE;
  /* A use array can exist with no uses in it (its event could not be had). */
  free(b->uses);
  b->uses = NULL;
  b->cap_uses = 0;
  for (int k = 0; k < 2; k++) {
    size_t absorbed = try_merge(c, b, k ? b->next : b->prev);
    if (absorbed) {
      split_blocks--;
      split_bytes -= (int64_t)absorbed;
    }
  }
  pool_insert(&c->pools[b->pool], b);
  if (b->prev || b->next) {
    split_blocks++;
    split_bytes += (int64_t)b->size;
  }
  nrt_cache_stats *st = &c->stats;
  if (split_blocks > 0) stat_inc(st->inactive_split, b->pool, split_blocks);
  if (split_blocks < 0) stat_dec(st->inactive_split, b->pool, -split_blocks);
  if (split_bytes > 0) stat_inc(st->inactive_split_bytes, b->pool, split_bytes);
  if (split_bytes < 0) stat_dec(st->inactive_split_bytes, b->pool, -split_bytes);
  stat_dec(st->active, b->pool, 1);
  stat_dec(st->active_bytes, b->pool, (int64_t)size);
}

/* Returns a pending block whose events have all completed to its pool,
 * and its events to the idle list. */
static void pending_done(cache *c, block *b) {
  notify(c, NRT_CACHE_EVENT_FREE_COMPLETED, b->addr, b->size, b->stream);
  for (uint32_t i = 0; i < b->n_uses; i++)
    if (b->uses[i].event) event_give(c, b->uses[i].event);
  free(b->uses);
  b->uses = NULL;
  b->n_uses = b->cap_uses = b->events_left = 0;
  free_block(c, b);
}

/* Returns the pending blocks whose events have all completed to their
 * pools. Never blocks. */
static void process_pending(cache *c) {
  block **link = &c->pending;
  while (*link) {
    block *b = *link;
    for (uint32_t i = 0; i < b->n_uses; i++) {
      nrt_event_t event = b->uses[i].event;
      if (event && nrt_event_query(event) != NRT_ERROR_NOT_READY) {
        event_give(c, event);
        b->uses[i].event = NULL;
        b->events_left--;
      }
    }
    if (b->events_left) {
      link = &b->pending_next;
    } else {
      *link = b->pending_next;
      pending_done(c, b);
    }
  }
}

/* Waits by polling: stream.h lets nrt_event_synchronize hand over (and
 * clear) a stream's sticky error, which belongs to the user's next
 * synchronising call, not to the allocator. */
static void wait_event(nrt_event_t event) {
  struct timespec pause = {.tv_nsec = 1000};
  while (nrt_event_query(event) == NRT_ERROR_NOT_READY) {
    nanosleep(&pause, NULL);
    if (pause.tv_nsec < 1000000) pause.tv_nsec *= 2;
  }
}

/* Waits for every pending block's events, then frees the blocks. Drops the
 * lock meanwhile: the detached blocks are reachable by no one else. */
static void wait_pending(cache *c) {
  block *list = c->pending;
  c->pending = NULL;
  pthread_mutex_unlock(&c->lock);
  for (block *b = list; b; b = b->pending_next)
    for (uint32_t i = 0; i < b->n_uses; i++)
      if (b->uses[i].event) wait_event(b->uses[i].event);
  pthread_mutex_lock(&c->lock);
  while (list) {
    block *b = list;
    list = b->pending_next;
    pending_done(c, b);
  }
}

static int whole_segment(const block *b) { return !b->prev && !b->next; }

/* A fully free segment whose stream has not yet completed its last use, or
 * NULL. */
static block *segment_in_use(cache *c) {
  for (int k = 0; k < 2; k++)
    for (size_t i = 0; i < c->pools[k].n; i++) {
      block *b = c->pools[k].free[i];
      if (whole_segment(b) && !rt_stream_passed(b->stream, b->last_use)) return b;
    }
  return NULL;
}

/* Waits until the streams of the fully free segments have passed their last
 * uses. Drops the lock meanwhile (a worker's host task may allocate); a few
 * rounds, since other threads may free more blocks meanwhile -- a segment
 * still in use after them is simply kept. */
static void wait_segment_uses(cache *c) {
  block *b;
  for (int round = 0; round < 4 && (b = segment_in_use(c)); round++) {
    nrt_stream_t stream = b->stream;
    uint64_t seq = b->last_use;
    rt_stream_retain(stream);
    pthread_mutex_unlock(&c->lock);
    rt_stream_wait_passed(stream, seq);
    pthread_mutex_lock(&c->lock);
    rt_stream_release(stream);
  }
}

/* Gives every fully free segment of the device whose stream has passed its
 * last use back to nrt_free, after waiting for those uses. */
static void release_free_segments(cache *c) {
  wait_segment_uses(c);
  for (int k = 0; k < 2; k++) {
    pool *p = &c->pools[k];
    size_t kept = 0;
    for (size_t i = 0; i < p->n; i++) {
      block *b = p->free[i];
      if (!whole_segment(b) || !rt_stream_passed(b->stream, b->last_use) ||
          nrt_free((void *)b->addr) != NRT_SUCCESS) {
        p->free[kept++] = b;
        continue;
      }
      rt_log(NRT_LOG_DEBUG, "neuron:%d segment of %s at %#lx given back", c->device,
             rt_format_size(b->size).s, (unsigned long)b->addr);
      notify(c, NRT_CACHE_EVENT_SEGMENT_FREE, b->addr, b->size, b->stream);
      rt_stream_release(b->stream);
      stat_dec(c->stats.segment, k, 1);
      stat_dec(c->stats.reserved_bytes, k, (int64_t)b->size);
      c->stats.num_device_free++;
      p->blocks--;
      spare_give(c, b);
    }
    p->n = kept;
  }
}

/* Allocates a segment of size bytes for stream into pool k. */
static nrt_status new_segment(cache *c, nrt_stream_t stream, int k, size_t size, block **out) {
  pool *p = &c->pools[k];
  if (pool_reserve(p, 1) || spare_reserve(c, 1))
    return rt_fail(NRT_ERROR_SYSTEM, "out of host memory for the caching allocator's records");
  void *addr;
  nrt_status s = nrt_malloc(c->device, size, &addr);
  if (s) return s;
  block *b = spare_take(c);
  *b = (block){.addr = (uintptr_t)addr, .size = size, .stream = stream, .pool = (uint8_t)k};
  rt_stream_retain(stream);
  p->blocks++;
  pool_insert(p, b);
  stat_inc(c->stats.segment, k, 1);
  stat_inc(c->stats.reserved_bytes, k, (int64_t)size);
  c->stats.num_device_alloc++;
  notify(c, NRT_CACHE_EVENT_SEGMENT_ALLOC, b->addr, b->size, stream);
  rt_log(NRT_LOG_DEBUG, "neuron:%d new %s segment of %s at %#lx", c->device,
         k == SMALL ? "small" : "large", rt_format_size(size).s, (unsigned long)b->addr);
  *out = b;
  return NRT_SUCCESS;
}

/* Sets the out-of-memory message (the failing nrt_malloc's message is still
 * the thread's last error) and returns NRT_ERROR_OUT_OF_MEMORY. */
static nrt_status out_of_memory(cache *c, size_t bytes, size_t segment) {
  c->stats.num_ooms++;
  rt_metric_add(NRT_METRIC_ALLOC_OOMS, 1);
  char cause[512];
  snprintf(cause, sizeof cause, "%s", nrt_last_error());
  size_t free_bytes = 0, total = 0;
  nrt_mem_get_info(c->device, &free_bytes, &total);
  int64_t allocated = c->stats.allocated_bytes[NRT_POOL_ALL].current;
  int64_t reserved = c->stats.reserved_bytes[NRT_POOL_ALL].current;
  char detail[96] = "";
  if (bytes <= REQUEST_MAX && segment > round_size(bytes))
    snprintf(detail, sizeof detail, " (in a new %s segment)", rt_format_size(segment).s);
  /* The device had room, so the host RAM limit or fragmentation refused. */
  int other_cause = free_bytes >= segment;
  notify_oom(c, bytes, free_bytes);
  nrt_status s = rt_fail(NRT_ERROR_OUT_OF_MEMORY,
                 "neuron device %d out of memory: tried to allocate %s%s; capacity %s, %s free; "
                 "%s allocated by the caching allocator, %s reserved (%s reserved but "
                 "unallocated)%s%s",
                 c->device, rt_format_size(bytes).s, detail, rt_format_size(total).s, rt_format_size(free_bytes).s,
                 rt_format_size((uint64_t)allocated).s, rt_format_size((uint64_t)reserved).s,
                 rt_format_size((uint64_t)(reserved - allocated)).s, other_cause ? "; nrt_malloc: " : "",
                 other_cause ? cause : "");
  rt_log(NRT_LOG_WARNING, "%s", nrt_last_error());
  return s;
}

/* Finds room for size bytes when no cached block fits: a new segment, after
 * releasing the free segments, after waiting for pending blocks. */
static nrt_status grow(cache *c, nrt_stream_t stream, int k, size_t size, size_t bytes,
                       block **out) {
  size_t segment = segment_size(size);
  nrt_status s = new_segment(c, stream, k, segment, out);
  if (s != NRT_ERROR_OUT_OF_MEMORY) return s;
  release_free_segments(c);
  c->stats.num_alloc_retries++;
  rt_metric_add(NRT_METRIC_ALLOC_RETRIES, 1);
  s = new_segment(c, stream, k, segment, out);
  if (s != NRT_ERROR_OUT_OF_MEMORY) return s;
  if (c->pending) {
    c->stats.num_sync_all_streams++;
    wait_pending(c);
    if ((*out = pool_best_fit(&c->pools[k], stream, size))) return NRT_SUCCESS;
    release_free_segments(c);
    s = new_segment(c, stream, k, segment, out);
    if (s != NRT_ERROR_OUT_OF_MEMORY) return s;
  }
  return out_of_memory(c, bytes, segment);
}

/* Allocates size bytes (requested before rounding) from the free block b,
 * splitting off the rest when worthwhile. */
static nrt_status take_block(cache *c, block *b, size_t size, size_t requested) {
  int k = b->pool;
  pool *p = &c->pools[k];
  int split = should_split(b, size);
  if (map_reserve(&c->live) || (split && (pool_reserve(p, 1) || spare_reserve(c, 1))))
    return rt_fail(NRT_ERROR_SYSTEM, "out of host memory for the caching allocator's records");
  nrt_cache_stats *st = &c->stats;
  int already_split = b->prev || b->next;
  pool_remove(p, b);
  if (split) {
    block *rest = spare_take(c);
    *rest = (block){.addr = b->addr + size,
                    .size = b->size - size,
                    .stream = b->stream,
                    .last_use = b->last_use,
                    .prev = b,
                    .next = b->next,
                    .pool = b->pool};
    if (b->next) b->next->prev = rest;
    b->next = rest;
    b->size = size;
    p->blocks++;
    pool_insert(p, rest);
    if (already_split) {
      stat_dec(st->inactive_split_bytes, k, (int64_t)size);
    } else {
      stat_inc(st->inactive_split_bytes, k, (int64_t)rest->size);
      stat_inc(st->inactive_split, k, 1);
    }
  } else if (already_split) {
    stat_dec(st->inactive_split_bytes, k, (int64_t)b->size);
    stat_dec(st->inactive_split, k, 1);
  }
  b->state = BLOCK_ALLOCATED;
  b->requested = requested;
  map_put(&c->live, b);
  stat_inc(st->allocation, k, 1);
  stat_inc(st->allocated_bytes, k, (int64_t)b->size);
  stat_inc(st->active, k, 1);
  stat_inc(st->active_bytes, k, (int64_t)b->size);
  stat_inc(st->requested_bytes, k, (int64_t)requested);
  notify(c, NRT_CACHE_EVENT_ALLOC, b->addr, b->size, b->stream);
  return NRT_SUCCESS;
}

/* ---- devices ---------------------------------------------------------- */

/* The cache of a valid device, or NULL before its first allocation. */
static cache *cache_find(int32_t device) {
  return atomic_load_explicit(&caches[device], memory_order_acquire);
}

/* The cache of a valid device, created on first use. */
static nrt_status cache_get(int32_t device, cache **out) {
  cache *c = cache_find(device);
  if (c) {
    *out = c;
    return NRT_SUCCESS;
  }
  pthread_mutex_lock(&create_lock);
  c = atomic_load_explicit(&caches[device], memory_order_relaxed);
  if (!c && (c = calloc(1, sizeof *c))) {
    pthread_mutex_init(&c->lock, NULL);
    c->device = device;
    atomic_store_explicit(&caches[device], c, memory_order_release);
  }
  pthread_mutex_unlock(&create_lock);
  *out = c;
  if (!c) return rt_fail(NRT_ERROR_SYSTEM, "out of host memory for the caching allocator");
  return NRT_SUCCESS;
}

/* The cache owning a device pointer's device, or NULL. */
static cache *cache_of(const void *dev_ptr) {
  int32_t device;
  return nrt_pointer_get_device(dev_ptr, &device) ? NULL : cache_find(device);
}

static nrt_status not_a_block(const char *function, const void *dev_ptr) {
  return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                 "%s: %p is not a live block of the caching allocator (already freed, or not "
                 "from nrt_cache_alloc)",
                 function, dev_ptr);
}

/* ---- public API ------------------------------------------------------- */

nrt_status nrt_cache_alloc(nrt_stream_t stream, size_t bytes, void **dev_ptr) {
  nrt_status s = rt_ensure_init();
  if (s) return s;
  if (!stream || !dev_ptr)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_cache_alloc: NULL stream or dev_ptr");
  *dev_ptr = NULL;
  int32_t device = nrt_stream_device(stream);
  if ((s = rt_check_device(device))) return s;
  if (bytes == 0) return NRT_SUCCESS;
  cache *c;
  if ((s = cache_get(device, &c))) return s;
  pthread_mutex_lock(&c->lock);
  if (c->pending) process_pending(c);
  block *b = NULL;
  if (bytes > REQUEST_MAX) {
    s = out_of_memory(c, bytes, bytes);
  } else {
    size_t size = round_size(bytes);
    int k = size <= SMALL_REQUEST_MAX ? SMALL : LARGE;
    b = pool_best_fit(&c->pools[k], stream, size);
    if (!b) s = grow(c, stream, k, size, bytes, &b);
    if (!s) s = take_block(c, b, size, bytes);
  }
  pthread_mutex_unlock(&c->lock);
  if (!s) *dev_ptr = (void *)b->addr;
  return s;
}

/* Callable from any thread; never waits for device work. In a forked child
 * it returns NRT_ERROR_FORKED before touching any lock. */
nrt_status nrt_cache_free(void *dev_ptr) {
  nrt_status s = rt_ensure_init();
  if (s) return s;
  if (!dev_ptr) return NRT_SUCCESS;
  cache *c = cache_of(dev_ptr);
  if (!c) return not_a_block("nrt_cache_free", dev_ptr);
  pthread_mutex_lock(&c->lock);
  size_t i = map_find(&c->live, (uintptr_t)dev_ptr);
  block *b = i == SIZE_MAX ? NULL : c->live.slots[i];
  uint32_t uses = 0;
  if (b) {
    map_erase(&c->live, i);
    notify(c, NRT_CACHE_EVENT_FREE_REQUESTED, b->addr, b->size, b->stream);
    stat_dec(c->stats.allocation, b->pool, 1);
    stat_dec(c->stats.allocated_bytes, b->pool, (int64_t)b->size);
    stat_dec(c->stats.requested_bytes, b->pool, (int64_t)b->requested);
    uses = b->n_uses;
    b->last_use = rt_stream_submitted(b->stream);
    if (uses) {
      b->state = BLOCK_PENDING;
    } else {
      /* Stream order makes the block reusable at once; what the stream
       * still has queued may skip writing it (adaptive eager). */
      rt_stream_note_free(b->stream, b->addr, b->size, b->last_use);
      notify(c, NRT_CACHE_EVENT_FREE_COMPLETED, b->addr, b->size, b->stream);
      free_block(c, b);
    }
  }
  pthread_mutex_unlock(&c->lock);
  if (!b) return not_a_block("nrt_cache_free", dev_ptr);
  if (!uses) return NRT_SUCCESS;

  /* Recorded without the lock (a full stream queue makes a record wait for
   * room); the block is reachable by no one else meanwhile. An event whose
   * record failed still reports completion from its previous use. */
  for (uint32_t u = 0; u < uses; u++) {
    nrt_status r = nrt_event_record(b->uses[u].event, b->uses[u].stream);
    if (r && !s) s = r;
  }
  pthread_mutex_lock(&c->lock);
  b->events_left = uses;
  b->pending_next = c->pending;
  c->pending = b;
  pthread_mutex_unlock(&c->lock);
  return s;
}

nrt_status nrt_cache_record_stream(void *dev_ptr, nrt_stream_t stream) {
  nrt_status s = rt_ensure_init();
  if (s) return s;
  if (!stream) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_cache_record_stream: NULL stream");
  cache *c = cache_of(dev_ptr);
  if (!c) return not_a_block("nrt_cache_record_stream", dev_ptr);
  pthread_mutex_lock(&c->lock);
  size_t i = map_find(&c->live, (uintptr_t)dev_ptr);
  block *b = i == SIZE_MAX ? NULL : c->live.slots[i];
  if (!b) {
    s = not_a_block("nrt_cache_record_stream", dev_ptr);
  } else if (stream != b->stream) {
    uint32_t u = 0;
    while (u < b->n_uses && b->uses[u].stream != stream) u++;
    if (u == b->n_uses && b->n_uses == b->cap_uses) {
      uint32_t cap = b->cap_uses ? 2 * b->cap_uses : 2;
      stream_use *v = realloc(b->uses, cap * sizeof *v);
      if (v) {
        b->uses = v;
        b->cap_uses = cap;
      } else {
        s = rt_fail(NRT_ERROR_SYSTEM, "out of host memory recording a stream use");
      }
    }
    nrt_event_t event;
    if (!s && u == b->n_uses && !(s = event_take(c, &event)))
      b->uses[b->n_uses++] = (stream_use){.stream = stream, .event = event};
  }
  pthread_mutex_unlock(&c->lock);
  return s;
}

nrt_status nrt_cache_empty(int32_t device) {
  nrt_status s = rt_ensure_init();
  if (s || (s = rt_check_device(device))) return s;
  cache *c = cache_find(device);
  if (!c) return NRT_SUCCESS;
  pthread_mutex_lock(&c->lock);
  process_pending(c);
  int64_t before = c->stats.reserved_bytes[NRT_POOL_ALL].current;
  release_free_segments(c);
  int64_t released = before - c->stats.reserved_bytes[NRT_POOL_ALL].current;
  pthread_mutex_unlock(&c->lock);
  if (released) rt_log(NRT_LOG_INFO, "neuron:%d empty_cache gave back %s", device,
                       rt_format_size((uint64_t)released).s);
  return NRT_SUCCESS;
}

nrt_status nrt_cache_get_stats(int32_t device, nrt_cache_stats *out) {
  nrt_status s = rt_ensure_init();
  if (s) return s;
  if (!out) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_cache_get_stats: out is NULL");
  if ((s = rt_check_device(device))) return s;
  cache *c = cache_find(device);
  if (!c) {
    memset(out, 0, sizeof *out);
    return NRT_SUCCESS;
  }
  pthread_mutex_lock(&c->lock);
  *out = c->stats;
  pthread_mutex_unlock(&c->lock);
  return NRT_SUCCESS;
}

/* Shared body of the two resets. */
static nrt_status reset(int32_t device, int peaks) {
  nrt_status s = rt_ensure_init();
  if (s || (s = rt_check_device(device))) return s;
  cache *c = cache_find(device);
  if (!c) return NRT_SUCCESS;
  pthread_mutex_lock(&c->lock);
  stats_reset(&c->stats, peaks);
  pthread_mutex_unlock(&c->lock);
  return NRT_SUCCESS;
}

nrt_status nrt_cache_reset_peak(int32_t device) { return reset(device, 1); }

nrt_status nrt_cache_reset_accumulated(int32_t device) { return reset(device, 0); }

/* ---- inspection (neuronrt/cache_inspect.h) ----------------------------- */

/* Visits the blocks of the segment whose first block is head. */
static void visit_segment(const cache *c, const block *head,
                          void (*visit)(void *, const nrt_cache_block_info *), void *ctx) {
  uint64_t segment_size = 0;
  for (const block *b = head; b; b = b->next) segment_size += b->size;
  for (const block *b = head; b; b = b->next) {
    nrt_cache_block_info info = {.segment_addr = head->addr,
                                 .segment_size = segment_size,
                                 .addr = b->addr,
                                 .size = b->size,
                                 .requested = b->state == BLOCK_ALLOCATED ? b->requested : 0,
                                 .stream_id = nrt_stream_id(b->stream),
                                 .device = c->device,
                                 .is_large = b->pool == LARGE,
                                 .state = b->state == BLOCK_FREE        ? NRT_CACHE_BLOCK_FREE
                                          : b->state == BLOCK_ALLOCATED ? NRT_CACHE_BLOCK_ALLOCATED
                                                                        : NRT_CACHE_BLOCK_PENDING};
    visit(ctx, &info);
  }
}

/* Every block is in exactly one of: a pool's free array, the live map, the
 * pending list; so visiting the first block of each segment found there
 * visits every segment once. */
nrt_status nrt_cache_visit_blocks(int32_t device,
                                  void (*visit)(void *ctx, const nrt_cache_block_info *info),
                                  void *ctx) {
  nrt_status s = rt_ensure_init();
  if (s || (s = rt_check_device(device))) return s;
  if (!visit) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_cache_visit_blocks: visit is NULL");
  cache *c = cache_find(device);
  if (!c) return NRT_SUCCESS;
  pthread_mutex_lock(&c->lock);
  for (int k = 0; k < 2; k++)
    for (size_t i = 0; i < c->pools[k].n; i++)
      if (!c->pools[k].free[i]->prev) visit_segment(c, c->pools[k].free[i], visit, ctx);
  for (size_t i = 0; i < ((size_t)1 << c->live.bits) && c->live.slots; i++) {
    const block *b = c->live.slots[i];
    if (b && !b->prev) visit_segment(c, b, visit, ctx);
  }
  for (const block *b = c->pending; b; b = b->pending_next)
    if (!b->prev) visit_segment(c, b, visit, ctx);
  pthread_mutex_unlock(&c->lock);
  return NRT_SUCCESS;
}

nrt_status nrt_cache_set_observer(void (*fn)(void *ctx, const nrt_cache_event *event), void *ctx) {
  nrt_status s = rt_ensure_init();
  if (s) return s;
  atomic_store_explicit(&observer_ctx, ctx, memory_order_release);
  atomic_store_explicit(&observer, fn, memory_order_release);
  return NRT_SUCCESS;
}
