// prod, cumsum and cumprod of complex tensors composed on the float planes
// (complex_math.h); reduce.cpp's registrations try these first.
//
// cumsum is the real cumsum of the (real, imaginary) planes along the same
// dim: one native scan. A complex product has no real-kernel equivalent, so
// prod multiplies halves pairwise (a tree of log2 n rounds of complex
// products, each a handful of native elementwise ops on the planes), and
// cumprod is the Hillis-Steele scan: in round k every element takes the
// product with the one 2^k before it. The groupings differ from the CPU's
// sequential loop, so the roundings do (within the OpInfo tolerances); the
// tree's are the more accurate ones.
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>

#include <optional>

#include "complex_math.h"
#include "complex_ops.h"
#include "op_tracking.h"

namespace torchneuron {
namespace {

using namespace cmath;

bool usable(const at::Tensor& self, std::optional<at::ScalarType> dtype, const at::Tensor* out) {
  if (!self.defined() || !self.is_complex() || self.device().type() != c10::DeviceType::PrivateUse1) return false;
  if (self.scalar_type() == at::kComplexHalf) return false;  // the CPU has no complex32 scan or prod: its error
  if (dtype && *dtype != self.scalar_type()) return false;  // a conversion: the fallback
  if (out && (!out->defined() || out->device() != self.device() || out->scalar_type() != self.scalar_type() ||
              out->is_conj() || out->is_neg()))
    return false;
  return true;
}

Planes slice_last(const Planes& x, int64_t start, int64_t end) {
  return {x.re.slice(-1, start, end), x.im.slice(-1, start, end)};
}

Planes cat_last(const Planes& a, const Planes& b) {
  return {at::cat({a.re, b.re}, -1), at::cat({a.im, b.im}, -1)};
}

// The product along the last dim, by halves.
Planes product_last(Planes x) {
  int64_t n = x.re.size(-1);
  if (n == 0) {
    std::vector<int64_t> shape(x.re.sizes().begin(), x.re.sizes().end() - 1);
    shape.push_back(1);
    return {at::ones(shape, x.re.options()), at::zeros(shape, x.im.options())};
  }
  while (n > 1) {
    const int64_t half = n / 2;
    Planes p = multiply(slice_last(x, 0, half), slice_last(x, half, 2 * half));
    if (n % 2) p = cat_last(p, slice_last(x, 2 * half, n));
    x = p;
    n = x.re.size(-1);
  }
  return x;
}

// The inclusive scan of products along the last dim.
Planes cumprod_last(Planes x) {
  const int64_t n = x.re.size(-1);
  for (int64_t s = 1; s < n; s *= 2)
    x = cat_last(slice_last(x, 0, s), multiply(slice_last(x, s, n), slice_last(x, 0, n - s)));
  return x;
}

at::Tensor assemble_into(const Planes& p, const at::Tensor& self, const at::Tensor* out) {
  at::Tensor result = out ? *out : at::empty(p.re.sizes(), self.options());
  if (out) at::native::resize_output(result, p.re.sizes());
  if (result.numel() > 0) {
    complex_plane(result, 0).copy_(p.re);
    complex_plane(result, 1).copy_(p.im);
  }
  return result;
}

}  // namespace

std::optional<at::Tensor> try_native_complex_prod(const at::Tensor& self_in, std::optional<int64_t> dim,
                                                  bool keepdim, std::optional<at::ScalarType> dtype,
                                                  const at::Tensor* out) {
  if (!usable(self_in, dtype, out)) return std::nullopt;
  NEURON_TRACK_OP("aten::prod(complex)");
  c10::DeviceGuard guard(self_in.device());
  const at::Tensor self = self_in.resolve_conj().resolve_neg();
  Planes x = planes_of(self);
  std::vector<int64_t> shape;
  if (!dim) {
    x = {x.re.reshape({-1}), x.im.reshape({-1})};
    x = product_last(x);
    x = {x.re.reshape({}), x.im.reshape({})};
  } else {
    const int64_t d = at::maybe_wrap_dim(*dim, self.dim());
    if (self.dim() == 0) {
      x = {x.re.clone(), x.im.clone()};
    } else {
      x = product_last({x.re.movedim(d, -1), x.im.movedim(d, -1)});
      x = {x.re.movedim(-1, d), x.im.movedim(-1, d)};
      if (!keepdim) x = {x.re.squeeze(d), x.im.squeeze(d)};
    }
  }
  return assemble_into(x, self_in, out);
}

std::optional<at::Tensor> try_native_complex_scan(bool cumprod, const at::Tensor& self_in, int64_t dim,
                                                  std::optional<at::ScalarType> dtype, const at::Tensor* out) {
  if (!usable(self_in, dtype, out)) return std::nullopt;
  if (out && !out->is_same(self_in) && out->sizes() != self_in.sizes() && out->numel() != 0)
    return std::nullopt;  // the fallback gives the CPU's resize warning
  native_op_counter(cumprod ? "aten::cumprod(complex)" : "aten::cumsum(complex)")
      ->fetch_add(1, std::memory_order_relaxed);
  native_op_total.fetch_add(1, std::memory_order_relaxed);
  c10::DeviceGuard guard(self_in.device());
  const int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self_in.dim(), 1));
  const at::Tensor self = self_in.resolve_conj().resolve_neg();
  Planes x = planes_of(self);
  if (self.dim() == 0 || self.numel() == 0) {
    x = {x.re.clone(), x.im.clone()};
  } else if (!cumprod) {
    x = {at::cumsum(x.re, d), at::cumsum(x.im, d)};
  } else {
    x = cumprod_last({x.re.movedim(d, -1), x.im.movedim(d, -1)});
    x = {x.re.movedim(-1, d), x.im.movedim(-1, d)};
  }
  return assemble_into(x, self_in, out);
}

}  // namespace torchneuron
