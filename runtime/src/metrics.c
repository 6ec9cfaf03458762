/* The runtime's counters (neuronrt/metrics.h): one relaxed atomic per
 * counter, bumped where the event happens. Relaxed is enough: a counter
 * orders nothing, it only has to add up. */
#include <stdatomic.h>
#include "internal.h"
#include "fuse/codegen.h"

static atomic_uint_fast64_t counters[NRT_METRIC_COUNT];

#define NRT_METRIC_NAME_(e, name) name,
static const char *const names[NRT_METRIC_COUNT] = {NRT_METRIC_LIST(NRT_METRIC_NAME_)};
#undef NRT_METRIC_NAME_

void rt_metric_add(nrt_metric metric, uint64_t amount) {
  atomic_fetch_add_explicit(&counters[metric], amount, memory_order_relaxed);
}

const char *nrt_metric_name(nrt_metric metric) {
  return (unsigned)metric < NRT_METRIC_COUNT ? names[metric] : NULL;
}

uint64_t nrt_metric_value(nrt_metric metric) {
  if ((unsigned)metric >= NRT_METRIC_COUNT) return 0;
  /* Not a total: the background compiles queued or running now. */
  if (metric == NRT_METRIC_FUSE_CODEGEN_PENDING) return (uint64_t)rt_fuse_codegen_pending();
  return atomic_load_explicit(&counters[metric], memory_order_relaxed);
}

void nrt_metrics_clear(void) {
  for (int i = 0; i < NRT_METRIC_COUNT; i++)
    atomic_store_explicit(&counters[i], 0, memory_order_relaxed);
}
