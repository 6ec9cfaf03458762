// Least squares on neuron: linalg_lstsq and linalg_lstsq.out on the
// runtime's LINALG_LSTSQ (LAPACK's four drivers' contracts, see
// neuronrt/ops/linalg.h). The argument checks follow the CPU's order and
// messages; as the CPU: the default driver is gelsy, rcond defaults to the
// dtype's eps times max(m, n), `other` is a (batch of) vector(s) when it is
// 1-d or has exactly input.shape[:-1], the batch is the broadcast of the
// first input.dim() - 2 dims of both, and rank and singular_values keep
// input's own batch shape. Outputs exist only where the CPU returns them:
// residuals when m > n and the driver is not gelsy (for gelsd and gelss
// only when every matrix has full rank n), rank for every driver but gels,
// singular_values for gelsd and gelss; the others are empty. gels on a
// rank-deficient matrix raises the CPU's LinAlgError. Complex inputs follow
// LAPACK's z-drivers (real residuals and singular values). Autograd comes from PyTorch's formula
// for linalg_lstsq (through pinv), which calls native ops.
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/native/LinearAlgebraUtils.h>
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/accumulate.h>
#include <torch/library.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "nn_launch.h"
#include "op_tracking.h"
#include "tensor_view.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {

using Tensor = at::Tensor;
using Driver = std::optional<c10::string_view>;

enum { kGels = 0, kGelsy = 1, kGelsd = 2, kGelss = 3 };

struct Lstsq {
  Tensor solution, residuals, rank, singular_values;
};

// t (batch + `tail` dims, batch broadcast from input's) narrowed to input's
// own batch shape: index 0 along the dims where input has size 1.
Tensor to_input_batch(const Tensor& t, at::IntArrayRef input_batch) {
  Tensor r = t;
  for (size_t d = 0; d < input_batch.size(); d++)
    if (input_batch[d] == 1 && r.size(d) != 1) r = r.narrow(d, 0, 1);
  return r;
}

// An output the driver does not write (empty) is absent for the kernel.
nrt_tensor_view absent_or(const Tensor& t, const char* name) {
  return t.numel() == 0 ? absent_view() : to_view(t, name);
}

