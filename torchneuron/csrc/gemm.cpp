// Matrix products: ATen's mm/bmm/addmm/baddbmm/addbmm/addmv/mv/dot family
// mapped to the runtime's GEMM op.
//
// Shapes, dtypes and argument errors come from PyTorch's own structured
// meta functions where the op has one (mm, bmm, addmm, baddbmm, addmv,
// _addmm_activation), run with neuron outputs; the others check what their
// CPU kernels check. An error raised there gets the op's name as context.
// The runtime then gets one descriptor: out, a, b viewed as (batch,) rows x
// columns with their strides (vectors as one-column matrices), and the
// additive input expanded to out's shape (zero strides) unless beta is 0,
// in which case it is not read at all (NaN there does not propagate), as in
// PyTorch. matmul, linear and their backward passes decompose into these.
#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/ops/_addmm_activation_meta.h>
#include <ATen/ops/addmm_meta.h>
#include <ATen/ops/addmv_meta.h>
#include <ATen/ops/baddbmm_meta.h>
#include <ATen/ops/bmm_meta.h>
#include <ATen/ops/mm_meta.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "complex_ops.h"
#include "storage_fallback.h"
#include "op_tracking.h"
#include "shape_common.h"
#include "tensor_view.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {

template <class Meta>
using Structured = NeuronStructured<Meta, 1>;
enum class Kind { Functional, Out, Inplace };

// A structured op's meta function run with neuron outputs (see shape_common.h).
template <class Meta>
Structured<Meta> structured(const char* name, Kind kind, const at::Tensor& given) {
  using K = typename Structured<Meta>::Kind;
  return Structured<Meta>(name, static_cast<K>(static_cast<int>(kind)), {given});
}

// Runs f; a c10::Error it raises names the op (its Python type is kept).
template <class F>
void named(const char* op, F&& f) {
  try {
    f();
  } catch (c10::Error& e) {
    e.add_context(std::string("in neuron ") + op);
    throw;
  }
}

// A view of t with the given sizes and strides (the same elements).
nrt_tensor_view shaped(const at::Tensor& t, const char* op, std::initializer_list<int64_t> sizes,
                       std::initializer_list<int64_t> strides) {
  nrt_tensor_view v = to_view(t, op);
  v.ndim = static_cast<int32_t>(sizes.size());
  int d = 0;
  for (int64_t s : sizes) v.shape[d++] = s;
  d = 0;
  for (int64_t s : strides) v.strides[d++] = s;
  return v;
}

bool gemm_dtype(at::ScalarType t) {
  return t == at::kFloat || t == at::kDouble || t == at::kHalf || t == at::kBFloat16 ||
         t == at::kByte || t == at::kChar || t == at::kShort || t == at::kInt || t == at::kLong;
}

nrt_scalar scalar_for(const at::Scalar& s, at::ScalarType dtype) {
  nrt_scalar r{};
  if (at::isFloatingType(dtype)) {
    r.is_float = 1;
    r.f = s.toDouble();
  } else {
    r.i = s.toLong();
  }
  return r;
}

bool same_geometry(const at::Tensor& a, const at::Tensor& b) {
  return a.data_ptr() == b.data_ptr() && a.sizes() == b.sizes() && a.strides() == b.strides();
}

// out = alpha * a @ b + beta * cin. out, a, b are the views the runtime
// gets (see neuronrt/ops/gemm.h); cin (may be undefined) is already
// expanded to out's shape. out_t / a_t / b_t are the tensors behind them,
// for overlap checks. An out that overlaps an input (other than as cin
// itself) is computed in a temporary.
struct GemmCall {
  const char* name;
  TensorRef out_t{}, a_t{}, b_t{}, cin_t{};  // borrowed: no copies of the caller's tensors
  nrt_tensor_view out{}, a{}, b{}, cin{};
  at::Scalar alpha = 1, beta = 0;
};

