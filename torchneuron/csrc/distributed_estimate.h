// The Trainium-time estimate of a collective for the profiler: the
// runtime's roofline link term (neuronrt/roofline.h) for the bytes the
// collective moves, on its group's ranks and hosts.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <optional>
#include <vector>

#include "neuronrt/roofline.h"

namespace torchneuron {

// The estimate of a collective of `type` whose host task keeps `keep`
// alive and writes `outputs`, on `device`, among `ranks` ranks on `hosts`
// hosts; nothing for the types it does not model (coalesced batches).
std::optional<nrt_roofline> collective_estimate(c10d::OpType type, int device, int ranks, int hosts,
                                                const std::vector<at::Tensor>& keep,
                                                const std::vector<at::Tensor>& outputs);

}  // namespace torchneuron
