// The c10d backend "neuron" (torchneuron/distributed): collectives on neuron
// tensors, run like NCCL's on a stream of the group's own. Each collective
// is a host task on the group's stream of the tensors' device, which first
// waits (an event) for the caller's current stream: it sees the work queued
// before it there, runs while the caller's streams go on, and the calling
// thread returns at once. The staging copies before and after it are queued
// on the group's stream too, and the caller's tensors are marked as used
// there (record_stream), so that memory the caller frees meanwhile is not
// handed out again before the collective is done. A Work's wait() (and so
// async_op=False) makes the caller's current stream wait for the
// collective's event; its future is a device future whose wait() does the
// same (DDP's reducer waits on it). barrier's wait() blocks the host, as a
// barrier must. The bytes travel through an inner gloo group (TCP, or
// whatever gloo's device is); device memory is host memory in the
// simulator, so gloo reads and writes it in place through CPU views (a
// non-contiguous tensor through a dense copy). CPU tensors go straight to a
// second inner gloo group, so that the two kinds never interleave on one
// connection.
//
// Reductions (all_reduce, reduce, reduce_scatter) run as rings over a third
// gloo group's send and recv, each received chunk reduced by the runtime's
// kernels (distributed_ring.cpp); non-contiguous tensors are staged through
// dense device copies. Sends and receives carry checked headers
// (distributed_p2p.cpp); a group's tasks reach gloo in the order the host
// issued them (distributed_order.h). When every rank is on this host,
// all_reduce, reduce, reduce_scatter, all_gather, broadcast, all_to_all,
// gather, scatter and the sends and receives go through a shared segment
// instead (distributed_shm.cpp, distributed_shm_p2p.cpp); when the group
// spans hosts with several ranks on a host, all_reduce goes through a
// segment per host and gloo between the hosts' leaders
// (distributed_hier.cpp). A failure is NRT_ERROR_DISTRIBUTED on the group's
// stream, which the caller's stream inherits when it waits for the
// collective; raised as DistBackendError.
#include <torch/extension.h>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <numeric>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "neuron_device.h"
#include "allocator.h"
#include "device_state.h"
#include "distributed_estimate.h"
#include "distributed_hier.h"
#include "distributed_order.h"
#include "distributed_p2p.h"
#include "distributed_ring.h"
#include "distributed_shm.h"
#include "distributed_shm_p2p.h"
#include "neuronrt/host_error.h"
#include "runtime_check.h"

namespace torchneuron {
namespace {

using c10d::OpType;
using c10d::Work;


// What gloo sees of a tensor: the view itself when dense, else a dense copy
// (read in first when gloo reads it, written back after when gloo writes it).
struct Staged {
  at::Tensor view, dense;
  bool copy = false, out = false;
};

Staged stage(const at::Tensor& t, bool in, bool out) {
  Staged s;
  s.view = cpu_view(t);
  s.out = out;
  if (s.view.is_contiguous() && t.numel() > 0) {
    s.dense = s.view;
  } else {
    s.copy = true;
    s.dense = in ? s.view.contiguous().clone() : at::empty(s.view.sizes(), s.view.options());
  }
  return s;
}

void unstage(Staged& s) {
  if (s.copy && s.out && s.view.numel() > 0) s.view.copy_(s.dense);
}

// Lists of tensors staged alike (all_gather's and gather's outputs,
// scatter's inputs): what gloo sees, and the staging to undo after.
struct StagedLists {
  std::vector<std::vector<Staged>> staged;
  std::vector<std::vector<at::Tensor>> dense;
};

StagedLists stage_lists(const std::vector<std::vector<at::Tensor>>& lists, bool in, bool out) {
  StagedLists s;
  for (const auto& list : lists) {
    s.staged.emplace_back();
    s.dense.emplace_back();
    for (const auto& t : list) {
      s.staged.back().push_back(stage(t, in, out));
      s.dense.back().push_back(s.staged.back().back().dense);
    }
  }
  return s;
}

void unstage_lists(StagedLists& s) {
  for (auto& list : s.staged)
    for (auto& x : list) unstage(x);
}

// Dense tensors' bytes, for gloo's collectives that only move them (gloo
// knows fewer dtypes than we do).
std::vector<at::Tensor> bytes_of(const std::vector<at::Tensor>& dense) {
  std::vector<at::Tensor> b;
  for (const auto& t : dense) b.push_back(t.reshape({-1}).view(at::kByte));
  return b;
}

std::vector<std::vector<at::Tensor>> bytes_of_lists(const std::vector<std::vector<at::Tensor>>& dense) {
  std::vector<std::vector<at::Tensor>> b;
  for (const auto& list : dense) b.push_back(bytes_of(list));
  return b;
}

std::vector<at::Tensor> flatten(const std::vector<std::vector<at::Tensor>>& lists) {
  std::vector<at::Tensor> flat;
  for (const auto& list : lists) flat.insert(flat.end(), list.begin(), list.end());
  return flat;
}

// The state a collective's Work and its host task share.
struct Shared {
  nrt_event_t done = nullptr; // recorded after the host task
  std::string error;          // the task's failure, if any
  ~Shared() {
    if (done) nrt_event_destroy(done);
  }
};

class NeuronWork : public Work {
 public:
  NeuronWork(int rank, OpType type, std::shared_ptr<Shared> shared, std::vector<at::Tensor> outputs,
             bool blocking, c10::DeviceIndex device)
      : Work(rank, type), shared_(std::move(shared)), outputs_(std::move(outputs)), blocking_(blocking),
        device_(device) {
    // A future of the device's kind, as NCCL's is a CUDA future: it is
    // complete at once, and wait()ing for it (DDP's reducer does) makes the
    // waiter's current stream wait for events recorded on the group's stream
    // after the collective (complete()).
    std::vector<c10::Device> devices{c10::Device(c10::DeviceType::PrivateUse1, device)};
    for (const auto& t : outputs_)
      if (defined_on_neuron(t) && std::find(devices.begin(), devices.end(), t.device()) == devices.end())
        devices.push_back(t.device());
    future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()), devices);
  }

  // Called while the group's stream is the device's current one, after the
  // collective and its copies back were queued there.
  void complete() {
    if (!future_->completed()) future_->markCompleted(c10::IValue(outputs_));
  }

  bool isCompleted() override { return nrt_event_query(shared_->done) != NRT_ERROR_NOT_READY; }
  bool isSuccess() const override { return shared_->error.empty(); }

  // A failure is the stream's error, raised by the next synchronising call
  // (here too for a blocking collective), whenever the task happened to run.
  // Otherwise the caller's current stream waits for the collective's event:
  // the host does not block.
  bool wait(std::chrono::milliseconds /*timeout*/) override {
    if (blocking_) {
      NRT_CHECK(nrt_event_synchronize(shared_->done));
    } else {
      NRT_CHECK(nrt_stream_wait_event(current_stream(device_), shared_->done));
    }
    return true;
  }

  void synchronize() override { wait(kNoTimeout); }
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  nrt_event_t done() const { return shared_->done; }

