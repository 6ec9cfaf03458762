// Data movement and factories: cat, flip, roll, tril/triu and their
// indices, arange, range, linspace, logspace, eye. Shapes, dtypes and
// argument checks come from PyTorch (the structured meta functions of cat
// and tril/triu, RangeUtils for arange's size, TensorFactories for the
// triangle sizes); each call becomes runtime ops. stack, repeat, full,
// flip.out and friends are PyTorch composites over these and over
// copy_/fill_, so they run natively without registrations of their own.
#include <ATen/AccumulateType.h>
#include <ATen/Dispatch.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/native/RangeUtils.h>
#include <ATen/native/TensorFactories.h>
#include <ATen/native/TensorShape.h>
#include <ATen/ops/cat_meta.h>
#include <ATen/ops/tril_meta.h>
#include <ATen/ops/triu_meta.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <map>
#include <vector>

#include "complex32.h"
#include "complex_index.h"
#include "op_tracking.h"
#include "shape_common.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {

// ---- cat ------------------------------------------------------------------

using CatMeta = NeuronStructured<at::meta::structured_cat, 1>;

// Inputs per CAT op: the descriptor holds the output and up to 7 inputs.
constexpr size_t kCatGroup = NRT_MAX_OPERANDS - 1;

void launch_cat_group(const at::Tensor& out, const std::vector<at::Tensor>& group, int64_t dim,
                      int64_t offset) {
  nrt_op op{};
  op.code = NRT_OP_CAT;
  op.num_outputs = 1;
  op.operands[op.num_operands++] = to_view(out, "cat");
  for (const at::Tensor& t : group) op.operands[op.num_operands++] = to_view(t, "cat");
  op.num_scalars = 2;
  op.scalars[0] = int_scalar(dim);
  op.scalars[1] = int_scalar(offset);
  launch(out.device().index(), op);
}

void run_cat(CatMeta& meta, const at::ITensorListRef& tensors, int64_t dim) {
  auto pre = meta.meta(tensors, dim);
  const at::Tensor& out = meta.outputs[0];
  auto inputs = tensors.materialize();
  for (const at::Tensor& t : inputs) {
    check_device(t, out.device(), "cat");
    TORCH_CHECK(!overlaps(out, t), "cat: unsupported operation: the input tensors cannot refer to "
                "any of the output memory locations. Found overlap in input tensor");
  }
  if (out.numel() == 0) return;
  c10::DeviceGuard guard(out.device());
  std::vector<at::Tensor> group;
  int64_t offset = 0, next = 0;
  for (const at::Tensor& t : inputs) {
    // Legacy 1-d empty inputs are ignored whatever dim is; any other empty
    // input has size 0 along dim (the output is not empty).
    if (at::native::cat_should_skip_tensor(t) || t.numel() == 0) continue;
    group.push_back(t);
    next += t.size(pre.dim);
    if (group.size() == kCatGroup) {
      launch_cat_group(out, group, pre.dim, offset);
      group.clear();
      offset = next;
    }
  }
  if (!group.empty()) launch_cat_group(out, group, pre.dim, offset);
}

at::Tensor cat(const at::ITensorListRef& tensors, int64_t dim) {
  NEURON_TRACK_OP("aten::cat");
  CatMeta meta("cat");
  run_cat(meta, tensors, dim);
  return std::move(meta.outputs[0]);
}

at::Tensor& cat_out(const at::ITensorListRef& tensors, int64_t dim, at::Tensor& out) {
  NEURON_TRACK_OP("aten::cat.out");
  CatMeta meta("cat", CatMeta::Kind::Out, {out});
  run_cat(meta, tensors, dim);
  return out;
}

// ---- flip and roll ----------------------------------------------------------

// flip is a copy from a view of the input that walks the flipped dims
// backwards (negative strides).
at::Tensor flip(const at::Tensor& self, at::IntArrayRef dims) {
  NEURON_TRACK_OP("aten::flip");
  refuse_complex32(self, "flip_cpu");
  auto flipped = at::dim_list_to_bitset(dims, self.dim());
  at::Tensor out = at::empty_like(self, at::MemoryFormat::Preserve);
  if (self.numel() == 0) return out;
  c10::DeviceGuard guard(self.device());
  nrt_op op = make_op(NRT_OP_COPY, {&out, &self}, 1, {});
  nrt_tensor_view& src = op.operands[1];
  int64_t elem = static_cast<int64_t>(self.element_size());
  for (int64_t d = 0; d < self.dim(); d++) {
    if (!flipped[d] || src.shape[d] <= 1) continue;
    src.data = static_cast<char*>(src.data) + (src.shape[d] - 1) * src.strides[d] * elem;
    src.strides[d] = -src.strides[d];
  }
  launch(self.device().index(), op);
  return out;
}

