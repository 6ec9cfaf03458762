// Volumetric upsampling: upsample_nearest3d, _upsample_nearest_exact3d and
// upsample_trilinear3d with their backward ops and out= forms, on the
// runtime's 3-d upsampling ops (neuronrt/ops/vision.h). All are structured:
// PyTorch's meta functions check the arguments and size the outputs; the
// runtime gets [N, C, D, H, W] views and the user's scale factors, which
// PyTorch's index arithmetic uses when given.
#include <ATen/ATen.h>
#include <ATen/ops/_upsample_nearest_exact3d_backward_meta.h>
#include <ATen/ops/_upsample_nearest_exact3d_meta.h>
#include <ATen/ops/upsample_nearest3d_backward_meta.h>
#include <ATen/ops/upsample_nearest3d_meta.h>
#include <ATen/ops/upsample_trilinear3d_backward_meta.h>
#include <ATen/ops/upsample_trilinear3d_meta.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "op_tracking.h"
#include "vision3d_common.h"
#include "vision_common.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {

using vision::OpBuilder;
using vision::Outputs;
using vision::scale_or_zero;
using vision::volume_view;
using OptScale = std::optional<double>;

enum class Mode3d { Nearest, NearestExact, Linear };

void run_upsample3d(Mode3d mode, bool backward, const at::Tensor& dst, const at::Tensor& src, bool align_corners, OptScale sd,
         OptScale sh, OptScale sw) {
  nrt_op_code code = mode == Mode3d::Linear
                         ? (backward ? NRT_OP_UPSAMPLE_TRILINEAR3D_BACKWARD : NRT_OP_UPSAMPLE_TRILINEAR3D)
                         : (backward ? NRT_OP_UPSAMPLE_NEAREST3D_BACKWARD : NRT_OP_UPSAMPLE_NEAREST3D);
  at::ScalarType t = dst.scalar_type();
  bool ok = at::isFloatingType(t) || (mode != Mode3d::Linear && !backward && t == at::kByte);
  // An integer input is refused in the CPU's words (its index-weight helpers' names).
  if (!backward && at::isIntegralType(t, /*includeBool=*/true))
    TORCH_CHECK_NOT_IMPLEMENTED(
        ok, "\"", mode == Mode3d::Linear ? "compute_indices_weights_linear" : "compute_indices_weights_nearest",
        "\" not implemented for '", t, "'");
  TORCH_CHECK_NOT_IMPLEMENTED(ok, "\"", nrt_op_name(code), "\" not implemented for '", t, "' on the neuron device");
  if (dst.numel() == 0 || src.numel() == 0) return;
  OpBuilder b(code, 1);
  b.view(volume_view(dst, b.name())).view(volume_view(src, b.name()));
  b.real(scale_or_zero(sd)).real(scale_or_zero(sh)).real(scale_or_zero(sw));
  b.integer(mode == Mode3d::Linear ? align_corners : mode == Mode3d::NearestExact);
  b.launch(dst);
}

