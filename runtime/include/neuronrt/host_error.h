/* Failing host work with a message: host tasks written outside the runtime
 * (the c10d backend's collectives, say) return a status, and the message
 * that goes with it is the thread's last error (status.h). */
#ifndef NEURONRT_HOST_ERROR_H
#define NEURONRT_HOST_ERROR_H

#include "neuronrt/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Sets this thread's last error to message and returns status (not
 * NRT_SUCCESS), for a host task's run function to return. */
nrt_status nrt_host_error(nrt_status status, const char *message);

#ifdef __cplusplus
}
#endif
#endif
