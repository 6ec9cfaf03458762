// torchneuron._C: the Python bindings. Registration of the device with
// PyTorch happens in the other files' static initialisers when this module
// is loaded; here are only the functions torchneuron's Python code calls.
#include <torch/csrc/Generator.h>
#include <torch/extension.h>

#include <execinfo.h>
#include <unistd.h>
#include <chrono>
#include <exception>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "device_state.h"
#include "fallback.h"
#include "generator.h"
#include "op_tracking.h"
#include "runtime_check.h"
#include "runtime_limits.h"
#include "neuronrt/adaptive_eager.h"
#include "neuronrt/isa.h"

namespace torchneuron {
namespace {

// {"active": level the kernels run at, "supported": the host's levels, best first}.
py::dict isa_levels() {
  nrt_isa active, best;
  NRT_CHECK(nrt_isa_get(&active, &best));
  const char *name = nullptr;
  NRT_CHECK(nrt_isa_name(active, &name));
  py::dict d;
  d["active"] = std::string(name);
  py::list supported;
  for (int level = best; level >= NRT_ISA_BASELINE; level--) {
    NRT_CHECK(nrt_isa_name(static_cast<nrt_isa>(level), &name));
    supported.append(std::string(name));
  }
  d["supported"] = supported;
  return d;
}

py::dict device_properties(c10::DeviceIndex device) {
  nrt_device_properties p;
  NRT_CHECK(nrt_device_get_properties(device, &p));
  py::dict d;
  d["name"] = std::string(p.name);
  d["target"] = std::string(p.target_name);
  d["logical_core"] = p.logical_core;
  d["logical_nc_config"] = p.logical_nc_config;
  d["total_memory"] = p.hbm_bytes;
  d["hbm_bytes_per_s"] = p.hbm_bytes_per_s;
  d["sbuf_partitions"] = p.sbuf_partitions;
  d["sbuf_partition_bytes"] = p.sbuf_partition_bytes;
  d["psum_partitions"] = p.psum_partitions;
  d["psum_partition_bytes"] = p.psum_partition_bytes;
  d["psum_banks"] = p.psum_banks;
  d["tensor_engine_hz"] = p.tensor_engine_hz;
  d["vector_engine_hz"] = p.vector_engine_hz;
  d["scalar_engine_hz"] = p.scalar_engine_hz;
  d["gpsimd_engine_hz"] = p.gpsimd_engine_hz;
  d["dma_bytes_per_s"] = p.dma_bytes_per_s;
  d["link_bytes_per_s"] = p.link_bytes_per_s;
  d["efa_bytes_per_s"] = p.efa_bytes_per_s;
  return d;
}

// A gate holds a stream at a point of its queue until opened from Python:
// tests use it to observe work that is queued but not yet run.
struct StreamGate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
};

void gate_wait(void* arg) {
  auto* gate = static_cast<StreamGate*>(arg);
  {
    std::unique_lock<std::mutex> lock(gate->mu);
    gate->cv.wait(lock, [&] { return gate->open; });
  }
  delete gate;
}

uintptr_t close_stream_gate(c10::DeviceIndex device, int64_t stream_id) {
  nrt_stream_t stream = nullptr;
  NRT_CHECK(nrt_stream_from_id(device, stream_id, &stream));
  auto* gate = new StreamGate();
  nrt_status status = nrt_launch_host_func(stream, gate_wait, gate);
  if (status != NRT_SUCCESS) {
    delete gate;
    NRT_CHECK(status);
  }
  return reinterpret_cast<uintptr_t>(gate);
}

void open_stream_gate(uintptr_t handle) {
  auto* gate = reinterpret_cast<StreamGate*>(handle);
  {
    std::lock_guard<std::mutex> lock(gate->mu);
    gate->open = true;
  }
  gate->cv.notify_all();
}

// Opens the gate after a delay from a thread of its own, not a Python one:
// for tests whose blocking call holds the GIL (an allocation that must wait
// for a stream to pass the gate).
void open_stream_gate_after(uintptr_t handle, double seconds) {
  std::thread([handle, seconds] {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    open_stream_gate(handle);
  }).detach();
}

FallbackMode fallback_mode_named(const std::string& text) {
  if (auto mode = parse_fallback_mode(text)) return *mode;
  throw py::value_error("fallback mode must be 'warn', 'error' or 'silent', got '" + text + "'");
}

std::string fallback_mode_name() {
  switch (fallback_mode()) {
    case FallbackMode::Warn: return "warn";
    case FallbackMode::Error: return "error";
    case FallbackMode::Silent: return "silent";
  }
  return "warn";
}

}  // namespace
}  // namespace torchneuron

