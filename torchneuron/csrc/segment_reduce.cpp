// torch.segment_reduce (sum, mean, prod, max/amax, min/amin over segments
// given by lengths or offsets along an axis, with an optional initial value)
// and its backward, composed of native kernels: each position's segment
// comes from searchsorted over the offsets, and scatter_reduce / gather
// along the axis do the rest. Positions past the last offset (unsafe=True
// with short lengths) fall into one extra segment that is dropped.
//
// The CPU validates lengths and offsets on the host (negative lengths,
// sums that do not cover the axis): so do we, with one read-back of those
// small tensors, so that the errors raise at the call with the CPU's
// messages.
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <limits>
#include <string>
#include <vector>

#include "op_tracking.h"

namespace torchneuron {
namespace {

enum class Reduce { Sum, Mean, Prod, Max, Min };

Reduce parse_reduce(c10::string_view name) {
  if (name == "sum") return Reduce::Sum;
  if (name == "mean") return Reduce::Mean;
  if (name == "prod") return Reduce::Prod;
  if (name == "max" || name == "amax") return Reduce::Max;
  if (name == "min" || name == "amin") return Reduce::Min;
  TORCH_CHECK(false, "reduce argument must be either sum, prod, mean, amax or amin, got ", name);
}

const char* scatter_name(Reduce r) {
  switch (r) {
    case Reduce::Sum:
    case Reduce::Mean: return "sum";
    case Reduce::Prod: return "prod";
    case Reduce::Max: return "amax";
    case Reduce::Min: return "amin";
  }
  return "sum";
}

// The value of a segment with no elements and no initial value.
double empty_value(Reduce r) {
  switch (r) {
    case Reduce::Sum: return 0.0;
    case Reduce::Prod: return 1.0;
    case Reduce::Mean: return std::numeric_limits<double>::quiet_NaN();
    case Reduce::Max: return -std::numeric_limits<double>::infinity();
    case Reduce::Min: return std::numeric_limits<double>::infinity();
  }
  return 0.0;
}

// Segments of the data along `axis`: for each position its segment
// (expanded to data's shape; `segments` for positions past the last
// offset), and each segment's length.
struct Segments {
  int64_t axis = 0, count = 0;
  at::Tensor index;    // int64, data's shape
  at::Tensor lengths;  // int64 [lead..., count]
};

Segments segments_of(const at::Tensor& data, const std::optional<at::Tensor>& lengths_opt,
                     const std::optional<at::Tensor>& offsets_opt, int64_t axis_arg, bool unsafe, bool check) {
  const bool has_lengths = lengths_opt.has_value() && lengths_opt->defined();
  const bool has_offsets = offsets_opt.has_value() && offsets_opt->defined();
  TORCH_CHECK(has_lengths || has_offsets, "segment_reduce(): Either lengths or offsets must be defined.");
  const int64_t axis = at::maybe_wrap_dim(axis_arg, data.dim());
  const at::Tensor& given = has_lengths ? *lengths_opt : *offsets_opt;
  TORCH_CHECK(given.device() == data.device(), "segment_reduce(): expected ", has_lengths ? "lengths" : "offsets",
              " on ", data.device(), ", got ", given.device());
  TORCH_CHECK_NOT_IMPLEMENTED(given.scalar_type() == at::kLong || given.scalar_type() == at::kInt, "\"",
                              has_lengths ? "_segment_reduce_lengths" : "_segment_reduce_offsets",
                              "\" not implemented for '", at::toString(given.scalar_type()), "'");
  TORCH_CHECK(axis == given.dim() - 1, "segment_reduce(): Expected axis to be the last dimension of ",
              has_lengths ? "lengths" : "offsets", " but got ", axis, ".");
  for (int64_t d = 0; d < axis; d++)
    TORCH_CHECK(given.size(d) == data.size(d), "segment_reduce(): Expected ", has_lengths ? "lengths" : "offsets",
                " to match data in dimension ", d, ", got ", given.size(d), " and ", data.size(d));
  at::Tensor offsets;
  if (has_lengths) {
    const at::Tensor l = given.to(at::kLong);
    std::vector<int64_t> first(l.sizes().begin(), l.sizes().end());
    first.back() = 1;
    offsets = at::cat({at::zeros(first, l.options()), l.cumsum(-1)}, -1);
  } else {
    TORCH_CHECK(given.size(-1) >= 1, "segment_reduce(): offsets must have at least one element along axis");
    offsets = given.to(at::kLong);
  }
  Segments s;
  s.axis = axis;
  s.count = offsets.size(-1) - 1;
  s.lengths = offsets.narrow(-1, 1, s.count) - offsets.narrow(-1, 0, s.count);
  if (check && has_lengths) {
    // One read-back of the lengths' minimum and row sums, checked as the CPU checks them.
    const at::Tensor least = given.numel() > 0 ? given.to(at::kLong).amin().reshape({1}).clamp_max(0)
                                               : at::zeros({1}, offsets.options());
    const at::Tensor facts = at::cat({least, offsets.narrow(-1, s.count, 1).reshape({-1})}).cpu();
    const int64_t* f = facts.const_data_ptr<int64_t>();
    TORCH_CHECK(f[0] >= 0, "lengths contains negative value!");
    if (!unsafe)
      for (int64_t k = 1; k < facts.numel(); k++)
        TORCH_CHECK(f[k] == data.size(axis),
                    "segment_reduce(): Expected all rows of lengths along axis to sum to data.size(lengths.dim()-1) "
                    "when !unsafe.");
  }
  // Each position's segment: the number of segment ends at or before it.
  std::vector<int64_t> pos_shape(offsets.sizes().begin(), offsets.sizes().end());
  pos_shape.back() = data.size(axis);
  const at::Tensor positions = at::arange(data.size(axis), offsets.options()).expand(pos_shape).contiguous();
  const at::Tensor ends = offsets.narrow(-1, 1, s.count).contiguous();
  at::Tensor seg = at::searchsorted(ends, positions, /*out_int32=*/false, /*right=*/true);
  std::vector<int64_t> view_shape(data.dim(), 1);
  for (int64_t d = 0; d <= axis; d++) view_shape[d] = seg.size(d);
  s.index = seg.view(view_shape).expand(data.sizes());
  return s;
}

// A tensor of data's shape but `rows` along the axis, filled with v.
at::Tensor filled(const at::Tensor& data, int64_t axis, int64_t rows, double v) {
  std::vector<int64_t> shape(data.sizes().begin(), data.sizes().end());
  shape[axis] = rows;
  return at::full(shape, v, data.options());
}

// lengths [lead..., count] seen against a tensor of data's rank with count
// rows along the axis.
at::Tensor per_segment(const at::Tensor& lengths, const at::Tensor& data, int64_t axis) {
  std::vector<int64_t> shape(data.dim(), 1);
  for (int64_t d = 0; d <= axis; d++) shape[d] = lengths.size(d);
  return lengths.view(shape);
}

at::Tensor segment_reduce(const at::Tensor& data, c10::string_view reduce_name,
                          const std::optional<at::Tensor>& lengths, const std::optional<at::Tensor>& indices,
                          const std::optional<at::Tensor>& offsets, int64_t axis, bool unsafe,
                          const std::optional<at::Scalar>& initial) {
  NEURON_TRACK_OP("aten::segment_reduce");
  const Reduce r = parse_reduce(reduce_name);
  TORCH_CHECK(!(indices.has_value() && indices->defined()),
              "segment_reduce(): indices based reduction is not supported yet.");
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(data.scalar_type()), "\"_segment_reduce\" not implemented for '",
                              at::toString(data.scalar_type()), "'");
  c10::DeviceGuard guard(data.device());
  const Segments s = segments_of(data, lengths, offsets, axis, unsafe, /*check=*/true);
  const bool has_initial = initial.has_value();
  const double init = has_initial ? initial->toDouble() : 0.0;
  // Every segment starts from the initial value (or, for mean, from 0 when
  // there is none); empty segments without one get the empty value.
  const double start = has_initial ? init : (r == Reduce::Mean ? 0.0 : empty_value(r));
  at::Tensor out = filled(data, s.axis, s.count + 1, start);
  out = out.scatter_reduce(s.axis, s.index, data, scatter_name(r), /*include_self=*/true).narrow(s.axis, 0, s.count);
  const at::Tensor len = per_segment(s.lengths, data, s.axis);
  if (r == Reduce::Mean) {
    const at::Tensor empty = at::full({}, has_initial ? init : empty_value(r), data.options());
    out = at::where(len.gt(0), out / len.clamp_min(1).to(data.scalar_type()), empty);
  }
  return out.contiguous();
}

at::Tensor segment_reduce_backward(const at::Tensor& grad, const at::Tensor& output, const at::Tensor& data,
                                   c10::string_view reduce_name, const std::optional<at::Tensor>& lengths,
                                   const std::optional<at::Tensor>& offsets, int64_t axis,
                                   const std::optional<at::Scalar>& initial) {
  NEURON_TRACK_OP("aten::_segment_reduce_backward");
  const Reduce r = parse_reduce(reduce_name);
  c10::DeviceGuard guard(data.device());
  const Segments s = segments_of(data, lengths, offsets, axis, /*unsafe=*/true, /*check=*/false);
  // Per-segment values gathered back to the positions; the extra segment
  // (positions past the last offset) reads zeros.
  auto at_positions = [&](const at::Tensor& per_seg) {
    const at::Tensor padded = at::cat({per_seg, at::zeros_like(per_seg.narrow(s.axis, 0, 1))}, s.axis);
    return padded.gather(s.axis, s.index);
  };
  const at::Tensor g = at_positions(grad);
  switch (r) {
    case Reduce::Sum: return g;
    case Reduce::Mean: {
      const at::Tensor len = per_segment(s.lengths, data, s.axis).clamp_min(1).to(data.scalar_type());
      return at_positions(grad / len);
    }
    case Reduce::Max:
    case Reduce::Min: {
      // Ties share the gradient equally.
      const at::Tensor hit = data.eq(at_positions(output));
      at::Tensor ties = filled(data, s.axis, s.count + 1, 0.0);
      ties = ties.scatter_add(s.axis, s.index, hit.to(data.scalar_type())).narrow(s.axis, 0, s.count);
      return at::where(hit, at_positions(grad / ties.clamp_min(1)), 0.0);
    }
    case Reduce::Prod: {
      // A segment with no zero: output / x. With one zero: the zero's
      // gradient is the product of the others (and the initial value);
      // everything else in it gets 0.
      const at::Tensor zero = data.eq(0);
      at::Tensor zeros = filled(data, s.axis, s.count + 1, 0.0);
      zeros = zeros.scatter_add(s.axis, s.index, zero.to(data.scalar_type())).narrow(s.axis, 0, s.count);
      at::Tensor others = filled(data, s.axis, s.count + 1, initial.has_value() ? initial->toDouble() : 1.0);
      others = others.scatter_reduce(s.axis, s.index, at::where(zero, 1.0, data), "prod", /*include_self=*/true)
                   .narrow(s.axis, 0, s.count);
      const at::Tensor nonzero_grad = g * at_positions(output) / data;
      const at::Tensor zero_grad = at::where(at_positions(zeros).eq(1), at_positions(grad * others), 0.0);
      return at::where(zero, zero_grad, nonzero_grad);
    }
  }
  return g;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("segment_reduce", TORCH_FN(segment_reduce));
  m.impl("_segment_reduce_backward", TORCH_FN(segment_reduce_backward));
}

}  // namespace torchneuron
