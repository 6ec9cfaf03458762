// The table-driven pointwise kernel (see pointwise.h): reading the schema,
// building the TensorIterator, PyTorch's float16/bfloat16 rounding rules,
// and launching the op.
#include "neuron_device.h"
#include "pointwise.h"

#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/ScalarOps.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TypeProperties.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/DeviceGuard.h>

#include <memory>
#include <string>
#include <type_traits>
#include <algorithm>
#include <utility>
#include <vector>

#include "complex32.h"
#include "complex_ops.h"
#include "fallback.h"
#include "index_launch.h"  // to_nrt_scalar
#include "op_tracking.h"
#include "runtime_check.h"
#include "tensor_view.h"
#include "wide_unsigned.h"

namespace torchneuron {
namespace {

// A scalar attribute (Scalar, number, bool or None) as the runtime reads it.
nrt_scalar attribute_scalar(const c10::IValue& v) {
  if (v.isNone()) return nrt_scalar{};
  return to_nrt_scalar(v.toScalar());
}

// The value of a CPU scalar operand, read directly (no dispatch).
nrt_scalar cpu_scalar_value(const at::TensorBase& t, const char* name) {
  nrt_scalar s{};
  const void* p = t.const_data_ptr();
  switch (t.scalar_type()) {
    case at::kBool: s.i = *static_cast<const bool*>(p); break;
    case at::kByte: s.i = *static_cast<const uint8_t*>(p); break;
    case at::kChar: s.i = *static_cast<const int8_t*>(p); break;
    case at::kShort: s.i = *static_cast<const int16_t*>(p); break;
    case at::kInt: s.i = *static_cast<const int32_t*>(p); break;
    case at::kLong: s.i = *static_cast<const int64_t*>(p); break;
    case at::kHalf: s.is_float = 1; s.f = static_cast<float>(*static_cast<const at::Half*>(p)); break;
    case at::kBFloat16:
      s.is_float = 1;
      s.f = static_cast<float>(*static_cast<const at::BFloat16*>(p));
      break;
    case at::kFloat: s.is_float = 1; s.f = *static_cast<const float*>(p); break;
    case at::kDouble: s.is_float = 1; s.f = *static_cast<const double*>(p); break;
    default:
      TORCH_CHECK_NOT_IMPLEMENTED(false, name, ": a CPU scalar of dtype ", t.scalar_type(),
                                  " is not supported on neuron");
  }
  return s;
}

bool is_reduced_float(at::ScalarType t) { return t == at::kHalf || t == at::kBFloat16; }


// How launch_with_plan() presents operands: the dtype the op computes in, the first
// operand whose CPU-scalar value converts to it (as TensorIterator's .to()
// would on the CPU), and an operand exempt from that conversion (-1: none).
struct LaunchPlan {
  at::ScalarType compute;
  int convert_from;
  int exact_operand = -1;
};

void launch_with_plan(nrt_op_code code, at::TensorIteratorBase& iter, c10::ArrayRef<c10::IValue> scalars,
            const LaunchPlan& plan) {
  if (iter.numel() == 0) return;
  const char* name = nrt_op_name(code);
  TORCH_CHECK(iter.ntensors() <= NRT_MAX_OPERANDS, name, ": too many operands");
  TORCH_CHECK(iter.ndim() <= NRT_MAX_DIMS, name, ": more than ", NRT_MAX_DIMS,
              " dimensions after broadcasting are not supported on neuron");
  TORCH_CHECK(scalars.size() <= NRT_MAX_SCALARS, name, ": too many scalar arguments");
  nrt_op op{};
  op.code = code;
  op.compute_dtype = to_runtime_dtype(plan.compute, name);
  op.num_operands = static_cast<int32_t>(iter.ntensors());
  op.num_outputs = static_cast<int32_t>(iter.noutputs());
  op.num_scalars = static_cast<int32_t>(scalars.size());
  for (size_t i = 0; i < scalars.size(); i++) op.scalars[i] = attribute_scalar(scalars[i]);
  auto shape = iter.shape();
  for (int k = 0; k < iter.ntensors(); k++) {
    nrt_tensor_view& v = op.operands[k];
    v.dtype = to_runtime_dtype(iter.dtype(k), name);
    v.ndim = static_cast<int32_t>(iter.ndim());
    if (iter.is_cpu_scalar(k)) {
      op.immediate_mask |= 1u << k;
      op.immediates[k] = cpu_scalar_value(iter.tensor_base(k), name);
      if (k >= plan.convert_from && k != plan.exact_operand) v.dtype = op.compute_dtype;
      for (int d = 0; d < v.ndim; d++) v.shape[d] = shape[d], v.strides[d] = 0;
      continue;
    }
    auto strides = iter.strides(k);
    int64_t elem = static_cast<int64_t>(c10::elementSize(iter.dtype(k)));
    for (int d = 0; d < v.ndim; d++) {
      v.shape[d] = shape[d];
      v.strides[d] = strides[d] / elem;
    }
    v.data = iter.data_ptr(k);
  }
  torchneuron::launch(iter.device().index(), op);
}

at::TensorIterator build_iterator(const PointwiseCall& call) {
  at::TensorIteratorConfig config;
  config.set_check_mem_overlap(call.check_overlap).allow_cpu_scalars(true);
  const at::Tensor& out = call.outputs[0];
  switch (call.dtypes) {
    case PointwiseDtypes::Arithmetic:
      config.promote_inputs_to_common_dtype(true).cast_common_dtype_to_outputs(true)
          .enforce_safe_casting_to_output(true);
      break;
    case PointwiseDtypes::FloatResult:
      config.promote_inputs_to_common_dtype(true).cast_common_dtype_to_outputs(true)
          .enforce_safe_casting_to_output(true).promote_integer_inputs_to_float(true);
      break;
    case PointwiseDtypes::Comparison:
      config.promote_inputs_to_common_dtype(true);
      if (!out.defined()) config.declare_static_dtype(at::kBool);
      if (out.defined() && out.scalar_type() != at::kBool) config.cast_common_dtype_to_outputs(true);
      break;
    case PointwiseDtypes::SameAsInput:
      config.check_all_same_dtype(true);
      break;
    case PointwiseDtypes::Predicate:
      config.check_all_same_dtype(false);
      if (!out.defined()) config.declare_static_dtype(at::kBool);
      break;
    case PointwiseDtypes::Select:
      config.check_all_same_dtype(false);
      if (!out.defined()) config.declare_static_dtype(*call.dtype);
      break;
  }
  for (const at::Tensor& t : call.outputs) config.add_output(t);
  for (const at::Tensor& t : call.inputs)
    if (t.defined()) config.add_const_input(t);
  return config.build();
}

at::ScalarType compute_dtype(const PointwiseCall& call, const at::TensorIteratorBase& iter) {
  switch (call.dtypes) {
    case PointwiseDtypes::SameAsInput:
    case PointwiseDtypes::Predicate:
      return iter.input_dtype(0);
    case PointwiseDtypes::Select:
      return *call.dtype;
    default:
      return iter.common_dtype();
  }
}

bool promotes(PointwiseDtypes d) {
  return d == PointwiseDtypes::Arithmetic || d == PointwiseDtypes::FloatResult ||
         d == PointwiseDtypes::Comparison;
}

// With a float16/bfloat16 common dtype the kernels compute in float32. The
// CPU first converts every input to the common dtype and writes results in
// it, so values not representable in it are rounded there: do the same by
// converting such inputs on the device and sending results through a
// temporary of the common dtype. Returns the temporaries (undefined where
// an output needs none); rebuilds iter if anything changed.
c10::SmallVector<at::Tensor, 2> round_like_cpu(PointwiseCall& call, at::TensorIterator& iter,
                                              at::ScalarType compute, int exact_operand) {
  c10::SmallVector<at::Tensor, 2> temps(call.outputs.size());
  if (!promotes(call.dtypes) || !is_reduced_float(compute)) return temps;
  bool changed = false;
  int k = iter.noutputs();
  for (TensorRef& t : call.inputs) {
    if (!t->defined()) continue;
    at::ScalarType s = t->scalar_type();
    bool exact = s == compute || s == at::kBool || s == at::kByte || s == at::kChar;
    bool exempt = k == exact_operand && iter.is_scalar(k);
    if (!exact && !exempt && !iter.is_cpu_scalar(k)) {
      t = t->to(compute);
      changed = true;
    }
    k++;
  }
  if (call.dtypes != PointwiseDtypes::Comparison) {
    for (size_t j = 0; j < call.outputs.size(); j++) {
      const at::Tensor& out = call.outputs[j];
      if (out.defined() && out.scalar_type() != compute) {
        temps[j] = at::empty(out.sizes(), out.options().dtype(compute));
        changed = true;
      }
    }
  }
  if (changed) {
    PointwiseCall rebuilt = call;
    for (size_t j = 0; j < temps.size(); j++)
      if (temps[j].defined()) rebuilt.outputs[j] = temps[j];
    iter = build_iterator(rebuilt);
  }
  return temps;
}


enum class Role : uint8_t { Input, OptionalInput, ScalarInput, SelfInOut, Output, String, Attribute };

Role role_of(const c10::Argument& arg, bool scalar_operands) {
  if (arg.is_out()) return Role::Output;
  c10::TypeKind kind = arg.type()->kind();
  bool optional = kind == c10::TypeKind::OptionalType;
  if (optional) kind = arg.type()->castRaw<c10::OptionalType>()->getElementType()->kind();
  if (kind == c10::TypeKind::TensorType) {
    if (optional) return Role::OptionalInput;
    return arg.alias_info() && arg.alias_info()->isWrite() ? Role::SelfInOut : Role::Input;
  }
  if (kind == c10::TypeKind::StringType) return Role::String;
  if (kind == c10::TypeKind::NumberType && scalar_operands) return Role::ScalarInput;
  return Role::Attribute;
}

bool is_operand(Role role) {
  return role == Role::Input || role == Role::SelfInOut || role == Role::OptionalInput ||
         role == Role::ScalarInput;
}

// What every overload of a table row shares: the row, the overload's name,
// the role of each schema argument. Arguments arrive boxed (IValues) or
// unboxed (C++ values); add() files either kind under its role, borrowing
// tensors, and run() does the rest.
class PointwiseCore {
 public:
  PointwiseCore(const PointwiseOp& op, const std::string& overload, const c10::FunctionSchema& schema)
      : op_(op), name_(overload), counter_(native_op_counter(("aten::" + overload).c_str())),
        complex_count_(overload) {
    for (const c10::Argument& arg : schema.arguments())
      roles_.push_back(role_of(arg, op.flags & kScalarOperands));
    num_returns_ = schema.returns().size();
  }

