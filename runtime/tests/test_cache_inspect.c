/* The caching allocator seen from outside (neuronrt/cache_inspect.h): the
 * blocks visited tile each segment exactly, with the states and requested
 * sizes of the allocations, and the observer hears every alloc, free and
 * segment event in order. */
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "neuronrt/cache_inspect.h"

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)

typedef struct seen {
  nrt_cache_block_info blocks[64];
  int n;
} seen;

static void collect(void *ctx, const nrt_cache_block_info *info) {
  seen *s = ctx;
  if (s->n < 64) s->blocks[s->n++] = *info;
}

typedef struct events {
  nrt_cache_event list[64];
  int n;
} events;

static void record(void *ctx, const nrt_cache_event *event) {
  events *e = ctx;
  if (e->n < 64) e->list[e->n++] = *event;
}

static const nrt_cache_block_info *find(const seen *s, uint64_t addr) {
  for (int i = 0; i < s->n; i++)
    if (s->blocks[i].addr == addr) return &s->blocks[i];
  return NULL;
}

static void test_blocks_tile_segments_and_events_follow_calls(void) {
  nrt_stream_t stream;
  CHECK_OK(nrt_stream_get_default(0, &stream));
  CHECK_OK(nrt_cache_empty(0));
  static events ev;
  ev.n = 0;
  CHECK_OK(nrt_cache_set_observer(record, &ev));
  void *a, *b;
  CHECK_OK(nrt_cache_alloc(stream, 1000, &a));    /* small pool: a new 2 MiB segment */
  CHECK_OK(nrt_cache_alloc(stream, 3 * KIB, &b)); /* carved from the same segment */
  CHECK_OK(nrt_cache_free(a));

  static seen s;
  s.n = 0;
  CHECK_OK(nrt_cache_visit_blocks(0, collect, &s));
  const nrt_cache_block_info *ia = find(&s, (uintptr_t)a), *ib = find(&s, (uintptr_t)b);
  CHECK(ia && ib);
  if (ia && ib) {
    CHECK(ia->state == NRT_CACHE_BLOCK_FREE && ia->size == 1024 && ia->requested == 0);
    CHECK(ib->state == NRT_CACHE_BLOCK_ALLOCATED && ib->size == 3 * KIB && ib->requested == 3 * KIB);
    CHECK(ia->segment_addr == ib->segment_addr && ia->segment_size == 2 * MIB && !ia->is_large);
  }
  /* Each segment's blocks come in address order and cover it exactly. */
  for (int i = 0; i < s.n;) {
    uint64_t at = s.blocks[i].segment_addr, end = at + s.blocks[i].segment_size;
    int j = i;
    for (; j < s.n && s.blocks[j].segment_addr == s.blocks[i].segment_addr; j++) {
      CHECK(s.blocks[j].addr == at);
      at += s.blocks[j].size;
    }
    CHECK(at == end);
    i = j;
  }

  int kinds[] = {NRT_CACHE_EVENT_SEGMENT_ALLOC, NRT_CACHE_EVENT_ALLOC, NRT_CACHE_EVENT_ALLOC,
                 NRT_CACHE_EVENT_FREE_REQUESTED, NRT_CACHE_EVENT_FREE_COMPLETED};
  CHECK(ev.n == 5);
  for (int i = 0; i < 5 && i < ev.n; i++) CHECK(ev.list[i].kind == kinds[i]);
  if (ev.n == 5) {
    CHECK(ev.list[0].size == 2 * MIB);
    CHECK(ev.list[1].addr == (uintptr_t)a && ev.list[1].size == 1024);
    CHECK(ev.list[3].addr == (uintptr_t)a && ev.list[4].addr == (uintptr_t)a);
    CHECK(ev.list[1].stream_id == nrt_stream_id(stream) && ev.list[1].device == 0);
  }

  CHECK_OK(nrt_cache_free(b));
  ev.n = 0;
  CHECK_OK(nrt_cache_empty(0));
  CHECK(ev.n == 1 && ev.list[0].kind == NRT_CACHE_EVENT_SEGMENT_FREE && ev.list[0].size == 2 * MIB);

  void *huge;
  ev.n = 0;
  CHECK_STATUS(nrt_cache_alloc(stream, 1024 * MIB, &huge), NRT_ERROR_OUT_OF_MEMORY);
  CHECK(ev.n == 1 && ev.list[0].kind == NRT_CACHE_EVENT_OOM && ev.list[0].size == 1024 * MIB);
  CHECK_OK(nrt_cache_set_observer(NULL, NULL));
  ev.n = 0;
  CHECK_OK(nrt_cache_alloc(stream, 1000, &a));
  CHECK_OK(nrt_cache_free(a));
  CHECK(ev.n == 0);
}

static void test_record_stream_completes_later(void) {
  nrt_stream_t s0, s1;
  CHECK_OK(nrt_stream_get_default(0, &s0));
  CHECK_OK(nrt_stream_create(0, 0, &s1));
  static events ev;
  ev.n = 0;
  CHECK_OK(nrt_cache_set_observer(record, &ev));
  void *p;
  CHECK_OK(nrt_cache_alloc(s0, 4096, &p));
  CHECK_OK(nrt_cache_record_stream(p, s1));
  CHECK_OK(nrt_cache_free(p));
  CHECK_OK(nrt_stream_synchronize(s1));
  CHECK_OK(nrt_cache_empty(0)); /* returns completed pending blocks to the pool */
  int requested = -1, completed = -1;
  for (int i = 0; i < ev.n; i++) {
    if (ev.list[i].addr != (uintptr_t)p) continue;
    if (ev.list[i].kind == NRT_CACHE_EVENT_FREE_REQUESTED) requested = i;
    if (ev.list[i].kind == NRT_CACHE_EVENT_FREE_COMPLETED) completed = i;
  }
  CHECK(requested >= 0 && completed > requested);
  CHECK_OK(nrt_cache_set_observer(NULL, NULL));
  CHECK_OK(nrt_stream_destroy(s1));
}

static void test_bad_arguments(void) {
  CHECK_STATUS(nrt_cache_visit_blocks(0, NULL, NULL), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_cache_visit_blocks(99, collect, NULL), NRT_ERROR_INVALID_DEVICE);
}

int main(void) {
  setenv("NEURON_RT_HBM_BYTES", "64M", 1);
  RUN(test_blocks_tile_segments_and_events_follow_calls);
  RUN(test_record_stream_completes_later);
  RUN(test_bad_arguments);
  return CHECK_MAIN_RESULT();
}
