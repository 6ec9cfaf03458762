// The shared-memory segment of a one-host group (distributed_shm_segment.h).
#include "distributed_shm_segment.h"

#include <c10/util/Exception.h>

#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <fstream>
#include <sstream>

namespace torchneuron {
namespace {

constexpr uint64_t kMagic = 0x6e6575726f6e7368ull;  // "neuronsh"
// Bytes of each of a rank's two data buffers: large enough that a step's
// two barriers cost little against its copies, small enough to stay warm
// in the caches of a step's few passes.
constexpr size_t kBufferBytes = size_t{4} << 20;
constexpr size_t kLine = 64;
// Bytes of a mailbox slot: a message's chunk. Two per ordered pair of ranks
// (the memfd's pages are only allocated when touched).
constexpr size_t kMailSlotBytes = size_t{256} << 10;
constexpr size_t kMailboxBytes = 4096 + ShmSegment::kMailSlots * kMailSlotBytes;
constexpr int kSpins = 2000;   // polls before yielding the core
constexpr int kYields = 20;    // yields before sleeping on the futex
constexpr auto kSlice = std::chrono::milliseconds(20);  // a sleep, between liveness checks

struct Control {
  uint64_t magic;
  uint64_t size;
  uint64_t buffer_bytes;
  uint64_t mail_slot_bytes;
};

std::string read_file(const char* path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string read_link(const char* path) {
  char buf[256];
  ssize_t n = readlink(path, buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, n) : std::string("?");
}

// Ranks with the same id can reach each other's memory: one kernel boot,
// one pid namespace (for /proc/<pid>), one network namespace (test "hosts"
// are namespaces), one user.
std::string host_id() {
  char name[256] = {0};
  gethostname(name, sizeof name - 1);
  return std::string(name) + "|" + read_file("/proc/sys/kernel/random/boot_id") + "|" +
         read_link("/proc/self/ns/pid") + "|" + read_link("/proc/self/ns/net") + "|" + std::to_string(geteuid());
}

std::string store_get(const c10::intrusive_ptr<c10d::Store>& store, const std::string& key) {
  auto v = store->get(key);
  return std::string(v.begin(), v.end());
}

size_t control_bytes(int size) {
  size_t bytes = kLine + 3 * kLine * static_cast<size_t>(size);
  return (bytes + 4095) / 4096 * 4096;
}

long futex(std::atomic<uint32_t>* word, int op, uint32_t value, const struct timespec* timeout) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value, timeout, nullptr, 0);
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

std::atomic<int64_t> barrier_wait_ns{0}, barriers{0};

}  // namespace

int64_t shm_barrier_wait_ns() { return barrier_wait_ns.load(); }
int64_t shm_barriers() { return barriers.load(); }

// A rank's line of the control page.
struct ShmSegment::Line {
  std::atomic<uint32_t> arrived;   // barriers this rank has reached (a futex word)
  std::atomic<uint32_t> sleepers;  // peers asleep on `arrived`
  std::atomic<uint32_t> failed;    // this rank gave up on the group
  std::atomic<uint32_t> bell;      // rung when mail for this rank moved (a futex word)
  std::atomic<uint32_t> bell_sleepers;
};
static_assert(sizeof(std::atomic<uint32_t>) == 4 && std::atomic<uint32_t>::is_always_lock_free,
              "futex words must be plain lock-free 32-bit words");
static_assert(std::atomic<uint64_t>::is_always_lock_free, "mailbox counters are shared between processes");

std::unique_ptr<ShmSegment> ShmSegment::connect(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                 std::chrono::milliseconds timeout) {
  if (size < 2) return nullptr;
  const std::string id = host_id();
  store->set("id/" + std::to_string(rank), id + "\n" + std::to_string(getpid()));
  std::vector<int> pids(size);
  bool one_host = true;
  for (int r = 0; r < size; r++) {
    std::string v = store_get(store, "id/" + std::to_string(r));
    auto nl = v.rfind('\n');
    one_host &= nl != std::string::npos && v.substr(0, nl) == id;
    pids[r] = nl == std::string::npos ? 0 : std::atoi(v.c_str() + nl + 1);
  }
  if (!one_host) return nullptr;  // every rank sees the same ids, so every rank decides alike

  std::unique_ptr<ShmSegment> seg(new ShmSegment());
  seg->rank_ = rank;
  seg->size_ = size;
  seg->buffer_bytes_ = kBufferBytes;
  seg->timeout_ = timeout;
  seg->total_ = control_bytes(size) + 2 * kBufferBytes * size + kMailboxBytes * size * size;
  int fd = -1;
  bool ok = false;
  if (rank == 0) {
    fd = static_cast<int>(syscall(SYS_memfd_create, "torchneuron-c10d", MFD_CLOEXEC));
    void* p = MAP_FAILED;
    if (fd >= 0 && fchmod(fd, 0600) == 0 && ftruncate(fd, static_cast<off_t>(seg->total_)) == 0)
      p = mmap(nullptr, seg->total_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p != MAP_FAILED) {
      seg->base_ = static_cast<char*>(p);
      auto* c = reinterpret_cast<Control*>(p);
      c->magic = kMagic;
      c->size = static_cast<uint64_t>(size);
      c->buffer_bytes = kBufferBytes;
      c->mail_slot_bytes = kMailSlotBytes;
      ok = true;
    }
    store->set("segment", ok ? std::to_string(getpid()) + " " + std::to_string(fd) : std::string("-"));
  } else {
    std::string where = store_get(store, "segment");
    int pid = 0, their_fd = -1;
    if (where != "-" && std::sscanf(where.c_str(), "%d %d", &pid, &their_fd) == 2 && pid == pids[0]) {
      std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(their_fd);
      fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
      struct stat st;
      // Ours alone: a private file of this user, of the size rank 0 made.
      if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
          (st.st_mode & 077) == 0 && static_cast<size_t>(st.st_size) == seg->total_) {
        void* p = mmap(nullptr, seg->total_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p != MAP_FAILED) {
          seg->base_ = static_cast<char*>(p);
          auto* c = reinterpret_cast<const Control*>(p);
          ok = c->magic == kMagic && c->size == static_cast<uint64_t>(size) && c->buffer_bytes == kBufferBytes &&
               c->mail_slot_bytes == kMailSlotBytes;
        }
      }
    }
  }
  store->set("mapped/" + std::to_string(rank), ok ? "1" : "0");
  bool all = true;
  for (int r = 0; r < size; r++) all &= store_get(store, "mapped/" + std::to_string(r)) == "1";
  // Every rank has opened it (or given up): the descriptor is no longer
  // needed; the mappings keep the memory.
  if (fd >= 0) close(fd);
  if (!all) return nullptr;  // the destructor unmaps
  seg->pids_ = pids;
  seg->pidfds_.assign(size, -1);
  for (int r = 0; r < size; r++)
    if (r != rank) seg->pidfds_[r] = static_cast<int>(syscall(SYS_pidfd_open, pids[r], 0));
  return seg;
}