void run_gemm(GemmCall& call) {
  const at::Tensor& out = call.out_t;
  const at::Tensor& a = call.a_t;
  const at::Tensor& b = call.b_t;
  const at::Tensor& cin = call.cin_t;
  if (out.numel() == 0) return;
  at::ScalarType dtype = a.scalar_type();
  if (!gemm_dtype(dtype)) throw_dtype_limit(call.name, c10::toString(dtype));
  TORCH_CHECK(b.scalar_type() == dtype, call.name,
              ": expected m1 and m2 to have the same dtype, but got: ", dtype, " != ",
              b.scalar_type());
  TORCH_CHECK(out.scalar_type() == dtype && (!cin.defined() || cin.scalar_type() == dtype),
              call.name, ": expected the input and result to have dtype ", dtype, ", but got ",
              cin.defined() ? cin.scalar_type() : dtype, " and ", out.scalar_type());
  check_device(a, out.device(), call.name);
  check_device(b, out.device(), call.name);
  at::assert_no_internal_overlap(out);
  bool use_cin = cin.defined() && !(call.beta.isFloatingPoint() ? call.beta.toDouble() == 0
                                                                       : call.beta.toLong() == 0);
  if (use_cin) check_device(cin, out.device(), call.name);
  bool in_place = use_cin && same_geometry(cin, out);
  bool clash = overlaps(out, a) || overlaps(out, b) ||
               (use_cin && !in_place && overlaps(out, cin));
  nrt_op op{};
  op.code = NRT_OP_GEMM;
  op.num_outputs = 1;
  op.num_operands = use_cin ? 4 : 3;
  op.operands[0] = call.out;
  op.operands[1] = call.a;
  op.operands[2] = call.b;
  if (use_cin) op.operands[3] = call.cin;
  op.num_scalars = 2;
  op.scalars[0] = scalar_for(call.alpha, dtype);
  op.scalars[1] = scalar_for(call.beta, dtype);
  op.compute_dtype = op.operands[1].dtype;
  at::Tensor temp;
  if (clash) {
    // A dense temporary with out's sizes; the view keeps out's rank/shape.
    temp = at::empty(out.sizes(), out.options());
    nrt_tensor_view v = to_view(temp, call.name);
    op.operands[0].data = v.data;
    // Strides of the view (which may add a unit column) are out's, mapped
    // onto the temporary: recompute them from the view's shape, row-major.
    int64_t step = 1;
    for (int d = op.operands[0].ndim - 1; d >= 0; d--) {
      op.operands[0].strides[d] = step;
      step *= op.operands[0].shape[d];
    }
    if (use_cin && in_place) op.operands[3] = op.operands[0], temp.copy_(out);
  }
  launch(out.device().index(), op);
  if (clash) const_cast<at::Tensor&>(out).copy_(temp);
}

// ---- mm, bmm ---------------------------------------------------------------

void mm_into(const char* name, const at::Tensor& out, const at::Tensor& a, const at::Tensor& b) {
  GemmCall call{name, out, a, b};
  call.out = to_view(out, name), call.a = to_view(a, name), call.b = to_view(b, name);
  run_gemm(call);
}

at::Tensor mm(const at::Tensor& self, const at::Tensor& mat2) {
  NEURON_TRACK_OP("aten::mm");
  c10::DeviceGuard guard(self.device());
  auto m = structured<at::meta::structured_mm>("mm", Kind::Functional, {});
  named("mm", [&] { m.meta(self, mat2); });
  mm_into("mm", m.outputs[0], self, mat2);
  return m.outputs[0];
}

at::Tensor& mm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  NEURON_TRACK_OP("aten::mm.out");
  c10::DeviceGuard guard(self.device());
  auto m = structured<at::meta::structured_mm>("mm", Kind::Out, out);
  named("mm", [&] { m.meta(self, mat2); });
  mm_into("mm", out, self, mat2);
  return out;
}

at::Tensor bmm(const at::Tensor& self, const at::Tensor& mat2) {
  NEURON_TRACK_OP("aten::bmm");
  c10::DeviceGuard guard(self.device());
  auto m = structured<at::meta::structured_bmm>("bmm", Kind::Functional, {});
  named("bmm", [&] { m.meta(self, mat2); });
  mm_into("bmm", m.outputs[0], self, mat2);
  return m.outputs[0];
}

at::Tensor& bmm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  NEURON_TRACK_OP("aten::bmm.out");
  c10::DeviceGuard guard(self.device());
  auto m = structured<at::meta::structured_bmm>("bmm", Kind::Out, out);
  named("bmm", [&] { m.meta(self, mat2); });
  mm_into("bmm", out, self, mat2);
  return out;
}

// ---- addmm, baddbmm, _addmm_activation --------------------------------------

// out = beta * self + alpha * a @ b with self broadcast to out's shape.
void add_product_into(const char* name, const at::Tensor& out, const at::Tensor& self,
                      const at::Tensor& a, const at::Tensor& b, const at::Scalar& beta,
                      const at::Scalar& alpha) {
  at::Tensor cin;
  named(name, [&] { cin = self.expand(out.sizes()); });
  GemmCall call{name, out, a, b, cin};
  call.out = to_view(out, name), call.a = to_view(a, name), call.b = to_view(b, name);
  call.cin = to_view(cin, name);
  call.alpha = alpha, call.beta = beta;
  run_gemm(call);
}

