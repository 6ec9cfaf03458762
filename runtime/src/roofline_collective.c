/* The link term of neuronrt/roofline.h: what a collective would cost on
 * the target's interconnect. */
#include <math.h>
#include "internal.h"
#include "profiling.h"
#include "neuronrt/roofline.h"

/* Fixed cost of one step of a schedule (a hop's synchronisation and DMA
 * setup). Assumptions of the model, not published figures: a few
 * microseconds on NeuronLink, more through EFA's network stack. */
#define LINK_STEP_NS 2000.0
#define EFA_STEP_NS 10000.0

/* Per collective: the share of `bytes` one rank sends, as a factor of
 * (n - 1) / n (ring reduce-scatter and all-gather move that much each;
 * an all_reduce, reduce or broadcast does both), the steps as a factor of
 * n - 1, and whether it reduces. Send/receive moves the message in one
 * step. A barrier moves nothing in ceil(log2 n) rounds (dissemination). */
typedef struct shape {
  double sends, steps;
  int reduces;
} shape;

static const shape shapes[NRT_COLLECTIVE_COUNT] = {
    [NRT_COLLECTIVE_ALL_REDUCE] = {2, 2, 1},     [NRT_COLLECTIVE_REDUCE] = {2, 2, 1},
    [NRT_COLLECTIVE_BROADCAST] = {2, 2, 0},      [NRT_COLLECTIVE_ALL_GATHER] = {1, 1, 0},
    [NRT_COLLECTIVE_REDUCE_SCATTER] = {1, 1, 1}, [NRT_COLLECTIVE_ALL_TO_ALL] = {1, 1, 0},
    [NRT_COLLECTIVE_GATHER] = {1, 1, 0},         [NRT_COLLECTIVE_SCATTER] = {1, 1, 0},
};

nrt_status nrt_roofline_add_collective(const nrt_device_properties *props, int32_t collective, int32_t ranks,
                                       int32_t hosts, double bytes, int32_t reduce_elem_size, nrt_roofline *r) {
  if (!props || !r)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_roofline_add_collective: NULL argument");
  if (collective < 0 || collective >= NRT_COLLECTIVE_COUNT)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_roofline_add_collective: unknown collective %d", collective);
  if (ranks < 1 || hosts < 1 || hosts > ranks || !(bytes >= 0) || reduce_elem_size < 0)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "nrt_roofline_add_collective: %d ranks on %d hosts, %g bytes, element size %d",
                   ranks, hosts, bytes, reduce_elem_size);
  if (ranks == 1) return NRT_SUCCESS; /* nothing leaves the device */
  double n = ranks, sent, steps;
  if (collective == NRT_COLLECTIVE_SEND_RECV) {
    sent = bytes;
    steps = 1;
  } else if (collective == NRT_COLLECTIVE_BARRIER) {
    sent = 0;
    steps = ceil(log2(n));
  } else {
    sent = shapes[collective].sends * bytes * (n - 1) / n;
    steps = shapes[collective].steps * (n - 1);
    if (shapes[collective].reduces && reduce_elem_size > 0)
      r->work[NRT_ROOFLINE_VECTOR] += bytes / reduce_elem_size * (n - 1) / n;
  }
  /* A ring over several hosts runs at the pace of its slowest hop. */
  int crosses = hosts > 1;
  double rate = (double)(crosses ? props->efa_bytes_per_s : props->link_bytes_per_s);
  r->link_bytes += sent;
  r->link_ns += (rate > 0 ? sent / rate * 1e9 : 0) + steps * (crosses ? EFA_STEP_NS : LINK_STEP_NS);
  r->bytes += 2 * bytes; /* the buffer read and written once: a floor */
  return NRT_SUCCESS;
}

void nrt_profile_add_task_estimate(const nrt_roofline *est) {
  if (est) rt_profile_add_estimate(est);
}
