// Singular value decomposition on neuron: _linalg_svd (linalg.svd,
// linalg.svdvals and, through PyTorch's composites, pinv, matrix_rank,
// matrix_norm / norm with ord 2, -2 and "nuc", cond) on the runtime's
// LINALG_SVD (QR + one-sided Jacobi in double, see neuronrt/ops/linalg.h).
// Shapes, strides (U and Vh column-major, as the CPU's) and dtype checks
// come from PyTorch's structured meta function; the empty-matrix identity,
// the driver= refusal and the non-finite-input LinAlgError follow the CPU's
// order and messages. Singular values descend as LAPACK returns them;
// singular vectors are unique only up to sign, and their signs are not
// LAPACK's (nor, for complex inputs, their unit phases). Autograd
// comes from PyTorch's formula (svd_backward), which calls native ops.
#include <ATen/ATen.h>
#include <ATen/core/stack.h>
#include <ATen/native/LinearAlgebraUtils.h>
#include <ATen/ops/_linalg_svd_meta.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "nn_launch.h"
#include "op_tracking.h"
#include "structured_outputs.h"
#include "tensor_view.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {

using Tensor = at::Tensor;
using Driver = std::optional<c10::string_view>;

void svd_into(const Tensor& A, bool full_matrices, bool compute_uv, Driver driver, Tensor& U, Tensor& S,
              Tensor& Vh) {
  const char* name = "linalg_svd";
  if (A.numel() == 0) {
    // As the CPU: the identity is a valid SVD of an empty matrix.
    if (compute_uv && full_matrices) {
      for (Tensor* t : {&U, &Vh})
        if (t->numel() != 0) {
          t->zero_();
          t->diagonal(0, -2, -1).fill_(1.);
        }
    }
    return;
  }
  TORCH_CHECK(!driver.has_value(),
              "torch.linalg.svd: keyword argument `driver=` is only supported on CUDA inputs with cuSOLVER backend.");
  const auto type = A.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(
      type == at::kFloat || type == at::kDouble || type == at::kComplexFloat || type == at::kComplexDouble,
      "\"linalg_svd_cpu\" not implemented for '", toString(type), "'");
  const Tensor plain = A.resolve_conj().resolve_neg();  // the kernel reads storage as is
  if (compute_uv)
    launch_nn(NRT_OP_LINALG_SVD, plain, 3,
              {to_view(S, name), to_view(U, name), to_view(Vh, name), to_view(plain, name)},
              {int_scalar(full_matrices)});
  else
    launch_nn(NRT_OP_LINALG_SVD, plain, 1, {to_view(S, name), to_view(plain, name)}, {int_scalar(full_matrices)});
  // A non-finite input gives NaN singular values; the CPU reports it as
  // LAPACK's info -4, batch element by batch element.
  const Tensor info = at::where(S.isnan().any(-1), -4, 0).to(at::kInt);
  at::_linalg_check_errors(info, "linalg.svd", /*is_matrix=*/A.dim() == 2);
}

std::tuple<Tensor, Tensor, Tensor> svd(const Tensor& A, bool full_matrices, bool compute_uv, Driver driver) {
  NEURON_TRACK_OP("aten::_linalg_svd");
  c10::DeviceGuard guard(A.device());
  Outputs<at::meta::structured__linalg_svd, 3> out;
  out.meta(A, full_matrices, compute_uv, driver);
  svd_into(A, full_matrices, compute_uv, driver, out[0], out[1], out[2]);
  return {out[0], out[1], out[2]};
}

std::tuple<Tensor&, Tensor&, Tensor&> svd_out(const Tensor& A, bool full_matrices, bool compute_uv, Driver driver,
                                              Tensor& U, Tensor& S, Tensor& Vh) {
  NEURON_TRACK_OP("aten::_linalg_svd.U");
  c10::DeviceGuard guard(A.device());
  Outputs<at::meta::structured__linalg_svd, 3> out({U, S, Vh});
  out.meta(A, full_matrices, compute_uv, driver);
  svd_into(A, full_matrices, compute_uv, driver, U, S, Vh);
  return {U, S, Vh};
}

}  // namespace
}  // namespace torchneuron

NEURON_LIBRARY_IMPL(aten, m) {
  using namespace torchneuron;
  m.impl("_linalg_svd", TORCH_FN(svd));
  m.impl("_linalg_svd.U", TORCH_FN(svd_out));
}
