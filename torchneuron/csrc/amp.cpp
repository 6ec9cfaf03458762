// The gradient scaler's ops on neuron (torch.amp.GradScaler("neuron")):
// _amp_foreach_non_finite_check_and_unscale_ and _amp_update_scale_, as the
// runtime's AMP_UNSCALE (one op per gradient) and AMP_UPDATE_SCALE
// (neuronrt/ops/amp.h). found_inf, inv_scale, the scale and its growth
// tracker stay on the device, so a training step never waits for it here;
// the checks are those of PyTorch's CPU kernels.
#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "neuron_device.h"
#include "nn_launch.h"
#include "op_tracking.h"
#include "tensor_view.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {


void check_single(const at::Tensor& t, at::ScalarType dtype, const char* op, const char* what,
                  const char* dtype_word) {
  TORCH_CHECK(t.device().type() == kNeuron, op, ": ", what, " must be a neuron tensor, got one on ",
              t.device());
  TORCH_CHECK(t.numel() == 1, what, " must be a 1-element tensor.");
  TORCH_CHECK(t.scalar_type() == dtype, what, " must be a ", dtype_word, " tensor.");
}

void non_finite_check_and_unscale_(at::TensorList grads, at::Tensor& found_inf,
                                   const at::Tensor& inv_scale) {
  NEURON_TRACK_OP("aten::_amp_foreach_non_finite_check_and_unscale_");
  const char* name = "_amp_foreach_non_finite_check_and_unscale_";
  check_single(inv_scale, at::kFloat, name, "inv_scale", "float");
  check_single(found_inf, at::kFloat, name, "found_inf", "float");
  TORCH_CHECK(found_inf.device() == inv_scale.device(), name,
              ": found_inf and inv_scale must be on one device, got ", found_inf.device(), " and ",
              inv_scale.device());
  if (grads.empty()) return;
  const at::ScalarType dtype = grads[0].scalar_type();
  for (const at::Tensor& g : grads) {
    TORCH_CHECK(g.device() == found_inf.device(), name,
                ": every gradient must be on found_inf's device (", found_inf.device(), "), got ",
                g.device());
    TORCH_CHECK(g.layout() == at::kStrided, name, ": gradients must be strided tensors.");
    TORCH_CHECK(g.scalar_type() == dtype, name, ": all gradients must have one dtype, got ", dtype,
                " and ", g.scalar_type());
    TORCH_CHECK(at::isFloatingType(dtype), name, ": gradients must be floating point, got ", dtype);
    at::assert_no_internal_overlap(g);  // an expanded gradient would be scaled once per alias
  }
  c10::DeviceGuard guard(found_inf.device());
  const nrt_tensor_view found = to_view(found_inf, name), inv = to_view(inv_scale, name);
  for (const at::Tensor& g : grads) {
    if (g.numel() == 0) continue;
    launch_nn(NRT_OP_AMP_UNSCALE, g, 2, {to_view(g, name), found, inv});
  }
}

at::Tensor& update_scale_(at::Tensor& scale, at::Tensor& growth_tracker, const at::Tensor& found_inf,
                          double growth_factor, double backoff_factor, int64_t growth_interval) {
  NEURON_TRACK_OP("aten::_amp_update_scale_");
  const char* name = "_amp_update_scale_";
  check_single(growth_tracker, at::kInt, name, "growth_tracker", "int");
  check_single(scale, at::kFloat, name, "current_scale", "float");
  check_single(found_inf, at::kFloat, name, "found_inf", "float");
  TORCH_CHECK(scale.device() == growth_tracker.device() && scale.device() == found_inf.device(),
              name, ": the scale, growth_tracker and found_inf must be on one device");
  c10::DeviceGuard guard(scale.device());
  launch_nn(NRT_OP_AMP_UPDATE_SCALE, scale, 2,
            {to_view(scale, name), to_view(growth_tracker, name), to_view(found_inf, name)},
            {float_scalar(growth_factor), float_scalar(backoff_factor), int_scalar(growth_interval)});
  return scale;
}

}  // namespace
}  // namespace torchneuron

NEURON_LIBRARY_IMPL(aten, m) {
  m.impl("_amp_foreach_non_finite_check_and_unscale_", torchneuron::non_finite_check_and_unscale_);
  m.impl("_amp_update_scale_", torchneuron::update_scale_);
}
