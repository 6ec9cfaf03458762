// Which ATen ops ran on neuron, natively or through the CPU fallback.
//
// Native kernels count themselves with NEURON_TRACK_OP("aten::name.overload"):
// two relaxed atomic adds per call (its own count and the total). The
// fallback counts by operator name.
// Two running totals of calls (native, fallback) feed torchneuron.metrics;
// clear_op_tracking leaves them alone.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>

namespace torchneuron {

// Returns the counter of a native op (created once per call site).
std::atomic<int64_t>* native_op_counter(const char* name);
// Counts a fallback of the op on device's tensors (-1: none known).
void count_fallback_op(const std::string& name, int device);

// Calls served natively / by the fallback since load or the last
// clear_op_totals (torchneuron.metrics.clear_all).
extern std::atomic<int64_t> native_op_total;
int64_t fallback_op_total();
void clear_op_totals();

std::map<std::string, int64_t> executed_ops();
std::map<std::string, int64_t> fallback_ops();
void clear_op_tracking();

}  // namespace torchneuron

#define NEURON_TRACK_OP(name)                                                      \
  do {                                                                             \
    static std::atomic<int64_t>* neuron_counter_ = ::torchneuron::native_op_counter(name); \
    neuron_counter_->fetch_add(1, std::memory_order_relaxed);                      \
    ::torchneuron::native_op_total.fetch_add(1, std::memory_order_relaxed);        \
  } while (0)
