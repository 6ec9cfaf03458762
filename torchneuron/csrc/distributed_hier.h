// The hierarchical path of the c10d backend "neuron" (distributed.cpp) for
// groups that span hosts with several ranks on a host: the ranks of each
// host share a segment (distributed_shm_segment.h) and one rank per host,
// its leader (the host's lowest rank), talks to the other hosts' leaders
// through a gloo group of the leaders alone. An all_reduce reduces within
// each host through the segment, then between the leaders as a ring over
// their gloo group (each received chunk reduced by the runtime's kernels,
// distributed_ring.h), then the leader's result goes to the host's other
// ranks through the segment again. Run on the group's stream inside a
// collective's host task, after the whole group agreed on the tensors.
#pragma once

#include <ATen/Tensor.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <atomic>
#include <memory>

#include "distributed_shm.h"

namespace torchneuron {

class Hierarchy {
 public:
  // local: the host's segment (null when the rank is alone on its host);
  // leaders: the leaders' gloo group (null on the other ranks); hosts: how
  // many hosts the group spans.
  Hierarchy(std::shared_ptr<ShmCollectives> local, c10::intrusive_ptr<c10d::Backend> leaders, int hosts)
      : local_(std::move(local)), leaders_(std::move(leaders)), hosts_(hosts) {}

  bool leader() const { return static_cast<bool>(leaders_); }
  int hosts() const { return hosts_; }

  // Every rank's flat (dense, 1-d, one size and dtype) reduced into every
  // rank's flat. op is SUM for AVG and PREMUL_SUM (the caller scales).
  // scratch (leaders only) holds ceil(numel / hosts) elements.
  void all_reduce(const at::Tensor& flat, const at::Tensor& scratch, const c10d::ReduceOp& op);

  // Collectives run through the hierarchy in this process (for tests).
  static int64_t count() { return count_.load(); }

 private:
  std::shared_ptr<ShmCollectives> local_;
  c10::intrusive_ptr<c10d::Backend> leaders_;
  int hosts_;
  static std::atomic<int64_t> count_;
};

}  // namespace torchneuron
