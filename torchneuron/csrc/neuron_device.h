// The neuron device's type and the few tests on it that many files of the
// shim ask; defined once here so that the unity build (several .cpp files in
// one translation unit) sees one definition of each.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/DeviceType.h>

#include <optional>

namespace torchneuron {

constexpr auto kNeuron = c10::DeviceType::PrivateUse1;

// False for an undefined tensor (an absent optional argument).
inline bool is_neuron(const at::Tensor& t) { return t.defined() && t.device().type() == kNeuron; }

// For a tensor known to be defined (an undefined one throws, as t.device() does).
inline bool defined_on_neuron(const at::Tensor& t) { return t.device().type() == kNeuron; }

// An optional tensor argument as a tensor, undefined when absent.
inline const at::Tensor& value_or_undefined(const std::optional<at::Tensor>& t) {
  static const at::Tensor undefined;
  return t.has_value() ? *t : undefined;
}

}  // namespace torchneuron
