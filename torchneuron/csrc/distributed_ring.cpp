// Ring reductions (distributed_ring.h). The ring over ranks 0..P-1: step s
// of the reduce-scatter sends chunk (rank - s - 1) to the next rank and
// reduces the chunk (rank - s - 2) received from the previous one into its
// own; after P - 1 steps chunk `rank` holds every rank's contribution. The
// all-gather then passes the finished chunks around the same ring. Each
// step's send and receive are in flight together.
#include "distributed_ring.h"

#include <torch/csrc/distributed/c10d/Types.hpp>

#include <vector>

#include "runtime_check.h"
#include "tensor_view.h"

namespace torchneuron {

at::Tensor cpu_view(const at::Tensor& t) {
  auto options = at::TensorOptions().dtype(t.dtype()).device(at::kCPU);
  if (t.numel() == 0) return at::empty(t.sizes(), options);
  return at::from_blob(nrt_device_to_host(t.data_ptr()), t.sizes(), t.strides(), options);
}

namespace {

nrt_scalar one_of(bool floating) {
  nrt_scalar s{};
  if (floating) {
    s.is_float = 1, s.f = 1.0;
  } else {
    s.i = 1;
  }
  return s;
}

void execute(const nrt_op& op) { NRT_CHECK(nrt_op_execute(&op)); }

// Sends send to next and receives recv from prev, both in flight at once.
void exchange(c10d::Backend& transport, const at::Tensor& send, const at::Tensor& recv, int next, int prev) {
  std::vector<at::Tensor> s{cpu_view(send)}, r{cpu_view(recv)};
  c10::intrusive_ptr<c10d::Work> ws, wr;
  if (send.numel()) ws = transport.send(s, next, 0);
  if (recv.numel()) wr = transport.recv(r, prev, 0);
  if (ws) ws->wait();
  if (wr) wr->wait();
}

}  // namespace

double premul_factor(const c10d::ReduceOp& op) {
  if (op != c10d::ReduceOp::PREMUL_SUM) return 1.0;
  auto* s = dynamic_cast<c10d::PreMulSumSupplement*>(op.supplement_.get());
  TORCH_CHECK(s, "neuron backend: PREMUL_SUM without its factor");
  return s->tensor_factor.defined() ? s->tensor_factor.to(at::kCPU).item<double>() : s->double_factor;
}

nrt_op reduction_op(const c10d::ReduceOp& op, at::ScalarType dtype, const char* what) {
  nrt_op o{};
  o.compute_dtype = to_runtime_dtype(dtype, what);
  o.num_operands = 3;
  o.num_outputs = 1;
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
    case c10d::ReduceOp::AVG:
    case c10d::ReduceOp::PREMUL_SUM:
      o.code = NRT_OP_ADD;
      o.num_scalars = 1;
      o.scalars[0] = one_of(at::isFloatingType(dtype));
      break;
    case c10d::ReduceOp::PRODUCT: o.code = NRT_OP_MUL; break;
    case c10d::ReduceOp::MIN: o.code = NRT_OP_MINIMUM; break;
    case c10d::ReduceOp::MAX: o.code = NRT_OP_MAXIMUM; break;
    case c10d::ReduceOp::BAND: o.code = NRT_OP_BITWISE_AND; break;
    case c10d::ReduceOp::BOR: o.code = NRT_OP_BITWISE_OR; break;
    case c10d::ReduceOp::BXOR: o.code = NRT_OP_BITWISE_XOR; break;
    default: TORCH_CHECK(false, "neuron backend: unknown ReduceOp ", static_cast<int>(op.op_));
  }
  return o;
}

void reduce_into(const at::Tensor& into, const at::Tensor& from, const c10d::ReduceOp& op) {
  if (into.numel() == 0) return;
  const char* name = "all_reduce";
  nrt_op o = reduction_op(op, into.scalar_type(), name);
  o.operands[0] = to_view(into, name);
  o.operands[1] = o.operands[0];
  o.operands[2] = to_view(from, name);
  execute(o);
}

void scale_by(const at::Tensor& flat, double factor, bool divide) {
  if (flat.numel() == 0) return;
  const char* name = "all_reduce";
  nrt_op o{};
  o.code = divide ? NRT_OP_DIV : NRT_OP_MUL;
  o.compute_dtype = to_runtime_dtype(flat.scalar_type(), name);
  o.num_operands = 3;
  o.num_outputs = 1;
  o.operands[0] = to_view(flat, name);
  o.operands[1] = o.operands[0];
  o.operands[2] = o.operands[0];
  o.operands[2].data = nullptr;
  o.operands[2].dtype = NRT_FLOAT64;
  for (int d = 0; d < o.operands[2].ndim; d++) o.operands[2].strides[d] = 0;
  o.immediate_mask = 1u << 2;
  o.immediates[2].is_float = 1;
  o.immediates[2].f = factor;
  execute(o);
}

void ring_reduce_scatter(c10d::Backend& transport, const at::Tensor& flat, const at::Tensor& scratch,
                         int64_t chunk, const c10d::ReduceOp& op) {
  const int P = transport.getSize(), r = transport.getRank();
  const int next = (r + 1) % P, prev = (r + P - 1) % P;
  const int64_t n = flat.numel();
  auto piece = [&](int64_t c) {
    int64_t lo = std::min(c * chunk, n), hi = std::min(lo + chunk, n);
    return flat.narrow(0, lo, hi - lo);
  };
  for (int s = 0; s + 1 < P; s++) {
    at::Tensor out = piece((r - s - 1 + 2 * P) % P), in = piece((r - s - 2 + 2 * P) % P);
    at::Tensor landing = scratch.narrow(0, 0, in.numel());
    exchange(transport, out, landing, next, prev);
    reduce_into(in, landing, op);
  }
}

void ring_allreduce(c10d::Backend& transport, const at::Tensor& flat, const at::Tensor& scratch,
                    const c10d::ReduceOp& op) {
  const int P = transport.getSize(), r = transport.getRank();
  if (P == 1 || flat.numel() == 0) return;
  const int next = (r + 1) % P, prev = (r + P - 1) % P;
  const int64_t n = flat.numel(), chunk = (n + P - 1) / P;
  ring_reduce_scatter(transport, flat, scratch, chunk, op);
  auto piece = [&](int64_t c) {
    int64_t lo = std::min(c * chunk, n), hi = std::min(lo + chunk, n);
    return flat.narrow(0, lo, hi - lo);
  };
  for (int s = 0; s + 1 < P; s++) exchange(transport, piece((r - s + P) % P), piece((r - s - 1 + P) % P), next, prev);
}

}  // namespace torchneuron
