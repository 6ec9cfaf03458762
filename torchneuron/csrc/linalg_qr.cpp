// Householder QR on neuron: geqrf, linalg_householder_product (orgqr),
// ormqr and linalg_qr, on the runtime's LINALG_GEQRF and LINALG_ORMQR
// (neuronrt/ops/linalg.h). Outputs are laid out as the CPU lays them out
// (LAPACK's column-major matrices, linalg_qr's strides from its structured
// meta function); the argument checks raise the CPU's messages. Q is never
// formed by a separate kernel: householder_product and linalg_qr apply the
// reflectors to an identity with ORMQR, and the right-hand forms of ormqr
// are the left-hand ones on the transposed view.
//
// Complex matrices run on the same kernels (H = I - tau v v^H, as LAPACK's
// zgeqrf; transpose means Q^H). Autograd comes from PyTorch's formulas (linalg_qr_backward,
// householder_product_backward, ormqr's), which call native ops.
#include <ATen/ATen.h>
#include <ATen/native/LinearAlgebraUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/linalg_qr_meta.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "nn_launch.h"
#include "op_tracking.h"
#include "linalg_complex_native.h"
#include "storage_fallback.h"
#include "structured_outputs.h"
#include "tensor_view.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {

using Tensor = at::Tensor;

// The CPU dispatches on the dtype and names its kernel: other dtypes are a
// NotImplementedError with that name.
void check_kernel_dtype(const Tensor& t, const char* cpu_kernel) {
  const auto type = t.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(type == at::kFloat || type == at::kDouble || type == at::kComplexFloat ||
                                  type == at::kComplexDouble,
                              "\"",
                              cpu_kernel, "\" not implemented for '", toString(t.scalar_type()), "'");
}

Tensor column_major_empty(at::IntArrayRef shape, const at::TensorOptions& options) {
  return at::empty_strided(shape, at::native::batched_matrix_contiguous_strides(shape, /*f_contig=*/true),
                           options);
}

// C = Q C or Q^H C in place (conj(Q) for Q with conj), Q = H_0 ... H_{k-1}
// from reflectors in the columns of V (geqrf's layout) and tau (..., k).
// The kernel reads storage: conjugate views of V and tau are resolved.
void apply_q_into(const Tensor& C, const Tensor& V, const Tensor& tau, bool transpose, const char* name,
                  bool conj = false) {
  if (C.numel() == 0 || tau.size(-1) == 0) return;
  const Tensor V_ = V.resolve_conj(), tau_ = tau.resolve_conj();
  launch_nn(NRT_OP_LINALG_ORMQR, C, 1, {to_view(C, name), to_view(V_, name), to_view(tau_, name)},
            {int_scalar(transpose), int_scalar(conj && C.is_complex())});
}

// Overwrites Q (..., m, c) with the first c columns of H_0 ... H_{k-1}.
void q_into(const Tensor& Q, const Tensor& V, const Tensor& tau, const char* name) {
  Q.zero_();
  if (Q.numel() == 0) return;
  Q.diagonal(0, -2, -1).fill_(1.);
  apply_q_into(Q, V, tau, /*transpose=*/false, name);
}

// Writes a functional result into an out= tensor; one that had to be
// resized takes the result's strides, as the CPU's out= tensors do.
void store_out(Tensor& out, const Tensor& result) {
  if (at::native::resize_output(out, result.sizes())) out.as_strided_(result.sizes(), result.strides());
  out.copy_(result);
}

// ---- geqrf ---------------------------------------------------------------------------

std::tuple<Tensor, Tensor> geqrf_compute(const Tensor& input) {
  const char* name = "geqrf";
  TORCH_CHECK(input.dim() >= 2, "torch.geqrf: input must have at least 2 dimensions.");
  check_kernel_dtype(input, "geqrf_cpu");
  const int64_t m = input.size(-2), n = input.size(-1), k = std::min(m, n);
  Tensor QR = at::native::cloneBatchedColumnMajor(input);
  std::vector<int64_t> tau_shape(input.sizes().begin(), input.sizes().end() - 2);
  tau_shape.push_back(k);
  Tensor tau = at::empty(tau_shape, input.options());
  if (QR.numel() > 0 && k > 0)
    launch_nn(NRT_OP_LINALG_GEQRF, QR, 2, {to_view(QR, name), to_view(tau, name)});
  return {QR, tau};
}

std::tuple<Tensor, Tensor> geqrf(const Tensor& input) {
  NEURON_TRACK_OP("aten::geqrf");
  c10::DeviceGuard guard(input.device());
  return geqrf_compute(input);
}

