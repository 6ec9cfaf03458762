// Reflection and replication padding (1-d, 2-d, 3-d), forward and backward,
// on the runtime's PAD ops (neuronrt/ops/vision.h). The tensors are seen as
// [planes, D, H, W]: every dim before the padded ones is folded into planes
// (inputs are made contiguous, as PyTorch's CPU kernels do). Argument checks
// follow PyTorch's (ReflectionPad.cpp, ReplicationPadding.cpp).
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <vector>

#include "nn_launch.h"
#include "op_tracking.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {

enum class PadMode { Reflect = 0, Replicate = 1 };

struct PadGeometry {
  int64_t planes = 1;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, begin[3] = {0, 0, 0};  // D, H, W
  std::vector<int64_t> out_shape;
};

const char* dim_letter(int d) { return d == 0 ? "D" : d == 1 ? "H" : "W"; }

// padding = (W begin, W end, H begin, H end, D begin, D end), the last dims first.
PadGeometry pad_geometry(const char* name, const at::Tensor& self, at::IntArrayRef padding, int dims,
                         PadMode mode) {
  TORCH_CHECK(static_cast<int64_t>(padding.size()) == 2 * dims, name, ": padding size is expected to be ",
              2 * dims, ", but got: ", padding.size());
  const int64_t rank = self.dim();
  bool ok = rank == dims + 1 || rank == dims + 2;
  for (int64_t d = rank == dims + 2 ? 1 : 0; ok && d < rank; d++) ok = self.size(d) != 0;
  // The CPU's wording (capitals included: upstream tests match it with a regex).
  TORCH_CHECK(ok, name, ": Expected ", dims + 1, "D or ", dims + 2,
              "D (batch mode) tensor with possibly 0 batch size and other non-zero dimensions for input, but got: ",
              self.sizes());
  PadGeometry g;
  for (int64_t d = 0; d < rank - dims; d++) g.planes *= self.size(d);
  g.out_shape = self.sizes().vec();
  for (int k = 0; k < dims; k++) {  // k: padded dim k from the last
    const int slot = 2 - k;
    const int64_t axis = rank - 1 - k, size = self.size(axis);
    const int64_t lo = padding[2 * k], hi = padding[2 * k + 1];
    if (mode == PadMode::Reflect)
      TORCH_CHECK(lo < size && hi < size, name, ": Argument #", 4 + 2 * k,
                  ": Padding size should be less than the corresponding input dimension, but got: padding (", lo,
                  ", ", hi, ") at dimension ", axis, " of input ", self.sizes());
    const int64_t out = size + lo + hi;
    TORCH_CHECK(out >= 1, name, ": input (", dim_letter(slot), ": ", size, ") is too small. Calculated output ",
                dim_letter(slot), ": ", out);
    g.in[slot] = size;
    g.out[slot] = out;
    g.begin[slot] = lo;
    g.out_shape[axis] = out;
  }
  return g;
}

// first is the op's output: the padded side for PAD, the unpadded for PAD_BACKWARD.
void launch_pad(nrt_op_code code, PadMode mode, const PadGeometry& g, const at::Tensor& first,
                const at::Tensor& second, const char* name, bool first_is_padded) {
  const int64_t *a = first_is_padded ? g.out : g.in, *b = first_is_padded ? g.in : g.out;
  launch_nn(code, first, 1,
            {contiguous_view(first, {g.planes, a[0], a[1], a[2]}, name),
             contiguous_view(second, {g.planes, b[0], b[1], b[2]}, name)},
            {int_scalar(static_cast<int64_t>(mode)), int_scalar(g.begin[0]), int_scalar(g.begin[1]),
             int_scalar(g.begin[2])});
}

// A complex tensor is padded as its real view (view_as_real) with the
// (re, im) pair moved just before the padded dims, where it folds into the
// planes: `rank - dims` is that place, in the complex tensor's dims.
at::Tensor complex_planes(const at::Tensor& t, int dims) {
  return at::view_as_real(t.resolve_conj().resolve_neg()).movedim(-1, t.dim() - dims).contiguous();
}
at::Tensor empty_planes(const at::Tensor& like, at::IntArrayRef sizes, int dims) {
  std::vector<int64_t> shape = sizes.vec();
  shape.insert(shape.end() - dims, 2);
  return at::empty(shape, like.options().dtype(c10::toRealValueType(like.scalar_type())));
}
// Each part's plane copied on its own: one copy with the pair innermost
// reads the source a whole plane apart per element (several times slower).
void store_planes(at::Tensor& out, const at::Tensor& planes, int dims) {
  const at::Tensor dst = at::view_as_real(out);
  for (int64_t part = 0; part < 2; part++) dst.select(-1, part).copy_(planes.select(out.dim() - dims, part));
}

