// The out= overload of a complex op from its functional native path: the
// result computed as the functional form computes it, then written into
// out (resized as out= resizes). Only for an out of the result's own dtype
// on the same device, without conjugate or negative bits; any other out
// (a cast the CPU makes or refuses) is left to the fallback, which does
// what the CPU does.
#pragma once

#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>

#include <optional>

namespace torchneuron {

template <class Compute>
std::optional<at::Tensor> complex_into_out(const at::Tensor& self, at::ScalarType dtype, at::Tensor& out,
                                           Compute compute) {
  if (!self.defined() || !self.is_complex() || !out.defined() || out.device() != self.device() ||
      out.scalar_type() != dtype || out.is_conj() || out.is_neg())
    return std::nullopt;
  std::optional<at::Tensor> result = compute();
  if (!result) return std::nullopt;
  c10::DeviceGuard guard(out.device());
  at::native::resize_output(out, result->sizes());
  if (out.numel() > 0) out.copy_(*result);
  return out;
}

}  // namespace torchneuron
