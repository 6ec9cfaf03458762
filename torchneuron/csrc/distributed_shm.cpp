// Collectives through a one-host group's shared segment (distributed_shm.h).
//
// all_reduce, per step of at most a buffer: rank r copies its piece, all
// but its own share r, into its buffer; barrier; it reduces share r of
// every peer's buffer into its own tensor, and copies the result into its
// buffer; barrier; it copies every peer's finished share out of the peer's
// buffer. A buffer written at step k was last read at step k - 2, before
// its readers reached a barrier of step k - 1 that the writer has passed.
#include "distributed_shm.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "distributed_ring.h"
#include "runtime_check.h"
#include "tensor_view.h"

namespace torchneuron {

std::atomic<int64_t> ShmCollectives::count_{0};

namespace {

nrt_tensor_view flat_view(void* data, nrt_dtype dtype, int64_t n) {
  nrt_tensor_view v{};
  v.data = data;
  v.dtype = dtype;
  v.ndim = 1;
  v.shape[0] = n;
  v.strides[0] = 1;
  return v;
}

// A dense device tensor's memory: its device address and element type.
struct Span {
  char* data;
  nrt_dtype dtype;
  int64_t elem;
  Span(const at::Tensor& t, const char* what)
      : data(static_cast<char*>(t.numel() ? t.data_ptr() : nullptr)),
        dtype(to_runtime_dtype(t.scalar_type(), what)),
        elem(static_cast<int64_t>(t.element_size())) {}
  char* at(int64_t i) const { return data + i * elem; }
};

}  // namespace

void shm_copy(char* dst, bool dst_host, char* src, bool src_host, nrt_dtype dtype, int64_t n) {
  if (n <= 0) return;
  nrt_op o{};
  o.code = NRT_OP_COPY;
  o.num_operands = 2;
  o.num_outputs = 1;
  o.operands[0] = flat_view(dst, dtype, n);
  o.operands[1] = flat_view(src, dtype, n);
  NRT_CHECK(nrt_op_execute_host(&o, (dst_host ? 1u : 0u) | (src_host ? 2u : 0u)));
}

namespace {

void copy(char* dst, bool dst_host, char* src, bool src_host, nrt_dtype dtype, int64_t n) {
  shm_copy(dst, dst_host, src, src_host, dtype, n);
}

// into (device) = into (op) from (the segment's), n elements.
void combine(const nrt_op& reduction, char* into, char* from, nrt_dtype dtype, int64_t n) {
  if (n <= 0) return;
  nrt_op o = reduction;
  o.operands[0] = flat_view(into, dtype, n);
  o.operands[1] = o.operands[0];
  o.operands[2] = flat_view(from, dtype, n);
  NRT_CHECK(nrt_op_execute_host(&o, 1u << 2));
}

// data (device) /= by, n elements (AVG).
void divide(char* data, nrt_dtype dtype, int64_t n, double by) {
  if (n <= 0) return;
  nrt_op o{};
  o.code = NRT_OP_DIV;
  o.compute_dtype = dtype;
  o.num_operands = 3;
  o.num_outputs = 1;
  o.operands[0] = flat_view(data, dtype, n);
  o.operands[1] = o.operands[0];
  o.operands[2] = flat_view(nullptr, NRT_FLOAT64, n);
  o.operands[2].strides[0] = 0;
  o.immediate_mask = 1u << 2;
  o.immediates[2].is_float = 1;
  o.immediates[2].f = by;
  NRT_CHECK(nrt_op_execute(&o));
}

std::string describe_dtype(int64_t dtype) {
  return dtype < 0 ? std::string("no dtype") : std::string(c10::toString(static_cast<at::ScalarType>(dtype)));
}

const char* kind_name(int64_t kind) {
  switch (kind) {
    case ShmCollectives::kAllReduce: return "all_reduce";
    case ShmCollectives::kReduceScatter: return "reduce_scatter";
    case ShmCollectives::kAllGather: return "all_gather";
    case ShmCollectives::kBroadcast: return "broadcast";
    case ShmCollectives::kAllToAll: return "all_to_all";
    case ShmCollectives::kGather: return "gather";
    case ShmCollectives::kScatter: return "scatter";
    default: return "an unknown collective";
  }
}

}  // namespace

void ShmCollectives::agree(const char* /*what*/, Kind kind, const std::vector<at::Tensor>& tensors, int64_t op,
                           int64_t root) {
  int64_t numel = 0;
  for (const auto& t : tensors) numel += t.numel();
  agree(kind, tensors.empty() ? -1 : static_cast<int64_t>(tensors[0].scalar_type()),
        static_cast<int64_t>(tensors.size()), numel, op, root);
}

void ShmCollectives::agree(Kind kind, int64_t dtype, int64_t count, int64_t numel, int64_t op, int64_t root) {
  const ShmHeader mine{kind, numel, dtype, count, op, root};
  const uint64_t seq = seq_++;
  seg_->publish(seq, mine);
  seg_->barrier();
  count_++;
  for (int r = 0; r < seg_->size(); r++) {
    ShmHeader h = seg_->header(r, seq);
    TORCH_CHECK(h.kind == mine.kind && h.op == mine.op && h.root == mine.root, "ranks disagree: rank ", r,
                " runs ", kind_name(h.kind), " (op ", h.op, ", root ", h.root, "), rank ", seg_->rank(), " ",
                kind_name(mine.kind), " (op ", mine.op, ", root ", mine.root, ")");
    TORCH_CHECK(h.numel == mine.numel && h.dtype == mine.dtype && h.count == mine.count, "ranks disagree: rank ",
                r, " passes ", h.count, " tensor(s) of ", h.numel, " elements", kind == kAllToAll ? " per row" : "",
                " of ", describe_dtype(h.dtype), ", rank ", seg_->rank(), " ", mine.count, " of ", mine.numel, " elements",
                kind == kAllToAll ? " per row" : "", " of ", describe_dtype(mine.dtype));
  }
}

void ShmCollectives::all_reduce(const at::Tensor& flat, const c10d::ReduceOp& op) {
  const char* what = "all_reduce";
  const int P = seg_->size(), r = seg_->rank();
  const Span x(flat, what);
  const nrt_op reduction = reduction_op(op, flat.scalar_type(), what);
  const int64_t n = flat.numel(), cap = static_cast<int64_t>(seg_->buffer_bytes()) / x.elem;
  for (int64_t base = 0; base < n; base += cap) {
    const int64_t m = std::min(cap, n - base), share = (m + P - 1) / P;
    auto lo = [&](int q) { return std::min(q * share, m); };
    auto len = [&](int q) { return std::min((q + 1) * share, m) - lo(q); };
    const int w = next_buffer();
    char* mine = seg_->buffer(r, w);
    // Everything but share r, at its place in the buffer.
    copy(mine, true, x.at(base), false, x.dtype, lo(r));
    copy(mine + (lo(r) + len(r)) * x.elem, true, x.at(base + lo(r) + len(r)), false, x.dtype, m - lo(r) - len(r));
    seg_->barrier();
    for (int q = 0; q < P; q++)
      if (q != r) combine(reduction, x.at(base + lo(r)), seg_->buffer(q, w) + lo(r) * x.elem, x.dtype, len(r));
    if (op == c10d::ReduceOp::AVG) divide(x.at(base + lo(r)), x.dtype, len(r), P);
    copy(mine + lo(r) * x.elem, true, x.at(base + lo(r)), false, x.dtype, len(r));
    seg_->barrier();
    for (int q = 0; q < P; q++)
      if (q != r) copy(x.at(base + lo(q)), false, seg_->buffer(q, w) + lo(q) * x.elem, true, x.dtype, len(q));
  }
}

void ShmCollectives::reduce_scatter(const at::Tensor& flat, int64_t block, const c10d::ReduceOp& op) {
  const char* what = "reduce_scatter";
  const int P = seg_->size(), r = seg_->rank();
  const Span x(flat, what);
  const nrt_op reduction = reduction_op(op, flat.scalar_type(), what);
  const int64_t cap = std::max<int64_t>(1, static_cast<int64_t>(seg_->buffer_bytes()) / x.elem / P);
  for (int64_t lo = 0; lo < block; lo += cap) {
    const int64_t m = std::min(cap, block - lo);
    const int w = next_buffer();
    char* mine = seg_->buffer(r, w);
    for (int q = 0; q < P; q++)
      if (q != r) copy(mine + q * m * x.elem, true, x.at(q * block + lo), false, x.dtype, m);
    seg_->barrier();
    char* out = x.at(r * block + lo);
    for (int q = 0; q < P; q++)
      if (q != r) combine(reduction, out, seg_->buffer(q, w) + r * m * x.elem, x.dtype, m);
    if (op == c10d::ReduceOp::AVG) divide(out, x.dtype, m, P);
  }
}

void ShmCollectives::all_gather(const std::vector<at::Tensor>& outs, const at::Tensor& input) {
  const char* what = "all_gather";
  const int P = seg_->size(), r = seg_->rank();
  const Span in(input, what);
  std::vector<Span> out;
  for (const auto& t : outs) out.emplace_back(t, what);
  const int64_t n = input.numel(), cap = static_cast<int64_t>(seg_->buffer_bytes()) / in.elem;
  if (n > 0) {
    nrt_op o{};
    o.code = NRT_OP_COPY;
    o.num_operands = 2;
    o.num_outputs = 1;
    o.operands[0] = flat_view(out[r].data, in.dtype, n);
    o.operands[1] = flat_view(in.data, in.dtype, n);
    NRT_CHECK(nrt_op_execute(&o));
  }
  for (int64_t lo = 0; lo < n; lo += cap) {
    const int64_t m = std::min(cap, n - lo);
    const int w = next_buffer();
    copy(seg_->buffer(r, w), true, in.at(lo), false, in.dtype, m);
    seg_->barrier();
    for (int q = 0; q < P; q++)
      if (q != r) copy(out[q].at(lo), false, seg_->buffer(q, w), true, in.dtype, m);
  }
}

void ShmCollectives::broadcast(const at::Tensor& t, int root) {
  const Span x(t, "broadcast");
  const int64_t n = t.numel(), cap = static_cast<int64_t>(seg_->buffer_bytes()) / x.elem;
  for (int64_t lo = 0; lo < n; lo += cap) {
    const int64_t m = std::min(cap, n - lo);
    char* buf = seg_->buffer(root, next_buffer());
    if (seg_->rank() == root) copy(buf, true, x.at(lo), false, x.dtype, m);
    seg_->barrier();
    if (seg_->rank() != root) copy(x.at(lo), false, buf, true, x.dtype, m);
  }
}

// all_to_all: one step publishes every rank's splits, then each step
// moves up to a slot (a buffer / size) of every pair's rows: rank r's piece
// for rank s lies in slot s of r's buffer.
void ShmCollectives::all_to_all(const at::Tensor& out, const at::Tensor& in, const std::vector<int64_t>& out_splits,
                                const std::vector<int64_t>& in_splits, int64_t row) {
  const char* what = "all_to_all_single";
  const int P = seg_->size(), r = seg_->rank();
  const Span x(in, what), y(out, what);
  const size_t list_bytes = sizeof(int64_t) * P;
  TORCH_CHECK(2 * list_bytes <= seg_->buffer_bytes(), "all_to_all: a group of ", P, " ranks is too large");
  // Every rank's splits, read after the barrier: splits[q] is rank q's
  // input splits followed by its output splits.
  char* mine = seg_->buffer(r, next_buffer());
  std::memcpy(mine, in_splits.data(), list_bytes);
  std::memcpy(mine + list_bytes, out_splits.data(), list_bytes);
  seg_->barrier();
  std::vector<std::vector<int64_t>> splits(P, std::vector<int64_t>(2 * P));
  for (int q = 0; q < P; q++) std::memcpy(splits[q].data(), seg_->buffer(q, which_), 2 * list_bytes);
  int64_t longest = 0;  // rows of the longest piece between two ranks
  for (int q = 0; q < P; q++)
    for (int s = 0; s < P; s++) {
      const int64_t sends = splits[q][s], expects = splits[s][P + q];
      TORCH_CHECK(sends == expects && sends >= 0, "splits disagree: rank ", q, " sends ", sends, " rows to rank ", s,
                  ", which expects ", expects);
      if (q != s) longest = std::max(longest, sends);
    }
  std::vector<int64_t> in_at(P + 1, 0), out_at(P + 1, 0);  // element offsets, from this rank's own splits
  for (int s = 0; s < P; s++) {
    in_at[s + 1] = in_at[s] + in_splits[s] * row;
    out_at[s + 1] = out_at[s] + out_splits[s] * row;
  }
  copy(y.at(out_at[r]), false, x.at(in_at[r]), false, x.dtype, in_splits[r] * row);
  const int64_t slot = std::max<int64_t>(1, static_cast<int64_t>(seg_->buffer_bytes()) / x.elem / P);
  const int64_t steps = (longest * row + slot - 1) / slot;
  auto piece = [&](int64_t total, int64_t k) { return std::max<int64_t>(0, std::min(slot, total - k * slot)); };
  for (int64_t k = 0; k < steps; k++) {
    const int w = next_buffer();
    for (int s = 0; s < P; s++)
      if (s != r)
        copy(seg_->buffer(r, w) + s * slot * x.elem, true, x.at(in_at[s] + k * slot), false, x.dtype,
             piece(in_at[s + 1] - in_at[s], k));
    seg_->barrier();
    for (int q = 0; q < P; q++)
      if (q != r)
        copy(y.at(out_at[q] + k * slot), false, seg_->buffer(q, w) + r * slot * x.elem, true, x.dtype,
             piece(out_at[q + 1] - out_at[q], k));
  }
}

void ShmCollectives::gather(const std::vector<at::Tensor>& outs, const at::Tensor& input, int root) {
  const char* what = "gather";
  const int P = seg_->size(), r = seg_->rank();
  const Span in(input, what);
  std::vector<Span> out;
  for (const auto& t : outs) out.emplace_back(t, what);
  const int64_t n = input.numel(), cap = static_cast<int64_t>(seg_->buffer_bytes()) / in.elem;
  if (r == root) copy(out[r].data, false, in.data, false, in.dtype, n);
  for (int64_t lo = 0; lo < n; lo += cap) {
    const int64_t m = std::min(cap, n - lo);
    const int w = next_buffer();
    if (r != root) copy(seg_->buffer(r, w), true, in.at(lo), false, in.dtype, m);
    seg_->barrier();
    if (r == root)
      for (int q = 0; q < P; q++)
        if (q != r) copy(out[q].at(lo), false, seg_->buffer(q, w), true, in.dtype, m);
  }
}

// scatter: root's buffer holds a slot (a buffer / size) per rank.
void ShmCollectives::scatter(const at::Tensor& out, const std::vector<at::Tensor>& ins, int root) {
  const char* what = "scatter";
  const int P = seg_->size(), r = seg_->rank();
  const Span y(out, what);
  std::vector<Span> in;
  for (const auto& t : ins) in.emplace_back(t, what);
  const int64_t n = out.numel();
  const int64_t slot = std::max<int64_t>(1, static_cast<int64_t>(seg_->buffer_bytes()) / y.elem / P);
  if (r == root) copy(y.data, false, in[r].data, false, y.dtype, n);
  for (int64_t lo = 0; lo < n; lo += slot) {
    const int64_t m = std::min(slot, n - lo);
    char* buf = seg_->buffer(root, next_buffer());
    if (r == root)
      for (int q = 0; q < P; q++)
        if (q != r) copy(buf + q * slot * y.elem, true, in[q].at(lo), false, y.dtype, m);
    seg_->barrier();
    if (r != root) copy(y.at(lo), false, buf + r * slot * y.elem, true, y.dtype, m);
  }
}

}  // namespace torchneuron