  // True if an argument has a dtype no table kernel computes in (complex,
  // wide unsigned: tensor_view.h's storage dtypes) or is a complex number:
  // such calls run through the counted CPU fallback, not a refusal.
  static bool needs_fallback(const c10::IValue& v) {
    if (v.isTensor()) return v.toTensor().defined() && is_storage_dtype(v.toTensor().scalar_type());
    if (v.isComplexDouble()) return true;
    return false;
  }
  static bool needs_fallback(const at::Tensor& t) { return t.defined() && is_storage_dtype(t.scalar_type()); }
  static bool needs_fallback(const std::optional<at::Tensor>& t) { return t && needs_fallback(*t); }
  static bool needs_fallback(const c10::Scalar& v) { return v.isComplex(); }
  static bool needs_fallback(const std::optional<c10::Scalar>& v) { return v && v->isComplex(); }
  template <class Other>
  static bool needs_fallback(const Other&) { return false; }

  // Runs this overload through the CPU fallback (arguments on stack).
  void fallback(torch::jit::Stack* stack) const {
    refuse_complex_extrema(stack);
    refuse_complex_heaviside(stack);
    if (try_native_wide_unsigned(stack) || try_native_wide_unsigned_bits(stack) ||
        try_native_wide_unsigned_signbit(stack))
      return;
    const int64_t mark = complex_count_.mark();
    // complex32 computes in complex64 (the fallback's complex32 path), not
    // on float16 planes
    if (!touches_complex32(*stack, num_args()) && (unify_complex_inputs(stack), try_native_complex(stack)))
      return complex_count_.served(mark);
    if (try_native_complex_mixed_out(stack)) return complex_count_.served(mark);
    size_t dot = name_.find('.');
    std::string base = "aten::" + name_.substr(0, dot);
    std::string variant = dot == std::string::npos ? "" : name_.substr(dot + 1);
    run_through_fallback(base.c_str(), variant.c_str(), stack);
  }

