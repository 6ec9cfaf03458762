#include "runtime_limits.h"

#include <c10/util/StringUtil.h>

#include "neuronrt/op.h"

namespace torchneuron {

void throw_dims_limit(const char* op, int64_t dims, const std::string& detail) {
  throw DimsLimitError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
                       c10::str(op, ": tensors with more than ", NRT_MAX_DIMS,
                                " dimensions are not supported on the neuron device (got ", dims, detail, ")"));
}

void throw_dtype_limit(const char* op, const char* dtype) {
  throw DtypeLimitError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
                        c10::str(op, ": dtype ", dtype, " is not supported on the neuron device"));
}

namespace limits_detail {

LazyOp::LazyOp(const std::string& overload_name) {
  const size_t dot = overload_name.find('.');
  name_ = "aten::" + overload_name.substr(0, dot);
  overload_ = dot == std::string::npos ? "" : overload_name.substr(dot + 1);
}

namespace {
std::mutex unguarded_lock;
std::vector<std::string>& unguarded() {
  static std::vector<std::string> names;  // filled during static registration
  return names;
}
}  // namespace

void note_unguarded(const std::string& overload_name) {
  std::lock_guard<std::mutex> hold(unguarded_lock);
  unguarded().push_back(overload_name);
}

std::vector<std::string> unguarded_registrations() {
  std::lock_guard<std::mutex> hold(unguarded_lock);
  return unguarded();
}

const c10::OperatorHandle& LazyOp::get() {
  std::call_once(once_, [this] { op_ = c10::Dispatcher::singleton().findSchemaOrThrow(name_.c_str(), overload_.c_str()); });
  return *op_;
}

}  // namespace limits_detail
}  // namespace torchneuron
