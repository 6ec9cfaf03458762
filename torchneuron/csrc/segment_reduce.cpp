// torch.segment_reduce (sum, mean, prod, max/amax, min/amin over segments
// given by lengths or offsets along an axis, with an optional initial value)
// and its backward on the runtime's SEGMENT_REDUCE ops
// (neuronrt/ops/reduce.h): the data is seen as [outer, rows, inner] and
// lengths become offsets [outer, segments + 1] with a cumsum on the device.
// Rows past the last offset (unsafe=True with short lengths) belong to no
// segment.
//
// The CPU validates lengths on the host (negative lengths, sums that do
// not cover the axis): so do we, with one read-back of those small
// tensors, so that the errors raise at the call with the CPU's messages.
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <string>
#include <vector>

#include "nn_launch.h"
#include "op_tracking.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {

// In the order of the runtime op's reduce scalar.
enum class Reduce { Sum, Mean, Prod, Max, Min };

Reduce parse_reduce(c10::string_view name) {
  if (name == "sum") return Reduce::Sum;
  if (name == "mean") return Reduce::Mean;
  if (name == "prod") return Reduce::Prod;
  if (name == "max" || name == "amax") return Reduce::Max;
  if (name == "min" || name == "amin") return Reduce::Min;
  TORCH_CHECK(false, "reduce argument must be either sum, prod, mean, amax or amin, got ", name);
}

// The segments of the data along `axis`, as the runtime's ops read them:
// offsets int64 [outer, count + 1], contiguous (outer: the dims before the
// axis, which lengths/offsets share with the data).
struct Segments {
  int64_t axis = 0, count = 0, outer = 1, rows = 0, inner = 1;
  at::Tensor offsets;
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
  Segments s;
  s.axis = axis;
  for (int64_t d = 0; d < axis; d++) s.outer *= data.size(d);
  for (int64_t d = axis + 1; d < data.dim(); d++) s.inner *= data.size(d);
  s.rows = data.size(axis);
  at::Tensor offsets;
  if (has_lengths) {
    const at::Tensor l = given.to(at::kLong).reshape({s.outer, given.size(-1)});
    offsets = at::cat({at::zeros({s.outer, 1}, l.options()), l.cumsum(-1)}, -1);
  } else {
    TORCH_CHECK(given.size(-1) >= 1, "segment_reduce(): offsets must have at least one element along axis");
    offsets = given.to(at::kLong).reshape({s.outer, given.size(-1)});
  }
  s.offsets = offsets.contiguous();
  s.count = s.offsets.size(-1) - 1;
  if (check && has_lengths) {
    // One read-back of the lengths' minimum and row sums, checked as the CPU checks them.
    const at::Tensor least = given.numel() > 0 ? given.to(at::kLong).amin().reshape({1}).clamp_max(0)
                                               : at::zeros({1}, s.offsets.options());
    const at::Tensor facts = at::cat({least, s.offsets.narrow(-1, s.count, 1).reshape({-1})}).cpu();
    const int64_t* f = facts.const_data_ptr<int64_t>();
    TORCH_CHECK(f[0] >= 0, "lengths contains negative value!");
    if (!unsafe)
      for (int64_t k = 1; k < facts.numel(); k++)
        TORCH_CHECK(f[k] == data.size(axis),
                    "segment_reduce(): Expected all rows of lengths along axis to sum to data.size(lengths.dim()-1) "
                    "when !unsafe.");
  }
  return s;
}

// float16 and bfloat16 compute in float32 (the kernels take float32 and
// float64).
at::ScalarType compute_type(const at::Tensor& data) {
  return data.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
}

// t ([outer, rows or count, inner] elements) in the compute dtype, contiguous.
at::Tensor compute_copy(const at::Tensor& t, at::ScalarType type) {
  return t.to(type).contiguous();
}

std::vector<int64_t> segment_shape(const at::Tensor& data, const Segments& s) {
  std::vector<int64_t> shape(data.sizes().begin(), data.sizes().end());
  shape[s.axis] = s.count;
  return shape;
}

