// Indexing ops: index_select, gather, scatter / scatter_add / scatter_reduce,
// index_add, index_copy, index_fill_, take, put_, index.Tensor (advanced
// indexing), _index_put_impl_ (index_put_), embedding_dense_backward and
// searchsorted.
//
// Argument checks and output shapes come from PyTorch: the structured meta
// functions (gather, scatter*, index_add) run as they do for any backend,
// and advanced indexing uses ATen's helpers that expand boolean masks (into
// nonzero(), native here) and broadcast the index tensors. What is left is
// describing the access to the runtime: the indexed tensor restrided over
// the result's shape, the size and stride of each indexed dim, and the
// index tensors (see neuronrt/ops/index.h). Out-of-range indices are found
// by the kernels and raised at the next synchronisation as
// torchneuron.IndexOutOfRangeError (an IndexError and a RuntimeError: the
// CPU raises one or the other, depending on the op; see index_error.h), as
// are the ones that the checks here find before a launch.
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/TensorUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/BucketizationUtils.h>
#include <ATen/native/IndexingUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/gather_meta.h>
#include <ATen/ops/index_add_meta.h>
#include <ATen/ops/index_copy_meta.h>
#include <ATen/ops/scatter_add_meta.h>
#include <ATen/ops/scatter_meta.h>
#include <ATen/ops/scatter_reduce_meta.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <numeric>
#include <sstream>

#include "complex32.h"
#include "complex_index.h"
#include "fallback.h"
#include "index_error.h"
#include "index_launch.h"
#include "op_tracking.h"
#include "runtime_check.h"
#include "tensor_view.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {

// Runs a structured op's meta function and provides its output: a new
// tensor (functional) or the given out= tensor, resized as PyTorch does.
template <class Meta>
class NeuronMeta final : public Meta {
 public:
  NeuronMeta() = default;
  explicit NeuronMeta(const at::Tensor& out) : output_(out), has_out_(true) {}

  void set_output_strided(int64_t, at::IntArrayRef sizes, at::IntArrayRef strides,
                          at::TensorOptions options) override {
    set(sizes, strides, options);
  }
  void set_output_raw_strided(int64_t, at::IntArrayRef sizes, at::IntArrayRef strides,
                              at::TensorOptions options) override {
    set(sizes, strides, options);
  }
  const at::Tensor& maybe_get_output(int64_t) override { return output_; }
  at::Tensor& output() { return output_; }

 private:
  void set(at::IntArrayRef sizes, at::IntArrayRef strides, const at::TensorOptions& options) {
    if (!has_out_) {
      output_ = strides.empty() ? at::empty(sizes, options) : at::empty_strided(sizes, strides, options);
      return;
    }
    TORCH_CHECK(options.dtype() == output_.dtype(), "Expected out tensor to have dtype ",
                options.dtype(), ", but got ", output_.dtype(), " instead");
    TORCH_CHECK(options.device() == output_.device(), "Expected out tensor to have device ",
                options.device(), ", but got ", output_.device(), " instead");
    at::native::resize_output(output_, sizes);
  }

  at::Tensor output_;
  bool has_out_ = false;
};

// The access of target along dim at the positions of a 1-d (or 0-d) index,
// over shape: target's sizes with dim's replaced by the index's length.
IndexAccess slice_access(const at::Tensor& target, int64_t dim, const at::Tensor& index,
                         std::vector<int64_t> shape) {
  std::vector<int64_t> index_strides(shape.size(), 0);
  index_strides[dim] = index.dim() == 0 ? 0 : index.stride(0);
  return dim_access(target, dim, std::move(shape), index, std::move(index_strides));
}

// The access of a 1-d tensor at the positions of an index of any shape.
IndexAccess flat_access(const at::Tensor& flat, const at::Tensor& index) {
  IndexAccess a;
  a.target = flat;
  a.shape = nonempty_sizes(index);
  a.target_strides.assign(a.shape.size(), 0);
  a.sizes = {flat.numel()};
  a.strides = {flat.stride(0)};
  a.dims = {0};
  a.indices = {index};
  a.index_strides = {nonempty_strides(index)};
  return a;
}

// ---- index_select --------------------------------------------------------

at::DimVector index_select_sizes(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  TORCH_CHECK_INDEX(index.dim() <= 1, "index_select(): Index is supposed to be a vector");
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt,
              "index_select(): Expected dtype int32 or int64 for index");
  TORCH_CHECK(self.dim() > 0 || index.numel() == 1,
              "index_select(): Index to scalar can have only 1 value, got ", index.numel(), " value(s)");
  check_devices("index_select", self, {index});
  at::DimVector sizes(self.sizes());
  if (self.dim() > 0) sizes[dim] = index.numel();
  return sizes;
}

