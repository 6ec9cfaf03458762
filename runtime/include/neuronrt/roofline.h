/* Estimated Trainium time of device work: a roofline model.
 *
 * est = max(bytes / HBM bandwidth, compute), where compute is the slowest
 * engine's time: Tensor-engine FLOPs at 2 x 128 x 128 multiply-adds per
 * cycle (a quarter of that for 4-byte and wider inputs, as the NKI cost
 * model charges fp32 matmuls 4x), Vector- and Scalar-engine elements at
 * one per partition (128) per cycle. Clocks, partitions and bandwidth are
 * the target's (nrt_device_properties, the figures the NKI cost model
 * uses). Transcendental pointwise ops and activations count on the Scalar
 * engine, matrix products, convolutions and attention on the Tensor
 * engine, everything else on the Vector engine. Bytes count each operand
 * once (broadcast dimensions once). It is a model, not a measurement: no
 * latencies, no overlap between work, no on-chip reuse beyond one op.
 *
 * Collectives add a link term: the bytes one rank sends in a ring (or
 * pairwise) schedule over its share of the target's NeuronLink, or of the
 * instance's EFA when the group spans hosts, plus a fixed latency per
 * step (an assumption, not a published figure); reductions add their
 * Vector-engine work. The estimate is the largest of the three terms.
 */
#ifndef NEURONRT_ROOFLINE_H
#define NEURONRT_ROOFLINE_H

#include <stdint.h>
#include "neuronrt/device.h"
#include "neuronrt/op.h"
#include "neuronrt/profile.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum nrt_roofline_engine {
  NRT_ROOFLINE_NONE = 0,
  NRT_ROOFLINE_TENSOR,
  NRT_ROOFLINE_VECTOR,
  NRT_ROOFLINE_SCALAR,
  NRT_ROOFLINE_ENGINE_COUNT
} nrt_roofline_engine;

typedef struct nrt_roofline {
  double bytes;                               /* HBM traffic */
  double work[NRT_ROOFLINE_ENGINE_COUNT];     /* tensor: FLOPs; vector, scalar: elements */
  int32_t fp32_tensor;                        /* tensor work has 4-byte or wider inputs */
  double link_bytes;                          /* a collective's bytes sent by this rank */
  double link_ns;                             /* their time, latencies included */
  /* Filled by nrt_roofline_finish: */
  double memory_ns, compute_ns, est_ns;
  int32_t engine;                             /* the slowest engine */
  int32_t bound;                              /* nrt_bound */
} nrt_roofline;

/* Adds an op's bytes and work to *r (which starts zeroed). Operands listed
 * in skip_mask (bit k: operand k) are left out of the bytes: values that
 * stay on chip inside a fused group. */
void nrt_roofline_add_op(const nrt_op *op, uint32_t skip_mask, nrt_roofline *r);
/* Adds a view's bytes (memory traffic only) to *r. */
void nrt_roofline_add_view(const nrt_tensor_view *v, nrt_roofline *r);
/* Computes the times and the bound for the device's target. */
void nrt_roofline_finish(const nrt_device_properties *props, nrt_roofline *r);
/* The bound of times already filled in: the largest term's. */
int32_t nrt_roofline_bound(const nrt_roofline *r);
/* Both, for one op on device. */
nrt_status nrt_roofline_op(int32_t device, const nrt_op *op, nrt_roofline *out);

/* The collectives the link term models. */
typedef enum nrt_collective {
  NRT_COLLECTIVE_ALL_REDUCE = 0,
  NRT_COLLECTIVE_REDUCE,
  NRT_COLLECTIVE_BROADCAST,
  NRT_COLLECTIVE_ALL_GATHER,
  NRT_COLLECTIVE_REDUCE_SCATTER,
  NRT_COLLECTIVE_ALL_TO_ALL,
  NRT_COLLECTIVE_GATHER,
  NRT_COLLECTIVE_SCATTER,
  NRT_COLLECTIVE_SEND_RECV,
  NRT_COLLECTIVE_BARRIER,
  NRT_COLLECTIVE_COUNT
} nrt_collective;

/* Adds one collective among `ranks` ranks on `hosts` hosts to *r. bytes is
 * the whole buffer as one rank sees it: the tensor of an all_reduce,
 * reduce or broadcast; the gathered output of an all_gather or gather; the
 * input of a reduce_scatter, all_to_all or scatter; the message of a send
 * or receive. reduce_elem_size is the element size of a reduction (its
 * Vector-engine work counts elements), 0 for other collectives. Fails on
 * an unknown collective or a count below 1. */
nrt_status nrt_roofline_add_collective(const nrt_device_properties *props, int32_t collective, int32_t ranks,
                                       int32_t hosts, double bytes, int32_t reduce_elem_size, nrt_roofline *r);
/* Inside a host task while profiling (nrt_profile_active): adds *est, its
 * times filled (nrt_roofline_finish), to the task's record. A no-op
 * elsewhere. */
void nrt_profile_add_task_estimate(const nrt_roofline *est);

const char *nrt_roofline_engine_name(int32_t engine);
const char *nrt_bound_name(int32_t bound);

#ifdef __cplusplus
}
#endif
#endif
