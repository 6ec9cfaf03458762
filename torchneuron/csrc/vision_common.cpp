#include "vision_common.h"

namespace torchneuron {
namespace vision {

nrt_tensor_view image_view(const at::Tensor& t, const char* op, bool as_1d) {
  int64_t spatial = as_1d ? 1 : 2;
  TORCH_CHECK(t.dim() == spatial + 1 || t.dim() == spatial + 2, op, ": expected a ", spatial + 1,
              "-d or ", spatial + 2, "-d tensor, got ", t.dim(), " dims");
  nrt_tensor_view v = to_view(t, op);
  int64_t shape[4], strides[4];
  int64_t k = 3;
  for (int64_t d = t.dim() - 1; d >= 0; d--, k--) {
    shape[k] = t.size(d);
    strides[k] = t.stride(d);
    if (as_1d && d == t.dim() - 1) {  // the height of 1 goes before the length
      k--;
      shape[k] = 1;
      strides[k] = 0;
    }
  }
  if (k == 0) {  // no batch dim
    shape[0] = 1;
    strides[0] = 0;
  }
  v.ndim = 4;
  for (int d = 0; d < 4; d++) {
    v.shape[d] = shape[d];
    v.strides[d] = strides[d];
  }
  return v;
}

int64_t pair_at(at::IntArrayRef values, size_t i, at::IntArrayRef fallback) {
  if (values.empty()) return pair_at(fallback, i);
  return values.size() == 1 ? values[0] : values[i];
}

OpBuilder::OpBuilder(nrt_op_code code, int32_t outputs) {
  op_.code = code;
  op_.num_outputs = outputs;
}

OpBuilder& OpBuilder::view(const nrt_tensor_view& v) {
  TORCH_INTERNAL_ASSERT(op_.num_operands < NRT_MAX_OPERANDS);
  op_.operands[op_.num_operands++] = v;
  if (op_.num_operands == op_.num_outputs + 1) op_.compute_dtype = v.dtype;
  return *this;
}

OpBuilder& OpBuilder::image(const at::Tensor& t, bool as_1d) { return view(image_view(t, name(), as_1d)); }

OpBuilder& OpBuilder::integer(int64_t v) {
  TORCH_INTERNAL_ASSERT(op_.num_scalars < NRT_MAX_SCALARS);
  nrt_scalar& s = op_.scalars[op_.num_scalars++];
  s.is_float = 0;
  s.i = v;
  return *this;
}

OpBuilder& OpBuilder::real(double v) {
  TORCH_INTERNAL_ASSERT(op_.num_scalars < NRT_MAX_SCALARS);
  nrt_scalar& s = op_.scalars[op_.num_scalars++];
  s.is_float = 1;
  s.f = v;
  return *this;
}

void OpBuilder::launch(const at::Tensor& t) { torchneuron::launch(t.device().index(), op_); }

}  // namespace vision
}  // namespace torchneuron
