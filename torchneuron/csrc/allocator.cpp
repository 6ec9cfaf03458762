// c10::DeviceAllocator over the runtime's caching allocator. Allocation uses
// the current device and its current stream (stream-ordered reuse); the
// statistics are the runtime's, reshaped into c10's DeviceStats so that
// torch.accelerator.memory_* and torch.neuron.memory_* report them.
#include "allocator.h"

#include <Python.h>
#include <ATen/ATen.h>
#include <torch/library.h>

#include "device_state.h"
#include "fallback.h"
#include "memory_history.h"
#include "op_tracking.h"
#include "runtime_check.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {

using c10::CachingAllocator::Stat;
using c10::CachingAllocator::StatArray;
using c10::CachingDeviceAllocator::DeviceStats;

void delete_block(void* ptr) {
  // Deleters cannot throw; a failure here means a forked child or a bug,
  // and the memory is unreachable either way.
  MemoryEventContext context;
  (void)nrt_cache_free(ptr);
}

Stat stat_to_c10(const nrt_stat& s) {
  Stat out;
  out.current = s.current;
  out.peak = s.peak;
  out.allocated = s.allocated;
  out.freed = s.freed;
  return out;
}

void copy_stat_array(StatArray& out, const nrt_stat (&in)[NRT_POOL_KINDS]) {
  for (size_t i = 0; i < NRT_POOL_KINDS; i++) out[i] = stat_to_c10(in[i]);
}

struct NeuronAllocator final : public c10::DeviceAllocator {
  c10::DataPtr allocate(size_t bytes) override {
    check_fallback_environment();  // a tensor on the device is its first use
    c10::DeviceIndex device = current_device();
    void* ptr = nullptr;
    MemoryEventContext context;
    NRT_CHECK(nrt_cache_alloc(current_stream(device), bytes, &ptr));
    return {ptr, ptr, &delete_block, c10::Device(c10::DeviceType::PrivateUse1, device)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &delete_block; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    nrt_stream_t stream = current_stream(current_device());
    NRT_CHECK(nrt_memcpy_async(stream, dest, src, count));
    NRT_CHECK(nrt_stream_synchronize(stream));
  }

  bool initialized() override { return device_count() > 0; }

  void emptyCache(c10::MempoolId_t) override {
    // Releasing a segment waits until its stream has passed the last use of
    // its blocks: without the GIL, so that Python threads run meanwhile.
    // The stack for the memory history is gathered first, with the GIL.
    MemoryEventContext context;
    PyThreadState* saved = Py_IsInitialized() && PyGILState_Check() ? PyEval_SaveThread() : nullptr;
    nrt_status status = NRT_SUCCESS;
    for (c10::DeviceIndex d = 0; d < device_count() && !status; d++) status = nrt_cache_empty(d);
    if (saved) PyEval_RestoreThread(saved);
    NRT_CHECK(status);
  }

  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override {
    record_stream(ptr, stream);
  }

  DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    nrt_cache_stats s;
    NRT_CHECK(nrt_cache_get_stats(device, &s));
    DeviceStats out;
    copy_stat_array(out.allocation, s.allocation);
    copy_stat_array(out.segment, s.segment);
    copy_stat_array(out.active, s.active);
    copy_stat_array(out.inactive_split, s.inactive_split);
    copy_stat_array(out.allocated_bytes, s.allocated_bytes);
    copy_stat_array(out.reserved_bytes, s.reserved_bytes);
    copy_stat_array(out.active_bytes, s.active_bytes);
    copy_stat_array(out.inactive_split_bytes, s.inactive_split_bytes);
    copy_stat_array(out.requested_bytes, s.requested_bytes);
    out.num_alloc_retries = s.num_alloc_retries;
    out.num_ooms = s.num_ooms;
    out.num_sync_all_streams = s.num_sync_all_streams;
    out.num_device_alloc = s.num_device_alloc;
    out.num_device_free = s.num_device_free;
    return out;
  }

  void resetAccumulatedStats(c10::DeviceIndex device) override {
    NRT_CHECK(nrt_cache_reset_accumulated(device));
  }

  void resetPeakStats(c10::DeviceIndex device) override { NRT_CHECK(nrt_cache_reset_peak(device)); }

  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    size_t free_bytes = 0, total_bytes = 0;
    NRT_CHECK(nrt_mem_get_info(device, &free_bytes, &total_bytes));
    return {free_bytes, total_bytes};
  }
};

NeuronAllocator allocator_instance;

}  // namespace

c10::DeviceAllocator* device_allocator() { return &allocator_instance; }

void record_stream(const c10::DataPtr& data_ptr, const c10::Stream& stream) {
  if (data_ptr.get() == nullptr || data_ptr.get_deleter() != &delete_block) return;
  NRT_CHECK(nrt_cache_record_stream(data_ptr.get(), to_runtime(stream)));
}

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &allocator_instance);

namespace {

// Tensor.record_stream: ATen has no generic kernel, each device registers one.
void record_stream_op(at::Tensor& self, c10::Stream stream) {
  NEURON_TRACK_OP("aten::record_stream");
  record_stream(self.storage().data_ptr(), stream);
}

}  // namespace

NEURON_LIBRARY_IMPL(aten, m) { m.impl("record_stream", record_stream_op); }

}  // namespace torchneuron
