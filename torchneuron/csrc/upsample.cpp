// Upsampling: nearest, nearest-exact and (bi)linear, 1-d and 2-d, with
// their backward ops.
//
// All are structured ops: PyTorch's meta functions check the arguments and
// size the outputs; the runtime gets [N, C, H, W] views (a 1-d op is the
// 2-d one with H = 1, whose row tables are then the identity) and the user's
// scale factors, which PyTorch's index arithmetic uses when given.
#include <ATen/ATen.h>
#include <ATen/ops/_upsample_nearest_exact1d_backward_meta.h>
#include <ATen/ops/_upsample_nearest_exact1d_meta.h>
#include <ATen/ops/_upsample_nearest_exact2d_backward_meta.h>
#include <ATen/ops/_upsample_nearest_exact2d_meta.h>
#include <ATen/ops/upsample_bilinear2d_backward_meta.h>
#include <ATen/ops/upsample_bilinear2d_meta.h>
#include <ATen/ops/upsample_linear1d_backward_meta.h>
#include <ATen/ops/upsample_linear1d_meta.h>
#include <ATen/ops/upsample_nearest1d_backward_meta.h>
#include <ATen/ops/upsample_nearest1d_meta.h>
#include <ATen/ops/upsample_nearest2d_backward_meta.h>
#include <ATen/ops/upsample_nearest2d_meta.h>
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

enum class Mode { Nearest, NearestExact, Linear };

void check_upsample_floating(const at::Tensor& t, const char* op) {
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(t.scalar_type()), "\"", op, "\" not implemented for '",
                              t.scalar_type(), "' on the neuron device");
}

// (Bi)linear forward runs natively for the floating dtypes and, in 2-d, for
// uint8 (the CPU's fixed-point rule, runtime/src/ops/vision/resample_u8.c).
bool linear_native(const at::Tensor& self, bool one_d) {
  return at::isFloatingType(self.scalar_type()) || (!one_d && self.scalar_type() == at::kByte);
}

// The CPU's forward kernels take the floating dtypes and uint8 (1-d linear:
// the floating ones only); any other integer input is refused natively, after
// the size checks and in the CPU's words (its dispatch points' names).
void refuse_integral(Mode mode, bool one_d, const at::Tensor& self) {
  const at::ScalarType t = self.scalar_type();
  if (!at::isIntegralType(t, /*includeBool=*/true) || (t == at::kByte && !(mode == Mode::Linear && one_d))) return;
  const char* name = mode == Mode::Linear
                         ? (one_d ? "compute_indices_weights_linear" : "upsample_bilinear2d_channels_last")
                         : (one_d ? "compute_indices_weights_nearest" : "upsample_nearest2d_channels_last");
  TORCH_CHECK_NOT_IMPLEMENTED(false, "\"", name, "\" not implemented for '", t, "'");
}

bool through_fallback(Mode mode, bool one_d, const at::Tensor& self) {
  return mode == Mode::Linear && !linear_native(self, one_d) && !at::isIntegralType(self.scalar_type(), true);
}

// One launch: dst and src are the op's output and input (grad_input and
// grad_output when backward); scale_h is 0 for 1-d ops.
void run_upsample(Mode mode, bool backward, bool one_d, const at::Tensor& dst, const at::Tensor& src, bool align_corners,
         OptScale scale_h, OptScale scale_w) {
  if (dst.numel() == 0 || src.numel() == 0) return;
  nrt_op_code code = mode == Mode::Linear ? (backward ? NRT_OP_UPSAMPLE_BILINEAR2D_BACKWARD : NRT_OP_UPSAMPLE_BILINEAR2D)
                                          : (backward ? NRT_OP_UPSAMPLE_NEAREST2D_BACKWARD : NRT_OP_UPSAMPLE_NEAREST2D);
  if (backward || (mode == Mode::Linear && !linear_native(src, one_d))) check_upsample_floating(dst, nrt_op_name(code));
  OpBuilder b(code, 1);
  b.image(dst, one_d).image(src, one_d);
  b.real(one_d ? 0.0 : scale_or_zero(scale_h)).real(scale_or_zero(scale_w));
  b.integer(mode == Mode::Linear ? align_corners : mode == Mode::NearestExact);
  b.launch(dst);
}

