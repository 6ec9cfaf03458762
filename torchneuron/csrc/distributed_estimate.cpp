#include "distributed_estimate.h"

#include "runtime_check.h"

namespace torchneuron {
namespace {

double total_bytes(const std::vector<at::Tensor>& ts) {
  double b = 0;
  for (const auto& t : ts) b += static_cast<double>(t.nbytes());
  return b;
}

}  // namespace

std::optional<nrt_roofline> collective_estimate(c10d::OpType type, int device, int ranks, int hosts,
                                                const std::vector<at::Tensor>& keep,
                                                const std::vector<at::Tensor>& outputs) {
  using c10d::OpType;
  const double out = total_bytes(outputs), n = ranks;
  // The whole buffer as one rank sees it (nrt_roofline_add_collective).
  // Sizes come from the outputs where they have the whole buffer: keep
  // also holds staging copies on some paths.
  int32_t kind;
  double bytes;
  bool reduces = false;
  switch (type) {
    case OpType::ALLREDUCE: kind = NRT_COLLECTIVE_ALL_REDUCE, bytes = out, reduces = true; break;
    case OpType::REDUCE: kind = NRT_COLLECTIVE_REDUCE, bytes = out, reduces = true; break;
    case OpType::BROADCAST: kind = NRT_COLLECTIVE_BROADCAST, bytes = out; break;
    case OpType::ALLGATHER: case OpType::_ALLGATHER_BASE: kind = NRT_COLLECTIVE_ALL_GATHER, bytes = out; break;
    case OpType::REDUCE_SCATTER: case OpType::_REDUCE_SCATTER_BASE:
      kind = NRT_COLLECTIVE_REDUCE_SCATTER, bytes = out * n, reduces = true;
      break;
    case OpType::ALLTOALL: case OpType::ALLTOALL_BASE: kind = NRT_COLLECTIVE_ALL_TO_ALL, bytes = out; break;
    case OpType::GATHER:  // every rank's input (keep's first tensor on both paths), gathered at the root
      kind = NRT_COLLECTIVE_GATHER, bytes = keep.empty() ? 0 : static_cast<double>(keep[0].nbytes()) * n;
      break;
    case OpType::SCATTER: kind = NRT_COLLECTIVE_SCATTER, bytes = out * n; break;
    case OpType::SEND: case OpType::RECV: kind = NRT_COLLECTIVE_SEND_RECV, bytes = total_bytes(keep); break;
    case OpType::BARRIER: kind = NRT_COLLECTIVE_BARRIER, bytes = 0; break;
    default: return std::nullopt;
  }
  nrt_device_properties props;
  NRT_CHECK(nrt_device_get_properties(device, &props));
  nrt_roofline r{};
  int32_t elem = reduces && !outputs.empty() ? static_cast<int32_t>(outputs[0].element_size()) : 0;
  NRT_CHECK(nrt_roofline_add_collective(&props, kind, ranks, hosts, bytes, elem, &r));
  nrt_roofline_finish(&props, &r);
  return r;
}

}  // namespace torchneuron
