#include "runtime_check.h"

#include <string>

#include "index_error.h"

namespace torchneuron {

void throw_runtime_error(nrt_status status, const char* expr, const char* file, int line) {
  std::string message = nrt_last_error();
  if (message.empty()) message = nrt_status_string(status);
  // A stream's sticky error (stream.h): say how a PyTorch user clears it.
  if (message.find("until the error is cleared") != std::string::npos)
    message += "; torch.neuron.clear_error() clears it";
  const c10::SourceLocation where{__func__, file, static_cast<uint32_t>(line)};
  (void)expr;
  switch (status) {
    case NRT_ERROR_OUT_OF_MEMORY:
      throw c10::OutOfMemoryError(where, message);
    case NRT_ERROR_INDEX_OUT_OF_RANGE:
      throw_index_out_of_range(message);
    case NRT_ERROR_INVALID_ARGUMENT:
      throw c10::ValueError(where, message);
    case NRT_ERROR_UNSUPPORTED:
      throw c10::NotImplementedError(where, message);
    case NRT_ERROR_DISTRIBUTED:
      throw c10::DistBackendError(where, message);
    default:
      throw c10::Error(where, message);
  }
}

}  // namespace torchneuron
