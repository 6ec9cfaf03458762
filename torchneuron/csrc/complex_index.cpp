// Indexing and data-movement ops of complex tensors on the real view.
//
// A complex tensor of shape S is a real tensor of shape S + [2]
// (view_as_real): the indexed dims keep their numbers and sizes, and the
// (re, im) pair is one more dim at the end that no op touches. So
// index_select, index, take, gather, scatter, index_copy, index_put, put,
// flip, tril/triu are the real kernels on that view (an index tensor that
// must have self's rank gets a trailing dim of 2, expanded at stride 0),
// and the sums (scatter_add, scatter_reduce sum/mean, index_add, put and
// index_put with accumulate) are componentwise, so they are the real sums
// of each part. Fills with a complex value fill each part's plane with that
// part. Every step is a native neuron op; the results of movement are the
// CPU's bit for bit.
//
// The pair as a dim costs the runtime's index kernels per element, so two
// other layouts take over where they are faster: a complex64 element (8
// bytes) moves as an int64 of the same shape and strides (as_bits), and
// complex128 index_select/gather and every scatter_add run plane by plane,
// two real launches with the op's own index (by_planes).
//
// Each try_* returns nothing, leaving the call to the registration's usual
// path (the counted CPU fallback for a complex tensor, which computes or
// raises the CPU's own error), for anything off the plain path: an argument
// on another device, mismatched dtypes, a product or amax/amin reduction
// (not defined for complex on the CPU), an output with a conjugate or
// negative bit.
#include "complex_index.h"

#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>

#include "complex_ops.h"
#include "index_launch.h"
#include "op_tracking.h"
#include "shape_common.h"  // is_neuron

namespace torchneuron {
namespace {

using Opt = std::optional<at::Tensor>;

bool indexable_neuron_complex(const at::Tensor& t) {
  return t.defined() && t.is_complex() && t.scalar_type() != at::kComplexHalf &&
         t.device().type() == c10::DeviceType::PrivateUse1;
}

bool on(const at::Tensor& t, const at::Tensor& self) { return t.defined() && t.device() == self.device(); }
// A complex64 element is 8 bytes: ops that only move elements move it as
// an int64 of the same shape and strides (one element, not a pair of
// floats, per index: several times faster than the real view).
bool as_bits(const at::Tensor& t) { return t.scalar_type() == at::kComplexFloat; }
at::Tensor bits_in(const at::Tensor& t) { return t.resolve_conj().resolve_neg().view(at::kLong); }
at::Tensor from_bits(const at::Tensor& t) { return t.view(at::kComplexFloat); }

// complex128 (no integer that wide) into a new tensor of `sizes` plane by
// plane: f(out plane, self plane) for the real and the imaginary part. The
// planes keep self's shape, so f takes the op's own dims and index; two
// launches cost the runtime's index kernels less than a pair dim does.
template <class F>
at::Tensor by_planes(at::IntArrayRef sizes, const at::Tensor& self, F f) {
  at::Tensor out = at::empty(sizes, self.options());
  const at::Tensor src = at::view_as_real(self.resolve_conj().resolve_neg());
  const at::Tensor dst = at::view_as_real(out);
  for (int64_t part = 0; part < 2; part++) {
    at::Tensor o = dst.select(-1, part);
    f(o, src.select(-1, part));
  }
  return out;
}

// gather's and scatter's index dtypes
bool long_or_int(const at::Tensor& index) {
  return index.scalar_type() == at::kLong || index.scalar_type() == at::kInt;
}

// An output (or in-place self) the real view can write.
bool writable(const at::Tensor& out, const at::Tensor& self) {
  return on(out, self) && out.scalar_type() == self.scalar_type() && !out.is_conj() && !out.is_neg();
}

// The real view of an input, conjugate and negative bits materialised; 0-d
// tensors become 1-d (one element), so that dim 0 is never the pair.
at::Tensor real_in(const at::Tensor& t) {
  at::Tensor r = at::view_as_real(t.resolve_conj().resolve_neg());
  return t.dim() == 0 ? r.unsqueeze(0) : r;
}
// The same for an output: no materialisation, the view writes through.
at::Tensor real_out(const at::Tensor& t) {
  at::Tensor r = at::view_as_real(t);
  return t.dim() == 0 ? r.unsqueeze(0) : r;
}
// A 0-d index as one element, matching real_in/real_out's 0-d rule.
at::Tensor at_least_1d(const at::Tensor& index) { return index.dim() == 0 ? index.reshape({1}) : index; }
// An index tensor of self's rank (gather, scatter) with the trailing pair dim.
at::Tensor pair_index(const at::Tensor& index) {
  at::Tensor i = at_least_1d(index);
  std::vector<int64_t> sizes = i.sizes().vec();
  sizes.push_back(2);
  return i.unsqueeze(-1).expand(sizes);
}
// A complex tensor of `sizes` from a real result whose last dim is the pair.
at::Tensor to_complex(const at::Tensor& real, at::IntArrayRef sizes) {
  return at::view_as_complex(real.contiguous()).view(sizes);
}
// Writes result into an out= tensor, resized as PyTorch does.
at::Tensor& store(at::Tensor& out, const at::Tensor& result) {
  at::native::resize_output(out, result.sizes());
  out.copy_(result);
  return out;
}
int64_t wrap(int64_t dim, const at::Tensor& self) { return at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1)); }
// f(plane, part) on the real and imaginary planes of a real view, with the
// matching part of a complex value: fills with a complex value fill each
// part's plane with that part.
template <class F>
void per_part(const at::Tensor& real_view, c10::complex<double> value, F f) {
  f(real_view.select(-1, 0), value.real());
  f(real_view.select(-1, 1), value.imag());
}

}  // namespace

