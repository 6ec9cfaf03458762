// Pointwise ops whose operands are not the table's (pointwise_ops.cpp):
// glu and its gradient read the two halves of one tensor, frexp writes a
// mantissa and an int32 exponent, prelu's gradient writes two outputs.
// Each builds a TensorIterator over the right views and launches one
// runtime op (GLU, GLU_BACKWARD, FREXP, PRELU_BACKWARD in
// neuronrt/ops/pointwise.h). Checks and messages are PyTorch's.
#include <ATen/ATen.h>
#include <ATen/TensorIterator.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "op_tracking.h"
#include "pointwise.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {

// The halving dim of glu's input, checked as PyTorch checks it.
int64_t glu_dim(const at::Tensor& self, int64_t dim) {
  TORCH_CHECK(self.dim() > 0, "glu does not support scalars because halving size must be even");
  const int64_t wrapped = c10::maybe_wrap_dim(dim, self.dim());
  const int64_t n = self.size(wrapped);
  TORCH_CHECK(n % 2 == 0, "Halving dimension must be even, but dimension ", wrapped, " is size ", n);
  return wrapped;
}

void check_glu_dtype(const at::Tensor& self, const char* cpu_name) {
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()), "\"", cpu_name, "\" not implemented for '",
                              at::toString(self.scalar_type()), "'");
}

at::Tensor& glu_out(const at::Tensor& self, int64_t dim, at::Tensor& out) {
  NEURON_TRACK_OP("aten::glu.out");
  const int64_t d = glu_dim(self, dim), half = self.size(d) / 2;
  check_glu_dtype(self, "glu_cpu");
  c10::DeviceGuard guard(self.device());
  const at::Tensor a = self.narrow(d, 0, half), b = self.narrow(d, half, half);
  auto iter = at::TensorIteratorConfig().set_check_mem_overlap(true).add_output(out).add_const_input(a)
                  .add_const_input(b).build();
  launch_iterator(NRT_OP_GLU, iter, {});
  return out;
}

at::Tensor glu(const at::Tensor& self, int64_t dim) {
  NEURON_TRACK_OP("aten::glu");
  at::Tensor out = at::empty({0}, self.options());
  return glu_out(self, dim, out);
}

at::Tensor& glu_backward_out(const at::Tensor& grad_output, const at::Tensor& self, int64_t dim,
                             at::Tensor& grad_input) {
  NEURON_TRACK_OP("aten::glu_backward.grad_input");
  const int64_t d = glu_dim(self, dim), half = self.size(d) / 2;
  check_glu_dtype(self, "glu_backward_cpu");
  c10::DeviceGuard guard(self.device());
  at::native::resize_output(grad_input, self.sizes());
  const at::Tensor a = self.narrow(d, 0, half), b = self.narrow(d, half, half);
  at::Tensor grad_a = grad_input.narrow(d, 0, half), grad_b = grad_input.narrow(d, half, half);
  auto iter = at::TensorIteratorConfig()
                  .set_check_mem_overlap(true)
                  .add_output(grad_a)
                  .add_output(grad_b)
                  .add_const_input(grad_output)
                  .add_const_input(a)
                  .add_const_input(b)
                  .build();
  launch_iterator(NRT_OP_GLU_BACKWARD, iter, {});
  return grad_input;
}

at::Tensor glu_backward(const at::Tensor& grad_output, const at::Tensor& self, int64_t dim) {
  NEURON_TRACK_OP("aten::glu_backward");
  at::Tensor grad_input = at::empty({0}, grad_output.options());
  return glu_backward_out(grad_output, self, dim, grad_input);
}

std::tuple<at::Tensor&, at::Tensor&> frexp_out(const at::Tensor& self, at::Tensor& mantissa, at::Tensor& exponent) {
  NEURON_TRACK_OP("aten::frexp.Tensor_out");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "torch.frexp() only supports floating-point dtypes");
  TORCH_CHECK(mantissa.dtype() == self.dtype(), "torch.frexp() expects mantissa to have dtype ", self.dtype(),
              " but got ", mantissa.dtype());
  TORCH_CHECK(exponent.dtype() == at::kInt, "torch.frexp() expects exponent to have int dtype but got ",
              exponent.dtype());
  c10::DeviceGuard guard(self.device());
  auto iter = at::TensorIteratorConfig()
                  .check_all_same_dtype(false)
                  .set_check_mem_overlap(true)
                  .add_output(mantissa)
                  .add_output(exponent)
                  .add_const_input(self)
                  .build();
  launch_iterator(NRT_OP_FREXP, iter, {}, self.scalar_type());
  return {mantissa, exponent};
}

// The gradients of _prelu_kernel, both of the broadcast shape (autograd
// sums the weight's over the dims prelu expanded it along).
std::tuple<at::Tensor, at::Tensor> prelu_kernel_backward(const at::Tensor& grad_output, const at::Tensor& self,
                                                         const at::Tensor& weight) {
  NEURON_TRACK_OP("aten::_prelu_kernel_backward");
  c10::DeviceGuard guard(self.device());
  at::Tensor grad_self, grad_weight;
  auto iter = at::TensorIteratorConfig()
                  .add_output(grad_self)
                  .add_output(grad_weight)
                  .add_const_input(grad_output)
                  .add_const_input(self)
                  .add_const_input(weight)
                  .build();
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "\"prelu_backward_cpu\" not implemented for '",
              at::toString(self.scalar_type()), "'");
  launch_iterator(NRT_OP_PRELU_BACKWARD, iter, {});
  return {iter.output(0), iter.output(1)};
}

}  // namespace

NEURON_LIBRARY_IMPL(aten, m) {
  m.impl("glu", TORCH_FN(glu));
  m.impl("glu.out", TORCH_FN(glu_out));
  m.impl("glu_backward", TORCH_FN(glu_backward));
  m.impl("glu_backward.grad_input", TORCH_FN(glu_backward_out));
  m.impl("frexp.Tensor_out", TORCH_FN(frexp_out));
  m.impl("_prelu_kernel_backward", TORCH_FN(prelu_kernel_backward));
}

}  // namespace torchneuron
