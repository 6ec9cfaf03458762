// Reductions of complex tensors composed from native ops on the planes or
// on z != 0. Each returns nothing when the call is not a plain neuron
// complex one (then the registration's fallback runs, which also raises
// the CPU's errors for malformed calls).
#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>

#include <algorithm>
#include <cmath>

#include "complex_ops.h"
#include "op_tracking.h"

namespace torchneuron {
namespace {

bool native_neuron_complex(const at::Tensor& t) {
  return t.defined() && t.is_complex() && t.scalar_type() != at::kComplexHalf &&
         t.device().type() == c10::DeviceType::PrivateUse1;
}

// The planes of z with its conjugate and negative bits applied.
at::Tensor resolved_real_view(const at::Tensor& z) { return at::view_as_real(z.resolve_conj().resolve_neg()); }

}  // namespace

std::optional<at::Tensor> try_native_complex_var(const at::Tensor& self, at::OptionalIntArrayRef dim,
                                                 const std::optional<at::Scalar>& correction, bool keepdim,
                                                 bool take_sqrt) {
  if (!native_neuron_complex(self)) return std::nullopt;
  if (take_sqrt)
    NEURON_TRACK_OP("aten::std.correction(complex)");
  else
    NEURON_TRACK_OP("aten::var.correction(complex)");
  c10::DeviceGuard guard(self.device());
  // Var(z) = Var(re z) + Var(im z), as PyTorch defines (and computes) it.
  const at::Tensor p = resolved_real_view(self);
  at::Tensor v = at::var(p.select(-1, 0), dim, correction, keepdim);
  v.add_(at::var(p.select(-1, 1), dim, correction, keepdim));
  return take_sqrt ? v.sqrt_() : v;
}

std::optional<std::tuple<at::Tensor, at::Tensor>> try_native_complex_var_mean(
    const at::Tensor& self, at::OptionalIntArrayRef dim, const std::optional<at::Scalar>& correction, bool keepdim,
    bool take_sqrt) {
  std::optional<at::Tensor> v = try_native_complex_var(self, dim, correction, keepdim, take_sqrt);
  if (!v) return std::nullopt;
  c10::DeviceGuard guard(self.device());
  return std::make_tuple(*v, at::mean(self.resolve_conj().resolve_neg(), dim, keepdim));
}

std::optional<at::Tensor> try_native_complex_vector_norm(const at::Tensor& self, const at::Scalar& ord,
                                                         at::OptionalIntArrayRef dim, bool keepdim,
                                                         std::optional<at::ScalarType> dtype) {
  if (!native_neuron_complex(self) || (dtype && !at::isComplexType(*dtype)) || ord.isComplex()) return std::nullopt;
  NEURON_TRACK_OP("aten::linalg_vector_norm(complex)");
  c10::DeviceGuard guard(self.device());
  const at::Tensor z = dtype ? self.to(*dtype) : self;
  return at::linalg_vector_norm(z.abs(), ord, dim, keepdim, std::nullopt);
}

std::optional<at::Tensor> try_native_complex_norm(const at::Tensor& self, const std::optional<at::Scalar>& p,
                                                  at::IntArrayRef dim, bool keepdim,
                                                  std::optional<at::ScalarType> dtype) {
  // norm's p=None is 2; the vector norm of the same dims is norm's value
  return try_native_complex_vector_norm(self, p.value_or(2), dim, keepdim, dtype);
}

std::optional<at::Tensor> try_native_complex_logsumexp(const at::Tensor& self, at::IntArrayRef dims, bool keepdim) {
  const int64_t rank = std::max<int64_t>(self.dim(), 1);
  if (!native_neuron_complex(self) || (dims.empty() && self.dim() > 0)) return std::nullopt;
  for (int64_t d : dims)
    if (d < -rank || d >= rank) return std::nullopt;  // the fallback raises the CPU's error
  NEURON_TRACK_OP("aten::logsumexp(complex)");
  c10::DeviceGuard guard(self.device());
  // a 0-d tensor as one element of a 1-d one (the complex sums take a dim)
  if (self.dim() == 0) return try_native_complex_logsumexp(self.reshape({1}), {0}, false);
  const at::Tensor z = self.resolve_conj().resolve_neg();
  if (z.numel() == 0) return at::sum(z.exp(), dims, keepdim).log();
  // As the CPU: shift by the largest real part (an infinite one by 0), so
  // that the exponentials stay in range.
  at::Tensor shift = at::amax(complex_plane(z, 0), dims, /*keepdim=*/true);
  shift.masked_fill_(shift.abs().eq(INFINITY), 0);
  at::Tensor result = at::sum((z - shift).exp(), dims, /*keepdim=*/true).log().add_(shift);
  return keepdim ? result : result.squeeze(dims);
}

std::optional<at::Tensor> try_native_complex_trace(const at::Tensor& self) {
  if (!native_neuron_complex(self) || self.dim() != 2) return std::nullopt;
  NEURON_TRACK_OP("aten::trace(complex)");
  c10::DeviceGuard guard(self.device());
  return self.diagonal().sum();
}

std::optional<at::Tensor> try_native_complex_any(const at::Tensor& self) {
  if (!native_neuron_complex(self)) return std::nullopt;
  NEURON_TRACK_OP("aten::any(complex)");
  c10::DeviceGuard guard(self.device());
  return self.ne(0).any();
}

std::optional<at::Tensor> try_native_complex_nonzero(const at::Tensor& self) {
  if (!native_neuron_complex(self)) return std::nullopt;
  c10::DeviceGuard guard(self.device());
  return self.ne(0);
}

std::optional<at::Tensor> try_native_complex_count_nonzero(const at::Tensor& self, at::IntArrayRef dims) {
  if (!native_neuron_complex(self)) return std::nullopt;
  NEURON_TRACK_OP("aten::count_nonzero.dim_IntList(complex)");
  c10::DeviceGuard guard(self.device());
  return self.ne(0).count_nonzero(dims);
}

std::optional<at::Tensor> try_native_complex_dot(const at::Tensor& self, const at::Tensor& other, bool conj_self) {
  if (!native_neuron_complex(self) || !native_neuron_complex(other) || self.scalar_type() != other.scalar_type() ||
      self.device() != other.device() || self.dim() != 1 || other.dim() != 1 || self.numel() != other.numel())
    return std::nullopt;  // the CPU's errors come from the fallback
  if (conj_self)
    NEURON_TRACK_OP("aten::vdot(complex)");
  else
    NEURON_TRACK_OP("aten::dot(complex)");
  c10::DeviceGuard guard(self.device());
  return at::mul(conj_self ? self.conj() : self, other).sum();
}

}  // namespace torchneuron