// ---- gathers: a new tensor from self's elements -----------------------------

Opt try_complex_index_select(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  if (!indexable_neuron_complex(self) || !on(index, self) || index.dim() > 1) return std::nullopt;
  if (self.dim() == 0 && index.numel() != 1) return std::nullopt;
  NEURON_TRACK_OP("aten::index_select(complex)");
  c10::DeviceGuard guard(self.device());
  if (as_bits(self)) return from_bits(at::index_select(bits_in(self), dim, index));
  std::vector<int64_t> sizes = self.sizes().vec();
  if (self.dim() > 0) sizes[wrap(dim, self)] = index.numel();
  return by_planes(sizes, self, [&](at::Tensor& o, const at::Tensor& s) { at::index_select_out(o, s, dim, index); });
}

Opt try_complex_index_select_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, at::Tensor& out) {
  if (!indexable_neuron_complex(self) || !writable(out, self)) return std::nullopt;
  Opt r = try_complex_index_select(self, dim, index);
  if (r) store(out, *r);
  return r;
}

Opt try_complex_gather(const at::Tensor& self, int64_t dim, const at::Tensor& index, bool sparse_grad) {
  if (!indexable_neuron_complex(self) || !on(index, self) || !long_or_int(index) ||
      std::max<int64_t>(index.dim(), 1) != std::max<int64_t>(self.dim(), 1))
    return std::nullopt;
  NEURON_TRACK_OP("aten::gather(complex)");
  c10::DeviceGuard guard(self.device());
  if (as_bits(self)) return from_bits(at::gather(bits_in(self), dim, index, sparse_grad));
  return by_planes(index.sizes(), self,
                   [&](at::Tensor& o, const at::Tensor& s) { at::gather_out(o, s, dim, index, sparse_grad); });
}

Opt try_complex_gather_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, bool sparse_grad,
                           at::Tensor& out) {
  if (!indexable_neuron_complex(self) || !writable(out, self)) return std::nullopt;
  Opt r = try_complex_gather(self, dim, index, sparse_grad);
  if (r) store(out, *r);
  return r;
}

Opt try_complex_take(const at::Tensor& self, const at::Tensor& index) {
  if (!indexable_neuron_complex(self) || !on(index, self) || index.scalar_type() != at::kLong) return std::nullopt;
  if (self.numel() == 0 && index.numel() > 0) return std::nullopt;  // the CPU's error
  NEURON_TRACK_OP("aten::take(complex)");
  c10::DeviceGuard guard(self.device());
  if (as_bits(self)) return from_bits(at::take(bits_in(self), index));
  // element i of the flat complex tensor is elements 2i, 2i+1 of the flat
  // real one; a negative i counts from the end, and so do 2i and 2i+1
  const at::Tensor parts = at::arange(2, index.options());
  const at::Tensor pairs = index.unsqueeze(-1).mul(2).add(parts);
  at::Tensor r = at::take(at::view_as_real(self.resolve_conj().resolve_neg()), pairs);
  return to_complex(r, index.sizes());
}

