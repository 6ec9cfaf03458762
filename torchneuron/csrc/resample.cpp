// Resampling by tap tables: upsample_bicubic2d and the antialiased
// _upsample_{bilinear,bicubic,lanczos}2d_aa, with their backward ops and
// out= forms (runtime ops UPSAMPLE_BICUBIC2D and UPSAMPLE_AA2D).
//
// Structured ops: PyTorch's meta functions check the arguments and size
// the outputs. The runtime computes in the floating dtypes and resamples
// uint8 images forward in the CPU's fixed point (resample_u8.c); the CPU has
// no uint8 backward, and neither do we (its error, raised here).
#include <ATen/ATen.h>
#include <ATen/ops/_upsample_bicubic2d_aa_backward_meta.h>
#include <ATen/ops/_upsample_bicubic2d_aa_meta.h>
#include <ATen/ops/_upsample_bilinear2d_aa_backward_meta.h>
#include <ATen/ops/_upsample_bilinear2d_aa_meta.h>
#include <ATen/ops/_upsample_lanczos2d_aa_backward_meta.h>
#include <ATen/ops/_upsample_lanczos2d_aa_meta.h>
#include <ATen/ops/upsample_bicubic2d_backward_meta.h>
#include <ATen/ops/upsample_bicubic2d_meta.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "fallback.h"
#include "op_tracking.h"
#include "vision_common.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {

using vision::OpBuilder;
using vision::Outputs;
using vision::scale_or_zero;
using OptScale = std::optional<double>;

// The filter scalar of UPSAMPLE_AA2D, or -1 for bicubic (UPSAMPLE_BICUBIC2D).
constexpr int64_t kBicubic = -1, kAaBilinear = 0, kAaBicubic = 1, kAaLanczos = 2;

bool runtime_dtype(const at::Tensor& t, bool backward = false) {
  switch (t.scalar_type()) {
    case at::kFloat: case at::kDouble: case at::kBFloat16: case at::kHalf:
      return true;
    case at::kByte:
      return !backward;
    default:
      return false;
  }
}

// Integer inputs are refused natively in run_resample(); the rest (complex) goes to the CPU.
bool through_fallback(const at::Tensor& self) {
  return !runtime_dtype(self) && !at::isIntegralType(self.scalar_type(), /*includeBool=*/true);
}

// The CPU's error for a uint8 gradient (its backward kernels dispatch over
// the floating dtypes only).
void refuse_u8_backward(const at::Tensor& grad_output, int64_t filter) {
  if (grad_output.scalar_type() != at::kByte) return;
  const char* name = filter == kBicubic      ? "upsample_bicubic2d_backward"
                     : filter == kAaBilinear ? "upsample_bilinear2d_aa_backward_cpu"
                     : filter == kAaBicubic  ? "upsample_bicubic2d_aa_backward_cpu"
                                             : "upsample_lanczos2d_aa_backward_cpu";
  TORCH_CHECK_NOT_IMPLEMENTED(false, "\"", name, "\" not implemented for 'Byte'");
}

void run_resample(int64_t filter, bool backward, const at::Tensor& dst, const at::Tensor& src, bool align_corners,
         OptScale scale_h, OptScale scale_w) {
  // As the CPU: its antialiased weights exist for float and double only.
  TORCH_CHECK_NOT_IMPLEMENTED(filter == kBicubic || src.scalar_type() == at::kByte ||
                                  (at::isFloatingType(src.scalar_type()) && src.element_size() >= 4),
                              "\"compute_index_ranges_weights\" not implemented for '", src.scalar_type(), "'");
  // As the CPU: bicubic takes uint8 but no other integer dtype.
  TORCH_CHECK_NOT_IMPLEMENTED(filter != kBicubic || backward || src.scalar_type() == at::kByte ||
                                  !at::isIntegralType(src.scalar_type(), /*includeBool=*/true),
                              "\"compute_indices_weights_cubic\" not implemented for '", src.scalar_type(), "'");
  if (dst.numel() == 0 || src.numel() == 0) return;
  nrt_op_code code = filter == kBicubic
                         ? (backward ? NRT_OP_UPSAMPLE_BICUBIC2D_BACKWARD : NRT_OP_UPSAMPLE_BICUBIC2D)
                         : (backward ? NRT_OP_UPSAMPLE_AA2D_BACKWARD : NRT_OP_UPSAMPLE_AA2D);
  OpBuilder b(code, 1);
  b.image(dst).image(src);
  b.real(scale_or_zero(scale_h)).real(scale_or_zero(scale_w)).integer(align_corners);
  if (filter != kBicubic) b.integer(filter);
  b.launch(dst);
}

#define ARGS_ output_size, align_corners, scales_h, scales_w
#define BWD_ARGS_ output_size, input_size, align_corners, scales_h, scales_w

