// Index-shaped ops composed of native kernels, with the CPU's checks and
// messages: bucketize (searchsorted with the operands swapped),
// repeat_interleave of a repeats tensor (the running count of the repeats'
// cumulative ends: cumsum, bincount, cumsum), channel_shuffle (a view, a
// transpose and one copy)
// and index_reduce (scatter_reduce with the index expanded along dim).
// No element loop here: every step is a native neuron kernel.
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "op_tracking.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {

void check_boundaries(const at::Tensor& boundaries) {
  TORCH_CHECK(boundaries.dim() == 1, "boundaries tensor must be 1 dimension, but got dim(", boundaries.dim(),
              ")");
}

at::Tensor& bucketize_out(const at::Tensor& self, const at::Tensor& boundaries, bool out_int32, bool right,
                          at::Tensor& out) {
  NEURON_TRACK_OP("aten::bucketize.Tensor_out");
  check_boundaries(boundaries);
  return at::searchsorted_out(out, boundaries, self, out_int32, right);
}

at::Tensor bucketize(const at::Tensor& self, const at::Tensor& boundaries, bool out_int32, bool right) {
  NEURON_TRACK_OP("aten::bucketize.Tensor");
  check_boundaries(boundaries);
  return at::searchsorted(boundaries, self, out_int32, right);
}

at::Tensor bucketize_scalar(const at::Scalar& self, const at::Tensor& boundaries, bool out_int32, bool right) {
  NEURON_TRACK_OP("aten::bucketize.Scalar");
  check_boundaries(boundaries);
  return at::searchsorted(boundaries, self, out_int32, right);
}

// The indices 0.. each repeated repeats[i] times.
at::Tensor repeat_interleave(const at::Tensor& repeats, std::optional<c10::SymInt> output_size) {
  NEURON_TRACK_OP("aten::repeat_interleave.Tensor");
  TORCH_CHECK(repeats.dim() == 1, "repeat_interleave only accept 1D vector as repeat");
  TORCH_CHECK_NOT_IMPLEMENTED(repeats.scalar_type() == at::kLong || repeats.scalar_type() == at::kInt,
                              "\"repeat_interleave_cpu\" not implemented for '", at::toString(repeats.scalar_type()),
                              "'");
  if (repeats.numel() == 0) return at::empty({0}, repeats.options());
  const at::Tensor ends = repeats.cumsum(0, at::kLong);
  // One read-back, as the CPU's kernel: the sign check and the total.
  const at::Tensor summary = at::stack({repeats.min().to(at::kLong), ends[-1]}).cpu();
  TORCH_CHECK(summary[0].item<int64_t>() >= 0, "repeats can not be negative");
  const int64_t total = summary[1].item<int64_t>();
  if (output_size.has_value())
    TORCH_CHECK(output_size->expect_int() == total, "allocated size does not match required size");
  // result[j] = how many ends are <= j: a count of the ends, accumulated.
  const at::Tensor counts = at::bincount(ends, {}, total + 1);
  return counts.cumsum(0, repeats.scalar_type()).narrow(0, 0, total);
}

at::Tensor channel_shuffle(const at::Tensor& self, c10::SymInt groups_sym) {
  NEURON_TRACK_OP("aten::channel_shuffle");
  const int64_t groups = groups_sym.expect_int();
  TORCH_CHECK(self.dim() > 2, "channel_shuffle expects input with > 2 dims, but got input with sizes ",
              self.sizes());
  TORCH_CHECK(groups > 0, "Number of groups to divide channels in must be positive.", " Value of groups:", groups);
  const int64_t channels = self.size(1);
  TORCH_CHECK(channels % groups == 0, "Number of channels must be divisible by groups. Got ", channels,
              " channels and ", groups, " groups.");
  // Channel g * (C / G) + k of the input is channel k * G + g of the output.
  std::vector<int64_t> grouped{self.size(0), groups, channels / groups}, shuffled{self.size(0), channels / groups, groups};
  for (int64_t d = 2; d < self.dim(); d++) {
    grouped.push_back(self.size(d));
    shuffled.push_back(self.size(d));
  }
  at::Tensor out = at::empty_like(self, self.suggest_memory_format());
  out.view(shuffled).copy_(self.reshape(grouped).transpose(1, 2));
  return out;
}