// One ROLL op handles up to 4 dims; more go through intermediates.
constexpr size_t kRollDimsPerOp = 4;

at::Tensor roll_dims(const at::Tensor& self, at::IntArrayRef shifts, at::IntArrayRef dims) {
  NEURON_TRACK_OP("aten::roll");
  TORCH_CHECK(!shifts.empty(), "`shifts` required");
  if (dims.empty() && shifts.size() == 1) {
    at::Tensor flat = self.contiguous().view(self.numel());
    return roll_dims(flat, shifts, {0}).view(self.sizes());
  }
  TORCH_CHECK(shifts.size() == dims.size(), "shifts and dimensions must align. shifts: ",
              shifts.size(), ", dims:", dims.size());
  at::Tensor out = at::empty_like(self, at::MemoryFormat::Contiguous);
  if (self.numel() == 0) return out;
  // Shifts of a repeated dim add up.
  std::map<int64_t, int64_t> total;
  for (size_t i = 0; i < dims.size(); i++) {
    int64_t d = c10::maybe_wrap_dim(dims[i], self.dim());
    int64_t size = self.size(d);
    total[d] = ((total[d] + shifts[i] % size) % size + size) % size;
  }
  std::vector<std::pair<int64_t, int64_t>> rolls;
  for (const auto& [d, shift] : total)
    if (shift != 0) rolls.emplace_back(d, shift);
  c10::DeviceGuard guard(self.device());
  at::Tensor src = self;
  size_t done = 0;
  do {
    size_t count = std::min(kRollDimsPerOp, rolls.size() - done);
    bool last = done + count == rolls.size();
    at::Tensor dst = last ? out : at::empty_like(out);
    nrt_op op = make_op(NRT_OP_ROLL, {&dst, &src}, 1, {});
    for (size_t i = done; i < done + count; i++) {
      op.scalars[op.num_scalars++] = int_scalar(rolls[i].first);
      op.scalars[op.num_scalars++] = int_scalar(rolls[i].second);
    }
    launch(self.device().index(), op);
    src = dst;
    done += count;
  } while (done < rolls.size());
  return out;
}

// ---- tril and triu ------------------------------------------------------------

template <class Meta>
void run_triangle(NeuronStructured<Meta, 1>& meta, nrt_op_code code, const at::Tensor& self,
                  int64_t diagonal) {
  meta.meta(self, diagonal);
  const at::Tensor& out = meta.outputs[0];
  const char* name = nrt_op_name(code);
  check_device(out, self.device(), name);
  if (out.numel() == 0) return;
  c10::DeviceGuard guard(self.device());
  bool same = out.is_alias_of(self) && out.storage_offset() == self.storage_offset() &&
              out.strides() == self.strides();
  at::Tensor dst = !same && overlaps(out, self) ? at::empty_like(out) : out;
  launch(self.device().index(), make_op(code, {&dst, &self}, 1, {int_scalar(diagonal)}));
  if (!dst.is_same(out)) out.copy_(dst);
}

template <class Meta, nrt_op_code Code>
at::Tensor triangle(const at::Tensor& self, int64_t diagonal) {
  NEURON_TRACK_OP(Code == NRT_OP_TRIL ? "aten::tril" : "aten::triu");
  NeuronStructured<Meta, 1> meta(nrt_op_name(Code));
  run_triangle(meta, Code, self, diagonal);
  return std::move(meta.outputs[0]);
}

template <class Meta, nrt_op_code Code>
at::Tensor& triangle_(at::Tensor& self, int64_t diagonal) {
  NEURON_TRACK_OP(Code == NRT_OP_TRIL ? "aten::tril_" : "aten::triu_");
  using M = NeuronStructured<Meta, 1>;
  M meta(nrt_op_name(Code), M::Kind::Inplace, {self});
  run_triangle(meta, Code, self, diagonal);
  return self;
}

