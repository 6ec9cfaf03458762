// Tests and logical ops of complex tensors, on the real view: z is NaN
// (infinite) when either part is, and true when either part is nonzero.
// isnan / isinf and logical_not / logical_and / logical_or / logical_xor
// (functional, out= and in place) reduce each complex operand to a bool
// tensor over its (real, imaginary) pair, then run the real ops; a complex
// out= or in-place self receives the bool result as 0 or 1, as on the CPU.
// Every step is a native op; nothing here touches elements.
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>

#include <string>

#include "complex_ops.h"
#include "inplace_broadcast.h"
#include "op_tracking.h"

namespace torchneuron {
namespace {

enum class Predicate { IsNan, IsInf, Not, And, Or, Xor };

std::optional<Predicate> predicate_of(const std::string& base) {
  if (base == "isnan") return Predicate::IsNan;
  if (base == "isinf") return Predicate::IsInf;
  if (base == "logical_not") return Predicate::Not;
  if (base == "logical_and") return Predicate::And;
  if (base == "logical_or") return Predicate::Or;
  if (base == "logical_xor") return Predicate::Xor;
  return std::nullopt;
}

bool neuron_tensor(const c10::IValue& v) {
  return v.isTensor() && v.toTensor().defined() && v.toTensor().device().type() == c10::DeviceType::PrivateUse1;
}

bool plain_complex(const at::Tensor& t) { return t.is_complex() && t.scalar_type() != at::kComplexHalf; }

// The pairs of z's real view; the conjugate and negative bits change no
// part's zeroness, NaN-ness or infiniteness, so they are dropped as views.
at::Tensor pairs_of(at::Tensor z) {
  if (z.is_conj()) z = z.conj();
  if (z.is_neg()) z = at::_neg_view(z);
  return at::view_as_real(z);
}

// f(re) | f(im): two elementwise tests and an or (faster than a reduction
// over the pairs' two-element dim)
template <class F>
at::Tensor either_part(const at::Tensor& z, F f) {
  const at::Tensor p = pairs_of(z);
  return f(p.select(-1, 0)).logical_or_(f(p.select(-1, 1)));
}

at::Tensor truth_of(const at::Tensor& t) {
  return plain_complex(t) ? either_part(t, [](const at::Tensor& x) { return x.ne(0); }) : t;
}

}  // namespace

bool try_native_complex_predicate(const std::string& name, torch::jit::Stack* stack) {
  const size_t dot = name.find('.');
  std::string base = name.substr(0, dot);
  const std::string variant = dot == std::string::npos ? "" : name.substr(dot + 1);
  const bool inplace = !base.empty() && base.back() == '_';
  if (inplace) base.pop_back();
  const std::optional<Predicate> op = predicate_of(base);
  if (!op || !(variant.empty() || variant == "out")) return false;
  const bool has_out = variant == "out";
  const size_t operands = *op == Predicate::And || *op == Predicate::Or || *op == Predicate::Xor ? 2 : 1;
  const size_t nargs = operands + (has_out ? 1 : 0);
  if (stack->size() < nargs) return false;
  const c10::IValue* args = stack->data() + (stack->size() - nargs);
  bool any_complex = false;
  for (size_t k = 0; k < nargs; k++) {
    if (!neuron_tensor(args[k])) return false;  // the fallback raises the CPU's errors
    if (k > 0 && args[k].toTensor().device() != args[0].toTensor().device()) return false;
    if (args[k].toTensor().scalar_type() == at::kComplexHalf) return false;
    any_complex = any_complex || plain_complex(args[k].toTensor());
  }
  if (!any_complex) return false;
  at::Tensor target;
  if (has_out) target = args[nargs - 1].toTensor();
  if (inplace) target = args[0].toTensor();
  if (target.defined() && (target.is_conj() || target.is_neg())) return false;
  const at::Tensor a = args[0].toTensor();
  const at::Tensor b = operands == 2 ? args[1].toTensor() : at::Tensor();
  if (inplace && b.defined()) check_inplace_broadcast(a.sizes(), {b.sizes()});
  // (NEURON_TRACK_OP's counter is per call site; the name varies here.)
  native_op_counter(("aten::" + base + "(complex)").c_str())->fetch_add(1, std::memory_order_relaxed);
  native_op_total.fetch_add(1, std::memory_order_relaxed);
  c10::DeviceGuard guard(a.device());
  at::Tensor result;
  switch (*op) {
    case Predicate::IsNan:
      result = plain_complex(a) ? either_part(a, [](const at::Tensor& x) { return x.isnan(); }) : at::isnan(a);
      break;
    case Predicate::IsInf:
      result = plain_complex(a) ? either_part(a, [](const at::Tensor& x) { return x.isinf(); }) : at::isinf(a);
      break;
    case Predicate::Not: result = at::logical_not(truth_of(a)); break;
    case Predicate::And: result = at::logical_and(truth_of(a), truth_of(b)); break;
    case Predicate::Or: result = at::logical_or(truth_of(a), truth_of(b)); break;
    case Predicate::Xor: result = at::logical_xor(truth_of(a), truth_of(b)); break;
  }
  if (target.defined()) {
    if (has_out) at::native::resize_output(target, result.sizes());
    if (target.numel() > 0) target.copy_(result);
    result = target;
  }
  torch::jit::drop(*stack, nargs);
  torch::jit::push(*stack, std::move(result));
  return true;
}

}  // namespace torchneuron
