#include "op_tracking.h"

#include <deque>
#include <mutex>

#include "neuronrt/top.h"

namespace torchneuron {
namespace {

struct Registry {
  std::mutex mu;
  std::deque<std::pair<std::string, std::atomic<int64_t>>> native;  // stable addresses
  std::map<std::string, int64_t> fallback;
  int64_t fallback_total = 0;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: counters outlive statics
  return *r;
}

}  // namespace

std::atomic<int64_t>* native_op_counter(const char* name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (auto& entry : r.native)
    if (entry.first == name) return &entry.second;
  r.native.emplace_back(std::piecewise_construct, std::forward_as_tuple(name),
                        std::forward_as_tuple(0));
  return &r.native.back().second;
}

void count_fallback_op(const std::string& name, int device) {
  nrt_top_note_fallback(device);  // neuron-top's count, never reset by clear_op_totals
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.fallback[name]++;
  r.fallback_total++;
}

std::atomic<int64_t> native_op_total{0};

int64_t fallback_op_total() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.fallback_total;
}

void clear_op_totals() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.fallback_total = 0;
  native_op_total.store(0, std::memory_order_relaxed);
}

std::map<std::string, int64_t> executed_ops() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::map<std::string, int64_t> out = r.fallback;
  for (auto& entry : r.native) {
    int64_t n = entry.second.load(std::memory_order_relaxed);
    if (n > 0) out[entry.first] += n;
  }
  return out;
}

std::map<std::string, int64_t> fallback_ops() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.fallback;
}

void clear_op_tracking() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.fallback.clear();
  for (auto& entry : r.native) entry.second.store(0, std::memory_order_relaxed);
}

}  // namespace torchneuron
