// Outputs of structured ATen ops computed on neuron.
//
// Structured ops (softmax, nll_loss, sum, ...) have a meta function that
// checks the arguments and states each output's shape, strides and dtype.
// Outputs<Meta, N> runs it with neuron outputs: new tensors for a
// functional call, or the given out= / in-place tensors, checked and
// resized with the messages PyTorch's generated code uses.
#pragma once

#include <ATen/ATen.h>
#include <ATen/native/Resize.h>

#include <array>

namespace torchneuron {

template <class Meta, size_t N>
class Outputs final : public Meta {
 public:
  explicit Outputs(std::array<at::Tensor, N> given = {}, bool inplace = false)
      : tensors_(std::move(given)), inplace_(inplace) {
    for (size_t i = 0; i < N; i++) given_[i] = tensors_[i].defined();
  }

  void set_output_raw_strided(int64_t i, at::IntArrayRef sizes, at::IntArrayRef strides,
                              at::TensorOptions options) override {
    set(i, sizes, strides, options);
  }
  void set_output_strided(int64_t i, at::IntArrayRef sizes, at::IntArrayRef strides,
                          at::TensorOptions options) override {
    set(i, sizes, strides, options);
  }
  const at::Tensor& maybe_get_output(int64_t i) override { return tensors_[i]; }
  at::Tensor& operator[](size_t i) { return tensors_[i]; }

 private:
  void set(int64_t i, at::IntArrayRef sizes, at::IntArrayRef strides, at::TensorOptions options) {
    at::Tensor& t = tensors_[i];
    if (!given_[i]) {
      t = strides.empty() ? at::empty(sizes, options) : at::empty_strided(sizes, strides, options);
      return;
    }
    if (inplace_) {
      TORCH_CHECK(options.dtype() == t.dtype(), "Bad in-place call: input tensor dtype ", t.dtype(),
                  " and output tensor dtype ", options.dtype(), " should match");
      TORCH_CHECK(options.device() == t.device(), "Bad in-place call: input tensor device ",
                  t.device(), " and output tensor device ", options.device(), " should match");
      TORCH_CHECK(sizes == t.sizes(), "Bad in-place call: input tensor size ", t.sizes(),
                  " and output tensor size ", sizes, " should match");
      return;
    }
    TORCH_CHECK(options.dtype() == t.dtype(), "Expected out tensor to have dtype ", options.dtype(),
                ", but got ", t.dtype(), " instead");
    TORCH_CHECK(options.device() == t.device(), "Expected out tensor to have device ",
                options.device(), ", but got ", t.device(), " instead");
    if (at::native::resize_output(t, sizes) && !strides.empty()) t.as_strided_(sizes, strides);
  }

  std::array<at::Tensor, N> tensors_;
  std::array<bool, N> given_{};
  bool inplace_;
};

// out= of an op computed functionally: out resized as PyTorch resizes out=
// tensors (with its warning), then given the result's values.
inline at::Tensor& assign_out(at::Tensor& out, const at::Tensor& result) {
  at::native::resize_output(out, result.sizes());
  return out.copy_(result);
}

}  // namespace torchneuron
