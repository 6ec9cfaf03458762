/* The runtime's messages (neuronrt/log.h). The level is read from
 * TORCHNEURON_LOG_LEVEL once; a malformed value leaves the default and is
 * handed to device.c's configuration, which reports it as it reports the
 * runtime's other variables. Each message is one fprintf, which stdio
 * locks, so lines from different threads never interleave. */
#include <ctype.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"

static const char *const level_names[] = {"error", "warning", "info", "debug"};

static atomic_int level = NRT_LOG_WARNING;
static atomic_int ops_enabled;
static pthread_once_t read_once = PTHREAD_ONCE_INIT;
static char config_error[200];

nrt_status nrt_log_level_parse(const char *text, nrt_log_level *out) {
  if (!text || !out) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_log_level_parse: NULL argument");
  for (int i = 0; i < 4; i++) {
    size_t n = strlen(level_names[i]);
    if (strlen(text) != n) continue;
    size_t j = 0;
    while (j < n && tolower((unsigned char)text[j]) == level_names[i][j]) j++;
    if (j == n) {
      *out = (nrt_log_level)i;
      return NRT_SUCCESS;
    }
  }
  return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                 "'%.64s' is not a log level: expected error, warning, info or debug", text);
}

static void read_environment(void) {
  const char *text = getenv("TORCHNEURON_LOG_LEVEL");
  if (!text || !*text) return;
  nrt_log_level parsed;
  if (nrt_log_level_parse(text, &parsed) == NRT_SUCCESS)
    atomic_store(&level, (int)parsed);
  else
    snprintf(config_error, sizeof config_error,
             "TORCHNEURON_LOG_LEVEL='%.64s' is not a log level: expected error, warning, info "
             "or debug", text);
}

const char *rt_log_config_error(void) {
  pthread_once(&read_once, read_environment);
  return config_error[0] ? config_error : NULL;
}

int rt_log_on(nrt_log_level at) {
  pthread_once(&read_once, read_environment);
  return (int)at <= atomic_load_explicit(&level, memory_order_relaxed);
}

void rt_log(nrt_log_level at, const char *fmt, ...) {
  if (!rt_log_on(at)) return;
  char message[1024];
  va_list args;
  va_start(args, fmt);
  vsnprintf(message, sizeof message, fmt, args);
  va_end(args);
  fprintf(stderr, "torchneuron %s: %s\n", level_names[at], message);
}

nrt_status nrt_log_set_level(nrt_log_level at) {
  if ((unsigned)at > NRT_LOG_DEBUG)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_log_set_level: %d is not a log level", (int)at);
  pthread_once(&read_once, read_environment); /* so that it cannot override this later */
  atomic_store(&level, (int)at);
  return NRT_SUCCESS;
}

nrt_log_level nrt_log_get_level(void) {
  pthread_once(&read_once, read_environment);
  return (nrt_log_level)atomic_load(&level);
}

void nrt_log_ops_set_enabled(int enabled) { atomic_store(&ops_enabled, enabled != 0); }

int nrt_log_ops_enabled(void) { return atomic_load_explicit(&ops_enabled, memory_order_relaxed); }

void nrt_log_op_line(const char *line) { fprintf(stderr, "torchneuron op: %s\n", line ? line : ""); }
