// The neuron device allocator: PyTorch's view of the runtime's caching
// allocator (runtime/src/caching_allocator.c).
#pragma once

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/Stream.h>

namespace torchneuron {

c10::DeviceAllocator* device_allocator();
void record_stream(const c10::DataPtr& data_ptr, const c10::Stream& stream);

}  // namespace torchneuron