template <class Meta, class... Extra>
at::Tensor add_product(const char* name, Kind kind, at::Tensor out, const at::Tensor& self,
                        const at::Tensor& a, const at::Tensor& b, const at::Scalar& beta,
                        const at::Scalar& alpha, Extra... extra) {
  c10::DeviceGuard guard(self.device());
  auto m = structured<Meta>(name, kind, out);
  named(name, [&] { m.meta(self, a, b, beta, alpha, extra...); });
  add_product_into(name, m.outputs[0], self, a, b, beta, alpha);
  return m.outputs[0];
}

at::Tensor addmm(const at::Tensor& self, const at::Tensor& a, const at::Tensor& b,
                 const at::Scalar& beta, const at::Scalar& alpha) {
  NEURON_TRACK_OP("aten::addmm");
  return add_product<at::meta::structured_addmm>("addmm", Kind::Functional, {}, self, a, b, beta, alpha);
}

at::Tensor& addmm_out(const at::Tensor& self, const at::Tensor& a, const at::Tensor& b,
                      const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out) {
  NEURON_TRACK_OP("aten::addmm.out");
  add_product<at::meta::structured_addmm>("addmm", Kind::Out, out, self, a, b, beta, alpha);
  return out;
}

at::Tensor& addmm_(at::Tensor& self, const at::Tensor& a, const at::Tensor& b,
                   const at::Scalar& beta, const at::Scalar& alpha) {
  NEURON_TRACK_OP("aten::addmm_");
  add_product<at::meta::structured_addmm>("addmm_", Kind::Inplace, self, self, a, b, beta, alpha);
  return self;
}

at::Tensor baddbmm(const at::Tensor& self, const at::Tensor& a, const at::Tensor& b,
                   const at::Scalar& beta, const at::Scalar& alpha) {
  NEURON_TRACK_OP("aten::baddbmm");
  return add_product<at::meta::structured_baddbmm>("baddbmm", Kind::Functional, {}, self, a, b, beta,
                                                   alpha);
}

at::Tensor& baddbmm_out(const at::Tensor& self, const at::Tensor& a, const at::Tensor& b,
                        const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out) {
  NEURON_TRACK_OP("aten::baddbmm.out");
  add_product<at::meta::structured_baddbmm>("baddbmm", Kind::Out, out, self, a, b, beta, alpha);
  return out;
}

at::Tensor& baddbmm_(at::Tensor& self, const at::Tensor& a, const at::Tensor& b,
                     const at::Scalar& beta, const at::Scalar& alpha) {
  NEURON_TRACK_OP("aten::baddbmm_");
  add_product<at::meta::structured_baddbmm>("baddbmm_", Kind::Inplace, self, self, a, b, beta, alpha);
  return self;
}

// addmm followed by relu, or by exact gelu, as PyTorch's CPU kernel does.
at::Tensor& addmm_activation_into(at::Tensor& out, bool use_gelu) {
  return use_gelu ? at::gelu_(out) : at::relu_(out);
}

at::Tensor addmm_activation(const at::Tensor& self, const at::Tensor& a, const at::Tensor& b,
                            const at::Scalar& beta, const at::Scalar& alpha, bool use_gelu) {
  NEURON_TRACK_OP("aten::_addmm_activation");
  at::Tensor out = add_product<at::meta::structured__addmm_activation>(
      "_addmm_activation", Kind::Functional, {}, self, a, b, beta, alpha, use_gelu);
  return addmm_activation_into(out, use_gelu);
}

at::Tensor& addmm_activation_out(const at::Tensor& self, const at::Tensor& a, const at::Tensor& b,
                                 const at::Scalar& beta, const at::Scalar& alpha, bool use_gelu,
                                 at::Tensor& out) {
  NEURON_TRACK_OP("aten::_addmm_activation.out");
  add_product<at::meta::structured__addmm_activation>("_addmm_activation", Kind::Out, out, self, a,
                                                      b, beta, alpha, use_gelu);
  return addmm_activation_into(out, use_gelu);
}

// ---- addbmm: the sum of the batch's products ---------------------------------

