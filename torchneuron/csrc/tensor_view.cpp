#include "tensor_view.h"

#include <vector>

#include <ATen/Dispatch.h>
#include <ATen/Dispatch_v2.h>

#include "device_state.h"
#include "runtime_limits.h"
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
      throw_dtype_limit(op, c10::toString(type));
  }
}

bool is_storage_dtype(at::ScalarType type) {
  switch (type) {
    case at::kComplexFloat: case at::kComplexDouble: case at::kComplexHalf: case at::kUInt16:
    case at::kUInt32: case at::kUInt64:
      return true;
    default:
      return false;
  }
}

nrt_dtype to_storage_dtype(at::ScalarType type, const char* op) {
  switch (type) {
    case at::kUInt16: return NRT_UINT16;
    case at::kUInt32: return NRT_UINT32;
    case at::kUInt64: return NRT_UINT64;
    case at::kComplexFloat: return NRT_COMPLEX64;
    case at::kComplexDouble: return NRT_COMPLEX128;
    case at::kComplexHalf: return NRT_COMPLEX32;
    default:
      // a dtype no neuron tensor may hold (float8): there is
      // nothing to fall back with (a copy of it cannot reach the host)
      if (has_runtime_dtype(type)) return to_runtime_dtype(type, op);
      TORCH_CHECK_NOT_IMPLEMENTED(false, op, ": dtype ", type, " is not supported on the neuron device");
  }
}

nrt_tensor_view to_view(const at::Tensor& tensor, const char* op) {
  if (tensor.dim() > NRT_MAX_DIMS) throw_dims_limit(op, tensor.dim());
  nrt_tensor_view view;
  view.data = tensor.numel() == 0 ? nullptr : const_cast<void*>(tensor.const_data_ptr());
  view.dtype = to_storage_dtype(tensor.scalar_type(), op);
  view.ndim = static_cast<int32_t>(tensor.dim());
  for (int64_t d = 0; d < tensor.dim(); d++) {
    view.shape[d] = tensor.size(d);
    view.strides[d] = tensor.stride(d);
  }
  return view;
}

void elementwise_views(const at::Tensor& a, const at::Tensor& b, nrt_tensor_view* va, nrt_tensor_view* vb,
                       const char* op) {
  TORCH_CHECK(a.sizes() == b.sizes(), op, ": elementwise views need one shape");
  if (a.dim() <= NRT_MAX_DIMS) {
    *va = to_view(a, op);
    *vb = to_view(b, op);
    return;
  }
  std::vector<int64_t> size, sa, sb;
  for (int64_t d = 0; d < a.dim(); d++) {
    if (a.size(d) == 1) continue;
    if (!size.empty() && sa.back() == a.stride(d) * a.size(d) && sb.back() == b.stride(d) * b.size(d)) {
      size.back() *= a.size(d);
      sa.back() = a.stride(d), sb.back() = b.stride(d);
    } else {
      size.push_back(a.size(d)), sa.push_back(a.stride(d)), sb.push_back(b.stride(d));
    }
  }
  if (size.size() > NRT_MAX_DIMS)
    throw_dims_limit(op, a.dim(), c10::str(", ", size.size(), " after merging"));
  const at::Tensor* t[2] = {&a, &b};
  nrt_tensor_view* v[2] = {va, vb};
  const std::vector<int64_t>* strides[2] = {&sa, &sb};
  for (int k = 0; k < 2; k++) {
    v[k]->data = t[k]->numel() == 0 ? nullptr : const_cast<void*>(t[k]->const_data_ptr());
    v[k]->dtype = to_storage_dtype(t[k]->scalar_type(), op);
    v[k]->ndim = static_cast<int32_t>(size.size());
    for (size_t d = 0; d < size.size(); d++) {
      v[k]->shape[d] = size[d];
      v[k]->strides[d] = (*strides[k])[d];
    }
  }
}

void check_scalar_fits(const at::Scalar& value, at::ScalarType dtype) {
  if (dtype == at::kComplexHalf) return;  // the CPU's complex32 kernels take out-of-range parts as infinities
  AT_DISPATCH_V2(dtype, "check_scalar_fits", AT_WRAP([&] { (void)value.to<scalar_t>(); }),
                 AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), at::kHalf, at::kBFloat16, at::kBool,
                 AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES));
}

void launch(c10::DeviceIndex device, const nrt_op& op) {
  static const auto storage_name = [](nrt_dtype d) -> const char* {
    switch (d) {
      case NRT_UINT16: return "UInt16";
      case NRT_UINT32: return "UInt32";
      case NRT_UINT64: return "UInt64";
      case NRT_COMPLEX64: return "ComplexFloat";
      case NRT_COMPLEX128: return "ComplexDouble";
      case NRT_COMPLEX32: return "ComplexHalf";
      default: return nrt_dtype_name(d);
    }
  };
  if (!nrt_op_accepts_dtype(op.code, op.compute_dtype))
    throw_dtype_limit(nrt_op_name(op.code), storage_name(op.compute_dtype));
  for (int k = 0; k < op.num_operands; k++)
    if (!nrt_op_accepts_dtype(op.code, op.operands[k].dtype))
      throw_dtype_limit(nrt_op_name(op.code), storage_name(op.operands[k].dtype));
  NRT_CHECK(nrt_launch(current_stream(device), &op));
}

}  // namespace torchneuron
