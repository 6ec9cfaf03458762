// An index out of range, raised in Python as torchneuron.IndexOutOfRangeError,
// which is both an IndexError and a RuntimeError.
//
// PyTorch's CPU kernels are not consistent about which of the two they
// raise (gather, scatter, take: RuntimeError; index_select, embedding,
// x[i]: IndexError), and ours find the bad index asynchronously, often at a
// synchronisation that cannot tell which op it came from. An exception of
// both types is an instance of whatever the CPU raises for the same call,
// so `except RuntimeError` and `except IndexError` written for the CPU both
// catch it.
#pragma once

#include <string>

#include <c10/util/StringUtil.h>

namespace torchneuron {

[[noreturn]] void throw_index_out_of_range(const std::string& message);

}  // namespace torchneuron

// TORCH_CHECK_INDEX's counterpart for indices out of range.
#define NEURON_CHECK_INDEX_RANGE(cond, ...) \
  do {                                      \
    if (C10_UNLIKELY(!(cond)))              \
      ::torchneuron::throw_index_out_of_range(::c10::str(__VA_ARGS__)); \
  } while (0)
