#include "index_launch.h"

#include <ATen/Dispatch.h>
#include <ATen/WrapDimUtils.h>

#include "runtime_check.h"
#include "runtime_limits.h"
#include "tensor_view.h"

namespace torchneuron {

std::vector<int64_t> nonempty_sizes(const at::Tensor& t) {
  if (t.dim() == 0) return {1};
  return t.sizes().vec();
}

std::vector<int64_t> nonempty_strides(const at::Tensor& t) {
  if (t.dim() == 0) return {1};
  return t.strides().vec();
}

IndexAccess dim_access(const at::Tensor& target, int64_t dim, std::vector<int64_t> shape,
                       const at::Tensor& index, std::vector<int64_t> index_strides) {
  IndexAccess a;
  a.target = target;
  a.target_strides = nonempty_strides(target);
  a.sizes = {nonempty_sizes(target)[dim]};
  a.strides = {a.target_strides[dim]};
  a.dims = {dim};
  a.target_strides[dim] = 0;
  a.shape = std::move(shape);
  a.indices = {index};
  a.index_strides = {std::move(index_strides)};
  return a;
}

nrt_tensor_view view_over(const at::Tensor& t, at::IntArrayRef shape, at::IntArrayRef strides,
                          const char* op) {
  if (shape.size() > NRT_MAX_DIMS) throw_dims_limit(op, static_cast<int64_t>(shape.size()));
  TORCH_INTERNAL_ASSERT(shape.size() == strides.size());
  nrt_tensor_view v{};
  v.data = const_cast<void*>(t.const_data_ptr());
  v.dtype = to_storage_dtype(t.scalar_type(), op);
  v.ndim = static_cast<int32_t>(shape.size());
  for (size_t d = 0; d < shape.size(); d++) {
    v.shape[d] = shape[d];
    v.strides[d] = strides[d];
  }
  return v;
}

nrt_scalar to_nrt_scalar(const at::Scalar& s) {
  nrt_scalar out{};
  TORCH_CHECK(!s.isComplex(), "complex scalars are not supported on neuron");
  if (s.isFloatingPoint()) {
    out.is_float = 1;
    out.f = s.toDouble();
  } else if (s.isBoolean()) {
    out.i = s.toBool();
  } else {
    out.i = s.toLong();
  }
  return out;
}

void check_devices(const char* op, const at::Tensor& self, std::initializer_list<at::Tensor> others) {
  for (const at::Tensor& t : others) {
    if (!t.defined()) continue;
    TORCH_CHECK(t.device() == self.device(),
                "Expected all tensors to be on the same device, but found at least two devices, ",
                self.device(), " and ", t.device(), "! (when checking arguments for ", op, ")");
  }
}

namespace {

void add_operand(nrt_op& op, const nrt_tensor_view& v) { op.operands[op.num_operands++] = v; }

void add_scalar(nrt_op& op, int64_t i) {
  op.scalars[op.num_scalars] = nrt_scalar{};
  op.scalars[op.num_scalars++].i = i;
}

// The geometry view and the index views (operands 2, 3, ...) and dims.
void add_indices(nrt_op& op, const IndexAccess& a, const char* name) {
  TORCH_CHECK_NOT_IMPLEMENTED(a.indices.size() <= NRT_INDEX_MAX_TENSORS, name, ": at most ",
                              NRT_INDEX_MAX_TENSORS, " index tensors are supported on neuron, got ",
                              a.indices.size());
  add_operand(op, view_over(a.target, a.sizes, a.strides, name));
  for (size_t j = 0; j < a.indices.size(); j++)
    add_operand(op, view_over(a.indices[j], a.shape, a.index_strides[j], name));
  for (int64_t dim : a.dims) add_scalar(op, dim);
}

}  // namespace

void launch_gather(nrt_op_code code, const at::Tensor& out, at::IntArrayRef out_strides,
                   const IndexAccess& a) {
  const char* name = nrt_op_name(code);
  nrt_op op{};
  op.code = code;
  op.num_outputs = 1;
  add_operand(op, view_over(out, a.shape, out_strides, name));
  add_operand(op, view_over(a.target, a.shape, a.target_strides, name));
  add_indices(op, a, name);
  launch(out.device().index(), op);
}

void launch_scatter(nrt_op_code code, const IndexAccess& a, const ScatterSource& source,
                    nrt_index_reduce reduce, bool include_self, const at::Scalar& alpha) {
  const char* name = nrt_op_name(code);
  nrt_op op{};
  op.code = code;
  op.num_outputs = 1;
  add_operand(op, view_over(a.target, a.shape, a.target_strides, name));
  if (source.value) {
    nrt_tensor_view v{};
    v.dtype = to_storage_dtype(a.target->scalar_type(), name);
    v.ndim = static_cast<int32_t>(a.shape.size());
    for (size_t d = 0; d < a.shape.size(); d++) v.shape[d] = a.shape[d];
    op.immediate_mask = 1u << 1;
    op.immediates[1] = to_nrt_scalar(*source.value);
    add_operand(op, v);
  } else {
    add_operand(op, view_over(source.tensor, a.shape, source.strides, name));
  }
  add_scalar(op, reduce);
  add_scalar(op, include_self);
  op.scalars[op.num_scalars++] = to_nrt_scalar(alpha);
  add_indices(op, a, name);
  launch(a.target->device().index(), op);
}

std::vector<int64_t> read_int64s(const at::Tensor& t, int64_t n) {
  at::Tensor host = t.narrow(0, 0, n).to(at::kCPU);
  const int64_t* data = host.const_data_ptr<int64_t>();
  return std::vector<int64_t>(data, data + n);
}

std::pair<int64_t, int64_t> integer_bounds(const at::Tensor& t, const char* op) {
  at::Tensor bounds = at::empty({2}, t.options().dtype(at::kLong));
  nrt_op desc{};
  desc.code = NRT_OP_INDEX_BOUNDS;
  desc.num_operands = 2;
  desc.num_outputs = 1;
  desc.operands[0] = to_view(bounds, op);
  desc.operands[1] = to_view(t, op);
  launch(t.device().index(), desc);
  std::vector<int64_t> v = read_int64s(bounds, 2);
  return {v[0], v[1]};
}

}  // namespace torchneuron