ShmSegment::~ShmSegment() {
  if (base_) munmap(base_, total_);
  for (int fd : pidfds_)
    if (fd >= 0) close(fd);
}

ShmSegment::Line* ShmSegment::line(int r) const {
  return reinterpret_cast<Line*>(base_ + kLine + kLine * static_cast<size_t>(r));
}

char* ShmSegment::buffer(int r, int which) const {
  return base_ + control_bytes(size_) + (2 * static_cast<size_t>(r) + which) * buffer_bytes_;
}

void ShmSegment::publish(uint64_t seq, const ShmHeader& h) {
  auto* slot = base_ + kLine * (1 + size_ + 2 * static_cast<size_t>(rank_) + seq % 2);
  std::memcpy(slot, &h, sizeof h);
}

ShmHeader ShmSegment::header(int r, uint64_t seq) const {
  ShmHeader h;
  std::memcpy(&h, base_ + kLine * (1 + size_ + 2 * static_cast<size_t>(r) + seq % 2), sizeof h);
  return h;
}

ShmSegment::Mailbox* ShmSegment::mailbox(int src, int dst) const {
  return reinterpret_cast<Mailbox*>(base_ + control_bytes(size_) + 2 * buffer_bytes_ * size_ +
                                    kMailboxBytes * (static_cast<size_t>(src) * size_ + dst));
}

char* ShmSegment::mail_slot(int src, int dst, uint64_t k) const {
  return reinterpret_cast<char*>(mailbox(src, dst)) + 4096 + (k % kMailSlots) * kMailSlotBytes;
}

size_t ShmSegment::mail_slot_bytes() const { return kMailSlotBytes; }

