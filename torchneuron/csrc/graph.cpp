// Bindings of the graph compiler for torchneuron.compiler: loading and
// compiling a graph IR, the text forms, and the launch of a compiled
// program on the current neuron stream. A program crosses into Python as
// an integer handle owned by a Python object (compiler/program.py).
#include <torch/extension.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "device_state.h"
#include "op_log.h"
#include "runtime_check.h"
#include "neuronrt/graph.h"

namespace torchneuron {
namespace {

nrt_program_t program_of(uintptr_t handle) {
  TORCH_CHECK(handle != 0, "compiled program handle is null");
  return reinterpret_cast<nrt_program_t>(handle);
}

// Takes ownership of a malloc'd string from the runtime.
std::string take_text(char* text) {
  std::string s = text ? text : "";
  std::free(text);
  return s;
}

// Returns (handle, None) or (0, message): a graph the loader rejects is
// the caller's to report (with the FX node it came from, if any).
py::tuple program_compile(py::bytes ir, bool fuse) {
  std::string bytes = ir;
  nrt_program_t program = nullptr;
  nrt_status status;
  std::string message;
  {
    py::gil_scoped_release no_gil;
    nrt_graph_t graph = nullptr;
    status = nrt_graph_load(bytes.data(), bytes.size(), &graph);
    if (status == NRT_SUCCESS) {
      nrt_program_options options{};
      options.fuse = fuse ? 1 : 0;
      status = nrt_program_compile(graph, &options, &program);
      nrt_graph_destroy(graph);
    }
    if (status != NRT_SUCCESS) message = nrt_last_error();
  }
  if (status == NRT_SUCCESS) return py::make_tuple(reinterpret_cast<uintptr_t>(program), py::none());
  return py::make_tuple(0, std::string(nrt_status_string(status)) + ": " + message);
}

std::string graph_text(py::bytes ir) {
  std::string bytes = ir;
  nrt_graph_t graph = nullptr;
  NRT_CHECK(nrt_graph_load(bytes.data(), bytes.size(), &graph));
  char* text = nullptr;
  nrt_status s = nrt_graph_to_text(graph, &text);
  nrt_graph_destroy(graph);
  NRT_CHECK(s);
  return take_text(text);
}

py::dict program_info(uintptr_t handle) {
  nrt_program_info info;
  NRT_CHECK(nrt_program_info_get(program_of(handle), &info));
  py::dict d;
  d["inputs"] = info.num_inputs;
  d["outputs"] = info.num_outputs;
  d["symbols"] = info.num_symbols;
  d["nodes"] = info.num_nodes;
  d["steps"] = info.num_steps;
  d["fused_groups"] = info.num_fused_groups;
  d["fused_nodes"] = info.num_fused_nodes;
  d["elided"] = info.num_elided;
  d["inplace"] = info.num_inplace;
  d["gemm_epilogues"] = info.num_gemm_epilogues;
  d["row_regions"] = info.num_row_regions;
  return d;
}

std::string program_plan_text(uintptr_t handle, const std::optional<std::vector<int64_t>>& symbols) {
  char* text = nullptr;
  NRT_CHECK(nrt_program_plan_text(program_of(handle), symbols ? symbols->data() : nullptr,
                                  symbols ? static_cast<int32_t>(symbols->size()) : 0, &text));
  return take_text(text);
}

// Elements from the tensor's first element to the end of its storage.
int64_t capacity(const at::Tensor& t) {
  int64_t item = static_cast<int64_t>(t.element_size());
  int64_t total = static_cast<int64_t>(t.storage().nbytes()) / item;
  return total - t.storage_offset();
}

// Runs the program once on the current stream of the inputs' device:
// allocates the outputs (flat, of output_dtypes) and the arena from the
// caching allocator, and returns the outputs and the arena's size. The arena returns to the
// allocator at once: the stream-ordered allocator hands it out again only
// to work queued after this launch.
std::pair<std::vector<at::Tensor>, size_t> program_run(uintptr_t handle, const std::vector<int64_t>& symbols,
                                    const std::vector<at::Tensor>& inputs,
                                    const std::vector<c10::ScalarType>& output_dtypes,
                                    c10::DeviceIndex device) {
  nrt_program_t program = program_of(handle);
  std::vector<void*> in(inputs.size());
  std::vector<int64_t> cap(inputs.size());
  for (size_t i = 0; i < inputs.size(); i++) {
    const at::Tensor& t = inputs[i];
    TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1 && t.device().index() == device,
                "compiled graph: input ", i, " is on ", t.device(), ", expected neuron:", device);
    in[i] = const_cast<void*>(t.storage().data());
    in[i] = static_cast<char*>(in[i]) + t.storage_offset() * t.element_size();
    cap[i] = capacity(t);
  }
  std::vector<int64_t> numels(output_dtypes.size());
  size_t arena_bytes = 0;
  NRT_CHECK(nrt_program_prepare(program, symbols.data(), static_cast<int32_t>(symbols.size()),
                                cap.data(), &arena_bytes, numels.data()));
  auto options = at::TensorOptions().device(c10::Device(c10::DeviceType::PrivateUse1, device));
  std::vector<at::Tensor> outputs;
  std::vector<void*> out(output_dtypes.size());
  outputs.reserve(output_dtypes.size());
  for (size_t j = 0; j < output_dtypes.size(); j++) {
    outputs.push_back(at::empty({numels[j]}, options.dtype(output_dtypes[j])));
    out[j] = outputs[j].data_ptr();
  }
  at::Tensor arena;
  if (arena_bytes) arena = at::empty({static_cast<int64_t>(arena_bytes)}, options.dtype(at::kByte));
  nrt_stream_t stream = current_stream(device);
  NRT_CHECK(nrt_program_launch(stream, program, symbols.data(),
                               static_cast<int32_t>(symbols.size()), in.data(), cap.data(),
                               out.data(), arena_bytes ? arena.data_ptr() : nullptr));
  if (op_log_enabled()) log_program_launch(program, device, nrt_stream_id(stream));
  return {std::move(outputs), arena_bytes};
}

}  // namespace
}  // namespace torchneuron

