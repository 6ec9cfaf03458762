// Point-to-point messages with checked headers (distributed_p2p.h).
#include "distributed_p2p.h"

#include <ATen/ATen.h>

#include <string>

namespace torchneuron {
namespace {

using c10d::Work;

std::string describe(int64_t numel, int64_t dtype) {
  return std::to_string(numel) + " elements of " + c10::toString(static_cast<at::ScalarType>(dtype));
}

c10::intrusive_ptr<Work> post(c10d::Backend& g, bool send, const at::Tensor& t, int peer, int tag) {
  std::vector<at::Tensor> one{t};
  return send ? g.send(one, peer, tag) : g.recv(one, peer, tag);
}

}  // namespace

void run_p2p(c10d::Backend& g, const std::vector<P2POp>& ops) {
  std::vector<at::Tensor> headers;
  std::vector<c10::intrusive_ptr<Work>> header_sends, header_recvs, data;
  for (const auto& op : ops) {
    headers.push_back(op.send ? at::tensor({op.tensor.numel(), static_cast<int64_t>(op.tensor.scalar_type())},
                                           at::kLong)
                              : at::empty({2}, at::kLong));
    (op.send ? header_sends : header_recvs).push_back(post(g, op.send, headers.back(), op.peer, op.tag));
  }
  for (auto& w : header_recvs) w->wait();
  std::string error;
  for (size_t i = 0; i < ops.size(); i++) {
    const auto& op = ops[i];
    at::Tensor into = op.tensor;
    if (!op.send) {
      const int64_t numel = headers[i][0].item<int64_t>(), dtype = headers[i][1].item<int64_t>();
      TORCH_CHECK(numel >= 0 && dtype >= 0 && dtype < static_cast<int64_t>(at::ScalarType::NumOptions),
                  "recv from rank ", op.peer, ": a malformed message header (", numel, " elements, dtype ", dtype,
                  ")");
      const int64_t want_dtype = static_cast<int64_t>(op.tensor.scalar_type());
      if (numel != op.tensor.numel() || dtype != want_dtype) {
        if (error.empty())
          error = "recv from rank " + std::to_string(op.peer) + ": the message has " + describe(numel, dtype) +
                  ", the tensor " + describe(op.tensor.numel(), want_dtype) + "; nothing was written into it";
        into = at::empty({numel}, at::TensorOptions().dtype(static_cast<at::ScalarType>(dtype)));
      }
    }
    if (into.numel() > 0) data.push_back(post(g, op.send, into, op.peer, op.tag));
  }
  for (auto& w : header_sends) w->wait();
  for (auto& w : data) w->wait();
  TORCH_CHECK(error.empty(), error);
}

}  // namespace torchneuron