 private:
  std::shared_ptr<Shared> shared_;
  std::vector<at::Tensor> outputs_;
  bool blocking_;
  c10::DeviceIndex device_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

using NeuronWorkPtr = c10::intrusive_ptr<NeuronWork>;

// A collective's host task: the body (staging and the gloo call), the
// tensors it must keep alive until it has run, where its error goes, and
// its turn among the group's tasks.
struct Task {
  std::function<void()> body;
  std::vector<at::Tensor> keep;
  std::shared_ptr<Shared> shared;
  std::string name;
  std::shared_ptr<TaskOrder> order;
  uint64_t ticket = 0;
  bool ran = false;
  std::optional<nrt_roofline> estimate = std::nullopt;  // for the profiler, when it was on at the launch
};

nrt_status run_task(void* arg) {
  auto* task = static_cast<Task*>(arg);
  std::string why;
  task->order->await(task->ticket);
  task->ran = true;
  if (task->estimate) nrt_profile_add_task_estimate(&*task->estimate);
  try {
    task->body();
    task->order->finish(task->ticket);
    return NRT_SUCCESS;
  } catch (const c10::Error& e) {
    why = e.what_without_backtrace();
  } catch (const std::exception& e) {
    why = e.what();
  }
  task->order->finish(task->ticket);
  // The stream reports "<task name>: <why>"; a Work's wait() says the same.
  task->shared->error = task->name + ": " + why;
  return nrt_host_error(NRT_ERROR_DISTRIBUTED, why.c_str());
}

// A task skipped (its stream had failed) still gives up its turn in order.
void release_task(void* arg) {
  auto* task = static_cast<Task*>(arg);
  if (!task->ran) {
    task->order->await(task->ticket);
    task->order->finish(task->ticket);
  }
  delete task;
}

// Sends and receives (distributed_p2p.cpp) on dense CPU views of their
// tensors, the received ones written back after when staged.
void run_p2p_staged(c10d::Backend& g, const std::vector<P2POp>& ops) {
  std::vector<Staged> staged;
  std::vector<P2POp> dense;
  for (const auto& op : ops) {
    staged.push_back(stage(op.tensor, op.send, !op.send));
    dense.push_back(P2POp{op.send, staged.back().dense, op.peer, op.tag});
  }
  run_p2p(g, dense);
  for (auto& s : staged) unstage(s);
}

// The Works of a batch of CPU sends and receives (gloo's), as one.
class WorkList : public Work {
 public:
  WorkList(int rank, std::vector<c10::intrusive_ptr<Work>> works)
      : Work(rank, OpType::COALESCED), works_(std::move(works)) {}
  bool isCompleted() override {
    for (auto& w : works_)
      if (!w->isCompleted()) return false;
    return true;
  }
  bool wait(std::chrono::milliseconds timeout) override {
    for (auto& w : works_) w->wait(timeout);
    return true;
  }

 private:
  std::vector<c10::intrusive_ptr<Work>> works_;
};

class NeuronBackend : public c10d::Backend {
 public:
  NeuronBackend(c10::intrusive_ptr<c10d::Backend> device_gloo, c10::intrusive_ptr<c10d::Backend> ring_gloo,
                c10::intrusive_ptr<c10d::Backend> cpu_gloo, int rank, int size, std::shared_ptr<ShmCollectives> shm,
                int hosts, std::shared_ptr<Hierarchy> hier)
      : Backend(rank, size),
        gloo_(std::move(device_gloo)),
        ring_(std::move(ring_gloo)),
        cpu_(std::move(cpu_gloo)),
        shm_(std::move(shm)),
        hosts_(hosts),
        hier_(std::move(hier)) {
    // TORCHNEURON_DIST_OWN_STREAM=0: the collectives run on the caller's
    // current stream instead (as before the group had streams of its own;
    // for comparisons).
    const char* own = std::getenv("TORCHNEURON_DIST_OWN_STREAM");
    TORCH_CHECK(!own || std::string(own) == "0" || std::string(own) == "1", "TORCHNEURON_DIST_OWN_STREAM=", own,
                " must be 0 or 1");
    own_stream_ = !own || std::string(own) == "1";
  }

  // The group's streams finish their queued work first.
  ~NeuronBackend() override {
    for (const auto& ds : streams_) (void)nrt_stream_destroy(ds.second);
  }

  const std::string getBackendName() const override { return "neuron"; }

  c10::intrusive_ptr<Work> broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) override {
    if (all_cpu(tensors)) return cpu_->broadcast(tensors, opts);
    Issue issue(*this, device_of(tensors), tensors);
    if (shm_) {
      auto dense = dense_copies(tensors);
      int root = static_cast<int>(opts.rootRank);
      auto work = enqueue("broadcast", OpType::BROADCAST, concat(tensors, dense), tensors,
                          [shm = shm_, dense, root]() {
                            shm->agree("broadcast", ShmCollectives::kBroadcast, dense, -1, root);
                            for (const auto& t : dense) shm->broadcast(t, root);
                          });
      copy_back(tensors, dense);
      return issue.finish(work);
    }
    auto o = opts;
    return issue.finish(enqueue("broadcast", OpType::BROADCAST, tensors, tensors, [g = gloo_, tensors, o]() mutable {
      agree(*g, "broadcast", tensors);
      auto s = stage_all(tensors, true, true);
      auto dense = denses(s);
      g->broadcast(dense, o)->wait();
      unstage_all(s);
    }));
  }