// The access is built on the stack rather than as an IndexAccess (whose
// vectors cost a fifth of a small call): the operands of launch_gather,
// (out, self over out's shape with stride 0 along dim, self's dim as the
// indexed geometry, index along dim), and dim.
void index_select_into(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& out) {
  if (out.numel() == 0) return;
  const char* name = "index_select";
  const int64_t nd = std::max<int64_t>(self.dim(), 1);
  if (nd > NRT_MAX_DIMS) throw_dims_limit(name, nd);
  int64_t shape[NRT_MAX_DIMS], out_strides[NRT_MAX_DIMS], self_strides[NRT_MAX_DIMS],
      index_strides[NRT_MAX_DIMS];
  for (int64_t d = 0; d < nd; d++) {
    bool scalar = self.dim() == 0;
    shape[d] = scalar ? 1 : out.size(d);
    out_strides[d] = scalar ? 1 : out.stride(d);
    self_strides[d] = scalar ? 1 : self.stride(d);
    index_strides[d] = 0;
  }
  const int64_t size = self.dim() == 0 ? 1 : self.size(dim), stride = self_strides[dim];
  NEURON_CHECK_INDEX_RANGE(size > 0, "index_select(): index out of range in self");
  self_strides[dim] = 0;
  index_strides[dim] = index.dim() == 0 ? 0 : index.stride(0);
  const at::IntArrayRef over(shape, nd);
  nrt_op op{};
  op.code = NRT_OP_INDEX_SELECT;
  op.num_outputs = 1;
  op.num_operands = 4;
  op.operands[0] = view_over(out, over, at::IntArrayRef(out_strides, nd), name);
  op.operands[1] = view_over(self, over, at::IntArrayRef(self_strides, nd), name);
  op.operands[2] = view_over(self, at::IntArrayRef(&size, 1), at::IntArrayRef(&stride, 1), name);
  op.operands[3] = view_over(index, over, at::IntArrayRef(index_strides, nd), name);
  op.num_scalars = 1;
  op.scalars[0].i = dim;
  launch(out.device().index(), op);
}

at::Tensor index_select(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  NEURON_TRACK_OP("aten::index_select");
  c10::DeviceGuard guard(self.device());
  dim = at::maybe_wrap_dim(dim, self.dim());
  at::Tensor out = at::empty(index_select_sizes(self, dim, index), self.options());
  index_select_into(self, dim, index, out);
  return out;
}

at::Tensor& index_select_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, at::Tensor& out) {
  NEURON_TRACK_OP("aten::index_select.out");
  c10::DeviceGuard guard(self.device());
  dim = at::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK(self.scalar_type() == out.scalar_type(),
              "index_select(): self and result must have the same scalar type");
  check_devices("index_select", self, {out});
  at::assert_no_internal_overlap(out);
  at::assert_no_overlap(out, self);
  at::assert_no_overlap(out, index);
  at::native::resize_output(out, index_select_sizes(self, dim, index));
  index_select_into(self, dim, index, out);
  return out;
}

// ---- gather --------------------------------------------------------------

void gather_into(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& out) {
  check_devices("gather", self, {index, out});
  if (index.numel() == 0) return;
  dim = at::maybe_wrap_dim(dim, self.dim());
  NEURON_CHECK_INDEX_RANGE(nonempty_sizes(self)[dim] > 0, "gather: index is out of bounds for dimension ", dim,
                           " with size 0");
  launch_gather(NRT_OP_GATHER, out, nonempty_strides(out),
                dim_access(self, dim, nonempty_sizes(index), index, nonempty_strides(index)));
}

at::Tensor gather(const at::Tensor& self, int64_t dim, const at::Tensor& index, bool sparse_grad) {
  NEURON_TRACK_OP("aten::gather");
  refuse_complex32(self, "scatter_gather_tensor_cpu");
  c10::DeviceGuard guard(self.device());
  NeuronMeta<at::meta::structured_gather> meta;
  meta.meta(self, dim, index, sparse_grad);
  gather_into(self, dim, index, meta.output());
  return meta.output();
}

at::Tensor& gather_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, bool sparse_grad,
                       at::Tensor& out) {
  NEURON_TRACK_OP("aten::gather.out");
  refuse_complex32(self, "scatter_gather_tensor_cpu");
  c10::DeviceGuard guard(self.device());
  NeuronMeta<at::meta::structured_gather> meta(out);
  meta.meta(self, dim, index, sparse_grad);
  gather_into(self, dim, index, out);
  return out;
}

// ---- scatter family --------------------------------------------------------
// Only the out= overloads are registered: PyTorch's structured wrappers
// (CompositeExplicitAutogradNonFunctional) build the functional and in-place
// ones on top of them, the in-place one passing self as out.

nrt_index_reduce reduce_of(c10::string_view reduce) {
  if (reduce == "add" || reduce == "sum") return NRT_INDEX_SUM;
  if (reduce == "multiply" || reduce == "prod") return NRT_INDEX_PROD;
  if (reduce == "mean") return NRT_INDEX_MEAN;
  if (reduce == "amax") return NRT_INDEX_AMAX;
  if (reduce == "amin") return NRT_INDEX_AMIN;
  TORCH_CHECK(false, "reduce argument must be either sum, prod, mean, amax or amin, got ", reduce);
}

