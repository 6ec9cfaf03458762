/* NKI group runs spread over processes (the ranks of a torch.distributed
 * group): the exchange the runtime calls at every collective call. Kept out
 * of nc.h (which nrt.h includes) as only the NKI bindings use it. */
#ifndef NEURONRT_NC_DIST_H
#define NEURONRT_NC_DIST_H

#include <stddef.h>
#include "neuronrt/nc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A group run spread over processes (the ranks of a torch.distributed
 * group): each process runs `count` programs of the grid, process q's being
 * ranks q * count .. q * count + count - 1 of the collectives (peers, masks
 * and _V metadata columns name these global ranks). At every call each
 * process sends one message (where its programs are, their call's
 * instructions and staged sources; or that they ended; or that it failed)
 * through fn, which must deliver every process's message to every process
 * (an all-gather of byte strings). recv[q] / recv_bytes[q] is process q's
 * message, in storage that fn owns, 8-byte aligned and writable (the
 * runtime rewrites offsets in it), valid until fn's next call or release;
 * the runtime frees none of it. Every process then checks the same facts,
 * so a mismatch (call number or kind, sizes, a process that ended or
 * failed) stops every process with the same error instead of a hang; each
 * process writes only its own programs' destinations.
 *
 * Every process takes part in every round until all stop together: a
 * process that fails on its own (out of host memory before a round, or
 * while writing its destinations after one) sends a FAILED message, built
 * without allocating, in the round its peers wait in, so they stop with
 * "process N stopped: <its error>". fn returning an error means the
 * transport failed (for every process: fn must not fail for one process
 * after delivering the round to the others); the run then stops without
 * further rounds. release (if not NULL) is called with ctx once the run no
 * longer needs it. At most NRT_NC_MAX_PROCESSES processes. */
#define NRT_NC_MAX_PROCESSES 1024
typedef nrt_status (*nrt_nc_exchange_fn)(void *ctx, const void *send, size_t send_bytes,
                                         void **recv, size_t *recv_bytes);
typedef struct nrt_nc_exchange {
  nrt_nc_exchange_fn fn;
  void (*release)(void *ctx);
  void *ctx;
  int32_t process;   /* this process, 0 .. processes - 1 */
  int32_t processes; /* every process runs the same count of programs */
} nrt_nc_exchange;

/* nrt_nc_programs_run / nrt_nc_programs_launch across processes. */
nrt_status nrt_nc_programs_run_dist(const nrt_nc_program_t *programs, int32_t count,
                                    void *const *const *hbm, const nrt_nc_exchange *exchange);
nrt_status nrt_nc_programs_launch_dist(nrt_stream_t stream, const nrt_nc_program_t *programs,
                                       int32_t count, void *const *const *hbm, const char *name,
                                       const nrt_nc_exchange *exchange);

/* One round as a process that failed before its run could start (its
 * launch could not be queued, or its stream skipped the kernel after an
 * earlier error): the peers, waiting in their first round, stop with
 * "process N stopped: why". count is this process's number of programs.
 * Allocates nothing; returns fn's status. */
nrt_status nrt_nc_exchange_fail(const nrt_nc_exchange *exchange, int32_t count, const char *why);

/* The same, queued on stream after the runs launched there before (the
 * exchange's transport carries them in order): for a launch that failed
 * before its run could be queued. Takes the exchange's ctx (released once
 * the round is done). */
nrt_status nrt_nc_exchange_fail_launch(nrt_stream_t stream, const nrt_nc_exchange *exchange,
                                       int32_t count, const char *why);

#ifdef __cplusplus
}
#endif
#endif
