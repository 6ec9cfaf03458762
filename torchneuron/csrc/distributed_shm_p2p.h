// Point-to-point messages between ranks of one host through the group's
// shared segment (distributed_shm_segment.h), for the c10d backend
// "neuron" (distributed.cpp); groups that span hosts use gloo
// (distributed_p2p.h).
//
// Each ordered pair of ranks has a mailbox of two slots and two counters of
// its own (chunks posted by the sender, chunks taken by the receiver). A
// message is one or more chunks of at most a slot, each after a header
// (element count, dtype, tag, bytes, chunk index): a sender may run up to
// two chunks ahead of its receiver, so a short send completes without
// waiting for the receive. The receiver checks the first header against
// its tensor before any byte lands in device memory; a message that does
// not fit is taken without being copied (the pair stays in step) and the
// receive fails naming both. Copies into the tensor are sized by its own
// bytes and the segment's slot, never by what a peer wrote; a malformed
// header fails the segment.
//
// The ops of a batch make progress together (an exchange both ways cannot
// deadlock), each pair's messages in order. A wait sleeps on this rank's
// bell, checking whether the peers are alive and failed, and the group's
// timeout since the last progress: a dead or hung peer is an error.
//
// Tensors are dense device tensors (the caller stages others). Run on a
// stream worker inside a host task, in the group's task order.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "distributed_p2p.h"
#include "distributed_shm_segment.h"

namespace torchneuron {

// Runs every op (sends and receives, in any order); throws after all have
// moved if a message did not fit its tensor.
void run_p2p_shm(ShmSegment& seg, const std::vector<P2POp>& ops);

// Messages sent or received through a segment in this process (for tests).
int64_t shm_messages();

}  // namespace torchneuron