void register_graph_bindings(py::module_& m);
void register_graph_bindings(py::module_& m) {
  using namespace torchneuron;
  m.def("_graph_program_compile", &program_compile);
  // Waits for the background compiles of generated kernels (timeout in
  // seconds, negative: no limit); the compiles still pending.
  m.def("_graph_wait_for_kernels", [](double timeout) {
    py::gil_scoped_release no_gil;
    return nrt_program_wait_for_kernels(timeout);
  });
  m.def("_graph_text", &graph_text);
  m.def("_graph_program_info", &program_info);
  m.def("_graph_program_plan_text", &program_plan_text, py::arg("handle"), py::arg("symbols") = py::none());
  m.def("_graph_program_run", &program_run);
  m.def("_op_log_enabled", &op_log_enabled);
  m.def("_op_log_set_graph", &set_op_log_graph);
  m.def("_graph_counters", [] {
    nrt_program_counters c{};
    nrt_program_get_counters(&c);
    return std::map<std::string, uint64_t>{{"compile.gemm_epilogues_on_blocks", c.gemm_epilogues_on_blocks},
                                           {"compile.gemm_epilogues_after", c.gemm_epilogues_after},
                                           {"compile.row_regions_chunked", c.row_regions_chunked},
                                           {"compile.row_regions_alone", c.row_regions_alone}};
  });
  m.def("_clear_graph_counters", [] { nrt_program_clear_counters(); });
  m.def("_op_codes", [] {
    py::dict d;
    for (int code = 0; code < NRT_OP_COUNT; code++)
      d[py::str(nrt_op_name(static_cast<nrt_op_code>(code)))] = code;
    return d;
  });
  m.def("_graph_program_destroy", [](uintptr_t handle) {
    if (handle) nrt_program_destroy(reinterpret_cast<nrt_program_t>(handle));
  });
}
