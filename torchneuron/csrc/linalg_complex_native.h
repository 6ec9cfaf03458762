// Registering a linear-algebra op whose kernels take complex64/complex128:
// a call with a complex tensor runs natively; the other storage dtypes
// (wide unsigned) reach the counted fallback, which raises the CPU's error;
// the rest run natively, and fall back at a runtime limit.
#pragma once

#include <ATen/ATen.h>
#include <torch/library.h>

#include <utility>

#include "storage_fallback.h"

namespace torchneuron {
namespace linalg_detail {

inline bool complex_arg(const at::Tensor& t) { return t.defined() && t.is_complex(); }
template <class T>
bool complex_arg(const T&) {
  return false;
}

}  // namespace linalg_detail

template <class Ret, class... Args>
torch::CppFunction complex_native(const char* overload_name, Ret (*fn)(Args...)) {
  auto [name, overload] = storage_fallback_detail::split_overload(overload_name);
  return torch::CppFunction([fn, name = name, overload = overload](Args... args) -> Ret {
    if ((linalg_detail::complex_arg(args) || ...)) return fn(std::forward<Args>(args)...);
    return storage_fallback_detail::native_else_fallback<Ret, Args...>(name, overload, fn,
                                                                       std::forward<Args>(args)...);
  });
}

}  // namespace torchneuron
