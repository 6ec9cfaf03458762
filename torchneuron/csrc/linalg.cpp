// Dense linear algebra on neuron: LU (factor, solve, det, slogdet, inverse,
// unpack), Cholesky (factor, solve, inverse) and triangular solves, built on
// the runtime's four linear-algebra ops (neuronrt/ops/linalg.h). Shapes,
// argument checks and output strides come from PyTorch's structured meta
// functions and linear-algebra helpers, so results are laid out as the CPU
// lays them out; the arithmetic runs in C. Transposed solves pass transposed
// views (the kernels read any strides) instead of copying.
//
// Complex matrices run on the same kernels (L L^H for Cholesky, adjoint
// solves as transposed views solved with conj(A)); a conjugate view (conj
// bit) is passed as its plain storage with the conjugation folded into the
// solve, never materialised.
//
// Autograd comes from PyTorch's formulas for these ATen ops, which call
// back into them, so backward runs on the same kernels.
#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/LinearAlgebraUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_linalg_det_meta.h>
#include <ATen/ops/_linalg_slogdet_meta.h>
#include <ATen/ops/_linalg_solve_ex_meta.h>
#include <ATen/ops/linalg_cholesky_ex_meta.h>
#include <ATen/ops/linalg_inv_ex_meta.h>
#include <ATen/ops/linalg_lu_factor_ex_meta.h>
#include <ATen/ops/linalg_lu_meta.h>
#include <ATen/ops/linalg_lu_solve_meta.h>
#include <ATen/ops/lu_unpack_meta.h>
#include <ATen/ops/triangular_solve_meta.h>
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

// float32, float64, complex64 or complex128: other dtypes (integers,
// 16-bit) run through the fallback, which computes them or raises the
// CPU's error.
void check_float_or_complex(const Tensor& t, const char* api) {
  const auto type = t.scalar_type();
  if (type != at::kFloat && type != at::kDouble && type != at::kComplexFloat && type != at::kComplexDouble)
    throw_dtype_limit(api, c10::toString(type));
}

// t with its batch dims expanded to `batch` (stride 0 where broadcast).
Tensor expand_batch(const Tensor& t, at::IntArrayRef batch, int tail) {
  std::vector<int64_t> shape(batch.begin(), batch.end());
  for (int d = t.dim() - tail; d < t.dim(); d++) shape.push_back(t.size(d));
  return t.expand(shape);
}

at::IntArrayRef batch_of(const Tensor& t, int tail) { return t.sizes().slice(0, t.dim() - tail); }

// Solves A X = B (conj(A) X = B when conj) in place on X (which holds B),
// A's upper or lower triangle. A conjugate view of X holds conj(X) in its
// storage, and conj(X) = conj(A)^-1 conj(B): it is solved there with the
// conjugation flipped, as is a conjugate view of A. A negative view of X
// holds -X, the solution for -B, which its storage holds: nothing to do;
// a negative view of A is resolved (the kernel reads storage).
void triangular_solve_into(const Tensor& X_in, const Tensor& A_in, bool upper, bool unit, bool conj,
                           const char* name) {
  if (X_in.numel() == 0) return;
  const Tensor X = X_in.is_conj() ? X_in.conj() : X_in;
  const Tensor A = (A_in.is_conj() ? A_in.conj() : A_in).resolve_neg();
  conj = (conj != X_in.is_conj()) != A_in.is_conj();
  const Tensor A_b = expand_batch(A, batch_of(X, 2), 2);
  launch_nn(NRT_OP_LINALG_TRIANGULAR_SOLVE, X, 1, {to_view(X, name), to_view(A_b, name)},
            {int_scalar(upper), int_scalar(unit), int_scalar(conj && X.is_complex())});
}

// Applies the row interchanges of pivots to X: P^T X (forward) or P X.
void pivot_into(const Tensor& X, const Tensor& pivots, bool reverse, const char* name) {
  if (X.numel() == 0 || pivots.size(-1) == 0) return;
  const Tensor p_b = expand_batch(pivots, batch_of(X, 2), 1);
  launch_nn(NRT_OP_LINALG_LU_PIVOT, X, 1, {to_view(X, name), to_view(p_b, name)}, {int_scalar(reverse)});
}

// ---- LU ---------------------------------------------------------------------------

