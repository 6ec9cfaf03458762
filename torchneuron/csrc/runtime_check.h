// Turns runtime statuses into PyTorch exceptions.
//
// NRT_CHECK(expr) throws an exception that Python maps to the
// matching exception (OutOfMemoryError, ValueError, ...; an index out of
// range is torchneuron.IndexOutOfRangeError, see index_error.h) with the
// runtime's message and the caller's file and line.
#pragma once

#include <c10/util/Exception.h>

#include "neuronrt/nrt.h"

namespace torchneuron {

[[noreturn]] void throw_runtime_error(nrt_status status, const char* expr, const char* file,
                                      int line);

}  // namespace torchneuron

#define NRT_CHECK(expr)                                                       \
  do {                                                                        \
    nrt_status nrt_check_status_ = (expr);                                    \
    if (C10_UNLIKELY(nrt_check_status_ != NRT_SUCCESS))                       \
      ::torchneuron::throw_runtime_error(nrt_check_status_, #expr, __FILE__, __LINE__); \
  } while (0)
