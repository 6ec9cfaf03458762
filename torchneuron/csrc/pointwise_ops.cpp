// The pointwise op table: every ATen overload with a native neuron kernel,
// the runtime op it becomes, its dtype rule and supported dtypes, and the
// argument checks PyTorch's CPU kernels make (same messages).
//
// Only overloads with a backend kernel on the CPU are listed: ops PyTorch
// composes from others (CompositeImplicitAutograd: isfinite, square, clip,
// __and__, ...) reach these, and listing them would shadow their autograd.
#include <ATen/ATen.h>
#include <ATen/native/BinaryOps.h>
#include <ATen/native/Gelu.h>
#include <ATen/native/TypeProperties.h>
#include <torch/library.h>

#include <limits>

#include "tensor_view.h"  // check_scalar_fits
#include "pointwise.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {

using D = PointwiseDtypes;

constexpr DtypeSet kInts{dtype_bit(at::kByte) | dtype_bit(at::kChar) | dtype_bit(at::kShort) | dtype_bit(at::kInt) |
                         dtype_bit(at::kLong)};
constexpr DtypeSet kIntegral{kInts.bits | dtype_bit(at::kBool)};
constexpr DtypeSet kNumeric{kInts.bits | kFloatingDtypes.bits};
constexpr DtypeSet kAll{kNumeric.bits | dtype_bit(at::kBool)};

// ---- arithmetic --------------------------------------------------------

void check_alpha(const PointwiseCall& call, at::ScalarType compute) {
  at::native::alpha_check(compute, call.scalars[0].toScalar());
}

// Integer fmod/remainder by a divisor the host holds (a Python number, a CPU
// scalar tensor) that is zero raises at the call, as on CPU; a divisor on the
// device is only seen by the kernel (reported at the next synchronisation).
void check_host_divisor(const PointwiseCall& call, at::ScalarType compute) {
  if (!at::isIntegralType(compute, /*includeBool=*/true) || call.inputs.size() < 2) return;
  const at::Tensor& divisor = call.inputs[1];
  if (divisor.defined() && divisor.is_cpu() && divisor.numel() == 1)
    TORCH_CHECK(divisor.item().toLong() != 0, "ZeroDivisionError");
}

// sub(a, b, alpha) is add(a, b, -alpha).
void prepare_sub(PointwiseCall& call) {
  at::native::sub_check(call.inputs[0], call.inputs[1]);
  // the CPU's alpha_check on the alpha given (sub_check leaves no bool result)
  TORCH_CHECK(!call.scalars[0].toScalar().isBoolean(), "Boolean alpha only supported for Boolean results.");
  call.code = NRT_OP_ADD;
  call.scalars[0] = c10::IValue(-call.scalars[0].toScalar());
}

// rsub(a, b, alpha) = b - alpha * a = add(b, a, -alpha).
void prepare_rsub(PointwiseCall& call) {
  prepare_sub(call);
  std::swap(call.inputs[0], call.inputs[1]);
  std::swap(call.input_scalars[0], call.input_scalars[1]);
}

void prepare_div_mode(PointwiseCall& call) {
  const std::optional<std::string_view>& mode = call.strings[0];
  if (!mode) return;
  if (*mode == "trunc") {
    call.code = NRT_OP_DIV_TRUNC;
  } else if (*mode == "floor") {
    call.code = NRT_OP_DIV_FLOOR;
  } else {
    TORCH_CHECK(false, "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '",
                *mode, "'");
  }
  call.dtypes = D::Arithmetic;
  call.supported = kNumeric;
}

void prepare_pow_scalar(PointwiseCall& call) {
  const c10::Scalar& exponent = *call.input_scalars[1];
  TORCH_CHECK(!(at::isIntegralType(call.inputs[0]->scalar_type(), true) && exponent.isIntegral(true) &&
                exponent.toLong() < 0),
              "Integers to negative integer powers are not allowed.");
}

void check_addcdiv(PointwiseCall& call) {
  TORCH_CHECK(!(at::isIntegralType(call.inputs[1]->scalar_type(), true) &&
                at::isIntegralType(call.inputs[2]->scalar_type(), true)),
              "Integer division with addcdiv is no longer supported, and in a future release addcdiv "
              "will perform a true division of tensor1 and tensor2. The historic addcdiv behavior "
              "can be implemented as (input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) "
              "for integer inputs and as (input + value * tensor1 / tensor2) for float inputs. The "
              "future addcdiv behavior is just the latter implementation: (input + value * tensor1 / "
              "tensor2), for all dtypes.");
}