std::tuple<Tensor&, Tensor&> geqrf_out(const Tensor& input, Tensor& a, Tensor& tau) {
  NEURON_TRACK_OP("aten::geqrf.a");
  c10::DeviceGuard guard(input.device());
  TORCH_CHECK(input.dim() >= 2, "torch.geqrf: input must have at least 2 dimensions.");
  at::native::checkSameDevice("torch.geqrf", a, input, "a");
  at::native::checkSameDevice("torch.geqrf", tau, input, "tau");
  at::native::checkLinalgCompatibleDtype("torch.geqrf", a, input, "a");
  at::native::checkLinalgCompatibleDtype("torch.geqrf", tau, input, "tau");
  auto [QR, t] = geqrf_compute(input);
  store_out(a, QR);
  store_out(tau, t);
  return {a, tau};
}

// ---- householder_product (orgqr) ---------------------------------------------------------

Tensor householder_product_compute(const Tensor& input, const Tensor& tau) {
  const char* api = "torch.linalg.householder_product";
  TORCH_CHECK(input.dim() >= 2, api, ": input must have at least 2 dimensions.");
  TORCH_CHECK(input.size(-2) >= input.size(-1), api,
              ": input.shape[-2] must be greater than or equal to input.shape[-1]");
  TORCH_CHECK(tau.dim() >= 1 && input.size(-1) >= tau.size(-1), api,
              ": input.shape[-1] must be greater than or equal to tau.shape[-1]");
  TORCH_CHECK(input.dim() - tau.dim() == 1, api,
              ": Expected tau to have one dimension less than input, but got tau.ndim equal to ", tau.dim(),
              " and input.ndim is equal to ", input.dim());
  if (input.dim() > 2) {
    const auto batch = input.sizes().slice(0, input.dim() - 2);
    const auto tau_batch = tau.sizes().slice(0, tau.dim() - 1);
    TORCH_CHECK(tau_batch.equals(batch), api,
                ": Expected batch dimensions of tau to be equal to input.shape[:-2], but got ", tau_batch);
  }
  TORCH_CHECK(tau.scalar_type() == input.scalar_type(), api, ": tau dtype ", tau.scalar_type(),
              " does not match input dtype ", input.scalar_type());
  at::native::checkSameDevice(api, tau, input, "tau");
  check_kernel_dtype(input, "orgqr_cpu");
  Tensor Q = column_major_empty(input.sizes(), input.options());
  q_into(Q, input, tau, "linalg_householder_product");
  return Q;
}

Tensor householder_product(const Tensor& input, const Tensor& tau) {
  NEURON_TRACK_OP("aten::linalg_householder_product");
  c10::DeviceGuard guard(input.device());
  return householder_product_compute(input, tau);
}

Tensor& householder_product_out(const Tensor& input, const Tensor& tau, Tensor& out) {
  NEURON_TRACK_OP("aten::linalg_householder_product.out");
  c10::DeviceGuard guard(input.device());
  at::native::checkSameDevice("torch.linalg.householder_product", out, input);
  at::native::checkLinalgCompatibleDtype("torch.linalg.householder_product", out, input);
  const Tensor Q = householder_product_compute(input, tau);
  store_out(out, Q);
  return out;
}

// ---- ormqr ------------------------------------------------------------------------

Tensor ormqr_compute(const Tensor& input, const Tensor& tau, const Tensor& other, bool left, bool transpose) {
  const char* api = "torch.ormqr";
  TORCH_CHECK(input.dim() >= 2, api, ": input must have at least 2 dimensions.");
  TORCH_CHECK(other.dim() >= 2, api, ": other must have at least 2 dimensions.");
  const int64_t side = left ? -2 : -1;
  TORCH_CHECK(other.size(side) == input.size(-2), api, ": other.shape[", side,
              "] must be equal to input.shape[-2]");
  TORCH_CHECK(tau.dim() >= 1 && std::min(other.size(side), input.size(-1)) == tau.size(-1), api,
              ": tau.shape[-1] must be equal to min(other.shape[", side, "], input.shape[-1])");
  TORCH_CHECK(input.dim() - tau.dim() == 1, api,
              ": Expected tau to have one dimension less than input, but got tau.ndim equal to ", tau.dim(),
              " and input.ndim is equal to ", input.dim());
  TORCH_CHECK(input.dim() == other.dim(), api,
              ": Expected other to have the same number of dimensions as input, but got other.ndim equal to ",
              other.dim(), " and input.ndim is equal to ", input.dim());
  if (input.dim() > 2) {
    const auto batch = input.sizes().slice(0, input.dim() - 2);
    const auto tau_batch = tau.sizes().slice(0, tau.dim() - 1);
    const auto other_batch = other.sizes().slice(0, other.dim() - 2);
    TORCH_CHECK(tau_batch.equals(batch), api,
                ": Expected batch dimensions of tau to be equal to input.shape[:-2], but got ", tau_batch);
    TORCH_CHECK(other_batch.equals(batch), api,
                ": Expected batch dimensions of other to be equal to input.shape[:-2], but got ", other_batch);
  }
  TORCH_CHECK(input.scalar_type() == tau.scalar_type(), api,
              ": Expected input and tau to have the same dtype, but input has dtype", input.scalar_type(),
              " and tau has dtype ", tau.scalar_type());
  TORCH_CHECK(input.scalar_type() == other.scalar_type(), api,
              ": Expected input and other to have the same dtype, but input has dtype", input.scalar_type(),
              " and other has dtype ", other.scalar_type());
  at::native::checkSameDevice(api, tau, input, "tau");
  at::native::checkSameDevice(api, other, input, "other");
  check_kernel_dtype(input, "ormqr_cpu");
  Tensor C = at::native::cloneBatchedColumnMajor(other);
  // C Q = (Q^T C^T)^T and C Q^H = (conj(Q) C^T)^T, Q^T = conj(Q)^H: the
  // left form of conj(Q) on C^T (conj(Q) = Q for real).
  apply_q_into(left ? C : C.mT(), input, tau, left ? transpose : !transpose, "ormqr", /*conj=*/!left);
  return C;
}

