// The calling thread's current neuron device and, per device, its current
// stream (PyTorch's notion; the runtime only knows streams). Also the
// conversions between c10::Stream and runtime stream handles.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/Stream.h>

#include "neuronrt/nrt.h"

namespace torchneuron {

c10::DeviceIndex current_device();
void set_current_device(c10::DeviceIndex index);
c10::DeviceIndex device_count() noexcept;
// Throws if index is not a visible device.
void check_device(c10::DeviceIndex index);

nrt_stream_t current_stream(c10::DeviceIndex index);
// Makes stream the current one of its device; returns the previous one.
c10::Stream exchange_stream(c10::Stream stream);

c10::Stream to_c10(nrt_stream_t stream);
nrt_stream_t to_runtime(const c10::Stream& stream);

}  // namespace torchneuron