  // maximum, minimum, fmax and fmin have no complex kernel on the CPU
  // either: its error, raised here rather than by the fallback.
  void refuse_complex_extrema(torch::jit::Stack* stack) const {
    const std::string base = name_.substr(0, name_.find('.'));
    if (base != "maximum" && base != "minimum" && base != "fmax" && base != "fmin") return;
    const c10::IValue* args = stack->data() + (stack->size() - roles_.size());
    bool complex = false;
    for (size_t i = 0; i < roles_.size(); i++) {
      if (roles_[i] != Role::Input || !args[i].isTensor()) continue;
      const at::Tensor& t = args[i].toTensor();
      if (!is_neuron(t)) return;  // the CPU's device error first
      complex = complex || t.is_complex();
    }
    TORCH_CHECK(!complex, base, " not implemented for complex tensors.");
  }

  // heaviside has no complex kernel on the CPU either: its error (checked
  // before the dtypes), raised here rather than by the fallback.
  void refuse_complex_heaviside(torch::jit::Stack* stack) const {
    if (name_.rfind("heaviside", 0) != 0) return;
    const c10::IValue* args = stack->data() + (stack->size() - roles_.size());
    bool complex = false;
    for (size_t i = 0; i < roles_.size(); i++) {
      if (!args[i].isTensor() || !args[i].toTensor().defined()) continue;
      const at::Tensor& t = args[i].toTensor();
      if (!is_neuron(t) && !(t.is_cpu() && t.dim() == 0)) return;  // the CPU's device error first
      complex = complex || t.is_complex();
    }
    TORCH_CHECK(!complex, "heaviside is not yet implemented for complex tensors.");
  }

  // An out= overload where complex meets another dtype (the type promotion
  // checks of test_binary_ufuncs: add(int16, int32, out=complex64),
  // add(complex64, complex128, out=complex64 or float16)): the CPU computes
  // in the inputs' common dtype and casts the result into out (or raises
  // its "can't be cast" error), and so does this, with the functional
  // overload (the same arguments without out) run natively and its result
  // copied, converted, into out. Complex64/128 and the kernels' dtypes
  // only; false, stack untouched, for any other call.
  bool try_native_complex_mixed_out(torch::jit::Stack* stack) const {
    const size_t n = roles_.size();
    if (num_returns_ != 1 || n < 2 || roles_[n - 1] != Role::Output) return false;
    c10::IValue* args = stack->data() + (stack->size() - n);
    if (!args[n - 1].isTensor()) return false;
    const at::Tensor out = args[n - 1].toTensor();
    auto plain = [](at::ScalarType d) {
      return !is_storage_dtype(d) || d == at::kComplexFloat || d == at::kComplexDouble;
    };
    if (!is_neuron(out) || !plain(out.scalar_type()) || out.is_conj() || out.is_neg()) return false;
    bool complex_in = false;
    int tensor_inputs = 0;
    for (size_t i = 0; i + 1 < n; i++) {
      if (roles_[i] == Role::Output) return false;
      complex_in = complex_in || args[i].isComplexDouble();
      if (!args[i].isTensor() || !args[i].toTensor().defined()) continue;
      tensor_inputs++;
      const at::Tensor& t = args[i].toTensor();
      if (!plain(t.scalar_type())) return false;
      if (!is_neuron(t) && !(t.is_cpu() && t.dim() == 0)) return false;  // the fallback raises the CPU's error
      if (is_neuron(t) && t.device() != out.device()) return false;
      complex_in = complex_in || t.is_complex();
    }
    if (!complex_in && !out.is_complex()) return false;
    // Complex inputs of a binary op: only ops with native complex kernels,
    // whose result exists before the cast check (the CPU checks the cast
    // first: for an op it refuses for complex, its "can't be cast" error
    // comes before the "not implemented" one, which the fallback keeps). A
    // unary op's errors come from the CPU's dry run below, in its order.
    const std::string base = name_.substr(0, name_.find('.'));
    static const char* const complex_native[] = {"add",  "sub", "mul",     "div",    "eq",
                                                 "ne",   "pow", "logaddexp", "addcmul", "addcdiv"};
    if (complex_in && tensor_inputs != 1 && std::none_of(std::begin(complex_native), std::end(complex_native),
                                   [&](const char* b) { return base == b; }))
      return false;
    // "add.out" -> "add.Tensor" (or "add"), "eq.Tensor_out" -> "eq.Tensor",
    // "xlogy.OutTensor" -> "xlogy.Tensor"
    const size_t dot = name_.find('.');
    if (dot == std::string::npos) return false;
    std::string overload = name_.substr(dot + 1);
    std::vector<std::string> candidates;
    if (overload == "out") candidates = {"Tensor", ""};
    else if (overload.size() > 4 && overload.compare(overload.size() - 4, 4, "_out") == 0)
      candidates = {overload.substr(0, overload.size() - 4)};
    else if (overload.rfind("Out", 0) == 0) candidates = {overload.substr(3)};
    std::optional<c10::OperatorHandle> functional;
    for (const std::string& c : candidates) {
      functional = c10::Dispatcher::singleton().findSchema({"aten::" + name_.substr(0, dot), c});
      if (functional && functional->schema().arguments().size() == n - 1 &&
          functional->schema().returns().size() == 1)
        break;
      functional.reset();
    }
    if (!functional) return false;
    if (tensor_inputs == 1) check_unary_out_dtype_on_cpu(args, n, dot);
    // TensorIterator's checks of an out=, before anything runs
    at::assert_no_internal_overlap(out);
    for (size_t i = 0; i + 1 < n; i++)
      if (args[i].isTensor() && is_neuron(args[i].toTensor())) at::assert_no_partial_overlap(out, args[i].toTensor());
    torch::jit::Stack call(args, args + (n - 1));
    functional->callBoxed(&call);
    const at::Tensor result = call.back().toTensor();
    TORCH_CHECK(at::canCast(result.scalar_type(), out.scalar_type()), "result type ", result.scalar_type(),
                " can't be cast to the desired output type ", out.scalar_type());
    c10::DeviceGuard guard(out.device());
    at::Tensor written = out;
    at::native::resize_output(written, result.sizes());
    if (written.numel() > 0) written.copy_(result);
    torch::jit::drop(*stack, n);
    torch::jit::push(*stack, written);
    return true;
  }