void check_addbmm(const at::Tensor& self, const at::Tensor& b1, const at::Tensor& b2) {
  TORCH_CHECK(b1.dim() == 3, "addbmm: batch1 must be a 3D tensor, got ", b1.dim(), "D");
  TORCH_CHECK(b2.dim() == 3, "addbmm: batch2 must be a 3D tensor, got ", b2.dim(), "D");
  TORCH_CHECK(b1.size(0) == b2.size(0), "addbmm: batch1 and batch2 must have same number of batches, got ",
              b1.size(0), " and ", b2.size(0));
  TORCH_CHECK(b1.size(2) == b2.size(1), "addbmm: incompatible matrix sizes for bmm (", b1.size(1), "x",
              b1.size(2), " and ", b2.size(1), "x", b2.size(2), ")");
  TORCH_CHECK(b1.scalar_type() == b2.scalar_type() && self.scalar_type() == b1.scalar_type(),
              "addbmm: expected self, batch1 and batch2 to have the same dtype, but got ",
              self.scalar_type(), ", ", b1.scalar_type(), " and ", b2.scalar_type());
}

// As PyTorch's CPU kernel: self is broadcast to the result's shape first,
// then out is resized (in-place forms included), then out = beta * self +
// alpha * sum_b batch1[b] @ batch2[b].
at::Tensor& addbmm_run(const char* name, const at::Tensor& self, const at::Tensor& b1,
                       const at::Tensor& b2, const at::Scalar& beta, const at::Scalar& alpha,
                       at::Tensor& out) {
  c10::DeviceGuard guard(self.device());
  check_addbmm(self, b1, b2);
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), name, ": expected out tensor to have dtype ",
              self.scalar_type(), ", but got ", out.scalar_type(), " instead");
  check_device(out, self.device(), name);
  at::Tensor cin;
  named(name, [&] { cin = self.expand({b1.size(1), b2.size(2)}); });
  if (out.sizes() != cin.sizes()) out.resize_(cin.sizes());
  GemmCall call{name, out, b1, b2, cin};
  call.out = to_view(out, name), call.a = to_view(b1, name), call.b = to_view(b2, name);
  call.cin = to_view(cin, name);
  call.alpha = alpha, call.beta = beta;
  run_gemm(call);
  return out;
}

at::Tensor& addbmm_out(const at::Tensor& self, const at::Tensor& b1, const at::Tensor& b2,
                       const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out) {
  NEURON_TRACK_OP("aten::addbmm.out");
  return addbmm_run("addbmm", self, b1, b2, beta, alpha, out);
}

at::Tensor addbmm(const at::Tensor& self, const at::Tensor& b1, const at::Tensor& b2,
                  const at::Scalar& beta, const at::Scalar& alpha) {
  NEURON_TRACK_OP("aten::addbmm");
  at::Tensor out = at::empty({0}, b1.options());
  return addbmm_run("addbmm", self, b1, b2, beta, alpha, out);
}

at::Tensor& addbmm_(at::Tensor& self, const at::Tensor& b1, const at::Tensor& b2,
                    const at::Scalar& beta, const at::Scalar& alpha) {
  NEURON_TRACK_OP("aten::addbmm_");
  return addbmm_run("addbmm_", self, b1, b2, beta, alpha, self);
}

// ---- addmv, mv: vectors as one-column matrices ----------------------------------

void addmv_into(const char* name, const at::Tensor& out, const at::Tensor* self, const at::Tensor& mat,
                const at::Tensor& vec, const at::Scalar& beta, const at::Scalar& alpha) {
  GemmCall call{name, out, mat, vec};
  call.out = shaped(out, name, {out.size(0), 1}, {out.stride(0), 1});
  call.a = to_view(mat, name);
  call.b = shaped(vec, name, {vec.size(0), 1}, {vec.stride(0), 1});
  if (self) {
    named(name, [&] { call.cin_t = self->expand(out.sizes()); });
    call.cin = shaped(call.cin_t, name, {out.size(0), 1}, {call.cin_t->stride(0), 1});
  }
  call.alpha = alpha, call.beta = beta;
  run_gemm(call);
}

at::Tensor addmv_impl(const char* name, Kind kind, at::Tensor out, const at::Tensor& self,
                       const at::Tensor& mat, const at::Tensor& vec, const at::Scalar& beta,
                       const at::Scalar& alpha) {
  c10::DeviceGuard guard(self.device());
  auto m = structured<at::meta::structured_addmv>(name, kind, out);
  named(name, [&] { m.meta(self, mat, vec, beta, alpha); });
  addmv_into(name, m.outputs[0], &self, mat, vec, beta, alpha);
  return m.outputs[0];
}