Opt try_complex_take_out(const at::Tensor& self, const at::Tensor& index, at::Tensor& out) {
  if (!indexable_neuron_complex(self) || !writable(out, self)) return std::nullopt;
  Opt r = try_complex_take(self, index);
  if (r) store(out, *r);
  return r;
}

Opt try_complex_index(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices) {
  if (!indexable_neuron_complex(self) || indices.size() > static_cast<size_t>(self.dim())) return std::nullopt;
  for (const std::optional<at::Tensor>& i : indices)
    if (i.has_value() && i->defined() && i->device() != self.device() && !i->device().is_cpu()) return std::nullopt;
  NEURON_TRACK_OP("aten::index.Tensor(complex)");
  c10::DeviceGuard guard(self.device());
  if (as_bits(self)) return from_bits(at::index(bits_in(self), indices));
  // the pair dim is last and never indexed: it stays last in the result
  at::Tensor r = at::index(at::view_as_real(self.resolve_conj().resolve_neg()), indices);
  return at::view_as_complex(r.contiguous());
}

Opt try_complex_index_out(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                          at::Tensor& out) {
  if (!indexable_neuron_complex(self) || !writable(out, self)) return std::nullopt;
  Opt r = try_complex_index(self, indices);
  if (r) store(out, *r);
  return r;
}

Opt try_complex_flip(const at::Tensor& self, at::IntArrayRef dims) {
  if (!indexable_neuron_complex(self)) return std::nullopt;
  NEURON_TRACK_OP("aten::flip(complex)");
  c10::DeviceGuard guard(self.device());
  at::dim_list_to_bitset(dims, self.dim());  // the CPU's checks: range, repeats
  if (self.dim() == 0) return self.resolve_conj().resolve_neg().clone();
  if (as_bits(self)) return from_bits(at::flip(bits_in(self), dims));
  std::vector<int64_t> wrapped;
  for (int64_t d : dims) wrapped.push_back(at::maybe_wrap_dim(d, self.dim()));
  return to_complex(at::flip(real_in(self), wrapped), self.sizes());
}

// tril/triu: the pair dim moved to the front, the matrix dims stay last.
Opt try_complex_triangle(bool upper, const at::Tensor& self, int64_t diagonal) {
  if (!indexable_neuron_complex(self) || self.dim() < 2) return std::nullopt;
  NEURON_TRACK_OP(upper ? "aten::triu(complex)" : "aten::tril(complex)");
  c10::DeviceGuard guard(self.device());
  if (as_bits(self)) {
    const at::Tensor bits = bits_in(self);
    return from_bits(upper ? at::triu(bits, diagonal) : at::tril(bits, diagonal));
  }
  at::Tensor out = at::empty(self.sizes(), self.options());
  at::Tensor dst = at::view_as_real(out).movedim(-1, 0);
  const at::Tensor src = real_in(self).movedim(-1, 0);
  if (upper)
    at::triu_out(dst, src, diagonal);
  else
    at::tril_out(dst, src, diagonal);
  return out;
}

Opt try_complex_triangle_out(bool upper, const at::Tensor& self, int64_t diagonal, at::Tensor& out) {
  if (!indexable_neuron_complex(self) || self.dim() < 2 || !writable(out, self)) return std::nullopt;
  Opt r = try_complex_triangle(upper, self, diagonal);
  if (r) store(out, *r);
  return r;
}

Opt try_complex_triangle_(bool upper, at::Tensor& self, int64_t diagonal) {
  if (!indexable_neuron_complex(self) || self.dim() < 2 || !writable(self, self)) return std::nullopt;
  NEURON_TRACK_OP(upper ? "aten::triu_(complex)" : "aten::tril_(complex)");
  c10::DeviceGuard guard(self.device());
  at::Tensor view = as_bits(self) ? self.view(at::kLong) : at::view_as_real(self).movedim(-1, 0);
  if (upper)
    view.triu_(diagonal);
  else
    view.tril_(diagonal);
  return self;
}

