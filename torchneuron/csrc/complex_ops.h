// Complex ops composed from native real kernels (complex_ops.cpp).
#pragma once

#include <ATen/core/stack.h>

namespace torchneuron {

// mul.Tensor's arguments (self, other) on the stack: if both are neuron
// complex tensors of one dtype without conjugate/negative bits, computes the
// product natively, replaces the arguments with it and returns true;
// otherwise leaves the stack alone and returns false.
bool try_native_complex_mul(torch::jit::Stack* stack);

}  // namespace torchneuron
