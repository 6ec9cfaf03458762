// Ops whose output size depends on the data: nonzero, masked_select and
// bincount synchronise to learn it, as on CUDA; nonzero_static does not
// (its size is given); one_hot synchronises only to infer num_classes.
//
// nonzero and masked_select first run NONZERO_COUNT, which counts per chunk
// of the input in parallel; the host reads the total (the synchronisation),
// allocates the output and hands the chunk counts to the writer, which
// writes every chunk's positions in parallel at their final offsets.
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "index_launch.h"
#include "op_tracking.h"
#include "runtime_check.h"
#include "tensor_view.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {

// The kernels read the computing dtypes. A complex tensor is nonzero where
// `x != 0` is, a native comparison (either part; NaN counts). uint16/32/64
// are refused as the CPU refuses them.
at::Tensor computing_form(const at::Tensor& x, const char* name) {
  if (!is_storage_dtype(x.scalar_type())) return x;
  TORCH_CHECK_NOT_IMPLEMENTED(x.is_complex(), "\"", name, "\" not implemented for '",
                              c10::toString(x.scalar_type()), "'");
  return x.ne(0);
}

// Launches NONZERO_COUNT(x): int64 [1 + chunks] counts on x's device.
at::Tensor count_nonzero_chunks(const at::Tensor& x, const char* name) {
  at::Tensor counts = at::empty({1 + NRT_NONZERO_CHUNKS}, x.options().dtype(at::kLong));
  nrt_op op{};
  op.code = NRT_OP_NONZERO_COUNT;
  op.num_operands = 2;
  op.num_outputs = 1;
  op.operands[0] = to_view(counts, name);
  op.operands[1] = to_view(x, name);
  launch(x.device().index(), op);
  return counts;
}

// Writes the coordinates of x's nonzeros into out [m, x.dim()]; rows past
// the last nonzero become fill.
void launch_nonzero(const at::Tensor& out, const at::Tensor& x, const at::Tensor& counts, int64_t fill) {
  nrt_op op{};
  op.code = NRT_OP_NONZERO;
  op.num_outputs = 1;
  op.num_operands = counts.defined() ? 3 : 2;
  op.operands[0] = to_view(out, "nonzero");
  op.operands[1] = to_view(x, "nonzero");
  if (counts.defined()) op.operands[2] = to_view(counts, "nonzero");
  op.num_scalars = 1;
  op.scalars[0].i = fill;
  launch(x.device().index(), op);
}

at::Tensor& nonzero_out(const at::Tensor& self, at::Tensor& out) {
  NEURON_TRACK_OP("aten::nonzero.out");
  c10::DeviceGuard guard(self.device());
  TORCH_CHECK(out.scalar_type() == at::kLong, "nonzero: Expected out tensor to have scalar type Long ",
              "but got scalar type", out.scalar_type());
  check_devices("nonzero", self, {out});
  const at::Tensor x = computing_form(self, "nonzero");
  at::Tensor counts;
  int64_t n = 0;
  if (x.numel() > 0) {
    counts = count_nonzero_chunks(x, "nonzero");
    n = read_int64s(counts, 1)[0];
  }
  at::native::resize_output(out, {n, x.dim()});
  if (n > 0 && x.dim() > 0) launch_nonzero(out, x, counts, 0);
  return out;
}

at::Tensor nonzero(const at::Tensor& self) {
  NEURON_TRACK_OP("aten::nonzero");
  at::Tensor out = at::empty({0}, self.options().dtype(at::kLong));
  return nonzero_out(self, out);
}

at::Tensor& nonzero_static_out(const at::Tensor& self, int64_t size, int64_t fill_value, at::Tensor& out) {
  NEURON_TRACK_OP("aten::nonzero_static.out");
  c10::DeviceGuard guard(self.device());
  TORCH_CHECK(size >= 0, "nonzero_static: 'size' must be an non-negative integer");
  TORCH_CHECK(out.scalar_type() == at::kLong, "nonzero_static: Expected out tensor to have scalar type Long ",
              "but got scalar type", out.scalar_type());
  check_devices("nonzero_static", self, {out});
  at::native::resize_output(out, {size, self.dim()});
  if (out.numel() > 0) launch_nonzero(out, computing_form(self, "nonzero_static"), at::Tensor(), fill_value);
  return out;
}

at::Tensor nonzero_static(const at::Tensor& self, int64_t size, int64_t fill_value) {
  NEURON_TRACK_OP("aten::nonzero_static");
  at::Tensor out = at::empty({0}, self.options().dtype(at::kLong));
  return nonzero_static_out(self, size, fill_value, out);
}

