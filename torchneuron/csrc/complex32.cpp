// complex32 (chalf) arithmetic: the ops the CPU computes for complex32,
// run natively in complex64 and rounded to float16 parts where the CPU
// rounds.
//
// The CPU computes a complex32 op element by element in complex<float> and
// rounds once per ATen op, after converting every Python number to
// complex32 first; add/sub round alpha * other before the sum, and addcmul
// rounds value * tensor1, then that times tensor2, then the sum (measured
// bitwise against the CPU over 10^5 samples, tests/test_complex32.py).
// complex32 -> complex64 is exact, so this is: widen the operands (native
// copies), round the numbers, run the same op (its complex64 kernel), narrow
// the results to the dtypes the op gives for the original arguments (found
// on meta twins). Storage, copies, fills and byte moves take complex32
// directly (runtime/src/ops/engine/convert.c); arithmetic, and the indexing
// ops whose kernels do not take complex32, come here from the fallback, for
// the ops in the table below. The CPU has no complex32 kernel for the
// others (exp, div, sum...): they keep to the counted fallback, or
// refuse_complex32, and raise the CPU's error.
#include "complex32.h"

#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TypeProperties.h>
#include <c10/util/Half.h>

#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "op_tracking.h"
#include "shape_common.h"  // is_neuron