  // Unary ops differ in what out= dtype they take: neg, floor, abs, sign,
  // nan_to_num... write only into self's dtype ("Found dtype ComplexFloat but
  // expected Float"), exp, sigmoid... cast into any out the result casts to.
  // Rather than a list, the CPU's own out= overload checks the dtypes on an
  // empty twin of the call (no element is computed; the meta kernels do not
  // check) and raises its error before anything runs on the device.
  void check_unary_out_dtype_on_cpu(const c10::IValue* args, size_t n, size_t dot) const {
    torch::jit::Stack dry(args, args + n);
    for (c10::IValue& v : dry) {
      if (!v.isTensor() || !v.toTensor().defined()) continue;
      const at::Tensor& t = v.toTensor();
      v = at::zeros(t.dim() == 0 ? at::IntArrayRef{} : at::IntArrayRef{0}, t.options().device(at::kCPU));
    }
    c10::Dispatcher::singleton()
        .findSchemaOrThrow(("aten::" + name_.substr(0, dot)).c_str(), name_.substr(dot + 1).c_str())
        .callBoxed(&dry);
  }

  // The native complex kernels of this overload, tried in turn.
  // True if this overload is one of names.
  bool named(std::initializer_list<const char*> names) const {
    return std::any_of(names.begin(), names.end(), [&](const char* n) { return name_ == n; });
  }

  bool try_native_complex(torch::jit::Stack* stack) const {
    auto is = [&](std::initializer_list<const char*> names) { return named(names); };
    auto starts = [&](const char* prefix) { return name_.rfind(prefix, 0) == 0; };
    return (is({"mul.Tensor"}) && try_native_complex_mul(stack)) ||
           (is({"add.Tensor", "sub.Tensor"}) && try_native_complex_add(stack, name_ == "sub.Tensor")) ||
           (is({"neg", "neg_", "neg.out"}) && try_native_complex_neg(name_, stack)) ||
           try_native_complex_math(name_, stack) || try_native_complex_select(name_, stack) ||
           try_native_complex_predicate(name_, stack) || (starts("lerp") && try_native_complex_lerp(name_, stack)) ||
           ((starts("addcmul") || starts("addcdiv")) && try_native_complex_addc(name_, stack)) ||
           (is({"abs", "abs_", "abs.out", "angle", "angle.out"}) && try_native_complex_unary_real(name_, stack)) ||
           (is({"eq.Tensor", "eq_.Tensor", "eq.Tensor_out", "ne.Tensor", "ne_.Tensor", "ne.Tensor_out"}) &&
            try_native_complex_compare(name_, stack));
  }

  // Complex arithmetic and equality whose tensors differ in dtype (complex64
  // with float32 or complex128) or include a 0-d CPU tensor: the inputs are
  // converted to the common dtype on the device first, as the CPU's
  // TensorIterator casts them, so that the complex kernels (one dtype, one
  // device) run. Only these functional overloads: they accept any mix the
  // promotion allows (lerp, heaviside and others refuse mixed dtypes).
  void unify_complex_inputs(torch::jit::Stack* stack) const {
    if (!named({"add.Tensor", "sub.Tensor", "mul.Tensor", "div.Tensor", "eq.Tensor", "ne.Tensor", "rsub.Tensor",
                "pow.Tensor_Tensor"}))
      return;
    c10::IValue* args = stack->data() + (stack->size() - roles_.size());
    at::native::ResultTypeState state{};
    std::optional<c10::Device> device;
    bool complex = false, change = false;
    for (size_t i = 0; i < roles_.size(); i++) {
      if (!args[i].isTensor() || roles_[i] != Role::Input) continue;
      const at::Tensor& t = args[i].toTensor();
      if (!t.defined()) return;
      if (is_neuron(t)) {
        if (device && *device != t.device()) return;
        device = t.device();
      } else if (!t.is_cpu() || t.dim() != 0) {
        return;  // the CPU's device error
      }
      complex = complex || t.is_complex();
      state = at::native::update_result_type_state(t, state);
    }
    if (!complex || !device) return;
    const at::ScalarType common = at::native::result_type(state);
    if (common != at::kComplexFloat && common != at::kComplexDouble) return;
    for (size_t i = 0; i < roles_.size(); i++)
      if (args[i].isTensor() && roles_[i] == Role::Input)
        change = change || args[i].toTensor().scalar_type() != common || !is_neuron(args[i].toTensor());
    if (!change) return;
    for (size_t i = 0; i < roles_.size(); i++)
      if (args[i].isTensor() && roles_[i] == Role::Input) args[i] = args[i].toTensor().to(*device, common);
  }

