// The memory history behind torch.neuron.memory._record_memory_history and
// _snapshot. c10's DeviceAllocator (torch 2.13) has no history or snapshot
// hook for a PrivateUse1 allocator (those live in the CUDA allocator only),
// so the shim builds them over the runtime's observer and block visitor
// and emits the dictionaries torch.cuda.memory._snapshot() returns, which
// torch.cuda._memory_viz and the memory_viz page read.
//
// Stacks are c10's CapturedTraceback, gathered by the allocating thread
// before it enters the allocator: never under the allocator's lock, since
// Python frames need the GIL (ATen calls from Python run with it
// released; the gather takes it back). Python frames are asked for only
// on threads Python knows (a thread state exists): a stream worker has
// none to give, and taking the GIL there could deadlock with a thread
// that holds it while it waits for that worker.
#include "memory_history.h"

#include <Python.h>
#include <torch/csrc/profiler/combined_traceback.h>
#include <torch/extension.h>

#include <chrono>
#include <deque>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "device_state.h"
#include "runtime_check.h"
#include "neuronrt/cache_inspect.h"

// From torch/csrc/profiler/python/combined_traceback.h (libtorch_python),
// whose header needs nlohmann/json, which torch's wheel does not ship.
namespace torch {
std::vector<pybind11::object> py_symbolize(std::vector<CapturedTraceback*>& to_symbolize);
void installCapturedTracebackPython();
}  // namespace torch

