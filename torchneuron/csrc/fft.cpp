// torch.fft on the runtime's FFT_C2C, FFT_R2C and FFT_C2R ops
// (neuronrt/ops/fft.h): ATen's three spectral primitives _fft_c2c,
// _fft_r2c and _fft_c2r and their out= forms, which every torch.fft
// function (and their gradients) reaches after the composite layer has
// resolved n=/s= (padding, trimming), dims and the norm mode. Complex
// tensors go to the runtime as their view_as_real planes (the pair dim
// last). A transform over several dims is a sequence of 1-D passes: the
// first reads the input, the others work in place on the output, and the
// last applies the normalisation for the whole signal. Output sizes and
// dtypes are the CPU's; outputs are contiguous.
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/native/SpectralOpsUtils.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "op_tracking.h"
#include "tensor_view.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {

// The (real, imaginary) planes of a complex tensor without conjugate or
// negative bits, as one real tensor with the pair dim last.
at::Tensor pairs(const at::Tensor& t) { return at::view_as_real(t.resolve_conj().resolve_neg()); }

double norm_scale(int64_t mode, int64_t signal_numel) {
  switch (static_cast<at::native::fft_norm_mode>(mode)) {
    case at::native::fft_norm_mode::none:
      return 1.0;
    case at::native::fft_norm_mode::by_root_n:
      return 1.0 / std::sqrt(static_cast<double>(signal_numel));
    case at::native::fft_norm_mode::by_n:
      return 1.0 / static_cast<double>(signal_numel);
  }
  TORCH_CHECK(false, "Unsupported normalization type: ", mode);
}

void launch_fft(nrt_op_code code, const at::Tensor& out, const at::Tensor& in, int64_t axis, int64_t flag,
                double scale) {
  nrt_op op{};
  op.code = code;
  op.num_outputs = 1;
  op.num_operands = 2;
  op.operands[0] = to_view(out, "fft");
  op.operands[1] = to_view(in, "fft");
  op.num_scalars = 3;
  op.scalars[0].i = axis;
  if (code == NRT_OP_FFT_C2C) {
    op.scalars[1].i = flag;
    op.scalars[2].is_float = 1;
    op.scalars[2].f = scale;
  } else {
    op.scalars[1].is_float = 1;
    op.scalars[1].f = scale;
    op.scalars[2].i = flag;
  }
  launch(in.device().index(), op);
}

std::vector<int64_t> wrap_dims(at::IntArrayRef dim, int64_t ndim) {
  std::vector<int64_t> dims(dim.begin(), dim.end());
  for (int64_t& d : dims) d = at::maybe_wrap_dim(d, ndim);
  return dims;
}

void check_complex(const at::Tensor& self) {
  TORCH_CHECK(self.is_complex(), "Only supports complex dtypes, but found: ", self.scalar_type());
  TORCH_CHECK(self.scalar_type() == at::kComplexFloat || self.scalar_type() == at::kComplexDouble,
              "neuron FFT doesn't support tensors of type: ", self.scalar_type());
}

// An output laid out as the CPU lays out its FFT results (_exec_fft): the
// batch dims first, ordered by ref's strides (largest first), then the
// transformed dims in the given order, contiguous in that order.
at::Tensor fft_empty(const at::Tensor& ref, at::IntArrayRef sizes, const std::vector<int64_t>& dims,
                     const at::TensorOptions& options) {
  const int64_t ndim = static_cast<int64_t>(sizes.size());
  std::vector<bool> transformed(ndim, false);
  for (int64_t d : dims) transformed[d] = true;
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < ndim; d++)
    if (!transformed[d]) perm.push_back(d);
  std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) { return ref.stride(a) > ref.stride(b); });
  perm.insert(perm.end(), dims.begin(), dims.end());
  std::vector<int64_t> permuted(ndim), inverse(ndim);
  for (int64_t k = 0; k < ndim; k++) permuted[k] = sizes[perm[k]], inverse[perm[k]] = k;
  return at::empty(permuted, options).permute(inverse);
}

// dims sorted by ref's strides, largest first (the last one kept last if asked)
std::vector<int64_t> sort_dims(const at::Tensor& ref, std::vector<int64_t> dims, bool exclude_last) {
  std::stable_sort(dims.begin(), dims.end() - (exclude_last ? 1 : 0),
                   [&](int64_t a, int64_t b) { return ref.stride(a) > ref.stride(b); });
  return dims;
}

// In-place forward/inverse passes over dims of out (a complex tensor whose
// planes are `planes`), the scale on the last one; `first`, if defined,
// is read by the first pass instead of out.
void c2c_passes(const at::Tensor& planes, const at::Tensor& first, const std::vector<int64_t>& dims, bool forward,
                double scale) {
  for (size_t k = 0; k < dims.size(); k++) {
    const at::Tensor& in = (k == 0 && first.defined()) ? first : planes;
    launch_fft(NRT_OP_FFT_C2C, planes, in, dims[k], forward, k + 1 == dims.size() ? scale : 1.0);
  }
}

at::Tensor fft_c2c(const at::Tensor& self, c10::SymIntArrayRef dim_sym, int64_t normalization, bool forward) {
  NEURON_TRACK_OP("aten::_fft_c2c");
  check_complex(self);
  const std::vector<int64_t> dims = sort_dims(self, wrap_dims(C10_AS_INTARRAYREF_SLOW(dim_sym), self.dim()), false);
  if (dims.empty()) return self.clone();
  c10::DeviceGuard guard(self.device());
  at::Tensor out = fft_empty(self, self.sizes(), dims, self.options());
  if (out.numel() == 0) return out;
  int64_t signal = 1;
  for (int64_t d : dims) signal *= self.size(d);
  c2c_passes(at::view_as_real(out), pairs(self), dims, forward, norm_scale(normalization, signal));
  return out;
}

