// Symmetric eigendecomposition on neuron: _linalg_eigh (linalg.eigh,
// linalg.eigvalsh) on the runtime's LINALG_EIGH (cyclic Jacobi, or from
// n = 64 tridiagonal QL, see neuronrt/ops/linalg.h). Shapes, strides,
// dtype and UPLO checks come from PyTorch's structured meta function;
// eigenvalues ascend as LAPACK returns them. Eigenvectors are unique
// only up to sign (and within repeated eigenvalues), and their signs are
// not LAPACK's; Hermitian (complex) eigenvectors are unique up to a unit
// phase, and theirs are not LAPACK's either. Autograd comes from PyTorch's formula
// (linalg_eigh_backward), which calls native ops.
#include <ATen/ATen.h>
#include <ATen/native/LinearAlgebraUtils.h>
#include <ATen/ops/_linalg_eigh_meta.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <cctype>

#include "linalg_complex_native.h"
#include "nn_launch.h"
#include "op_tracking.h"
#include "storage_fallback.h"
#include "structured_outputs.h"
#include "tensor_view.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {

using Tensor = at::Tensor;

void eigh_into(const Tensor& A, c10::string_view uplo, bool compute_v, Tensor& W, Tensor& V) {
  const char* name = "linalg_eigh";
  const auto type = A.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(
      type == at::kFloat || type == at::kDouble || type == at::kComplexFloat || type == at::kComplexDouble,
      "\"linalg_eigh_cpu\" not implemented for '", toString(type), "'");
  if (A.numel() == 0) return;
  const bool upper = std::toupper(static_cast<unsigned char>(uplo[0])) == 'U';
  // V holds A on entry; without vectors it is a column-major scratch copy.
  Tensor work = compute_v ? V : at::native::cloneBatchedColumnMajor(A.resolve_conj().resolve_neg());
  if (compute_v) work.copy_(A);
  launch_nn(NRT_OP_LINALG_EIGH, work, 2, {to_view(W, name), to_view(work, name)},
            {int_scalar(upper), int_scalar(compute_v)});
}

std::tuple<Tensor&, Tensor&> eigh_out(const Tensor& A, c10::string_view uplo, bool compute_v, Tensor& W,
                                      Tensor& V) {
  NEURON_TRACK_OP("aten::_linalg_eigh.eigenvalues");
  c10::DeviceGuard guard(A.device());
  Outputs<at::meta::structured__linalg_eigh, 2> out({W, V});
  out.meta(A, uplo, compute_v);
  eigh_into(A, uplo, compute_v, W, V);
  return {W, V};
}

std::tuple<Tensor, Tensor> eigh(const Tensor& A, c10::string_view uplo, bool compute_v) {
  NEURON_TRACK_OP("aten::_linalg_eigh");
  c10::DeviceGuard guard(A.device());
  Outputs<at::meta::structured__linalg_eigh, 2> out;
  out.meta(A, uplo, compute_v);
  eigh_into(A, uplo, compute_v, out[0], out[1]);
  return {out[0], out[1]};
}

}  // namespace
}  // namespace torchneuron

NEURON_LIBRARY_IMPL(aten, m) {
  using namespace torchneuron;
  m.impl("_linalg_eigh", complex_native("_linalg_eigh", eigh));
  m.impl("_linalg_eigh.eigenvalues", complex_native("_linalg_eigh.eigenvalues", eigh_out));
}
