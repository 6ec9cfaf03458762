/* The runtime's own messages, on stderr, one line each:
 *   "torchneuron <level>: <message>"
 * error: a kernel failed on a stream (the error is also sticky there);
 * warning: an allocation ran out of device memory;
 * info: start-up (devices and target), segments given back by empty_cache;
 * debug: streams started, segments allocated and freed, fused groups run.
 *
 * The level comes from TORCHNEURON_LOG_LEVEL (error, warning, info, debug;
 * default warning); a malformed value is a configuration error reported by
 * the first call into the runtime. The op log (TORCHNEURON_LOG_OPS, turned
 * on by the PyTorch shim) shares the stream with level "op".
 */
#ifndef NEURONRT_LOG_H
#define NEURONRT_LOG_H

#include "neuronrt/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum nrt_log_level {
  NRT_LOG_ERROR = 0,
  NRT_LOG_WARNING = 1,
  NRT_LOG_INFO = 2,
  NRT_LOG_DEBUG = 3
} nrt_log_level;

nrt_status nrt_log_set_level(nrt_log_level level);
nrt_log_level nrt_log_get_level(void);
/* Parses "error", "warning", "info", "debug" (case-insensitive). */
nrt_status nrt_log_level_parse(const char *text, nrt_log_level *out);

/* Whether the op log is on; the runtime adds the fused groups its workers
 * run to it. */
void nrt_log_ops_set_enabled(int enabled);
int nrt_log_ops_enabled(void);
/* Writes one op-log line (a trailing newline is added). */
void nrt_log_op_line(const char *line);

#ifdef __cplusplus
}
#endif
#endif
