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
 * (an all-gather of byte strings: recv[q] / recv_bytes[q], allocated by fn
 * with malloc, freed by the runtime). Every process then checks the same
 * facts, so a mismatch (call number or kind, sizes, a process that ended or
 * failed) stops every process with the same error instead of a hang; each
 * process writes only its own programs' destinations. release (if not
 * NULL) is called with ctx once the run no longer needs it. */
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

#ifdef __cplusplus
}
#endif
#endif