void lu_factor_into(const Tensor& A, const Tensor& LU, const Tensor& pivots, const Tensor& info) {
  const char* name = "linalg_lu_factor_ex";
  check_float_or_complex(A, "linalg.lu_factor");
  if (!LU.is_same(A)) LU.copy_(A);
  launch_nn(NRT_OP_LINALG_LU_FACTOR, LU, 3,
            {to_view(LU, name), to_view(pivots, name), to_view(info, name)});
}

std::tuple<Tensor&, Tensor&, Tensor&> lu_factor_ex_out(const Tensor& A, bool pivot, bool check_errors,
                                                      Tensor& LU, Tensor& pivots, Tensor& info) {
  NEURON_TRACK_OP("aten::linalg_lu_factor_ex.out");
  c10::DeviceGuard guard(A.device());
  Outputs<at::meta::structured_linalg_lu_factor_ex, 3> out({LU, pivots, info});
  out.meta(A, pivot, check_errors);
  TORCH_CHECK(pivot, "linalg.lu_factor: LU without pivoting is not implemented on neuron");
  lu_factor_into(A, LU, pivots, info);
  if (check_errors) at::_linalg_check_errors(info, "torch.linalg.lu_factor_ex", A.dim() == 2);
  return {LU, pivots, info};
}

std::tuple<Tensor, Tensor, Tensor> lu_factor_ex(const Tensor& A, bool pivot, bool check_errors) {
  NEURON_TRACK_OP("aten::linalg_lu_factor_ex");
  c10::DeviceGuard guard(A.device());
  Outputs<at::meta::structured_linalg_lu_factor_ex, 3> out;
  out.meta(A, pivot, check_errors);
  TORCH_CHECK(pivot, "linalg.lu_factor: LU without pivoting is not implemented on neuron");
  lu_factor_into(A, out[0], out[1], out[2]);
  if (check_errors) at::_linalg_check_errors(out[2], "torch.linalg.lu_factor_ex", A.dim() == 2);
  return {out[0], out[1], out[2]};
}

// result = A^-1 B (left) or B A^-1, A = P L U given as LU and pivots.
void lu_solve_into(const Tensor& LU, const Tensor& pivots, const Tensor& B, bool left, bool adjoint,
                   const Tensor& result) {
  const char* name = "linalg_lu_solve";
  check_float_or_complex(LU, "linalg.lu_solve");
  if (result.numel() == 0) return;
  if (!result.is_same(B)) {
    // B may share memory with the result only when it is the result.
    if (at::get_overlap_status(result, B) != at::MemOverlapStatus::No) {
      result.copy_(B.clone());
    } else {
      result.copy_(B);
    }
  }
  // op(A) X = B with op(A) = A or A^H (conj(A^T)). X op(A) = B is
  // op(A)^T X^T = B^T: a left solve on X^T with the transposition flipped
  // and the conjugation kept.
  const Tensor X = left ? result : result.mT();
  const bool transpose = left ? adjoint : !adjoint;
  const bool conj = adjoint;
  const Tensor LU_b = expand_batch(LU, batch_of(X, 2), 2);
  if (!transpose) {  // L U X = P^T B (conjugated: conj(L) conj(U) X = P^T B)
    pivot_into(X, pivots, /*reverse=*/false, name);
    triangular_solve_into(X, LU_b, /*upper=*/false, /*unit=*/true, conj, name);
    triangular_solve_into(X, LU_b, /*upper=*/true, /*unit=*/false, conj, name);
  } else {  // U^T L^T P^T X = B (conjugated: U^H L^H P^T X = B)
    triangular_solve_into(X, LU_b.mT(), /*upper=*/false, /*unit=*/false, conj, name);
    triangular_solve_into(X, LU_b.mT(), /*upper=*/true, /*unit=*/true, conj, name);
    pivot_into(X, pivots, /*reverse=*/true, name);
  }
}

Tensor& lu_solve_out(const Tensor& LU, const Tensor& pivots, const Tensor& B, bool left, bool adjoint,
                     Tensor& result) {
  NEURON_TRACK_OP("aten::linalg_lu_solve.out");
  c10::DeviceGuard guard(LU.device());
  Outputs<at::meta::structured_linalg_lu_solve, 1> out({result});
  out.meta(LU, pivots, B, left, adjoint);
  lu_solve_into(LU, pivots, B, left, adjoint, result);
  return result;
}

