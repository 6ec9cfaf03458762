// The CPU fallback for ops with no neuron kernel.
#pragma once

#include <string>

namespace torchneuron {

enum class FallbackMode { Warn, Error, Silent };

void set_fallback_mode(FallbackMode mode);
FallbackMode fallback_mode();

}  // namespace torchneuron
