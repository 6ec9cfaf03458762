// Bindings of the NeuronCore simulator for torchneuron.nki: program
// creation from the tracer's packed records, runs on host memory (NumPy),
// asynchronous launches on neuron tensors, and the cost model's estimate.
// Programs cross into Python as integer handles owned by a Python object.
#include <torch/extension.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "device_state.h"
#include "neuronrt/host_error.h"
#include "neuronrt/nc_dist.h"
#include "runtime_check.h"

namespace torchneuron {
namespace {

nrt_nc_program_t nc_program_of(uintptr_t handle) {
  TORCH_CHECK(handle != 0, "NKI program handle is null");
  return reinterpret_cast<nrt_nc_program_t>(handle);
}

// Returns (handle, None) or (0, (status name, message, inst, tensor, rule)).
py::tuple program_create(py::bytes insts, py::bytes tensors, c10::DeviceIndex device) {
  std::string inst_bytes = insts, tensor_bytes = tensors;
  TORCH_CHECK(inst_bytes.size() % sizeof(nrt_nc_inst) == 0, "NKI: malformed instruction records");
  TORCH_CHECK(tensor_bytes.size() % sizeof(nrt_nc_tensor) == 0, "NKI: malformed tensor records");
  nrt_nc_geometry geometry;
  nrt_device_properties props;
  NRT_CHECK(nrt_nc_geometry_of_device(device, &geometry));
  NRT_CHECK(nrt_device_get_properties(device, &props));
  nrt_nc_program_t program = nullptr;
  nrt_nc_diagnostic diag;
  nrt_status status;
  {
    py::gil_scoped_release no_gil;
    status = nrt_nc_program_create(
        reinterpret_cast<const nrt_nc_inst*>(inst_bytes.data()),
        static_cast<int32_t>(inst_bytes.size() / sizeof(nrt_nc_inst)),
        reinterpret_cast<const nrt_nc_tensor*>(tensor_bytes.data()),
        static_cast<int32_t>(tensor_bytes.size() / sizeof(nrt_nc_tensor)), &geometry, &props,
        &program, &diag);
  }
  if (status == NRT_SUCCESS)
    return py::make_tuple(reinterpret_cast<uintptr_t>(program), py::none());
  return py::make_tuple(0, py::make_tuple(std::string(nrt_status_string(status)),
                                          std::string(nrt_last_error()), diag.inst, diag.tensor,
                                          std::string(diag.rule)));
}

void program_run_host(uintptr_t handle, const std::vector<uintptr_t>& pointers) {
  std::vector<void*> hbm(pointers.size());
  for (size_t i = 0; i < pointers.size(); i++) hbm[i] = reinterpret_cast<void*>(pointers[i]);
  py::gil_scoped_release no_gil;
  NRT_CHECK(nrt_nc_program_run(nc_program_of(handle), hbm.data()));
}

// The programs of a grid, interleaved at their collective calls.
void programs_run_host(const std::vector<uintptr_t>& handles,
                       const std::vector<std::vector<uintptr_t>>& pointers) {
  TORCH_CHECK(handles.size() == pointers.size(), "NKI: one pointer list per program");
  std::vector<nrt_nc_program_t> programs(handles.size());
  std::vector<std::vector<void*>> hbm(handles.size());
  std::vector<void* const*> lists(handles.size());
  for (size_t k = 0; k < handles.size(); k++) {
    programs[k] = nc_program_of(handles[k]);
    for (uintptr_t ptr : pointers[k]) hbm[k].push_back(reinterpret_cast<void*>(ptr));
    lists[k] = hbm[k].data();
  }
  py::gil_scoped_release no_gil;
  NRT_CHECK(nrt_nc_programs_run(programs.data(), static_cast<int32_t>(programs.size()),
                                lists.data()));
}

std::vector<void*> device_pointers(const std::vector<std::optional<at::Tensor>>& tensors,
                                   c10::DeviceIndex device) {
  std::vector<void*> hbm(tensors.size(), nullptr);
  for (size_t i = 0; i < tensors.size(); i++) {
    if (!tensors[i]) continue;
    const at::Tensor& t = *tensors[i];
    TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1 && t.device().index() == device,
                "NKI kernel: every tensor argument must be on neuron:", device, ", got ", t.device());
    TORCH_CHECK(t.is_contiguous(), "NKI kernel: HBM tensors must be contiguous");
    hbm[i] = t.numel() ? const_cast<void*>(t.const_data_ptr()) : nullptr;
  }
  return hbm;
}

// tensors[i] is the neuron tensor bound to HBM tensor i (None for on-chip).
// name labels an error while the program runs (reported at the next
// synchronisation, as for any kernel).
void program_launch(uintptr_t handle, const std::vector<std::optional<at::Tensor>>& tensors,
                    c10::DeviceIndex device, const std::string& name) {
  std::vector<void*> hbm = device_pointers(tensors, device);
  NRT_CHECK(nrt_nc_program_launch(current_stream(device), nc_program_of(handle), hbm.data(),
                                  name.c_str()));
}

void programs_launch(const std::vector<uintptr_t>& handles,
                     const std::vector<std::vector<std::optional<at::Tensor>>>& tensors,
                     c10::DeviceIndex device, const std::string& name) {
  TORCH_CHECK(handles.size() == tensors.size(), "NKI: one tensor list per program");
  std::vector<nrt_nc_program_t> programs(handles.size());
  std::vector<std::vector<void*>> hbm(handles.size());
  std::vector<void* const*> lists(handles.size());
  for (size_t k = 0; k < handles.size(); k++) {
    programs[k] = nc_program_of(handles[k]);
    hbm[k] = device_pointers(tensors[k], device);
    lists[k] = hbm[k].data();
  }
  NRT_CHECK(nrt_nc_programs_launch(current_stream(device), programs.data(),
                                   static_cast<int32_t>(programs.size()), lists.data(),
                                   name.c_str()));
}

// ---- across the ranks of a process group ---------------------------------
// A distributed run's messages (runtime/include/neuronrt/nc_dist.h,
// nrt_nc_exchange) travel as an all-gather of their lengths, then of the
// messages padded to the longest, on a gloo backend of NKI's own (created
// by torchneuron/nki/ranks.py, with the group's timeout: a rank that never
// arrives is an error after it, not a hang). The received messages stay in
// the all-gather's own tensors until the next round, so nothing is
// allocated once a round has been delivered.
struct LengthExchange {
  c10::intrusive_ptr<c10d::Backend> backend;
  std::vector<at::Tensor> mine;                  // this rank's length
  std::vector<std::vector<at::Tensor>> lengths;  // every rank's
  std::vector<std::vector<at::Tensor>> all;      // the last round's messages
};

nrt_status exchange_messages(void* ctx, const void* send, size_t bytes, void** recv,
                             size_t* recv_bytes) {
  auto* ex = static_cast<LengthExchange*>(ctx);
  try {
    int size = ex->backend->getSize();
    ex->mine[0].fill_(static_cast<int64_t>(bytes));
    ex->backend->allgather(ex->lengths, ex->mine)->wait();
    int64_t longest = 8;
    for (const at::Tensor& t : ex->lengths[0]) longest = std::max(longest, t.item<int64_t>());
    ex->all.assign(1, {});
    std::vector<at::Tensor> message{at::zeros({longest}, at::kByte)};
    if (bytes) std::memcpy(message[0].data_ptr(), send, bytes);
    for (int q = 0; q < size; q++) ex->all[0].push_back(at::empty({longest}, at::kByte));
    ex->backend->allgather(ex->all, message)->wait();
    for (int q = 0; q < size; q++) {
      recv[q] = ex->all[0][q].data_ptr();
      recv_bytes[q] = static_cast<size_t>(ex->lengths[0][q].item<int64_t>());
    }
    return NRT_SUCCESS;
  } catch (const std::exception& e) {
    std::string text = std::string("NKI collective across ranks: the exchange failed: ") + e.what();
    return nrt_host_error(NRT_ERROR_INVALID_ARGUMENT, text.c_str());
  }
}

void release_exchange(void* ctx) { delete static_cast<LengthExchange*>(ctx); }

nrt_nc_exchange make_exchange(const c10::intrusive_ptr<c10d::Backend>& backend) {
  TORCH_CHECK(backend, "NKI: no process group backend");
  auto* ex = new LengthExchange{backend, {at::zeros({1}, at::kLong)}, {{}}, {}};
  for (int q = 0; q < backend->getSize(); q++) ex->lengths[0].push_back(at::empty({1}, at::kLong));
  return nrt_nc_exchange{exchange_messages, release_exchange, ex,
                         static_cast<int32_t>(backend->getRank()),
                         static_cast<int32_t>(backend->getSize())};
}

// A failure here, before the run, still takes part in the run's first round
// (nrt_nc_exchange_fail), so the other ranks stop instead of waiting: at
// once on the host, queued on the stream for neuron tensors.
void fail_round(const c10::intrusive_ptr<c10d::Backend>& backend, int32_t count,
                const std::string& why, nrt_stream_t stream) {
  nrt_nc_exchange ex = make_exchange(backend);
  py::gil_scoped_release no_gil;
  if (stream) {
    nrt_nc_exchange_fail_launch(stream, &ex, count, why.c_str());  // owns ex.ctx
  } else {
    nrt_nc_exchange_fail(&ex, count, why.c_str());
    release_exchange(ex.ctx);
  }
}

template <typename Prepare>
void prepare_or_fail(const c10::intrusive_ptr<c10d::Backend>& backend, size_t count,
                     c10::DeviceIndex device, Prepare prepare) {
  try {
    prepare();
  } catch (const std::exception& e) {
    fail_round(backend, static_cast<int32_t>(std::max<size_t>(count, 1)),
               std::string("its launch failed: ") + e.what(),
               device >= 0 ? current_stream(device) : nullptr);
    throw;
  }
}

void programs_run_host_dist(const std::vector<uintptr_t>& handles,
                            const std::vector<std::vector<uintptr_t>>& pointers,
                            const c10::intrusive_ptr<c10d::Backend>& backend) {
  std::vector<nrt_nc_program_t> programs(handles.size());
  std::vector<std::vector<void*>> hbm(handles.size());
  std::vector<void* const*> lists(handles.size());
  prepare_or_fail(backend, handles.size(), -1, [&] {
    TORCH_CHECK(handles.size() == pointers.size(), "NKI: one pointer list per program");
    for (size_t k = 0; k < handles.size(); k++) {
      programs[k] = nc_program_of(handles[k]);
      for (uintptr_t ptr : pointers[k]) hbm[k].push_back(reinterpret_cast<void*>(ptr));
      lists[k] = hbm[k].data();
    }
  });
  nrt_nc_exchange ex = make_exchange(backend);
  nrt_status status;
  {
    py::gil_scoped_release no_gil;
    status = nrt_nc_programs_run_dist(programs.data(), static_cast<int32_t>(programs.size()),
                                      lists.data(), &ex);
  }
  release_exchange(ex.ctx);
  NRT_CHECK(status);
}

void programs_launch_dist(const std::vector<uintptr_t>& handles,
                          const std::vector<std::vector<std::optional<at::Tensor>>>& tensors,
                          c10::DeviceIndex device, const std::string& name,
                          const c10::intrusive_ptr<c10d::Backend>& backend) {
  std::vector<nrt_nc_program_t> programs(handles.size());
  std::vector<std::vector<void*>> hbm(handles.size());
  std::vector<void* const*> lists(handles.size());
  nrt_stream_t stream = nullptr;
  prepare_or_fail(backend, handles.size(), device, [&] {
    TORCH_CHECK(handles.size() == tensors.size(), "NKI: one tensor list per program");
    for (size_t k = 0; k < handles.size(); k++) {
      programs[k] = nc_program_of(handles[k]);
      hbm[k] = device_pointers(tensors[k], device);
      lists[k] = hbm[k].data();
    }
    stream = current_stream(device);
  });
  nrt_nc_exchange ex = make_exchange(backend);  // owned by the launch from here on
  nrt_status status;
  {
    // A launch that fails takes part in the run's first round at once
    // (runtime/src/nc/program.c): not with the GIL held.
    py::gil_scoped_release no_gil;
    status = nrt_nc_programs_launch_dist(stream, programs.data(),
                                         static_cast<int32_t>(programs.size()), lists.data(),
                                         name.c_str(), &ex);
  }
  NRT_CHECK(status);
}

py::dict program_estimate(uintptr_t handle) {
  nrt_nc_program_t program = nc_program_of(handle);
  size_t n = static_cast<size_t>(nrt_nc_program_num_insts(program));
  nrt_nc_estimate est;
  std::vector<double> start(n), end(n);
  std::vector<int32_t> queue(n);
  NRT_CHECK(nrt_nc_program_estimate(program, &est, start.data(), end.data(), queue.data()));
  py::dict d;
  py::list busy, count;
  for (int e = 0; e < NRT_NC_ENGINE_COUNT; e++) {
    busy.append(est.busy_ns[e]);
    count.append(est.instructions[e]);
  }
  d["total_ns"] = est.total_ns;
  d["busy_ns"] = busy;
  d["instructions"] = count;
  d["dma_bytes"] = est.dma_bytes;
  d["link_bytes"] = est.link_bytes;
  d["link_ns"] = est.link_ns;
  d["start_ns"] = start;
  d["end_ns"] = end;
  d["queue"] = queue;
  return d;
}

py::tuple placement(uintptr_t handle, int32_t tensor) {
  int32_t partition = 0;
  int64_t offset = 0;
  NRT_CHECK(nrt_nc_program_placement(nc_program_of(handle), tensor, &partition, &offset));
  return py::make_tuple(partition, offset);
}

}  // namespace
}  // namespace torchneuron

