/* Devices: how many NeuronCores the process sees and what each one is.
 *
 * The runtime configures itself from the environment on first use:
 *   NEURON_PLATFORM_TARGET_OVERRIDE  trn1 | trn2 | trn3      (default trn2)
 *   NEURON_LOGICAL_NC_CONFIG         1 | 2 physical cores per logical core
 *                                    (default 2 on trn2/trn3, 1 on trn1)
 *   NEURON_RT_VISIBLE_CORES          "0-3", "1,3", "0,2-3": logical cores shown
 *   NEURON_RT_NUM_CORES              how many cores to show, counted from 0
 *   NEURON_RT_HBM_BYTES              lowers the per-core memory capacity
 *   NEURON_LAUNCH_BLOCKING           1: every launch completes before return
 * A malformed value makes every call fail with NRT_ERROR_INVALID_CONFIG and
 * a message naming the variable; it is never replaced by a default.
 */
#ifndef NEURONRT_DEVICE_H
#define NEURONRT_DEVICE_H

#include <stdint.h>
#include "neuronrt/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NRT_MAX_DEVICES 64

typedef enum nrt_target {
  NRT_TARGET_TRN1 = 1, /* NeuronCore-v2 */
  NRT_TARGET_TRN2 = 2, /* NeuronCore-v3 */
  NRT_TARGET_TRN3 = 3  /* NeuronCore-v4 */
} nrt_target;

typedef struct nrt_device_properties {
  char name[64];               /* e.g. "NeuronCore-v3 (trn2, simulated)" */
  char target_name[8];         /* "trn1", "trn2" or "trn3" */
  nrt_target target;
  int32_t logical_core;        /* index on the chip(s) before visibility remap */
  int32_t logical_nc_config;   /* physical cores fused into this device */
  uint64_t hbm_bytes;          /* enforced memory capacity of this device */
  uint64_t hbm_bytes_per_s;    /* HBM bandwidth share of this device */
  uint32_t sbuf_partitions;    /* 128 */
  uint32_t sbuf_partition_bytes;
  uint32_t psum_partitions;    /* 128 */
  uint32_t psum_partition_bytes;
  uint32_t psum_banks;         /* 8 banks of psum_partition_bytes / 8 */
  uint64_t tensor_engine_hz;
  uint64_t vector_engine_hz;
  uint64_t scalar_engine_hz;
  uint64_t gpsimd_engine_hz;
  uint64_t dma_bytes_per_s;    /* per-core DMA bandwidth */
  uint64_t link_bytes_per_s;   /* NeuronLink share of this device (chip to chip) */
  uint64_t efa_bytes_per_s;    /* EFA share of this device (instance to instance) */
} nrt_device_properties;

/* Initialises the runtime from the environment. Idempotent and thread-safe;
 * every other call initialises implicitly. Returns the configuration error,
 * if any, on every call. */
nrt_status nrt_init(void);

nrt_status nrt_device_count(int32_t *count);
nrt_status nrt_device_get_properties(int32_t device, nrt_device_properties *out);

/* The calling thread's current device (default 0). */
nrt_status nrt_device_get_current(int32_t *device);
nrt_status nrt_device_set_current(int32_t device);

/* Waits for all work on every stream of the device; returns the first sticky
 * asynchronous error found (and clears it). */
nrt_status nrt_device_synchronize(int32_t device);

/* Nonzero in a child process forked after the runtime started (created a
 * stream or device memory). Such a child cannot use the device: calls
 * return NRT_ERROR_FORKED. Reading the configuration alone does not count. */
int nrt_in_bad_fork(void);

/* Nonzero when NEURON_LAUNCH_BLOCKING=1. */
int nrt_launch_blocking(void);

#ifdef __cplusplus
}
#endif
#endif