namespace torchneuron {
namespace {

// Where the CPU rounds besides the result (see above); sgn is z / |z| as a
// complex division (the infinities give NaN, as on the CPU); var is the sum
// of its float16 planes' variances, each rounded, std its float16 root.
enum class Rounding { Result, AlphaProduct, Addcmul, Sgn, Var, Std };

// The ops with a CPU complex32 kernel that compute (the OpInfo sweep in
// tests/test_complex32.py), by schema name; every overload is included.
const std::unordered_map<std::string, Rounding>& chalf_ops() {
  static const std::unordered_map<std::string, Rounding> ops = {
      {"aten::add", Rounding::AlphaProduct}, {"aten::add_", Rounding::AlphaProduct},
      {"aten::sub", Rounding::AlphaProduct}, {"aten::sub_", Rounding::AlphaProduct},
      {"aten::mul", Rounding::Result},       {"aten::mul_", Rounding::Result},
      {"aten::addcmul", Rounding::Addcmul},  {"aten::addcmul_", Rounding::Addcmul},
      {"aten::neg", Rounding::Result},       {"aten::neg_", Rounding::Result},
      {"aten::abs", Rounding::Result},       {"aten::abs_", Rounding::Result},
      {"aten::sgn", Rounding::Sgn},          {"aten::sgn_", Rounding::Sgn},
      {"aten::var", Rounding::Var},          {"aten::std", Rounding::Std},
      {"aten::conj_physical", Rounding::Result}, {"aten::conj_physical_", Rounding::Result},
      {"aten::eq", Rounding::Result},        {"aten::ne", Rounding::Result},
      {"aten::eq_", Rounding::Result},       {"aten::ne_", Rounding::Result},
      {"aten::isnan", Rounding::Result},     {"aten::isinf", Rounding::Result},
      {"aten::index", Rounding::Result},     {"aten::index_put", Rounding::Result},
      {"aten::index_put_", Rounding::Result}, {"aten::_index_put_impl_", Rounding::Result},
      {"aten::index_copy", Rounding::Result},
      {"aten::index_copy_", Rounding::Result}, {"aten::index_fill", Rounding::Result},
      {"aten::index_fill_", Rounding::Result}, {"aten::tril", Rounding::Result},
      {"aten::triu", Rounding::Result},      {"aten::tril_", Rounding::Result},
      {"aten::triu_", Rounding::Result},     {"aten::masked_fill", Rounding::Result},
      {"aten::masked_fill_", Rounding::Result}, {"aten::where", Rounding::Result},
      {"aten::linalg_vector_norm", Rounding::Result}, {"aten::any", Rounding::Result},
      {"aten::all", Rounding::Result},       {"aten::count_nonzero", Rounding::Result},
  };
  return ops;
}

// A double rounded to float16 through float, as c10 converts numbers.
double to_half(double v) { return static_cast<float>(c10::Half(static_cast<float>(v))); }

// A number as the CPU's complex32 kernels see it: complex32, so a real one
// has an imaginary 0 that takes part (inf * 0 is NaN in a product).
c10::Scalar round_scalar(const c10::Scalar& s) {
  if (s.isBoolean()) return s;
  const c10::complex<double> z = s.toComplexDouble();
  return c10::complex<double>(to_half(z.real()), to_half(z.imag()));
}

// a + p (a - p) part by part: the CPU's complex32 sum once alpha's product
// is formed, with no multiply by 1 (a complex add multiplies: inf * 0 is NaN).
at::Tensor plain_sum(const at::Tensor& a, const at::Tensor& p, bool subtract) {
  const at::Tensor ar = at::view_as_real((a.is_complex() ? a : a.to(p.scalar_type())).resolve_conj().resolve_neg());
  const at::Tensor pr = at::view_as_real(p.resolve_conj().resolve_neg());
  return at::view_as_complex(subtract ? at::sub(ar, pr) : at::add(ar, pr));
}

// A meta tensor shaped like t; a wrapped number stays as it is (it promotes
// differently, and meta kernels read it as a number).
at::Tensor meta_like(const at::Tensor& t) {
  if (!t.defined() || t.unsafeGetTensorImpl()->is_wrapped_number()) return t;
  return at::empty_strided(t.sizes(), t.strides(), t.options().device(at::kMeta));
}

c10::IValue map_tensors(const c10::IValue& v, const std::function<at::Tensor(const at::Tensor&)>& f) {
  if (v.isTensor()) return f(v.toTensor());
  if (v.isTensorList()) {
    std::vector<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorVector()) out.push_back(f(t));
    return out;
  }
  if (v.isOptionalTensorList()) {
    c10::List<std::optional<at::Tensor>> out;
    for (const std::optional<at::Tensor>& t : v.toOptionalTensorList())
      out.push_back(t ? std::optional<at::Tensor>(f(*t)) : std::nullopt);
    return out;
  }
  return v;
}

bool any_tensor(const c10::IValue& v, const std::function<bool(const at::Tensor&)>& pred) {
  bool found = false;
  map_tensors(v, [&](const at::Tensor& t) {
    found = found || (t.defined() && pred(t));
    return t;
  });
  return found;
}

bool is_integral(const at::Tensor& t) { return at::isIntegralType(t.scalar_type(), /*includeBool=*/true); }

// Whether the op computes in complex32: PyTorch's promotion of its float
// and complex operands (0-d tensors and numbers count less); integer and
// bool tensors (indices, masks) never make it complex32 on their own.
bool computes_in_chalf(const std::vector<c10::IValue>& args) {
  at::native::ResultTypeState state{};
  bool any = false;
  for (const c10::IValue& v : args) {
    if (v.isScalar() && !v.isBool()) state = at::native::update_result_type_state(v.toScalar(), state);
    map_tensors(v, [&](const at::Tensor& t) {
      if (t.defined() && !is_integral(t)) state = at::native::update_result_type_state(t, state), any = true;
      return t;
    });
  }
  return any && at::native::result_type(state) == at::kComplexHalf;
}

at::ScalarType widened(at::ScalarType t) {
  return t == at::kComplexHalf ? at::kComplexFloat : t == at::kHalf ? at::kFloat : t;
}

// x rounded to complex32 and back: the CPU's rounding of an intermediate.
at::Tensor round_c32(const at::Tensor& x) { return x.to(at::kComplexHalf).to(at::kComplexFloat); }

}  // namespace

void refuse_complex32(const at::Tensor& t, const char* kernel) {
  TORCH_CHECK_NOT_IMPLEMENTED(!t.defined() || t.scalar_type() != at::kComplexHalf, "\"", kernel,
                              "\" not implemented for 'ComplexHalf'");
}

bool touches_complex32(const torch::jit::Stack& stack, size_t num_args) {
  std::vector<c10::IValue> args(stack.end() - static_cast<std::ptrdiff_t>(num_args), stack.end());
  auto chalf = [](const at::Tensor& t) { return is_neuron(t) && t.scalar_type() == at::kComplexHalf; };
  for (const c10::IValue& v : args)
    if (any_tensor(v, chalf)) return true;
  return computes_in_chalf(args);
}