template <class Meta, nrt_op_code Code>
at::Tensor& triangle_out(const at::Tensor& self, int64_t diagonal, at::Tensor& out) {
  NEURON_TRACK_OP(Code == NRT_OP_TRIL ? "aten::tril.out" : "aten::triu.out");
  using M = NeuronStructured<Meta, 1>;
  M meta(nrt_op_name(Code), M::Kind::Out, {out});
  run_triangle(meta, Code, self, diagonal);
  return out;
}

// The coordinates of a triangle, as a (2, count) tensor.
at::Tensor triangle_indices(nrt_op_code code, int64_t row, int64_t col, int64_t offset,
                            std::optional<at::ScalarType> dtype, std::optional<c10::Layout> layout,
                            std::optional<c10::Device> device) {
  const char* name = nrt_op_name(code);
  at::ScalarType type = dtype.value_or(at::kLong);
  at::native::check_args(row, col, layout);
  TORCH_CHECK_NOT_IMPLEMENTED(type == at::kInt || type == at::kLong, "\"", name,
                              "\" not implemented for '", type, "'");
  int64_t size = code == NRT_OP_TRIL_INDICES
                     ? at::native::get_tril_size(row, col, offset)
                     : row * col - at::native::get_tril_size(row, col, offset - 1);
  at::Tensor out = at::empty({2, size}, at::TensorOptions().dtype(type).device(device));
  if (size > 0) {
    c10::DeviceGuard guard(out.device());
    launch(out.device().index(),
           make_op(code, {&out}, 1, {int_scalar(row), int_scalar(col), int_scalar(offset)}));
  }
  return out;
}

at::Tensor tril_indices(int64_t row, int64_t col, int64_t offset,
                        std::optional<at::ScalarType> dtype, std::optional<c10::Layout> layout,
                        std::optional<c10::Device> device, std::optional<bool> pin_memory) {
  NEURON_TRACK_OP("aten::tril_indices");
  return triangle_indices(NRT_OP_TRIL_INDICES, row, col, offset, dtype, layout, device);
}

at::Tensor triu_indices(int64_t row, int64_t col, int64_t offset,
                        std::optional<at::ScalarType> dtype, std::optional<c10::Layout> layout,
                        std::optional<c10::Device> device, std::optional<bool> pin_memory) {
  NEURON_TRACK_OP("aten::triu_indices");
  return triangle_indices(NRT_OP_TRIU_INDICES, row, col, offset, dtype, layout, device);
}

// ---- 1-d factories -------------------------------------------------------------

// Runs a 1-d factory op into out (already holding its numel): directly when
// out is 1-d or contiguous, else through a contiguous temporary.
void launch_1d(nrt_op_code code, at::Tensor& out, std::initializer_list<nrt_scalar> scalars) {
  if (out.numel() == 0) return;
  c10::DeviceGuard guard(out.device());
  at::Tensor flat = out.dim() == 1 ? out
                    : out.is_contiguous() ? out.view({out.numel()})
                                          : at::empty({out.numel()}, out.options());
  launch(out.device().index(), make_op(code, {&flat}, 1, scalars));
  if (!flat.is_alias_of(out)) out.copy_(flat.view(out.sizes()));
}

// A Scalar converted to T (PyTorch's checked conversion), as a descriptor
// scalar: floats as doubles, integers as int64.
template <typename T>
nrt_scalar typed_scalar(const at::Scalar& s) {
  T v = s.to<T>();
  if constexpr (std::is_integral_v<T>)
    return int_scalar(static_cast<int64_t>(v));
  else
    return float_scalar(static_cast<double>(v));
}

at::Tensor& arange_out(const at::Scalar& start, const at::Scalar& end, const at::Scalar& step,
                       at::Tensor& out) {
  NEURON_TRACK_OP("aten::arange.start_out");
  int64_t size = 0;
  nrt_scalar first{}, delta{};
  AT_DISPATCH_ALL_TYPES_AND2(at::kHalf, at::kBFloat16, out.scalar_type(), "arange", [&] {
    using acc_t = at::acc_type<scalar_t, false>;
    size = at::native::compute_arange_size<scalar_t>(start, end, step);
    first = typed_scalar<acc_t>(start);
    delta = typed_scalar<acc_t>(step);
  });
  if (out.numel() != size) {
    if (out.numel() > 0)
      TORCH_WARN("The number of elements in the out tensor of shape ", out.sizes(), " is ",
                 out.numel(), " which does not match the computed number of elements ", size,
                 ". Note that this may occur as a result of rounding error. The out tensor will "
                 "be resized to a tensor of shape (", size, ",).");
    out.resize_({size});
  }
  at::assert_no_internal_overlap(out);
  launch_1d(NRT_OP_ARANGE, out, {first, delta});
  return out;
}