void check_lerp(PointwiseCall& call) {
  const at::Tensor& self = call.inputs[0];
  TORCH_CHECK(self.dtype() == call.inputs[1]->dtype(), "expected dtype ", self.dtype(),
              " for `end` but got dtype ", call.inputs[1]->dtype());
  if (call.inputs.size() < 3 || !call.inputs[2]->defined()) return;  // lerp.Scalar
  const at::Tensor& weight = call.inputs[2];
  if (weight.dim() == 0 && weight.dtype() != self.dtype()) {
    // a 0-d weight of another dtype counts as a scalar, converted (the CPU's rule)
    call.inputs[2] = weight.to(self.scalar_type());
    return;
  }
  TORCH_CHECK(self.dtype() == weight.dtype(), "expected dtype ", self.dtype(), " for `weight` but got dtype ",
              weight.dtype());
}

bool present(const PointwiseCall& call, size_t k) {
  return call.inputs[k]->defined() || call.input_scalars[k].has_value();
}

// clamp with a bound left out becomes maximum (min only) or minimum (max only).
void prepare_clamp(PointwiseCall& call) {
  bool has_min = present(call, 1), has_max = present(call, 2);
  TORCH_CHECK(has_min || has_max, "torch.clamp: At least one of 'min' or 'max' must not be None");
  if (!has_max) {
    call.code = NRT_OP_MAXIMUM;
    call.inputs.pop_back();
    call.input_scalars.pop_back();
  } else if (!has_min) {
    call.code = NRT_OP_MINIMUM;
    call.inputs.erase(call.inputs.begin() + 1);
    call.input_scalars.erase(call.input_scalars.begin() + 1);
  }
}

// With one tensor bound, bool is allowed, as clamp_min/clamp_max allow it.
void prepare_clamp_tensors(PointwiseCall& call) {
  prepare_clamp(call);
  if (call.code != NRT_OP_CLAMP) call.supported = kAll;
}

// clamp's dtype with number bounds: an integer self promotes with them (a
// float bound makes it Float). As the CPU's unary op on self: in place, that
// promotion is refused before anything runs, with self's dtype printed as a
// C++ type name ("long int", "unsigned char": its self.dtype(), not the
// ScalarType "Long"); an out= must have exactly that dtype ("Found dtype
// Double but expected Float"), as neg's.
at::ScalarType clamp_scalar_result(const PointwiseCall& call) {
  const at::Tensor& self = *call.inputs[0];
  at::ScalarType result = self.scalar_type();
  if (!at::isFloatingType(result)) {
    at::native::ResultTypeState state{};
    state = at::native::update_result_type_state(self, state);
    for (size_t k = 1; k < call.input_scalars.size(); k++)
      if (call.input_scalars[k]) state = at::native::update_result_type_state(*call.input_scalars[k], state);
    result = at::native::result_type(state);
  }
  if (call.outputs.empty() || !call.outputs[0]->defined()) return result;
  const at::Tensor& out = *call.outputs[0];
  TORCH_CHECK(result == self.scalar_type() || !out.is_same(self), "result type ", result,
              " can't be cast to the desired output type ", self.dtype());
  TORCH_CHECK(out.scalar_type() == result, "Found dtype ", out.scalar_type(), " but expected ", result);
  return result;
}

// The bounds become attributes of a unary clamp (HARDTANH) on self in the
// result dtype; out= must have that dtype.
void clamp_as_hardtanh(PointwiseCall& call, at::ScalarType result, const c10::Scalar& min,
                       const c10::Scalar& max) {
  at::Tensor self = call.inputs[0];
  call.code = NRT_OP_HARDTANH;
  call.dtypes = D::SameAsInput;
  call.inputs = {result == self.scalar_type() ? self : self.to(result)};
  call.input_scalars.resize(1);
  call.scalars = {c10::IValue(min), c10::IValue(max)};
}

// One number bound on a floating result: a clamp with the other bound
// infinite. x equal to the bound then stays x (-0.0 against a bound of 0.0
// and the reverse), as the CPU's clamp_min/clamp_max keep it; maximum and
// minimum give their second operand on such ties (as the CPU's vector loop
// of maximum does).
bool clamp_one_number_bound(PointwiseCall& call, at::ScalarType result, size_t k, bool is_min) {
  if (!at::isFloatingType(result) || !call.input_scalars[k]) return false;
  const c10::Scalar bound = *call.input_scalars[k];
  check_scalar_fits(bound, result);
  const double inf = std::numeric_limits<double>::infinity();
  clamp_as_hardtanh(call, result, is_min ? bound : c10::Scalar(-inf), is_min ? c10::Scalar(inf) : bound);
  return true;
}

