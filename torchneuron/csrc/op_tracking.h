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

// The count of "aten::<overload>(complex)", for a wrapper whose native
// complex path may or may not count that name itself: mark() before the
// path runs, served() after it succeeded counts the call once either way.
// The counter is created on first use, so overloads whose complex path
// never runs add no name to the registry.
class ComplexPathCount {
 public:
  explicit ComplexPathCount(std::string overload) : name_("aten::" + overload + "(complex)") {}
  int64_t mark() const {
    std::atomic<int64_t>* c = counter_.load(std::memory_order_acquire);
    return c ? c->load(std::memory_order_relaxed) : 0;
  }
  void served(int64_t mark) const {
    std::atomic<int64_t>* c = counter_.load(std::memory_order_acquire);
    if (!c) {
      c = native_op_counter(name_.c_str());
      counter_.store(c, std::memory_order_release);
    }
    if (c->load(std::memory_order_relaxed) != mark) return;  // the path counted itself
    c->fetch_add(1, std::memory_order_relaxed);
    native_op_total.fetch_add(1, std::memory_order_relaxed);
  }

 private:
  std::string name_;
  mutable std::atomic<std::atomic<int64_t>*> counter_{nullptr};
};

}  // namespace torchneuron

#define NEURON_TRACK_OP(name)                                                      \
  do {                                                                             \
    static std::atomic<int64_t>* neuron_counter_ = ::torchneuron::native_op_counter(name); \
    neuron_counter_->fetch_add(1, std::memory_order_relaxed);                      \
    ::torchneuron::native_op_total.fetch_add(1, std::memory_order_relaxed);        \
  } while (0)