// torch.range (deprecated): the end is included.
at::Tensor& range_out(const at::Scalar& start, const at::Scalar& end, const at::Scalar& step,
                      at::Tensor& out) {
  NEURON_TRACK_OP("aten::range.out");
  int64_t size = 0;
  nrt_scalar first{}, delta{};
  AT_DISPATCH_ALL_TYPES_AND2(at::kHalf, at::kBFloat16, out.scalar_type(), "range", [&] {
    using acc_t = at::acc_type<scalar_t, false>;
    acc_t xstart = start.to<acc_t>(), xend = end.to<acc_t>(), xstep = step.to<acc_t>();
    TORCH_CHECK(xstep > 0 || xstep < 0, "step must be nonzero");
    TORCH_CHECK(std::isfinite(static_cast<double>(xstart)) &&
                    std::isfinite(static_cast<double>(xend)),
                "unsupported range: ", xstart, " -> ", xend);
    TORCH_CHECK((xstep > 0 && xend >= xstart) || (xstep < 0 && xend <= xstart),
                "upper bound and larger bound inconsistent with step sign");
    size = static_cast<int64_t>(((xend - xstart) / xstep) + 1);
    first = typed_scalar<acc_t>(start);
    delta = typed_scalar<acc_t>(step);
  });
  if (out.numel() != size) out.resize_({size});
  at::assert_no_internal_overlap(out);
  launch_1d(NRT_OP_ARANGE, out, {first, delta});
  return out;
}

// A complex linspace is the real linspace of each part (the CPU too computes
// start + step * i part by part, in the part's precision), written through
// the real view of out.
void complex_linspace(const at::Scalar& start, const at::Scalar& end, int64_t steps, const at::Tensor& out,
                      const char* name) {
  TORCH_CHECK(!out.is_conj() && !out.is_neg(), name, ": out must not have the conjugate or negative bit set");
  const c10::complex<double> first = start.toComplexDouble(), last = end.toComplexDouble();
  const at::Tensor parts = at::view_as_real(out);
  const at::Scalar ends[2][2] = {{first.real(), last.real()}, {first.imag(), last.imag()}};
  for (int64_t part = 0; part < 2; part++) {
    at::Tensor plane = parts.select(-1, part);
    at::linspace_out(plane, ends[part][0], ends[part][1], steps);
  }
}

at::Tensor& linspace_out(const at::Scalar& start, const at::Scalar& end, int64_t steps,
                         at::Tensor& out) {
  NEURON_TRACK_OP("aten::linspace.out");
  refuse_complex32(out, "linspace_cpu");
  TORCH_CHECK(steps >= 0, "number of steps must be non-negative");
  if (out.numel() != steps) out.resize_({steps});
  if (steps == 1) return out.fill_(start);
  if (steps == 0) return out;
  if (out.is_complex()) {
    at::assert_no_internal_overlap(out);
    complex_linspace(start, end, steps, out, "linspace");
    return out;
  }
  nrt_scalar first{}, last{};
  AT_DISPATCH_ALL_TYPES_AND2(at::kHalf, at::kBFloat16, out.scalar_type(), "linspace", [&] {
    first = typed_scalar<scalar_t>(start);
    last = typed_scalar<scalar_t>(end);
  });
  at::assert_no_internal_overlap(out);  // as the CPU's iterator checks
  launch_1d(NRT_OP_LINSPACE, out, {first, last});
  return out;
}