namespace torchneuron {
namespace {

using Context = std::shared_ptr<c10::GatheredContext>;

// How much to keep, as torch.cuda.memory._record_memory_history's arguments.
enum Keep { KEEP_NOTHING = 0, KEEP_STATE = 1, KEEP_ALL = 2 };  // enabled=
enum Stacks { STACKS_NEVER = 0, STACKS_STATE = 1, STACKS_ALLOC = 2, STACKS_ALL = 3 };  // context=

struct Entry {
  nrt_cache_event event;
  int64_t time_us;
  Context context;
};

struct History {
  std::mutex mu;
  int keep = KEEP_NOTHING;
  int stacks = STACKS_NEVER;
  bool cpp = false;
  size_t max_entries = 0;
  uint32_t skip = 0;  // bit per nrt_cache_event_kind (and kSnapshotBit)
  std::deque<Entry> trace;
  // Stacks of live blocks and segments, by (device, address).
  std::map<std::pair<int32_t, uint64_t>, Context> blocks, segments;
};

// The trace's "snapshot" entries (a call to _snapshot), after the runtime's kinds.
constexpr int32_t kSnapshotKind = NRT_CACHE_EVENT_OOM + 1;
constexpr uint32_t kSnapshotBit = 1u << kSnapshotKind;

std::atomic<bool> recording{false};
thread_local Context current_context;

History& history() {
  static History* h = new History();  // outlives static destructors: deleters may run late
  return *h;
}

int64_t now_us() {
  using namespace std::chrono;
  return duration_cast<microseconds>(system_clock::now().time_since_epoch()).count();
}

void append(History& h, const nrt_cache_event& e, Context context) {
  if (h.keep != KEEP_ALL || (h.skip & (1u << e.kind))) return;
  h.trace.push_back(Entry{e, now_us(), std::move(context)});
  while (h.trace.size() > h.max_entries) h.trace.pop_front();
}

// The runtime's observer: runs under the allocator's lock, so it only
// files what it is told (no allocator calls, no Python).
void observe(void*, const nrt_cache_event* e) {
  History& h = history();
  std::lock_guard<std::mutex> lock(h.mu);
  if (h.keep == KEEP_NOTHING) return;
  auto key = std::make_pair(e->device, e->addr);
  const Context& now = current_context;
  switch (e->kind) {
    case NRT_CACHE_EVENT_ALLOC:
      if (h.stacks >= STACKS_STATE) h.blocks[key] = now;
      append(h, *e, h.stacks >= STACKS_ALLOC ? now : nullptr);
      break;
    case NRT_CACHE_EVENT_SEGMENT_ALLOC:
      if (h.stacks >= STACKS_STATE) h.segments[key] = now;
      append(h, *e, h.stacks >= STACKS_ALLOC ? now : nullptr);
      break;
    case NRT_CACHE_EVENT_FREE_COMPLETED:
      h.blocks.erase(key);
      append(h, *e, h.stacks >= STACKS_ALL ? now : nullptr);
      break;
    case NRT_CACHE_EVENT_SEGMENT_FREE:
      h.segments.erase(key);
      append(h, *e, h.stacks >= STACKS_ALL ? now : nullptr);
      break;
    default:  // free requested, out of memory
      append(h, *e, h.stacks >= STACKS_ALL ? now : nullptr);
      break;
  }
}

Context gather_context() {
  History& h = history();
  bool cpp;
  {
    std::lock_guard<std::mutex> lock(h.mu);
    if (h.stacks == STACKS_NEVER) return nullptr;
    cpp = h.cpp;
  }
  bool python = Py_IsInitialized() && PyGILState_GetThisThreadState() != nullptr;
  if (!python && !cpp) return nullptr;
  return torch::CapturedTraceback::gather(python, /*script=*/false, cpp);
}

void record_history(int keep, int stacks, bool cpp, size_t max_entries, bool clear,
                    uint32_t skip) {
  TORCH_CHECK(keep >= KEEP_NOTHING && keep <= KEEP_ALL, "bad history mode ", keep);
  TORCH_CHECK(stacks >= STACKS_NEVER && stacks <= STACKS_ALL, "bad context mode ", stacks);
  if (stacks != STACKS_NEVER) torch::installCapturedTracebackPython();
  History& h = history();
  std::deque<Entry> dropped;  // stacks are released outside the lock
  std::map<std::pair<int32_t, uint64_t>, Context> dropped_blocks, dropped_segments;
  {
    std::lock_guard<std::mutex> lock(h.mu);
    h.keep = keep;
    h.stacks = keep == KEEP_NOTHING ? STACKS_NEVER : stacks;
    h.cpp = cpp;
    h.max_entries = max_entries;
    h.skip = skip;
    if (clear || keep != KEEP_ALL) dropped.swap(h.trace);
    while (h.trace.size() > h.max_entries) h.trace.pop_front();
    if (keep == KEEP_NOTHING) {
      dropped_blocks.swap(h.blocks);
      dropped_segments.swap(h.segments);
    }
  }
  recording.store(keep != KEEP_NOTHING, std::memory_order_relaxed);
  NRT_CHECK(nrt_cache_set_observer(keep != KEEP_NOTHING ? &observe : nullptr, nullptr));
}

// ---- the snapshot ---------------------------------------------------------

void collect_block(void* ctx, const nrt_cache_block_info* info) {
  static_cast<std::vector<nrt_cache_block_info>*>(ctx)->push_back(*info);
}

const char* action_name(int kind) {
  switch (kind) {
    case NRT_CACHE_EVENT_ALLOC: return "alloc";
    case NRT_CACHE_EVENT_FREE_REQUESTED: return "free_requested";
    case NRT_CACHE_EVENT_FREE_COMPLETED: return "free_completed";
    case NRT_CACHE_EVENT_SEGMENT_ALLOC: return "segment_alloc";
    case NRT_CACHE_EVENT_SEGMENT_FREE: return "segment_free";
    case NRT_CACHE_EVENT_OOM: return "oom";
    default: return "snapshot";
  }
}

const char* state_name(int state) {
  switch (state) {
    case NRT_CACHE_BLOCK_ALLOCATED: return "active_allocated";
    case NRT_CACHE_BLOCK_PENDING: return "active_pending_free";
    default: return "inactive";
  }
}

// Symbolizes many stacks at once (frames shared between them are resolved
// once), handing out each one's frame list by the order they were added.
class Frames {
 public:
  size_t add(const Context& context) {
    auto* tb = dynamic_cast<torch::CapturedTraceback*>(context.get());
    if (tb == nullptr) return SIZE_MAX;
    keep_.push_back(context);
    tracebacks_.push_back(tb);
    return tracebacks_.size() - 1;
  }
  void symbolize() { lists_ = torch::py_symbolize(tracebacks_); }
  py::object get(size_t i) const { return i == SIZE_MAX ? py::list() : lists_[i]; }

