/* Status names and the per-thread error message. */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "internal.h"
#include "neuronrt/host_error.h"

static _Thread_local char last_error[1024];

const char *nrt_status_string(nrt_status status) {
  switch (status) {
    case NRT_SUCCESS: return "NRT_SUCCESS";
    case NRT_ERROR_INVALID_ARGUMENT: return "NRT_ERROR_INVALID_ARGUMENT";
    case NRT_ERROR_INVALID_DEVICE: return "NRT_ERROR_INVALID_DEVICE";
    case NRT_ERROR_INVALID_CONFIG: return "NRT_ERROR_INVALID_CONFIG";
    case NRT_ERROR_OUT_OF_MEMORY: return "NRT_ERROR_OUT_OF_MEMORY";
    case NRT_ERROR_NOT_READY: return "NRT_ERROR_NOT_READY";
    case NRT_ERROR_INDEX_OUT_OF_RANGE: return "NRT_ERROR_INDEX_OUT_OF_RANGE";
    case NRT_ERROR_UNSUPPORTED: return "NRT_ERROR_UNSUPPORTED";
    case NRT_ERROR_FORKED: return "NRT_ERROR_FORKED";
    case NRT_ERROR_SYSTEM: return "NRT_ERROR_SYSTEM";
    case NRT_ERROR_INTERNAL: return "NRT_ERROR_INTERNAL";
    case NRT_ERROR_ARITHMETIC: return "NRT_ERROR_ARITHMETIC";
    case NRT_ERROR_INVALID_DATA: return "NRT_ERROR_INVALID_DATA";
    case NRT_ERROR_DISTRIBUTED: return "NRT_ERROR_DISTRIBUTED";
  }
  return "NRT_ERROR_UNKNOWN";
}

const char *nrt_last_error(void) { return last_error; }

void rt_set_error(const char *message) {
  snprintf(last_error, sizeof last_error, "%s", message);
}

nrt_status rt_fail(nrt_status status, const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, args);
  va_end(args);
  return status;
}

uint64_t rt_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

rt_size_text rt_format_size(uint64_t bytes) {
  rt_size_text t;
  if (bytes < 1024)
    snprintf(t.s, sizeof t.s, "%llu bytes", (unsigned long long)bytes);
  else if (bytes < (1ull << 20))
    snprintf(t.s, sizeof t.s, "%.2f KiB", (double)bytes / (1ull << 10));
  else if (bytes < (1ull << 30))
    snprintf(t.s, sizeof t.s, "%.2f MiB", (double)bytes / (1ull << 20));
  else
    snprintf(t.s, sizeof t.s, "%.2f GiB", (double)bytes / (1ull << 30));
  return t;
}

nrt_status nrt_host_error(nrt_status status, const char *message) {
  rt_set_error(message ? message : "");
  return status == NRT_SUCCESS ? NRT_ERROR_INTERNAL : status;
}