// out = self (unless out is self), then out[index] = reduce(out[index], source).
void scatter_into(nrt_op_code code, const at::Tensor& self, int64_t dim, const at::Tensor& index,
                  const ScatterSource& source, nrt_index_reduce reduce, bool include_self,
                  const at::Tensor& out) {
  const char* name = nrt_op_name(code);
  check_devices(name, self, {index, source.tensor, out});
  if (!out.is_same(self)) out.copy_(self);
  if (index.numel() == 0) return;
  dim = at::maybe_wrap_dim(dim, self.dim());
  NEURON_CHECK_INDEX_RANGE(nonempty_sizes(out)[dim] > 0, name, ": index is out of bounds for dimension ", dim,
                           " with size 0");
  if (source.value) check_scalar_fits(*source.value, out.scalar_type());
  launch_scatter(code, dim_access(out, dim, nonempty_sizes(index), index, nonempty_strides(index)),
                 source, reduce, include_self, 1);
}

ScatterSource tensor_source(const at::Tensor& src) { return {src, nonempty_strides(src), std::nullopt}; }
ScatterSource value_source(const at::Scalar& value) { return {at::Tensor(), {}, value}; }

at::Tensor& scatter_src_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                            const at::Tensor& src, at::Tensor& out) {
  NEURON_TRACK_OP("aten::scatter.src_out");
  c10::DeviceGuard guard(self.device());
  NeuronMeta<at::meta::structured_scatter_src> meta(out);
  meta.meta(self, dim, index, src);
  scatter_into(NRT_OP_SCATTER, self, dim, index, tensor_source(src), NRT_INDEX_ASSIGN, true, out);
  return out;
}

at::Tensor& scatter_value_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                              const at::Scalar& value, at::Tensor& out) {
  NEURON_TRACK_OP("aten::scatter.value_out");
  c10::DeviceGuard guard(self.device());
  NeuronMeta<at::meta::structured_scatter_value> meta(out);
  meta.meta(self, dim, index, value);
  scatter_into(NRT_OP_SCATTER, self, dim, index, value_source(value), NRT_INDEX_ASSIGN, true, out);
  return out;
}

at::Tensor& scatter_reduce_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                               const at::Tensor& src, c10::string_view reduce, at::Tensor& out) {
  NEURON_TRACK_OP("aten::scatter.reduce_out");
  c10::DeviceGuard guard(self.device());
  NeuronMeta<at::meta::structured_scatter_reduce> meta(out);
  meta.meta(self, dim, index, src, reduce);
  scatter_into(NRT_OP_SCATTER, self, dim, index, tensor_source(src), reduce_of(reduce), true, out);
  return out;
}

at::Tensor& scatter_value_reduce_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                                     const at::Scalar& value, c10::string_view reduce, at::Tensor& out) {
  NEURON_TRACK_OP("aten::scatter.value_reduce_out");
  c10::DeviceGuard guard(self.device());
  NeuronMeta<at::meta::structured_scatter_value_reduce> meta(out);
  meta.meta(self, dim, index, value, reduce);
  scatter_into(NRT_OP_SCATTER, self, dim, index, value_source(value), reduce_of(reduce), true, out);
  return out;
}

at::Tensor& scatter_add_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                            const at::Tensor& src, at::Tensor& out) {
  NEURON_TRACK_OP("aten::scatter_add.out");
  c10::DeviceGuard guard(self.device());
  NeuronMeta<at::meta::structured_scatter_add> meta(out);
  meta.meta(self, dim, index, src);
  scatter_into(NRT_OP_SCATTER_ADD, self, dim, index, tensor_source(src), NRT_INDEX_SUM, true, out);
  return out;
}

at::Tensor& scatter_reduce_two_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                                   const at::Tensor& src, c10::string_view reduce, bool include_self,
                                   at::Tensor& out) {
  NEURON_TRACK_OP("aten::scatter_reduce.two_out");
  c10::DeviceGuard guard(self.device());
  NeuronMeta<at::meta::structured_scatter_reduce_two> meta(out);
  meta.meta(self, dim, index, src, reduce, include_self);
  nrt_index_reduce op = reduce_of(reduce);
  TORCH_CHECK(op != NRT_INDEX_MEAN || self.scalar_type() != at::kBool,
              "scatter_reduce: reduce='mean' is not implemented for 'Bool'");
  scatter_into(NRT_OP_SCATTER_REDUCE, self, dim, index, tensor_source(src), op, include_self, out);
  return out;
}

at::Tensor& index_add_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                          const at::Tensor& source, const at::Scalar& alpha, at::Tensor& out) {
  NEURON_TRACK_OP("aten::index_add.out");
  c10::DeviceGuard guard(self.device());
  NeuronMeta<at::meta::structured_index_add> meta(out);
  meta.meta(self, dim, index, source, alpha);
  check_devices("index_add", self, {index, source, out});
  if (!out.is_same(self)) out.copy_(self);
  if (source.numel() == 0 || index.numel() == 0) return out;
  dim = at::maybe_wrap_dim(dim, self.dim());
  NEURON_CHECK_INDEX_RANGE(nonempty_sizes(out)[dim] > 0, "index_add: index is out of bounds for dimension ", dim,
                           " with size 0");
  launch_scatter(NRT_OP_INDEX_ADD, slice_access(out, dim, index, nonempty_sizes(source)),
                 tensor_source(source), NRT_INDEX_SUM, true, alpha);
  return out;
}

