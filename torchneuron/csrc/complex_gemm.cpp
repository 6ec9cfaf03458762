// The complex matrix products (mm, bmm, mv and their beta * self + alpha *
// product forms addmm, baddbmm, addbmm, addmv) as four real products on the
// planes, each one the real op with its own beta and alpha, written straight
// into the result's planes:
//   re = beta self.re + alpha a.re b.re - alpha a.im b.im
//   im = beta self.im + alpha a.re b.im + alpha a.im b.re
// A complex alpha scales a first and a complex beta scales self first
// ((alpha a) b = alpha (a b)), so the real ops see real scalars only. beta 0
// leaves self unread (NaN there does not propagate), as the CPU does.
// Malformed calls return nothing: the registration's fallback then raises
// the CPU's error.
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>

#include "complex_ops.h"
#include "op_tracking.h"

namespace torchneuron {
namespace {

bool neuron_complex(const at::Tensor& t, at::ScalarType dtype) {
  return t.defined() && t.scalar_type() == dtype && t.device().type() == c10::DeviceType::PrivateUse1;
}

bool is_zero(const c10::complex<double>& s) { return s.real() == 0 && s.imag() == 0; }

// The result's shape, or nothing if the operands do not fit the kind.
std::optional<std::vector<int64_t>> product_shape(ComplexGemm kind, const at::Tensor& a, const at::Tensor& b) {
  switch (kind) {
    case ComplexGemm::Mm:
      if (a.dim() != 2 || b.dim() != 2 || a.size(1) != b.size(0)) return std::nullopt;
      return std::vector<int64_t>{a.size(0), b.size(1)};
    case ComplexGemm::Bmm:
      if (a.dim() != 3 || b.dim() != 3 || a.size(0) != b.size(0) || a.size(2) != b.size(1)) return std::nullopt;
      return std::vector<int64_t>{a.size(0), a.size(1), b.size(2)};
    case ComplexGemm::BatchSum:
      if (a.dim() != 3 || b.dim() != 3 || a.size(0) != b.size(0) || a.size(2) != b.size(1)) return std::nullopt;
      return std::vector<int64_t>{a.size(1), b.size(2)};
    case ComplexGemm::Mv:
      if (a.dim() != 2 || b.dim() != 1 || a.size(1) != b.size(0)) return std::nullopt;
      return std::vector<int64_t>{a.size(0)};
  }
  return std::nullopt;
}

// plane = beta * cin + alpha * x @ y, with the real op of the kind; cin
// undefined means plane += alpha * x @ y.
void real_product(ComplexGemm kind, const at::Tensor& plane, const at::Tensor& cin, const at::Tensor& x,
                  const at::Tensor& y, double beta, double alpha) {
  at::Tensor out = plane;
  const bool accumulate = !cin.defined();
  const at::Tensor& c = accumulate ? plane : cin;
  const double b = accumulate ? 1.0 : beta;
  switch (kind) {
    case ComplexGemm::Mm:
      if (accumulate) out.addmm_(x, y, b, alpha); else at::addmm_out(out, c, x, y, b, alpha);
      return;
    case ComplexGemm::Bmm:
      if (accumulate) out.baddbmm_(x, y, b, alpha); else at::baddbmm_out(out, c, x, y, b, alpha);
      return;
    case ComplexGemm::BatchSum:
      if (accumulate) out.addbmm_(x, y, b, alpha); else at::addbmm_out(out, c, x, y, b, alpha);
      return;
    case ComplexGemm::Mv:
      if (accumulate) out.addmv_(x, y, b, alpha); else at::addmv_out(out, c, x, y, b, alpha);
      return;
  }
}

const char* tracked_name(ComplexGemm kind, bool has_self) {
  switch (kind) {
    case ComplexGemm::Mm: return has_self ? "aten::addmm(complex)" : "aten::mm(complex)";
    case ComplexGemm::Bmm: return has_self ? "aten::baddbmm(complex)" : "aten::bmm(complex)";
    case ComplexGemm::BatchSum: return "aten::addbmm(complex)";
    case ComplexGemm::Mv: return has_self ? "aten::addmv(complex)" : "aten::mv(complex)";
  }
  return "";
}

bool same_view(const at::Tensor& x, const at::Tensor& y) {
  return x.data_ptr() == y.data_ptr() && x.sizes() == y.sizes() && x.strides() == y.strides();
}

bool may_overlap(const at::Tensor& x, const at::Tensor& y) {
  return y.defined() && at::get_overlap_status(x, y) != at::MemOverlapStatus::No;
}

}  // namespace

std::optional<at::Tensor> try_native_complex_gemm(ComplexGemm kind, const at::Tensor* self, const at::Tensor& a_in,
                                                  const at::Tensor& b_in, const at::Scalar& beta_s,
                                                  const at::Scalar& alpha_s, const at::Tensor* out, bool inplace) {
  if (!a_in.defined() || !a_in.is_complex() || a_in.scalar_type() == at::kComplexHalf) return std::nullopt;
  const at::ScalarType dtype = a_in.scalar_type();
  if (!neuron_complex(a_in, dtype) || !neuron_complex(b_in, dtype) || a_in.device() != b_in.device())
    return std::nullopt;
  if (self && (!neuron_complex(*self, dtype) || self->device() != a_in.device())) return std::nullopt;
  if (out && (!neuron_complex(*out, dtype) || out->device() != a_in.device() || out->is_conj() || out->is_neg()))
    return std::nullopt;  // a cast the CPU refuses or makes: the fallback
  const std::optional<std::vector<int64_t>> shape = product_shape(kind, a_in, b_in);
  if (!shape) return std::nullopt;
  // In place, self must be the product's shape (the CPU's error, raised
  // here), except for addbmm_, which the CPU widens to it.
  const bool widen = self && inplace && self->sizes() != at::IntArrayRef(*shape);
  TORCH_CHECK(!widen || kind == ComplexGemm::BatchSum, "Bad in-place call: input tensor size ", self->sizes(),
              " and output tensor size ", at::IntArrayRef(*shape), " should match");
  if (self && !at::is_expandable_to(self->sizes(), *shape)) return std::nullopt;  // expand's error: the fallback
  // (NEURON_TRACK_OP's counter is per call site; the name varies here.)
  native_op_counter(tracked_name(kind, self != nullptr))->fetch_add(1, std::memory_order_relaxed);
  native_op_total.fetch_add(1, std::memory_order_relaxed);
  c10::DeviceGuard guard(a_in.device());
  const c10::complex<double> beta = self ? beta_s.toComplexDouble() : 0.0;
  const c10::complex<double> alpha = alpha_s.toComplexDouble();
  // Conjugate operands (autograd's gradients) are materialised natively;
  // a complex alpha goes into a, a complex beta into self.
  at::Tensor a = a_in.resolve_conj().resolve_neg(), b = b_in.resolve_conj().resolve_neg();
  double alpha_re = alpha.real();
  if (alpha.imag() != 0) a = at::mul(a, c10::Scalar(alpha)), alpha_re = 1.0;
  at::Tensor c;
  double beta_re = 0.0;
  if (self && !is_zero(beta)) {
    // (widened: self's old values, before self is resized)
    c = widen ? self->expand(*shape).clone() : self->resolve_conj().resolve_neg();
    beta_re = beta.real();
    if (beta.imag() != 0) c = at::mul(c, c10::Scalar(beta)), beta_re = 1.0;
  }
  at::Tensor result = out ? *out : at::empty(*shape, a.options());
  if (widen)
    result.resize_(*shape);  // as the CPU's resize_as_, without out='s warning
  else if (out)
    at::native::resize_output(result, *shape);
  if (result.numel() == 0) return result;
  // An out that shares memory with an operand (other than being self
  // exactly) would be read after its real plane is written: compute in a
  // temporary.
  const bool clash = may_overlap(result, a) || may_overlap(result, b) ||
                     (c.defined() && !same_view(result, c) && may_overlap(result, c));
  at::Tensor target = clash ? at::empty(*shape, a.options()) : result;
  // Each operand's planes copied dense once: the GEMM reads them four
  // times, and strided rows (every other float) cost it more than the copy.
  const at::Tensor ar = complex_plane(a, 0).contiguous(), ai = complex_plane(a, 1).contiguous();
  const at::Tensor br = complex_plane(b, 0).contiguous(), bi = complex_plane(b, 1).contiguous();
  const at::Tensor re = complex_plane(target, 0), im = complex_plane(target, 1);
  // With beta 0 the plane itself stands in for self: the real op does not read it.
  const at::Tensor cre = c.defined() ? complex_plane(c, 0) : re, cim = c.defined() ? complex_plane(c, 1) : im;
  real_product(kind, re, cre, ar, br, beta_re, alpha_re);
  real_product(kind, re, at::Tensor(), ai, bi, 1.0, -alpha_re);
  real_product(kind, im, cim, ar, bi, beta_re, alpha_re);
  real_product(kind, im, at::Tensor(), ai, br, 1.0, alpha_re);
  if (clash) result.copy_(target);
  return result;
}

std::optional<at::Tensor> try_native_complex_mm(const at::Tensor& a, const at::Tensor& b, bool batched) {
  return try_native_complex_gemm(batched ? ComplexGemm::Bmm : ComplexGemm::Mm, nullptr, a, b, 0, 1, nullptr, false);
}

}  // namespace torchneuron