void register_nki_bindings(py::module_& m);  // nki.cpp
void register_index_error(py::module_& m);   // index_error.cpp
void register_graph_bindings(py::module_& m);  // graph.cpp
void register_metrics_bindings(py::module_& m);  // metrics_bindings.cpp
void register_profiler_bindings(py::module_& m);  // profiler.cpp
void register_memory_history_bindings(py::module_& m);  // memory_history.cpp
void register_distributed_bindings(py::module_& m);  // distributed.cpp

namespace {
std::terminate_handler previous_terminate = nullptr;
void report_terminate() {
  static const char msg[] = "torchneuron: std::terminate was called; native backtrace:\n";
  (void)!write(2, msg, sizeof msg - 1);
  void* frames[64];
  backtrace_symbols_fd(frames, backtrace(frames, 64), 2);
  if (previous_terminate) previous_terminate();
  abort();
}
}  // namespace

PYBIND11_MODULE(_C, m) {
  previous_terminate = std::set_terminate(report_terminate);
  namespace tn = torchneuron;
  m.doc() = "TorchNeuron's bindings to the neuron runtime";
  m.def("_init", [] {
    NRT_CHECK(nrt_init());
    tn::check_fallback_environment();
  });
  m.def("_device_count", [] { return tn::device_count(); });
  m.def("_current_device", [] { return tn::current_device(); });
  m.def("_set_device", [](c10::DeviceIndex d) {
    tn::check_device(d);
    tn::set_current_device(d);
  });
  m.def("_synchronize", [](c10::DeviceIndex d) {
    py::gil_scoped_release no_gil;
    NRT_CHECK(nrt_device_synchronize(d));
  });
  m.def("_clear_errors", [](c10::DeviceIndex d) {
    py::gil_scoped_release no_gil;
    NRT_CHECK(nrt_device_clear_errors(d));
  });
  m.def("_get_device_properties", &tn::device_properties);
  m.def("_mem_get_info", [](c10::DeviceIndex d) {
    size_t free_bytes = 0, total_bytes = 0;
    NRT_CHECK(nrt_mem_get_info(d, &free_bytes, &total_bytes));
    return py::make_tuple(free_bytes, total_bytes);
  });
  m.def("_is_in_bad_fork", [] { return nrt_in_bad_fork() != 0; });
  m.def("_launch_blocking", [] { return nrt_launch_blocking() != 0; });
  m.def("_set_adaptive_eager", [](bool on) { nrt_adaptive_eager_set_enabled(on ? 1 : 0); });
  m.def("_adaptive_eager_enabled", [] { return nrt_adaptive_eager_enabled() != 0; });
  m.def("_adaptive_eager_counters", [] {
    nrt_adaptive_eager_counters c{};
    nrt_adaptive_eager_get_counters(&c);
    return std::map<std::string, uint64_t>{{"adaptive_eager.groups", c.groups},
                                           {"adaptive_eager.fused_ops", c.fused_ops},
                                           {"adaptive_eager.elided_writes", c.elided_writes}};
  });
  m.def("_clear_adaptive_eager_counters", [] { nrt_adaptive_eager_clear_counters(); });
  m.def("_isa_levels", &tn::isa_levels);
  m.def("_default_generator", [](c10::DeviceIndex d) {
    return py::reinterpret_steal<py::object>(
        THPGenerator_initDefaultGenerator(tn::default_generator(d)));
  });
  m.def("_set_fallback_mode",
        [](const std::string& mode) { tn::set_fallback_mode(tn::fallback_mode_named(mode)); });
  m.def("_get_fallback_mode", &tn::fallback_mode_name);
  m.def("_get_fallback_ops", &tn::fallback_ops);
  m.def("_unguarded_registrations", &tn::limits_detail::unguarded_registrations);
  m.def("_get_executed_ops", &tn::executed_ops);
  m.def("_clear_op_tracking", &tn::clear_op_tracking);
  m.def("_stream_priority", [](c10::DeviceIndex d, int64_t id) {
    nrt_stream_t stream = nullptr;
    NRT_CHECK(nrt_stream_from_id(d, id, &stream));
    return nrt_stream_priority(stream);
  });
  m.def("_close_stream_gate", &tn::close_stream_gate);
  m.def("_open_stream_gate", &tn::open_stream_gate);
  m.def("_open_stream_gate_after", &tn::open_stream_gate_after);
  register_nki_bindings(m);
  register_index_error(m);
  register_graph_bindings(m);
  register_metrics_bindings(m);
  register_profiler_bindings(m);
  register_memory_history_bindings(m);
  register_distributed_bindings(m);
}
