// General eigendecomposition on neuron: linalg_eig and _linalg_eigvals
// (torch.linalg.eig, torch.linalg.eigvals: the latter is PyTorch's
// composite, which calls linalg_eig when a gradient may be needed) and
// their out= overloads, on the runtime's LINALG_EIG (Hessenberg reduction,
// shifted QR, back substitution, in double; see neuronrt/ops/linalg.h).
// Results are complex as the CPU's: eigenvalues contiguous, eigenvectors
// batched column-major, each of unit norm with its largest component real
// for complex eigenvalues (geev's normalisation). The order is the Schur
// form's, as geev's: the balancing, shifts and deflation test are geev's,
// so the order, and with it the eigenvectors, are the CPU's on most small
// matrices (surely the order on triangular and diagonal ones; less often as
// n grows); a real matrix's eigenvectors may still differ in sign. A
// non-finite input is refused for eigvals too (the CPU's LAPACK may fault
// on it). Autograd comes from PyTorch's formula (linalg_eig_backward),
// which calls native ops.
#include <ATen/ATen.h>
#include <ATen/native/LinearAlgebraUtils.h>
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "linalg_complex_native.h"
#include "nn_launch.h"
#include "op_tracking.h"
#include "runtime_limits.h"
#include "storage_fallback.h"
#include "tensor_view.h"

namespace torchneuron {
namespace {

using Tensor = at::Tensor;

// The CPU's checks in its order: the complex result dtype (an integer A
// fails there), finiteness, shape, dtype. Returns the result dtype.
at::ScalarType check_input(const Tensor& A, const char* api, const char* op) {
  const at::ScalarType complex_dtype = at::toComplexType(A.scalar_type());
  TORCH_CHECK(A.isfinite().all().item<bool>(), api, ": input tensor should not contain infs or NaNs.");
  at::native::squareCheckInputs(A, op);
  at::native::checkFloatingOrComplex(A, op);
  TORCH_CHECK_NOT_IMPLEMENTED(A.scalar_type() != at::kHalf && A.scalar_type() != at::kBFloat16,
                              "\"linalg_eig_out_cpu\" not implemented for '", toString(A.scalar_type()), "'");
  return complex_dtype;
}

// An out= tensor must be on A's device and able to take the result dtype.
void check_out(const Tensor& out, const Tensor& A, at::ScalarType dtype, const char* api, const char* what) {
  at::native::checkSameDevice(api, out, A, what);
  TORCH_CHECK(at::canCast(dtype, out.scalar_type()), api, ": Expected ", what, " to be safely castable from ",
              dtype, " dtype, but got ", what, " with dtype ", out.scalar_type());
}

// Eigenvalues (and eigenvectors when want_v) of checked A, as new tensors;
// raises the CPU's error when the QR iteration does not converge.
std::tuple<Tensor, Tensor> decompose(const Tensor& A, at::ScalarType dtype, bool want_v, const char* api) {
  const char* name = "linalg_eig";
  const auto batch = A.sizes().slice(0, A.dim() - 2);
  std::vector<int64_t> w_shape(A.sizes().begin(), A.sizes().end() - 1), vt_shape(A.sizes().vec());
  Tensor W = at::empty(w_shape, A.options().dtype(dtype));
  Tensor V = want_v ? at::empty(vt_shape, A.options().dtype(dtype)).mT() : Tensor();  // column-major, as LAPACK's
  Tensor info = at::zeros(batch, A.options().dtype(at::kInt));
  if (A.numel() > 0) {
    if (want_v)
      launch_nn(NRT_OP_LINALG_EIG, W, 3, {to_view(W, name), to_view(info, name), to_view(V, name), to_view(A, name)});
    else
      launch_nn(NRT_OP_LINALG_EIG, W, 2, {to_view(W, name), to_view(info, name), to_view(A, name)});
    at::_linalg_check_errors(info, api, A.dim() == 2);
  }
  return {W, V};
}

std::tuple<Tensor, Tensor> eig(const Tensor& A) {
  NEURON_TRACK_OP("aten::linalg_eig");
  c10::DeviceGuard guard(A.device());
  const at::ScalarType dtype = check_input(A, "torch.linalg.eig", "linalg.eig");
  return decompose(A, dtype, true, "torch.linalg.eig");
}

std::tuple<Tensor&, Tensor&> eig_out(const Tensor& A, Tensor& W, Tensor& V) {
  NEURON_TRACK_OP("aten::linalg_eig.out");
  c10::DeviceGuard guard(A.device());
  const at::ScalarType dtype = check_input(A, "torch.linalg.eig", "linalg.eig");
  check_out(W, A, dtype, "torch.linalg.eig", "eigenvalues");
  check_out(V, A, dtype, "torch.linalg.eig", "eigenvectors");
  auto [w, v] = decompose(A, dtype, true, "torch.linalg.eig");
  at::native::resize_output(W, w.sizes());
  W.copy_(w);
  if (V.sizes() != v.sizes()) {  // resized batched column-major, as the CPU's
    at::native::resize_output(V, v.mT().sizes());
    V.transpose_(-2, -1);
  }
  V.copy_(v);
  return {W, V};
}

Tensor eigvals(const Tensor& A) {
  NEURON_TRACK_OP("aten::_linalg_eigvals");
  c10::DeviceGuard guard(A.device());
  const at::ScalarType dtype = check_input(A, "torch.linalg.eigvals", "linalg.eigvals");
  return std::get<0>(decompose(A, dtype, false, "torch.linalg.eigvals"));
}

Tensor& eigvals_out(const Tensor& A, Tensor& W) {
  NEURON_TRACK_OP("aten::linalg_eigvals.out");
  c10::DeviceGuard guard(A.device());
  const at::ScalarType dtype = check_input(A, "torch.linalg.eigvals", "linalg.eigvals");
  check_out(W, A, dtype, "torch.linalg.eigvals", "eigenvalues");
  Tensor w = std::get<0>(decompose(A, dtype, false, "torch.linalg.eigvals"));
  at::native::resize_output(W, w.sizes());
  W.copy_(w);
  return W;
}

}  // namespace
}  // namespace torchneuron

NEURON_LIBRARY_IMPL(aten, m) {
  using namespace torchneuron;
  m.impl("linalg_eig", complex_native("linalg_eig", eig));
  m.impl("linalg_eig.out", complex_native("linalg_eig.out", eig_out));
  m.impl("_linalg_eigvals", complex_native("_linalg_eigvals", eigvals));
  m.impl("linalg_eigvals.out", complex_native("linalg_eigvals.out", eigvals_out));
}