// clamp_min/clamp_max with a number.
void prepare_clamp_bound_scalar(PointwiseCall& call) {
  if (!call.input_scalars[1]) return;
  const at::ScalarType result = clamp_scalar_result(call);
  clamp_one_number_bound(call, result, 1, call.code == NRT_OP_MAXIMUM);
}

// clamp with scalar bounds: the result dtype promotes over self and both
// bounds (an iterator takes one CPU scalar at most).
void prepare_clamp_scalars(PointwiseCall& call) {
  const at::ScalarType result = clamp_scalar_result(call);
  const bool has_min = present(call, 1), has_max = present(call, 2);
  if (has_min != has_max && clamp_one_number_bound(call, result, has_min ? 1 : 2, has_min)) return;
  if (!has_min || !has_max) return prepare_clamp(call);
  c10::Scalar min = *call.input_scalars[1], max = *call.input_scalars[2];
  for (const c10::Scalar& bound : {min, max}) check_scalar_fits(bound, result);
  clamp_as_hardtanh(call, result, min, max);
}

// threshold and hardtanh convert their scalars to the element type.
void check_scalars_fit(const PointwiseCall& call, at::ScalarType compute) {
  for (const c10::IValue& value : call.scalars) check_scalar_fits(value.toScalar(), compute);
}

// threshold on float16/bfloat16 compares in float, as the CPU's kernel does:
// only the replacement value must fit the element type.
void check_threshold_scalars_fit(const PointwiseCall& call, at::ScalarType compute) {
  if (!at::isReducedFloatingType(compute)) return check_scalars_fit(call, compute);
  check_scalar_fits(call.scalars[1].toScalar(), compute);
}

// ---- unary ---------------------------------------------------------------

void check_neg(PointwiseCall& call) {
  TORCH_CHECK(call.inputs[0]->scalar_type() != at::kBool,
              "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to "
              "invert a mask, use the `~` or `logical_not()` operator instead.");
}

void check_relu(PointwiseCall& call) {
  TORCH_CHECK(call.inputs[0]->scalar_type() != at::kBool, "Boolean inputs not supported for relu");
}

void prepare_round_decimals(PointwiseCall& call) {
  if (call.scalars[0].toInt() != 0) return;
  call.code = NRT_OP_ROUND;
  call.scalars.clear();
}

// None means 0, the dtype's largest and lowest finite value.
void prepare_nan_to_num(PointwiseCall& call) {
  at::ScalarType dtype = call.inputs[0]->scalar_type();
  // the CPU's own check and words, before the generic same-dtype one
  if (!call.outputs.empty() && call.outputs[0]->defined())
    TORCH_CHECK(call.outputs[0]->scalar_type() == dtype, "nan_to_num: dtype of out: ",
                call.outputs[0]->scalar_type(), " should be same as input: ", dtype);
  double max = 0.0, lowest = 0.0;
  if (at::isFloatingType(dtype)) {
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, "nan_to_num", [&] {
      max = static_cast<double>(std::numeric_limits<scalar_t>::max());
      lowest = static_cast<double>(std::numeric_limits<scalar_t>::lowest());
    });
  }
  const double defaults[3] = {0.0, max, lowest};
  for (int k = 0; k < 3; k++)
    if (call.scalars[k].isNone()) call.scalars[k] = c10::IValue(defaults[k]);
}

void check_bool_output(PointwiseCall& call) {
  const at::Tensor& out = call.outputs[0];
  std::string_view name = call.name.substr(0, call.name.find('.'));
  TORCH_CHECK(!out.defined() || out.scalar_type() == at::kBool, name,
              " does not support non-boolean outputs.");
}

// ---- activations -----------------------------------------------------------

void prepare_gelu(PointwiseCall& call) {
  if (at::native::get_gelutype_enum(*call.strings[0]) == at::native::GeluType::Tanh)
    call.code = call.code == NRT_OP_GELU ? NRT_OP_GELU_TANH : NRT_OP_GELU_TANH_BACKWARD;
}

void check_leaky_relu_backward(PointwiseCall& call) {
  TORCH_CHECK(!call.scalars[1].toBool() || call.scalars[0].toScalar().toDouble() >= 0.0,
              "In-place leakyReLu backward calculation is triggered with a negative slope which is "
              "not supported. This is caused by calling in-place forward function with a negative "
              "slope, please call out-of-place version instead. File an issue at "
              "https://github.com/pytorch/pytorch if you do require supporting in-place leakRelu "
              "backward calculation with negative slope");
}

