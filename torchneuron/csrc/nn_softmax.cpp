// Softmax and log-softmax, forward and backward, on the runtime's SOFTMAX
// ops (neuronrt/ops/nn.h).
//
// PyTorch's meta functions check the arguments and state the outputs
// (half_to_float included: a float16 input gives a float32 result). The
// kernels see each tensor as [outer, n, inner] around the softmax dim:
// inputs are made contiguous first, as PyTorch's CPU kernels do, and an
// output that is not contiguous is computed in a temporary and copied.
#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/_log_softmax_backward_data_meta.h>
#include <ATen/ops/_log_softmax_meta.h>
#include <ATen/ops/_softmax_backward_data_meta.h>
#include <ATen/ops/_softmax_meta.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/accumulate.h>
#include <torch/library.h>

#include "nn_launch.h"
#include "op_tracking.h"
#include "structured_outputs.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {

struct SoftmaxGeometry {
  int64_t outer, n, inner;
};

SoftmaxGeometry around(const at::Tensor& t, int64_t dim) {
  if (t.dim() == 0) return {1, 1, 1};
  int64_t d = at::maybe_wrap_dim(dim, t.dim());
  auto sizes = t.sizes();
  return {c10::multiply_integers(sizes.begin(), sizes.begin() + d), sizes[d],
          c10::multiply_integers(sizes.begin() + d + 1, sizes.end())};
}

// Runs `code` writing result from inputs (all of one shape) along dim.
void run_softmax(nrt_op_code code, const at::Tensor& result, std::initializer_list<at::Tensor> inputs,
         int64_t dim) {
  if (result.numel() == 0) return;
  const char* name = nrt_op_name(code);
  bool overlaps = false;
  for (const at::Tensor& in : inputs) overlaps |= at::get_overlap_status(result, in) != at::MemOverlapStatus::No;
  at::Tensor out = result.is_contiguous() && !overlaps
                       ? result
                       : at::empty_like(result, at::MemoryFormat::Contiguous);
  SoftmaxGeometry g = around(result, dim);
  std::vector<at::Tensor> keep;
  nrt_op op{};
  op.code = code;
  op.compute_dtype = NRT_FLOAT32;
  op.num_outputs = 1;
  op.operands[op.num_operands++] = contiguous_view(out, {g.outer, g.n, g.inner}, name);
  for (const at::Tensor& in : inputs) {
    TORCH_CHECK(in.device() == result.device(), name, ": expected all tensors on ", result.device(),
                ", got one on ", in.device());
    keep.push_back(in.contiguous());
    op.operands[op.num_operands++] = contiguous_view(keep.back(), {g.outer, g.n, g.inner}, name);
  }
  launch(result.device().index(), op);
  if (!out.is_same(result)) const_cast<at::Tensor&>(result).copy_(out);
}

template <class Meta, nrt_op_code Code>
at::Tensor forward(const at::Tensor& self, int64_t dim, bool half_to_float) {
  c10::DeviceGuard guard(self.device());
  Outputs<Meta, 1> out;
  out.meta(self, dim, half_to_float);
  run_softmax(Code, out[0], {self}, dim);
  return out[0];
}

template <class Meta, nrt_op_code Code>
at::Tensor& forward_out(const at::Tensor& self, int64_t dim, bool half_to_float, at::Tensor& result) {
  c10::DeviceGuard guard(self.device());
  Outputs<Meta, 1> out({result});
  out.meta(self, dim, half_to_float);
  run_softmax(Code, out[0], {self}, dim);
  return result;
}

template <class Meta, nrt_op_code Code>
at::Tensor backward(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                    at::ScalarType input_dtype) {
  c10::DeviceGuard guard(output.device());
  Outputs<Meta, 1> out;
  out.meta(grad_output, output, dim, input_dtype);
  run_softmax(Code, out[0], {grad_output, output}, dim);
  return out[0];
}

template <class Meta, nrt_op_code Code>
at::Tensor& backward_out(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                         at::ScalarType input_dtype, at::Tensor& result) {
  c10::DeviceGuard guard(output.device());
  Outputs<Meta, 1> out({result});
  out.meta(grad_output, output, dim, input_dtype);
  run_softmax(Code, out[0], {grad_output, output}, dim);
  return result;
}

at::Tensor softmax(const at::Tensor& self, int64_t dim, bool half_to_float) {
  NEURON_TRACK_OP("aten::_softmax");
  return forward<at::meta::structured__softmax, NRT_OP_SOFTMAX>(self, dim, half_to_float);
}
at::Tensor& softmax_out(const at::Tensor& self, int64_t dim, bool half_to_float, at::Tensor& out) {
  NEURON_TRACK_OP("aten::_softmax.out");
  return forward_out<at::meta::structured__softmax, NRT_OP_SOFTMAX>(self, dim, half_to_float, out);
}
at::Tensor log_softmax(const at::Tensor& self, int64_t dim, bool half_to_float) {
  NEURON_TRACK_OP("aten::_log_softmax");
  return forward<at::meta::structured__log_softmax, NRT_OP_LOG_SOFTMAX>(self, dim, half_to_float);
}
at::Tensor& log_softmax_out(const at::Tensor& self, int64_t dim, bool half_to_float, at::Tensor& out) {
  NEURON_TRACK_OP("aten::_log_softmax.out");
  return forward_out<at::meta::structured__log_softmax, NRT_OP_LOG_SOFTMAX>(self, dim, half_to_float,
                                                                            out);
}
at::Tensor softmax_backward(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                            at::ScalarType input_dtype) {
  NEURON_TRACK_OP("aten::_softmax_backward_data");
  return backward<at::meta::structured__softmax_backward_data, NRT_OP_SOFTMAX_BACKWARD>(
      grad_output, output, dim, input_dtype);
}
at::Tensor& softmax_backward_out(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                                 at::ScalarType input_dtype, at::Tensor& out) {
  NEURON_TRACK_OP("aten::_softmax_backward_data.out");
  return backward_out<at::meta::structured__softmax_backward_data, NRT_OP_SOFTMAX_BACKWARD>(
      grad_output, output, dim, input_dtype, out);
}
at::Tensor log_softmax_backward(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                                at::ScalarType input_dtype) {
  NEURON_TRACK_OP("aten::_log_softmax_backward_data");
  return backward<at::meta::structured__log_softmax_backward_data, NRT_OP_LOG_SOFTMAX_BACKWARD>(
      grad_output, output, dim, input_dtype);
}
at::Tensor& log_softmax_backward_out(const at::Tensor& grad_output, const at::Tensor& output,
                                     int64_t dim, at::ScalarType input_dtype, at::Tensor& out) {
  NEURON_TRACK_OP("aten::_log_softmax_backward_data.out");
  return backward_out<at::meta::structured__log_softmax_backward_data, NRT_OP_LOG_SOFTMAX_BACKWARD>(
      grad_output, output, dim, input_dtype, out);
}

}  // namespace

NEURON_LIBRARY_IMPL(aten, m) {
  m.impl("_softmax", TORCH_FN(softmax));
  m.impl("_softmax.out", TORCH_FN(softmax_out));
  m.impl("_log_softmax", TORCH_FN(log_softmax));
  m.impl("_log_softmax.out", TORCH_FN(log_softmax_out));
  m.impl("_softmax_backward_data", TORCH_FN(softmax_backward));
  m.impl("_softmax_backward_data.out", TORCH_FN(softmax_backward_out));
  m.impl("_log_softmax_backward_data", TORCH_FN(log_softmax_backward));
  m.impl("_log_softmax_backward_data.out", TORCH_FN(log_softmax_backward_out));
}

}  // namespace torchneuron