at::Tensor addmv(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec,
                 const at::Scalar& beta, const at::Scalar& alpha) {
  NEURON_TRACK_OP("aten::addmv");
  return addmv_impl("addmv", Kind::Functional, {}, self, mat, vec, beta, alpha);
}

at::Tensor& addmv_out(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec,
                      const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out) {
  NEURON_TRACK_OP("aten::addmv.out");
  addmv_impl("addmv", Kind::Out, out, self, mat, vec, beta, alpha);
  return out;
}

at::Tensor& addmv_(at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec,
                   const at::Scalar& beta, const at::Scalar& alpha) {
  NEURON_TRACK_OP("aten::addmv_");
  addmv_impl("addmv_", Kind::Inplace, self, self, mat, vec, beta, alpha);
  return self;
}

void check_mv(const at::Tensor& self, const at::Tensor& vec) {
  TORCH_CHECK(self.dim() == 2 && vec.dim() == 1, "mv: vector + matrix @ vector expected, got ",
              self.dim(), ", ", vec.dim());
  TORCH_CHECK(self.size(1) == vec.size(0), "mv: size mismatch, got input (", self.size(0),
              "), mat (", self.size(0), "x", self.size(1), "), vec (", vec.size(0), ")");
  TORCH_CHECK(self.scalar_type() == vec.scalar_type(), "mv: expected self and vec to have the same dtype, but got ",
              self.scalar_type(), " and ", vec.scalar_type());
}

at::Tensor mv(const at::Tensor& self, const at::Tensor& vec) {
  NEURON_TRACK_OP("aten::mv");
  c10::DeviceGuard guard(self.device());
  check_mv(self, vec);
  at::Tensor out = at::empty({self.size(0)}, self.options());
  addmv_into("mv", out, nullptr, self, vec, 0, 1);
  return out;
}

at::Tensor& mv_out(const at::Tensor& self, const at::Tensor& vec, at::Tensor& out) {
  NEURON_TRACK_OP("aten::mv.out");
  c10::DeviceGuard guard(self.device());
  check_mv(self, vec);
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "mv: expected out tensor to have dtype ",
              self.scalar_type(), ", but got ", out.scalar_type(), " instead");
  check_device(out, self.device(), "mv");
  at::native::resize_output(out, {self.size(0)});
  addmv_into("mv", out, nullptr, self, vec, 0, 1);
  return out;
}

// ---- dot, vdot (real dtypes: vdot is dot) ------------------------------------------

at::Tensor dot_impl(const char* name, const at::Tensor& self, const at::Tensor& other) {
  c10::DeviceGuard guard(self.device());
  TORCH_CHECK(self.dim() == 1 && other.dim() == 1, name, ": 1D tensors expected, but got ", self.dim(),
              "D and ", other.dim(), "D tensors");
  TORCH_CHECK(self.scalar_type() == other.scalar_type(), name,
              ": expected both vectors to have same dtype, but found ", self.scalar_type(), " and ",
              other.scalar_type());
  TORCH_CHECK(self.numel() == other.numel(), name, ": inconsistent tensor size, expected tensor [",
              self.numel(), "] and src [", other.numel(),
              "] to have the same number of elements, but got ", self.numel(), " and ",
              other.numel(), " elements respectively");
  at::Tensor out = at::empty({}, self.options());
  GemmCall call{name, out, self, other};
  call.out = shaped(out, name, {1, 1}, {1, 1});
  call.a = shaped(self, name, {1, self.size(0)}, {0, self.stride(0)});
  call.b = shaped(other, name, {other.size(0), 1}, {other.stride(0), 0});
  run_gemm(call);
  return out;
}

at::Tensor dot(const at::Tensor& self, const at::Tensor& other) {
  NEURON_TRACK_OP("aten::dot");
  return dot_impl("dot", self, other);
}

at::Tensor vdot(const at::Tensor& self, const at::Tensor& other) {
  NEURON_TRACK_OP("aten::vdot");
  return dot_impl("vdot", self, other);
}

// mm / bmm: complex operands of one dtype on four real GEMMs; other
// storage-dtype calls through the fallback; the rest native.
template <bool Batched>
at::Tensor mm_or_complex(const at::Tensor& self, const at::Tensor& mat2) {
  if (auto out = try_native_complex_mm(self, mat2, Batched)) return *out;
  if (is_storage_dtype(self.scalar_type()) || is_storage_dtype(mat2.scalar_type())) {
    torch::jit::Stack stack{self, mat2};
    run_through_fallback(Batched ? "aten::bmm" : "aten::mm", "", &stack);
    return stack.back().toTensor();
  }
  return Batched ? torchneuron::bmm(self, mat2) : torchneuron::mm(self, mat2);
}

