// Complex ops composed from native real kernels (complex_ops.cpp).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/view_as_real.h>
#include <ATen/core/stack.h>

#include <optional>
#include <tuple>
#include <string>

namespace torchneuron {

// The real (part 0) or imaginary (part 1) plane of a complex tensor: a
// strided real view of its storage.
inline at::Tensor complex_plane(const at::Tensor& t, int64_t part) {
  return at::view_as_real(t).select(-1, part);
}

// mul.Tensor's arguments (self, other) on the stack: if both are neuron
// complex tensors of one dtype without conjugate/negative bits, computes the
// product natively, replaces the arguments with it and returns true;
// otherwise leaves the stack alone and returns false.
bool try_native_complex_mul(torch::jit::Stack* stack);
// The same for add.Tensor / sub.Tensor (self, other, alpha), any alpha, on
// the runtime's complex ADD kernel (complex_add.cpp).
bool try_native_complex_add(torch::jit::Stack* stack, bool subtract);
// neg, abs and angle (hypot and atan2 of the planes: a real result), eq
// and ne of two complex tensors of one dtype, each in the forms the
// pointwise table spells ("neg", "neg_", "neg.out", "abs.out",
// "eq.Tensor", "eq_.Tensor", "eq.Tensor_out", ...; abs_ raises the CPU's
// error) (complex_neg_abs_compare.cpp).
bool try_native_complex_neg(const std::string& name, torch::jit::Stack* stack);
bool try_native_complex_unary_real(const std::string& name, torch::jit::Stack* stack);
bool try_native_complex_compare(const std::string& name, torch::jit::Stack* stack);
// exp, log, log2, log10, sqrt, rsqrt, reciprocal, sin, cos, tan, sinh,
// cosh, tanh, sigmoid and div (functional, out= and in-place overloads,
// `name` as the pointwise table spells it: "exp", "exp.out", "exp_",
// "div.Tensor", ...) of plain neuron complex tensors of one dtype, on the
// planes (complex_math.cpp); false, stack untouched, for anything else.
bool try_native_complex_math(const std::string& name, torch::jit::Stack* stack);
// isnan, isinf, logical_not/and/or/xor (names as the pointwise table spells
// them: "isnan", "logical_and_", "logical_or.out", ...) when an operand or
// the result is a neuron complex tensor (complex_predicates.cpp); false,
// stack untouched, otherwise.
bool try_native_complex_predicate(const std::string& name, torch::jit::Stack* stack);
// lerp.Scalar / lerp.Tensor (functional, out=, in place) of neuron complex
// tensors of one dtype (complex_lerp.cpp); false, stack untouched, otherwise.
bool try_native_complex_lerp(const std::string& name, torch::jit::Stack* stack);
// addcmul / addcdiv (functional, out=, in place) of neuron complex tensors
// of one dtype (complex_addc.cpp); false, stack untouched, otherwise.
bool try_native_complex_addc(const std::string& name, torch::jit::Stack* stack);
// where.self / where.self_out / masked_fill(_).Scalar / masked_fill(_).Tensor
// (names as the pointwise table spells them) when the result is a neuron
// complex tensor (complex_select.cpp); false, stack untouched, otherwise.
bool try_native_complex_select(const std::string& name, torch::jit::Stack* stack);
// prod (dim: prod.dim_int, none: over everything) and cumsum / cumprod of
// a neuron complex tensor on the planes (complex_math_scan.cpp), out= when
// `out` is given (self for the in-place scans); nothing when the case is
// not that one (a dtype= conversion, an out= of another dtype or device).
std::optional<at::Tensor> try_native_complex_prod(const at::Tensor& self, std::optional<int64_t> dim,
                                                  bool keepdim, std::optional<at::ScalarType> dtype,
                                                  const at::Tensor* out);
std::optional<at::Tensor> try_native_complex_scan(bool cumprod, const at::Tensor& self, int64_t dim,
                                                  std::optional<at::ScalarType> dtype, const at::Tensor* out);
// Reductions of a neuron complex tensor composed from native ones
// (complex_reduce.cpp); nothing, for the fallback, in any other case:
// var/std (the planes' variances summed, as the CPU computes them), the
// vector norm (of |z|), trace (the diagonal's sum), any and count_nonzero
// (of z != 0), dot and vdot (the sum of the products).
std::optional<at::Tensor> try_native_complex_var(const at::Tensor& self, at::OptionalIntArrayRef dim,
                                                 const std::optional<at::Scalar>& correction, bool keepdim,
                                                 bool take_sqrt);
std::optional<std::tuple<at::Tensor, at::Tensor>> try_native_complex_var_mean(
    const at::Tensor& self, at::OptionalIntArrayRef dim, const std::optional<at::Scalar>& correction, bool keepdim,
    bool take_sqrt);
// norm.ScalarOpt_dim(_dtype): the vector norm; logsumexp shifted by the
// largest real part, as the CPU computes it.
std::optional<at::Tensor> try_native_complex_norm(const at::Tensor& self, const std::optional<at::Scalar>& p,
                                                  at::IntArrayRef dim, bool keepdim,
                                                  std::optional<at::ScalarType> dtype);
std::optional<at::Tensor> try_native_complex_logsumexp(const at::Tensor& self, at::IntArrayRef dims, bool keepdim);
std::optional<at::Tensor> try_native_complex_vector_norm(const at::Tensor& self, const at::Scalar& ord,
                                                         at::OptionalIntArrayRef dim, bool keepdim,
                                                         std::optional<at::ScalarType> dtype);
std::optional<at::Tensor> try_native_complex_trace(const at::Tensor& self);
std::optional<at::Tensor> try_native_complex_any(const at::Tensor& self);
// z != 0 of a neuron complex tensor (all/any over dims reduce it).
std::optional<at::Tensor> try_native_complex_nonzero(const at::Tensor& self);
std::optional<at::Tensor> try_native_complex_count_nonzero(const at::Tensor& self, at::IntArrayRef dims);
std::optional<at::Tensor> try_native_complex_dot(const at::Tensor& self, const at::Tensor& other, bool conj_self);
// Complex matrix products as four real GEMMs on the planes
// (complex_gemm.cpp). The kind names the product: Mm (2-d @ 2-d), Bmm
// (batched), BatchSum (addbmm's sum of the batch's products), Mv (2-d @
// 1-d). result = beta * self + alpha * a @ b, self absent for mm/bmm/mv;
// into out when given (in place: out is self). Nothing when the call is
// not one of neuron complex tensors of one dtype with fitting shapes.
enum class ComplexGemm { Mm, Bmm, BatchSum, Mv };
std::optional<at::Tensor> try_native_complex_gemm(ComplexGemm kind, const at::Tensor* self, const at::Tensor& a,
                                                  const at::Tensor& b, const at::Scalar& beta,
                                                  const at::Scalar& alpha, const at::Tensor* out, bool inplace);
// mm (batched: bmm) of two neuron complex tensors of one dtype.
std::optional<at::Tensor> try_native_complex_mm(const at::Tensor& a, const at::Tensor& b,
                                                bool batched);

}  // namespace torchneuron