void ShmSegment::ring(int r) {
  Line* l = line(r);
  l->bell.fetch_add(1, std::memory_order_acq_rel);
  if (l->bell_sleepers.load()) futex(&l->bell, FUTEX_WAKE, INT_MAX, nullptr);
}

uint32_t ShmSegment::bell() const { return line(rank_)->bell.load(std::memory_order_acquire); }

void ShmSegment::check_usable() const {
  TORCH_CHECK(broken_.empty(), "the shared-memory channel failed earlier: ", broken_);
}

void ShmSegment::check_alive(int peer) {
  struct pollfd pfd = {pidfds_[peer], POLLIN, 0};
  if (pidfds_[peer] >= 0 && poll(&pfd, 1, 0) > 0)
    fail("rank " + std::to_string(peer) + " (pid " + std::to_string(pids_[peer]) +
         ") exited; the shared-memory channel is closed");
}

void ShmSegment::idle(int round, uint32_t seen, const std::vector<int>& peers,
                      std::chrono::steady_clock::time_point deadline) {
  Line* me = line(rank_);
  if (round < kSpins) {
    cpu_relax();
    return;
  }
  if (round < kSpins + kYields) {
    sched_yield();
    return;
  }
  check_failed_peers();
  for (int p : peers) check_alive(p);
  auto now = std::chrono::steady_clock::now();
  if (now >= deadline)
    fail("timed out after " + std::to_string(timeout_.count()) + " ms waiting for a message to or from rank " +
         (peers.empty() ? std::string("?") : std::to_string(peers[0])) + " (shared-memory channel)");
  auto left = std::min(std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - now),
                       std::chrono::duration_cast<std::chrono::nanoseconds>(kSlice));
  struct timespec ts = {static_cast<time_t>(left.count() / 1000000000), static_cast<long>(left.count() % 1000000000)};
  me->bell_sleepers.fetch_add(1);
  if (me->bell.load() == seen) futex(&me->bell, FUTEX_WAIT, seen, &ts);
  me->bell_sleepers.fetch_sub(1);
}

void ShmSegment::fail(const std::string& why) {
  broken_ = why;
  line(rank_)->failed.store(1);
  for (int r = 0; r < size_; r++) futex(&line(r)->arrived, FUTEX_WAKE, INT_MAX, nullptr);
  TORCH_CHECK(false, why);
}

void ShmSegment::check_failed_peers() {
  for (int r = 0; r < size_; r++)
    if (r != rank_ && line(r)->failed.load())
      fail("rank " + std::to_string(r) + " gave up on the group's shared-memory channel (it timed out or lost a peer)");
}

void ShmSegment::wait_for(int peer, uint32_t gen, std::chrono::steady_clock::time_point deadline) {
  Line* l = line(peer);
  auto reached = [&] { return static_cast<int32_t>(l->arrived.load(std::memory_order_acquire) - gen) >= 0; };
  for (int i = 0; i < kSpins; i++) {
    if (reached()) return;
    cpu_relax();
  }
  for (int i = 0; i < kYields; i++) {
    if (reached()) return;
    sched_yield();
  }
  for (;;) {
    if (reached()) return;
    check_failed_peers();
    check_alive(peer);
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline)
      fail("timed out after " + std::to_string(timeout_.count()) + " ms waiting for rank " + std::to_string(peer) +
           " (shared-memory channel)");
    auto left = std::min(std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - now),
                         std::chrono::duration_cast<std::chrono::nanoseconds>(kSlice));
    struct timespec ts = {static_cast<time_t>(left.count() / 1000000000), static_cast<long>(left.count() % 1000000000)};
    l->sleepers.fetch_add(1);
    uint32_t seen = l->arrived.load();
    if (static_cast<int32_t>(seen - gen) < 0) futex(&l->arrived, FUTEX_WAIT, seen, &ts);
    l->sleepers.fetch_sub(1);
  }
}

void ShmSegment::barrier() {
  check_usable();
  const uint32_t gen = ++gen_;
  Line* me = line(rank_);
  me->arrived.store(gen);
  if (me->sleepers.load()) futex(&me->arrived, FUTEX_WAKE, INT_MAX, nullptr);
  const auto start = std::chrono::steady_clock::now(), deadline = start + timeout_;
  for (int r = 0; r < size_; r++)
    if (r != rank_) wait_for(r, gen, deadline);
  barrier_wait_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
                         .count();
  barriers++;
}

}  // namespace torchneuron