Tensor ormqr(const Tensor& input, const Tensor& tau, const Tensor& other, bool left, bool transpose) {
  NEURON_TRACK_OP("aten::ormqr");
  c10::DeviceGuard guard(input.device());
  return ormqr_compute(input, tau, other, left, transpose);
}

Tensor& ormqr_out(const Tensor& input, const Tensor& tau, const Tensor& other, bool left, bool transpose,
                  Tensor& out) {
  NEURON_TRACK_OP("aten::ormqr.out");
  c10::DeviceGuard guard(input.device());
  TORCH_CHECK(out.scalar_type() == input.scalar_type(),
              "torch.ormqr: Expected input and result to have the same dtype, but input has dtype",
              input.scalar_type(), " and result has dtype ", out.scalar_type());
  at::native::checkSameDevice("torch.ormqr", out, input, "result");
  const Tensor C = ormqr_compute(input, tau, other, left, transpose);
  store_out(out, C);
  return out;
}

// ---- linalg_qr ------------------------------------------------------------------------

void qr_into(const Tensor& A, c10::string_view mode, Tensor& Q, Tensor& R) {
  const char* name = "linalg_qr";
  auto [compute_q, reduced] = at::native::_parse_qr_mode(mode);
  check_kernel_dtype(A, "geqrf_cpu");
  const int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n);
  auto [QR, tau] = geqrf_compute(A);
  // R: the upper triangle of the first k (reduced) or m (complete) rows.
  at::triu_out(R, QR.narrow(-2, 0, R.size(-2)));
  if (compute_q) q_into(Q, QR.narrow(-1, 0, k), tau, name);
  (void)reduced;
}

std::tuple<Tensor&, Tensor&> qr_out(const Tensor& A, c10::string_view mode, Tensor& Q, Tensor& R) {
  NEURON_TRACK_OP("aten::linalg_qr.out");
  c10::DeviceGuard guard(A.device());
  Outputs<at::meta::structured_linalg_qr, 2> out({Q, R});
  out.meta(A, mode);
  qr_into(A, mode, Q, R);
  return {Q, R};
}

std::tuple<Tensor, Tensor> qr(const Tensor& A, c10::string_view mode) {
  NEURON_TRACK_OP("aten::linalg_qr");
  c10::DeviceGuard guard(A.device());
  Outputs<at::meta::structured_linalg_qr, 2> out;
  out.meta(A, mode);
  qr_into(A, mode, out[0], out[1]);
  return {out[0], out[1]};
}

}  // namespace
}  // namespace torchneuron

NEURON_LIBRARY_IMPL(aten, m) {
  using namespace torchneuron;
  m.impl("geqrf", complex_native("geqrf", geqrf));
  m.impl("geqrf.a", complex_native("geqrf.a", geqrf_out));
  m.impl("linalg_householder_product",
         complex_native("linalg_householder_product", householder_product));
  m.impl("linalg_householder_product.out",
         complex_native("linalg_householder_product.out", householder_product_out));
  m.impl("ormqr", complex_native("ormqr", ormqr));
  m.impl("ormqr.out", complex_native("ormqr.out", ormqr_out));
  m.impl("linalg_qr", complex_native("linalg_qr", qr));
  m.impl("linalg_qr.out", complex_native("linalg_qr.out", qr_out));
}
