// Complex add/sub with alpha on the runtime's complex ADD kernel
// (complex_add.cpp).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>

namespace torchneuron {

// The CPU's checks of add/sub's alpha for a complex result: not a bool,
// and representable in dtype (its overflow error otherwise).
void check_complex_alpha(const c10::Scalar& alpha, at::ScalarType dtype);

// out = a + alpha * b (a - alpha * b when subtract) as the CPU computes it.
// out already has the broadcast shape of a and b; all three are neuron
// complex64 or complex128 tensors of one dtype without conjugate or
// negative bits (the caller resolves them). out may be a (in place); any
// other overlap raises the CPU's error.
void complex_add_into(const at::Tensor& out, const at::Tensor& a, const at::Tensor& b, const c10::Scalar& alpha,
                      bool subtract);

}  // namespace torchneuron
