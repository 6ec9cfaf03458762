// Helpers shared by the vision registrations (pooling, upsampling,
// convolution): outputs of structured ops, 4-d image views, op building.
#pragma once

#include <ATen/ATen.h>
#include <ATen/native/Resize.h>

#include <array>
#include <initializer_list>
#include <optional>
#include <utility>

#include "tensor_view.h"

namespace torchneuron {
namespace vision {

// Runs a structured op's meta function with neuron outputs: new tensors for
// a functional call, or the given out= tensors, checked and resized with the
// messages PyTorch's generated code uses. The kernels take any strides, so
// an out= tensor is used as it is (no proxy).
template <class Meta, size_t N>
class Outputs final : public Meta {
 public:
  explicit Outputs(std::array<at::Tensor, N> given = {}) : tensors_(std::move(given)) {
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
    TORCH_CHECK(options.dtype() == t.dtype(), "Expected out tensor to have dtype ", options.dtype(),
                ", but got ", t.dtype(), " instead");
    TORCH_CHECK(options.device() == t.device(), "Expected out tensor to have device ",
                options.device(), ", but got ", t.device(), " instead");
    if (at::native::resize_output(t, sizes) && !strides.empty()) t.as_strided_(sizes, strides);
  }

  std::array<at::Tensor, N> tensors_;
  std::array<bool, N> given_{};
};

// The [N, C, H, W] view of an image: a 3-d tensor is a batch of one, and
// with as_1d a [N, C, L] (or [C, L]) tensor is an image of height 1.
nrt_tensor_view image_view(const at::Tensor& t, const char* op, bool as_1d = false);

// Element i of a pooling argument given as one value or one per dim;
// an empty list means fallback (a pool's stride defaults to its kernel).
int64_t pair_at(at::IntArrayRef values, size_t i, at::IntArrayRef fallback = {});

// Builds an nrt_op: outputs first, then inputs, then scalars.
class OpBuilder {
 public:
  OpBuilder(nrt_op_code code, int32_t outputs);
  OpBuilder& view(const nrt_tensor_view& v);
  OpBuilder& image(const at::Tensor& t, bool as_1d = false);
  OpBuilder& integer(int64_t v);
  OpBuilder& real(double v);
  // Launches on the current stream of t's device.
  void launch(const at::Tensor& t);
  const char* name() const { return nrt_op_name(op_.code); }

 private:
  nrt_op op_{};
};

// The scale a structured upsample op received, or 0 when none was given.
inline double scale_or_zero(std::optional<double> s) { return s.has_value() ? *s : 0.0; }

}  // namespace vision
}  // namespace torchneuron
