// Symmetric indefinite LDL^T on neuron: linalg_ldl_factor_ex (and through
// PyTorch's composite, linalg_ldl_factor) and linalg_ldl_solve, functional
// and out=, on the runtime's LINALG_LDL_FACTOR and LINALG_LDL_SOLVE
// (Bunch-Kaufman diagonal pivoting with LAPACK sytrf's storage and pivot
// convention, see neuronrt/ops/linalg.h). Shapes, strides (LD
// column-major, as the CPU's), dtypes and argument checks come from
// PyTorch's structured meta functions; hermitian is the same factorisation
// for real dtypes, and for complex ones chooses L D L^H (hetrf) over L D L^T
// (sytrf).
#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/LinearAlgebraUtils.h>
#include <ATen/ops/linalg_ldl_factor_ex_meta.h>
#include <ATen/ops/linalg_ldl_solve_meta.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

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

void check_ldl_floating(const Tensor& t, const char* kernel) {
  const auto type = t.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(
      type == at::kFloat || type == at::kDouble || type == at::kComplexFloat || type == at::kComplexDouble, "\"",
      kernel, "\" not implemented for '", toString(type), "'");
}

void ldl_factor_into(const Tensor& A, bool hermitian, bool check_errors, Tensor& LD, Tensor& pivots, Tensor& info) {
  const char* name = "linalg_ldl_factor_ex";
  check_ldl_floating(A, "ldl_factor_kernel_cpu");
  if (A.numel() == 0) {
    if (info.numel() > 0) info.zero_();
  } else {
    if (!LD.is_same(A)) LD.copy_(A);
    launch_nn(NRT_OP_LINALG_LDL_FACTOR, LD, 3,
              {to_view(LD, name), to_view(pivots, name), info.numel() > 0 ? to_view(info, name) : absent_view()},
              {int_scalar(hermitian && A.is_complex())});
  }
  if (check_errors) at::_linalg_check_errors(info, "torch.linalg.ldl_factor_ex", A.dim() == 2);
}

std::tuple<Tensor, Tensor, Tensor> ldl_factor_ex(const Tensor& A, bool hermitian, bool check_errors) {
  NEURON_TRACK_OP("aten::linalg_ldl_factor_ex");
  c10::DeviceGuard guard(A.device());
  Outputs<at::meta::structured_linalg_ldl_factor_ex, 3> out;
  out.meta(A, hermitian, check_errors);
  ldl_factor_into(A, hermitian, check_errors, out[0], out[1], out[2]);
  return {out[0], out[1], out[2]};
}

std::tuple<Tensor&, Tensor&, Tensor&> ldl_factor_ex_out(const Tensor& A, bool hermitian, bool check_errors,
                                                        Tensor& LD, Tensor& pivots, Tensor& info) {
  NEURON_TRACK_OP("aten::linalg_ldl_factor_ex.out");
  c10::DeviceGuard guard(A.device());
  Outputs<at::meta::structured_linalg_ldl_factor_ex, 3> out({LD, pivots, info});
  out.meta(A, hermitian, check_errors);
  ldl_factor_into(A, hermitian, check_errors, LD, pivots, info);
  return {LD, pivots, info};
}

void ldl_solve_into(const Tensor& LD, const Tensor& pivots, const Tensor& B, bool hermitian, const Tensor& result) {
  const char* name = "linalg_ldl_solve";
  check_ldl_floating(LD, "ldl_solve_kernel_cpu");
  if (result.numel() == 0) return;
  if (!result.is_same(B)) {
    if (at::get_overlap_status(result, B) != at::MemOverlapStatus::No)
      result.copy_(B.clone());
    else
      result.copy_(B);
  }
  std::vector<int64_t> batch(result.sizes().begin(), result.sizes().end() - 2);
  std::vector<int64_t> ld_shape = batch, piv_shape = batch;
  ld_shape.insert(ld_shape.end(), {LD.size(-2), LD.size(-1)});
  piv_shape.push_back(pivots.size(-1));
  const Tensor LD_b = LD.resolve_conj().resolve_neg().expand(ld_shape);  // the kernel reads storage as is
  const Tensor piv_b = (pivots.scalar_type() == at::kInt ? pivots : pivots.to(at::kInt)).expand(piv_shape);
  launch_nn(NRT_OP_LINALG_LDL_SOLVE, result, 1, {to_view(result, name), to_view(LD_b, name), to_view(piv_b, name)},
            {int_scalar(hermitian && LD.is_complex())});
}

Tensor ldl_solve(const Tensor& LD, const Tensor& pivots, const Tensor& B, bool hermitian) {
  NEURON_TRACK_OP("aten::linalg_ldl_solve");
  c10::DeviceGuard guard(LD.device());
  Outputs<at::meta::structured_linalg_ldl_solve, 1> out;
  out.meta(LD, pivots, B, hermitian);
  ldl_solve_into(LD, pivots, B, hermitian, out[0]);
  return out[0];
}

Tensor& ldl_solve_out(const Tensor& LD, const Tensor& pivots, const Tensor& B, bool hermitian, Tensor& result) {
  NEURON_TRACK_OP("aten::linalg_ldl_solve.out");
  c10::DeviceGuard guard(LD.device());
  Outputs<at::meta::structured_linalg_ldl_solve, 1> out({result});
  out.meta(LD, pivots, B, hermitian);
  ldl_solve_into(LD, pivots, B, hermitian, result);
  return result;
}

}  // namespace
}  // namespace torchneuron

NEURON_LIBRARY_IMPL(aten, m) {
  using namespace torchneuron;
  m.impl("linalg_ldl_factor_ex", TORCH_FN(ldl_factor_ex));
  m.impl("linalg_ldl_factor_ex.out", TORCH_FN(ldl_factor_ex_out));
  m.impl("linalg_ldl_solve", complex_native("linalg_ldl_solve", ldl_solve));
  m.impl("linalg_ldl_solve.out", complex_native("linalg_ldl_solve.out", ldl_solve_out));
}