// ---- scatters: out = self, then elements of out written ----------------------

namespace {

// out = self (unless the same) and the real view to write: nothing when out
// cannot take the result.
std::optional<at::Tensor> start_scatter(const at::Tensor& self, at::Tensor& out) {
  if (!writable(out, self)) return std::nullopt;
  if (!out.is_same(self)) {
    at::native::resize_output(out, self.sizes());
    out.copy_(self);
  }
  return real_out(out);
}

bool scatter_args(const at::Tensor& self, const at::Tensor& index, const at::Tensor* src) {
  if (!indexable_neuron_complex(self) || !on(index, self) || !long_or_int(index)) return false;
  if (std::max<int64_t>(index.dim(), 1) != std::max<int64_t>(self.dim(), 1)) return false;
  if (src && (!on(*src, self) || src->scalar_type() != self.scalar_type() ||
              std::max<int64_t>(src->dim(), 1) != std::max<int64_t>(self.dim(), 1)))
    return false;
  return true;
}

}  // namespace

Opt try_complex_scatter_src_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                                at::Tensor& out) {
  if (!scatter_args(self, index, &src)) return std::nullopt;
  c10::DeviceGuard guard(self.device());
  std::optional<at::Tensor> view = start_scatter(self, out);
  if (!view) return std::nullopt;
  NEURON_TRACK_OP("aten::scatter.src_out(complex)");
  if (index.numel() == 0) return out;
  if (as_bits(self))
    out.view(at::kLong).scatter_(dim, index, bits_in(src));
  else
    view->scatter_(wrap(dim, self), pair_index(index), real_in(src));
  return out;
}

Opt try_complex_scatter_value_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                                  const at::Scalar& value, at::Tensor& out) {
  if (!scatter_args(self, index, nullptr)) return std::nullopt;
  c10::DeviceGuard guard(self.device());
  std::optional<at::Tensor> view = start_scatter(self, out);
  if (!view) return std::nullopt;
  NEURON_TRACK_OP("aten::scatter.value_out(complex)");
  if (index.numel() > 0) {
    const int64_t d = wrap(dim, self);
    const at::Tensor i = at_least_1d(index);
    per_part(*view, value.toComplexDouble(), [&](at::Tensor plane, double part) { plane.scatter_(d, i, part); });
  }
  return out;
}

Opt try_complex_scatter_reduce_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                                   const at::Tensor& src, c10::string_view reduce, at::Tensor& out) {
  if (reduce != "add" || !scatter_args(self, index, &src)) return std::nullopt;
  c10::DeviceGuard guard(self.device());
  std::optional<at::Tensor> view = start_scatter(self, out);
  if (!view) return std::nullopt;
  NEURON_TRACK_OP("aten::scatter.reduce_out(complex)");
  if (index.numel() > 0) view->scatter_(wrap(dim, self), pair_index(index), real_in(src), reduce);
  return out;
}

Opt try_complex_scatter_value_reduce_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                                         const at::Scalar& value, c10::string_view reduce, at::Tensor& out) {
  if (reduce != "add" || !scatter_args(self, index, nullptr)) return std::nullopt;
  c10::DeviceGuard guard(self.device());
  std::optional<at::Tensor> view = start_scatter(self, out);
  if (!view) return std::nullopt;
  NEURON_TRACK_OP("aten::scatter.value_reduce_out(complex)");
  if (index.numel() > 0) {
    const int64_t d = wrap(dim, self);
    const at::Tensor i = at_least_1d(index);
    per_part(*view, value.toComplexDouble(),
             [&](at::Tensor plane, double part) { plane.scatter_(d, i, part, reduce); });
  }
  return out;
}

