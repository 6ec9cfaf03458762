// Collectives through the shared-memory segment of a one-host group
// (distributed_shm_segment.h), for the c10d backend "neuron"
// (distributed.cpp): each rank's bytes are copied once into its own buffer
// of the segment, the peers read them from there, and reductions run in
// the runtime's kernels (threaded, vectorised) with the segment's memory as
// an operand (nrt_op_execute_host): no TCP, no staging copy. Long tensors go
// through in steps of a buffer each, alternating between a rank's two
// buffers so that one barrier per step suffices.
//
// Every collective starts with a barrier after which each rank checks every
// peer's header (what it runs, element count, dtype, op, root): a mismatch
// is the same error on every rank, raised before any peer byte lands in
// device memory. Copies out of a peer's buffer are sized by this rank's own
// (checked) counts and the segment's own layout.
//
// Tensors are dense 1-d device tensors (the caller stages others). Run on a
// stream worker inside a collective's host task; the group's task order
// (distributed_order.h) makes one collective run at a time.
#pragma once

#include <ATen/Tensor.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <atomic>
#include <memory>
#include <vector>

#include "distributed_shm_segment.h"
#include "neuronrt/op.h"

namespace torchneuron {

// dst = src, n elements of dtype, through the runtime's copy kernel
// (threaded); either side may be the segment's host memory (the flags),
// the other a device address.
void shm_copy(char* dst, bool dst_host, char* src, bool src_host, nrt_dtype dtype, int64_t n);

class ShmCollectives {
 public:
  explicit ShmCollectives(std::unique_ptr<ShmSegment> segment) : seg_(std::move(segment)) {}

  enum Kind : int64_t { kAllReduce = 1, kReduceScatter, kAllGather, kBroadcast, kAllToAll, kGather, kScatter };

  // The first barrier of a collective and the check of every rank's header
  // (tensors: this rank's, numel summed). op < 0 and root < 0 when unused.
  void agree(const char* what, Kind kind, const std::vector<at::Tensor>& tensors, int64_t op, int64_t root);
  // The same with the header's fields given (numel: what every rank must
  // pass alike, such as all_to_all's elements per row).
  void agree(Kind kind, int64_t dtype, int64_t count, int64_t numel, int64_t op, int64_t root);

  // flat (every rank's) reduced into flat; AVG divides by the group's size.
  void all_reduce(const at::Tensor& flat, const c10d::ReduceOp& op);
  // flat is size blocks of `block` elements; block `rank` of every rank's,
  // reduced, ends in block `rank` of this one's (the others are left as
  // they were).
  void reduce_scatter(const at::Tensor& flat, int64_t block, const c10d::ReduceOp& op);
  // outs[r] receives rank r's input (outs[rank] this rank's own).
  void all_gather(const std::vector<at::Tensor>& outs, const at::Tensor& input);
  // t receives root's t.
  void broadcast(const at::Tensor& t, int root);
  // all_to_all_single on dense 1-d tensors of rows of `row` elements: this
  // rank's input rows in_splits[s] go to rank s, which receives them as its
  // output rows out_splits[rank]. Every rank first publishes its splits and
  // checks the whole matrix (every rank's sends against every receiver's
  // expectations), so that a mismatch is the same error everywhere.
  void all_to_all(const at::Tensor& out, const at::Tensor& in, const std::vector<int64_t>& out_splits,
                  const std::vector<int64_t>& in_splits, int64_t row);
  // outs[r] (on root; empty elsewhere) receives rank r's input.
  void gather(const std::vector<at::Tensor>& outs, const at::Tensor& input, int root);
  // out receives root's ins[rank] (ins empty except on root).
  void scatter(const at::Tensor& out, const std::vector<at::Tensor>& ins, int root);

  // Collectives run through a segment in this process (for tests).
  static int64_t count() { return count_.load(); }

  // The segment, for point-to-point messages (distributed_shm_p2p.h),
  // which take their turn in the group's task order like the collectives.
  ShmSegment& segment() { return *seg_; }

 private:
  int next_buffer() { return which_ ^= 1; }

  std::unique_ptr<ShmSegment> seg_;
  uint64_t seq_ = 0;  // collectives run
  int which_ = 0;     // the data buffer of the last step
  static std::atomic<int64_t> count_;
};

}  // namespace torchneuron
