// Routing calls that meet a storage dtype (complex, wide unsigned: see
// tensor_view.h) to the counted CPU fallback, for registrations whose
// kernels compute only in the runtime's ten dtypes. Register
//   m.impl("sum.dim_IntList", native_or_fallback("sum.dim_IntList", sum_dim));
// and a call with a complex or wide-unsigned tensor (or dtype= argument, or
// complex number) runs the CPU kernel through the fallback instead of being
// refused; every other call goes to the native kernel, and to the fallback
// if that meets one of the runtime's limits (runtime_limits.h).
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/stack.h>
#include <torch/library.h>

#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <type_traits>
#include <vector>

#include "fallback.h"
#include "op_tracking.h"
#include "runtime_limits.h"
#include "tensor_view.h"

namespace torchneuron {
namespace storage_fallback_detail {

inline bool storage_arg(const at::Tensor& t) { return t.defined() && is_storage_dtype(t.scalar_type()); }
inline bool storage_arg(const std::optional<at::Tensor>& t) { return t && storage_arg(*t); }
inline bool storage_arg(const c10::Scalar& s) { return s.isComplex(); }
inline bool storage_arg(const std::optional<c10::Scalar>& s) { return s && s->isComplex(); }
inline bool storage_arg(const std::optional<at::ScalarType>& t) { return t && is_storage_dtype(*t); }
template <class T>
bool storage_arg(const T&) {
  return false;
}

// A complex tensor or number among the arguments: what complex_first's
// count counts (its try also serves the wide unsigned dtypes).
inline bool complex_arg(const at::Tensor& t) { return t.defined() && t.is_complex(); }
inline bool complex_arg(const std::optional<at::Tensor>& t) { return t && complex_arg(*t); }
inline bool complex_arg(const c10::Scalar& s) { return s.isComplex(); }
inline bool complex_arg(const std::optional<c10::Scalar>& s) { return s && s->isComplex(); }
template <class T>
bool complex_arg(const T&) {
  return false;
}

template <class T>
void note_written(std::vector<at::Tensor*>& written, T&& arg) {
  if constexpr (std::is_same_v<T, at::Tensor&>) written.push_back(&arg);
}

template <class Ret>
Ret result_from(torch::jit::Stack& stack, const std::vector<at::Tensor*>& written) {
  if constexpr (std::is_same_v<Ret, at::Tensor>) {
    return stack.back().toTensor();
  } else if constexpr (std::is_same_v<Ret, at::Tensor&>) {
    return *written.at(0);
  } else if constexpr (std::is_same_v<Ret, std::tuple<at::Tensor, at::Tensor>>) {
    size_t n = stack.size();
    return {stack[n - 2].toTensor(), stack[n - 1].toTensor()};
  } else if constexpr (std::is_same_v<Ret, std::tuple<at::Tensor&, at::Tensor&>>) {
    return {*written.at(0), *written.at(1)};
  } else {
    static_assert(sizeof(Ret) == 0, "native_or_fallback: unsupported return type");
  }
}

}  // namespace storage_fallback_detail

namespace storage_fallback_detail {

// A call that took no native complex path: the fallback for a storage-dtype
// argument, else the native kernel, and the fallback if that meets one of
// the runtime's limits.
template <class Ret, class... Args>
Ret native_else_fallback(const std::string& name, const std::string& overload, Ret (*fn)(Args...),
                         typename limits_detail::non_deduced<Args>::type... args) {
  auto fallback = [&]() -> Ret {
    torch::jit::Stack stack;
    (stack.emplace_back(args), ...);
    limits_detail::FallbackScope scope;
    run_through_fallback(name.c_str(), overload.c_str(), &stack);
    if constexpr (std::is_void_v<Ret>) {
      return;
    } else {
      std::vector<at::Tensor*> written;
      (note_written<Args>(written, std::forward<Args>(args)), ...);
      return result_from<Ret>(stack, written);
    }
  };
  if ((storage_arg(args) || ...)) return fallback();
  if constexpr (limits_detail::guardable_v<Ret, Args...>)
    return limits_detail::native_unless_limit<Ret>([&]() -> Ret { return fn(args...); }, fallback);
  else
    return fn(std::forward<Args>(args)...);
}

// "sum.dim_IntList" -> ("aten::sum", "dim_IntList")
inline std::pair<std::string, std::string> split_overload(const std::string& full) {
  const size_t dot = full.find('.');
  return {"aten::" + full.substr(0, dot), dot == std::string::npos ? "" : full.substr(dot + 1)};
}

}  // namespace storage_fallback_detail

template <class Ret, class... Args>
torch::CppFunction native_or_fallback(const char* overload_name, Ret (*fn)(Args...)) {
  auto [name, overload] = storage_fallback_detail::split_overload(overload_name);
  return torch::CppFunction([fn, name = name, overload = overload](Args... args) -> Ret {
    return storage_fallback_detail::native_else_fallback<Ret, Args...>(name, overload, fn,
                                                                       std::forward<Args>(args)...);
  });
}

// The same, with a native complex path (or a wide unsigned one) tried first: try_complex takes the
// op's arguments and returns its result (for an out= overload, anything
// engaged: the out argument is returned; for a pair, the pair) or nothing,
// and then a storage-dtype call goes to the fallback and the rest to the
// native kernel.
template <class Ret, class... Args, class Try>
torch::CppFunction complex_first(const char* overload_name, Ret (*fn)(Args...), Try try_complex) {
  auto [name, overload] = storage_fallback_detail::split_overload(overload_name);
  auto count = std::make_shared<ComplexPathCount>(overload_name);
  return torch::CppFunction([fn, name = name, overload = overload, try_complex, count](Args... args) -> Ret {
    using namespace storage_fallback_detail;
    const int64_t mark = count->mark();
    if (auto r = try_complex(args...)) {
      if ((complex_arg(args) || ...)) count->served(mark);
      if constexpr (std::is_same_v<Ret, at::Tensor> || std::is_same_v<Ret, std::tuple<at::Tensor, at::Tensor>>) {
        return *r;
      } else {
        std::vector<at::Tensor*> written;
        (note_written<Args>(written, std::forward<Args>(args)), ...);
        return *written.at(0);
      }
    }
    return native_else_fallback<Ret, Args...>(name, overload, fn, std::forward<Args>(args)...);
  });
}

}  // namespace torchneuron
