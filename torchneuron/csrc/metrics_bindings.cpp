// Bindings of torchneuron.metrics' runtime counters and of the runtime's
// log level: the runtime's own counters (neuronrt/metrics.h) plus the
// shim's totals of ATen calls served natively and by the CPU fallback.
#include <torch/extension.h>

#include <map>
#include <string>

#include "op_tracking.h"
#include "runtime_check.h"
#include "neuronrt/log.h"
#include "neuronrt/metrics.h"

namespace torchneuron {
namespace {

std::map<std::string, uint64_t> runtime_counters() {
  std::map<std::string, uint64_t> out;
  for (int i = 0; i < NRT_METRIC_COUNT; i++) {
    auto metric = static_cast<nrt_metric>(i);
    out[nrt_metric_name(metric)] = nrt_metric_value(metric);
  }
  out["ops.native"] = static_cast<uint64_t>(native_op_total.load(std::memory_order_relaxed));
  out["ops.fallback"] = static_cast<uint64_t>(fallback_op_total());
  return out;
}

void clear_runtime_counters() {
  nrt_metrics_clear();
  clear_op_totals();
}

const char* const level_names[] = {"error", "warning", "info", "debug"};

void set_log_level(const std::string& name) {
  nrt_log_level level;
  if (nrt_log_level_parse(name.c_str(), &level) != NRT_SUCCESS)
    throw py::value_error(nrt_last_error());
  NRT_CHECK(nrt_log_set_level(level));
}

}  // namespace
}  // namespace torchneuron

void register_metrics_bindings(py::module_& m);
void register_metrics_bindings(py::module_& m) {
  using namespace torchneuron;
  m.def("_runtime_counters", &runtime_counters);
  m.def("_clear_runtime_counters", &clear_runtime_counters);
  m.def("_set_log_level", &set_log_level);
  m.def("_get_log_level", [] { return std::string(level_names[nrt_log_get_level()]); });
}