Tensor lu_solve(const Tensor& LU, const Tensor& pivots, const Tensor& B, bool left, bool adjoint) {
  NEURON_TRACK_OP("aten::linalg_lu_solve");
  c10::DeviceGuard guard(LU.device());
  Outputs<at::meta::structured_linalg_lu_solve, 1> out;
  out.meta(LU, pivots, B, left, adjoint);
  lu_solve_into(LU, pivots, B, left, adjoint, out[0]);
  return out[0];
}

void solve_ex_into(const Tensor& A, const Tensor& B, bool left, bool check_errors, Tensor& result,
                   Tensor& LU, Tensor& pivots, Tensor& info) {
  check_float_or_complex(A, "linalg.solve");
  // LU is A's own factorisation, as on the CPU: the backward formula solves
  // with its adjoint.
  at::linalg_lu_factor_ex_out(LU, pivots, info, A);
  if (check_errors) at::_linalg_check_errors(info, "torch.linalg.solve_ex", A.dim() == 2);
  const bool vector_case = at::native::linalg_solve_is_vector_rhs(LU, B);
  const Tensor result_ = vector_case ? result.unsqueeze(-1) : result;
  const Tensor B_ = vector_case ? B.unsqueeze(-1) : B;
  lu_solve_into(LU, pivots, B_, left, /*adjoint=*/false, result_);
}