Lstsq lstsq_compute(const Tensor& A, const Tensor& B, std::optional<double> rcond, Driver driver) {
  const char* name = "linalg_lstsq";
  TORCH_CHECK(A.dim() >= 2, "torch.linalg.lstsq: input must have at least 2 dimensions.");
  TORCH_CHECK(B.dim() >= 1, "torch.linalg.lstsq: other must have at least 1 dimension.");
  TORCH_CHECK(A.scalar_type() == B.scalar_type(),
              "torch.linalg.lstsq: Expected input and other to have the same dtype, but got input's dtype ",
              A.scalar_type(), " and other's dtype ", B.scalar_type());
  TORCH_CHECK(A.dim() >= B.dim() && A.dim() - B.dim() <= 1,
              "torch.linalg.lstsq: input.dim() must be greater or equal to other.dim() and (input.dim() - "
              "other.dim()) <= 1");
  const bool vector_case =
      B.dim() == 1 || (A.dim() - 1 == B.dim() && B.sizes().equals(A.sizes().slice(0, A.dim() - 1)));
  const Tensor B2 = vector_case ? B.unsqueeze(-1) : B;
  TORCH_CHECK(A.size(-2) == B2.size(-2), "torch.linalg.lstsq: input.size(-2) should match other.size(-2)");
  int code = kGelsy;
  if (driver.has_value()) {
    const c10::string_view d = *driver;
    if (d == "gels")
      code = kGels;
    else if (d == "gelsy")
      code = kGelsy;
    else if (d == "gelsd")
      code = kGelsd;
    else if (d == "gelss")
      code = kGelss;
    else
      TORCH_CHECK(false, "torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)");
  }
  const auto type = A.scalar_type();
  TORCH_CHECK(type == at::kFloat || type == at::kDouble || type == at::kComplexFloat || type == at::kComplexDouble,
              "This function doesn't handle types other than float and double");

  const int64_t nb = A.dim() - 2, m = A.size(-2), n = A.size(-1), k = B2.size(-1);
  const int64_t M = std::max(m, n), N = std::min(m, n);
  const at::IntArrayRef a_batch = A.sizes().slice(0, nb);
  std::vector<int64_t> batch = at::infer_size(a_batch, B2.sizes().slice(0, nb));
  auto with = [&](std::initializer_list<int64_t> tail) {
    std::vector<int64_t> s = batch;
    s.insert(s.end(), tail);
    return s;
  };
  const Tensor Ab = A.resolve_conj().resolve_neg().expand(with({m, n}));  // the kernel reads storage as is
  const Tensor Bb = B2.expand(with({m, k}));
  const auto real_type = c10::toRealValueType(type);
  const double eps = real_type == at::kDouble ? std::numeric_limits<double>::epsilon()
                                              : std::numeric_limits<float>::epsilon();
  const double rc = rcond.has_value() ? *rcond : eps * static_cast<double>(M);

  // X (batch, max(m, n), k) column-major as LAPACK's B: B in its first m rows.
  Tensor X = at::empty(with({k, M}), A.options()).mT();
  X.narrow(-2, 0, m).copy_(Bb);
  const auto opts = A.options();
  Tensor info = code == kGels ? at::zeros(batch, opts.dtype(at::kInt)) : at::empty({0}, opts.dtype(at::kInt));
  Tensor rank = code != kGels ? at::zeros(batch, opts.dtype(at::kLong)) : at::empty({0}, opts.dtype(at::kLong));
  const auto real_opts = opts.dtype(real_type);
  Tensor S = code == kGelsd || code == kGelss ? at::empty(with({N}), real_opts) : at::empty({0}, real_opts);
  if (c10::multiply_integers(batch) > 0)
    launch_nn(NRT_OP_LINALG_LSTSQ, X, 4,
              {to_view(X, name), absent_or(info, name), absent_or(rank, name), absent_or(S, name), to_view(Ab, name)},
              {int_scalar(code), float_scalar(rc)});

  // LAPACK's gels zeroes all of B when min(m, n, k) = 0 (residuals 0);
  // the SVD drivers leave B's rows, whose squares are the residuals.
  if (code == kGels && std::min(N, k) == 0) X.zero_();
  Lstsq r;
  if (code == kGels) {
    at::_linalg_check_errors(to_input_batch(info, a_batch).contiguous(), "torch.linalg.lstsq", A.dim() == 2);
    r.rank = rank;
  } else {
    r.rank = to_input_batch(rank, a_batch).contiguous();
  }
  r.singular_values = code == kGelsd || code == kGelss ? to_input_batch(S, a_batch).contiguous() : S;
  bool residuals = m > n && code != kGelsy;
  if (residuals && (code == kGelsd || code == kGelss))
    residuals = r.rank.numel() == 0 || at::all(r.rank == n).item<bool>();
  if (!residuals) {
    r.residuals = at::empty({0}, real_opts);
  } else {
    const Tensor tail = X.narrow(-2, n, m - n);
    r.residuals = tail.is_complex() ? at::real(tail * tail.conj()).sum(-2) : tail.square().sum(-2);
  }
  r.solution = X.narrow(-2, 0, n);
  if (vector_case) r.solution = r.solution.squeeze(-1);
  return r;
}

std::tuple<Tensor, Tensor, Tensor, Tensor> lstsq(const Tensor& A, const Tensor& B, std::optional<double> rcond,
                                                 Driver driver) {
  NEURON_TRACK_OP("aten::linalg_lstsq");
  c10::DeviceGuard guard(A.device());
  Lstsq r = lstsq_compute(A, B, rcond, driver);
  return {r.solution, r.residuals, r.rank, r.singular_values};
}

void copy_out(const Tensor& result, Tensor& out, const char* what) {
  at::native::checkSameDevice("torch.linalg.lstsq", out, result, what);
  at::native::checkLinalgCompatibleDtype("torch.linalg.lstsq", out, result, what);
  at::native::resize_output(out, result.sizes());
  out.copy_(result);
}

std::tuple<Tensor&, Tensor&, Tensor&, Tensor&> lstsq_out(const Tensor& A, const Tensor& B,
                                                         std::optional<double> rcond, Driver driver,
                                                         Tensor& solution, Tensor& residuals, Tensor& rank,
                                                         Tensor& singular_values) {
  NEURON_TRACK_OP("aten::linalg_lstsq.out");
  c10::DeviceGuard guard(A.device());
  Lstsq r = lstsq_compute(A, B, rcond, driver);
  // As the CPU: residuals must have the real dtype exactly; the others take
  // any dtype the results can be cast to safely.
  TORCH_CHECK(residuals.scalar_type() == r.residuals.scalar_type(), "Expected out tensor to have dtype ",
              r.residuals.dtype(), ", but got ", residuals.dtype(), " instead");
  copy_out(r.solution, solution, "solution");
  copy_out(r.residuals, residuals, "residuals");
  copy_out(r.rank, rank, "rank");
  copy_out(r.singular_values, singular_values, "singular_values");
  return {solution, residuals, rank, singular_values};
}

}  // namespace
}  // namespace torchneuron

NEURON_LIBRARY_IMPL(aten, m) {
  using namespace torchneuron;
  m.impl("linalg_lstsq", TORCH_FN(lstsq));
  m.impl("linalg_lstsq.out", TORCH_FN(lstsq_out));
}
