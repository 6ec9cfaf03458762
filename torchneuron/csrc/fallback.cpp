// The boxed CPU fallback: runs an op that has no neuron kernel on the CPU.
//
// Tensors move to the CPU, the CPU kernel runs, and results move back:
// functional outputs are copied to the device, in-place and out= arguments
// are written back into the original neuron tensors. View-returning ops
// never copy: their output geometry is computed on meta twins of the inputs
// and applied to the neuron storage, so the result aliases like a real
// view. Factory ops that name the neuron device run on the CPU and move.
// Every use is counted; each op warns once; TORCHNEURON_FALLBACK=error (or
// torchneuron.set_fallback_mode) turns a fallback into an error. A malformed
// TORCHNEURON_FALLBACK does not fail the import (which runs inside
// `import torch`): it is kept and raised at the first use, naming itself.
#include "neuron_device.h"
#include "fallback.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <set>

#include "complex32.h"
#include "device_state.h"
#include "op_tracking.h"

namespace torchneuron {
namespace {

std::atomic<FallbackMode> fallback_mode_now{FallbackMode::Warn};

// TORCHNEURON_FALLBACK's value if it named no mode; read once, at load.
std::mutex environment_mu;
std::optional<std::string> malformed_environment;
std::atomic<bool> environment_ok{true};

const bool environment_read = [] {
  const char* text = std::getenv("TORCHNEURON_FALLBACK");
  if (text == nullptr || *text == '\0') return true;
  if (auto parsed = parse_fallback_mode(text)) {
    fallback_mode_now.store(*parsed);
  } else {
    malformed_environment = text;
    environment_ok.store(false);
  }
  return true;
}();


std::string op_name(const c10::FunctionSchema& schema) {
  const auto& name = schema.operator_name();
  return name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
}

void warn_once(const std::string& name) {
  static std::mutex mu;
  static std::set<std::string> warned;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!warned.insert(name).second) return;
  }
  TORCH_WARN("The operator '", name,
             "' has no native neuron kernel; it runs on the CPU, with copies to and from the "
             "device. (Shown once per operator; torchneuron.get_fallback_ops() lists them.)");
}

bool returns_view(const c10::FunctionSchema& schema) {
  for (const auto& ret : schema.returns()) {
    const auto* alias = ret.alias_info();
    if (alias != nullptr && !alias->isWrite()) return true;
  }
  return false;
}

// A meta tensor with t's sizes, strides and storage offset over a storage as
// large as t's, so that a view op computes the same geometry on it.
at::Tensor meta_twin(const at::Tensor& t) {
  int64_t storage_elems =
      static_cast<int64_t>((t.storage().nbytes() + t.element_size() - 1) / t.element_size());
  at::Tensor base = at::empty({storage_elems}, t.options().device(at::kMeta));
  return base.as_strided(t.sizes(), t.strides(), t.storage_offset());
}

at::Tensor apply_view(const at::Tensor& meta_view, const std::vector<at::Tensor>& sources,
                      const std::string& name) {
  for (const auto& source : sources) {
    if (source.scalar_type() != meta_view.scalar_type()) continue;
    return source.as_strided(meta_view.sizes(), meta_view.strides(), meta_view.storage_offset());
  }
  TORCH_CHECK_NOT_IMPLEMENTED(false, "The view operator '", name,
                              "' changes the dtype; it has no neuron kernel and cannot be "
                              "emulated as a view of the neuron storage.");
}

void run_view_op(const c10::OperatorHandle& op, torch::jit::Stack* stack, const std::string& name) {
  const auto& schema = op.schema();
  size_t num_args = schema.arguments().size();
  std::vector<at::Tensor> sources;
  for (size_t i = stack->size() - num_args; i < stack->size(); i++) {
    c10::IValue& arg = (*stack)[i];
    if (arg.isTensor() && is_neuron(arg.toTensor())) {
      sources.push_back(arg.toTensor());
      arg = meta_twin(arg.toTensor());
    }
  }
  TORCH_CHECK(!sources.empty(), "fallback of view op '", name, "' found no neuron input");
  op.callBoxed(stack);
  size_t num_returns = schema.returns().size();
  for (size_t i = stack->size() - num_returns; i < stack->size(); i++) {
    c10::IValue& ret = (*stack)[i];
    if (ret.isTensor()) {
      ret = apply_view(ret.toTensor(), sources, name);
    } else if (ret.isTensorList()) {
      std::vector<at::Tensor> views;
      for (const at::Tensor& t : ret.toTensorVector()) views.push_back(apply_view(t, sources, name));
      ret = c10::IValue(views);
    }
  }
}

