// The CPU fallback for ops with no neuron kernel.
#pragma once

#include <optional>
#include <string>

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

}  // namespace torchneuron
