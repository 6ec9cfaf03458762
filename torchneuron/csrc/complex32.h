// complex32 (chalf) arithmetic computed in complex64 (complex32.cpp).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/stack.h>

namespace torchneuron {

// Runs op on the stack's arguments if it is one of the complex32 ops the
// CPU computes and a complex32 neuron tensor (or a float16 one with a
// complex number) takes part; false leaves the stack untouched.
bool try_native_complex32(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// True if one of the top num_args stack values is a complex32 neuron tensor
// (or a list holding one), or a float16 one meets a complex number.
bool touches_complex32(const torch::jit::Stack& stack, size_t num_args);

// The CPU's NotImplementedError if t is complex32, for a kernel that could
// move complex32 bytes but that the CPU does not have for complex32
// (kernel: the name the CPU's message gives).
void refuse_complex32(const at::Tensor& t, const char* kernel);

}  // namespace torchneuron
