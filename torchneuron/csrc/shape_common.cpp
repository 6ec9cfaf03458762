#include "shape_common.h"

#include <ATen/MemoryOverlap.h>

namespace torchneuron {

nrt_op make_op(nrt_op_code code, std::initializer_list<const at::Tensor*> operands, int outputs,
               std::initializer_list<nrt_scalar> scalars) {
  const char* name = nrt_op_name(code);
  TORCH_INTERNAL_ASSERT(operands.size() <= NRT_MAX_OPERANDS && scalars.size() <= NRT_MAX_SCALARS);
  nrt_op op{};
  op.code = code;
  op.num_outputs = outputs;
  for (const at::Tensor* t : operands) op.operands[op.num_operands++] = to_view(*t, name);
  for (const nrt_scalar& s : scalars) op.scalars[op.num_scalars++] = s;
  return op;
}

bool overlaps(const at::Tensor& a, const at::Tensor& b) {
  if (a.numel() == 0 || b.numel() == 0 || !a.storage().is_alias_of(b.storage())) return false;
  return at::get_overlap_status(a, b) != at::MemOverlapStatus::No;  // TooHard counts as overlap
}

}  // namespace torchneuron
