// Calls the runtime cannot take go to the counted CPU fallback, not to an
// error. Two limits are met while a kernel describes its operands to the
// runtime, before anything is launched: more dims than NRT_MAX_DIMS, and a
// dtype the op's runtime kernel does not compute in (complex and the wide
// unsigned dtypes for most ops). Both throw a RuntimeLimit error, and every
// aten registration made inside NEURON_LIBRARY_IMPL catches it and runs the
// same call through the fallback, which counts and warns as for an op with
// no kernel at all. A kernel that meets neither limit costs nothing extra
// (a zero-cost try).
//
//   NEURON_LIBRARY_IMPL(aten, m) {
//     m.impl("sort.stable", sort);      // function, TORCH_FN(f) or lambda
//   }
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/boxing/impl/boxing.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace torchneuron {

// Thrown where a call exceeds what the runtime takes. The two keep the
// exception types the errors had before (RuntimeError, NotImplementedError)
// for the calls no registration guards.
class DimsLimitError : public c10::Error {
 public:
  using c10::Error::Error;
};
class DtypeLimitError : public c10::NotImplementedError {
 public:
  using c10::NotImplementedError::NotImplementedError;
};

[[noreturn]] void throw_dims_limit(const char* op, int64_t dims, const std::string& detail = "");
[[noreturn]] void throw_dtype_limit(const char* op, const char* dtype);

// The boxed CPU fallback (fallback.cpp).
void fallback_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack);

namespace limits_detail {

// Set while a guard's fallback runs on this thread: a limit met inside it
// (the fallback moving a result of a dtype no neuron tensor can hold) is
// an error, not another fallback.
inline thread_local bool in_limit_fallback = false;
struct FallbackScope {
  bool saved = in_limit_fallback;
  FallbackScope() { in_limit_fallback = true; }
  ~FallbackScope() { in_limit_fallback = saved; }
};

// An op's handle, looked up on the first call that needs it.
class LazyOp {
 public:
  explicit LazyOp(const std::string& overload_name);
  const c10::OperatorHandle& get();

 private:
  std::string name_, overload_;
  std::once_flag once_;
  std::optional<c10::OperatorHandle> op_;
};

// Arguments owned by value that hold tensors: the guard passes arguments on
// as lvalues so that the fallback still has them, which would copy these
// (a copy of a tensor can take the GIL). Such kernels stay unguarded.
template <class T>
constexpr bool owns_tensors_v =
    !std::is_reference_v<T> &&
    (std::is_same_v<T, at::Tensor> || std::is_same_v<T, std::optional<at::Tensor>> ||
     std::is_same_v<T, std::vector<at::Tensor>> || std::is_same_v<T, c10::List<std::optional<at::Tensor>>>);

template <class Ret, class... Args>
constexpr bool guardable_v = !(owns_tensors_v<Args> || ...) && !(std::is_rvalue_reference_v<Args> || ...) &&
                             !(std::is_same_v<std::decay_t<Args>, c10::DispatchKeySet> || ...) &&
                             c10::impl::can_box_all<Args...>::value;

// native(), or fallback() when native() meets a runtime limit outside a
// fallback (the one place that decides what counts as a limit). fallback
// sets its own FallbackScope.
template <class Ret, class Native, class Fallback>
Ret native_unless_limit(Native&& native, Fallback&& fallback) {
  try {
    return native();
  } catch (const DimsLimitError&) {
    if (in_limit_fallback) throw;
  } catch (const DtypeLimitError&) {
    if (in_limit_fallback) throw;
  }
  return fallback();
}

// Registrations left unguarded (listed by torchneuron._C._unguarded_registrations
// so that a test notices a new one): such a kernel that meets a limit raises.
void note_unguarded(const std::string& overload_name);
std::vector<std::string> unguarded_registrations();

template <class T>
struct non_deduced {  // keeps a parameter out of template argument deduction
  using type = T;
};

// One guarded call of fn: op is fn's aten op, for the boxed fallback.
template <class Ret, class... Args>
Ret guarded_call(LazyOp& op, Ret (*fn)(Args...), typename non_deduced<Args>::type... args) {
  static_assert(guardable_v<Ret, Args...>, "guarded_call: arguments must be borrowed");
  return native_unless_limit<Ret>([&]() -> Ret { return fn(args...); },
                                  [&]() -> Ret {
                                    FallbackScope scope;
                                    return c10::impl::BoxedKernelWrapper<Ret(Args...)>::call(
                                        c10::BoxedKernel::makeFromFunction<&fallback_kernel>(), op.get(),
                                        c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), args...);
                                  });
}

