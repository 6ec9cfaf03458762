// TORCHNEURON_LOG_OPS=1: a line per ATen op that reaches a neuron tensor
// (name, how it runs, the tensors' dtypes and shapes) and per compiled
// program launch; the runtime adds the fused groups its workers run.
#pragma once

#include <c10/core/Device.h>

#include <string>

#include "neuronrt/graph.h"

namespace torchneuron {

// Whether the op log is on (read once, at load).
bool op_log_enabled();

// While set (non-empty), this thread's op lines end with "in compiled graph
// <name>": the compiled runner sets it around a graph's eager nodes.
void set_op_log_graph(std::string name);

// The line for a compiled program launched on (device, stream id).
void log_program_launch(nrt_program_t program, c10::DeviceIndex device, int64_t stream_id);

}  // namespace torchneuron