// An out= or in-place argument that is not on a neuron device cannot take
// the result back (the write-back is a neuron copy): say so, in the words
// PyTorch uses for tensors on different devices.
void check_written_arguments(const c10::FunctionSchema& schema, const torch::jit::Stack& stack,
                             const std::string& name) {
  size_t num_args = schema.arguments().size();
  size_t first = stack.size() - num_args;
  std::optional<c10::Device> device;
  for (size_t i = first; i < stack.size() && !device; i++)
    if (stack[i].isTensor() && is_neuron(stack[i].toTensor())) device = stack[i].toTensor().device();
  for (size_t i = 0; i < num_args; i++) {
    const auto* alias = schema.arguments()[i].alias_info();
    if (alias == nullptr || !alias->isWrite()) continue;
    std::vector<at::Tensor> written;
    const c10::IValue& arg = stack[first + i];
    if (arg.isTensor()) written.push_back(arg.toTensor());
    else if (arg.isTensorList()) written = arg.toTensorVector();
    for (const at::Tensor& t : written) {
      TORCH_CHECK(!t.defined() || is_neuron(t),
                  "Expected all tensors to be on the same device, but found at least two devices, ",
                  device ? device->str() : std::string("neuron"), " and ", t.device(),
                  "! (argument '", schema.arguments()[i].name(), "' of '", name,
                  "', which is written to)");
    }
  }
}

void run_on_cpu(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  size_t num_args = schema.arguments().size();
  std::optional<c10::Device> target;
  std::optional<c10::Device> first_tensor, neuron_tensor;
  for (size_t i = stack->size() - num_args; i < stack->size(); i++) {
    c10::IValue& arg = (*stack)[i];
    if (arg.isDevice() && arg.toDevice().type() == c10::DeviceType::PrivateUse1) {
      target = arg.toDevice();
      arg = c10::IValue(c10::Device(c10::DeviceType::CPU));
    }
    if (arg.isTensor() && arg.toTensor().defined()) {
      // (a CPU tensor mixes with neuron ones only as a 0-d one)
      if (!first_tensor) first_tensor = arg.toTensor().dim() == 0 ? arg.toTensor().device() : c10::Device(c10::kMeta);
      if (!neuron_tensor && is_neuron(arg.toTensor())) neuron_tensor = arg.toTensor().device();
    }
  }
  // cpu_fallback returns results on the first tensor argument's device: a
  // CPU wrapped number (2 - z is sub(2, z)) would leave them on the CPU
  if (!target && first_tensor && first_tensor->is_cpu() && neuron_tensor) target = neuron_tensor;
  at::native::cpu_fallback(op, stack);
  if (!target) return;
  for (size_t i = stack->size() - schema.returns().size(); i < stack->size(); i++) {
    c10::IValue& ret = (*stack)[i];
    if (ret.isTensor() && ret.toTensor().defined() && ret.toTensor().is_cpu())
      ret = ret.toTensor().to(*target);
  }
}

// The neuron device of the op's first neuron tensor argument (a tensor
// list's too) or device option (a factory's), or -1.
int fallback_device(const c10::FunctionSchema& schema, const torch::jit::Stack& stack) {
  const size_t n = schema.arguments().size();
  for (size_t i = stack.size() - n; i < stack.size(); i++) {
    const c10::IValue& v = stack[i];
    if (v.isTensor() && is_neuron(v.toTensor())) return v.toTensor().device().index();
    if (v.isDevice() && v.toDevice().type() == c10::DeviceType::PrivateUse1)
      return v.toDevice().has_index() ? v.toDevice().index() : current_device();
    if (v.isTensorList())
      for (const at::Tensor& t : v.toTensorList().vec())
        if (is_neuron(t)) return t.device().index();
  }
  return -1;
}

void neuron_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (try_native_complex32(op, stack)) return;  // complex32 arithmetic runs in complex64
  const std::string name = op_name(op.schema());
  FallbackMode current = fallback_mode();
  TORCH_CHECK_NOT_IMPLEMENTED(current != FallbackMode::Error, "The operator '", name,
                              "' has no native neuron kernel, and TORCHNEURON_FALLBACK=error "
                              "forbids running it on the CPU.");
  bool view = returns_view(op.schema());
  if (!view) check_written_arguments(op.schema(), *stack, name);
  count_fallback_op(name, fallback_device(op.schema(), *stack));
  if (current == FallbackMode::Warn) warn_once(name);
  if (view)
    run_view_op(op, stack, name);
  else
    run_on_cpu(op, stack);
}

}  // namespace

void fallback_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) { neuron_fallback(op, stack); }

void run_through_fallback(const char* name, const char* overload, torch::jit::Stack* stack) {
  const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow(name, overload);
  neuron_fallback(op, stack);
}

std::optional<FallbackMode> parse_fallback_mode(const std::string& text) {
  if (text == "warn") return FallbackMode::Warn;
  if (text == "error") return FallbackMode::Error;
  if (text == "silent") return FallbackMode::Silent;
  return std::nullopt;
}

void set_fallback_mode(FallbackMode m) {
  std::lock_guard<std::mutex> lock(environment_mu);
  fallback_mode_now.store(m);
  environment_ok.store(true);
}

void check_fallback_environment() {
  if (C10_LIKELY(environment_ok.load(std::memory_order_acquire))) return;
  std::lock_guard<std::mutex> lock(environment_mu);
  if (environment_ok.load()) return;
  TORCH_CHECK(false, "TORCHNEURON_FALLBACK='", *malformed_environment,
              "' is not a fallback mode: expected 'warn', 'error' or 'silent' "
              "(or call torchneuron.set_fallback_mode())");
}

FallbackMode fallback_mode() {
  check_fallback_environment();
  return fallback_mode_now.load(std::memory_order_relaxed);
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&neuron_fallback>());
}

}  // namespace torchneuron