  // The ops the CPU defines for uint16/32/64 whose bits do not depend on
  // signedness (wrapping mul, eq/ne, bitwise and/or/xor, where; floor,
  // ceil, trunc, round and nan_to_num, which copy an integer; isnan,
  // false) run on the tensors viewed as the signed dtype of the same width:
  // arithmetic modulo 2^n and the conversion of a scalar operand agree bit
  // for bit. Inputs of one such dtype only (the CPU refuses to promote
  // them; where's condition aside), on the device or 0-d on the host;
  // outputs of that dtype or another (a bool out=); an in-place or out=
  // call returns the tensor it wrote.
  bool try_native_wide_unsigned_bits(torch::jit::Stack* stack) const {
    if (!named({"mul.Tensor", "mul.Scalar", "mul.out", "mul_.Tensor", "mul_.Scalar", "eq.Tensor", "eq.Scalar",
                "eq.Tensor_out", "eq.Scalar_out", "ne.Tensor", "ne.Scalar", "ne.Tensor_out", "ne.Scalar_out",
                "bitwise_and.Tensor", "bitwise_and.Scalar", "bitwise_and.Tensor_out", "bitwise_and_.Tensor",
                "bitwise_and_.Scalar", "bitwise_or.Tensor", "bitwise_or.Scalar", "bitwise_or.Tensor_out",
                "bitwise_or_.Tensor", "bitwise_or_.Scalar", "bitwise_xor.Tensor", "bitwise_xor.Scalar",
                "bitwise_xor.Tensor_out", "bitwise_xor_.Tensor", "bitwise_xor_.Scalar", "floor", "floor_",
                "floor.out", "ceil", "ceil_", "ceil.out", "trunc", "trunc_", "trunc.out", "round", "round_",
                "round.out", "nan_to_num", "nan_to_num_", "nan_to_num.out", "isnan", "where.self",
                "where.self_out", "eq_.Tensor", "eq_.Scalar", "ne_.Tensor", "ne_.Scalar", "bitwise_and.Scalar_out",
                "bitwise_or.Scalar_out", "bitwise_xor.Scalar_out"}))
      return false;
    c10::IValue* args = stack->data() + (stack->size() - roles_.size());
    const bool where = named({"where.self", "where.self_out"});
    std::optional<at::ScalarType> wide;
    std::optional<at::Tensor> written;
    std::optional<c10::Device> device;
    for (size_t i = 0; i < roles_.size(); i++) {
      if (!args[i].isTensor() || (where && i == 0)) continue;
      const at::Tensor& t = args[i].toTensor();
      if (t.defined() && t.unsafeGetTensorImpl()->is_wrapped_number()) continue;  // a Python number
      const bool host_scalar = roles_[i] == Role::Input && t.defined() && t.is_cpu() && t.dim() == 0;
      if (!is_neuron(t) && !host_scalar) return false;
      if (is_neuron(t)) {
        if (device && *device != t.device()) return false;
        device = t.device();
      }
      const at::ScalarType d = t.scalar_type();
      if (roles_[i] == Role::Output) {
        written = t;
        continue;
      }
      if ((roles_[i] != Role::Input && roles_[i] != Role::SelfInOut) || !is_wide_unsigned(d) || (wide && *wide != d))
        return false;
      if (roles_[i] == Role::SelfInOut) written = t;
      wide = d;
    }
    if (!wide || !device || (written && is_wide_unsigned(written->scalar_type()) && written->scalar_type() != *wide))
      return false;
    const at::ScalarType same_width = same_width_signed(*wide);
    for (size_t i = 0; i < roles_.size(); i++) {
      if (!args[i].isTensor() || (where && i == 0)) continue;
      const at::Tensor& t = args[i].toTensor();
      if (!t.defined() || t.unsafeGetTensorImpl()->is_wrapped_number() || t.scalar_type() != *wide) continue;
      args[i] = (is_neuron(t) ? t : t.to(*device)).view(same_width);  // a 0-d host tensor: as the CPU reads it
    }
    run_boxed(stack);
    if (written) {
      stack->back() = *written;
      return true;
    }
    at::Tensor& result = stack->back().toTensor();
    if (result.scalar_type() == same_width) stack->back() = result.view(*wide);
    return true;
  }

  // signbit of an unsigned integer is false, which the same-width signed
  // view would not give: the CPU's all-false result, made on the device.
  bool try_native_wide_unsigned_signbit(torch::jit::Stack* stack) const {
    if (!named({"signbit"})) return false;
    const at::Tensor& self = stack->back().toTensor();
    if (!is_neuron(self) || !is_wide_unsigned(self.scalar_type())) return false;
    at::Tensor result = at::zeros(self.sizes(), self.options().dtype(at::kBool));
    stack->back() = std::move(result);
    return true;
  }

  // A wide unsigned (uint16/32/64) input of an op that promotes its inputs
  // to a dtype the kernels compute in (uint16 * 0.5, special functions of
  // integers: the default float) is converted to that dtype on the device,
  // as the CPU's TensorIterator casts it, and the call runs natively. Not
  // when such a tensor is written (in place, out=), an input is complex or
  // the CPU refuses the promotion (uint16 with int64): those fall back.
  bool try_native_wide_unsigned(torch::jit::Stack* stack) const {
    if (!promotes(op_.dtypes)) return false;
    c10::IValue* args = stack->data() + (stack->size() - roles_.size());
    at::native::ResultTypeState state{};
    bool wide = false;
    try {
      for (size_t i = 0; i < roles_.size(); i++) {
        const c10::IValue& v = args[i];
        if (v.isComplexDouble()) return false;
        if (v.isScalar() && roles_[i] == Role::ScalarInput) state = at::native::update_result_type_state(v.toScalar(), state);
        if (!v.isTensor() || !v.toTensor().defined()) continue;
        const at::Tensor& t = v.toTensor();
        if (t.is_complex()) return false;
        if (!is_storage_dtype(t.scalar_type())) {
          if (roles_[i] == Role::Input || roles_[i] == Role::OptionalInput)
            state = at::native::update_result_type_state(t, state);
          continue;
        }
        if (roles_[i] != Role::Input && roles_[i] != Role::OptionalInput) return false;
        state = at::native::update_result_type_state(t, state);
        wide = true;
      }
      if (!wide) return false;
      at::ScalarType common = at::native::result_type(state);
      if (op_.dtypes == PointwiseDtypes::FloatResult && at::isIntegralType(common, /*includeBool=*/true))
        common = c10::typeMetaToScalarType(c10::get_default_dtype());
      if (is_storage_dtype(common)) return false;
      for (size_t i = 0; i < roles_.size(); i++)
        if (args[i].isTensor() && args[i].toTensor().defined() && is_storage_dtype(args[i].toTensor().scalar_type()))
          args[i] = args[i].toTensor().to(common);
    } catch (const c10::Error&) {
      return false;  // the promotion is refused: the fallback raises the CPU's error
    }
    run_boxed(stack);
    return true;
  }