  c10::intrusive_ptr<Work> allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) override {
    if (all_cpu(tensors)) return cpu_->allreduce(tensors, opts);
    Issue issue(*this, device_of(tensors), tensors);
    return issue.finish(reduce_all("all_reduce", OpType::ALLREDUCE, tensors, opts.reduceOp, -1));
  }

  c10::intrusive_ptr<Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override {
    if (all_cpu(tensors)) return cpu_->reduce(tensors, opts);
    Issue issue(*this, device_of(tensors), tensors);
    return issue.finish(reduce_all("reduce", OpType::REDUCE, tensors, opts.reduceOp, static_cast<int>(opts.rootRank)));
  }

  c10::intrusive_ptr<Work> allgather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                     const c10d::AllgatherOptions& opts) override {
    if (all_cpu(inputs)) return cpu_->allgather(outputs, inputs, opts);
    std::vector<at::Tensor> flat = flatten(outputs);
    Issue issue(*this, device_of(inputs), concat(inputs, flat));
    if (shm_ && inputs.size() == 1 && outputs.size() == 1)
      return issue.finish(gather_through_shm("all_gather", OpType::ALLGATHER, outputs[0], inputs[0], flat));
    auto o = opts;
    return issue.finish(enqueue("all_gather", OpType::ALLGATHER, concat(inputs, flat), flat,
                   [g = gloo_, outputs, inputs, o]() mutable {
                     agree(*g, "all_gather", inputs);
                     auto in = denses(stage_all(inputs, true, false));
                     auto out = stage_lists(outputs, false, true);
                     g->allgather(out.dense, in, o)->wait();
                     unstage_lists(out);
                   }));
  }

  c10::intrusive_ptr<Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                           const c10d::AllgatherOptions& opts) override {
    if (!defined_on_neuron(input)) return cpu_->_allgather_base(output, input, opts);
    Issue issue(*this, input.device().index(), {input, output});
    if (shm_) {
      TORCH_CHECK(output.numel() == input.numel() * getSize(), "neuron backend: all_gather_into_tensor: the output has ",
                  output.numel(), " elements, not the input's ", input.numel(), " times the group's ", getSize());
      at::Tensor dense = output.is_contiguous() ? output : at::empty_like(output, at::MemoryFormat::Contiguous);
      std::vector<at::Tensor> outs;
      for (int r = 0; r < getSize(); r++) outs.push_back(dense.view(-1).narrow(0, r * input.numel(), input.numel()));
      auto work = gather_through_shm("all_gather_into_tensor", OpType::_ALLGATHER_BASE, outs, input, {output});
      if (!dense.is_same(output)) output.copy_(dense);
      return issue.finish(work);
    }
    auto o = opts;
    at::Tensor out_t = output, in_t = input;
    return issue.finish(enqueue("all_gather_into_tensor", OpType::_ALLGATHER_BASE, {input, output}, {output},
                   [g = gloo_, out_t, in_t, o]() mutable {
                     agree(*g, "all_gather_into_tensor", {in_t});
                     auto in = stage(in_t, true, false);
                     auto out = stage(out_t, false, true);
                     g->_allgather_base(out.dense, in.dense, o)->wait();
                     unstage(out);
                   }));
  }

  c10::intrusive_ptr<Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                const c10d::ReduceScatterOptions& opts) override {
    if (!defined_on_neuron(input)) return cpu_->_reduce_scatter_base(output, input, opts);
    Issue issue(*this, input.device().index(), {input, output});
    TORCH_CHECK(input.numel() == output.numel() * getSize(), "neuron backend: reduce_scatter_tensor: the input has ",
                input.numel(), " elements, not the output's ", output.numel(), " times the group's ", getSize());
    return issue.finish(scatter_reduced("reduce_scatter_tensor", OpType::_REDUCE_SCATTER_BASE, output,
                                        input.contiguous().view(-1).clone(), opts.reduceOp));
  }

  c10::intrusive_ptr<Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                          std::vector<std::vector<at::Tensor>>& inputs,
                                          const c10d::ReduceScatterOptions& opts) override {
    if (all_cpu(outputs)) return cpu_->reduce_scatter(outputs, inputs, opts);
    Issue issue(*this, device_of(outputs), concat(outputs, flatten(inputs)));
    TORCH_CHECK(outputs.size() == 1 && inputs.size() == 1 && inputs[0].size() == static_cast<size_t>(getSize()),
                "neuron backend: reduce_scatter takes one output and a list of one input per rank");
    std::vector<at::Tensor> flat;
    for (const auto& t : inputs[0]) {
      TORCH_CHECK(t.numel() == outputs[0].numel(), "neuron backend: reduce_scatter: inputs differ from the output in size");
      flat.push_back(t.reshape(-1));
    }
    return issue.finish(scatter_reduced("reduce_scatter", OpType::REDUCE_SCATTER, outputs[0], at::cat(flat), opts.reduceOp));
  }

  // Coalescing (torch.distributed._coalescing_manager, batch_isend_irecv):
  // the collectives between start and end are queued as they come, in order
  // on the stream; the sends and receives are held back and queued at the
  // end as one task that posts them all before waiting for any, since a
  // gloo send waits for the peer's receive (an exchange both ways, one op
  // after another, would deadlock). end's Work completes after all of them.
  bool supportsCoalescing() const override { return true; }
  void startCoalescing() override {
    // Replaces a batch an exception left open (torch's coalescing manager
    // does not end its block then).
    batch_ = std::make_unique<P2PBatch>();
  }
  c10::intrusive_ptr<Work> endCoalescing() override {
    TORCH_CHECK(batch_, "neuron backend: end of coalescing without its start");
    auto batch = std::move(batch_);
    if (!batch->cpu_works.empty()) return c10::make_intrusive<WorkList>(getRank(), std::move(batch->cpu_works));
    if (batch->ops.empty()) return barrier_free_work();
    Issue issue(*this, batch->device, {});
    std::vector<at::Tensor> keep = concat(batch->used, batch->originals), received;
    for (const auto& op : batch->ops) {
      keep.push_back(op.tensor);
      if (!op.send) received.push_back(op.tensor);
    }
    auto work = enqueue("batch_isend_irecv", OpType::COALESCED, keep, received,
                        p2p_body(std::move(batch->ops)), /*blocking=*/false, batch->shared);
    copy_back(batch->received, batch->received_dense);
    return issue.finish(work, batch->held);
  }

  // The coalesced forms (FSDP2): one collective after another on the same
  // stream; the last one's Work completes after all of them.
  c10::intrusive_ptr<Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::AllgatherOptions& opts) override {
    TORCH_CHECK(outputs.size() == inputs.size(), "neuron backend: all_gather_into_tensor_coalesced: ",
                outputs.size(), " outputs for ", inputs.size(), " inputs");
    c10::intrusive_ptr<Work> last;
    for (size_t i = 0; i < inputs.size(); i++) last = _allgather_base(outputs[i], inputs[i], opts);
    return last ? last : barrier_free_work();
  }

  c10::intrusive_ptr<Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::ReduceScatterOptions& opts) override {
    TORCH_CHECK(outputs.size() == inputs.size(), "neuron backend: reduce_scatter_tensor_coalesced: ",
                outputs.size(), " outputs for ", inputs.size(), " inputs");
    c10::intrusive_ptr<Work> last;
    for (size_t i = 0; i < inputs.size(); i++) last = _reduce_scatter_base(outputs[i], inputs[i], opts);
    return last ? last : barrier_free_work();
  }

  c10::intrusive_ptr<Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                               const c10d::AllreduceCoalescedOptions& opts) override {
    return allreduce(tensors, opts);
  }

  // all_to_all_single: rank r's input split s goes to rank s's output split
  // r. The ranks check first that their splits agree (rank s's input split
  // r must be rank r's output split s).
  c10::intrusive_ptr<Work> alltoall_base(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& out_splits,
                                         std::vector<int64_t>& in_splits, const c10d::AllToAllOptions& opts) override {
    if (!defined_on_neuron(input)) return cpu_->alltoall_base(output, input, out_splits, in_splits, opts);
    Issue issue(*this, input.device().index(), {input, output});
    return issue.finish(all_to_all_single(output, input, out_splits, in_splits, opts));
  }

  // all_to_all_single on the group's stream (the caller made it current).
  NeuronWorkPtr all_to_all_single(const at::Tensor& output, const at::Tensor& input,
                                  const std::vector<int64_t>& out_splits, const std::vector<int64_t>& in_splits,
                                  const c10d::AllToAllOptions& opts) {
    const int size = getSize(), rank = getRank();
    std::vector<int64_t> outs = out_splits, ins = in_splits;
    auto even = [&](const at::Tensor& t, std::vector<int64_t>& sp) {
      if (!sp.empty()) return;
      TORCH_CHECK(t.size(0) % size == 0, "neuron backend: all_to_all_single: ", t.size(0),
                  " rows do not split evenly over ", size, " ranks");
      sp.assign(size, t.size(0) / size);
    };
    even(output, outs);
    even(input, ins);
    TORCH_CHECK(static_cast<int>(outs.size()) == size && static_cast<int>(ins.size()) == size,
                "neuron backend: all_to_all_single: split lists must have one entry per rank");
    for (const auto* sp : {&ins, &outs}) {
      const at::Tensor& t = sp == &ins ? input : output;
      for (int64_t v : *sp) TORCH_CHECK(v >= 0, "neuron backend: all_to_all_single: a negative split, ", v);
      TORCH_CHECK(std::accumulate(sp->begin(), sp->end(), int64_t{0}) == t.size(0), "neuron backend: ",
                  "all_to_all_single: the ", sp == &ins ? "input" : "output", " splits add up to ",
                  std::accumulate(sp->begin(), sp->end(), int64_t{0}), " rows, not the tensor's ", t.size(0));
    }
    TORCH_CHECK(defined_on_neuron(output) && output.scalar_type() == input.scalar_type() &&
                    row_elements(output) == row_elements(input),
                "neuron backend: all_to_all_single: the output must be a neuron tensor of the input's dtype and row "
                "size");
    if (shm_) return all_to_all_through_shm(output, input, outs, ins);
    auto o = opts;
    at::Tensor out_t = output, in_t = input;
    return enqueue("all_to_all_single", OpType::ALLTOALL_BASE, {input, output}, {output},
                   [g = gloo_, out_t, in_t, outs, ins, o, size, rank]() mutable {
                     // Every rank's input and output splits and its row's elements: every
                     // rank checks the whole matrix, so that a mismatch fails all of them.
                     std::vector<int64_t> said = ins;
                     said.insert(said.end(), outs.begin(), outs.end());
                     said.push_back(row_elements(in_t));
                     const int stride = 2 * size + 1;
                     at::Tensor mine = at::tensor(said, at::kLong), all = at::empty({size * stride}, at::kLong);
                     g->_allgather_base(all, mine)->wait();
                     auto* v = all.data_ptr<int64_t>();
                     for (int q = 0; q < size; q++) {
                       for (int s = 0; s < size; s++) {
                         const int64_t sends = v[q * stride + s], expects = v[s * stride + size + q];
                         TORCH_CHECK(sends == expects, "splits disagree: rank ", q, " sends ", sends,
                                     " rows to rank ", s, ", which expects ", expects);
                       }
                       TORCH_CHECK(v[q * stride + 2 * size] == said[2 * size], "ranks disagree: rank ", q,
                                   " passes rows of ", v[q * stride + 2 * size], " elements, rank ", rank, " of ",
                                   said[2 * size]);
                     }
                     auto in = stage(in_t, true, false);
                     auto out = stage(out_t, false, true);
                     // As bytes: gloo's all-to-all knows fewer dtypes than we do (no int16).
                     auto bytes = [row = said[2 * size]](const at::Tensor& t) {
                       return t.reshape({t.size(0), row}).view(at::kByte);
                     };
                     at::Tensor out_bytes = bytes(out.dense), in_bytes = bytes(in.dense);
                     g->alltoall_base(out_bytes, in_bytes, outs, ins, o)->wait();
                     unstage(out);
                   });
  }

  // all_to_all of lists: through one all_to_all_single over their
  // concatenations (queued on the same stream).
  c10::intrusive_ptr<Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                    const c10d::AllToAllOptions& opts) override {
    if (all_cpu(inputs)) return cpu_->alltoall(outputs, inputs, opts);
    Issue issue(*this, device_of(inputs), concat(inputs, outputs));
    TORCH_CHECK(static_cast<int>(outputs.size()) == getSize() && static_cast<int>(inputs.size()) == getSize(),
                "neuron backend: all_to_all: one input and one output per rank");
    std::vector<at::Tensor> flat_in, flat_out;
    std::vector<int64_t> in_splits, out_splits;
    for (const auto& t : inputs) flat_in.push_back(t.reshape(-1)), in_splits.push_back(t.numel());
    for (const auto& t : outputs) out_splits.push_back(t.numel());
    at::Tensor in = at::cat(flat_in), out = at::empty({std::accumulate(out_splits.begin(), out_splits.end(),
                                                                         int64_t{0})},
                                                        outputs[0].options());
    auto work = all_to_all_single(out, in, out_splits, in_splits, opts);
    int64_t at = 0;
    for (auto& t : outputs) {
      t.copy_(out.narrow(0, at, t.numel()).view(t.sizes()));
      at += t.numel();
    }
    return issue.finish(work);
  }

  c10::intrusive_ptr<Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                  const c10d::GatherOptions& opts) override {
    if (all_cpu(inputs)) return cpu_->gather(outputs, inputs, opts);
    std::vector<at::Tensor> flat = flatten(outputs);
    Issue issue(*this, device_of(inputs), concat(inputs, flat));
    if (shm_ && inputs.size() == 1 && outputs.size() <= 1)
      return issue.finish(gather_to_root_through_shm(outputs.empty() ? flat : outputs[0], inputs[0],
                                                     static_cast<int>(opts.rootRank)));
    auto o = opts;
    return issue.finish(enqueue("gather", OpType::GATHER, concat(inputs, flat), flat,
                   [g = gloo_, outputs, inputs, o]() mutable {
                     agree(*g, "gather", inputs);
                     auto in = denses(stage_all(inputs, true, false));
                     auto out = stage_lists(outputs, false, true);
                     auto out_bytes = bytes_of_lists(out.dense);  // gloo lacks some dtypes (int16)
                     auto in_bytes = bytes_of(in);
                     g->gather(out_bytes, in_bytes, o)->wait();
                     unstage_lists(out);
                   }));
  }

  c10::intrusive_ptr<Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                   const c10d::ScatterOptions& opts) override {
    if (all_cpu(outputs)) return cpu_->scatter(outputs, inputs, opts);
    Issue issue(*this, device_of(outputs), concat(outputs, flatten(inputs)));
    if (shm_ && outputs.size() == 1 && inputs.size() <= 1)
      return issue.finish(scatter_through_shm(outputs[0], inputs.empty() ? std::vector<at::Tensor>{} : inputs[0],
                                              static_cast<int>(opts.rootRank)));
    auto o = opts;
    return issue.finish(enqueue("scatter", OpType::SCATTER, concat(outputs, flatten(inputs)), outputs,
                   [g = gloo_, outputs, inputs, o]() mutable {
                     agree(*g, "scatter", outputs);
                     auto out = stage_all(outputs, false, true);
                     auto in = stage_lists(inputs, true, false);
                     auto out_dense = denses(out);
                     auto out_bytes = bytes_of(out_dense);  // gloo lacks some dtypes (int16)
                     auto in_bytes = bytes_of_lists(in.dense);
                     g->scatter(out_bytes, in_bytes, o)->wait();
                     unstage_all(out);
                   }));
  }

  c10::intrusive_ptr<Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override {
    if (batch_) return hold(tensors, true, dst, tag);
    if (all_cpu(tensors)) return cpu_->send(tensors, dst, tag);
    Issue issue(*this, device_of(tensors), tensors);
    auto ops = p2p_ops(tensors, true, dst, tag);
    std::vector<at::Tensor> keep = tensors;
    if (shm_) keep = concat(keep, dense_p2p(ops));
    return issue.finish(enqueue("send", OpType::SEND, keep, {}, p2p_body(std::move(ops))));
  }

  c10::intrusive_ptr<Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override {
    if (batch_) return hold(tensors, false, src, tag);
    if (all_cpu(tensors)) return cpu_->recv(tensors, src, tag);
    Issue issue(*this, device_of(tensors), tensors);
    auto ops = p2p_ops(tensors, false, src, tag);
    std::vector<at::Tensor> keep = tensors, dense;
    if (shm_) keep = concat(keep, dense = dense_p2p(ops));
    auto work = enqueue("recv", OpType::RECV, keep, tensors, p2p_body(std::move(ops)));
    if (shm_) copy_back(tensors, dense);
    return issue.finish(work);
  }

  c10::intrusive_ptr<Work> barrier(const c10d::BarrierOptions& opts) override {
    // After the work queued on the current stream, and the host waits.
    auto o = opts;
    Issue issue(*this, current_device(), {});
    return issue.finish(enqueue("barrier", OpType::BARRIER, {}, {},
                                [g = gloo_, o]() mutable { g->barrier(o)->wait(); }, /*blocking=*/true));
  }

  // monitored_barrier: the host waits for the work queued on the current
  // stream, then gloo's monitored barrier (on the CPU group) names the ranks
  // that did not arrive within the timeout.
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override {
    NRT_CHECK(nrt_stream_synchronize(current_stream(current_device())));
    for (nrt_stream_t s : comm_streams()) NRT_CHECK(nrt_stream_synchronize(s));
    cpu_->monitoredBarrier(opts, wait_all_ranks);
  }

 private:
  // The sends and receives of one coalescing block, queued at its end.
  struct P2PBatch {
    std::vector<P2POp> ops;
    // Through the segment: the ops' tensors are dense copies (queued at the
    // call) of the tensors given, and the received ones are copied back.
    std::vector<at::Tensor> originals, received, received_dense;
    std::vector<c10::intrusive_ptr<Work>> cpu_works;  // CPU tensors' (gloo's own, already posted)
    std::shared_ptr<Shared> shared = std::make_shared<Shared>();
    c10::DeviceIndex device = -1;       // of the neuron tensors
    std::vector<NeuronWorkPtr> held;    // their Works, completed at the end
    std::vector<at::Tensor> used;       // the tensors given (kept until the batch has run)
  };

  // A send or receive inside a coalescing block: its Work is the batch's,
  // which completes when the whole batch has.
  c10::intrusive_ptr<Work> hold(std::vector<at::Tensor>& tensors, bool is_send, int peer, int tag) {
    const char* what = is_send ? "send" : "recv";
    TORCH_CHECK(tensors.size() == 1, "neuron backend: batched ", what, " takes one tensor, not ", tensors.size());
    if (all_cpu(tensors)) {
      TORCH_CHECK(batch_->ops.empty(), "neuron backend: batch_isend_irecv: mixes CPU and neuron tensors");
      auto work = is_send ? cpu_->send(tensors, peer, tag) : cpu_->recv(tensors, peer, tag);
      batch_->cpu_works.push_back(work);
      return work;
    }
    TORCH_CHECK(batch_->cpu_works.empty(), "neuron backend: batch_isend_irecv: mixes CPU and neuron tensors");
    c10::DeviceIndex device = tensors[0].device().index();
    TORCH_CHECK(batch_->device < 0 || batch_->device == device,
                "neuron backend: batch_isend_irecv: the tensors must be on one device");
    batch_->device = device;
    // The dense copies below are queued on the group's stream, after the
    // caller's work.
    Issue issue(*this, device, tensors);
    batch_->used.push_back(tensors[0]);
    auto ops = p2p_ops(tensors, is_send, peer, tag);
    if (shm_) {
      auto dense = dense_p2p(ops);
      batch_->originals.push_back(tensors[0]);
      if (!is_send) {
        batch_->received.push_back(tensors[0]);
        batch_->received_dense.push_back(dense[0]);
      }
    }
    batch_->ops.insert(batch_->ops.end(), ops.begin(), ops.end());
    if (!batch_->shared->done) NRT_CHECK(nrt_event_create(NRT_EVENT_DEFAULT, &batch_->shared->done));
    auto work = c10::make_intrusive<NeuronWork>(getRank(), is_send ? OpType::SEND : OpType::RECV, batch_->shared,
                                                std::vector<at::Tensor>{tensors[0]}, false, device);
    batch_->held.push_back(work);
    return work;
  }

  std::vector<P2POp> p2p_ops(const std::vector<at::Tensor>& tensors, bool is_send, int peer, int tag) {
    TORCH_CHECK(peer >= 0 && peer < getSize() && peer != getRank(), "neuron backend: ", is_send ? "send" : "recv",
                ": peer ", peer, " is not another rank of a group of ", getSize());
    std::vector<P2POp> ops;
    for (const auto& t : tensors) ops.push_back(P2POp{is_send, t, peer, tag});
    return ops;
  }

  // Through the segment, sends and receives take dense device tensors:
  // replaces each op's tensor by a dense copy queued on the stream now (a
  // receive's copied back by the caller after the task: a copy of its own
  // values, so that a refused message leaves it as it was) and returns them.
  std::vector<at::Tensor> dense_p2p(std::vector<P2POp>& ops) {
    std::vector<at::Tensor> dense;
    for (auto& op : ops) {
      op.tensor = op.tensor.contiguous();
      dense.push_back(op.tensor);
    }
    return dense;
  }

  // The host task of sends and receives: through the segment when the
  // group has one (the tensors dense already), else through gloo.
  std::function<void()> p2p_body(std::vector<P2POp> ops) {
    if (shm_) return [shm = shm_, ops = std::move(ops)]() { run_p2p_shm(shm->segment(), ops); };
    return [g = gloo_, ops = std::move(ops)]() { run_p2p_staged(*g, ops); };
  }

  // A Work for nothing at all (an empty coalesced list): done at once.
  c10::intrusive_ptr<Work> barrier_free_work() {
    Issue issue(*this, current_device(), {});
    return issue.finish(enqueue("nothing", OpType::COALESCED, {}, {}, [] {}));
  }

  static bool all_cpu(const std::vector<at::Tensor>& ts) {
    bool any_neuron = false, any_other = false;
    for (const auto& t : ts) (defined_on_neuron(t) ? any_neuron : any_other) = true;
    TORCH_CHECK(!(any_neuron && any_other), "neuron backend: a collective's tensors must all be on one device type");
    return !any_neuron && !ts.empty();
  }

  static std::vector<Staged> stage_all(const std::vector<at::Tensor>& ts, bool in, bool out) {
    std::vector<Staged> s;
    for (const auto& t : ts) s.push_back(stage(t, in, out));
    return s;
  }
  static void unstage_all(std::vector<Staged>& s) {
    for (auto& x : s) unstage(x);
  }
  static std::vector<at::Tensor> denses(const std::vector<Staged>& s) {
    std::vector<at::Tensor> d;
    for (const auto& x : s) d.push_back(x.dense);
    return d;
  }
  static std::vector<at::Tensor> concat(std::vector<at::Tensor> a, const std::vector<at::Tensor>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }

  // Queues body on the current stream of the tensors' device (the current
  // device when there are none): the group's stream, made current by the
  // caller's Issue, whose finish() records the Work's event.
  NeuronWorkPtr enqueue(const char* name, OpType type, std::vector<at::Tensor> keep, std::vector<at::Tensor> outputs,
                        std::function<void()> body, bool blocking = false, std::shared_ptr<Shared> shared = nullptr) {
    c10::DeviceIndex device = device_of(keep);
    nrt_stream_t stream = current_stream(device);
    std::optional<nrt_roofline> estimate;
    if (nrt_profile_active()) estimate = collective_estimate(type, device, getSize(), hosts_, keep, outputs);
    if (!shared) shared = std::make_shared<Shared>();
    if (!shared->done) NRT_CHECK(nrt_event_create(NRT_EVENT_DEFAULT, &shared->done));
    auto* task = new Task{std::move(body), std::move(keep), shared, std::string("neuron backend ") + name,
                          order_, order_->take()};
    task->estimate = estimate;
    NRT_CHECK(nrt_launch_host_task(stream, task->name.c_str(), run_task, release_task, task));
    return c10::make_intrusive<NeuronWork>(getRank(), type, std::move(shared), std::move(outputs), blocking, device);
  }

  // The device of the first neuron tensor (the current device if none).
  static c10::DeviceIndex device_of(const std::vector<at::Tensor>& ts) {
    for (const auto& t : ts)
      if (defined_on_neuron(t)) return t.device().index();
    return current_device();
  }

  // The group's own stream on a device, made on first use with a high
  // priority (as NCCL's): all the group's collectives on that device run
  // there, in the order the host issued them.
  nrt_stream_t comm_stream(c10::DeviceIndex device) {
    std::lock_guard<std::mutex> lock(streams_mutex_);
    for (const auto& [d, s] : streams_)
      if (d == device) return s;
    nrt_stream_t s = nullptr;
    NRT_CHECK(nrt_stream_create(device, NRT_STREAM_PRIORITY_HIGH, &s));
    streams_.emplace_back(device, s);
    return s;
  }

  std::vector<nrt_stream_t> comm_streams() {
    std::lock_guard<std::mutex> lock(streams_mutex_);
    std::vector<nrt_stream_t> all;
    for (const auto& ds : streams_) all.push_back(ds.second);
    return all;
  }

  // The issue of one collective on the group's stream of a device. Made
  // first, it queues there a wait for the caller's current stream (the
  // collective sees the work queued before it), marks the caller's tensors
  // as used on the group's stream (record_stream: the caching allocator
  // hands their memory out again only after the group's stream has passed
  // the point where the caller freed them), and makes the group's stream
  // current, so that staging copies, the collective's task and copies back
  // are queued there and its temporaries allocated from its pool.
  // finish() records the Work's event after all of it and completes its
  // future there; the caller's stream is current again once the scope ends.
  class Issue {
   public:
    Issue(NeuronBackend& pg, c10::DeviceIndex device, const std::vector<at::Tensor>& used) {
      nrt_stream_t caller = current_stream(device);
      comm_ = pg.own_stream_ ? pg.comm_stream(device) : caller;
      if (caller != comm_) {
        nrt_event_t ready = nullptr;
        NRT_CHECK(nrt_event_create(NRT_EVENT_DEFAULT, &ready));
        nrt_status s = nrt_event_record(ready, caller);
        if (s == NRT_SUCCESS) s = nrt_stream_wait_event(comm_, ready);
        nrt_event_destroy(ready);  // the queued wait holds its own reference
        NRT_CHECK(s);
      }
      c10::Stream comm = to_c10(comm_);
      for (const auto& t : used)
        if (defined_on_neuron(t) && t.has_storage()) record_stream(t.storage().data_ptr(), comm);
      previous_ = exchange_stream(comm);
    }
    ~Issue() { exchange_stream(*previous_); }
    Issue(const Issue&) = delete;
    Issue& operator=(const Issue&) = delete;

    NeuronWorkPtr finish(NeuronWorkPtr work, const std::vector<NeuronWorkPtr>& also = {}) {
      NRT_CHECK(nrt_event_record(work->done(), comm_));
      work->complete();
      for (const auto& w : also) w->complete();
      return work;
    }

   private:
    nrt_stream_t comm_ = nullptr;
    std::optional<c10::Stream> previous_;
  };

  // Every rank's tensors of a collective must agree in element count and
  // dtype; a mismatch let through would make gloo abort the process (or a
  // ring exchange chunks of different sizes). Checked on the worker, before
  // the data moves, through a small all-gather every rank takes part in:
  // each raises the same error naming the collective and the ranks.
  static void agree(c10d::Backend& g, const char* what, const std::vector<at::Tensor>& tensors) {
    int64_t numel = 0, dtype = tensors.empty() ? -1 : static_cast<int64_t>(tensors[0].scalar_type());
    for (const auto& t : tensors) numel += t.numel();
    const int size = g.getSize();
    const int64_t count = static_cast<int64_t>(tensors.size());
    at::Tensor mine = at::tensor({numel, dtype, static_cast<int64_t>(tensors.size())}, at::kLong);
    at::Tensor all = at::empty({size * 3}, at::kLong);
    g._allgather_base(all, mine)->wait();
    auto* v = all.data_ptr<int64_t>();
    for (int r = 0; r < size; r++)
      TORCH_CHECK(v[3 * r] == numel && v[3 * r + 1] == dtype && v[3 * r + 2] == count,
                  "ranks disagree: rank ", r, " passes ", v[3 * r + 2], " tensor(s) of ",
                  v[3 * r], " elements of ", describe(v[3 * r + 1]), ", rank ", g.getRank(), " ", count,
                  " of ", numel, " elements of ", describe(dtype));
  }

  // Elements of a row (everything but the first dimension).
  static int64_t row_elements(const at::Tensor& t) {
    int64_t row = 1;
    for (int64_t d = 1; d < t.dim(); d++) row *= t.size(d);
    return row;
  }

  static std::string describe(int64_t dtype) {
    return dtype < 0 ? std::string("no dtype") : std::string(c10::toString(static_cast<at::ScalarType>(dtype)));
  }

  static void check_reduce(const c10d::ReduceOp& op, const at::Tensor& t, const char* what) {
    bool floating = at::isFloatingType(t.scalar_type());
    TORCH_CHECK(floating || (op != c10d::ReduceOp::AVG && op != c10d::ReduceOp::PREMUL_SUM), "neuron backend: ",
                what, ": ReduceOp.", op == c10d::ReduceOp::AVG ? "AVG" : "PREMUL_SUM",
                " needs a floating dtype, not ", t.scalar_type());
    bool bits = op == c10d::ReduceOp::BAND || op == c10d::ReduceOp::BOR || op == c10d::ReduceOp::BXOR;
    TORCH_CHECK(!bits || !floating, "neuron backend: ", what, ": bitwise reductions need an integral dtype, not ",
                t.scalar_type());
  }

  // all_reduce (root < 0) or reduce to root: a ring over each tensor's dense
  // copy (the tensor itself when it is contiguous and every rank keeps the
  // result).
  NeuronWorkPtr reduce_all(const char* what, OpType type, const std::vector<at::Tensor>& tensors,
                                      const c10d::ReduceOp& op, int root) {
    std::vector<at::Tensor> flats, scratch, keep;
    const int size = getSize();
    // all_reduce across hosts with several ranks on a host: hierarchical.
    std::shared_ptr<Hierarchy> hier = root < 0 ? hier_ : nullptr;
    for (const auto& t : tensors) {
      check_reduce(op, t, what);
      bool in_place = t.is_contiguous() && root < 0;
      at::Tensor flat = in_place ? t.view(-1) : t.contiguous().view(-1);
      if (!in_place && flat.data_ptr() == t.data_ptr()) flat = flat.clone();
      flats.push_back(flat);
      if (hier)
        scratch.push_back(hier->leader() ? at::empty({(t.numel() + hier->hosts() - 1) / hier->hosts()}, t.options())
                                         : at::Tensor());
      else if (!shm_)
        scratch.push_back(at::empty({(t.numel() + size - 1) / size}, t.options()));
    }
    keep = flats;
    for (const auto& t : scratch)
      if (t.defined()) keep.push_back(t);
    double factor = premul_factor(op);
    bool avg = op == c10d::ReduceOp::AVG;
    auto body = [g = gloo_, ring = ring_, shm = shm_, hier, what, flats, scratch, op, factor, avg, size]() {
      if (hier) {
        agree(*g, what, flats);
        // Within and between hosts the values are summed (AVG divides once
        // at the end; PREMUL_SUM's factor is applied first).
        bool sum = avg || op == c10d::ReduceOp::PREMUL_SUM;
        const c10d::ReduceOp combine = sum ? c10d::ReduceOp(c10d::ReduceOp::SUM) : op;
        for (size_t i = 0; i < flats.size(); i++) {
          if (factor != 1.0) scale_by(flats[i], factor, false);
          hier->all_reduce(flats[i], scratch[i], combine);
          if (avg) scale_by(flats[i], size, true);
        }
        return;
      }
      if (shm)
        shm->agree(what, ShmCollectives::kAllReduce, flats, static_cast<int64_t>(op.op_), -1);
      else
        agree(*g, what, flats);
      for (size_t i = 0; i < flats.size(); i++) {
        if (factor != 1.0) scale_by(flats[i], factor, false);
        if (shm) {
          shm->all_reduce(flats[i], op);  // AVG divides too
          continue;
        }
        ring_allreduce(*ring, flats[i], scratch[i], op);
        if (avg) scale_by(flats[i], size, true);
      }
    };
    auto work = enqueue(what, type, keep, tensors, std::move(body));
    // Results land in the tensors after the ring, on the same stream.
    for (size_t i = 0; i < tensors.size(); i++)
      if (flats[i].data_ptr() != tensors[i].data_ptr() && (root < 0 || root == getRank()))
        const_cast<at::Tensor&>(tensors[i]).copy_(flats[i].view(tensors[i].sizes()));
    return work;
  }

  // reduce_scatter: work is every rank's input, flat; chunk `rank` of the
  // reduced whole goes to output.
  NeuronWorkPtr scatter_reduced(const char* what, OpType type, const at::Tensor& output,
                                           const at::Tensor& work_flat, const c10d::ReduceOp& op) {
    check_reduce(op, output, what);
    TORCH_CHECK(work_flat.scalar_type() == output.scalar_type(), "neuron backend: ", what,
                ": the input's dtype differs from the output's");
    const int size = getSize();
    const int64_t chunk = output.numel();
    at::Tensor scratch = shm_ ? at::Tensor() : at::empty({chunk}, output.options());
    double factor = premul_factor(op);
    bool avg = op == c10d::ReduceOp::AVG;
    at::Tensor mine = work_flat.narrow(0, getRank() * chunk, chunk);
    auto work = enqueue(what, type, shm_ ? std::vector<at::Tensor>{work_flat} : std::vector<at::Tensor>{work_flat, scratch},
                        {output},
                        [g = gloo_, ring = ring_, shm = shm_, what, work_flat, scratch, mine, chunk, op, factor, avg,
                         size]() {
                          if (shm) {
                            shm->agree(what, ShmCollectives::kReduceScatter, {work_flat}, static_cast<int64_t>(op.op_),
                                       -1);
                            if (factor != 1.0) scale_by(work_flat, factor, false);
                            shm->reduce_scatter(work_flat, chunk, op);  // AVG divides too
                            return;
                          }
                          agree(*g, what, {work_flat});
                          if (factor != 1.0) scale_by(work_flat, factor, false);
                          if (size > 1) ring_reduce_scatter(*ring, work_flat, scratch, chunk, op);
                          if (avg) scale_by(mine, size, true);
                        });
    const_cast<at::Tensor&>(output).copy_(mine.view(output.sizes()));
    return work;
  }

  // Dense device copies of tensors that are not (queued on the stream), the
  // tensors themselves otherwise.
  static std::vector<at::Tensor> dense_copies(const std::vector<at::Tensor>& ts) {
    std::vector<at::Tensor> d;
    for (const auto& t : ts) d.push_back(t.is_contiguous() ? t : t.contiguous());
    return d;
  }
  // Results land in the tensors that were copied, after the collective.
  static void copy_back(const std::vector<at::Tensor>& ts, const std::vector<at::Tensor>& dense) {
    for (size_t i = 0; i < ts.size(); i++)
      if (!dense[i].is_same(ts[i])) const_cast<at::Tensor&>(ts[i]).copy_(dense[i]);
  }

  // all_gather through the shared segment: outs[r] receives rank r's input.
  NeuronWorkPtr gather_through_shm(const char* what, OpType type, const std::vector<at::Tensor>& outs,
                                              const at::Tensor& input, std::vector<at::Tensor> results) {
    TORCH_CHECK(static_cast<int>(outs.size()) == getSize(), "neuron backend: ", what, ": ", outs.size(),
                " outputs for a group of ", getSize());
    for (const auto& t : outs)
      TORCH_CHECK(t.numel() == input.numel() && t.scalar_type() == input.scalar_type() && defined_on_neuron(t),
                  "neuron backend: ", what, ": every output must be a neuron tensor with the input's size and dtype");
    auto in = dense_copies({input});
    auto dense = dense_copies(outs);
    for (size_t i = 0; i < outs.size(); i++)
      if (!dense[i].is_same(outs[i])) dense[i] = at::empty_like(outs[i], at::MemoryFormat::Contiguous);
    std::vector<at::Tensor> keep = concat(concat(in, dense), results);
    auto work = enqueue(what, type, keep, results, [shm = shm_, what, dense, in = in[0]]() {
      shm->agree(what, ShmCollectives::kAllGather, {in}, -1, -1);
      shm->all_gather(dense, in);
    });
    copy_back(outs, dense);
    return work;
  }

  // Checks that a rank's list of per-rank tensors (gather's outputs,
  // scatter's inputs) is one neuron tensor per rank like `like` on the
  // root and nothing elsewhere.
  void check_root_list(const char* what, const std::vector<at::Tensor>& list, const at::Tensor& like, int root) {
    TORCH_CHECK(root >= 0 && root < getSize(), "neuron backend: ", what, ": root ", root,
                " is not a rank of a group of ", getSize());
    if (getRank() != root) {
      TORCH_CHECK(list.empty(), "neuron backend: ", what, ": only the root (rank ", root, ") passes a list");
      return;
    }
    TORCH_CHECK(static_cast<int>(list.size()) == getSize(), "neuron backend: ", what, ": the root passes ",
                list.size(), " tensors for a group of ", getSize());
    for (const auto& t : list)
      TORCH_CHECK(t.numel() == like.numel() && t.scalar_type() == like.scalar_type() && defined_on_neuron(t),
                  "neuron backend: ", what, ": every tensor of the root's list must be a neuron tensor of ",
                  like.numel(), " elements of ", like.scalar_type());
  }

  // Dense tensors for outputs: the outputs themselves when dense, else
  // fresh ones (copied back after with copy_back).
  static std::vector<at::Tensor> dense_outputs(const std::vector<at::Tensor>& outs) {
    std::vector<at::Tensor> d;
    for (const auto& t : outs) d.push_back(t.is_contiguous() ? t : at::empty_like(t, at::MemoryFormat::Contiguous));
    return d;
  }

  NeuronWorkPtr all_to_all_through_shm(const at::Tensor& output, const at::Tensor& input,
                                                  std::vector<int64_t> outs, std::vector<int64_t> ins) {
    const char* what = "all_to_all_single";
    const int64_t row = row_elements(input);
    at::Tensor in = input.contiguous(), out = dense_outputs({output})[0];
    auto work = enqueue(what, OpType::ALLTOALL_BASE, {in, out, output}, {output},
                        [shm = shm_, in, out, outs, ins, row]() {
                          shm->agree(ShmCollectives::kAllToAll, static_cast<int64_t>(in.scalar_type()), 1, row, -1,
                                     -1);
                          shm->all_to_all(out, in, outs, ins, row);
                        });
    copy_back({output}, {out});
    return work;
  }

  NeuronWorkPtr gather_to_root_through_shm(const std::vector<at::Tensor>& outs, const at::Tensor& input,
                                                      int root) {
    check_root_list("gather", outs, input, root);
    at::Tensor in = input.contiguous();
    auto dense = dense_outputs(outs);
    auto work = enqueue("gather", OpType::GATHER, concat(concat({in}, dense), outs), outs,
                        [shm = shm_, in, dense, root]() {
                          shm->agree("gather", ShmCollectives::kGather, {in}, -1, root);
                          shm->gather(dense, in, root);
                        });
    copy_back(outs, dense);
    return work;
  }

  NeuronWorkPtr scatter_through_shm(const at::Tensor& output, const std::vector<at::Tensor>& ins,
                                               int root) {
    check_root_list("scatter", ins, output, root);
    auto dense_in = dense_copies(ins);
    at::Tensor out = dense_outputs({output})[0];
    auto work = enqueue("scatter", OpType::SCATTER, concat(concat({out, output}, dense_in), ins), {output},
                        [shm = shm_, out, dense_in, root]() {
                          shm->agree("scatter", ShmCollectives::kScatter, {out}, -1, root);
                          shm->scatter(out, dense_in, root);
                        });
    copy_back({output}, {out});
    return work;
  }

  c10::intrusive_ptr<c10d::Backend> gloo_, ring_, cpu_;
  std::shared_ptr<ShmCollectives> shm_;  // one-host groups, unless disabled
  int hosts_;                            // the group's ranks run on this many hosts
  std::shared_ptr<Hierarchy> hier_;      // groups spanning hosts with several ranks on a host
  std::unique_ptr<P2PBatch> batch_;  // while coalescing
  std::shared_ptr<TaskOrder> order_ = std::make_shared<TaskOrder>();
  bool own_stream_ = true;  // the group's collectives on streams of its own
  std::mutex streams_mutex_;
  std::vector<std::pair<c10::DeviceIndex, nrt_stream_t>> streams_;  // the group's streams
};

}  // namespace
}  // namespace torchneuron

