// The scalar attributes of an op descriptor (nrt_scalar): one definition
// for every file that fills in an nrt_op.
#pragma once

#include <cstdint>

#include "neuronrt/nrt.h"

namespace torchneuron {

// An integer attribute; f carries the same value for kernels that take
// either kind.
inline nrt_scalar int_scalar(int64_t v) {
  nrt_scalar s{};
  s.i = v;
  s.f = static_cast<double>(v);
  return s;
}

inline nrt_scalar float_scalar(double v) {
  nrt_scalar s{};
  s.is_float = 1;
  s.f = v;
  return s;
}

}  // namespace torchneuron
