/* Launches and copies: what producers append to a stream's ring (stream.c
 * runs them). Each reserves a slot under the stream's lock, fills the
 * command and commits it; under NEURON_LAUNCH_BLOCKING, or for a copy from
 * or to pageable host memory, it then waits for the command to complete. */
#include <stdio.h>
#include <string.h>
#include "internal.h"
#include "profiling.h"
#include "stream_impl.h"

nrt_status nrt_launch(nrt_stream_t stream, const nrt_op *op) {
  nrt_status s = rt_ensure_init();
  if (s) return s;
  if (!stream || !op) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_launch: NULL argument");
  if ((s = rt_op_validate(op))) return s;
  command *c;
  uint64_t seq;
  if ((s = rt_stream_reserve_locked(stream, 0, &c, &seq))) return s;
  c->kind = CMD_OP;
  rt_op_copy_used(&c->u.op, op);
  RT_PROFILE_STAMP(&c->prof, NRT_PROFILE_KERNEL);
  rt_stream_commit_locked(stream);
  rt_metric_add(NRT_METRIC_KERNELS_LAUNCHED, 1);
  if (op->code == NRT_OP_COPY) { /* device to device: restriding, converting, across devices */
    rt_metric_add(NRT_METRIC_COPIES_DEVICE_TO_DEVICE, 1);
    rt_metric_add(NRT_METRIC_BYTES_DEVICE_TO_DEVICE,
                  (uint64_t)nrt_view_numel(&op->operands[0]) * nrt_dtype_size(op->operands[0].dtype));
  }
  return nrt_launch_blocking() ? rt_stream_wait_for(stream, seq) : NRT_SUCCESS;
}

nrt_status nrt_launch_host_func(nrt_stream_t stream, void (*fn)(void *), void *arg) {
  nrt_status s = rt_ensure_init();
  if (s) return s;
  if (!stream || !fn)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_launch_host_func: NULL argument");
  command *c;
  uint64_t seq;
  if ((s = rt_stream_reserve_locked(stream, 1, &c, &seq))) return s;
  c->kind = CMD_HOST_FUNC;
  c->prof.launch_id = 0;
  c->u.host.fn = fn;
  c->u.host.arg = arg;
  rt_stream_commit_locked(stream);
  return nrt_launch_blocking() ? rt_stream_wait_for(stream, seq) : NRT_SUCCESS;
}

nrt_status nrt_launch_host_task(nrt_stream_t stream, const char *name, nrt_status (*run)(void *),
                                void (*release)(void *), void *arg) {
  return rt_launch_host_task_kind(stream, NRT_PROFILE_HOST_TASK, name, run, release, arg);
}

nrt_status rt_launch_host_task_kind(nrt_stream_t stream, int32_t kind, const char *name,
                                    nrt_status (*run)(void *), void (*release)(void *), void *arg) {
  nrt_status s = rt_ensure_init();
  if (!s && (!stream || !run))
    s = rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_launch_host_task: NULL argument");
  command *c;
  uint64_t seq;
  if (!s) s = rt_stream_reserve_locked(stream, 0, &c, &seq);
  if (s) {
    if (release) release(arg); /* the call owns arg in every case */
    return s;
  }
  c->kind = CMD_HOST_TASK;
  c->u.task.run = run;
  c->u.task.release = release;
  c->u.task.arg = arg;
  snprintf(c->u.task.name, sizeof c->u.task.name, "%s", name ? name : "host task");
  RT_PROFILE_STAMP(&c->prof, kind);
  rt_stream_commit_locked(stream);
  rt_metric_add(NRT_METRIC_HOST_TASKS_LAUNCHED, 1);
  return nrt_launch_blocking() ? rt_stream_wait_for(stream, seq) : NRT_SUCCESS;
}

/* Resolves one end of a copy: device memory becomes its host alias (after
 * checking that the whole range lies in one arena); host memory is left as
 * is and *pageable says whether it is unregistered. */
static nrt_status resolve_end(const void *ptr, size_t bytes, const char *which,
                              void **resolved, int *pageable) {
  int32_t device, last_device;
  *pageable = 0;
  if (nrt_pointer_get_device(ptr, &device) == NRT_SUCCESS) {
    if (nrt_pointer_get_device((const char *)ptr + bytes - 1, &last_device) != NRT_SUCCESS ||
        last_device != device)
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                     "memcpy: %s range of %zu bytes runs past the end of neuron:%d memory",
                     which, bytes, device);
    *resolved = nrt_device_to_host(ptr);
    return NRT_SUCCESS;
  }
  *resolved = (void *)ptr;
  void *base;
  size_t size;
  /* Only a range wholly inside one pinned buffer may be copied later. */
  *pageable = !nrt_host_is_pinned(ptr, &base, &size) ||
              (const char *)ptr + bytes > (const char *)base + size;
  return NRT_SUCCESS;
}

/* Counts a queued copy by direction (an end is on the device when its
 * address was translated to the runtime's alias). */
static void count_copy(int dst_on_device, int src_on_device, size_t bytes) {
  nrt_metric copies = NRT_METRIC_COPIES_DEVICE_TO_DEVICE, moved = NRT_METRIC_BYTES_DEVICE_TO_DEVICE;
  if (dst_on_device && !src_on_device) {
    copies = NRT_METRIC_COPIES_HOST_TO_DEVICE;
    moved = NRT_METRIC_BYTES_HOST_TO_DEVICE;
  } else if (!dst_on_device && src_on_device) {
    copies = NRT_METRIC_COPIES_DEVICE_TO_HOST;
    moved = NRT_METRIC_BYTES_DEVICE_TO_HOST;
  } else if (!dst_on_device) {
    return; /* host to host: no device traffic */
  }
  rt_metric_add(copies, 1);
  rt_metric_add(moved, bytes);
}

nrt_status nrt_memcpy_async(nrt_stream_t stream, void *dst, const void *src, size_t bytes) {
  nrt_status s = rt_ensure_init();
  if (s) return s;
  if (!stream) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "memcpy: NULL stream");
  if (bytes == 0) return NRT_SUCCESS;
  if (!dst || !src) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "memcpy: NULL pointer");
  void *host_dst, *host_src;
  int dst_pageable, src_pageable;
  if ((s = resolve_end(dst, bytes, "destination", &host_dst, &dst_pageable)) ||
      (s = resolve_end(src, bytes, "source", &host_src, &src_pageable)))
    return s;
  command *c;
  uint64_t seq;
  if ((s = rt_stream_reserve_locked(stream, 0, &c, &seq))) return s;
  c->kind = CMD_COPY;
  c->u.copy.dst = host_dst;
  c->u.copy.src = host_src;
  c->u.copy.bytes = bytes;
  c->u.copy.pinned[0] = host_dst == dst && rt_host_pin_acquire(dst) ? dst : NULL;
  c->u.copy.pinned[1] = host_src == src && rt_host_pin_acquire(src) ? src : NULL;
  RT_PROFILE_STAMP(&c->prof, NRT_PROFILE_COPY);
  rt_stream_commit_locked(stream);
  count_copy(host_dst != dst, host_src != src, bytes);
  if (dst_pageable || src_pageable || nrt_launch_blocking()) return rt_stream_wait_for(stream, seq);
  return NRT_SUCCESS;
}

