// Pointwise ops: ATen schemas mapped to runtime op codes by a table.
//
// One boxed kernel serves every overload of an op (functional, in-place,
// out=): it reads the schema to find inputs, scalars and the output, lets
// PyTorch's TensorIterator compute the broadcast shape, type promotion and
// output allocation, and hands the runtime one nrt_op.
#pragma once

#include <ATen/TensorIterator.h>

#include <vector>

#include "neuronrt/nrt.h"

namespace torchneuron {

// How the dtypes of a pointwise op are decided (mirrors ATen's configs).
enum class PointwiseDtypes {
  Arithmetic,   // common dtype of the inputs, cast to the output
  FloatResult,  // integer inputs promote to the default float (exp, sqrt, ...)
  Comparison,   // inputs promote to their common dtype; the result is bool
  SameAsInput,  // output must have the input's dtype (neg, abs, ...)
};

// The arguments of one call, after the schema was read. prepare hooks may
// change the op code, reorder inputs or rewrite scalars.
struct PointwiseCall {
  nrt_op_code code;
  std::vector<at::Tensor> inputs;
  std::vector<c10::IValue> scalars;  // Scalar / number / None, in schema order
  std::vector<std::string> strings;  // string arguments, in schema order
};

using PointwisePrepare = void (*)(PointwiseCall& call);

struct PointwiseOp {
  const char* name;      // "add"
  const char* overload;  // "Tensor" (functional and in-place); "" for none
  nrt_op_code code;
  PointwiseDtypes dtypes;
  PointwisePrepare prepare = nullptr;
  bool has_inplace = true;
};

// Launches a built iterator as op `code` with the given scalar attributes.
void launch_iterator(nrt_op_code code, at::TensorIteratorBase& iter,
                     const std::vector<c10::IValue>& scalars);

}  // namespace torchneuron