bool try_native_complex32(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const c10::FunctionSchema& schema = op.schema();
  const auto rule = chalf_ops().find(schema.name());
  if (rule == chalf_ops().end()) return false;
  const size_t n = schema.arguments().size(), first = stack->size() - n;
  if (!touches_complex32(*stack, n)) return false;
  std::vector<c10::IValue> args(stack->begin() + first, stack->end());
  const at::Tensor original_self = args[0].isTensor() ? args[0].toTensor() : at::Tensor();
  const bool in_chalf = computes_in_chalf(args);
  auto index_of = [&](const char* name) { return schema.argumentIndexWithName(name); };
  // index_put accumulating: the CPU rounds after each element it adds,
  // which a complex64 sum would not; the fallback keeps its result.
  if (const auto acc = index_of("accumulate"); acc && args[*acc].isBool() && args[*acc].toBool()) return false;
  // Boolean masks become the long indices of their nonzero elements, as
  // ATen expands them: meta twins cannot tell a mask's count.
  if (const auto ix = index_of("indices"); ix && args[*ix].isOptionalTensorList()) {
    c10::List<std::optional<at::Tensor>> expanded;
    for (const std::optional<at::Tensor>& t : args[*ix].toOptionalTensorList()) {
      if (t && t->defined() && (t->scalar_type() == at::kBool || t->scalar_type() == at::kByte)) {
        const at::Tensor nonzero = t->nonzero();
        for (int64_t j = 0; j < t->dim(); j++) expanded.push_back(nonzero.select(1, j));
      } else {
        expanded.push_back(t);
      }
    }
    args[*ix] = expanded;
  }

  // The result dtypes (and whether the op accepts these arguments at all:
  // if not, the fallback raises the CPU's error).
  torch::jit::Stack meta;
  for (const c10::IValue& v : args) meta.push_back(map_tensors(v, meta_like));
  try {
    op.callBoxed(&meta);
  } catch (const std::exception&) {
    return false;
  }

  std::optional<c10::Device> device;
  for (const c10::IValue& v : args)
    map_tensors(v, [&](const at::Tensor& t) {
      if (!device && is_neuron(t)) device = t.device();
      return t;
    });

  // Widen the operands; written arguments get complex64 stand-ins.
  struct Written {
    at::Tensor original, stand_in;
    bool resize;  // an out= argument (an in-place self keeps its shape)
  };
  std::vector<Written> written;
  for (size_t i = 0; i < n; i++) {
    const c10::Argument& arg = schema.arguments()[i];
    c10::IValue& v = args[i];
    const bool writes = arg.alias_info() != nullptr && arg.alias_info()->isWrite();
    if (writes && v.isTensor() && is_neuron(v.toTensor())) {
      const at::Tensor t = v.toTensor();
      const at::ScalarType wide = widened(t.scalar_type());
      if (wide == t.scalar_type()) continue;
      const bool self = arg.name() == "self";
      at::Tensor stand_in = self ? t.to(wide) : at::empty({0}, t.options().dtype(wide));
      written.push_back({t, stand_in, !self});
      v = stand_in;
      continue;
    }
    // (operands only: a norm's ord or an alpha is no complex32 value)
    const bool operand = arg.name() == "other" || arg.name() == "value" || arg.name() == "self";
    if (in_chalf && v.isScalar() && operand && arg.type()->kind() == c10::TypeKind::NumberType) {
      v = round_scalar(v.toScalar());
      continue;
    }
    v = map_tensors(v, [&](const at::Tensor& t) -> at::Tensor {
      if (!t.defined()) return t;
      // A number (or a CPU 0-d tensor) becomes a 0-d complex64 neuron tensor
      // of its complex32 value; operands wider than complex32 (0-d ones)
      // round to it: the CPU converts every operand to complex32 first.
      if (in_chalf && t.dim() == 0 && !is_neuron(t) && device && !is_integral(t))
        return at::scalar_tensor(round_scalar(t.item()), at::TensorOptions(*device).dtype(at::kComplexFloat));
      if (!is_neuron(t)) return t;
      const at::ScalarType d = t.scalar_type();
      if (in_chalf && !is_integral(t) && d != at::kComplexHalf && d != at::kHalf) return round_c32(t);
      return t.to(widened(d));
    });
  }
  // add/sub: alpha * other rounded to complex32, then a plain sum (below)
  std::optional<at::Tensor> alpha_product;
  if (in_chalf && rule->second == Rounding::AlphaProduct) {
    const auto a = index_of("alpha"), o = index_of("other"), self = index_of("self");
    // (add.Scalar's other is a number: it decomposes into add.Tensor first).
    // Even alpha 1 multiplies: an infinite part makes the other one NaN.
    if (a && o && self && args[*a].isScalar() && args[*o].isTensor() && args[*self].isTensor())
      alpha_product = round_c32(args[*o].toTensor() * round_scalar(args[*a].toScalar()));
  }

  // var, std, sgn and addcmul are computed here (their complex64 kernels
  // round elsewhere); the others run the op itself on the widened arguments.
  std::optional<at::Tensor> direct;
  if ((rule->second == Rounding::Var || rule->second == Rounding::Std) && original_self.dim() > 0) {
    // var(self, unbiased) / var.dim / var.correction and their out= forms
    const at::Tensor& z = original_self;
    const at::Tensor planes = at::view_as_real(z.resolve_conj().resolve_neg());
    const auto d = index_of("dim"), c = index_of("correction"), u = index_of("unbiased"), k = index_of("keepdim");
    std::vector<int64_t> dims;
    if (d && args[*d].isIntList())
      for (int64_t x : args[*d].toIntVector()) dims.push_back(c10::maybe_wrap_dim(x, z.dim()));
    if (dims.empty())  // none or all: every complex dim, never the planes'
      for (int64_t x = 0; x < z.dim(); x++) dims.push_back(x);
    std::optional<c10::Scalar> correction;
    if (c && !args[*c].isNone()) correction = args[*c].toScalar();
    if (u && args[*u].isBool()) correction = c10::Scalar(args[*u].toBool() ? 1 : 0);
    const bool keepdim = k && args[*k].toBool();
    at::Tensor v = at::var(planes, dims, correction, keepdim).sum(-1);
    direct = rule->second == Rounding::Std ? v.sqrt() : v;
  } else if (rule->second == Rounding::Sgn) {
    const at::Tensor z = args[0].toTensor();
    const at::Tensor m = z.abs();
    direct = at::where(m.eq(0), at::zeros_like(z), z / at::complex(m, at::zeros_like(m)));
  } else if (alpha_product) {
    const bool subtract = schema.operator_name().name.rfind("aten::sub", 0) == 0;
    direct = plain_sum(args[*index_of("self")].toTensor(), *alpha_product, subtract);
  } else if (in_chalf && rule->second == Rounding::Addcmul) {
    const at::Tensor& t1 = args[1].toTensor();
    const at::Tensor product = round_c32(round_c32(t1 * round_scalar(args[3].toScalar())) * args[2].toTensor());
    direct = plain_sum(args[0].toTensor(), product, false);
  }

  stack->resize(first);
  if (direct) {
    at::Tensor r = *direct;
    if (!written.empty()) {  // in place or out=: into the stand-in
      Written& w = written.back();
      if (w.resize) at::native::resize_output(w.stand_in, r.sizes());
      w.stand_in.copy_(r);
      r = w.stand_in;
    }
    stack->push_back(r);
  } else {
    for (c10::IValue& v : args) stack->push_back(std::move(v));
    op.callBoxed(stack);
  }

  // Written arguments take their values back; the other results narrow to
  // the dtypes the op gives for the original arguments.
  for (Written& w : written) {
    if (w.resize) at::native::resize_output(w.original, w.stand_in.sizes());
    w.original.copy_(w.stand_in);
  }
  const size_t r = schema.returns().size(), results = stack->size() - r;
  for (size_t k = 0; k < r; k++) {
    c10::IValue& ret = (*stack)[results + k];
    if (!ret.isTensor() || !meta[meta.size() - r + k].isTensor()) continue;
    const at::Tensor out = ret.toTensor();
    bool returned_written = false;
    for (const Written& w : written)
      if (out.is_same(w.stand_in)) ret = w.original, returned_written = true;
    const at::ScalarType want = meta[meta.size() - r + k].toTensor().scalar_type();
    if (!returned_written && out.scalar_type() != want) ret = out.to(want);
  }
  const auto& name = schema.operator_name();
  const std::string tracked = name.name + (name.overload_name.empty() ? "" : "." + name.overload_name);
  native_op_counter((tracked + "(complex32)").c_str())->fetch_add(1, std::memory_order_relaxed);
  native_op_total.fetch_add(1, std::memory_order_relaxed);
  return true;
}

}  // namespace torchneuron