at::Tensor& index_copy_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                           const at::Tensor& source, at::Tensor& out) {
  NEURON_TRACK_OP("aten::index_copy.out");
  c10::DeviceGuard guard(self.device());
  NeuronMeta<at::meta::structured_index_copy> meta(out);
  meta.meta(self, dim, index, source);
  check_devices("index_copy", self, {index, source, out});
  if (!out.is_same(self)) out.copy_(self);
  if (index.numel() == 0) return out;
  dim = at::maybe_wrap_dim(dim, self.dim());
  NEURON_CHECK_INDEX_RANGE(nonempty_sizes(out)[dim] > 0, "index_copy: index is out of bounds for dimension ", dim,
                           " with size 0");
  launch_scatter(NRT_OP_INDEX_COPY, slice_access(out, dim, index, nonempty_sizes(source)),
                 tensor_source(source), NRT_INDEX_ASSIGN, true, 1);
  return out;
}

// A host index is copied to the device, as advanced indexing takes host
// index tensors: PyTorch's own device-generic tests fill a device tensor at
// torch.randint positions built on the host (test_sort_and_select.py).
at::Tensor& index_fill_into(at::Tensor& self, int64_t dim, const at::Tensor& host_or_device_index,
                            const ScatterSource& source) {
  const at::Tensor& given = host_or_device_index;
  TORCH_CHECK_INDEX(given.scalar_type() == at::kLong, "index_fill_(): Expected dtype int64 for index.");
  TORCH_CHECK_INDEX(given.dim() <= 1, "index_fill_(): Index is supposed to be a vector");
  const at::Tensor index = given.device().is_cpu() ? given.to(self.device()) : given;
  check_devices("index_fill_", self, {index, source.tensor});
  at::assert_no_partial_overlap(self, index);
  if (at::has_internal_overlap(self) == at::MemOverlap::Yes)
    TORCH_WARN("Use of index_fill_ on expanded tensors is deprecated. Please clone() the tensor before "
               "performing this operation. This also applies to advanced indexing e.g. tensor[mask] = scalar");
  dim = at::maybe_wrap_dim(dim, self.dim());
  if (index.numel() == 0 || self.numel() == 0) return self;
  std::vector<int64_t> shape = nonempty_sizes(self);
  shape[dim] = index.numel();
  launch_scatter(NRT_OP_INDEX_FILL, slice_access(self, dim, index, shape), source, NRT_INDEX_ASSIGN, true, 1);
  return self;
}

at::Tensor& index_fill_scalar_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Scalar& value) {
  NEURON_TRACK_OP("aten::index_fill_.int_Scalar");
  c10::DeviceGuard guard(self.device());
  check_scalar_fits(value, self.scalar_type());
  return index_fill_into(self, dim, index, value_source(value));
}

// A value on the device is read by the kernel as a broadcast operand: no
// synchronisation to learn it.
at::Tensor& index_fill_tensor_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& value) {
  NEURON_TRACK_OP("aten::index_fill_.int_Tensor");
  c10::DeviceGuard guard(self.device());
  TORCH_CHECK(value.dim() == 0, "index_fill_ only supports a 0-dimensional value tensor, but got tensor with ",
              value.dim(), " dimension(s).");
  if (value.device().is_cpu()) return index_fill_into(self, dim, index, value_source(value.item()));
  at::Tensor v = value.to(self.scalar_type());
  return index_fill_into(self, dim, index, {v, std::vector<int64_t>(std::max<int64_t>(self.dim(), 1), 0), std::nullopt});
}

// ---- take, put_ --------------------------------------------------------------

at::Tensor& take_into(const at::Tensor& self, const at::Tensor& index, at::Tensor& out) {
  TORCH_CHECK(index.scalar_type() == at::kLong, "take(): Expected a long tensor for index, but got ",
              index.scalar_type());
  TORCH_CHECK(self.scalar_type() == out.scalar_type(), "take(): self and out expected to have the same dtype, "
              "but got self.dtype = ", self.scalar_type(), " and out.dtype = ", out.scalar_type());
  check_devices("take", self, {index, out});
  at::assert_no_internal_overlap(out);
  at::assert_no_overlap(out, index);
  at::assert_no_overlap(out, self);
  at::native::resize_output(out, index.sizes());
  if (index.numel() == 0) return out;
  TORCH_CHECK_INDEX(self.numel() > 0, "take(): tried to take from an empty tensor");
  launch_gather(NRT_OP_TAKE, out, nonempty_strides(out), flat_access(self.reshape({-1}), index));
  return out;
}

at::Tensor take(const at::Tensor& self, const at::Tensor& index) {
  NEURON_TRACK_OP("aten::take");
  c10::DeviceGuard guard(self.device());
  at::Tensor out = at::empty(index.sizes(), self.options());
  return take_into(self, index, out);
}

at::Tensor& take_out(const at::Tensor& self, const at::Tensor& index, at::Tensor& out) {
  NEURON_TRACK_OP("aten::take.out");
  c10::DeviceGuard guard(self.device());
  return take_into(self, index, out);
}