#define UPSAMPLE3D_FORWARD_(fn, mode, PARAMS, ARGS, ALIGN)                                       \
  at::Tensor fn(const at::Tensor& self, PARAMS) {                                               \
    NEURON_TRACK_OP("aten::" #fn);                                                              \
    c10::DeviceGuard guard(self.device());                                                      \
    Outputs<at::meta::structured_##fn, 1> o;                                                    \
    o.meta(self, ARGS);                                                                         \
    run_upsample3d(mode, false, o[0], self, ALIGN, scales_d, scales_h, scales_w);                          \
    return o[0];                                                                                \
  }                                                                                             \
  at::Tensor& fn##_out(const at::Tensor& self, PARAMS, at::Tensor& out) {                       \
    NEURON_TRACK_OP("aten::" #fn ".out");                                                       \
    c10::DeviceGuard guard(self.device());                                                      \
    Outputs<at::meta::structured_##fn, 1> o({out});                                             \
    o.meta(self, ARGS);                                                                         \
    run_upsample3d(mode, false, out, self, ALIGN, scales_d, scales_h, scales_w);                           \
    return out;                                                                                 \
  }

#define UPSAMPLE3D_BACKWARD_(fn, mode, PARAMS, ARGS, ALIGN)                                      \
  at::Tensor fn(const at::Tensor& grad_output, PARAMS) {                                        \
    NEURON_TRACK_OP("aten::" #fn);                                                              \
    c10::DeviceGuard guard(grad_output.device());                                               \
    Outputs<at::meta::structured_##fn, 1> o;                                                    \
    o.meta(grad_output, ARGS);                                                                  \
    run_upsample3d(mode, true, o[0], grad_output, ALIGN, scales_d, scales_h, scales_w);                    \
    return o[0];                                                                                \
  }                                                                                             \
  at::Tensor& fn##_out(const at::Tensor& grad_output, PARAMS, at::Tensor& grad_input) {         \
    NEURON_TRACK_OP("aten::" #fn ".grad_input");                                                \
    c10::DeviceGuard guard(grad_output.device());                                               \
    Outputs<at::meta::structured_##fn, 1> o({grad_input});                                      \
    o.meta(grad_output, ARGS);                                                                  \
    run_upsample3d(mode, true, grad_input, grad_output, ALIGN, scales_d, scales_h, scales_w);              \
    return grad_input;                                                                          \
  }

#define COMMA_ ,
#define SIZE_ at::IntArrayRef output_size
#define SIZES_ at::IntArrayRef output_size COMMA_ at::IntArrayRef input_size
#define SCALES_ OptScale scales_d COMMA_ OptScale scales_h COMMA_ OptScale scales_w
#define SCALE_ARGS_ scales_d COMMA_ scales_h COMMA_ scales_w

UPSAMPLE3D_FORWARD_(upsample_nearest3d, Mode3d::Nearest, SIZE_ COMMA_ SCALES_, output_size COMMA_ SCALE_ARGS_, false)
UPSAMPLE3D_BACKWARD_(upsample_nearest3d_backward, Mode3d::Nearest, SIZES_ COMMA_ SCALES_,
                     output_size COMMA_ input_size COMMA_ SCALE_ARGS_, false)
UPSAMPLE3D_FORWARD_(_upsample_nearest_exact3d, Mode3d::NearestExact, SIZE_ COMMA_ SCALES_,
                    output_size COMMA_ SCALE_ARGS_, false)
UPSAMPLE3D_BACKWARD_(_upsample_nearest_exact3d_backward, Mode3d::NearestExact, SIZES_ COMMA_ SCALES_,
                     output_size COMMA_ input_size COMMA_ SCALE_ARGS_, false)
UPSAMPLE3D_FORWARD_(upsample_trilinear3d, Mode3d::Linear, SIZE_ COMMA_ bool align_corners COMMA_ SCALES_,
                    output_size COMMA_ align_corners COMMA_ SCALE_ARGS_, align_corners)
UPSAMPLE3D_BACKWARD_(upsample_trilinear3d_backward, Mode3d::Linear,
                     SIZES_ COMMA_ bool align_corners COMMA_ SCALES_,
                     output_size COMMA_ input_size COMMA_ align_corners COMMA_ SCALE_ARGS_, align_corners)

#define REGISTER_(m, fn, suffix) \
  m.impl(#fn, fn);               \
  m.impl(#fn "." suffix, fn##_out);

NEURON_LIBRARY_IMPL(aten, m) {
  REGISTER_(m, upsample_nearest3d, "out")
  REGISTER_(m, upsample_nearest3d_backward, "grad_input")
  REGISTER_(m, _upsample_nearest_exact3d, "out")
  REGISTER_(m, _upsample_nearest_exact3d_backward, "grad_input")
  REGISTER_(m, upsample_trilinear3d, "out")
  REGISTER_(m, upsample_trilinear3d_backward, "grad_input")
}

// This file's macros end here (the unity build puts files one after another).
#undef COMMA_
#undef REGISTER_
#undef SCALES_
#undef SCALE_ARGS_
#undef SIZES_
#undef SIZE_
#undef UPSAMPLE3D_BACKWARD_
#undef UPSAMPLE3D_FORWARD_
}  // namespace
}  // namespace torchneuron
