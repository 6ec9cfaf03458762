// at::HostAllocator over the runtime's pinned buffers (nrt_host_alloc). The
// runtime itself holds a buffer while a copy that uses it is queued, so
// freeing early is safe and record_event has nothing left to do.
#include "host_allocator.h"

#include <mutex>
#include <unordered_map>

#include "runtime_check.h"

namespace torchneuron {
namespace {

struct PinnedAllocator final : public at::HostAllocator {
  at::DataPtr allocate(size_t bytes) override {
    void* ptr = nullptr;
    if (bytes > 0) NRT_CHECK(nrt_host_alloc(bytes, &ptr));
    if (ptr != nullptr) {
      std::lock_guard<std::mutex> lock(mu_);
      sizes_[ptr] = bytes;
      stats_.active_requests.increase(1);
      stats_.active_bytes.increase(static_cast<int64_t>(bytes));
      stats_.allocations.increase(1);
      stats_.allocated_bytes.increase(static_cast<int64_t>(bytes));
      stats_.num_host_alloc++;
    }
    return {ptr, ptr, &free_pinned, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &free_pinned; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }

  bool record_event(void*, void*, c10::Stream) override { return true; }
  void empty_cache() override {}

  at::HostStats get_stats() override {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

  void reset_accumulated_stats() override {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto* stat : {&stats_.active_requests, &stats_.active_bytes, &stats_.allocations,
                       &stats_.allocated_bytes})
      stat->reset_accumulated();
    stats_.num_host_alloc = stats_.num_host_free = 0;
  }

  void reset_peak_stats() override {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto* stat : {&stats_.active_requests, &stats_.active_bytes, &stats_.allocations,
                       &stats_.allocated_bytes})
      stat->reset_peak();
  }

  void release(void* ptr) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = sizes_.find(ptr);
      if (it != sizes_.end()) {
        auto bytes = static_cast<int64_t>(it->second);
        stats_.active_requests.decrease(1);
        stats_.active_bytes.decrease(bytes);
        stats_.allocations.decrease(1);
        stats_.allocated_bytes.decrease(bytes);
        stats_.num_host_free++;
        sizes_.erase(it);
      }
    }
    (void)nrt_host_free(ptr);
  }

 private:
  static void free_pinned(void* ptr);

  std::mutex mu_;
  std::unordered_map<void*, size_t> sizes_;
  at::HostStats stats_;
};

PinnedAllocator pinned_instance;

void PinnedAllocator::free_pinned(void* ptr) {
  if (ptr != nullptr) pinned_instance.release(ptr);
}

}  // namespace

at::HostAllocator* host_allocator() { return &pinned_instance; }

bool is_pinned(const void* ptr) { return ptr != nullptr && nrt_host_is_pinned(ptr, nullptr, nullptr); }

REGISTER_HOST_ALLOCATOR(at::kPrivateUse1, &pinned_instance);

}  // namespace torchneuron
