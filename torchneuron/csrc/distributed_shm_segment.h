// The shared-memory segment of a process group whose ranks all run on one
// host (distributed_shm.cpp moves the collectives' bytes through it).
//
// Ranks find out that they share a host through the group's store: each
// publishes its host id (boot id, pid and network namespaces, user), and
// the segment is made only when every id is the same. Rank 0 creates it as
// an unlinked memfd (mode 0600, no name in any file system) and publishes
// its pid and descriptor number; the others open it through
// /proc/<pid>/fd/<n>, which only the same user (or root) may do, check that
// it belongs to their user, is private and has the expected size, map it,
// and say so through the store. Unless every rank mapped it, every rank
// gives it up (the group uses gloo alone). No socket is opened.
//
// Layout: a control page (one line per rank: its barrier counter, which
// is also a futex word, its failure flag and its mail bell; two header
// slots per rank for the collectives' descriptions), then two data buffers
// per rank, then a mailbox per ordered pair of ranks for point-to-point
// messages (distributed_shm_p2p.cpp): its two counters (chunks posted by
// the sender, taken by the receiver) and two slots.
// Barriers spin briefly, then sleep on the futex in slices, checking the
// group's timeout, the peers' failure flags and whether a peer process
// has exited (pidfd): a dead or hung peer is an error, never a hang.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace torchneuron {

// What a rank says about the collective it is about to run; every rank
// checks every other's before any peer byte lands in device memory.
struct ShmHeader {
  int64_t kind, numel, dtype, count, op, root;
};

// Nanoseconds this process's segments spent waiting in barriers for a
// later peer, and barriers passed (for benchmarks: how much of a
// collective's time is its ranks' skew).
int64_t shm_barrier_wait_ns();
int64_t shm_barriers();

class ShmSegment {
 public:
  // The segment of the group, or nullptr when its ranks are not all on this
  // host or any rank could not map it (every rank then gets nullptr).
  static std::unique_ptr<ShmSegment> connect(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                             std::chrono::milliseconds timeout);
  ~ShmSegment();

  int rank() const { return rank_; }
  int size() const { return size_; }
  // Bytes of each data buffer.
  size_t buffer_bytes() const { return buffer_bytes_; }
  // Data buffer `which` (0 or 1) of rank r.
  char* buffer(int r, int which) const;

  // Publishes this rank's header for collective number seq.
  void publish(uint64_t seq, const ShmHeader& h);
  // Rank r's header for collective number seq (after a barrier).
  ShmHeader header(int r, uint64_t seq) const;

  // Waits until every rank has reached this barrier. Throws (and marks
  // this rank failed, which fails the peers' waits at once) on a timeout,
  // a peer that exited, or a peer that failed.
  void barrier();

  // The mailbox of messages from rank src to rank dst. Each counter has
  // one writer: posted the sender, taken the receiver.
  struct Mailbox {
    std::atomic<uint64_t> posted, taken;
  };
  static constexpr int kMailSlots = 2;
  Mailbox* mailbox(int src, int dst) const;
  // The slot of chunk k of the pair's messages.
  char* mail_slot(int src, int dst, uint64_t k) const;
  size_t mail_slot_bytes() const;
  // Wakes rank r's waits for mail (after a post or a take for it).
  void ring(int r);
  // This rank's bell: read it before looking at the mailboxes, then pass
  // it to idle, so that a ring in between is not slept through.
  uint32_t bell() const;
  // One idle round of a wait for mail: spins, then yields, then sleeps on
  // the bell in slices. Throws (failing the segment) when a peer of
  // `peers` has exited, any peer failed, or the deadline passed.
  void idle(int round, uint32_t seen, const std::vector<int>& peers,
            std::chrono::steady_clock::time_point deadline);
  std::chrono::milliseconds timeout() const { return timeout_; }
  // Throws when the segment failed earlier.
  void check_usable() const;
  // Marks the segment failed (this rank and, at once, its peers) and throws.
  [[noreturn]] void fail(const std::string& why);

 private:
  ShmSegment() = default;
  struct Line;
  Line* line(int r) const;
  void wait_for(int peer, uint32_t gen, std::chrono::steady_clock::time_point deadline);
  void check_failed_peers();
  void check_alive(int peer);

  int rank_ = 0, size_ = 0;
  size_t buffer_bytes_ = 0, total_ = 0;
  char* base_ = nullptr;
  uint32_t gen_ = 0;  // barriers passed
  std::chrono::milliseconds timeout_{0};
  std::vector<int> pids_, pidfds_;
  std::string broken_;  // why the segment failed; later collectives fail at once
};

}  // namespace torchneuron