at::Tensor& put_(at::Tensor& self, const at::Tensor& index, const at::Tensor& source, bool accumulate) {
  NEURON_TRACK_OP("aten::put_");
  c10::DeviceGuard guard(self.device());
  TORCH_CHECK(index.scalar_type() == at::kLong, "put_(): Expected a long tensor for index, but got ",
              index.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(), "put_(): self and source expected to have the same "
              "dtype, but got self.dtype = ", self.scalar_type(), " and source.dtype = ", source.scalar_type());
  TORCH_CHECK(source.numel() == index.numel(), "put_(): Expected source and index to have the same number of "
              "elements, but got source.numel() = ", source.numel(), ", index.numel() = ", index.numel());
  check_devices("put_", self, {index, source});
  at::assert_no_internal_overlap(self);
  at::assert_no_overlap(self, index);
  at::assert_no_overlap(self, source);
  if (index.numel() == 0) return self;
  TORCH_CHECK_INDEX(self.numel() > 0, "put_(): tried to put into an empty tensor");
  // A flat view needs contiguous storage: otherwise put into a copy.
  at::Tensor dense = self.is_contiguous() ? self : self.contiguous();
  at::Tensor values = source.reshape(index.sizes());
  launch_scatter(NRT_OP_PUT, flat_access(dense.view({-1}), index), tensor_source(values),
                 accumulate ? NRT_INDEX_SUM : NRT_INDEX_ASSIGN, true, 1);
  if (!dense.is_same(self)) self.copy_(dense);
  return self;
}

// ---- advanced indexing ------------------------------------------------------

std::string shapes_of(const std::vector<at::Tensor>& tensors) {
  std::ostringstream os;
  const char* sep = "";
  for (const auto& t : tensors)
    if (t.defined()) {
      os << sep << t.sizes();
      sep = ", ";
    }
  return os.str();
}

// The access of self[indices]: boolean masks become their nonzero()
// positions, the index tensors broadcast together, and (as in NumPy) when
// they are not adjacent the indexed dims move to the front.
IndexAccess advanced_access(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& orig,
                            const char* op) {
  TORCH_CHECK(self.device().type() == c10::DeviceType::PrivateUse1,
              "indices should be either on cpu or on the same device as the indexed tensor (", self.device(), ")");
  at::native::checkIndexTensorTypes(orig, /*allow_int=*/true);
  TORCH_CHECK_INDEX(orig.size() <= static_cast<size_t>(self.dim()), "too many indices for tensor of dimension ",
                    self.dim(), " (got ", orig.size(), ")");
  std::vector<at::Tensor> indices = at::native::expandTensors(self, orig, /*ensure_same_device=*/true);
  try {
    indices = at::expand_outplace(indices);
  } catch (std::exception&) {
    TORCH_CHECK_INDEX(false, "shape mismatch: indexing tensors could not be broadcast together with shapes ",
                      shapes_of(indices));
  }
  const int64_t ndim = self.dim();
  indices.resize(static_cast<size_t>(ndim));
  std::vector<int64_t> order(static_cast<size_t>(ndim));
  std::iota(order.begin(), order.end(), 0);
  at::Tensor target = self;
  if (!at::native::hasContiguousSubspace(indices)) {
    std::stable_partition(order.begin(), order.end(), [&](int64_t d) { return indices[d].defined(); });
    std::vector<at::Tensor> moved;
    for (int64_t d : order) moved.push_back(indices[d]);
    indices = std::move(moved);
    target = self.permute(order);
  }
  int64_t before = 0;
  while (before < ndim && !indices[before].defined()) before++;
  TORCH_CHECK_INDEX(before < ndim, op, ": expected at least one index tensor");
  int64_t k = 0;
  while (before + k < ndim && indices[before + k].defined()) k++;
  const int64_t after = ndim - before - k;

  IndexAccess a;
  a.target = std::move(target);  // owned: a local
  const at::Tensor& indexed = a.target;
  at::IntArrayRef replacement = indices[before].sizes();
  for (int64_t d = 0; d < before; d++) {
    a.shape.push_back(indexed.size(d));
    a.target_strides.push_back(indexed.stride(d));
  }
  for (int64_t s : replacement) {
    a.shape.push_back(s);
    a.target_strides.push_back(0);
  }
  for (int64_t d = before + k; d < ndim; d++) {
    a.shape.push_back(indexed.size(d));
    a.target_strides.push_back(indexed.stride(d));
  }
  bool empty_dim = false;
  for (int64_t j = 0; j < k; j++) {
    const at::Tensor& index = indices[before + j];
    a.sizes.push_back(indexed.size(before + j));
    a.strides.push_back(indexed.stride(before + j));
    a.dims.push_back(order[before + j]);
    empty_dim |= indexed.size(before + j) == 0;
    std::vector<int64_t> strides(static_cast<size_t>(before), 0);
    for (int64_t s : index.strides()) strides.push_back(s);
    strides.resize(strides.size() + static_cast<size_t>(after), 0);
    a.indices.push_back(at::Tensor(index));  // owned: from a local vector
    a.index_strides.push_back(std::move(strides));
  }
  TORCH_CHECK_INDEX(!empty_dim || c10::multiply_integers(replacement) == 0,
                    "index is out of bounds for dimension with size 0");
  return a;
}