 private:
  std::vector<Context> keep_;
  std::vector<torch::CapturedTraceback*> tracebacks_;
  std::vector<py::object> lists_;
};

py::dict snapshot() {
  int32_t count = static_cast<int32_t>(device_count());
  History& h = history();
  std::vector<nrt_cache_block_info> blocks;
  for (int32_t d = 0; d < count; d++) NRT_CHECK(nrt_cache_visit_blocks(d, &collect_block, &blocks));

  // Copy what the snapshot needs under the lock; symbolize after it.
  std::vector<Entry> trace;
  std::vector<Context> block_context(blocks.size()), segment_context(blocks.size());
  {
    std::lock_guard<std::mutex> lock(h.mu);
    if (h.keep == KEEP_ALL && !(h.skip & kSnapshotBit)) {
      h.trace.push_back(Entry{nrt_cache_event{kSnapshotKind, 0, 0, 0, 0, 0}, now_us(), nullptr});
      while (h.trace.size() > h.max_entries) h.trace.pop_front();
    }
    trace.assign(h.trace.begin(), h.trace.end());
    for (size_t i = 0; i < blocks.size(); i++) {
      auto b = h.blocks.find({blocks[i].device, blocks[i].addr});
      if (b != h.blocks.end() && blocks[i].state != NRT_CACHE_BLOCK_FREE) block_context[i] = b->second;
      auto s = h.segments.find({blocks[i].device, blocks[i].segment_addr});
      if (s != h.segments.end()) segment_context[i] = s->second;
    }
  }
  Frames frames;
  std::vector<size_t> block_frames(blocks.size()), segment_frames(blocks.size()), trace_frames;
  for (size_t i = 0; i < blocks.size(); i++) {
    block_frames[i] = frames.add(block_context[i]);
    segment_frames[i] = frames.add(segment_context[i]);
  }
  for (const Entry& e : trace) trace_frames.push_back(frames.add(e.context));
  frames.symbolize();

  py::list segments;
  for (size_t i = 0; i < blocks.size();) {
    const nrt_cache_block_info& head = blocks[i];
    py::list seg_blocks;
    uint64_t allocated = 0, active = 0, requested = 0;
    size_t j = i;
    for (; j < blocks.size() && blocks[j].device == head.device &&
           blocks[j].segment_addr == head.segment_addr;
         j++) {
      const nrt_cache_block_info& b = blocks[j];
      py::dict block;
      block["address"] = b.addr;
      block["size"] = b.size;
      block["requested_size"] = b.requested;
      block["state"] = state_name(b.state);
      block["frames"] = frames.get(block_frames[j]);
      seg_blocks.append(block);
      if (b.state == NRT_CACHE_BLOCK_ALLOCATED) allocated += b.size;
      if (b.state != NRT_CACHE_BLOCK_FREE) active += b.size;
      requested += b.requested;
    }
    py::dict seg;
    seg["device"] = head.device;
    seg["address"] = head.segment_addr;
    seg["total_size"] = head.segment_size;
    seg["allocated_size"] = allocated;
    seg["active_size"] = active;
    seg["requested_size"] = requested;
    seg["stream"] = head.stream_id;
    seg["segment_type"] = head.is_large ? "large" : "small";
    seg["segment_pool_id"] = py::make_tuple(0, 0);
    seg["is_expandable"] = false;
    seg["frames"] = frames.get(segment_frames[i]);
    seg["blocks"] = seg_blocks;
    segments.append(seg);
    i = j;
  }

  py::list device_traces;
  for (int32_t d = 0; d < count; d++) device_traces.append(py::list());
  for (size_t i = 0; i < trace.size(); i++) {
    const nrt_cache_event& e = trace[i].event;
    py::dict entry;
    entry["action"] = action_name(e.kind);
    entry["addr"] = e.addr;
    entry["size"] = e.size;
    entry["stream"] = e.stream_id;
    entry["time_us"] = trace[i].time_us;
    entry["frames"] = frames.get(trace_frames[i]);
    entry["compile_context"] = "";
    entry["user_metadata"] = "";
    if (e.kind == NRT_CACHE_EVENT_OOM) entry["device_free"] = e.device_free;
    if (e.kind == kSnapshotKind) {  // a snapshot belongs to every device's timeline
      for (int32_t d = 0; d < count; d++) device_traces[d].cast<py::list>().append(entry);
    } else if (e.device >= 0 && e.device < count) {
      device_traces[e.device].cast<py::list>().append(entry);
    }
  }

  py::dict settings;
  settings["PYTORCH_NEURON_ALLOC_CONF"] = "";
  settings["max_split_size"] = -1;
  settings["garbage_collection_threshold"] = 0.0;
  settings["expandable_segments"] = false;
  settings["pinned_num_register_threads"] = 1;
  settings["release_lock_on_malloc"] = false;
  settings["pinned_use_host_register"] = false;
  settings["roundup_power2_divisions"] = py::dict();
  py::dict out;
  out["segments"] = segments;
  out["device_traces"] = device_traces;
  out["allocator_settings"] = settings;
  out["external_annotations"] = py::list();
  return out;
}

}  // namespace

bool memory_history_on() { return recording.load(std::memory_order_relaxed); }

MemoryEventContext::MemoryEventContext() {
  if (C10_LIKELY(!memory_history_on())) return;
  outer_ = std::move(current_context);  // an allocation inside a free keeps its own stack
  current_context = gather_context();
  set_ = true;
}

MemoryEventContext::~MemoryEventContext() {
  if (set_) current_context = std::move(outer_);
}

}  // namespace torchneuron

void register_memory_history_bindings(py::module_& m);
void register_memory_history_bindings(py::module_& m) {
  using namespace torchneuron;
  m.def("_memory_record_history", &record_history);
  m.def("_memory_snapshot", &snapshot);
}
