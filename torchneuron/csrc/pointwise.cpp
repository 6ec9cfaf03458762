#include "pointwise.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "op_tracking.h"
#include "runtime_check.h"
#include "tensor_view.h"

namespace torchneuron {
namespace {

nrt_scalar to_nrt_scalar(const c10::Scalar& s) {
  nrt_scalar out{};
  if (s.isFloatingPoint()) {
    out.is_float = 1;
    out.f = s.toDouble();
  } else if (s.isBoolean()) {
    out.i = s.toBool();
  } else {
    TORCH_CHECK(!s.isComplex(), "complex scalars are not supported on neuron");
    out.i = s.toLong();
  }
  return out;
}

nrt_scalar to_nrt_scalar(const c10::IValue& v) {
  if (v.isNone()) return nrt_scalar{};
  return to_nrt_scalar(v.toScalar());
}

}  // namespace

void launch_iterator(nrt_op_code code, at::TensorIteratorBase& iter,
                     const std::vector<c10::IValue>& scalars) {
  if (iter.numel() == 0) return;
  const char* name = nrt_op_name(code);
  TORCH_CHECK(iter.ntensors() <= NRT_MAX_OPERANDS, name, ": too many operands");
  TORCH_CHECK(iter.ndim() <= NRT_MAX_DIMS, name, ": more than ", NRT_MAX_DIMS,
              " dimensions after broadcasting are not supported on neuron");
  TORCH_CHECK(scalars.size() <= NRT_MAX_SCALARS, name, ": too many scalar arguments");
  nrt_op op{};
  op.code = code;
  op.compute_dtype = to_runtime_dtype(iter.common_dtype(), name);
  op.num_operands = static_cast<int32_t>(iter.ntensors());
  op.num_outputs = static_cast<int32_t>(iter.noutputs());
  op.num_scalars = static_cast<int32_t>(scalars.size());
  for (size_t i = 0; i < scalars.size(); i++) op.scalars[i] = to_nrt_scalar(scalars[i]);
  auto shape = iter.shape();
  for (int k = 0; k < iter.ntensors(); k++) {
    nrt_tensor_view& v = op.operands[k];
    v.dtype = to_runtime_dtype(iter.dtype(k), name);
    v.ndim = static_cast<int32_t>(iter.ndim());
    auto strides = iter.strides(k);
    int64_t elem = static_cast<int64_t>(c10::elementSize(iter.dtype(k)));
    for (int d = 0; d < v.ndim; d++) {
      v.shape[d] = shape[d];
      v.strides[d] = strides[d] / elem;
    }
    if (iter.is_cpu_scalar(k)) {
      op.immediate_mask |= 1u << k;
      op.immediates[k] = to_nrt_scalar(iter.tensor(k).item());
      for (int d = 0; d < v.ndim; d++) v.strides[d] = 0;
    } else {
      v.data = iter.data_ptr(k);
    }
  }
  launch(iter.device().index(), op);
}

namespace {

bool is_neuron(const at::Tensor& t) {
  return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1;
}

at::TensorIteratorConfig make_config(PointwiseDtypes dtypes, const at::Tensor& out) {
  at::TensorIteratorConfig config;
  config.set_check_mem_overlap(true).allow_cpu_scalars(true);
  switch (dtypes) {
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
      config.cast_common_dtype_to_outputs(false).enforce_safe_casting_to_output(false)
          .check_all_same_dtype(true);
      break;
  }
  return config;
}

class PointwiseKernel final : public c10::OperatorKernel {
 public:
  PointwiseKernel(const PointwiseOp& op, std::string qualified_name)
      : op_(op), counter_(native_op_counter(qualified_name.c_str())) {}

  void operator()(const c10::OperatorHandle& handle, c10::DispatchKeySet, torch::jit::Stack* stack) {
    counter_->fetch_add(1, std::memory_order_relaxed);
    const auto& schema = handle.schema();
    const size_t num_args = schema.arguments().size();
    PointwiseCall call{op_.code, {}, {}, {}};
    at::Tensor out;
    bool inplace = false;
    for (size_t i = 0; i < num_args; i++) {
      const c10::IValue& value = (*stack)[stack->size() - num_args + i];
      const c10::Argument& arg = schema.arguments()[i];
      if (arg.is_out()) {
        out = value.toTensor();
      } else if (value.isTensor()) {
        if (i == 0 && arg.alias_info() && arg.alias_info()->isWrite()) inplace = true;
        call.inputs.push_back(value.toTensor());
      } else if (value.isString()) {
        call.strings.push_back(value.toStringRef());
      } else {
        call.scalars.push_back(value);
      }
    }
    if (inplace) out = call.inputs[0];
    if (op_.prepare) op_.prepare(call);
    const at::Tensor& anchor = is_neuron(out) ? out : call.inputs[0];
    c10::OptionalDeviceGuard guard(is_neuron(anchor) ? std::optional<c10::Device>(anchor.device())
                                                     : std::nullopt);
    at::TensorIteratorConfig config = make_config(op_.dtypes, out);
    config.add_output(out);
    for (const auto& t : call.inputs) config.add_const_input(t);
    at::TensorIterator iter = config.build();
    launch_iterator(call.code, iter, call.scalars);
    torch::jit::drop(*stack, num_args);
    torch::jit::push(*stack, out.defined() ? out : iter.output(0));
  }

 private:
  PointwiseOp op_;
  std::atomic<int64_t>* counter_;
};

void register_overload(torch::Library& m, const PointwiseOp& op, const std::string& name) {
  m.impl(name.c_str(), torch::CppFunction::makeFromBoxedFunctor(
                           std::make_unique<PointwiseKernel>(op, "aten::" + name)));
}

// sub(a, b, alpha) is add(a, b, -alpha).
void negate_alpha(PointwiseCall& call) {
  call.code = NRT_OP_ADD;
  call.scalars[0] = c10::IValue(-call.scalars[0].toScalar());
}

const PointwiseOp kPointwiseOps[] = {
    {"add", "Tensor", NRT_OP_ADD, PointwiseDtypes::Arithmetic},
    {"sub", "Tensor", NRT_OP_ADD, PointwiseDtypes::Arithmetic, negate_alpha},
    {"mul", "Tensor", NRT_OP_MUL, PointwiseDtypes::Arithmetic},
    {"exp", "", NRT_OP_EXP, PointwiseDtypes::FloatResult},
    {"eq", "Tensor", NRT_OP_EQ, PointwiseDtypes::Comparison},
};

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const PointwiseOp& op : kPointwiseOps) {
    std::string suffix = *op.overload ? std::string(".") + op.overload : "";
    register_overload(m, op, op.name + suffix);
    if (op.has_inplace) register_overload(m, op, std::string(op.name) + "_" + suffix);
    register_overload(m, op, std::string(op.name) + ".out");
  }
}

}  // namespace torchneuron