void check_elu_backward(PointwiseCall& call) {
  TORCH_CHECK(!call.scalars[3].toBool() || call.scalars[0].toScalar().toDouble() >= 0.0,
              "In-place elu backward calculation is triggered with a negative slope which is not "
              "supported. This is caused by calling in-place forward function with a negative slope, "
              "please call out-of-place version instead.");
}

void check_hardtanh(PointwiseCall& call) {
  at::ScalarType dtype = call.inputs[0]->scalar_type();
  TORCH_CHECK(dtype != at::kBool, "Bool inputs not supported for hardtanh");
  if (dtype == at::kByte)
    TORCH_CHECK(call.scalars[0].toScalar().toLong() >= 0 && call.scalars[1].toScalar().toLong() >= 0,
                "hardtanh with uint8 type requires min_val and max_val to be nonnegative");
}

void check_softshrink(PointwiseCall& call) {
  const double lambd = call.scalars[0].toScalar().toDouble();
  TORCH_CHECK(lambd >= 0, "lambda must be greater or equal to 0, but found to be ", lambd, ".");
}

// ---- special math ----------------------------------------------------------

void check_heaviside(PointwiseCall& call) {
  TORCH_CHECK(call.inputs[0]->dtype() == call.inputs[1]->dtype(),
              "heaviside is not yet implemented for tensors with different dtypes.");
}

// ---- where, masked_fill ----------------------------------------------------

void check_condition(const at::Tensor& condition) {
  if (condition.scalar_type() == at::kByte) {
    TORCH_WARN_ONCE("where received a uint8 condition tensor. This behavior is deprecated and will "
                    "be removed in a future version of PyTorch. Use a boolean condition instead.");
    return;
  }
  TORCH_CHECK(condition.scalar_type() == at::kBool, "where expected condition to be a boolean tensor.");
}

void prepare_where(PointwiseCall& call) {
  check_condition(call.inputs[0]);
  at::ScalarType result = at::result_type(call.inputs[1], call.inputs[2]);
  const at::Tensor& out = call.outputs[0];
  TORCH_CHECK(!out.defined() || out.scalar_type() == result, "Expected out type to be ", result,
              " but got ", out.scalar_type());
  call.dtype = result;
}

// masked_fill(self, mask, value) = where(mask, value, self), in self's dtype.
void prepare_masked_fill(PointwiseCall& call) {
  const at::Tensor& mask = call.inputs[1];
  TORCH_CHECK(mask.scalar_type() == at::kBool,
              "masked_fill_ only supports boolean masks, but got mask with dtype ", mask.scalar_type());
  const at::Tensor& value = call.inputs[2];  // undefined for a Scalar value
  TORCH_CHECK(!value.defined() || value.dim() == 0, "masked_fill_ only supports a 0-dimensional "
              "value tensor, but got tensor with ", value.dim(), " dimension(s).");
  call.dtype = call.inputs[0]->scalar_type();
  call.inputs = {call.inputs[1], call.inputs[2], call.inputs[0]};
  call.input_scalars = {call.input_scalars[1], call.input_scalars[2], call.input_scalars[0]};
}

// ---- the table -------------------------------------------------------------

