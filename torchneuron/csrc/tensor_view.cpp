#include "tensor_view.h"

#include <ATen/Dispatch.h>

#include "device_state.h"
#include "runtime_check.h"

namespace torchneuron {

bool has_runtime_dtype(at::ScalarType type) {
  switch (type) {
    case at::kBool: case at::kByte: case at::kChar: case at::kShort: case at::kInt:
    case at::kLong: case at::kHalf: case at::kBFloat16: case at::kFloat: case at::kDouble:
      return true;
    default:
      return false;
  }
}

nrt_dtype to_runtime_dtype(at::ScalarType type, const char* op) {
  switch (type) {
    case at::kBool: return NRT_BOOL;
    case at::kByte: return NRT_UINT8;
    case at::kChar: return NRT_INT8;
    case at::kShort: return NRT_INT16;
    case at::kInt: return NRT_INT32;
    case at::kLong: return NRT_INT64;
    case at::kHalf: return NRT_FLOAT16;
    case at::kBFloat16: return NRT_BFLOAT16;
    case at::kFloat: return NRT_FLOAT32;
    case at::kDouble: return NRT_FLOAT64;
    default:
      TORCH_CHECK_NOT_IMPLEMENTED(false, op, ": dtype ", type,
                                  " is not supported on the neuron device");
  }
}

nrt_tensor_view to_view(const at::Tensor& tensor, const char* op) {
  TORCH_CHECK(tensor.dim() <= NRT_MAX_DIMS, op, ": tensors with more than ", NRT_MAX_DIMS,
              " dimensions are not supported on the neuron device (got ", tensor.dim(), ")");
  nrt_tensor_view view;
  view.data = tensor.numel() == 0 ? nullptr : const_cast<void*>(tensor.const_data_ptr());
  view.dtype = to_runtime_dtype(tensor.scalar_type(), op);
  view.ndim = static_cast<int32_t>(tensor.dim());
  for (int64_t d = 0; d < tensor.dim(); d++) {
    view.shape[d] = tensor.size(d);
    view.strides[d] = tensor.stride(d);
  }
  return view;
}

void check_scalar_fits(const at::Scalar& value, at::ScalarType dtype) {
  AT_DISPATCH_ALL_TYPES_AND3(at::kHalf, at::kBFloat16, at::kBool, dtype, "check_scalar_fits",
                             [&] { (void)value.to<scalar_t>(); });
}

void launch(c10::DeviceIndex device, const nrt_op& op) {
  NRT_CHECK(nrt_launch(current_stream(device), &op));
}

}  // namespace torchneuron
