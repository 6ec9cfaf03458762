// Helpers shared by the vision registrations (pooling, upsampling,
// convolution): outputs of structured ops, 4-d image views, op building.
#pragma once

#include <ATen/ATen.h>
#include <ATen/native/Resize.h>

#include <array>
#include <initializer_list>
#include <optional>
#include <utility>

#include "structured_outputs.h"  // Outputs: structured meta functions with given out= tensors
#include "tensor_view.h"

namespace torchneuron {
namespace vision {

using ::torchneuron::Outputs;  // structured outputs, shared with reduce and nn

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