  // The native path on a stack of arguments (replaced by the results).
  void run_boxed(torch::jit::Stack* stack) const {
    const size_t num_args = roles_.size();
    const c10::IValue* args = stack->data() + (stack->size() - num_args);
    PointwiseCall call = start();
    for (size_t i = 0; i < num_args; i++) add(call, i, args[i]);
    c10::SmallVector<at::Tensor, 2> allocated = run(call);
    c10::SmallVector<at::Tensor, 2> results;
    for (size_t j = 0; j < num_returns_; j++)
      results.push_back(allocated[j].defined() ? allocated[j] : *call.outputs[j]);
    torch::jit::drop(*stack, num_args);  // the outputs were borrowed from here
    for (at::Tensor& r : results) torch::jit::push(*stack, std::move(r));
  }

  size_t num_args() const { return roles_.size(); }
  size_t num_returns() const { return num_returns_; }

  PointwiseCall start() const {
    counter_->fetch_add(1, std::memory_order_relaxed);
    return PointwiseCall{op_.code, op_.dtypes, op_.supported, {}, {}, {}, {}, {}, std::nullopt, name_};
  }

  void add(PointwiseCall& call, size_t i, const c10::IValue& value) const {
    Role role = roles_[i];
    switch (role) {
      case Role::Input: case Role::SelfInOut: case Role::Output:
        return add(call, i, value.toTensor());
      case Role::OptionalInput:
        call.input_scalars.emplace_back();
        call.inputs.emplace_back(value.isNone() ? TensorRef() : TensorRef(value.toTensor()));
        return;
      case Role::ScalarInput:
        return add(call, i, value.isNone() ? std::optional<c10::Scalar>() : value.toScalar());
      case Role::String:
        call.strings.push_back(value.isNone() ? std::nullopt
                                              : std::optional<std::string_view>(value.toStringRef()));
        return;
      case Role::Attribute: call.scalars.push_back(value); return;
    }
  }
  void add(PointwiseCall& call, size_t i, const at::Tensor& t) const {
    Role role = roles_[i];
    if (is_operand(role)) {
      call.input_scalars.emplace_back();
      call.inputs.emplace_back(t);
    }
    if (role == Role::SelfInOut || role == Role::Output) call.outputs.emplace_back(t);
  }
  void add(PointwiseCall& call, size_t, const std::optional<at::Tensor>& t) const {
    call.input_scalars.emplace_back();
    call.inputs.emplace_back(t ? TensorRef(*t) : TensorRef());
  }
  void add(PointwiseCall& call, size_t i, const std::optional<c10::Scalar>& v) const {
    if (roles_[i] == Role::ScalarInput) {  // wrapped after prepare, which may make it an attribute
      call.input_scalars.emplace_back(v);
      call.inputs.emplace_back();
    } else {
      call.scalars.push_back(v ? c10::IValue(*v) : c10::IValue());
    }
  }
  void add(PointwiseCall& call, size_t i, const c10::Scalar& v) const {
    add(call, i, std::optional<c10::Scalar>(v));
  }
  void add(PointwiseCall& call, size_t, std::optional<std::string_view> v) const {
    call.strings.push_back(v);
  }
  void add(PointwiseCall& call, size_t i, std::string_view v) const {
    add(call, i, std::optional<std::string_view>(v));
  }
  template <class Number, std::enable_if_t<std::is_arithmetic_v<Number>, int> = 0>
  void add(PointwiseCall& call, size_t, Number v) const {
    call.scalars.push_back(c10::IValue(v));
  }

  // The name the CPU gives its kernel in a dtype error, "<name>_cpu": the op
  // without its overload or in-place underscore (bitwise_and_ is
  // "bitwise_and"), the runtime op's for the operators (__ilshift__ and
  // bitwise_left_shift are "lshift").
  std::string kernel_name() const {
    std::string base = name_.substr(0, name_.find('.'));
    if (base.rfind("__", 0) == 0 || base.find("_shift") != std::string::npos) return nrt_op_name(op_.code);
    while (!base.empty() && base.back() == '_') base.pop_back();
    return base;
  }