#define RESAMPLE_OPS_(fn, filter)                                                                        \
  at::Tensor fn(const at::Tensor& self, at::IntArrayRef output_size, bool align_corners, OptScale scales_h, \
                OptScale scales_w) {                                                                     \
    if (through_fallback(self))                                                                          \
      return call_through_fallback("aten::" #fn, "", self, output_size, align_corners, scales_h, scales_w)    \
          .back()                                                                                        \
          .toTensor();                                                                                   \
    NEURON_TRACK_OP("aten::" #fn);                                                                       \
    c10::DeviceGuard guard(self.device());                                                               \
    Outputs<at::meta::structured_##fn, 1> o;                                                             \
    o.meta(self, ARGS_);                                                                                 \
    run_resample(filter, false, o[0], self, align_corners, scales_h, scales_w);                                   \
    return o[0];                                                                                         \
  }                                                                                                      \
  at::Tensor& fn##_out(const at::Tensor& self, at::IntArrayRef output_size, bool align_corners,         \
                       OptScale scales_h, OptScale scales_w, at::Tensor& out) {                          \
    if (through_fallback(self)) {                                                                        \
      call_through_fallback("aten::" #fn, "out", self, output_size, align_corners, scales_h, scales_w, out);  \
      return out;                                                                                        \
    }                                                                                                    \
    NEURON_TRACK_OP("aten::" #fn ".out");                                                                \
    c10::DeviceGuard guard(self.device());                                                               \
    Outputs<at::meta::structured_##fn, 1> o({out});                                                      \
    o.meta(self, ARGS_);                                                                                 \
    run_resample(filter, false, out, self, align_corners, scales_h, scales_w);                                    \
    return out;                                                                                          \
  }                                                                                                      \
  at::Tensor fn##_backward(const at::Tensor& grad_output, at::IntArrayRef output_size,                  \
                           at::IntArrayRef input_size, bool align_corners, OptScale scales_h,            \
                           OptScale scales_w) {                                                          \
    refuse_u8_backward(grad_output, filter);                                                             \
    if (!runtime_dtype(grad_output, true))                                                               \
      return call_through_fallback("aten::" #fn "_backward", "", grad_output, BWD_ARGS_).back().toTensor();   \
    NEURON_TRACK_OP("aten::" #fn "_backward");                                                           \
    c10::DeviceGuard guard(grad_output.device());                                                        \
    Outputs<at::meta::structured_##fn##_backward, 1> o;                                                  \
    o.meta(grad_output, BWD_ARGS_);                                                                      \
    run_resample(filter, true, o[0], grad_output, align_corners, scales_h, scales_w);                             \
    return o[0];                                                                                         \
  }                                                                                                      \
  at::Tensor& fn##_backward_out(const at::Tensor& grad_output, at::IntArrayRef output_size,             \
                                at::IntArrayRef input_size, bool align_corners, OptScale scales_h,       \
                                OptScale scales_w, at::Tensor& grad_input) {                             \
    refuse_u8_backward(grad_output, filter);                                                             \
    if (!runtime_dtype(grad_output, true)) {                                                             \
      call_through_fallback("aten::" #fn "_backward", "grad_input", grad_output, BWD_ARGS_, grad_input);      \
      return grad_input;                                                                                 \
    }                                                                                                    \
    NEURON_TRACK_OP("aten::" #fn "_backward.grad_input");                                                \
    c10::DeviceGuard guard(grad_output.device());                                                        \
    Outputs<at::meta::structured_##fn##_backward, 1> o({grad_input});                                    \
    o.meta(grad_output, BWD_ARGS_);                                                                      \
    run_resample(filter, true, grad_input, grad_output, align_corners, scales_h, scales_w);                       \
    return grad_input;                                                                                   \
  }

RESAMPLE_OPS_(upsample_bicubic2d, kBicubic)
RESAMPLE_OPS_(_upsample_bilinear2d_aa, kAaBilinear)
RESAMPLE_OPS_(_upsample_bicubic2d_aa, kAaBicubic)
RESAMPLE_OPS_(_upsample_lanczos2d_aa, kAaLanczos)

#define REGISTER_(m, fn)                                 \
  m.impl(#fn, fn);                                       \
  m.impl(#fn ".out", fn##_out);                          \
  m.impl(#fn "_backward", fn##_backward);                \
  m.impl(#fn "_backward.grad_input", fn##_backward_out);

NEURON_LIBRARY_IMPL(aten, m) {
  REGISTER_(m, upsample_bicubic2d)
  REGISTER_(m, _upsample_bilinear2d_aa)
  REGISTER_(m, _upsample_bicubic2d_aa)
  REGISTER_(m, _upsample_lanczos2d_aa)
}

// This file's macros end here (the unity build puts files one after another).
#undef ARGS_
#undef BWD_ARGS_
#undef REGISTER_
#undef RESAMPLE_OPS_
}  // namespace
}  // namespace torchneuron