Opt try_complex_scatter_add_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                                at::Tensor& out) {
  if (!scatter_args(self, index, &src)) return std::nullopt;
  c10::DeviceGuard guard(self.device());
  std::optional<at::Tensor> view = start_scatter(self, out);
  if (!view) return std::nullopt;
  NEURON_TRACK_OP("aten::scatter_add.out(complex)");
  if (index.numel() == 0) return out;
  // plane by plane: two real scatters with the index as it is (the pair
  // dim in the index costs the kernel more than a second launch)
  const int64_t d = wrap(dim, self);
  const at::Tensor i = at_least_1d(index), parts = real_in(src);
  for (int64_t part = 0; part < 2; part++) view->select(-1, part).scatter_add_(d, i, parts.select(-1, part));
  return out;
}

Opt try_complex_scatter_reduce_two_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                                       const at::Tensor& src, c10::string_view reduce, bool include_self,
                                       at::Tensor& out) {
  if ((reduce != "sum" && reduce != "mean") || !scatter_args(self, index, &src)) return std::nullopt;
  c10::DeviceGuard guard(self.device());
  std::optional<at::Tensor> view = start_scatter(self, out);
  if (!view) return std::nullopt;
  NEURON_TRACK_OP("aten::scatter_reduce.two_out(complex)");
  if (index.numel() > 0) view->scatter_reduce_(wrap(dim, self), pair_index(index), real_in(src), reduce, include_self);
  return out;
}

namespace {
bool slice_args(const at::Tensor& self, const at::Tensor& index, const at::Tensor& source) {
  return indexable_neuron_complex(self) && on(index, self) && index.dim() <= 1 && on(source, self) &&
         source.scalar_type() == self.scalar_type() &&
         std::max<int64_t>(source.dim(), 1) == std::max<int64_t>(self.dim(), 1);
}
}  // namespace

Opt try_complex_index_add_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                              const at::Scalar& alpha, at::Tensor& out) {
  if (!slice_args(self, index, source)) return std::nullopt;
  c10::DeviceGuard guard(self.device());
  std::optional<at::Tensor> view = start_scatter(self, out);
  if (!view) return std::nullopt;
  NEURON_TRACK_OP("aten::index_add.out(complex)");
  if (index.numel() == 0 || source.numel() == 0) return out;
  // alpha != 1 multiplies the source first, as a complex product (the
  // CPU's: an infinite part makes its partner NaN), natively
  const bool one = alpha.toComplexDouble() == c10::complex<double>(1, 0);
  view->index_add_(wrap(dim, self), index, real_in(one ? source : at::mul(source, alpha)));
  return out;
}

Opt try_complex_index_copy_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                               at::Tensor& out) {
  if (!slice_args(self, index, source)) return std::nullopt;
  c10::DeviceGuard guard(self.device());
  std::optional<at::Tensor> view = start_scatter(self, out);
  if (!view) return std::nullopt;
  NEURON_TRACK_OP("aten::index_copy.out(complex)");
  if (index.numel() == 0) return out;
  if (as_bits(self))
    out.view(at::kLong).index_copy_(dim, index, bits_in(source));
  else
    view->index_copy_(wrap(dim, self), index, real_in(source));
  return out;
}

// index_fill_ takes a host index as the real path does (index.cpp): it is
// copied to the device once for both planes.
namespace {
bool fill_index_ok(const at::Tensor& index, const at::Tensor& self) {
  return (on(index, self) || (index.defined() && index.device().is_cpu())) && index.dim() <= 1 &&
         index.scalar_type() == at::kLong;
}
at::Tensor on_device(const at::Tensor& index, const at::Tensor& self) {
  return index.device().is_cpu() ? index.to(self.device()) : index;
}
}  // namespace

// (complex32 too: each part converts to float16 as the CPU's fill converts it)
Opt try_complex_index_fill_scalar_(at::Tensor& self, int64_t dim, const at::Tensor& host_or_device_index,
                                   const at::Scalar& value) {
  const bool chalf = self.scalar_type() == at::kComplexHalf && is_neuron(self);
  if (!(indexable_neuron_complex(self) || chalf) || !writable(self, self) || !fill_index_ok(host_or_device_index, self))
    return std::nullopt;
  NEURON_TRACK_OP("aten::index_fill_.int_Scalar(complex)");
  c10::DeviceGuard guard(self.device());
  const at::Tensor index = on_device(host_or_device_index, self);
  const int64_t d = wrap(dim, self);
  per_part(real_out(self), value.toComplexDouble(),
           [&](at::Tensor plane, double part) { plane.index_fill_(d, index, part); });
  return self;
}