// The complex forms' native paths (complex_gemm.cpp), in the argument
// order of each overload: the product into out=, beta * self + alpha *
// product functional, into out=, and in place.
template <ComplexGemm K>
std::optional<at::Tensor> product_out(const at::Tensor& a, const at::Tensor& b, const at::Tensor& out) {
  return try_native_complex_gemm(K, nullptr, a, b, 0, 1, &out, false);
}
template <ComplexGemm K>
std::optional<at::Tensor> add_product_of(const at::Tensor& self, const at::Tensor& a, const at::Tensor& b,
                                         const at::Scalar& beta, const at::Scalar& alpha) {
  return try_native_complex_gemm(K, &self, a, b, beta, alpha, nullptr, false);
}
template <ComplexGemm K>
std::optional<at::Tensor> add_product_out(const at::Tensor& self, const at::Tensor& a, const at::Tensor& b,
                                          const at::Scalar& beta, const at::Scalar& alpha, const at::Tensor& out) {
  return try_native_complex_gemm(K, &self, a, b, beta, alpha, &out, false);
}
template <ComplexGemm K>
std::optional<at::Tensor> add_product_in_place(const at::Tensor& self, const at::Tensor& a, const at::Tensor& b,
                                               const at::Scalar& beta, const at::Scalar& alpha) {
  return try_native_complex_gemm(K, &self, a, b, beta, alpha, &self, true);
}

}  // namespace

NEURON_LIBRARY_IMPL(aten, m) {
  m.impl("mm", mm_or_complex<false>);
  m.impl("mm.out", complex_first("mm.out", mm_out, product_out<ComplexGemm::Mm>));
  m.impl("bmm", mm_or_complex<true>);
  m.impl("bmm.out", complex_first("bmm.out", bmm_out, product_out<ComplexGemm::Bmm>));
  m.impl("addmm", complex_first("addmm", addmm, add_product_of<ComplexGemm::Mm>));
  m.impl("addmm.out", complex_first("addmm.out", addmm_out, add_product_out<ComplexGemm::Mm>));
  m.impl("addmm_", complex_first("addmm_", addmm_, add_product_in_place<ComplexGemm::Mm>));
  m.impl("baddbmm", complex_first("baddbmm", baddbmm, add_product_of<ComplexGemm::Bmm>));
  m.impl("baddbmm.out", complex_first("baddbmm.out", baddbmm_out, add_product_out<ComplexGemm::Bmm>));
  m.impl("baddbmm_", complex_first("baddbmm_", baddbmm_, add_product_in_place<ComplexGemm::Bmm>));
  m.impl("addbmm", complex_first("addbmm", addbmm, add_product_of<ComplexGemm::BatchSum>));
  m.impl("addbmm.out", complex_first("addbmm.out", addbmm_out, add_product_out<ComplexGemm::BatchSum>));
  m.impl("addbmm_", complex_first("addbmm_", addbmm_, add_product_in_place<ComplexGemm::BatchSum>));
  m.impl("addmv", complex_first("addmv", addmv, add_product_of<ComplexGemm::Mv>));
  m.impl("addmv.out", complex_first("addmv.out", addmv_out, add_product_out<ComplexGemm::Mv>));
  m.impl("addmv_", complex_first("addmv_", addmv_, add_product_in_place<ComplexGemm::Mv>));
  m.impl("mv", complex_first("mv", mv, [](const at::Tensor& self, const at::Tensor& vec) {
           return try_native_complex_gemm(ComplexGemm::Mv, nullptr, self, vec, 0, 1, nullptr, false);
         }));
  m.impl("mv.out", complex_first("mv.out", mv_out, product_out<ComplexGemm::Mv>));
  m.impl("dot", complex_first("dot", dot, [](const at::Tensor& self, const at::Tensor& other) {
           return try_native_complex_dot(self, other, false);
         }));
  m.impl("vdot", complex_first("vdot", vdot, [](const at::Tensor& self, const at::Tensor& other) {
           return try_native_complex_dot(self, other, true);
         }));
  m.impl("_addmm_activation", native_or_fallback("_addmm_activation", addmm_activation));
  m.impl("_addmm_activation.out", native_or_fallback("_addmm_activation.out", addmm_activation_out));
}

}  // namespace torchneuron
