// The fused LSTM and GRU cells ATen asks of a non-CPU device: nn.LSTM,
// nn.GRU and their cells compute the gate GEMMs with linear/matmul (our
// GEMM) and hand the gate arithmetic of each time step to
// _thnn_fused_lstm_cell / _thnn_fused_gru_cell and their backward, which
// run on the runtime's cell ops (neuronrt/ops/nn.h). The bias gradients
// are sums of the gate gradients over the batch (our reduction).
//
// Shapes are checked as PyTorch's CUDA kernels check them; gates may have
// any strides (the kernels read them row by row), outputs are contiguous.
#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <tuple>

#include "neuron_device.h"
#include "nn_launch.h"
#include "op_tracking.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {


nrt_tensor_view view_or_absent(const at::Tensor& t, const char* name) {
  return t.defined() ? to_view(t, name) : absent_view();
}

// PyTorch's checkSizes for the fused cells: gates [batch, k * hidden] of one
// shape, state [batch, hidden], biases [k * hidden] (both or neither).
void check_cell(const char* name, const at::Tensor& input_gates, const at::Tensor& hidden_gates,
                const at::Tensor& state, const at::Tensor& input_bias, const at::Tensor& hidden_bias,
                int64_t k) {
  TORCH_CHECK(input_gates.dim() == 2, name, ": expected input_gates to be 2-d, got ", input_gates.dim(), "-d");
  TORCH_CHECK(input_gates.sizes() == hidden_gates.sizes(), name, ": input_gates ", input_gates.sizes(),
              " and hidden_gates ", hidden_gates.sizes(), " differ in shape");
  const int64_t batch = input_gates.size(0), gates = input_gates.size(1);
  TORCH_CHECK(gates % k == 0, name, ": the gates' width ", gates, " is not a multiple of ", k);
  TORCH_CHECK(state.dim() == 2 && state.size(0) == batch && state.size(1) == gates / k, name,
              ": expected the state to be [", batch, ", ", gates / k, "], got ", state.sizes());
  TORCH_CHECK(input_bias.defined() == hidden_bias.defined(), name,
              ": expected both biases or neither");
  for (const at::Tensor* b : {&input_bias, &hidden_bias})
    if (b->defined())
      TORCH_CHECK(b->dim() == 1 && b->size(0) == gates, name, ": expected a bias of ", gates,
                  " elements, got ", b->sizes());
  for (const at::Tensor* t : {&hidden_gates, &state, &input_bias, &hidden_bias}) {
    if (!t->defined()) continue;
    TORCH_CHECK(t->device() == input_gates.device(), name, ": expected all tensors on ", input_gates.device(),
                ", got one on ", t->device());
    TORCH_CHECK(t->scalar_type() == input_gates.scalar_type(), name, ": expected all tensors of dtype ",
                input_gates.scalar_type(), ", got ", t->scalar_type());
  }
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(input_gates.scalar_type()), "\"", name,
                              "\" not implemented for '", input_gates.scalar_type(), "'");
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> lstm_cell(const at::Tensor& input_gates,
                                                         const at::Tensor& hidden_gates, const at::Tensor& cx,
                                                         const std::optional<at::Tensor>& input_bias_opt,
                                                         const std::optional<at::Tensor>& hidden_bias_opt) {
  NEURON_TRACK_OP("aten::_thnn_fused_lstm_cell");
  const char* name = "_thnn_fused_lstm_cell";
  const at::Tensor &bi = value_or_undefined(input_bias_opt), &bh = value_or_undefined(hidden_bias_opt);
  check_cell(name, input_gates, hidden_gates, cx, bi, bh, 4);
  c10::DeviceGuard guard(input_gates.device());
  at::Tensor workspace = at::empty_like(input_gates, at::MemoryFormat::Contiguous);
  at::Tensor hy = at::empty_like(cx, at::MemoryFormat::Contiguous);
  at::Tensor cy = at::empty_like(cx, at::MemoryFormat::Contiguous);
  if (hy.numel() > 0)
    launch_nn(NRT_OP_LSTM_CELL, input_gates, 3,
              {to_view(hy, name), to_view(cy, name), to_view(workspace, name), to_view(input_gates, name),
               to_view(hidden_gates, name), to_view(cx, name), view_or_absent(bi, name), view_or_absent(bh, name)});
  return {hy, cy, workspace};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> lstm_cell_backward(const std::optional<at::Tensor>& grad_hy_opt,
                                                                  const std::optional<at::Tensor>& grad_cy_opt,
                                                                  const at::Tensor& cx, const at::Tensor& cy,
                                                                  const at::Tensor& workspace, bool has_bias) {
  NEURON_TRACK_OP("aten::_thnn_fused_lstm_cell_backward_impl");
  const char* name = "_thnn_fused_lstm_cell_backward_impl";
  const at::Tensor &grad_hy = value_or_undefined(grad_hy_opt), &grad_cy = value_or_undefined(grad_cy_opt);
  if (!grad_hy.defined() && !grad_cy.defined()) return {};  // as PyTorch's kernel: nothing flows back
  TORCH_CHECK(workspace.dim() == 2 && workspace.size(1) % 4 == 0, name,
              ": expected a workspace [batch, 4 * hidden], got ", workspace.sizes());
  const std::vector<int64_t> state{workspace.size(0), workspace.size(1) / 4};
  for (const at::Tensor* t : {&grad_hy, &grad_cy, &cx, &cy})
    if (t->defined()) {
      TORCH_CHECK(t->sizes() == at::IntArrayRef(state), name, ": expected [", state[0], ", ", state[1],
                  "], got ", t->sizes());
      TORCH_CHECK(t->device() == workspace.device(), name, ": expected all tensors on ", workspace.device());
    }
  c10::DeviceGuard guard(workspace.device());
  at::Tensor grad_gates = at::empty_like(workspace, at::MemoryFormat::Contiguous);
  at::Tensor grad_cx = at::empty_like(cx, at::MemoryFormat::Contiguous);
  if (grad_cx.numel() > 0)
    launch_nn(NRT_OP_LSTM_CELL_BACKWARD, workspace, 2,
              {to_view(grad_gates, name), to_view(grad_cx, name), view_or_absent(grad_hy, name),
               view_or_absent(grad_cy, name), to_view(cx, name), to_view(cy, name), to_view(workspace, name)});
  at::Tensor grad_bias = has_bias ? grad_gates.sum(0) : at::Tensor();
  return {grad_gates, grad_cx, grad_bias};
}

std::tuple<at::Tensor, at::Tensor> gru_cell(const at::Tensor& input_gates, const at::Tensor& hidden_gates,
                                            const at::Tensor& hx, const std::optional<at::Tensor>& input_bias_opt,
                                            const std::optional<at::Tensor>& hidden_bias_opt) {
  NEURON_TRACK_OP("aten::_thnn_fused_gru_cell");
  const char* name = "_thnn_fused_gru_cell";
  const at::Tensor &bi = value_or_undefined(input_bias_opt), &bh = value_or_undefined(hidden_bias_opt);
  check_cell(name, input_gates, hidden_gates, hx, bi, bh, 3);
  c10::DeviceGuard guard(input_gates.device());
  at::Tensor workspace = at::empty({hx.size(0), hx.size(1) * 5}, hx.options());
  at::Tensor hy = at::empty_like(hx, at::MemoryFormat::Contiguous);
  if (hy.numel() > 0)
    launch_nn(NRT_OP_GRU_CELL, input_gates, 2,
              {to_view(hy, name), to_view(workspace, name), to_view(input_gates, name), to_view(hidden_gates, name),
               to_view(hx, name), view_or_absent(bi, name), view_or_absent(bh, name)});
  return {hy, workspace};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> gru_cell_backward(
    const at::Tensor& grad_hy, const at::Tensor& workspace, bool has_bias) {
  NEURON_TRACK_OP("aten::_thnn_fused_gru_cell_backward");
  const char* name = "_thnn_fused_gru_cell_backward";
  TORCH_CHECK(grad_hy.dim() == 2, name, ": expected grad_hy to be 2-d, got ", grad_hy.dim(), "-d");
  const int64_t batch = grad_hy.size(0), hidden = grad_hy.size(1);
  TORCH_CHECK(workspace.dim() == 2 && workspace.size(0) == batch && workspace.size(1) == 5 * hidden, name,
              ": expected a workspace [", batch, ", ", 5 * hidden, "], got ", workspace.sizes());
  TORCH_CHECK(grad_hy.device() == workspace.device(), name, ": expected all tensors on ", workspace.device());
  c10::DeviceGuard guard(workspace.device());
  at::Tensor grad_input_gates = at::empty({batch, 3 * hidden}, workspace.options());
  at::Tensor grad_hidden_gates = at::empty({batch, 3 * hidden}, workspace.options());
  at::Tensor grad_hx = at::empty_like(grad_hy, at::MemoryFormat::Contiguous);
  if (grad_hx.numel() > 0)
    launch_nn(NRT_OP_GRU_CELL_BACKWARD, workspace, 3,
              {to_view(grad_input_gates, name), to_view(grad_hidden_gates, name), to_view(grad_hx, name),
               to_view(grad_hy, name), to_view(workspace, name)});
  at::Tensor grad_input_bias = has_bias ? grad_input_gates.sum(0) : at::Tensor();
  at::Tensor grad_hidden_bias = has_bias ? grad_hidden_gates.sum(0) : at::Tensor();
  return {grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias, grad_hidden_bias};
}

}  // namespace

NEURON_LIBRARY_IMPL(aten, m) {
  m.impl("_thnn_fused_lstm_cell", TORCH_FN(lstm_cell));
  m.impl("_thnn_fused_lstm_cell_backward_impl", TORCH_FN(lstm_cell_backward));
  m.impl("_thnn_fused_gru_cell", TORCH_FN(gru_cell));
  m.impl("_thnn_fused_gru_cell_backward", TORCH_FN(gru_cell_backward));
}

}  // namespace torchneuron
