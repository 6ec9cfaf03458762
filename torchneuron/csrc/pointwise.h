// Pointwise ops: ATen schemas mapped to runtime op codes by a table.
//
// One kernel serves every overload of an op (functional, in-place, out=):
// it reads the schema once to learn which arguments are inputs,
// outputs, scalar attributes and strings, lets PyTorch's TensorIterator
// compute the broadcast shape, type promotion and output allocation, and
// hands the runtime one nrt_op. The table itself is pointwise_ops.cpp.
#pragma once

#include <ATen/TensorIterator.h>
#include <c10/util/SmallVector.h>
#include <torch/library.h>

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "neuronrt/nrt.h"
#include "tensor_view.h"

namespace torchneuron {

// How the dtypes of a pointwise op are decided (mirrors ATen's configs).
enum class PointwiseDtypes {
  Arithmetic,   // inputs promote to their common dtype, cast to the output
  FloatResult,  // as Arithmetic, and integer inputs promote to the default float
  Comparison,   // inputs promote to their common dtype; the result is bool
                // (an out= tensor of another dtype receives it converted)
  SameAsInput,  // every operand has the first input's dtype (neg, activations)
  Predicate,    // one input of any dtype; the result is bool (isnan, signbit)
  Select,       // where/masked_fill: a bool mask, then values and result in
                // PointwiseCall::dtype (values move, no arithmetic)
};

// A set of dtypes: bit t for at::ScalarType t.
struct DtypeSet {
  uint64_t bits;
  bool has(at::ScalarType t) const { return (bits >> static_cast<int>(t)) & 1; }
};

constexpr uint64_t dtype_bit(at::ScalarType t) { return uint64_t{1} << static_cast<int>(t); }
// half, bfloat16, float, double
constexpr DtypeSet kFloatingDtypes{dtype_bit(at::kHalf) | dtype_bit(at::kBFloat16) | dtype_bit(at::kFloat) |
                                   dtype_bit(at::kDouble)};

// The arguments of one call, after the schema was read. A prepare hook may
// change any field: the op code and dtype rule (div's rounding modes), the
// inputs (order, wrapping), the scalars.
struct PointwiseCall {
  nrt_op_code code;
  PointwiseDtypes dtypes;
  DtypeSet supported;                          // compute dtypes the kernel has
  // Inputs in schema order. A Scalar operand is an undefined tensor with its
  // value in input_scalars (wrapped as a CPU number after prepare); an
  // omitted Tensor?/Scalar? is undefined with no value.
  c10::SmallVector<TensorRef, 4> inputs;
  c10::SmallVector<std::optional<c10::Scalar>, 4> input_scalars;
  c10::SmallVector<c10::IValue, 4> scalars;    // scalar attributes, schema order
  c10::SmallVector<std::optional<std::string_view>, 1> strings;  // schema order
  c10::SmallVector<TensorRef, 2> outputs;      // given outputs (undefined: allocate)
  std::optional<at::ScalarType> dtype;         // Select: the result dtype
  std::string_view name;                       // the overload's name, for messages
  bool check_overlap = true;                   // see kOverlapAllowed
};

using PointwisePrepare = void (*)(PointwiseCall& call);
// Runs once the compute dtype is known (PyTorch's checks that depend on it).
using PointwiseCheck = void (*)(const PointwiseCall& call, at::ScalarType compute);

enum PointwiseFlags : uint8_t {
  // Scalar arguments are operands (as wrapped numbers: eq.Scalar, pow's
  // exponent), not attributes (add's alpha).
  kScalarOperands = 1,
  // With a float16/bfloat16 common dtype, a single-value second operand keeps
  // its own precision instead of being rounded to the common dtype, as
  // PyTorch's CPU mul/div kernels read it.
  kExactScalar = 2,
  // Scalar operands must fit the compute dtype, as Scalar::to<T> demands
  // (clamp's bounds, masked_fill's value).
  kCheckScalarFits = 4,
  // The output may overlap itself (an expanded tensor written in place), as
  // PyTorch's CPU threshold allows: the op is idempotent.
  kOverlapAllowed = 8,
};

struct PointwiseOp {
  const char* overloads;  // space-separated ATen names: "eq.Tensor eq_.Tensor eq.Tensor_out"
  nrt_op_code code;
  PointwiseDtypes dtypes;
  DtypeSet supported;
  PointwisePrepare prepare = nullptr;
  uint8_t flags = 0;
  PointwiseCheck check = nullptr;
};

// Registers every overload of every row as a native PrivateUse1 kernel.
void register_pointwise_ops(torch::Library& m, const PointwiseOp* ops, size_t count);

// Launches a built iterator as op `code` with the given scalar attributes,
// computing in `compute`, by default the iterator's common dtype.
void launch_iterator(nrt_op_code code, at::TensorIteratorBase& iter,
                     const std::vector<c10::IValue>& scalars,
                     std::optional<at::ScalarType> compute = std::nullopt);

}  // namespace torchneuron
