// Pinned host memory for neuron: the allocator behind pin_memory() and
// pin_memory=True, and the test for pinned pointers.
#pragma once

#include <ATen/core/CachingHostAllocator.h>

namespace torchneuron {

at::HostAllocator* host_allocator();
bool is_pinned(const void* ptr);

}  // namespace torchneuron