Opt try_complex_index_fill_tensor_(at::Tensor& self, int64_t dim, const at::Tensor& host_or_device_index,
                                   const at::Tensor& value) {
  if (value.defined() && value.dim() == 0 && value.device().is_cpu() && self.scalar_type() == at::kComplexHalf)
    return try_complex_index_fill_scalar_(self, dim, host_or_device_index, value.item());
  if (!indexable_neuron_complex(self) || !writable(self, self) || !fill_index_ok(host_or_device_index, self) ||
      !value.defined() || value.dim() != 0)
    return std::nullopt;
  if (value.device().is_cpu()) return try_complex_index_fill_scalar_(self, dim, host_or_device_index, value.item());
  if (value.device() != self.device()) return std::nullopt;
  NEURON_TRACK_OP("aten::index_fill_.int_Tensor(complex)");
  c10::DeviceGuard guard(self.device());
  const at::Tensor index = on_device(host_or_device_index, self);
  const at::Tensor parts = at::view_as_real(value.to(self.scalar_type()).resolve_conj().resolve_neg());
  const int64_t d = wrap(dim, self);
  at::Tensor view = real_out(self);
  view.select(-1, 0).index_fill_(d, index, parts.select(0, 0));
  view.select(-1, 1).index_fill_(d, index, parts.select(0, 1));
  return self;
}

Opt try_complex_put_(at::Tensor& self, const at::Tensor& index, const at::Tensor& source, bool accumulate) {
  if (!indexable_neuron_complex(self) || !writable(self, self) || !on(index, self) || !on(source, self) ||
      index.scalar_type() != at::kLong || source.scalar_type() != self.scalar_type() ||
      source.numel() != index.numel())
    return std::nullopt;
  if (self.numel() == 0 && index.numel() > 0) return std::nullopt;  // the CPU's error
  NEURON_TRACK_OP("aten::put_(complex)");
  c10::DeviceGuard guard(self.device());
  if (index.numel() == 0) return self;
  at::Tensor dense = self.is_contiguous() ? self : self.contiguous();
  const at::Tensor pairs = index.reshape({-1, 1}).mul(2).add(at::arange(2, index.options()));
  at::view_as_real(dense).put_(pairs, real_in(source).reshape({-1, 2}), accumulate);
  if (!dense.is_same(self)) self.copy_(dense);
  return self;
}

Opt try_complex_index_put_(at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                           const at::Tensor& values, bool accumulate, bool unsafe) {
  if (!indexable_neuron_complex(self) || !writable(self, self) || !values.defined() ||
      values.scalar_type() != self.scalar_type() || indices.size() > static_cast<size_t>(self.dim()))
    return std::nullopt;
  const bool host_scalar = values.device().is_cpu() && values.dim() == 0;
  if (!host_scalar && values.device() != self.device()) return std::nullopt;
  for (const std::optional<at::Tensor>& i : indices)
    if (i.has_value() && i->defined() && i->device() != self.device() && !i->device().is_cpu()) return std::nullopt;
  NEURON_TRACK_OP("aten::_index_put_impl_(complex)");
  c10::DeviceGuard guard(self.device());
  const at::Tensor v = host_scalar ? values.to(self.device()) : values;
  if (!accumulate && v.dim() == 0 && !v.is_conj() && !v.is_neg()) {
    // x[mask] = number: a masked fill at any mask rank, as for real dtypes
    // (the planes' view would need a (re, im) value and one index per dim)
    const at::Tensor mask = masked_fill_mask(self, indices, v);
    if (mask.defined()) {
      self.masked_fill_(mask, v);
      return self;
    }
  }
  if (as_bits(self) && !accumulate) {
    at::Tensor bits = self.view(at::kLong);
    at::_index_put_impl_(bits, indices, bits_in(v), false, unsafe);
    return self;
  }
  at::Tensor view = at::view_as_real(self);
  at::_index_put_impl_(view, indices, at::view_as_real(v.resolve_conj().resolve_neg()), accumulate, unsafe);
  return self;
}

}  // namespace torchneuron
