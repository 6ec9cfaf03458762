// uint16, uint32 and uint64 (the wide unsigned dtypes) as inputs of the
// reductions the CPU defines for them. No runtime kernel computes in these
// dtypes; the CPU does not either, it converts:
//  - sum, nansum, prod, cumsum, cumprod convert each element to the result
//    dtype (dtype=, else the out's dtype, else int64) and accumulate there,
//    so self converted on the device gives the CPU's result bit for bit
//    for integer results (arithmetic modulo 2^n); a wide unsigned (or
//    complex32) result dtype has no CPU kernel, and the fallback raises
//    the CPU's error;
//  - any and all test x != 0, which the same-width signed view answers.
#pragma once

#include <ATen/ATen.h>

#include <optional>

namespace torchneuron {

inline bool is_wide_unsigned(at::ScalarType t) {
  return t == at::kUInt16 || t == at::kUInt32 || t == at::kUInt64;
}

// int16, int32, int64 for uint16, uint32, uint64.
inline at::ScalarType same_width_signed(at::ScalarType t) {
  return t == at::kUInt16 ? at::kShort : t == at::kUInt32 ? at::kInt : at::kLong;
}

// call(self converted to the result dtype), or nothing (see above).
template <class Call>
std::optional<at::Tensor> wide_unsigned_accumulate(const at::Tensor& self, std::optional<at::ScalarType> dtype,
                                                   const at::Tensor* out, Call&& call) {
  if (!self.defined() || !is_wide_unsigned(self.scalar_type())) return std::nullopt;
  const at::ScalarType result = dtype ? *dtype : out && out->defined() ? out->scalar_type() : at::kLong;
  if (is_wide_unsigned(result) || result == at::kComplexHalf) return std::nullopt;
  return call(self.to(result));
}

// call(self viewed as the same-width signed dtype), or nothing.
template <class Call>
std::optional<at::Tensor> wide_unsigned_nonzero(const at::Tensor& self, Call&& call) {
  if (!self.defined() || !is_wide_unsigned(self.scalar_type())) return std::nullopt;
  return call(self.view(same_width_signed(self.scalar_type())));
}

}  // namespace torchneuron
