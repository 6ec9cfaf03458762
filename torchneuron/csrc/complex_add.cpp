// Complex add/sub with alpha as one runtime kernel (ADD with a complex
// compute dtype): a + alpha * b in the CPU's complex arithmetic, where a
// real alpha is alpha + 0i and the product has no recovery of infinities,
// so an infinite part of b makes the other part NaN as on the CPU
// ((1 + 1i) + (inf + 0i) is inf + NaN i). One pass over memory, for every
// alpha; adding the (real, imaginary) planes as real tensors gave inf there.
#include "complex_add.h"

#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>

#include "tensor_view.h"

namespace torchneuron {

void check_complex_alpha(const c10::Scalar& alpha, at::ScalarType dtype) {
  // the CPU's alpha_check, then its conversion of alpha to the dtype
  TORCH_CHECK(!alpha.isBoolean(), "Boolean alpha only supported for Boolean results.");
  check_scalar_fits(alpha, dtype);
}

void complex_add_into(const at::Tensor& out, const at::Tensor& a, const at::Tensor& b, const c10::Scalar& alpha,
                      bool subtract) {
  const at::ScalarType dtype = out.scalar_type();
  TORCH_INTERNAL_ASSERT(a.scalar_type() == dtype && b.scalar_type() == dtype && !out.is_conj() && !out.is_neg() &&
                        !a.is_conj() && !a.is_neg() && !b.is_conj() && !b.is_neg());
  check_complex_alpha(alpha, dtype);
  if (out.numel() == 0) return;
  // the CPU's TensorIterator checks: the elements are written as they are
  // read, so only an input that is the output itself may share its memory
  at::assert_no_internal_overlap(out);
  at::assert_no_partial_overlap(out, a);
  at::assert_no_partial_overlap(out, b);
  // sub is add with -alpha, negated as a Scalar (exactly) before the CPU
  // casts it to the dtype
  c10::complex<double> w = alpha.toComplexDouble();
  if (subtract) w = -w;
  const char* name = subtract ? "sub" : "add";
  nrt_op op{};
  op.code = NRT_OP_ADD;
  op.compute_dtype = to_storage_dtype(dtype, name);
  op.num_outputs = 1;
  op.num_operands = 3;
  op.operands[0] = to_view(out, name);
  op.operands[1] = to_view(a.expand(out.sizes()), name);
  op.operands[2] = to_view(b.expand(out.sizes()), name);
  op.num_scalars = 2;
  op.scalars[0] = nrt_scalar{1, w.real(), 0};
  op.scalars[1] = nrt_scalar{1, w.imag(), 0};
  launch(out.device().index(), op);
}

}  // namespace torchneuron
