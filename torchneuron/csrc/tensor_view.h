// Describing ATen tensors to the runtime: dtype mapping and nrt_tensor_view.
#pragma once

#include <ATen/Tensor.h>

#include "neuronrt/nrt.h"

namespace torchneuron {

// True if the runtime's kernels handle this dtype.
bool has_runtime_dtype(at::ScalarType type);
// Throws an error naming op and dtype if the runtime has no such dtype.
nrt_dtype to_runtime_dtype(at::ScalarType type, const char* op);
// The view of a neuron tensor (device address of its first element).
nrt_tensor_view to_view(const at::Tensor& tensor, const char* op);
// Rejects a scalar that does not fit dtype, with PyTorch's own message.
void check_scalar_fits(const at::Scalar& value, at::ScalarType dtype);
// Launches a filled-in descriptor on the current stream of device.
void launch(c10::DeviceIndex device, const nrt_op& op);

}  // namespace torchneuron