at::Tensor index(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices) {
  NEURON_TRACK_OP("aten::index.Tensor");
  c10::DeviceGuard guard(self.device());
  IndexAccess a = advanced_access(self, indices, "index");
  if (a.indices.size() > NRT_INDEX_MAX_TENSORS) {
    torch::jit::Stack stack{self, indices};
    run_through_fallback("aten::index", "Tensor", &stack);
    return stack.back().toTensor();
  }
  at::Tensor out = at::empty(a.shape, self.options());
  if (out.numel() > 0) launch_gather(NRT_OP_INDEX, out, out.strides(), a);
  return out;
}

at::Tensor& index_out(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                      at::Tensor& out) {
  NEURON_TRACK_OP("aten::index.Tensor_out");
  c10::DeviceGuard guard(self.device());
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "index_out: expected out of dtype ",
              self.scalar_type(), ", got ", out.scalar_type());
  check_devices("index", self, {out});
  at::assert_no_internal_overlap(out);
  at::assert_no_overlap(out, self);
  IndexAccess a = advanced_access(self, indices, "index");
  if (a.indices.size() > NRT_INDEX_MAX_TENSORS) {
    torch::jit::Stack stack{self, indices, out};
    run_through_fallback("aten::index", "Tensor_out", &stack);
    return out;
  }
  for (const at::Tensor& index : a.indices) at::assert_no_overlap(out, index);
  at::native::resize_output(out, a.shape);
  if (out.numel() > 0) launch_gather(NRT_OP_INDEX, out, out.strides(), a);
  return out;
}

}  // namespace

// self[mask] = v for one boolean (or uint8) mask on self's device, the other
// indices None, and a one-element host value: PyTorch makes this a
// masked_fill_ with v converted to self's dtype (so a float value fills a
// long tensor), and so does this. Also a 0-d value of self's dtype on its
// device (Python's x[mask] = number puts the number there): the same
// elements written with the same value, as a masked_fill_ that reads it on
// the device, whatever the mask's rank (its nonzero would make one index
// tensor per dim, more than the runtime's NRT_INDEX_MAX_TENSORS past 5).
// The mask, unsqueezed over the trailing dims it does not cover, or
// undefined when the call is not of that form.
at::Tensor masked_fill_mask(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                            const at::Tensor& values) {
  const bool device_value = values.dim() == 0 && values.device() == self.device() &&
                            values.scalar_type() == self.scalar_type() &&
                            at::get_overlap_status(self, values) == at::MemOverlapStatus::No;
  if (values.numel() != 1 || !(values.device().is_cpu() || device_value)) return {};
  at::Tensor mask;
  int64_t covered = 0;
  for (const std::optional<at::Tensor>& index : indices) {
    if (!index.has_value() || !index->defined()) {
      covered++;
      continue;
    }
    const at::ScalarType t = index->scalar_type();
    if ((t != at::kBool && t != at::kByte) || index->device() != self.device() || mask.defined()) return {};
    mask = *index;
    for (int64_t j = 0; j < mask.dim(); j++)
      TORCH_CHECK_INDEX(mask.size(j) == self.size(covered + j), "The shape of the mask ", mask.sizes(), " at index ",
                        j, " does not match the shape of the indexed tensor ", self.sizes(), " at index ",
                        covered + j);
    covered += mask.dim();
  }
  if (!mask.defined()) return {};
  for (int64_t d = covered; d < self.dim(); d++) mask = mask.unsqueeze(-1);
  return mask;
}

