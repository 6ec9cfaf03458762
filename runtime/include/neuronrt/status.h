/* Status codes and error messages of the neuron runtime.
 *
 * Every public function returns an nrt_status; results travel through
 * out-parameters. A failing call also leaves a human-readable message in
 * thread-local storage, read with nrt_last_error(). Errors raised inside a
 * kernel on a stream worker are sticky on that stream and are returned (with
 * the op's name in the message) by the next synchronising call.
 */
#ifndef NEURONRT_STATUS_H
#define NEURONRT_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum nrt_status {
  NRT_SUCCESS = 0,
  NRT_ERROR_INVALID_ARGUMENT,   /* a caller passed a value the API rejects */
  NRT_ERROR_INVALID_DEVICE,     /* device index out of range */
  NRT_ERROR_INVALID_CONFIG,     /* a NEURON_* environment variable is malformed */
  NRT_ERROR_OUT_OF_MEMORY,      /* device capacity (or host backing) exhausted */
  NRT_ERROR_NOT_READY,          /* a query found work still pending */
  NRT_ERROR_INDEX_OUT_OF_RANGE, /* a kernel met an index outside its bounds */
  NRT_ERROR_UNSUPPORTED,        /* op/dtype combination has no kernel */
  NRT_ERROR_FORKED,             /* used in a child forked after initialisation */
  NRT_ERROR_SYSTEM,             /* the host OS refused (mmap, threads, ...) */
  NRT_ERROR_INTERNAL,           /* a broken invariant; a bug in the runtime */
  NRT_ERROR_ARITHMETIC,         /* a kernel met an arithmetic error (integer division by zero) */
  NRT_ERROR_INVALID_DATA,       /* a kernel met a value its op rejects (a probability > 1) */
  NRT_ERROR_DISTRIBUTED         /* a collective among processes failed: a peer died, timed out or disagreed */
} nrt_status;

/* Short constant name of a status, e.g. "NRT_ERROR_OUT_OF_MEMORY". */
const char *nrt_status_string(nrt_status status);

/* Message of the last failing call on this thread ("" if none). The pointer
 * stays valid until the next runtime call on this thread. */
const char *nrt_last_error(void);

#ifdef __cplusplus
}
#endif
#endif