  // Runs the call; returns the results the call allocated (undefined where
  // an output was given).
  c10::SmallVector<at::Tensor, 2> run(PointwiseCall& call) const {
    if (call.outputs.empty()) call.outputs.resize(num_returns_);
    call.check_overlap = !(op_.flags & kOverlapAllowed);
    if (op_.prepare) op_.prepare(call);
    for (size_t k = 0; k < call.inputs.size(); k++) {
      if (call.inputs[k]->defined() || !call.input_scalars[k]) continue;
      at::Tensor number = at::scalar_to_tensor(*call.input_scalars[k]);  // a Python number's wrapping
      number.unsafeGetTensorImpl()->set_wrapped_number(true);
      call.inputs[k] = std::move(number);
    }

    const at::Tensor* anchor = nullptr;
    for (const TensorRef& t : call.outputs)
      if (!anchor && is_neuron(*t)) anchor = &*t;
    for (const TensorRef& t : call.inputs)
      if (!anchor && is_neuron(*t)) anchor = &*t;
    c10::OptionalDeviceGuard guard(anchor ? std::optional<c10::Device>(anchor->device())
                                          : std::nullopt);

    at::TensorIterator iter = build_iterator(call);
    LaunchPlan plan{compute_dtype(call, iter), iter.noutputs()};
    if (call.dtypes == PointwiseDtypes::Select) plan.convert_from = iter.noutputs() + 1;
    TORCH_CHECK_NOT_IMPLEMENTED(call.supported.has(plan.compute), "\"", kernel_name(),
                                "_neuron\" not implemented for '", c10::toString(plan.compute), "'");
    if (op_.flags & kCheckScalarFits)
      for (const std::optional<c10::Scalar>& value : call.input_scalars)
        if (value) check_scalar_fits(*value, plan.compute);
    if (op_.check) op_.check(call, plan.compute);
    if ((op_.flags & kExactScalar) && is_reduced_float(plan.compute))
      plan.exact_operand = iter.noutputs() + 1;
    c10::SmallVector<at::Tensor, 2> temps = round_like_cpu(call, iter, plan.compute, plan.exact_operand);
    launch_with_plan(call.code, iter, call.scalars, plan);
    for (size_t j = 0; j < temps.size(); j++)
      if (temps[j].defined()) call.outputs[j]->copy_(temps[j]);

    c10::SmallVector<at::Tensor, 2> allocated(num_returns_);
    for (size_t j = 0; j < num_returns_; j++)
      if (!call.outputs[j]->defined()) allocated[j] = iter.output(static_cast<int>(j));
    return allocated;
  }

 private:
  PointwiseOp op_;
  std::string name_;
  std::atomic<int64_t>* counter_;
  ComplexPathCount complex_count_;  // this overload's native complex path
  c10::SmallVector<Role, 8> roles_;
  size_t num_returns_ = 1;
};

// The boxed kernel: any schema (multiple returns, rare argument types).
class BoxedPointwise final : public c10::OperatorKernel {
 public:
  explicit BoxedPointwise(std::shared_ptr<const PointwiseCore> core) : core_(std::move(core)) {}

  void operator()(const c10::OperatorHandle&, c10::DispatchKeySet, torch::jit::Stack* stack) {
    const size_t num_args = core_->num_args();
    const c10::IValue* args = stack->data() + (stack->size() - num_args);
    for (size_t i = 0; i < num_args; i++)
      if (PointwiseCore::needs_fallback(args[i])) return core_->fallback(stack);
    core_->run_boxed(stack);
  }