namespace {

at::Tensor& index_put_impl_(at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                            const at::Tensor& values, bool accumulate, bool unsafe) {
  NEURON_TRACK_OP("aten::_index_put_impl_");
  (void)unsafe;
  c10::DeviceGuard guard(self.device());
  TORCH_CHECK_INDEX(indices.size() <= static_cast<size_t>(self.dim()), "too many indices for tensor of dimension ",
                    self.dim(), " (got ", indices.size(), ")");
  if (at::has_internal_overlap(self) == at::MemOverlap::Yes)
    TORCH_WARN("Use of index_put_ on expanded tensors is deprecated. Please clone() the tensor before "
               "performing this operation. This also applies to advanced indexing e.g. tensor[indices] = tensor");
  if (!accumulate) {
    const at::Tensor mask = masked_fill_mask(self, indices, values);
    if (mask.defined()) return values.device().is_cpu() ? self.masked_fill_(mask, values.item()) : self.masked_fill_(mask, values);
  }
  // A RuntimeError as on the CPU (whose kernels fail on their own asserts
  // here); `index` without indices raises IndexError on both.
  bool any_index = false;
  for (const std::optional<at::Tensor>& index : indices) any_index |= index.has_value() && index->defined();
  TORCH_CHECK(any_index, "index_put_: expected at least one index tensor, got none");
  bool host_scalar = values.device().is_cpu() && values.dim() == 0;
  if (!host_scalar) {
    check_devices("index_put_", self, {values});
    at::assert_no_overlap(self, values);
  }
  for (const std::optional<at::Tensor>& index : indices)
    if (index.has_value() && index->defined()) at::assert_no_overlap(self, *index);
  IndexAccess a = advanced_access(self, indices, "index_put_");
  if (a.indices.size() > NRT_INDEX_MAX_TENSORS) {
    torch::jit::Stack stack{self, indices, values, accumulate, unsafe};
    run_through_fallback("aten::_index_put_impl_", "", &stack);
    return self;
  }
  // The CPU's order: the shape, then the dtype.
  TORCH_CHECK(at::is_expandable_to(values.sizes(), a.shape), "shape mismatch: value tensor of shape ",
              values.sizes(), " cannot be broadcast to indexing result of shape ", at::IntArrayRef(a.shape));
  TORCH_CHECK(values.scalar_type() == self.scalar_type(),
              "Index put requires the source and destination dtypes match, got ", self.scalar_type(),
              " for the destination and ", values.scalar_type(), " for the source.");
  if (c10::multiply_integers(a.shape) == 0) return self;
  ScatterSource source;
  if (host_scalar) {
    source.value = values.item();
  } else {
    source.tensor = values.expand(a.shape);
    source.strides = source.tensor.strides().vec();
  }
  launch_scatter(NRT_OP_INDEX_PUT, a, source, accumulate ? NRT_INDEX_SUM : NRT_INDEX_ASSIGN, true, 1);
  return self;
}

// ---- embedding backward -----------------------------------------------------

at::Tensor embedding_dense_backward(const at::Tensor& grad_output, const at::Tensor& indices,
                                    int64_t num_weights, int64_t padding_idx, bool scale_grad_by_freq) {
  NEURON_TRACK_OP("aten::embedding_dense_backward");
  c10::DeviceGuard guard(grad_output.device());
  at::checkScalarTypes("embedding_backward", at::TensorArg(indices, "indices", 2), {at::kLong, at::kInt});
  check_devices("embedding_backward", grad_output, {indices});
  const int64_t n = indices.numel(), d = grad_output.dim() == 0 ? 1 : grad_output.size(-1);
  at::Tensor grad = grad_output.reshape({n, d});
  at::Tensor flat = indices.reshape({n});
  at::Tensor grad_weight = at::empty({num_weights, d}, grad_output.options());
  if (grad_weight.numel() == 0) return grad_weight;
  nrt_op op{};
  op.code = NRT_OP_EMBEDDING_DENSE_BACKWARD;
  op.num_operands = 3;
  op.num_outputs = 1;
  op.operands[0] = to_view(grad_weight, "embedding_dense_backward");
  op.operands[1] = to_view(grad, "embedding_dense_backward");
  op.operands[2] = to_view(flat, "embedding_dense_backward");
  op.num_scalars = 2;
  op.scalars[0].i = padding_idx;
  op.scalars[1].i = scale_grad_by_freq;
  launch(grad_output.device().index(), op);
  return grad_weight;
}

// ---- searchsorted -----------------------------------------------------------

at::Tensor& searchsorted_into(const at::Tensor& sorted, const at::Tensor& self, bool out_int32, bool right,
                              std::optional<c10::string_view> side, const std::optional<at::Tensor>& sorter_opt,
                              at::Tensor& out) {
  c10::DeviceGuard guard(sorted.device());
  at::Tensor sorter = sorter_opt.value_or(at::Tensor());
  // PyTorch's checks, except the sorter's range: the kernel checks that.
  at::native::searchsorted_pre_check(sorted, self, out, out_int32, right, side, at::Tensor());
  if (sorter.defined()) {
    TORCH_CHECK(sorter.device() == sorted.device(), "torch.searchsorted(): sorter and boundary tensors should ",
                "have same device type, but got sorter tensor device type ", sorter.device(),
                " and input value tensor device type ", sorted.device());
    TORCH_CHECK(sorter.sizes() == sorted.sizes(), "torch.searchsorted(): boundary and sorter must have the same "
                "size, but got boundary tensor ", sorted.sizes(), "and got sorter tensor ", sorter.sizes());
    TORCH_CHECK(sorter.scalar_type() == at::kLong, "torch.searchsorted(): sorter must be a tensor of long ",
                "dtype but got dtype ", sorter.scalar_type());
  }
  check_devices("searchsorted", sorted, {out});
  at::native::resize_output(out, self.sizes());
  if (self.numel() == 0) return out;
  at::Tensor values, boundaries, sorter_c;
  at::native::searchsorted_maybe_trim_input_tensors(values, boundaries, sorter_c, self, sorted, sorter);
  if (!values.defined()) values = self;
  if (!boundaries.defined()) boundaries = sorted;
  if (!sorter_c.defined()) sorter_c = sorter;
  TORCH_CHECK(values.scalar_type() != at::kBool, "\"searchsorted_out_cpu\" not implemented for 'Bool'");
  const int64_t m = boundaries.size(-1), rows = boundaries.numel() / std::max<int64_t>(m, 1);
  const int64_t n = values.dim() == 0 ? 1 : values.size(-1), value_rows = values.numel() / n;
  at::Tensor result = out.is_contiguous() ? out : at::empty(out.sizes(), out.options());
  const char* name = "searchsorted";
  nrt_op op{};
  op.code = NRT_OP_SEARCHSORTED;
  op.num_outputs = 1;
  op.num_operands = sorter_c.defined() ? 4 : 3;
  op.operands[0] = view_over(result, {value_rows, n}, {n, 1}, name);
  op.operands[1] = view_over(boundaries, {boundaries.dim() == 1 ? 1 : rows, m}, {m, 1}, name);
  op.operands[2] = view_over(values, {value_rows, n}, {n, 1}, name);
  if (sorter_c.defined())
    op.operands[3] = view_over(sorter_c, {boundaries.dim() == 1 ? 1 : rows, m}, {m, 1}, name);
  op.num_scalars = 1;
  op.scalars[0].i = right || (side && *side == "right");
  launch(sorted.device().index(), op);
  if (!result.is_same(out)) out.copy_(result);
  return out;
}

at::Tensor searchsorted(const at::Tensor& sorted, const at::Tensor& self, bool out_int32, bool right,
                        std::optional<c10::string_view> side, const std::optional<at::Tensor>& sorter) {
  NEURON_TRACK_OP("aten::searchsorted.Tensor");
  at::Tensor out = at::empty({0}, self.options().dtype(out_int32 ? at::kInt : at::kLong));
  return searchsorted_into(sorted, self, out_int32, right, side, sorter, out);
}

at::Tensor& searchsorted_out(const at::Tensor& sorted, const at::Tensor& self, bool out_int32, bool right,
                             std::optional<c10::string_view> side, const std::optional<at::Tensor>& sorter,
                             at::Tensor& out) {
  NEURON_TRACK_OP("aten::searchsorted.Tensor_out");
  return searchsorted_into(sorted, self, out_int32, right, side, sorter, out);
}

at::Tensor searchsorted_scalar(const at::Tensor& sorted, const at::Scalar& self, bool out_int32, bool right,
                               std::optional<c10::string_view> side, const std::optional<at::Tensor>& sorter) {
  NEURON_TRACK_OP("aten::searchsorted.Scalar");
  c10::DeviceGuard guard(sorted.device());
  at::Tensor value = at::native::searchsorted_scalar_tensor(self, sorted.device());
  at::Tensor out = at::empty({0}, sorted.options().dtype(out_int32 ? at::kInt : at::kLong));
  return searchsorted_into(sorted, value, out_int32, right, side, sorter, out);
}

}  // namespace