void check_index_reduce(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                        c10::string_view reduce) {
  TORCH_CHECK(reduce == "prod" || reduce == "mean" || reduce == "amax" || reduce == "amin",
              "index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got ", reduce, ".");
  TORCH_CHECK(index.dim() <= 1, "index_reduce_(): Index is supposed to be a vector");
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt,
              "index_reduce_(): Expected dtype int32/int64 for index but got: ", index.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(), "index_reduce_(): self (", self.scalar_type(),
              ") and source (", source.scalar_type(), ") must have the same scalar type");
  TORCH_CHECK(dim == 0 || dim < source.dim(), "index_reduce_(): Indexing dim ", dim,
              " is out of bounds of the source tensor with dim ", source.dim());
  TORCH_CHECK(index.numel() == (source.dim() > 0 ? source.size(dim) : 1), "index_reduce_(): Number of indices (",
              index.numel(), ") should be equal to source.size(dim): (", (source.dim() > 0 ? source.size(dim) : 1),
              "), for dim: ", dim);
  bool slices_match = self.dim() == source.dim() || (self.dim() <= 1 && source.dim() <= 1);
  for (int64_t d = 0; slices_match && d < self.dim() && self.dim() == source.dim(); d++)
    slices_match = d == dim || self.size(d) == source.size(d);
  TORCH_CHECK(slices_match, "source tensor shape must match self tensor shape, excluding the specified dimension. Got "
              "self.shape = ", self.sizes(), " source.shape = ", source.sizes());
}

at::Tensor& index_reduce_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                          c10::string_view reduce, bool include_self) {
  NEURON_TRACK_OP("aten::index_reduce_");
  TORCH_WARN_ONCE("index_reduce() is in beta and the API may change at any time.");
  dim = at::maybe_wrap_dim(dim, self.dim());
  check_index_reduce(self, dim, index, source, reduce);
  if (index.numel() == 0) return self;
  if (self.dim() == 0) {  // one slot: scatter along a 1-element view
    at::Tensor flat = self.view({1});
    flat.scatter_reduce_(0, index.reshape({1}).to(at::kLong), source.reshape({1}), reduce, include_self);
    return self;
  }
  std::vector<int64_t> shape(source.dim(), 1);
  shape[dim] = -1;
  const at::Tensor expanded = index.to(at::kLong).view(shape).expand(source.sizes());
  return self.scatter_reduce_(dim, expanded, source, reduce, include_self);
}

at::Tensor& index_reduce_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                             const at::Tensor& source, c10::string_view reduce, bool include_self, at::Tensor& out) {
  NEURON_TRACK_OP("aten::index_reduce.out");
  if (!out.is_same(self)) {
    at::native::resize_output(out, self.sizes());
    out.copy_(self);
  }
  return index_reduce_(out, dim, index, source, reduce, include_self);
}

at::Tensor index_reduce(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                        c10::string_view reduce, bool include_self) {
  NEURON_TRACK_OP("aten::index_reduce");
  at::Tensor out = self.clone(at::MemoryFormat::Preserve);
  return index_reduce_(out, dim, index, source, reduce, include_self);
}

}  // namespace

NEURON_LIBRARY_IMPL(aten, m) {
  m.impl("bucketize.Tensor", bucketize);
  m.impl("bucketize.Tensor_out", bucketize_out);
  m.impl("bucketize.Scalar", bucketize_scalar);
  m.impl("repeat_interleave.Tensor", repeat_interleave);
  m.impl("channel_shuffle", channel_shuffle);
  m.impl("index_reduce", index_reduce);
  m.impl("index_reduce_", index_reduce_);
  m.impl("index_reduce.out", index_reduce_out);
}

}  // namespace torchneuron