const PointwiseOp kPointwiseOps[] = {
    // arithmetic
    {"add.Tensor add_.Tensor add.out", NRT_OP_ADD, D::Arithmetic, kAll, nullptr, 0, check_alpha},
    {"sub.Tensor sub_.Tensor sub.out", NRT_OP_ADD, D::Arithmetic, kAll, prepare_sub, 0, check_alpha},
    {"rsub.Tensor", NRT_OP_ADD, D::Arithmetic, kAll, prepare_rsub, 0, check_alpha},
    {"mul.Tensor mul_.Tensor mul.out", NRT_OP_MUL, D::Arithmetic, kAll, nullptr, kExactScalar},
    {"div.Tensor div_.Tensor div.out", NRT_OP_DIV, D::FloatResult, kFloatingDtypes, nullptr, kExactScalar},
    {"div.Tensor_mode div_.Tensor_mode div.out_mode", NRT_OP_DIV, D::FloatResult, kFloatingDtypes,
     prepare_div_mode, kExactScalar},
    {"floor_divide floor_divide_.Tensor floor_divide.out", NRT_OP_DIV_FLOOR, D::Arithmetic, kNumeric,
     nullptr, kExactScalar},
    {"remainder.Tensor remainder_.Tensor remainder.Tensor_out", NRT_OP_REMAINDER, D::Arithmetic,
     kNumeric, nullptr, 0, check_host_divisor},
    {"remainder.Scalar_Tensor", NRT_OP_REMAINDER, D::Arithmetic, kNumeric, nullptr, kScalarOperands},
    {"fmod.Tensor fmod_.Tensor fmod.Tensor_out", NRT_OP_FMOD, D::Arithmetic, kNumeric, nullptr, 0,
     check_host_divisor},
    {"pow.Tensor_Tensor pow_.Tensor pow.Tensor_Tensor_out", NRT_OP_POW, D::Arithmetic, kNumeric},
    {"pow.Tensor_Scalar pow_.Scalar pow.Tensor_Scalar_out", NRT_OP_POW, D::Arithmetic, kNumeric,
     prepare_pow_scalar, kScalarOperands},
    {"pow.Scalar pow.Scalar_out", NRT_OP_POW, D::Arithmetic, kNumeric, nullptr, kScalarOperands},
    {"atan2 atan2_ atan2.out", NRT_OP_ATAN2, D::FloatResult, kFloatingDtypes},
    {"hypot hypot_ hypot.out", NRT_OP_HYPOT, D::Arithmetic, kFloatingDtypes},
    {"copysign.Tensor copysign_.Tensor copysign.out", NRT_OP_COPYSIGN, D::FloatResult, kFloatingDtypes},
    {"maximum maximum.out", NRT_OP_MAXIMUM, D::Arithmetic, kAll},
    {"minimum minimum.out", NRT_OP_MINIMUM, D::Arithmetic, kAll},
    {"fmax fmax.out", NRT_OP_FMAX, D::Arithmetic, kAll},
    {"fmin fmin.out", NRT_OP_FMIN, D::Arithmetic, kAll},
    {"lerp.Scalar lerp_.Scalar lerp.Scalar_out", NRT_OP_LERP, D::Arithmetic, kFloatingDtypes, check_lerp},
    {"lerp.Tensor lerp_.Tensor lerp.Tensor_out", NRT_OP_LERP_TENSOR, D::SameAsInput, kFloatingDtypes,
     check_lerp},
    {"addcmul addcmul_ addcmul.out", NRT_OP_ADDCMUL, D::Arithmetic, kNumeric},
    {"addcdiv addcdiv_ addcdiv.out", NRT_OP_ADDCDIV, D::Arithmetic, kFloatingDtypes, check_addcdiv},
    {"clamp clamp_ clamp.out", NRT_OP_CLAMP, D::Arithmetic, kNumeric, prepare_clamp_scalars,
     kScalarOperands | kCheckScalarFits},
    {"clamp.Tensor clamp_.Tensor clamp.Tensor_out", NRT_OP_CLAMP, D::Arithmetic, kNumeric,
     prepare_clamp_tensors},
    {"clamp_min clamp_min_ clamp_min.out", NRT_OP_MAXIMUM, D::Arithmetic, kNumeric, prepare_clamp_bound_scalar,
     kScalarOperands | kCheckScalarFits},
    {"clamp_min.Tensor clamp_min_.Tensor clamp_min.Tensor_out", NRT_OP_MAXIMUM, D::Arithmetic, kAll},
    {"clamp_max clamp_max_ clamp_max.out", NRT_OP_MINIMUM, D::Arithmetic, kNumeric, prepare_clamp_bound_scalar,
     kScalarOperands | kCheckScalarFits},
    {"clamp_max.Tensor clamp_max_.Tensor clamp_max.Tensor_out", NRT_OP_MINIMUM, D::Arithmetic, kAll},

    // unary, result in the input's dtype
    {"neg neg_ neg.out", NRT_OP_NEG, D::SameAsInput, kNumeric, check_neg},
    {"abs abs_ abs.out", NRT_OP_ABS, D::SameAsInput, kNumeric},
    {"sign sign_ sign.out", NRT_OP_SIGN, D::SameAsInput, kAll},
    {"sgn sgn_ sgn.out", NRT_OP_SIGN, D::SameAsInput, kAll},
    {"floor floor_ floor.out", NRT_OP_FLOOR, D::SameAsInput, kNumeric},
    {"ceil ceil_ ceil.out", NRT_OP_CEIL, D::SameAsInput, kNumeric},
    {"round round_ round.out", NRT_OP_ROUND, D::SameAsInput, kNumeric},
    {"round.decimals round_.decimals round.decimals_out", NRT_OP_ROUND_DECIMALS, D::SameAsInput,
     kFloatingDtypes, prepare_round_decimals},
    {"trunc trunc_ trunc.out", NRT_OP_TRUNC, D::SameAsInput, kNumeric},
    {"frac frac_ frac.out", NRT_OP_FRAC, D::SameAsInput, kFloatingDtypes},
    {"relu relu_", NRT_OP_RELU, D::SameAsInput, kNumeric, check_relu},
    {"bitwise_not bitwise_not_ bitwise_not.out", NRT_OP_BITWISE_NOT, D::SameAsInput, kIntegral},
    {"nan_to_num nan_to_num_ nan_to_num.out", NRT_OP_NAN_TO_NUM, D::SameAsInput, kAll,
     prepare_nan_to_num},

    // unary float math: integer inputs promote to the default float
    {"reciprocal reciprocal_ reciprocal.out", NRT_OP_RECIPROCAL, D::FloatResult, kFloatingDtypes},
    {"sqrt sqrt_ sqrt.out", NRT_OP_SQRT, D::FloatResult, kFloatingDtypes},
    {"rsqrt rsqrt_ rsqrt.out", NRT_OP_RSQRT, D::FloatResult, kFloatingDtypes},
    {"exp exp_ exp.out", NRT_OP_EXP, D::FloatResult, kFloatingDtypes},
    {"exp2 exp2_ exp2.out", NRT_OP_EXP2, D::FloatResult, kFloatingDtypes},
    {"expm1 expm1_ expm1.out", NRT_OP_EXPM1, D::FloatResult, kFloatingDtypes},
    {"log log_ log.out", NRT_OP_LOG, D::FloatResult, kFloatingDtypes},
    {"log2 log2_ log2.out", NRT_OP_LOG2, D::FloatResult, kFloatingDtypes},
    {"log10 log10_ log10.out", NRT_OP_LOG10, D::FloatResult, kFloatingDtypes},
    {"log1p log1p_ log1p.out", NRT_OP_LOG1P, D::FloatResult, kFloatingDtypes},
    {"sin sin_ sin.out", NRT_OP_SIN, D::FloatResult, kFloatingDtypes},
    {"cos cos_ cos.out", NRT_OP_COS, D::FloatResult, kFloatingDtypes},
    {"tan tan_ tan.out", NRT_OP_TAN, D::FloatResult, kFloatingDtypes},
    {"asin asin_ asin.out", NRT_OP_ASIN, D::FloatResult, kFloatingDtypes},
    {"acos acos_ acos.out", NRT_OP_ACOS, D::FloatResult, kFloatingDtypes},
    {"atan atan_ atan.out", NRT_OP_ATAN, D::FloatResult, kFloatingDtypes},
    {"sinh sinh_ sinh.out", NRT_OP_SINH, D::FloatResult, kFloatingDtypes},
    {"cosh cosh_ cosh.out", NRT_OP_COSH, D::FloatResult, kFloatingDtypes},
    {"tanh tanh_ tanh.out", NRT_OP_TANH, D::FloatResult, kFloatingDtypes},
    {"asinh asinh_ asinh.out", NRT_OP_ASINH, D::FloatResult, kFloatingDtypes},
    {"acosh acosh_ acosh.out", NRT_OP_ACOSH, D::FloatResult, kFloatingDtypes},
    {"atanh atanh_ atanh.out", NRT_OP_ATANH, D::FloatResult, kFloatingDtypes},
    {"erf erf_ erf.out", NRT_OP_ERF, D::FloatResult, kFloatingDtypes},
    {"erfc erfc_ erfc.out", NRT_OP_ERFC, D::FloatResult, kFloatingDtypes},
    {"erfinv erfinv_ erfinv.out", NRT_OP_ERFINV, D::FloatResult, kFloatingDtypes},
    {"sigmoid sigmoid_ sigmoid.out", NRT_OP_SIGMOID, D::FloatResult, kFloatingDtypes},

    // tests with a bool result
    {"isnan", NRT_OP_ISNAN, D::Predicate, kAll},
    {"isinf", NRT_OP_ISINF, D::Predicate, kAll},
    {"isposinf isposinf.out", NRT_OP_ISPOSINF, D::Predicate, kAll, check_bool_output},
    {"isneginf isneginf.out", NRT_OP_ISNEGINF, D::Predicate, kAll, check_bool_output},
    {"signbit signbit.out", NRT_OP_SIGNBIT, D::Predicate, kAll, check_bool_output},
    {"logical_not logical_not_ logical_not.out", NRT_OP_LOGICAL_NOT, D::Predicate, kAll},

    // activations and their gradients
    {"leaky_relu leaky_relu_ leaky_relu.out", NRT_OP_LEAKY_RELU, D::SameAsInput, kFloatingDtypes},
    {"leaky_relu_backward leaky_relu_backward.grad_input", NRT_OP_LEAKY_RELU_BACKWARD, D::Arithmetic,
     kFloatingDtypes, check_leaky_relu_backward},
    {"elu elu_ elu.out", NRT_OP_ELU, D::SameAsInput, kFloatingDtypes},
    {"elu_backward elu_backward.grad_input", NRT_OP_ELU_BACKWARD, D::Arithmetic, kFloatingDtypes,
     check_elu_backward},
    {"gelu gelu_ gelu.out", NRT_OP_GELU, D::SameAsInput, kFloatingDtypes, prepare_gelu},
    {"gelu_backward gelu_backward.grad_input", NRT_OP_GELU_BACKWARD, D::Arithmetic, kFloatingDtypes,
     prepare_gelu},
    {"silu silu_ silu.out", NRT_OP_SILU, D::SameAsInput, kFloatingDtypes},
    {"silu_backward silu_backward.grad_input", NRT_OP_SILU_BACKWARD, D::Arithmetic, kFloatingDtypes},
    {"mish mish_ mish.out", NRT_OP_MISH, D::SameAsInput, kFloatingDtypes},
    {"mish_backward", NRT_OP_MISH_BACKWARD, D::Arithmetic, kFloatingDtypes},
    {"sigmoid_backward sigmoid_backward.grad_input", NRT_OP_SIGMOID_BACKWARD, D::Arithmetic, kFloatingDtypes},
    {"tanh_backward tanh_backward.grad_input", NRT_OP_TANH_BACKWARD, D::Arithmetic, kFloatingDtypes},
    {"log_sigmoid_forward log_sigmoid_forward.output", NRT_OP_LOG_SIGMOID, D::SameAsInput, kFloatingDtypes},
    {"log_sigmoid_backward log_sigmoid_backward.grad_input", NRT_OP_LOG_SIGMOID_BACKWARD,
     D::Arithmetic, kFloatingDtypes},
    {"hardtanh hardtanh_ hardtanh.out", NRT_OP_HARDTANH, D::SameAsInput, kNumeric, check_hardtanh,
     0, check_scalars_fit},
    {"hardtanh_backward hardtanh_backward.grad_input", NRT_OP_HARDTANH_BACKWARD, D::Arithmetic,
     kFloatingDtypes},
    {"hardswish hardswish_ hardswish.out", NRT_OP_HARDSWISH, D::SameAsInput, kFloatingDtypes},
    {"hardswish_backward", NRT_OP_HARDSWISH_BACKWARD, D::Arithmetic, kFloatingDtypes},
    {"hardsigmoid hardsigmoid_ hardsigmoid.out", NRT_OP_HARDSIGMOID, D::SameAsInput, kFloatingDtypes},
    {"hardsigmoid_backward hardsigmoid_backward.grad_input", NRT_OP_HARDSIGMOID_BACKWARD,
     D::Arithmetic, kFloatingDtypes},
    {"softplus softplus.out", NRT_OP_SOFTPLUS, D::SameAsInput, kFloatingDtypes},
    {"softplus_backward softplus_backward.grad_input", NRT_OP_SOFTPLUS_BACKWARD, D::Arithmetic,
     kFloatingDtypes},
    {"threshold threshold_ threshold.out", NRT_OP_THRESHOLD, D::Arithmetic, kNumeric, nullptr,
     kOverlapAllowed, check_threshold_scalars_fit},
    {"threshold_backward threshold_backward.grad_input", NRT_OP_THRESHOLD_BACKWARD, D::Arithmetic,
     kNumeric},

    {"hardshrink hardshrink.out", NRT_OP_HARDSHRINK, D::SameAsInput, kFloatingDtypes},
    {"softshrink softshrink.out", NRT_OP_SOFTSHRINK, D::SameAsInput, kFloatingDtypes, check_softshrink},
    {"hardshrink_backward hardshrink_backward.grad_input softshrink_backward softshrink_backward.grad_input",
     NRT_OP_SHRINK_BACKWARD, D::Arithmetic, kFloatingDtypes},

    // special math
    {"sinc sinc_ sinc.out", NRT_OP_SINC, D::FloatResult, kFloatingDtypes},
    {"special_entr special_entr.out", NRT_OP_ENTR, D::FloatResult, kFloatingDtypes},
    {"logaddexp logaddexp.out", NRT_OP_LOGADDEXP, D::Arithmetic, kFloatingDtypes},
    {"logaddexp2 logaddexp2.out", NRT_OP_LOGADDEXP2, D::Arithmetic, kFloatingDtypes},
    {"special_xlog1py special_xlog1py.out", NRT_OP_XLOG1PY, D::FloatResult, kFloatingDtypes},
    {"nextafter nextafter_ nextafter.out", NRT_OP_NEXTAFTER, D::Arithmetic, kFloatingDtypes},
    {"heaviside heaviside_ heaviside.out", NRT_OP_HEAVISIDE, D::Arithmetic, kAll, check_heaviside},
    {"gcd gcd_ gcd.out", NRT_OP_GCD, D::Arithmetic, kInts},
    {"lcm lcm_ lcm.out", NRT_OP_LCM, D::Arithmetic, kInts},
    {"_prelu_kernel", NRT_OP_PRELU, D::Arithmetic, kFloatingDtypes},

    // comparisons, logical and bitwise ops
    {"eq.Tensor eq_.Tensor eq.Tensor_out", NRT_OP_EQ, D::Comparison, kAll},
    {"eq.Scalar eq_.Scalar eq.Scalar_out", NRT_OP_EQ, D::Comparison, kAll, nullptr, kScalarOperands},
    {"ne.Tensor ne_.Tensor ne.Tensor_out", NRT_OP_NE, D::Comparison, kAll},
    {"ne.Scalar ne_.Scalar ne.Scalar_out", NRT_OP_NE, D::Comparison, kAll, nullptr, kScalarOperands},
    {"lt.Tensor lt_.Tensor lt.Tensor_out", NRT_OP_LT, D::Comparison, kAll},
    {"lt.Scalar lt_.Scalar lt.Scalar_out", NRT_OP_LT, D::Comparison, kAll, nullptr, kScalarOperands},
    {"le.Tensor le_.Tensor le.Tensor_out", NRT_OP_LE, D::Comparison, kAll},
    {"le.Scalar le_.Scalar le.Scalar_out", NRT_OP_LE, D::Comparison, kAll, nullptr, kScalarOperands},
    {"gt.Tensor gt_.Tensor gt.Tensor_out", NRT_OP_GT, D::Comparison, kAll},
    {"gt.Scalar gt_.Scalar gt.Scalar_out", NRT_OP_GT, D::Comparison, kAll, nullptr, kScalarOperands},
    {"ge.Tensor ge_.Tensor ge.Tensor_out", NRT_OP_GE, D::Comparison, kAll},
    {"ge.Scalar ge_.Scalar ge.Scalar_out", NRT_OP_GE, D::Comparison, kAll, nullptr, kScalarOperands},
    {"logical_and logical_and_ logical_and.out", NRT_OP_LOGICAL_AND, D::Comparison, kAll},
    {"logical_or logical_or_ logical_or.out", NRT_OP_LOGICAL_OR, D::Comparison, kAll},
    {"logical_xor logical_xor_ logical_xor.out", NRT_OP_LOGICAL_XOR, D::Comparison, kAll},
    {"bitwise_and.Tensor bitwise_and_.Tensor bitwise_and.Tensor_out", NRT_OP_BITWISE_AND,
     D::Arithmetic, kIntegral},
    {"bitwise_or.Tensor bitwise_or_.Tensor bitwise_or.Tensor_out", NRT_OP_BITWISE_OR, D::Arithmetic,
     kIntegral},
    {"bitwise_xor.Tensor bitwise_xor_.Tensor bitwise_xor.Tensor_out", NRT_OP_BITWISE_XOR,
     D::Arithmetic, kIntegral},
    {"bitwise_left_shift.Tensor bitwise_left_shift_.Tensor bitwise_left_shift.Tensor_out "
     "__lshift__.Tensor __ilshift__.Tensor",
     NRT_OP_LSHIFT, D::Arithmetic, kInts},
    {"__lshift__.Scalar __ilshift__.Scalar", NRT_OP_LSHIFT, D::Arithmetic, kInts, nullptr,
     kScalarOperands},
    {"bitwise_right_shift.Tensor bitwise_right_shift_.Tensor bitwise_right_shift.Tensor_out "
     "__rshift__.Tensor __irshift__.Tensor",
     NRT_OP_RSHIFT, D::Arithmetic, kInts},
    {"__rshift__.Scalar __irshift__.Scalar", NRT_OP_RSHIFT, D::Arithmetic, kInts, nullptr,
     kScalarOperands},

    // selection
    {"where.self where.self_out", NRT_OP_WHERE, D::Select, kAll, prepare_where},
    {"masked_fill_.Scalar masked_fill.Scalar", NRT_OP_WHERE, D::Select, kAll, prepare_masked_fill,
     kScalarOperands | kCheckScalarFits},
    {"masked_fill_.Tensor masked_fill.Tensor", NRT_OP_WHERE, D::Select, kAll, prepare_masked_fill},
};

}  // namespace

NEURON_LIBRARY_IMPL(aten, m) {
  register_pointwise_ops(m, kPointwiseOps, sizeof kPointwiseOps / sizeof kPointwiseOps[0]);
}

}  // namespace torchneuron
