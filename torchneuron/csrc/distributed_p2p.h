// Point-to-point messages of the c10d backend "neuron" (distributed.cpp).
// Each message goes after a header (element count, dtype) on the same peer
// and tag; the receiver checks it before any byte lands in its tensor. A
// message that does not fit the receiving tensor is taken into scratch
// memory (so the connection stays in step) and the receive fails naming
// both, where gloo would abort the process. Run on a stream worker, inside
// a host task.
#pragma once

#include <ATen/Tensor.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <vector>

namespace torchneuron {

// One send or receive: tensor is dense and on the CPU (a view of device
// memory or a staging copy).
struct P2POp {
  bool send;
  at::Tensor tensor;
  int peer, tag;
};

// Posts every op's header, then every op's data, before waiting for the
// data (a gloo send completes only once the peer has posted the matching
// receive, so sends and receives of one batch must be in flight together).
// Throws after all data has arrived if a message did not fit its tensor.
void run_p2p(c10d::Backend& transport, const std::vector<P2POp>& ops);

}  // namespace torchneuron