at::Tensor& pad_out(const char* name, PadMode mode, int dims, const at::Tensor& self, at::IntArrayRef padding,
                    at::Tensor& out) {
  PadGeometry g = pad_geometry(name, self, padding, dims, mode);
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), name, ": expected out to have dtype ", self.scalar_type(),
              ", got ", out.scalar_type());
  c10::DeviceGuard guard(self.device());
  at::native::resize_output(out, g.out_shape);
  if (out.numel() == 0) return out;
  if (self.is_complex() && self.scalar_type() != at::kComplexHalf && !out.is_conj() && !out.is_neg()) {
    at::Tensor x = complex_planes(self, dims), y = empty_planes(self, g.out_shape, dims);
    g.planes *= 2;
    launch_pad(NRT_OP_PAD, mode, g, y, x, name, true);
    store_planes(out, y, dims);
    return out;
  }
  at::Tensor x = self.contiguous();
  at::Tensor y = out.is_contiguous() ? out : at::empty(g.out_shape, self.options());
  launch_pad(NRT_OP_PAD, mode, g, y, x, name, true);
  if (!y.is_same(out)) out.copy_(y);
  return out;
}

at::Tensor& pad_backward_out(const char* name, PadMode mode, int dims, const at::Tensor& grad_output,
                             const at::Tensor& self, at::IntArrayRef padding, at::Tensor& grad_input) {
  PadGeometry g = pad_geometry(name, self, padding, dims, mode);
  TORCH_CHECK(grad_output.sizes() == at::IntArrayRef(g.out_shape), name, ": expected grad_output of shape ",
              at::IntArrayRef(g.out_shape), ", got ", grad_output.sizes());
  const bool complex = grad_output.is_complex() && grad_output.scalar_type() != at::kComplexHalf &&
                       grad_input.scalar_type() == grad_output.scalar_type() && !grad_input.is_conj() &&
                       !grad_input.is_neg();
  TORCH_CHECK_NOT_IMPLEMENTED(complex || at::isFloatingType(grad_output.scalar_type()), "\"", name,
                              "\" not implemented for '", grad_output.scalar_type(), "'");
  c10::DeviceGuard guard(self.device());
  at::native::resize_output(grad_input, self.sizes());
  if (grad_input.numel() == 0) return grad_input;
  if (complex) {
    at::Tensor gy = complex_planes(grad_output, dims), gx = empty_planes(grad_output, self.sizes(), dims);
    g.planes *= 2;
    launch_pad(NRT_OP_PAD_BACKWARD, mode, g, gx, gy, name, false);
    store_planes(grad_input, gx, dims);
    return grad_input;
  }
  at::Tensor gy = grad_output.contiguous();
  at::Tensor gx = grad_input.is_contiguous() ? grad_input : at::empty(self.sizes(), grad_input.options());
  launch_pad(NRT_OP_PAD_BACKWARD, mode, g, gx, gy, name, false);
  if (!gx.is_same(grad_input)) grad_input.copy_(gx);
  return grad_input;
}

// The twelve ATen ops of a (mode, dims) pair: functional and out forms of the
// forward and the backward.
#define DEFINE_PAD(op, MODE, DIMS)                                                                    \
  at::Tensor& op##_out(const at::Tensor& self, at::IntArrayRef padding, at::Tensor& out) {           \
    NEURON_TRACK_OP("aten::" #op ".out");                                                             \
    return pad_out(#op, MODE, DIMS, self, padding, out);                                             \
  }                                                                                                  \
  at::Tensor op(const at::Tensor& self, at::IntArrayRef padding) {                                   \
    NEURON_TRACK_OP("aten::" #op);                                                                    \
    at::Tensor out = at::empty({0}, self.options());                                                 \
    return pad_out(#op, MODE, DIMS, self, padding, out);                                             \
  }                                                                                                  \
  at::Tensor& op##_backward_out(const at::Tensor& grad_output, const at::Tensor& self,               \
                                at::IntArrayRef padding, at::Tensor& grad_input) {                   \
    NEURON_TRACK_OP("aten::" #op "_backward.grad_input");                                             \
    return pad_backward_out(#op "_backward", MODE, DIMS, grad_output, self, padding, grad_input);    \
  }                                                                                                  \
  at::Tensor op##_backward(const at::Tensor& grad_output, const at::Tensor& self,                    \
                           at::IntArrayRef padding) {                                                \
    NEURON_TRACK_OP("aten::" #op "_backward");                                                        \
    at::Tensor grad_input = at::empty({0}, grad_output.options());                                   \
    return pad_backward_out(#op "_backward", MODE, DIMS, grad_output, self, padding, grad_input);    \
  }

#define PAD_OPS(X)                          \
  X(reflection_pad1d, PadMode::Reflect, 1)   \
  X(reflection_pad2d, PadMode::Reflect, 2)   \
  X(reflection_pad3d, PadMode::Reflect, 3)   \
  X(replication_pad1d, PadMode::Replicate, 1) \
  X(replication_pad2d, PadMode::Replicate, 2) \
  X(replication_pad3d, PadMode::Replicate, 3)

PAD_OPS(DEFINE_PAD)

}  // namespace

#define REGISTER_PAD(op, MODE, DIMS)                        \
  m.impl(#op, TORCH_FN(op));                                \
  m.impl(#op ".out", TORCH_FN(op##_out));                   \
  m.impl(#op "_backward", TORCH_FN(op##_backward));         \
  m.impl(#op "_backward.grad_input", TORCH_FN(op##_backward_out));

NEURON_LIBRARY_IMPL(aten, m) { PAD_OPS(REGISTER_PAD) }

// This file's macros end here (the unity build puts files one after another).
#undef DEFINE_PAD
#undef PAD_OPS
#undef REGISTER_PAD
}  // namespace torchneuron