 private:
  std::shared_ptr<const PointwiseCore> core_;
};

// An unboxed argument as the fallback's stack holds it.
template <class T>
c10::IValue to_ivalue(const T& v) {
  return c10::IValue(v);
}
inline c10::IValue to_ivalue(std::string_view v) { return c10::IValue(std::string(v)); }
inline c10::IValue to_ivalue(std::optional<std::string_view> v) {
  return v ? c10::IValue(std::string(*v)) : c10::IValue();
}

// Unboxed kernels for the common signatures: called with C++ references,
// they never copy the caller's tensors (see TensorRef). Returns the new
// result, or the written argument (self of an in-place op, out of out=).
template <class Ret, class... Args>
torch::CppFunction unboxed_kernel(std::shared_ptr<const PointwiseCore> core, Ret (*)(Args...)) {
  return torch::CppFunction([core](Args... args) -> Ret {
    if ((PointwiseCore::needs_fallback(args) || ...)) {
      torch::jit::Stack stack;
      (stack.emplace_back(to_ivalue(args)), ...);
      core->fallback(&stack);
      if constexpr (std::is_same_v<Ret, at::Tensor>) {
        return stack.back().toTensor();
      } else {
        at::Tensor* written = nullptr;
        (
            [&](auto& arg) {
              if constexpr (std::is_same_v<decltype(arg), at::Tensor&>)
                if (!written) written = &arg;
            }(args),
            ...);
        return *written;
      }
    }
    PointwiseCall call = core->start();
    size_t i = 0;
    (core->add(call, i++, args), ...);
    c10::SmallVector<at::Tensor, 2> allocated = core->run(call);
    if constexpr (std::is_same_v<Ret, at::Tensor>) {
      return std::move(allocated[0]);
    } else {
      at::Tensor* written = nullptr;
      (
          [&](auto& arg) {
            if constexpr (std::is_same_v<decltype(arg), at::Tensor&>)
              if (!written) written = &arg;
          }(args),
          ...);
      return *written;
    }
  });
}

// A signature's key: one letter per return and argument type.
template <class T> constexpr char key_letter();
template <> constexpr char key_letter<const at::Tensor&>() { return 'T'; }
template <> constexpr char key_letter<at::Tensor>() { return 'T'; }
template <> constexpr char key_letter<at::Tensor&>() { return 'W'; }
template <> constexpr char key_letter<const c10::Scalar&>() { return 'S'; }
template <> constexpr char key_letter<const std::optional<c10::Scalar>&>() { return 's'; }
template <> constexpr char key_letter<const std::optional<at::Tensor>&>() { return 't'; }
template <> constexpr char key_letter<std::string_view>() { return 'R'; }
template <> constexpr char key_letter<std::optional<std::string_view>>() { return 'r'; }
template <> constexpr char key_letter<double>() { return 'f'; }
template <> constexpr char key_letter<int64_t>() { return 'i'; }
template <> constexpr char key_letter<bool>() { return 'b'; }

template <class Ret, class... Args>
std::string signature_key(Ret (*)(Args...)) {
  return std::string{key_letter<Ret>(), ':', key_letter<Args>()...};
}

// The same key read from a schema; empty when a type has no letter.
std::string schema_key(const c10::FunctionSchema& schema) {
  auto letter = [](const c10::TypePtr& type, bool written) -> char {
    using K = c10::TypeKind;
    bool optional = type->kind() == K::OptionalType;
    K kind = optional ? type->castRaw<c10::OptionalType>()->getElementType()->kind() : type->kind();
    switch (kind) {
      case K::TensorType: return written ? (optional ? 0 : 'W') : (optional ? 't' : 'T');
      case K::NumberType: return optional ? 's' : 'S';
      case K::StringType: return optional ? 'r' : 'R';
      case K::FloatType: return optional ? 0 : 'f';
      case K::IntType: return optional ? 0 : 'i';
      case K::BoolType: return optional ? 0 : 'b';
      default: return 0;
    }
  };
  if (schema.returns().size() != 1) return "";
  std::string key;
  const c10::Argument& ret = schema.returns()[0];
  key += letter(ret.type(), ret.alias_info() && ret.alias_info()->isWrite());
  key += ':';
  for (const c10::Argument& arg : schema.arguments())
    key += letter(arg.type(), arg.alias_info() && arg.alias_info()->isWrite());
  return key.find('\0') == std::string::npos ? key : "";
}

using T = const at::Tensor&;
using W = at::Tensor&;
using S = const c10::Scalar&;
using OS = const std::optional<c10::Scalar>&;
using OT = const std::optional<at::Tensor>&;
using R = std::string_view;
using OR = std::optional<std::string_view>;

// The signatures served unboxed: unary, binary (with alpha), ternary, with
// scalar, string and bound arguments; functional, in-place and out=.
using UnboxedFactory = torch::CppFunction (*)(std::shared_ptr<const PointwiseCore>);
template <class Sig>
std::pair<std::string, UnboxedFactory> unboxed_entry() {
  return {signature_key(static_cast<Sig*>(nullptr)),
          [](std::shared_ptr<const PointwiseCore> core) {
            return unboxed_kernel(std::move(core), static_cast<Sig*>(nullptr));
          }};
}

const std::vector<std::pair<std::string, UnboxedFactory>>& unboxed_signatures() {
  static const std::vector<std::pair<std::string, UnboxedFactory>> table = {
      unboxed_entry<at::Tensor(T)>(), unboxed_entry<W(W)>(), unboxed_entry<W(T, W)>(),
      unboxed_entry<at::Tensor(T, T)>(), unboxed_entry<W(W, T)>(), unboxed_entry<W(T, T, W)>(),
      unboxed_entry<at::Tensor(T, T, S)>(), unboxed_entry<W(W, T, S)>(),
      unboxed_entry<W(T, T, S, W)>(), unboxed_entry<at::Tensor(T, S)>(),
      unboxed_entry<W(W, S)>(), unboxed_entry<W(T, S, W)>(),
      unboxed_entry<at::Tensor(T, S, S)>(), unboxed_entry<W(W, S, S)>(),
      unboxed_entry<W(T, S, S, W)>(), unboxed_entry<at::Tensor(S, T)>(),
      unboxed_entry<at::Tensor(T, T, T)>(), unboxed_entry<W(W, T, T)>(),
      unboxed_entry<W(T, T, T, W)>(), unboxed_entry<at::Tensor(T, T, T, S)>(),
      unboxed_entry<W(W, T, T, S)>(), unboxed_entry<W(T, T, T, S, W)>(),
      unboxed_entry<at::Tensor(T, R)>(), unboxed_entry<W(W, R)>(),
      unboxed_entry<W(T, R, W)>(), unboxed_entry<at::Tensor(T, T, R)>(),
      unboxed_entry<W(T, T, R, W)>(), unboxed_entry<at::Tensor(T, T, OR)>(),
      unboxed_entry<W(W, T, OR)>(), unboxed_entry<W(T, T, OR, W)>(),
      unboxed_entry<at::Tensor(T, OS, OS)>(), unboxed_entry<W(W, OS, OS)>(),
      unboxed_entry<W(T, OS, OS, W)>(), unboxed_entry<at::Tensor(T, OT, OT)>(),
      unboxed_entry<W(W, OT, OT)>(), unboxed_entry<W(T, OT, OT, W)>(),
      unboxed_entry<at::Tensor(T, T, S, S)>(), unboxed_entry<at::Tensor(T, S, S, S)>(),
      unboxed_entry<W(W, S, S, S)>(), unboxed_entry<at::Tensor(T, T, T, T)>(),
  };
  return table;
}

}  // namespace

void launch_iterator(nrt_op_code code, at::TensorIteratorBase& iter,
                     const std::vector<c10::IValue>& scalars, std::optional<at::ScalarType> compute) {
  launch_with_plan(code, iter, scalars, LaunchPlan{compute.value_or(iter.common_dtype()), iter.noutputs()});
}

namespace {

// Registers one overload: unboxed when its signature is a common one,
// boxed otherwise.
void register_overload(torch::Library& m, const PointwiseOp& op, const std::string& overload) {
  size_t dot = overload.find('.');
  std::string base = overload.substr(0, dot);
  std::string variant = dot == std::string::npos ? "" : overload.substr(dot + 1);
  auto handle = c10::Dispatcher::singleton().findSchemaOrThrow(("aten::" + base).c_str(),
                                                               variant.c_str());
  const c10::FunctionSchema& schema = handle.schema();
  auto core = std::make_shared<const PointwiseCore>(op, overload, schema);
  std::string key = schema_key(schema);
  for (const auto& [signature, factory] : unboxed_signatures())
    if (!key.empty() && signature == key) return (void)m.impl(overload.c_str(), factory(core));
  m.impl(overload.c_str(), torch::CppFunction::makeFromBoxedFunctor(
                               std::make_unique<BoxedPointwise>(std::move(core))));
}

}  // namespace

void register_pointwise_ops(torch::Library& m, const PointwiseOp* ops, size_t count) {
  for (size_t r = 0; r < count; r++) {
    std::string names = ops[r].overloads;
    size_t start = 0;
    while (start < names.size()) {
      size_t end = names.find(' ', start);
      if (end == std::string::npos) end = names.size();
      std::string name = names.substr(start, end - start);
      if (!name.empty()) register_overload(m, ops[r], name);
      start = end + 1;
    }
  }
}

}  // namespace torchneuron
