// Shared by the shape-family registrations (shape.cpp, sort.cpp): running
// PyTorch's own structured meta functions with neuron outputs, and small
// builders of nrt_op descriptors.
#pragma once

#include <ATen/ATen.h>
#include <ATen/native/Resize.h>

#include <array>

#include "tensor_view.h"
#include "op_scalars.h"
#include "neuron_device.h"

namespace torchneuron {

// A structured kernel's meta function (Meta = at::meta::structured_<op>)
// run with neuron outputs, the way PyTorch's generated wrappers do it:
// functional outputs are allocated with the strides the meta function
// asks for; out= tensors are checked (dtype, device) and resized; in-place
// outputs must already have the result's geometry.
template <class Meta, size_t N>
struct NeuronStructured final : Meta {
  enum class Kind { Functional, Out, Inplace };

  explicit NeuronStructured(const char* name) : name_(name) {}
  NeuronStructured(const char* name, Kind kind, std::array<at::Tensor, N> given)
      : outputs(std::move(given)), kind_(kind), name_(name) {}

  void set_output_strided(int64_t i, at::IntArrayRef sizes, at::IntArrayRef strides,
                          at::TensorOptions options) override {
    set_output_raw_strided(i, sizes, strides, options);
  }

  void set_output_raw_strided(int64_t i, at::IntArrayRef sizes, at::IntArrayRef strides,
                              at::TensorOptions options) override {
    at::Tensor& out = outputs[i];
    if (kind_ == Kind::Functional) {
      out = strides.empty() ? at::empty(sizes, options) : at::empty_strided(sizes, strides, options);
      return;
    }
    TORCH_CHECK(options.dtype() == out.dtype(), name_, ": expected out tensor to have dtype ",
                options.dtype(), ", but got ", out.dtype(), " instead");
    TORCH_CHECK(options.device() == out.device(), name_, ": expected out tensor to have device ",
                options.device(), ", but got ", out.device(), " instead");
    if (kind_ == Kind::Inplace) {
      TORCH_CHECK(sizes == out.sizes(), name_, ": bad in-place call: input tensor size ",
                  out.sizes(), " and output tensor size ", sizes, " should match");
      return;
    }
    if (at::native::resize_output(out, sizes)) {
      if (!strides.empty())
        out.as_strided_(sizes, strides);
      else if (options.memory_format_opt().has_value())
        out.unsafeGetTensorImpl()->empty_tensor_restride(*options.memory_format_opt());
    }
  }

  const at::Tensor& maybe_get_output(int64_t i) override { return outputs[i]; }

  std::array<at::Tensor, N> outputs;

 private:
  Kind kind_ = Kind::Functional;
  const char* name_;
};

// Rejects tensors on another device than `device`, naming the op.
inline void check_device(const at::Tensor& t, const c10::Device& device, const char* op) {
  TORCH_CHECK(t.device() == device, op, ": expected all tensors to be on ", device,
              ", but found one on ", t.device());
}

// An op descriptor over the given tensors (outputs first) and scalars.
nrt_op make_op(nrt_op_code code, std::initializer_list<const at::Tensor*> operands, int outputs,
               std::initializer_list<nrt_scalar> scalars);

// True if a and b share any memory (outputs that alias inputs go through a
// temporary).
bool overlaps(const at::Tensor& a, const at::Tensor& b);

}  // namespace torchneuron
