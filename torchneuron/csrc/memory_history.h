// torch.neuron.memory's history of allocator events and its snapshots, in
// torch.cuda.memory's format. The runtime tells an observer of each event
// (neuronrt/cache_inspect.h); the shim adds when and where (the Python
// and C++ stack of the call that caused it).
#pragma once

#include <c10/core/Allocator.h>

#include <memory>

namespace torchneuron {

// Whether history is being recorded (one relaxed load).
bool memory_history_on();

// Gathers the caller's stack for the allocator events of the calling
// thread until it is destroyed; does nothing when history is off.
class MemoryEventContext {
 public:
  MemoryEventContext();
  ~MemoryEventContext();
  MemoryEventContext(const MemoryEventContext&) = delete;
  MemoryEventContext& operator=(const MemoryEventContext&) = delete;

 private:
  bool set_ = false;
  std::shared_ptr<c10::GatheredContext> outer_;
};

}  // namespace torchneuron