NEURON_LIBRARY_IMPL(aten, m) {
  m.impl("index_select", complex_path_first("index_select", index_select, try_complex_index_select));
  m.impl("index_select.out", complex_path_first("index_select.out", index_select_out, try_complex_index_select_out));
  m.impl("gather", complex_path_first("gather", gather, try_complex_gather));
  m.impl("gather.out", complex_path_first("gather.out", gather_out, try_complex_gather_out));
  m.impl("scatter.src_out", complex_path_first("scatter.src_out", scatter_src_out, try_complex_scatter_src_out));
  m.impl("scatter.value_out", complex_path_first("scatter.value_out", scatter_value_out, try_complex_scatter_value_out));
  m.impl("scatter.reduce_out", complex_path_first("scatter.reduce_out", scatter_reduce_out, try_complex_scatter_reduce_out));
  m.impl("scatter.value_reduce_out",
         complex_path_first("scatter.value_reduce_out", scatter_value_reduce_out, try_complex_scatter_value_reduce_out));
  m.impl("scatter_add.out", complex_path_first("scatter_add.out", scatter_add_out, try_complex_scatter_add_out));
  m.impl("scatter_reduce.two_out",
         complex_path_first("scatter_reduce.two_out", scatter_reduce_two_out, try_complex_scatter_reduce_two_out));
  m.impl("index_add.out", complex_path_first("index_add.out", index_add_out, try_complex_index_add_out));
  m.impl("index_copy.out", complex_path_first("index_copy.out", index_copy_out, try_complex_index_copy_out));
  m.impl("index_fill_.int_Scalar",
         complex_path_first("index_fill_.int_Scalar", index_fill_scalar_, try_complex_index_fill_scalar_));
  m.impl("index_fill_.int_Tensor",
         complex_path_first("index_fill_.int_Tensor", index_fill_tensor_, try_complex_index_fill_tensor_));
  m.impl("take", complex_path_first("take", take, try_complex_take));
  m.impl("take.out", complex_path_first("take.out", take_out, try_complex_take_out));
  m.impl("put_", complex_path_first("put_", put_, try_complex_put_));
  m.impl("index.Tensor", complex_path_first("index.Tensor", index, try_complex_index));
  m.impl("index.Tensor_out", complex_path_first("index.Tensor_out", index_out, try_complex_index_out));
  m.impl("_index_put_impl_", complex_path_first("_index_put_impl_", index_put_impl_, try_complex_index_put_));
  m.impl("embedding_dense_backward", embedding_dense_backward);
  m.impl("searchsorted.Tensor", searchsorted);
  m.impl("searchsorted.Tensor_out", searchsorted_out);
  m.impl("searchsorted.Scalar", searchsorted_scalar);
}

}  // namespace torchneuron
