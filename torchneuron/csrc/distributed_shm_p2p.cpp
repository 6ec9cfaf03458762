// Point-to-point messages through the shared segment (distributed_shm_p2p.h).
#include "distributed_shm_p2p.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <string>

#include "distributed_shm.h"

namespace torchneuron {
namespace {

std::atomic<int64_t> messages{0};

// At the start of every slot.
struct ChunkHeader {
  int64_t numel, dtype, tag, bytes, index;
};
constexpr size_t kHeaderBytes = 64;
static_assert(sizeof(ChunkHeader) <= kHeaderBytes, "a chunk's header fits its place");

std::string describe_message(int64_t numel, int64_t dtype) {
  return std::to_string(numel) + " elements of " + c10::toString(static_cast<at::ScalarType>(dtype));
}

// A message under way.
struct Message {
  const P2POp* op;
  char* data;           // the tensor's device memory
  int64_t bytes;        // the tensor's
  int64_t chunks = -1;  // a receive learns it from the first header
  int64_t done = 0;     // chunks posted or taken
  bool discard = false;  // a receive that does not fit: taken, not copied
  ChunkHeader first{};
  bool finished() const { return chunks >= 0 && done == chunks; }
};

int64_t chunks_of(int64_t bytes, int64_t payload) { return std::max<int64_t>(1, (bytes + payload - 1) / payload); }

class Exchange {
 public:
  Exchange(ShmSegment& seg, const std::vector<P2POp>& ops) : seg_(seg) {
    payload_ = static_cast<int64_t>(seg.mail_slot_bytes() - kHeaderBytes);
    for (const auto& op : ops) {
      Message m;
      m.op = &op;
      m.data = static_cast<char*>(op.tensor.numel() ? op.tensor.data_ptr() : nullptr);
      m.bytes = static_cast<int64_t>(op.tensor.nbytes());
      if (op.send) m.chunks = chunks_of(m.bytes, payload_);
      msgs_.push_back(m);
      if (std::find(peers_.begin(), peers_.end(), op.peer) == peers_.end()) peers_.push_back(op.peer);
    }
  }

  void run() {
    seg_.check_usable();
    auto deadline = std::chrono::steady_clock::now() + seg_.timeout();
    const int size = seg_.size();
    for (int round = 0;;) {
      const uint32_t seen = seg_.bell();
      bool moved = false, all = true;
      // Only the first unfinished message of each direction and peer moves.
      std::vector<char> busy(2 * static_cast<size_t>(size), 0);
      for (auto& m : msgs_) {
        if (m.finished()) continue;
        all = false;
        char& b = busy[2 * static_cast<size_t>(m.op->peer) + (m.op->send ? 1 : 0)];
        if (b) continue;
        b = 1;
        moved |= m.op->send ? post(m) : take(m);
      }
      if (all) break;
      if (moved) {
        round = 0;
        deadline = std::chrono::steady_clock::now() + seg_.timeout();
        continue;
      }
      seg_.idle(round++, seen, peers_, deadline);
    }
    messages += static_cast<int64_t>(msgs_.size());
    TORCH_CHECK(error_.empty(), error_);
  }

 private:
  // The next chunk of a send, if its slot is free.
  bool post(Message& m) {
    const int me = seg_.rank(), peer = m.op->peer;
    auto* box = seg_.mailbox(me, peer);
    const uint64_t k = box->posted.load(std::memory_order_relaxed);  // ours alone to write
    if (k - box->taken.load(std::memory_order_acquire) >= ShmSegment::kMailSlots) return false;
    char* slot = seg_.mail_slot(me, peer, k);
    const ChunkHeader h{m.op->tensor.numel(), static_cast<int64_t>(m.op->tensor.scalar_type()), m.op->tag, m.bytes,
                        m.done};
    std::memcpy(slot, &h, sizeof h);
    const int64_t at = m.done * payload_;
    shm_copy(slot + kHeaderBytes, true, m.data + at, false, NRT_UINT8, std::min(payload_, m.bytes - at));
    box->posted.store(k + 1, std::memory_order_release);
    seg_.ring(peer);
    m.done++;
    return true;
  }

  // The next chunk of a receive, if it has arrived.
  bool take(Message& m) {
    const int me = seg_.rank(), peer = m.op->peer;
    auto* box = seg_.mailbox(peer, me);
    const uint64_t k = box->taken.load(std::memory_order_relaxed);  // ours alone to write
    if (box->posted.load(std::memory_order_acquire) <= k) return false;
    char* slot = seg_.mail_slot(peer, me, k);
    ChunkHeader h;
    std::memcpy(&h, slot, sizeof h);
    if (m.done == 0) {
      admit(m, h);
    } else if (h.numel != m.first.numel || h.dtype != m.first.dtype || h.tag != m.first.tag ||
               h.bytes != m.first.bytes || h.index != m.done) {
      seg_.fail("recv from rank " + std::to_string(peer) + ": chunk " + std::to_string(m.done) +
                " of a message has a malformed header");
    }
    if (!m.discard) {
      // Sized by the tensor (which the first header matched) and the slot.
      const int64_t at = m.done * payload_;
      shm_copy(m.data + at, false, slot + kHeaderBytes, true, NRT_UINT8, std::min(payload_, m.bytes - at));
    }
    box->taken.store(k + 1, std::memory_order_release);
    seg_.ring(peer);
    m.done++;
    return true;
  }

  // The first chunk of a receive: is it a well-formed message, and does it
  // fit the tensor?
  void admit(Message& m, const ChunkHeader& h) {
    const int peer = m.op->peer;
    int64_t elem = 0;
    if (h.dtype >= 0 && h.dtype < static_cast<int64_t>(at::ScalarType::NumOptions)) {
      try {
        elem = static_cast<int64_t>(c10::elementSize(static_cast<at::ScalarType>(h.dtype)));
      } catch (const c10::Error&) {
        elem = 0;
      }
    }
    if (h.index != 0 || elem <= 0 || h.numel < 0 || h.numel > std::numeric_limits<int64_t>::max() / elem ||
        h.bytes != h.numel * elem)
      seg_.fail("recv from rank " + std::to_string(peer) + ": a malformed message header (" +
                std::to_string(h.numel) + " elements, dtype " + std::to_string(h.dtype) + ", " +
                std::to_string(h.bytes) + " bytes)");
    m.first = h;
    m.chunks = chunks_of(h.bytes, payload_);
    const auto& t = m.op->tensor;
    const int64_t want_dtype = static_cast<int64_t>(t.scalar_type());
    std::string why;
    if (h.numel != t.numel() || h.dtype != want_dtype)
      why = "the message has " + describe_message(h.numel, h.dtype) + ", the tensor " + describe_message(t.numel(), want_dtype);
    else if (h.tag != m.op->tag)
      why = "the message has tag " + std::to_string(h.tag) + ", the receive tag " + std::to_string(m.op->tag);
    if (why.empty()) return;
    m.discard = true;
    if (error_.empty())
      error_ = "recv from rank " + std::to_string(peer) + ": " + why + "; nothing was written into it";
  }

  ShmSegment& seg_;
  int64_t payload_ = 0;
  std::vector<Message> msgs_;
  std::vector<int> peers_;
  std::string error_;
};

}  // namespace

void run_p2p_shm(ShmSegment& seg, const std::vector<P2POp>& ops) { Exchange(seg, ops).run(); }

int64_t shm_messages() { return messages.load(); }

}  // namespace torchneuron
