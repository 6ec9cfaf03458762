/* Declarations shared by the runtime's source files; not part of the API. */
#ifndef NEURONRT_INTERNAL_H
#define NEURONRT_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include "neuronrt/nrt.h"
#include "neuronrt/top.h"

#if defined(__GNUC__)
#define RT_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define RT_PRINTF(f, a)
#endif

/* Sets the thread's error message and returns status (status.c). */
nrt_status rt_fail(nrt_status status, const char *fmt, ...) RT_PRINTF(2, 3);
/* Replaces the thread's error message without changing the status. */
void rt_set_error(const char *message);

/* First call of every public entry point: initialises once, then returns the
 * configuration error or NRT_ERROR_FORKED (with message) or NRT_SUCCESS. */
nrt_status rt_ensure_init(void);
/* Records that worker threads or device memory now exist, from which point
 * a fork() leaves a child that must not use the runtime. */
void rt_mark_started(void);
/* Checks 0 <= device < count (after rt_ensure_init). */
nrt_status rt_check_device(int32_t device);
const nrt_device_properties *rt_device_props(int32_t device);
int32_t rt_device_count(void);
/* Kernel threads the pool may use (TORCHNEURON_NUM_THREADS or the cores
 * this process may run on), and whether each helper keeps to a core of its
 * own (TORCHNEURON_PIN_THREADS). */
int rt_kernel_threads(void);
int rt_pin_kernel_threads(void);

/* ops/engine/copy.c: memmove of host-addressable bytes, split over the kernel
 * thread pool when large and the ranges do not overlap. */
void rt_copy_bytes(void *dst, const void *src, size_t bytes);

/* stream.c, for the caching allocator: a reference that keeps a stream's
 * record (not its worker) alive past nrt_stream_destroy; the count of
 * commands submitted so far; whether the stream has completed command seq;
 * and a wait for that which leaves the stream's sticky error alone. */
void rt_stream_retain(nrt_stream_t stream);
void rt_stream_release(nrt_stream_t stream);
uint64_t rt_stream_submitted(nrt_stream_t stream);
int rt_stream_passed(nrt_stream_t stream, uint64_t seq);
void rt_stream_wait_passed(nrt_stream_t stream, uint64_t seq);
/* For tests: streams created from now on keep their rings at most depth
 * commands deep (a power of two, 2..8192; anything else restores 8192). */
void rt_stream_limit_ring_depth(uint64_t depth);

/* stream.c, for neuron-top (top.c): fn(activity, arg) for each stream of
 * the device that ever had work, in id order. Holds the stream table's
 * lock meanwhile. */
void rt_stream_activity(int32_t device, void (*fn)(const nrt_top_stream *, void *), void *arg);
/* device.c: TORCHNEURON_TOP (1 unless set to 0). */
int rt_top_enabled(void);
/* top.c: publishes the neuron-top page from now on (once; the runtime has
 * started). Never fails the caller: without a page the runtime runs on. */
void rt_top_start(void);

/* host_backing.c: bytes the host can still back with memory (available
 * memory, and the memory cgroup's limit less its usage), UINT64_MAX if
 * unknown. */
uint64_t rt_host_available(void);

/* memory.c: total bytes a device's allocations may use. */
size_t rt_memory_capacity(int32_t device);

/* host_memory.c: async copies hold a pinned buffer while queued, so that
 * nrt_host_free of a buffer in flight defers the release. acquire returns
 * nonzero if ptr is pinned (and then must be balanced by release). */
int rt_host_pin_acquire(const void *ptr);
void rt_host_pin_release(const void *ptr);

/* Human-readable size for messages: "512 bytes", "4.00 KiB", "2.50 GiB". */
typedef struct rt_size_text {
  char s[24];
} rt_size_text;
rt_size_text rt_format_size(uint64_t bytes);

/* metrics.c: adds to a counter of neuronrt/metrics.h (relaxed). */
void rt_metric_add(nrt_metric metric, uint64_t amount);

/* log.c: a message at a level (printf format); whether that level is on;
 * TORCHNEURON_LOG_LEVEL's error for device.c's configuration, or NULL. */
void rt_log(nrt_log_level level, const char *fmt, ...) RT_PRINTF(2, 3);
int rt_log_on(nrt_log_level level);
const char *rt_log_config_error(void);

/* Monotonic clock in nanoseconds. */
uint64_t rt_now_ns(void);

/* ops/engine/dispatch.c: the kernel table built from NRT_OP_LIST. */
typedef nrt_status (*rt_kernel_fn)(const nrt_op *op);
#define RT_KERNEL_DECL_(CODE, name) nrt_status rt_kernel_##name(const nrt_op *op);
NRT_OP_LIST(RT_KERNEL_DECL_)
#undef RT_KERNEL_DECL_

/* ops/engine/dispatch.c: checks an op descriptor (codes, ranks, that every view
 * lies inside one device arena); then runs it on the calling thread with
 * device addresses translated to host aliases. */
nrt_status rt_op_validate(const nrt_op *op);
nrt_status rt_op_run(const nrt_op *op);
/* Copies the used part of op into dst (operands, scalars and immediates up
 * to their counts): the whole descriptor is 3.6 KiB, whose copy was a
 * tenth of a synchronized one-element op's runtime time. The rest of dst
 * stays unset. */
void rt_op_copy_used(nrt_op *dst, const nrt_op *op);

#endif