at::Tensor fft_r2c(const at::Tensor& self, at::IntArrayRef dim, int64_t normalization, bool onesided) {
  NEURON_TRACK_OP("aten::_fft_r2c");
  TORCH_CHECK(self.is_floating_point(), "Only supports floating-point dtypes, but found: ", self.scalar_type());
  TORCH_CHECK(self.scalar_type() == at::kFloat || self.scalar_type() == at::kDouble,
              "neuron FFT doesn't support tensors of type: ", self.scalar_type());
  TORCH_CHECK(!dim.empty(), "_fft_r2c: expects at least one dim");
  const std::vector<int64_t> dims = sort_dims(self, wrap_dims(dim, self.dim()), true);
  c10::DeviceGuard guard(self.device());
  const int64_t last = dims.back(), n = self.size(last);
  std::vector<int64_t> out_sizes(self.sizes().begin(), self.sizes().end());
  if (onesided) out_sizes[last] = n / 2 + 1;
  at::Tensor out = fft_empty(self, out_sizes, dims, self.options().dtype(c10::toComplexType(self.scalar_type())));
  if (out.numel() == 0) return out;
  if (self.numel() == 0) return out.zero_();  // a zero-length signal: the empty sum
  int64_t signal = 1;
  for (int64_t d : dims) signal *= self.size(d);
  const double scale = norm_scale(normalization, signal);
  const at::Tensor planes = at::view_as_real(out);
  // A multi-dim one-sided transform is one-sided in the last dim only: the
  // real pass halves it, and the complex passes run over the other dims.
  launch_fft(NRT_OP_FFT_R2C, planes, self, last, onesided, dims.size() == 1 ? scale : 1.0);
  c2c_passes(planes, at::Tensor(), std::vector<int64_t>(dims.begin(), dims.end() - 1), true, scale);
  return out;
}

at::Tensor fft_c2r(const at::Tensor& self, at::IntArrayRef dim, int64_t normalization, c10::SymInt last_dim_sym) {
  NEURON_TRACK_OP("aten::_fft_c2r");
  check_complex(self);
  const int64_t last_dim_size = last_dim_sym.expect_int();
  TORCH_CHECK(last_dim_size >= 1, "Invalid number of data points (", last_dim_size, ") specified");
  const std::vector<int64_t> dims = wrap_dims(dim, self.dim());
  TORCH_CHECK(!dims.empty(), "_fft_c2r: expects at least one dim");
  c10::DeviceGuard guard(self.device());
  const int64_t last = dims.back();
  TORCH_CHECK(self.size(last) >= last_dim_size / 2 + 1, "_fft_c2r: expected at least ", last_dim_size / 2 + 1,
              " values along dim ", last, " for ", last_dim_size, " output points, got ", self.size(last));
  std::vector<int64_t> out_sizes(self.sizes().begin(), self.sizes().end());
  out_sizes[last] = last_dim_size;
  int64_t signal = last_dim_size;
  for (size_t k = 0; k + 1 < dims.size(); k++) signal *= self.size(dims[k]);
  const double scale = norm_scale(normalization, signal);
  if (c10::multiply_integers(out_sizes) == 0)
    return at::empty(out_sizes, self.options().dtype(c10::toRealValueType(self.scalar_type())));
  at::Tensor complex_in = self;
  if (dims.size() > 1) {  // the complex passes first, into a temporary
    const std::vector<int64_t> c2c_dims = sort_dims(self, std::vector<int64_t>(dims.begin(), dims.end() - 1), false);
    complex_in = fft_empty(self, self.sizes(), c2c_dims, self.options());
    c2c_passes(at::view_as_real(complex_in), pairs(self), c2c_dims, false, 1.0);
  }
  at::Tensor out = fft_empty(complex_in, out_sizes, {last},
                             self.options().dtype(c10::toRealValueType(self.scalar_type())));
  launch_fft(NRT_OP_FFT_C2R, out, dims.size() > 1 ? at::view_as_real(complex_in) : pairs(self), last, 0, scale);
  return out;
}

at::Tensor& fft_c2c_out(const at::Tensor& self, c10::SymIntArrayRef dim, int64_t normalization, bool forward,
                        at::Tensor& out) {
  const at::Tensor result = fft_c2c(self, dim, normalization, forward);
  at::native::resize_output(out, result.sizes());
  return out.copy_(result);
}

at::Tensor& fft_r2c_out(const at::Tensor& self, at::IntArrayRef dim, int64_t normalization, bool onesided,
                        at::Tensor& out) {
  const at::Tensor result = fft_r2c(self, dim, normalization, onesided);
  at::native::resize_output(out, result.sizes());
  return out.copy_(result);
}

at::Tensor& fft_c2r_out(const at::Tensor& self, at::IntArrayRef dim, int64_t normalization, c10::SymInt last_dim_size,
                        at::Tensor& out) {
  const at::Tensor result = fft_c2r(self, dim, normalization, std::move(last_dim_size));
  at::native::resize_output(out, result.sizes());
  return out.copy_(result);
}

}  // namespace

NEURON_LIBRARY_IMPL(aten, m) {
  m.impl("_fft_c2c", fft_c2c);
  m.impl("_fft_c2c.out", fft_c2c_out);
  m.impl("_fft_r2c", fft_r2c);
  m.impl("_fft_r2c.out", fft_r2c_out);
  m.impl("_fft_c2r", fft_c2r);
  m.impl("_fft_c2r.out", fft_c2r_out);
}

}  // namespace torchneuron