template <class Ret, class... Args>
torch::CppFunction guard(const std::string& overload_name, Ret (*fn)(Args...)) {
  if constexpr (!guardable_v<Ret, Args...>) {
    note_unguarded(overload_name);
    return torch::CppFunction(fn);
  } else {
    auto op = std::make_shared<LazyOp>(overload_name);
    return torch::CppFunction([fn, op](Args... args) -> Ret { return guarded_call<Ret, Args...>(*op, fn, args...); });
  }
}

template <class F>
struct LambdaSignature;
template <class C, class Ret, class... Args>
struct LambdaSignature<Ret (C::*)(Args...) const> {
  using Pointer = Ret (*)(Args...);
};

}  // namespace limits_detail

// torch::Library with every kernel registered through impl() guarded.
class GuardedLibrary {
 public:
  explicit GuardedLibrary(torch::Library& lib) : lib_(lib) {}
  operator torch::Library&() { return lib_; }  // NOLINT: for helpers taking a Library

  template <class Name, class Ret, class... Args>
  GuardedLibrary& impl(const Name& name, Ret (*fn)(Args...)) {
    lib_.impl(name, limits_detail::guard(std::string(name), fn));
    return *this;
  }
  template <class Name, class FuncType, FuncType* fn>
  GuardedLibrary& impl(const Name& name, c10::CompileTimeFunctionPointer<FuncType, fn>) {
    return impl(name, fn);
  }
  template <class Name>
  GuardedLibrary& impl(const Name& name, torch::CppFunction&& f) {  // already wrapped
    lib_.impl(name, std::move(f));
    return *this;
  }
  // A captureless lambda (one with captures is registered as it is).
  template <class Name, class F,
            class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, torch::CppFunction> &&
                                     std::is_class_v<std::decay_t<F>>>>
  GuardedLibrary& impl(const Name& name, F&& f) {
    using Pointer = typename limits_detail::LambdaSignature<decltype(&std::decay_t<F>::operator())>::Pointer;
    if constexpr (std::is_convertible_v<std::decay_t<F>, Pointer>) {
      return impl(name, static_cast<Pointer>(f));
    } else {
      limits_detail::note_unguarded(std::string(name));
      lib_.impl(name, std::forward<F>(f));
      return *this;
    }
  }

 private:
  torch::Library& lib_;
};

}  // namespace torchneuron

// TORCH_LIBRARY_IMPL(ns, PrivateUse1, m) with m a GuardedLibrary.
#define NEURON_LIBRARY_IMPL(ns, m) NEURON_LIBRARY_IMPL_(ns, m, C10_UID)
#define NEURON_LIBRARY_IMPL_(ns, m, uid) NEURON_LIBRARY_IMPL__(ns, m, uid)
#define NEURON_LIBRARY_IMPL__(ns, m, uid)                                         \
  static void C10_CONCATENATE(neuron_guarded_impl_, uid)(::torchneuron::GuardedLibrary & m); \
  TORCH_LIBRARY_IMPL(ns, PrivateUse1, C10_CONCATENATE(neuron_library_, uid)) {     \
    ::torchneuron::GuardedLibrary guarded(C10_CONCATENATE(neuron_library_, uid));  \
    C10_CONCATENATE(neuron_guarded_impl_, uid)(guarded);                          \
  }                                                                               \
  static void C10_CONCATENATE(neuron_guarded_impl_, uid)(::torchneuron::GuardedLibrary & m)
