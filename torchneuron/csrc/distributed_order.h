// The order in which a process group's host tasks reach gloo. Collectives
// queued on different neuron streams run on different stream workers, at
// times that differ from rank to rank; gloo matches a collective across
// ranks by the order in which each rank calls it (its tag), and the rings'
// sends and receives by peer and tag. So every task takes a ticket when it
// is queued (in the order the host issued it, the same on every rank) and
// runs only when every earlier ticket has run or been skipped. Deadlock-free
// for stream dependencies made by events: an event a stream waits for was
// recorded before the wait was queued, hence before any later ticket.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace torchneuron {

class TaskOrder {
 public:
  // The next ticket, on the issuing (host) thread.
  uint64_t take() {
    std::lock_guard<std::mutex> lock(mutex_);
    return issued_++;
  }

  // Blocks until every ticket before `ticket` is done.
  void await(uint64_t ticket) {
    std::unique_lock<std::mutex> lock(mutex_);
    turn_.wait(lock, [&] { return done_ == ticket; });
  }

  // `ticket` (the current one) has run or was skipped.
  void finish(uint64_t ticket) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = ticket + 1;
    }
    turn_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable turn_;
  uint64_t issued_ = 0, done_ = 0;
};

}  // namespace torchneuron