at::Tensor& logspace_out(const at::Scalar& start, const at::Scalar& end, int64_t steps,
                         double base, at::Tensor& out) {
  NEURON_TRACK_OP("aten::logspace.out");
  TORCH_CHECK(steps >= 0, "number of steps must be non-negative");
  if (out.numel() != steps) out.resize_({steps});
  if (out.is_complex()) {
    // base ** z = exp(z log(base)), log on its principal branch (a negative
    // base has a complex logarithm), as the CPU's complex pow.
    const c10::complex<double> log_base = std::log(c10::complex<double>(base, 0.0));
    if (steps == 1) return out.fill_(std::exp(start.toComplexDouble() * log_base));
    if (steps == 0) return out;
    at::assert_no_internal_overlap(out);
    complex_linspace(start, end, steps, out, "logspace");
    out.mul_(log_base).exp_();
    return out;
  }
  if (steps == 1) return out.fill_(std::pow(base, start.to<double>()));
  if (steps == 0) return out;
  nrt_scalar first{}, last{};
  AT_DISPATCH_ALL_TYPES_AND2(at::kHalf, at::kBFloat16, out.scalar_type(), "logspace", [&] {
    first = typed_scalar<scalar_t>(start);
    last = typed_scalar<scalar_t>(end);
  });
  at::assert_no_internal_overlap(out);  // as the CPU's iterator checks
  launch_1d(NRT_OP_LOGSPACE, out, {first, last, float_scalar(base)});
  return out;
}

// The identity: zeros, then ones along the diagonal view.
at::Tensor& eye_m_out(int64_t n, int64_t m, at::Tensor& out) {
  NEURON_TRACK_OP("aten::eye.m_out");
  refuse_complex32(out, "eye");
  TORCH_CHECK(n >= 0, "n must be greater or equal to 0, got ", n);
  TORCH_CHECK(m >= 0, "m must be greater or equal to 0, got ", m);
  out.resize_({n, m});
  out.zero_();
  int64_t diagonal = std::min(n, m);
  if (diagonal > 0)
    out.as_strided({diagonal}, {out.stride(0) + out.stride(1)}, out.storage_offset()).fill_(1);
  return out;
}

at::Tensor& eye_out(int64_t n, at::Tensor& out) {
  NEURON_TRACK_OP("aten::eye.out");
  return eye_m_out(n, n, out);
}

}  // namespace

NEURON_LIBRARY_IMPL(aten, m) {
  m.impl("cat", cat);
  m.impl("cat.out", cat_out);
  m.impl("flip", complex_path_first("flip", flip, try_complex_flip));
  m.impl("roll", roll_dims);
  // complex tensors: the pair dim moved in front of the matrices (complex_index.cpp)
  m.impl("tril", complex_path_first("tril", triangle<at::meta::structured_tril, NRT_OP_TRIL>,
                                    [](const at::Tensor& s, int64_t k) { return try_complex_triangle(false, s, k); }));
  m.impl("tril_", complex_path_first("tril_", triangle_<at::meta::structured_tril, NRT_OP_TRIL>,
                                     [](at::Tensor& s, int64_t k) { return try_complex_triangle_(false, s, k); }));
  m.impl("tril.out", complex_path_first("tril.out", triangle_out<at::meta::structured_tril, NRT_OP_TRIL>,
                                        [](const at::Tensor& s, int64_t k, at::Tensor& out) {
                                          return try_complex_triangle_out(false, s, k, out);
                                        }));
  m.impl("triu", complex_path_first("triu", triangle<at::meta::structured_triu, NRT_OP_TRIU>,
                                    [](const at::Tensor& s, int64_t k) { return try_complex_triangle(true, s, k); }));
  m.impl("triu_", complex_path_first("triu_", triangle_<at::meta::structured_triu, NRT_OP_TRIU>,
                                     [](at::Tensor& s, int64_t k) { return try_complex_triangle_(true, s, k); }));
  m.impl("triu.out", complex_path_first("triu.out", triangle_out<at::meta::structured_triu, NRT_OP_TRIU>,
                                        [](const at::Tensor& s, int64_t k, at::Tensor& out) {
                                          return try_complex_triangle_out(true, s, k, out);
                                        }));
  m.impl("tril_indices", tril_indices);
  m.impl("triu_indices", triu_indices);
  m.impl("arange.start_out", arange_out);
  m.impl("range.out", range_out);
  m.impl("linspace.out", linspace_out);
  m.impl("logspace.out", logspace_out);
  m.impl("eye.out", eye_out);
  m.impl("eye.m_out", eye_m_out);
}

}  // namespace torchneuron
