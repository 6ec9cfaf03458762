// grid_sampler_2d / grid_sampler_3d and their backward (F.grid_sample,
// spatial transformers) on the runtime's GRID_SAMPLE ops
// (neuronrt/ops/sampling.h), with PyTorch's own argument checks
// (GridSamplerUtils.h). float32 and float64 run as they are; float16 and
// bfloat16 compute in float32 and round once.
#include <ATen/ATen.h>
#include <ATen/native/GridSamplerUtils.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <array>
#include <tuple>

#include "nn_launch.h"
#include "op_tracking.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {

// The dtype the kernel runs in for data of dtype t.
at::ScalarType compute_type(at::ScalarType t) { return t == at::kDouble ? at::kDouble : at::kFloat; }

std::array<nrt_scalar, 3> mode_scalars(int64_t interpolation, int64_t padding, bool align_corners) {
  return {int_scalar(interpolation), int_scalar(padding), int_scalar(align_corners ? 1 : 0)};
}

void check(const at::Tensor& input, const at::Tensor& grid, int64_t interpolation, int64_t padding, int dims) {
  at::native::check_grid_sampler_common(input, grid);
  if (dims == 2)
    at::native::check_grid_sampler_2d(input, grid);
  else
    at::native::check_grid_sampler_3d(input, grid, interpolation);
  TORCH_CHECK(interpolation >= 0 && interpolation <= (dims == 2 ? 2 : 1), "grid_sampler(): interpolation mode ",
              interpolation, " is not supported");
  TORCH_CHECK(padding >= 0 && padding <= 2, "grid_sampler(): padding mode ", padding, " is not supported");
  TORCH_CHECK(grid.scalar_type() == input.scalar_type(), "expected scalar type ", input.scalar_type(),
              " but found ", grid.scalar_type());
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(input.scalar_type()), "\"grid_sampler_", dims,
                              "d\" not implemented for '", input.scalar_type(), "'");
}

at::Tensor forward(const at::Tensor& input, const at::Tensor& grid, int64_t interpolation, int64_t padding,
                   bool align_corners, int dims, const char* name) {
  check(input, grid, interpolation, padding, dims);
  c10::DeviceGuard guard(input.device());
  const at::ScalarType dtype = input.scalar_type(), ct = compute_type(dtype);
  const at::Tensor in = input.to(ct), g = grid.to(ct);
  std::vector<int64_t> shape{input.size(0), input.size(1)};
  for (int d = 0; d < dims; d++) shape.push_back(grid.size(1 + d));
  at::Tensor out = at::empty(shape, in.options());
  if (out.numel() > 0) {
    const auto sc = mode_scalars(interpolation, padding, align_corners);
    launch_nn(NRT_OP_GRID_SAMPLE, input, 1, {to_view(out, name), to_view(in, name), to_view(g, name)},
              {sc[0], sc[1], sc[2]});
  }
  return ct == dtype ? out : out.to(dtype);
}

std::tuple<at::Tensor, at::Tensor> backward(const at::Tensor& grad_output, const at::Tensor& input,
                                            const at::Tensor& grid, int64_t interpolation, int64_t padding,
                                            bool align_corners, std::array<bool, 2> output_mask, int dims,
                                            const char* name) {
  check(input, grid, interpolation, padding, dims);
  c10::DeviceGuard guard(input.device());
  const at::ScalarType dtype = input.scalar_type(), ct = compute_type(dtype);
  const at::Tensor in = input.to(ct), g = grid.to(ct), go = grad_output.to(ct);
  at::Tensor grad_in = output_mask[0] ? at::empty(input.sizes(), in.options()) : at::Tensor();
  at::Tensor grad_grid = output_mask[1] ? at::empty(grid.sizes(), g.options()) : at::Tensor();
  const bool any_in = grad_in.defined() && grad_in.numel() > 0, any_grid = grad_grid.defined() && grad_grid.numel() > 0;
  if (any_in || any_grid) {
    const auto sc = mode_scalars(interpolation, padding, align_corners);
    launch_nn(NRT_OP_GRID_SAMPLE_BACKWARD, input, 2,
              {any_in ? to_view(grad_in, name) : absent_view(), any_grid ? to_view(grad_grid, name) : absent_view(),
               to_view(go, name), to_view(in, name), to_view(g, name)},
              {sc[0], sc[1], sc[2]});
  }
  if (ct != dtype) {
    if (grad_in.defined()) grad_in = grad_in.to(dtype);
    if (grad_grid.defined()) grad_grid = grad_grid.to(dtype);
  }
  return {grad_in, grad_grid};
}

at::Tensor grid_sampler_2d(const at::Tensor& input, const at::Tensor& grid, int64_t interpolation, int64_t padding,
                           bool align_corners) {
  NEURON_TRACK_OP("aten::grid_sampler_2d");
  return forward(input, grid, interpolation, padding, align_corners, 2, "grid_sampler_2d");
}

at::Tensor grid_sampler_3d(const at::Tensor& input, const at::Tensor& grid, int64_t interpolation, int64_t padding,
                           bool align_corners) {
  NEURON_TRACK_OP("aten::grid_sampler_3d");
  return forward(input, grid, interpolation, padding, align_corners, 3, "grid_sampler_3d");
}

std::tuple<at::Tensor, at::Tensor> grid_sampler_2d_backward(const at::Tensor& grad_output, const at::Tensor& input,
                                                            const at::Tensor& grid, int64_t interpolation,
                                                            int64_t padding, bool align_corners,
                                                            std::array<bool, 2> output_mask) {
  NEURON_TRACK_OP("aten::grid_sampler_2d_backward");
  return backward(grad_output, input, grid, interpolation, padding, align_corners, output_mask, 2,
                  "grid_sampler_2d_backward");
}

std::tuple<at::Tensor, at::Tensor> grid_sampler_3d_backward(const at::Tensor& grad_output, const at::Tensor& input,
                                                            const at::Tensor& grid, int64_t interpolation,
                                                            int64_t padding, bool align_corners,
                                                            std::array<bool, 2> output_mask) {
  NEURON_TRACK_OP("aten::grid_sampler_3d_backward");
  return backward(grad_output, input, grid, interpolation, padding, align_corners, output_mask, 3,
                  "grid_sampler_3d_backward");
}

}  // namespace

NEURON_LIBRARY_IMPL(aten, m) {
  m.impl("grid_sampler_2d", TORCH_FN(grid_sampler_2d));
  m.impl("grid_sampler_3d", TORCH_FN(grid_sampler_3d));
  m.impl("grid_sampler_2d_backward", TORCH_FN(grid_sampler_2d_backward));
  m.impl("grid_sampler_3d_backward", TORCH_FN(grid_sampler_3d_backward));
}

}  // namespace torchneuron
