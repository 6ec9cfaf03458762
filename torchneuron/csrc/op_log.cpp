// The op log. Ops are seen through a global RecordFunction callback, which
// the dispatcher runs for each top-level operator call only when some
// callback is registered: with the log off (the default) nothing is
// registered and dispatch pays nothing. How an op runs comes from the
// dispatch table: a PrivateUse1 kernel is native; a composite kernel
// decomposes into the ops logged after it; anything else reaches the
// boxed CPU fallback.
#include "op_log.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/record_function.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <string>
#include <unordered_map>

#include "neuronrt/log.h"

namespace torchneuron {
namespace {

bool env_enabled() {
  const char* text = std::getenv("TORCHNEURON_LOG_OPS");
  return text != nullptr && *text != '\0' && std::strcmp(text, "0") != 0;
}

bool is_neuron_value(const c10::IValue& v) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1;
  }
  if (v.isDevice()) return v.toDevice().type() == c10::DeviceType::PrivateUse1;
  if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorVector())
      if (t.defined() && t.device().type() == c10::DeviceType::PrivateUse1) return true;
  }
  return false;
}

const char* path_uncached(const c10::OperatorName& name) {
  auto op = c10::Dispatcher::singleton().findOp(name);
  if (!op) return "unregistered";
  if (op->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) return "native";
  if (op->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd) ||
      op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd) ||
      op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional))
    return "composite";
  return "fallback";
}

// The dispatch table does not change once the extension has registered
// its kernels, so an op's path is looked up once.
const char* path_of(const c10::OperatorName& name) {
  static std::mutex mu;
  static std::unordered_map<std::string, const char*> known;
  std::string key = name.name + "." + name.overload_name;
  std::lock_guard<std::mutex> lock(mu);
  auto it = known.find(key);
  if (it != known.end()) return it->second;
  return known.emplace(key, path_uncached(name)).first->second;
}

void describe_tensor(std::ostringstream& out, const at::Tensor& t) {
  if (!t.defined()) {
    out << "None";
    return;
  }
  out << c10::getDtypeNames(t.scalar_type()).first << t.sizes();
  if (t.device().type() != c10::DeviceType::PrivateUse1) out << "@" << t.device();
}

void describe_value(std::ostringstream& out, const c10::IValue& v) {
  if (v.isTensor()) {
    describe_tensor(out, v.toTensor());
  } else if (v.isTensorList()) {
    out << "[";
    const char* sep = "";
    for (const at::Tensor& t : v.toTensorVector()) {
      out << sep;
      describe_tensor(out, t);
      sep = ", ";
    }
    out << "]";
  } else if (v.isDevice()) {
    out << v.toDevice();
  } else if (v.isInt() || v.isDouble() || v.isBool() || v.isComplexDouble() || v.isIntList() ||
             v.isDoubleList() || v.isBoolList() || v.isString()) {
    out << v;
  } else if (v.isNone()) {
    out << "None";
  } else {
    out << v.tagKind();
  }
}

thread_local std::string current_graph;

std::unique_ptr<at::ObserverContext> on_op(const at::RecordFunction& fn) {
  auto name = fn.operator_name();
  if (!name) return nullptr;
  auto inputs = fn.inputs();
  bool touches_neuron = false;
  for (const c10::IValue& v : inputs) touches_neuron = touches_neuron || is_neuron_value(v);
  if (!touches_neuron) return nullptr;
  std::ostringstream line;
  line << fn.name();
  if (!name->overload_name.empty()) line << "." << name->overload_name;
  line << " " << path_of(*name) << " (";
  const char* sep = "";
  for (const c10::IValue& v : inputs) {
    line << sep;
    describe_value(line, v);
    sep = ", ";
  }
  line << ")";
  if (!current_graph.empty()) line << " in compiled graph " << current_graph;
  nrt_log_op_line(line.str().c_str());
  return nullptr;
}

const bool registered = [] {
  if (!env_enabled()) return false;
  nrt_log_ops_set_enabled(1);
  at::addGlobalCallback(at::RecordFunctionCallback(&on_op)
                            .needsInputs(true)
                            .scopes({at::RecordScope::FUNCTION}));
  return true;
}();

}  // namespace

bool op_log_enabled() { return registered; }

void set_op_log_graph(std::string name) { current_graph = std::move(name); }

void log_program_launch(nrt_program_t program, c10::DeviceIndex device, int64_t stream_id) {
  nrt_program_info info{};
  if (nrt_program_info_get(program, &info) != NRT_SUCCESS) return;
  std::ostringstream line;
  line << "compiled program of " << info.num_nodes << " nodes in " << info.num_steps << " steps ("
       << info.num_fused_groups << " fused groups of " << info.num_fused_nodes
       << " nodes) on neuron:" << static_cast<int>(device) << " stream " << stream_id;
  nrt_log_op_line(line.str().c_str());
}

}  // namespace torchneuron