void register_nki_bindings(py::module_& m);
void register_nki_bindings(py::module_& m) {
  namespace tn = torchneuron;
  m.def("_nki_layout", [] {
    return py::make_tuple(sizeof(nrt_nc_inst), sizeof(nrt_nc_ap), sizeof(nrt_nc_tensor));
  });
  m.def("_nki_program_create", &tn::program_create);
  m.def("_nki_program_destroy",
        [](uintptr_t handle) { nrt_nc_program_destroy(tn::nc_program_of(handle)); });
  m.def("_nki_program_run_host", &tn::program_run_host);
  m.def("_nki_program_launch", &tn::program_launch);
  m.def("_nki_programs_run_host", &tn::programs_run_host);
  m.def("_nki_programs_launch", &tn::programs_launch);
  m.def("_nki_programs_run_host_dist", &tn::programs_run_host_dist);
  m.def("_nki_programs_launch_dist", &tn::programs_launch_dist);
  // One FAILED round for a launch across ranks that failed before its run
  // (device >= 0: queued on that device's current stream).
  m.def("_nki_exchange_fail", [](const c10::intrusive_ptr<c10d::Backend>& backend, int32_t count,
                                 const std::string& why, c10::DeviceIndex device) {
    tn::fail_round(backend, count, why, device >= 0 ? tn::current_stream(device) : nullptr);
  });
  m.def("_nki_program_estimate", &tn::program_estimate);
  m.def("_nki_placement", &tn::placement);
  m.def("_nki_inject_run_failures", &nrt_nc_inject_run_failures);
}
