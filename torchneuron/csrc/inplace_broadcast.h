// In-place ops write self, so the operands' broadcast shape must be self's
// own: the CPU's check (TensorIterator's) with its error type and message,
// for the native paths that build no TensorIterator (the complex ones).
#pragma once

#include <ATen/ExpandUtils.h>
#include <c10/util/Exception.h>

#include <initializer_list>
#include <vector>

namespace torchneuron {

// Raises the CPU's RuntimeError when `self` cannot hold the broadcast of
// itself with `others` (and infer_size's own error when they do not
// broadcast at all).
inline void check_inplace_broadcast(at::IntArrayRef self, std::initializer_list<at::IntArrayRef> others) {
  std::vector<int64_t> shape = self.vec();
  for (at::IntArrayRef other : others) shape = at::infer_size(shape, other);
  TORCH_CHECK(at::IntArrayRef(shape) == self, "output with shape ", self, " doesn't match the broadcast shape ",
              at::IntArrayRef(shape));
}

}  // namespace torchneuron
