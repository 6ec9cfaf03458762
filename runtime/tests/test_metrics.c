/* The runtime's counters (neuronrt/metrics.h) and log levels
 * (neuronrt/log.h): each counter moves by what its event did, clear sets
 * them to 0, and the level parser takes the four names and nothing else. */
#include <stdlib.h>
#include <string.h>
#include "check.h"

#define MIB ((size_t)1 << 20)

static uint64_t value(nrt_metric m) { return nrt_metric_value(m); }

static void test_names_are_unique_and_dotted(void) {
  for (int i = 0; i < NRT_METRIC_COUNT; i++) {
    const char *name = nrt_metric_name((nrt_metric)i);
    CHECK(name && strchr(name, '.'));
    for (int j = 0; j < i; j++) CHECK(strcmp(name, nrt_metric_name((nrt_metric)j)) != 0);
  }
  CHECK(nrt_metric_name(NRT_METRIC_COUNT) == NULL);
  CHECK(nrt_metric_value(NRT_METRIC_COUNT) == 0);
}

static void test_copies_count_bytes_by_direction(void) {
  nrt_stream_t s;
  CHECK_OK(nrt_stream_get_default(0, &s));
  void *dev, *dev2;
  char host[1000];
  memset(host, 7, sizeof host);
  CHECK_OK(nrt_malloc(0, 4096, &dev));
  CHECK_OK(nrt_malloc(0, 4096, &dev2));
  nrt_metrics_clear();
  CHECK_OK(nrt_memcpy_async(s, dev, host, 1000));
  CHECK_OK(nrt_memcpy_async(s, dev, host, 24));
  CHECK_OK(nrt_memcpy_async(s, dev2, dev, 300));
  CHECK_OK(nrt_memcpy_async(s, host, dev2, 100));
  CHECK_OK(nrt_memcpy_async(s, host, host + 500, 10)); /* host to host: not device traffic */
  CHECK(value(NRT_METRIC_COPIES_HOST_TO_DEVICE) == 2);
  CHECK(value(NRT_METRIC_BYTES_HOST_TO_DEVICE) == 1024);
  CHECK(value(NRT_METRIC_COPIES_DEVICE_TO_DEVICE) == 1);
  CHECK(value(NRT_METRIC_BYTES_DEVICE_TO_DEVICE) == 300);
  CHECK(value(NRT_METRIC_COPIES_DEVICE_TO_HOST) == 1);
  CHECK(value(NRT_METRIC_BYTES_DEVICE_TO_HOST) == 100);
  CHECK(host[0] == 7);
  CHECK_OK(nrt_free(dev));
  CHECK_OK(nrt_free(dev2));
}

static nrt_status nothing(void *arg) {
  (void)arg;
  return NRT_SUCCESS;
}

static void test_launches_and_synchronisations(void) {
  nrt_stream_t s;
  nrt_event_t e;
  CHECK_OK(nrt_stream_get_default(0, &s));
  CHECK_OK(nrt_event_create(NRT_EVENT_DEFAULT, &e));
  nrt_metrics_clear();
  CHECK_OK(nrt_launch_host_task(s, "nothing", nothing, NULL, NULL));
  CHECK_OK(nrt_stream_synchronize(s));
  CHECK_OK(nrt_event_record(e, s));
  CHECK_OK(nrt_event_synchronize(e));
  CHECK_OK(nrt_device_synchronize(0));
  CHECK(value(NRT_METRIC_HOST_TASKS_LAUNCHED) == 1);
  CHECK(value(NRT_METRIC_STREAM_SYNCS) == 1); /* the device's does not count per stream */
  CHECK(value(NRT_METRIC_EVENT_SYNCS) == 1);
  CHECK(value(NRT_METRIC_DEVICE_SYNCS) == 1);
  CHECK(value(NRT_METRIC_KERNELS_LAUNCHED) == 0);
  CHECK_OK(nrt_event_destroy(e));
  nrt_metrics_clear();
  for (int i = 0; i < NRT_METRIC_COUNT; i++) CHECK(value((nrt_metric)i) == 0);
}

static void test_out_of_memory_counts(void) {
  nrt_stream_t s;
  CHECK_OK(nrt_stream_get_default(0, &s));
  nrt_metrics_clear();
  void *p;
  CHECK_STATUS(nrt_cache_alloc(s, 1024 * MIB, &p), NRT_ERROR_OUT_OF_MEMORY);
  CHECK(value(NRT_METRIC_ALLOC_OOMS) == 1);
  CHECK(value(NRT_METRIC_ALLOC_RETRIES) == 1); /* released the cache, tried again */
}

static void test_log_levels(void) {
  nrt_log_level level;
  CHECK_OK(nrt_log_level_parse("debug", &level));
  CHECK(level == NRT_LOG_DEBUG);
  CHECK_OK(nrt_log_level_parse("WARNING", &level));
  CHECK(level == NRT_LOG_WARNING);
  CHECK_STATUS(nrt_log_level_parse("warn", &level), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_log_level_parse("", &level), NRT_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(nrt_log_set_level((nrt_log_level)9), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(nrt_log_get_level() == NRT_LOG_WARNING); /* the default, unset in ctest */
  CHECK_OK(nrt_log_set_level(NRT_LOG_ERROR));
  CHECK(nrt_log_get_level() == NRT_LOG_ERROR);
  CHECK_OK(nrt_log_set_level(NRT_LOG_WARNING));
}

int main(void) {
  setenv("NEURON_RT_HBM_BYTES", "64M", 1);
  unsetenv("TORCHNEURON_LOG_LEVEL");
  RUN(test_names_are_unique_and_dotted);
  RUN(test_copies_count_bytes_by_direction);
  RUN(test_launches_and_synchronisations);
  RUN(test_out_of_memory_counts);
  RUN(test_log_levels);
  return CHECK_MAIN_RESULT();
}
