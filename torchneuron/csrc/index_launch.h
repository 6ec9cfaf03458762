// Building and launching the runtime's index ops (neuronrt/ops/index.h)
// from ATen tensors: views with chosen geometry, indexed accesses for the
// gather-like and scatter-like ops, and reading small results back.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <vector>

#include "neuronrt/nrt.h"
#include "tensor_view.h"

namespace torchneuron {

// An indexed access over the positions of `shape`: the tensor read or
// written (the target) seen over shape with stride 0 where indices replace
// its dims, and per index tensor the target dim it selects (size, stride)
// and its own strides over shape.
struct IndexAccess {
  TensorRef target;  // borrowed from the caller, or owned
  std::vector<int64_t> shape;
  std::vector<int64_t> target_strides;
  std::vector<int64_t> sizes, strides, dims;  // per index, of the target
  std::vector<TensorRef> indices;
  std::vector<std::vector<int64_t>> index_strides;
};

// Sizes and strides of t as a tensor of at least one dim (a 0-d tensor is
// seen as [1]), the way PyTorch's dim-wise index ops treat scalars.
std::vector<int64_t> nonempty_sizes(const at::Tensor& t);
std::vector<int64_t> nonempty_strides(const at::Tensor& t);

// The access of one dim: target indexed along dim by index, whose strides
// over shape are given (its own, or 0 except along dim for 1-d indices).
IndexAccess dim_access(const at::Tensor& target, int64_t dim, std::vector<int64_t> shape,
                       const at::Tensor& index, std::vector<int64_t> index_strides);

// A view of t's memory (from its first element) with the given geometry.
nrt_tensor_view view_over(const at::Tensor& t, at::IntArrayRef shape, at::IntArrayRef strides,
                          const char* op);

nrt_scalar to_nrt_scalar(const at::Scalar& s);

// Throws unless every defined tensor is on device's neuron device.
void check_devices(const char* op, const at::Tensor& self, std::initializer_list<at::Tensor> others);


// out (viewed over the access's shape with out_strides) = target[indices].
void launch_gather(nrt_op_code code, const at::Tensor& out, at::IntArrayRef out_strides,
                   const IndexAccess& access);

// The values a scatter-like op combines: a tensor viewed over the access's
// shape with the given strides, or a scalar.
struct ScatterSource {
  at::Tensor tensor;
  std::vector<int64_t> strides;
  std::optional<at::Scalar> value;
};

// target[indices] = reduce(target[indices], source).
void launch_scatter(nrt_op_code code, const IndexAccess& access, const ScatterSource& source,
                    nrt_index_reduce reduce, bool include_self, const at::Scalar& alpha);

// Copies the first n int64 elements of a neuron tensor to the host (a
// synchronisation: pending errors of the stream surface here).
std::vector<int64_t> read_int64s(const at::Tensor& t, int64_t n);

// index_put_ as a masked_fill_ (index.cpp): for self[mask] = v with one
// boolean mask and a one-element host value or a 0-d value of self's dtype
// on its device, the mask unsqueezed over the trailing dims it does not
// cover; undefined for any other call.
at::Tensor masked_fill_mask(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                            const at::Tensor& values);

// [min, max] of a non-empty integer tensor (synchronises).
std::pair<int64_t, int64_t> integer_bounds(const at::Tensor& t, const char* op);

}  // namespace torchneuron