nrt_scalar reduce_scalar(Reduce r) { return int_scalar(static_cast<int64_t>(r)); }

at::Tensor segment_reduce(const at::Tensor& data, c10::string_view reduce_name,
                          const std::optional<at::Tensor>& lengths, const std::optional<at::Tensor>& indices,
                          const std::optional<at::Tensor>& offsets, int64_t axis, bool unsafe,
                          const std::optional<at::Scalar>& initial) {
  NEURON_TRACK_OP("aten::segment_reduce");
  const char* name = "segment_reduce";
  const Reduce r = parse_reduce(reduce_name);
  TORCH_CHECK(!(indices.has_value() && indices->defined()),
              "segment_reduce(): indices based reduction is not supported yet.");
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(data.scalar_type()), "\"_segment_reduce\" not implemented for '",
                              at::toString(data.scalar_type()), "'");
  c10::DeviceGuard guard(data.device());
  const Segments s = segments_of(data, lengths, offsets, axis, unsafe, /*check=*/true);
  const at::ScalarType type = compute_type(data);
  at::Tensor out = at::empty(segment_shape(data, s), data.options().dtype(type));
  if (out.numel() > 0) {
    const at::Tensor x = compute_copy(data, type);
    launch_nn(NRT_OP_SEGMENT_REDUCE, data, 1,
              {contiguous_view(out, {s.outer, s.count, s.inner}, name),
               contiguous_view(x, {s.outer, s.rows, s.inner}, name),
               contiguous_view(s.offsets, {s.outer, s.count + 1}, name)},
              {reduce_scalar(r), int_scalar(initial.has_value() ? 1 : 0),
               float_scalar(initial.has_value() ? initial->toDouble() : 0.0)});
  }
  return out.to(data.scalar_type());
}

at::Tensor segment_reduce_backward(const at::Tensor& grad, const at::Tensor& output, const at::Tensor& data,
                                   c10::string_view reduce_name, const std::optional<at::Tensor>& lengths,
                                   const std::optional<at::Tensor>& offsets, int64_t axis,
                                   const std::optional<at::Scalar>& initial) {
  NEURON_TRACK_OP("aten::_segment_reduce_backward");
  const char* name = "_segment_reduce_backward";
  const Reduce r = parse_reduce(reduce_name);
  c10::DeviceGuard guard(data.device());
  const Segments s = segments_of(data, lengths, offsets, axis, /*unsafe=*/true, /*check=*/false);
  const std::vector<int64_t> seg_shape = segment_shape(data, s);
  TORCH_CHECK(grad.sizes() == at::IntArrayRef(seg_shape) && output.sizes() == at::IntArrayRef(seg_shape), name,
              ": expected grad and output of shape ", at::IntArrayRef(seg_shape), ", got ", grad.sizes(), " and ",
              output.sizes());
  const at::ScalarType type = compute_type(data);
  at::Tensor grad_data = at::empty(data.sizes(), data.options().dtype(type));
  if (grad_data.numel() > 0) {
    const at::Tensor g = compute_copy(grad, type), y = compute_copy(output, type), x = compute_copy(data, type);
    launch_nn(NRT_OP_SEGMENT_REDUCE_BACKWARD, data, 1,
              {contiguous_view(grad_data, {s.outer, s.rows, s.inner}, name),
               contiguous_view(g, {s.outer, s.count, s.inner}, name),
               contiguous_view(y, {s.outer, s.count, s.inner}, name),
               contiguous_view(x, {s.outer, s.rows, s.inner}, name),
               contiguous_view(s.offsets, {s.outer, s.count + 1}, name)},
              {reduce_scalar(r), int_scalar(initial.has_value() ? 1 : 0),
               float_scalar(initial.has_value() ? initial->toDouble() : 0.0)});
  }
  return grad_data.to(data.scalar_type());
}

}  // namespace

NEURON_LIBRARY_IMPL(aten, m) {
  m.impl("segment_reduce", TORCH_FN(segment_reduce));
  m.impl("_segment_reduce_backward", TORCH_FN(segment_reduce_backward));
}

}  // namespace torchneuron
