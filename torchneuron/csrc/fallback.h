// The CPU fallback for ops with no neuron kernel.
#pragma once

#include <ATen/core/stack.h>

#include <optional>
#include <string>
#include <utility>

namespace torchneuron {

enum class FallbackMode { Warn, Error, Silent };

// The mode named by text ("warn", "error", "silent"), or nothing.
std::optional<FallbackMode> parse_fallback_mode(const std::string& text);

// Setting a mode also clears a malformed TORCHNEURON_FALLBACK.
void set_fallback_mode(FallbackMode mode);
// Throws the TORCHNEURON_FALLBACK error, if the variable was malformed.
FallbackMode fallback_mode();
// Throws if TORCHNEURON_FALLBACK was malformed (and no mode was set since):
// the device's first use reports it, as the runtime reports its variables.
void check_fallback_environment();

// Runs op `name`.`overload` (arguments on `stack`, results left there)
// through the CPU fallback, counted, warned and refusable like any other:
// for a native kernel that meets a case its runtime op cannot take (more
// index tensors than the runtime's limit) and must not fail the call.
void run_through_fallback(const char* name, const char* overload, torch::jit::Stack* stack);

// The same with the arguments given in order; returns the stack of results.
template <class... Args>
torch::jit::Stack call_through_fallback(const char* name, const char* overload, Args&&... args) {
  torch::jit::Stack stack;
  (stack.emplace_back(std::forward<Args>(args)), ...);
  run_through_fallback(name, overload, &stack);
  return stack;
}

}  // namespace torchneuron