std::tuple<Tensor&, Tensor&, Tensor&, Tensor&> solve_ex_out(const Tensor& A, const Tensor& B, bool left,
                                                            bool check_errors, Tensor& result, Tensor& LU,
                                                            Tensor& pivots, Tensor& info) {
  NEURON_TRACK_OP("aten::_linalg_solve_ex.result");
  c10::DeviceGuard guard(A.device());
  Outputs<at::meta::structured__linalg_solve_ex, 4> out({result, LU, pivots, info});
  out.meta(A, B, left, check_errors);
  solve_ex_into(A, B, left, check_errors, result, LU, pivots, info);
  return {result, LU, pivots, info};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> solve_ex(const Tensor& A, const Tensor& B, bool left,
                                                    bool check_errors) {
  NEURON_TRACK_OP("aten::_linalg_solve_ex");
  c10::DeviceGuard guard(A.device());
  Outputs<at::meta::structured__linalg_solve_ex, 4> out;
  out.meta(A, B, left, check_errors);
  solve_ex_into(A, B, left, check_errors, out[0], out[1], out[2], out[3]);
  return {out[0], out[1], out[2], out[3]};
}

void inv_ex_into(const Tensor& A, bool check_errors, Tensor& inverse, Tensor& info) {
  check_float_or_complex(A, "linalg.inv");
  inverse.zero_();
  inverse.diagonal(0, -2, -1).fill_(1.);
  at::linalg_solve_ex_out(inverse, info, A, inverse, /*left=*/true);
  if (check_errors) at::_linalg_check_errors(info, "linalg.inv_ex", A.dim() == 2);
}

std::tuple<Tensor&, Tensor&> inv_ex_out(const Tensor& A, bool check_errors, Tensor& inverse, Tensor& info) {
  NEURON_TRACK_OP("aten::linalg_inv_ex.inverse");
  c10::DeviceGuard guard(A.device());
  Outputs<at::meta::structured_linalg_inv_ex, 2> out({inverse, info});
  out.meta(A, check_errors);
  inv_ex_into(A, check_errors, inverse, info);
  return {inverse, info};
}

std::tuple<Tensor, Tensor> inv_ex(const Tensor& A, bool check_errors) {
  NEURON_TRACK_OP("aten::linalg_inv_ex");
  c10::DeviceGuard guard(A.device());
  Outputs<at::meta::structured_linalg_inv_ex, 2> out;
  out.meta(A, check_errors);
  inv_ex_into(A, check_errors, out[0], out[1]);
  return {out[0], out[1]};
}

// The determinant of P: +1 or -1 by the parity of the interchanges.
Tensor pivots_sign(const Tensor& pivots, at::ScalarType dtype) {
  const Tensor rows = at::arange(1, pivots.size(-1) + 1, pivots.options());
  const Tensor swaps = pivots.ne(rows).sum(-1, /*keepdim=*/false, at::kLong);
  return swaps.remainder(2).mul(-2).add(1).to(dtype);
}

void det_into(const Tensor& A, Tensor& result, Tensor& LU, Tensor& pivots) {
  check_float_or_complex(A, "linalg.det");
  const Tensor info = at::empty({0}, A.options().dtype(at::kInt));
  // det(A^T) = det(A): a contiguous real A is factored as A^T, which copies
  // plainly. Not a complex one: the backward formula solves with LU as the
  // factorisation of A (A^H would do for it, A^T does not), as on the CPU.
  at::linalg_lu_factor_ex_out(LU, pivots, const_cast<Tensor&>(info), A.is_contiguous() && !A.is_complex() ? A.mT() : A);
  at::mul_out(result, pivots_sign(pivots, A.scalar_type()), at::prod(LU.diagonal(0, -2, -1), -1));
}

std::tuple<Tensor&, Tensor&, Tensor&> det_out(const Tensor& A, Tensor& result, Tensor& LU, Tensor& pivots) {
  NEURON_TRACK_OP("aten::_linalg_det.result");
  c10::DeviceGuard guard(A.device());
  Outputs<at::meta::structured__linalg_det, 3> out({result, LU, pivots});
  out.meta(A);
  det_into(A, result, LU, pivots);
  return {result, LU, pivots};
}

std::tuple<Tensor, Tensor, Tensor> det(const Tensor& A) {
  NEURON_TRACK_OP("aten::_linalg_det");
  c10::DeviceGuard guard(A.device());
  Outputs<at::meta::structured__linalg_det, 3> out;
  out.meta(A);
  det_into(A, out[0], out[1], out[2]);
  return {out[0], out[1], out[2]};
}

void slogdet_into(const Tensor& A, Tensor& sign, Tensor& logabsdet, Tensor& LU, Tensor& pivots) {
  check_float_or_complex(A, "linalg.slogdet");
  const Tensor info = at::empty({0}, A.options().dtype(at::kInt));
  at::linalg_lu_factor_ex_out(LU, pivots, const_cast<Tensor&>(info), A.is_contiguous() && !A.is_complex() ? A.mT() : A);
  const Tensor diag = LU.diagonal(0, -2, -1);
  at::mul_out(sign, diag.sgn().prod(-1), pivots_sign(pivots, A.scalar_type()));
  at::sum_out(logabsdet, diag.abs().log_(), -1);
}

std::tuple<Tensor&, Tensor&, Tensor&, Tensor&> slogdet_out(const Tensor& A, Tensor& sign, Tensor& logabsdet,
                                                           Tensor& LU, Tensor& pivots) {
  NEURON_TRACK_OP("aten::_linalg_slogdet.sign");
  c10::DeviceGuard guard(A.device());
  Outputs<at::meta::structured__linalg_slogdet, 4> out({sign, logabsdet, LU, pivots});
  out.meta(A);
  slogdet_into(A, sign, logabsdet, LU, pivots);
  return {sign, logabsdet, LU, pivots};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> slogdet(const Tensor& A) {
  NEURON_TRACK_OP("aten::_linalg_slogdet");
  c10::DeviceGuard guard(A.device());
  Outputs<at::meta::structured__linalg_slogdet, 4> out;
  out.meta(A);
  slogdet_into(A, out[0], out[1], out[2], out[3]);
  return {out[0], out[1], out[2], out[3]};
}

void lu_unpack_into(const Tensor& LU, const Tensor& pivots, bool unpack_data, bool unpack_pivots, Tensor& P,
                    Tensor& L, Tensor& U) {
  check_float_or_complex(LU, "torch.lu_unpack");
  const int64_t m = LU.size(-2), n = LU.size(-1), k = std::min(m, n);
  if (unpack_data) {
    at::tril_out(L, LU.narrow(-1, 0, k), -1);
    L.diagonal(0, -2, -1).fill_(1.);
    at::triu_out(U, LU.narrow(-2, 0, k));
  }
  if (unpack_pivots && P.numel() > 0) {
    P.zero_();
    P.diagonal(0, -2, -1).fill_(1.);
    // A = P L U with P = S_0 S_1 ... S_{k-1}: the interchanges in reverse.
    pivot_into(P, pivots, /*reverse=*/true, "lu_unpack");
  }
}

std::tuple<Tensor&, Tensor&, Tensor&> lu_unpack_out(const Tensor& LU, const Tensor& pivots, bool unpack_data,
                                                    bool unpack_pivots, Tensor& P, Tensor& L, Tensor& U) {
  NEURON_TRACK_OP("aten::lu_unpack.out");
  c10::DeviceGuard guard(LU.device());
  Outputs<at::meta::structured_lu_unpack, 3> out({P, L, U});
  out.meta(LU, pivots, unpack_data, unpack_pivots);
  lu_unpack_into(LU, pivots, unpack_data, unpack_pivots, P, L, U);
  return {P, L, U};
}

std::tuple<Tensor, Tensor, Tensor> lu_unpack(const Tensor& LU, const Tensor& pivots, bool unpack_data,
                                             bool unpack_pivots) {
  NEURON_TRACK_OP("aten::lu_unpack");
  c10::DeviceGuard guard(LU.device());
  Outputs<at::meta::structured_lu_unpack, 3> out;
  out.meta(LU, pivots, unpack_data, unpack_pivots);
  lu_unpack_into(LU, pivots, unpack_data, unpack_pivots, out[0], out[1], out[2]);
  return {out[0], out[1], out[2]};
}

void lu_into(const Tensor& A, bool pivot, Tensor& P, Tensor& L, Tensor& U) {
  TORCH_CHECK(pivot, "linalg.lu: LU without pivoting is not implemented on neuron");
  auto [LU, pivots, info] = at::linalg_lu_factor_ex(A, pivot, /*check_errors=*/false);
  lu_unpack_into(LU, pivots, true, pivot, P, L, U);
}

std::tuple<Tensor&, Tensor&, Tensor&> lu_out(const Tensor& A, bool pivot, Tensor& P, Tensor& L, Tensor& U) {
  NEURON_TRACK_OP("aten::linalg_lu.out");
  c10::DeviceGuard guard(A.device());
  Outputs<at::meta::structured_linalg_lu, 3> out({P, L, U});
  out.meta(A, pivot);
  lu_into(A, pivot, P, L, U);
  return {P, L, U};
}

std::tuple<Tensor, Tensor, Tensor> lu(const Tensor& A, bool pivot) {
  NEURON_TRACK_OP("aten::linalg_lu");
  c10::DeviceGuard guard(A.device());
  Outputs<at::meta::structured_linalg_lu, 3> out;
  out.meta(A, pivot);
  lu_into(A, pivot, out[0], out[1], out[2]);
  return {out[0], out[1], out[2]};
}

// ---- triangular solves ---------------------------------------------------------------

// out = A^-1 B (left) or B A^-1 for a triangular A; out may be B itself.
void solve_triangular_into(const Tensor& A_in, const Tensor& B, bool upper, bool left, bool unit,
                           const Tensor& out) {
  const char* name = "linalg_solve_triangular";
  check_float_or_complex(A_in, "linalg.solve_triangular");
  if (out.numel() == 0) return;
  const Tensor A = at::get_overlap_status(out, A_in) != at::MemOverlapStatus::No ? A_in.clone() : A_in;
  if (!out.is_same(B)) {
    if (at::get_overlap_status(out, B) != at::MemOverlapStatus::No) {
      out.copy_(B.clone());
    } else {
      out.copy_(B);
    }
  }
  // X A = B is A^T X^T = B^T, and A^T's triangle is the other one.
  const Tensor X = left ? out : out.mT();
  triangular_solve_into(X, left ? A : A.mT(), left ? upper : !upper, unit, /*conj=*/false, name);
}

std::vector<int64_t> solve_triangular_shape(const Tensor& A, const Tensor& B) {
  auto [B_shape, A_shape] = at::native::_linalg_broadcast_batch_dims(B, A);
  return B_shape;
}

Tensor& solve_triangular_out(const Tensor& A, const Tensor& B, bool upper, bool left, bool unitriangular,
                             Tensor& out) {
  NEURON_TRACK_OP("aten::linalg_solve_triangular.out");
  c10::DeviceGuard guard(A.device());
  at::native::checkInputsSolver(A, B, left, "linalg.solve_triangular");
  at::native::checkSameDevice("linalg.solve_triangular", out, A);
  at::native::checkLinalgCompatibleDtype("linalg.solve_triangular", out, A);
  const auto shape = solve_triangular_shape(A, B);
  at::native::resize_output(out, shape);
  solve_triangular_into(A, B.expand(shape), upper, left, unitriangular, out);
  return out;
}

Tensor solve_triangular(const Tensor& A, const Tensor& B, bool upper, bool left, bool unitriangular) {
  NEURON_TRACK_OP("aten::linalg_solve_triangular");
  c10::DeviceGuard guard(A.device());
  at::native::checkInputsSolver(A, B, left, "linalg.solve_triangular");
  const auto shape = solve_triangular_shape(A, B);
  // Column-major, as the CPU returns it.
  Tensor out = at::empty_strided(shape, at::native::batched_matrix_contiguous_strides(shape, /*f_contig=*/true),
                                 B.options());
  solve_triangular_into(A, B.expand(shape), upper, left, unitriangular, out);
  return out;
}

void triangular_solve_legacy_into(const Tensor& B, const Tensor& A, bool upper, bool transpose, bool unit,
                                  Tensor& X, Tensor& M) {
  TORCH_WARN_ONCE(
      "torch.triangular_solve is deprecated in favor of torch.linalg.solve_triangular",
      "and will be removed in a future PyTorch release.\n",
      "torch.linalg.solve_triangular has its arguments reversed and does not return a copy of one of the inputs.\n",
      "X = torch.triangular_solve(B, A).solution\n", "should be replaced with\n",
      "X = torch.linalg.solve_triangular(A, B).");
  check_float_or_complex(A, "triangular_solve");
  if (X.numel() == 0 && M.numel() == 0) return;
  auto [B_b, A_b] = at::native::_linalg_broadcast_batch_dims(B, A, "triangular_solve");
  M.copy_(A_b);
  if (X.numel() == 0) return;
  X.copy_(B_b);
  triangular_solve_into(X, transpose ? M.mT() : M, transpose ? !upper : upper, unit, /*conj=*/false,
                        "triangular_solve");
}

std::tuple<Tensor&, Tensor&> triangular_solve_out(const Tensor& B, const Tensor& A, bool upper, bool transpose,
                                                  bool unitriangular, Tensor& X, Tensor& M) {
  NEURON_TRACK_OP("aten::triangular_solve.X");
  c10::DeviceGuard guard(A.device());
  Outputs<at::meta::structured_triangular_solve, 2> out({X, M});
  out.meta(B, A, upper, transpose, unitriangular);
  triangular_solve_legacy_into(B, A, upper, transpose, unitriangular, X, M);
  return {X, M};
}

std::tuple<Tensor, Tensor> triangular_solve(const Tensor& B, const Tensor& A, bool upper, bool transpose,
                                            bool unitriangular) {
  NEURON_TRACK_OP("aten::triangular_solve");
  c10::DeviceGuard guard(A.device());
  Outputs<at::meta::structured_triangular_solve, 2> out;
  out.meta(B, A, upper, transpose, unitriangular);
  triangular_solve_legacy_into(B, A, upper, transpose, unitriangular, out[0], out[1]);
  return {out[0], out[1]};
}

// ---- Cholesky ---------------------------------------------------------------------------

void cholesky_into(const Tensor& A, bool upper, bool check_errors, Tensor& L, Tensor& info) {
  const char* name = "linalg_cholesky_ex";
  check_float_or_complex(A, "linalg.cholesky");
  if (L.numel() == 0) {
    info.zero_();
    return;
  }
  if (!L.is_same(A)) L.copy_(A);
  // U is the lower factor of A^T seen transposed: the kernel works on L^T.
  const Tensor work = upper ? L.mT() : L;
  launch_nn(NRT_OP_LINALG_CHOLESKY, work, 2, {to_view(work, name), to_view(info, name)});
  if (check_errors) at::_linalg_check_errors(info, "linalg.cholesky_ex", A.dim() == 2);
}

std::tuple<Tensor&, Tensor&> cholesky_ex_out(const Tensor& A, bool upper, bool check_errors, Tensor& L,
                                             Tensor& info) {
  NEURON_TRACK_OP("aten::linalg_cholesky_ex.L");
  c10::DeviceGuard guard(A.device());
  Outputs<at::meta::structured_linalg_cholesky_ex, 2> out({L, info});
  out.meta(A, upper, check_errors);
  cholesky_into(A, upper, check_errors, L, info);
  return {L, info};
}

std::tuple<Tensor, Tensor> cholesky_ex(const Tensor& A, bool upper, bool check_errors) {
  NEURON_TRACK_OP("aten::linalg_cholesky_ex");
  c10::DeviceGuard guard(A.device());
  Outputs<at::meta::structured_linalg_cholesky_ex, 2> out;
  out.meta(A, upper, check_errors);
  cholesky_into(A, upper, check_errors, out[0], out[1]);
  return {out[0], out[1]};
}

// X = (F F^H)^-1 B in place, F the lower factor (or U^H for an upper one):
// F is read as factor.mT(), conjugated when upper.
void cholesky_solve_in_place(const Tensor& X, const Tensor& factor, bool upper) {
  const char* name = "cholesky_solve";
  const Tensor lower = upper ? factor.mT() : factor;  // A = F F^H, F = conj(lower) when upper
  triangular_solve_into(X, lower, /*upper=*/false, /*unit=*/false, /*conj=*/upper, name);
  triangular_solve_into(X, lower.mT(), /*upper=*/true, /*unit=*/false, /*conj=*/!upper, name);
}

Tensor cholesky_solve_helper(const Tensor& B, const Tensor& A, bool upper) {
  NEURON_TRACK_OP("aten::_cholesky_solve_helper");
  c10::DeviceGuard guard(A.device());
  check_float_or_complex(A, "cholesky_solve");
  Tensor X = at::native::cloneBatchedColumnMajor(B);
  if (X.numel() == 0) return X;
  cholesky_solve_in_place(X, A, upper);
  return X;
}

void cholesky_inverse_into(const Tensor& factor, bool upper, Tensor& out) {
  check_float_or_complex(factor, "cholesky_inverse");
  TORCH_CHECK(factor.dim() >= 2, "cholesky_inverse: The input tensor must have at least 2 dimensions.");
  at::native::squareCheckInputs(factor, "cholesky_inverse");
  out.zero_();
  if (out.numel() == 0) return;
  out.diagonal(0, -2, -1).fill_(1.);
  cholesky_solve_in_place(out, factor, upper);
}

Tensor& cholesky_inverse_out(const Tensor& factor, bool upper, Tensor& out) {
  NEURON_TRACK_OP("aten::cholesky_inverse.out");
  c10::DeviceGuard guard(factor.device());
  at::native::checkSameDevice("cholesky_inverse", out, factor);
  at::native::checkLinalgCompatibleDtype("cholesky_inverse", out, factor);
  at::native::resize_output(out, factor.sizes());
  const Tensor f = at::get_overlap_status(out, factor) != at::MemOverlapStatus::No ? factor.clone() : factor;
  cholesky_inverse_into(f, upper, out);
  return out;
}

Tensor cholesky_inverse(const Tensor& factor, bool upper) {
  NEURON_TRACK_OP("aten::cholesky_inverse");
  c10::DeviceGuard guard(factor.device());
  Tensor out = at::empty_strided(
      factor.sizes(), at::native::batched_matrix_contiguous_strides(factor.sizes(), /*f_contig=*/true),
      factor.options());
  cholesky_inverse_into(factor, upper, out);
  return out;
}

}  // namespace
}  // namespace torchneuron