void register_distributed_bindings(py::module_& m) {
  m.def("_neuron_c10d_backend",
        [](c10::intrusive_ptr<c10d::Backend> device_gloo, c10::intrusive_ptr<c10d::Backend> ring_gloo,
           c10::intrusive_ptr<c10d::Backend> cpu_gloo, int rank, int size, c10::intrusive_ptr<c10d::Store> store,
           bool use_shm, int64_t timeout_ms, int hosts, c10::intrusive_ptr<c10d::Store> host_store,
           c10::intrusive_ptr<c10d::Store> hier_store, int local_rank, int local_size,
           py::object leaders) -> c10::intrusive_ptr<c10d::Backend> {
          const std::chrono::milliseconds timeout(timeout_ms);
          std::shared_ptr<torchneuron::ShmCollectives> shm;
          std::shared_ptr<torchneuron::Hierarchy> hier;
          if (use_shm && hosts == 1) {
            auto segment = torchneuron::ShmSegment::connect(store, rank, size, timeout);
            if (segment) shm = std::make_shared<torchneuron::ShmCollectives>(std::move(segment));
          } else if (use_shm && hosts > 1 && local_size > 0) {
            // Across hosts: a segment per host (host_store is the host's
            // own), used only if every host's ranks could map theirs.
            std::shared_ptr<torchneuron::ShmCollectives> local;
            bool ok = true;
            if (local_size > 1) {
              auto segment = torchneuron::ShmSegment::connect(host_store, local_rank, local_size, timeout);
              ok = static_cast<bool>(segment);
              if (segment) local = std::make_shared<torchneuron::ShmCollectives>(std::move(segment));
            }
            hier_store->set(std::to_string(rank), std::vector<uint8_t>{static_cast<uint8_t>(ok ? '1' : '0')});
            for (int r = 0; r < size && ok; r++) ok = hier_store->get(std::to_string(r)) == std::vector<uint8_t>{'1'};
            c10::intrusive_ptr<c10d::Backend> lead;
            if (!leaders.is_none()) lead = leaders.cast<c10::intrusive_ptr<c10d::Backend>>();
            if (ok) hier = std::make_shared<torchneuron::Hierarchy>(std::move(local), std::move(lead), hosts);
          }
          return c10::make_intrusive<torchneuron::NeuronBackend>(std::move(device_gloo), std::move(ring_gloo),
                                                                 std::move(cpu_gloo), rank, size, std::move(shm),
                                                                 hosts, std::move(hier));
        });
  m.def("_neuron_c10d_hier_collectives", &torchneuron::Hierarchy::count,
        "Collectives this process ran through the hierarchical path across hosts (tests).");
  m.def("_neuron_c10d_shm_collectives", &torchneuron::ShmCollectives::count,
        "Collectives this process ran through a shared-memory segment (tests).");
  m.def("_neuron_c10d_shm_barrier_wait", [] {
    return std::make_pair(torchneuron::shm_barrier_wait_ns(), torchneuron::shm_barriers());
  }, "(nanoseconds waited for later peers, barriers passed) in this process's shared-memory segments.");
  m.def("_neuron_c10d_shm_messages", &torchneuron::shm_messages,
        "Sends and receives this process ran through a shared-memory segment (tests).");
}
