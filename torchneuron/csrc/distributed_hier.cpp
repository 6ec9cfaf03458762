// Hierarchical collectives of groups that span hosts (distributed_hier.h).
#include "distributed_hier.h"

#include "distributed_ring.h"

namespace torchneuron {

std::atomic<int64_t> Hierarchy::count_{0};

void Hierarchy::all_reduce(const at::Tensor& flat, const at::Tensor& scratch, const c10d::ReduceOp& op) {
  const char* what = "all_reduce";
  const int64_t code = static_cast<int64_t>(op.op_);
  // 1. Within the host: every local rank ends with the host's reduction.
  if (local_) {
    local_->agree(what, ShmCollectives::kAllReduce, {flat}, code, -1);
    local_->all_reduce(flat, op);
  }
  // 2. Between the hosts' leaders: a ring over their gloo group.
  if (leaders_ && hosts_ > 1) ring_allreduce(*leaders_, flat, scratch, op);
  // 3. The leader (local rank 0) gives the result to its host's ranks.
  if (local_) {
    local_->agree(what, ShmCollectives::kBroadcast, {flat}, -1, 0);
    local_->broadcast(flat, 0);
  }
  count_++;
}

}  // namespace torchneuron