NEURON_LIBRARY_IMPL(aten, m) {
  using namespace torchneuron;
  m.impl("linalg_lu_factor_ex", lu_factor_ex);
  m.impl("linalg_lu_factor_ex.out", lu_factor_ex_out);
  m.impl("linalg_lu_solve", lu_solve);
  m.impl("linalg_lu_solve.out", lu_solve_out);
  m.impl("_linalg_solve_ex", solve_ex);
  m.impl("_linalg_solve_ex.result", solve_ex_out);
  m.impl("linalg_inv_ex", inv_ex);
  m.impl("linalg_inv_ex.inverse", inv_ex_out);
  m.impl("_linalg_det", det);
  m.impl("_linalg_det.result", det_out);
  m.impl("_linalg_slogdet", slogdet);
  m.impl("_linalg_slogdet.sign", slogdet_out);
  m.impl("lu_unpack", lu_unpack);
  m.impl("lu_unpack.out", lu_unpack_out);
  m.impl("linalg_lu", lu);
  m.impl("linalg_lu.out", lu_out);
  m.impl("linalg_solve_triangular", solve_triangular);
  m.impl("linalg_solve_triangular.out", solve_triangular_out);
  m.impl("triangular_solve", triangular_solve);
  m.impl("triangular_solve.X", triangular_solve_out);
  m.impl("linalg_cholesky_ex", cholesky_ex);
  m.impl("linalg_cholesky_ex.L", cholesky_ex_out);
  m.impl("_cholesky_solve_helper", cholesky_solve_helper);
  m.impl("cholesky_inverse", cholesky_inverse);
  m.impl("cholesky_inverse.out", cholesky_inverse_out);
}