// Defines the functional and out= forms of a forward op, then of its
// backward op, from the meta class and the argument lists.
#define UPSAMPLE_FORWARD_(fn, Meta, mode, one_d, PARAMS, ARGS, ALIGN, SH, SW)                   \
  at::Tensor fn(const at::Tensor& self, PARAMS) {                                               \
    if (through_fallback(mode, one_d, self))                                                    \
      return call_through_fallback("aten::" #fn, "", self, ARGS).back().toTensor();                  \
    NEURON_TRACK_OP("aten::" #fn);                                                              \
    c10::DeviceGuard guard(self.device());                                                      \
    Outputs<at::meta::structured_##Meta, 1> o;                                                  \
    o.meta(self, ARGS);                                                                         \
    refuse_integral(mode, one_d, self);                                                         \
    run_upsample(mode, false, one_d, o[0], self, ALIGN, SH, SW);                                         \
    return o[0];                                                                                \
  }                                                                                             \
  at::Tensor& fn##_out(const at::Tensor& self, PARAMS, at::Tensor& out) {                       \
    if (through_fallback(mode, one_d, self)) {                                                  \
      call_through_fallback("aten::" #fn, "out", self, ARGS, out);                                   \
      return out;                                                                               \
    }                                                                                           \
    NEURON_TRACK_OP("aten::" #fn ".out");                                                       \
    c10::DeviceGuard guard(self.device());                                                      \
    Outputs<at::meta::structured_##Meta, 1> o({out});                                           \
    o.meta(self, ARGS);                                                                         \
    refuse_integral(mode, one_d, self);                                                         \
    run_upsample(mode, false, one_d, out, self, ALIGN, SH, SW);                                          \
    return out;                                                                                 \
  }

#define UPSAMPLE_BACKWARD_(fn, Meta, mode, one_d, PARAMS, ARGS, ALIGN, SH, SW)                  \
  at::Tensor fn(const at::Tensor& grad_output, PARAMS) {                                        \
    NEURON_TRACK_OP("aten::" #fn);                                                              \
    c10::DeviceGuard guard(grad_output.device());                                               \
    Outputs<at::meta::structured_##Meta, 1> o;                                                  \
    o.meta(grad_output, ARGS);                                                                  \
    run_upsample(mode, true, one_d, o[0], grad_output, ALIGN, SH, SW);                                   \
    return o[0];                                                                                \
  }                                                                                             \
  at::Tensor& fn##_out(const at::Tensor& grad_output, PARAMS, at::Tensor& grad_input) {         \
    NEURON_TRACK_OP("aten::" #fn ".grad_input");                                                \
    c10::DeviceGuard guard(grad_output.device());                                               \
    Outputs<at::meta::structured_##Meta, 1> o({grad_input});                                    \
    o.meta(grad_output, ARGS);                                                                  \
    run_upsample(mode, true, one_d, grad_input, grad_output, ALIGN, SH, SW);                             \
    return grad_input;                                                                          \
  }

#define COMMA_ ,
#define SIZE_ at::IntArrayRef output_size
#define SIZES_ at::IntArrayRef output_size COMMA_ at::IntArrayRef input_size

UPSAMPLE_FORWARD_(upsample_nearest2d, upsample_nearest2d, Mode::Nearest, false,
                  SIZE_ COMMA_ OptScale scales_h COMMA_ OptScale scales_w,
                  output_size COMMA_ scales_h COMMA_ scales_w, false, scales_h, scales_w)
UPSAMPLE_BACKWARD_(upsample_nearest2d_backward, upsample_nearest2d_backward, Mode::Nearest, false,
                   SIZES_ COMMA_ OptScale scales_h COMMA_ OptScale scales_w,
                   output_size COMMA_ input_size COMMA_ scales_h COMMA_ scales_w, false, scales_h, scales_w)
UPSAMPLE_FORWARD_(_upsample_nearest_exact2d, _upsample_nearest_exact2d, Mode::NearestExact, false,
                  SIZE_ COMMA_ OptScale scales_h COMMA_ OptScale scales_w,
                  output_size COMMA_ scales_h COMMA_ scales_w, false, scales_h, scales_w)
UPSAMPLE_BACKWARD_(_upsample_nearest_exact2d_backward, _upsample_nearest_exact2d_backward, Mode::NearestExact,
                   false, SIZES_ COMMA_ OptScale scales_h COMMA_ OptScale scales_w,
                   output_size COMMA_ input_size COMMA_ scales_h COMMA_ scales_w, false, scales_h, scales_w)
UPSAMPLE_FORWARD_(upsample_bilinear2d, upsample_bilinear2d, Mode::Linear, false,
                  SIZE_ COMMA_ bool align_corners COMMA_ OptScale scales_h COMMA_ OptScale scales_w,
                  output_size COMMA_ align_corners COMMA_ scales_h COMMA_ scales_w, align_corners, scales_h,
                  scales_w)
UPSAMPLE_BACKWARD_(upsample_bilinear2d_backward, upsample_bilinear2d_backward, Mode::Linear, false,
                   SIZES_ COMMA_ bool align_corners COMMA_ OptScale scales_h COMMA_ OptScale scales_w,
                   output_size COMMA_ input_size COMMA_ align_corners COMMA_ scales_h COMMA_ scales_w,
                   align_corners, scales_h, scales_w)
UPSAMPLE_FORWARD_(upsample_nearest1d, upsample_nearest1d, Mode::Nearest, true, SIZE_ COMMA_ OptScale scales,
                  output_size COMMA_ scales, false, std::nullopt, scales)
UPSAMPLE_BACKWARD_(upsample_nearest1d_backward, upsample_nearest1d_backward, Mode::Nearest, true,
                   SIZES_ COMMA_ OptScale scales, output_size COMMA_ input_size COMMA_ scales, false,
                   std::nullopt, scales)
UPSAMPLE_FORWARD_(_upsample_nearest_exact1d, _upsample_nearest_exact1d, Mode::NearestExact, true,
                  SIZE_ COMMA_ OptScale scales, output_size COMMA_ scales, false, std::nullopt, scales)
UPSAMPLE_BACKWARD_(_upsample_nearest_exact1d_backward, _upsample_nearest_exact1d_backward, Mode::NearestExact,
                   true, SIZES_ COMMA_ OptScale scales, output_size COMMA_ input_size COMMA_ scales, false,
                   std::nullopt, scales)
UPSAMPLE_FORWARD_(upsample_linear1d, upsample_linear1d, Mode::Linear, true,
                  SIZE_ COMMA_ bool align_corners COMMA_ OptScale scales,
                  output_size COMMA_ align_corners COMMA_ scales, align_corners, std::nullopt, scales)
UPSAMPLE_BACKWARD_(upsample_linear1d_backward, upsample_linear1d_backward, Mode::Linear, true,
                   SIZES_ COMMA_ bool align_corners COMMA_ OptScale scales,
                   output_size COMMA_ input_size COMMA_ align_corners COMMA_ scales, align_corners, std::nullopt,
                   scales)

#define REGISTER_(m, fn, suffix) \
  m.impl(#fn, fn);               \
  m.impl(#fn "." suffix, fn##_out);

NEURON_LIBRARY_IMPL(aten, m) {
  REGISTER_(m, upsample_nearest2d, "out")
  REGISTER_(m, upsample_nearest2d_backward, "grad_input")
  REGISTER_(m, _upsample_nearest_exact2d, "out")
  REGISTER_(m, _upsample_nearest_exact2d_backward, "grad_input")
  REGISTER_(m, upsample_bilinear2d, "out")
  REGISTER_(m, upsample_bilinear2d_backward, "grad_input")
  REGISTER_(m, upsample_nearest1d, "out")
  REGISTER_(m, upsample_nearest1d_backward, "grad_input")
  REGISTER_(m, _upsample_nearest_exact1d, "out")
  REGISTER_(m, _upsample_nearest_exact1d_backward, "grad_input")
  REGISTER_(m, upsample_linear1d, "out")
  REGISTER_(m, upsample_linear1d_backward, "grad_input")
}

// This file's macros end here (the unity build puts files one after another).
#undef COMMA_
#undef REGISTER_
#undef SIZES_
#undef SIZE_
#undef UPSAMPLE_BACKWARD_
#undef UPSAMPLE_FORWARD_
}  // namespace
}  // namespace torchneuron