at::Tensor& masked_select_out(const at::Tensor& self, const at::Tensor& mask, at::Tensor& out) {
  NEURON_TRACK_OP("aten::masked_select.out");
  c10::DeviceGuard guard(self.device());
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_select: expected BoolTensor for mask");
  TORCH_CHECK(self.scalar_type() == out.scalar_type(),
              "masked_select(): self and result must have the same scalar type");
  check_devices("masked_select", self, {mask, out});
  at::assert_no_internal_overlap(out);
  at::assert_no_overlap(out, self);
  at::assert_no_overlap(out, mask);
  if (is_storage_dtype(self.scalar_type())) {
    TORCH_CHECK_NOT_IMPLEMENTED(self.is_complex(), "\"masked_select\" not implemented for '",
                                c10::toString(self.scalar_type()), "'");
    // The kernel moves elements of the computing dtypes: a complex tensor's
    // (re, im) pairs, selected as real pairs.
    const at::Tensor pairs = at::masked_select(at::view_as_real(self.resolve_conj().resolve_neg()),
                                               mask.unsqueeze(-1));
    at::native::resize_output(out, {pairs.numel() / 2});
    out.copy_(at::view_as_complex(pairs.view({-1, 2})));
    return out;
  }
  auto [mask_b, self_b] = at::expand_outplace(mask, self);
  at::Tensor counts;
  int64_t n = 0;
  if (self_b->numel() > 0) {
    counts = count_nonzero_chunks(*mask_b, "masked_select");
    n = read_int64s(counts, 1)[0];
  }
  at::native::resize_output(out, {n});
  if (n == 0) return out;
  nrt_op op{};
  op.code = NRT_OP_MASKED_SELECT;
  op.num_operands = 4;
  op.num_outputs = 1;
  op.operands[0] = to_view(out, "masked_select");
  op.operands[1] = to_view(*self_b, "masked_select");
  op.operands[2] = to_view(*mask_b, "masked_select");
  op.operands[3] = to_view(counts, "masked_select");
  launch(self.device().index(), op);
  return out;
}

at::Tensor masked_select(const at::Tensor& self, const at::Tensor& mask) {
  NEURON_TRACK_OP("aten::masked_select");
  at::Tensor out = at::empty({0}, self.options());
  return masked_select_out(self, mask, out);
}

// ---- bincount and one_hot: scatter_add / scatter over a zeroed output ------

at::Tensor bincount(const at::Tensor& self, const std::optional<at::Tensor>& weights_opt, int64_t minlength) {
  NEURON_TRACK_OP("aten::bincount");
  c10::DeviceGuard guard(self.device());
  at::Tensor weights = weights_opt.value_or(at::Tensor());
  // The dtype first, as the CPU's dispatch over integral types rejects it,
  // in its words (it names its kernel, "bincount_cpu").
  TORCH_CHECK_NOT_IMPLEMENTED(at::isIntegralType(self.scalar_type(), /*includeBool=*/false),
                              "\"bincount_cpu\" not implemented for '", c10::toString(self.scalar_type()), "'");
  TORCH_CHECK(minlength >= 0, "minlength should be >= 0");
  TORCH_CHECK(self.dim() == 1, "bincount only supports 1-d non-negative integral inputs.");
  TORCH_CHECK(!weights.defined() || (weights.dim() == 1 && weights.size(0) == self.size(0)),
              "weights should be 1-d and have the same length as input");
  check_devices("bincount", self, {weights});
  at::ScalarType dtype = !weights.defined() ? at::kLong
                         : weights.scalar_type() == at::kFloat ? at::kFloat : at::kDouble;
  if (self.numel() == 0) return at::zeros({minlength}, self.options().dtype(dtype));
  auto [lo, hi] = integer_bounds(self, "bincount");
  TORCH_CHECK(lo >= 0, "bincount only supports 1-d non-negative integral inputs.");
  at::Tensor out = at::zeros({std::max(hi + 1, minlength)}, self.options().dtype(dtype));
  ScatterSource source;
  if (weights.defined()) {
    source.tensor = weights.to(dtype);
    source.strides = source.tensor.strides().vec();
  } else {
    source.value = 1;
  }
  launch_scatter(NRT_OP_SCATTER_ADD, dim_access(out, 0, {self.size(0)}, self, {self.stride(0)}), source,
                 NRT_INDEX_SUM, true, 1);
  return out;
}

// The class values are read back (one synchronisation, as PyTorch's CPU
// kernel reads min and max): a negative class, or one not below an explicit
// num_classes, raises at the call as on the CPU.
at::Tensor one_hot(const at::Tensor& self, int64_t num_classes) {
  NEURON_TRACK_OP("aten::one_hot");
  c10::DeviceGuard guard(self.device());
  TORCH_CHECK(self.scalar_type() == at::kLong, "one_hot is only applicable to index tensor of type LongTensor.");
  std::vector<int64_t> shape = self.sizes().vec();
  if (self.numel() == 0) {
    TORCH_CHECK(num_classes > 0, "Can not infer total number of classes from empty tensor.");
    shape.push_back(num_classes);
    return at::empty(shape, self.options());
  }
  auto [lo, hi] = integer_bounds(self, "one_hot");
  TORCH_CHECK(lo >= 0, "Class values must be non-negative.");
  if (num_classes == -1)
    num_classes = hi + 1;
  else
    TORCH_CHECK(num_classes > hi, "Class values must be smaller than num_classes.");
  shape.push_back(num_classes);
  at::Tensor out = at::zeros(shape, self.options());
  at::Tensor index = self.unsqueeze(-1);
  ScatterSource source;
  source.value = 1;
  launch_scatter(NRT_OP_SCATTER, dim_access(out, out.dim() - 1, index.sizes().vec(), index, index.strides().vec()),
                 source, NRT_INDEX_ASSIGN, true, 1);
  return out;
}

}  // namespace

NEURON_LIBRARY_IMPL(aten, m) {
  m.impl("nonzero", nonzero);
  m.impl("nonzero.out", nonzero_out);
  m.impl("nonzero_static", nonzero_static);
  m.impl("nonzero_static.out", nonzero_static_out);
  m.impl("masked_select", masked_select);
  m.impl("masked_select.out", masked_select_out);
  m.impl("bincount", bincount);
  m.impl("one_hot", one_hot);
}

}  // namespace torchneuron
