// Describing ATen tensors to the runtime: dtype mapping and nrt_tensor_view.
#pragma once

#include <ATen/Tensor.h>
#include <c10/util/MaybeOwned.h>

#include <utility>

#include "neuronrt/nrt.h"

namespace torchneuron {

// A tensor argument of an op: borrowed from the caller where possible. A
// copy of an at::Tensor whose only other owner is its Python object makes
// PyTorch take the GIL to keep that object alive (and again on release), so
// hot paths never copy caller tensors. Built from an lvalue it borrows (the
// lvalue must outlive it); from an rvalue, or by assignment of one, it owns.
class TensorRef {
 public:
  TensorRef() : t_(c10::MaybeOwned<at::Tensor>::owned(std::in_place)) {}
  TensorRef(const at::Tensor& t) : t_(c10::MaybeOwned<at::Tensor>::borrowed(t)) {}  // NOLINT
  TensorRef(at::Tensor&& t) : t_(c10::MaybeOwned<at::Tensor>::owned(std::move(t))) {}  // NOLINT
  operator const at::Tensor&() const { return *t_; }  // NOLINT
  const at::Tensor& operator*() const { return *t_; }
  const at::Tensor* operator->() const { return &*t_; }

 private:
  c10::MaybeOwned<at::Tensor> t_;
};

// True if the runtime's kernels handle this dtype.
bool has_runtime_dtype(at::ScalarType type);
// Throws an error naming op and dtype if the runtime has no such dtype. The
// storage dtypes (complex64/128, uint16/32/64) count as missing here: only
// the ops that take them (nrt_op_accepts_dtype) use to_storage_dtype.
nrt_dtype to_runtime_dtype(at::ScalarType type, const char* op);
// True for complex64, complex128, uint16, uint32 and uint64: dtypes neuron
// tensors hold and move, but that most kernels do not compute in.
bool is_storage_dtype(at::ScalarType type);
// Every dtype a neuron tensor may have, storage dtypes included.
nrt_dtype to_storage_dtype(at::ScalarType type, const char* op);
// The view of a neuron tensor (device address of its first element). Any
// dtype a neuron tensor may have: launch() refuses an op whose runtime
// kernel does not take it, before it runs.
nrt_tensor_view to_view(const at::Tensor& tensor, const char* op);

// The views of a and b (one shape) for an elementwise op (a copy, a fill)
// with their size-1 dims dropped and neighbouring dims merged where both
// step alike: how a tensor with more dims than the runtime's NRT_MAX_DIMS
// still reaches it. Raises to_view's error if even that leaves too many.
void elementwise_views(const at::Tensor& a, const at::Tensor& b, nrt_tensor_view* va, nrt_tensor_view* vb,
                       const char* op);
// Rejects a scalar that does not fit dtype, with PyTorch's own message.
void check_scalar_fits(const at::Scalar& value, at::ScalarType dtype);
// Launches a filled-in descriptor on the current stream of device. An
// operand of a dtype the op's runtime kernel does not take is refused with
// NotImplementedError (as a missing dtype was refused before the storage
// dtypes existed), before anything runs.
void launch(c10::DeviceIndex device, const nrt_op& op);

}  // namespace torchneuron
