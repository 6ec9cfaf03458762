// im2col / col2im (F.unfold / F.fold, nn.Unfold / nn.Fold), each the
// other's gradient, on the runtime's IM2COL / COL2IM ops
// (neuronrt/ops/vision.h). The image is seen as [N, C, H, W] and the column
// matrix [N, C*kH*kW, L] as [N, C*kH*kW, OH, OW]; an unbatched call gets
// N = 1. Argument checks are PyTorch's own (im2col_shape_check.h).
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <ATen/native/im2col_shape_check.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "nn_launch.h"
#include "op_tracking.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {

struct Patches {
  int64_t kh, kw, dh, dw, ph, pw, sh, sw;
};

Patches patches_of(at::IntArrayRef kernel_size, at::IntArrayRef dilation, at::IntArrayRef padding,
                   at::IntArrayRef stride) {
  TORCH_CHECK(kernel_size.size() == 2, "It is expected kernel_size equals to 2, but got size ", kernel_size.size());
  TORCH_CHECK(dilation.size() == 2, "It is expected dilation equals to 2, but got size ", dilation.size());
  TORCH_CHECK(padding.size() == 2, "It is expected padding equals to 2, but got size ", padding.size());
  TORCH_CHECK(stride.size() == 2, "It is expected stride equals to 2, but got size ", stride.size());
  return {kernel_size[0], kernel_size[1], dilation[0], dilation[1], padding[0], padding[1], stride[0], stride[1]};
}

// The CPU kernels' dtypes: floating and bool (and complex, by_parts below).
void check_patch_dtype(const at::Tensor& self, const char* cpu_name) {
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()) || self.scalar_type() == at::kBool, "\"",
                              cpu_name, "\" not implemented for '", at::toString(self.scalar_type()), "'");
}

void launch_patches(nrt_op_code code, const Patches& p, const at::Tensor& first, const at::Tensor& second,
                    std::initializer_list<int64_t> first_shape, std::initializer_list<int64_t> second_shape,
                    const char* name) {
  launch_nn(code, first, 1, {contiguous_view(first, first_shape, name), contiguous_view(second, second_shape, name)},
            {int_scalar(p.kh), int_scalar(p.kw), int_scalar(p.dh), int_scalar(p.dw), int_scalar(p.ph),
             int_scalar(p.pw), int_scalar(p.sh), int_scalar(p.sw)});
}

// Complex patches: both ops are linear, so each part is moved (and, for
// col2im, summed) on its own by the real kernels, and written through the
// parts of out.
template <typename RealOp>
at::Tensor& by_parts(const at::Tensor& self, at::Tensor& out, const char* name, RealOp real_op) {
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), name, ": expected out to have dtype ", self.scalar_type(),
              ", got ", out.scalar_type());
  const at::Tensor z = self.resolve_conj().resolve_neg();
  const at::Tensor re = real_op(at::real(z)), im = real_op(at::imag(z));
  at::native::resize_output(out, re.sizes());
  at::Tensor target = out.is_conj() || out.is_neg() ? at::empty(re.sizes(), out.options()) : out;
  at::real(target).copy_(re);
  at::imag(target).copy_(im);
  if (!target.is_same(out)) out.copy_(target);
  return out;
}

at::Tensor& im2col_out(const at::Tensor& self, at::IntArrayRef kernel_size, at::IntArrayRef dilation,
                       at::IntArrayRef padding, at::IntArrayRef stride, at::Tensor& out) {
  NEURON_TRACK_OP("aten::im2col.out");
  const Patches p = patches_of(kernel_size, dilation, padding, stride);
  at::native::im2col_shape_check(self, at::Tensor(), p.kh, p.kw, p.dh, p.dw, p.ph, p.pw, p.sh, p.sw);
  if (self.is_complex())
    return by_parts(self, out, "im2col", [&](const at::Tensor& part) {
      return at::im2col(part, kernel_size, dilation, padding, stride);
    });
  check_patch_dtype(self, "im2col_out_cpu");
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "im2col: expected out to have dtype ", self.scalar_type(),
              ", got ", out.scalar_type());
  const bool batched = self.dim() == 4;
  const int64_t n = batched ? self.size(0) : 1, c = self.size(-3), h = self.size(-2), w = self.size(-1);
  const int64_t oh = at::native::sliding_window_count(h, p.ph, p.dh, p.kh, p.sh);
  const int64_t ow = at::native::sliding_window_count(w, p.pw, p.dw, p.kw, p.sw);
  const int64_t rows = c * p.kh * p.kw;
  std::vector<int64_t> shape = batched ? std::vector<int64_t>{n, rows, oh * ow} : std::vector<int64_t>{rows, oh * ow};
  c10::DeviceGuard guard(self.device());
  at::native::resize_output(out, shape);
  if (out.numel() == 0) return out;
  at::Tensor x = self.contiguous();
  at::Tensor y = out.is_contiguous() ? out : at::empty(shape, self.options());
  launch_patches(NRT_OP_IM2COL, p, y, x, {n, rows, oh, ow}, {n, c, h, w}, "im2col");
  if (!y.is_same(out)) out.copy_(y);
  return out;
}

at::Tensor im2col(const at::Tensor& self, at::IntArrayRef kernel_size, at::IntArrayRef dilation,
                  at::IntArrayRef padding, at::IntArrayRef stride) {
  NEURON_TRACK_OP("aten::im2col");
  at::Tensor out = at::empty({0}, self.options());
  return im2col_out(self, kernel_size, dilation, padding, stride, out);
}

at::Tensor& col2im_out(const at::Tensor& self, c10::SymIntArrayRef output_size_sym, at::IntArrayRef kernel_size,
                       at::IntArrayRef dilation, at::IntArrayRef padding, at::IntArrayRef stride, at::Tensor& out) {
  NEURON_TRACK_OP("aten::col2im.out");
  at::IntArrayRef output_size = C10_AS_INTARRAYREF_SLOW(output_size_sym);
  TORCH_CHECK(output_size.size() == 2, "It is expected output_size equals to 2, but got size ", output_size.size());
  const Patches p = patches_of(kernel_size, dilation, padding, stride);
  const int64_t h = output_size[0], w = output_size[1];
  at::native::col2im_shape_check(self, at::Tensor(), h, w, p.kh, p.kw, p.dh, p.dw, p.ph, p.pw, p.sh, p.sw);
  if (self.is_complex())
    return by_parts(self, out, "col2im", [&](const at::Tensor& part) {
      return at::col2im(part, output_size, kernel_size, dilation, padding, stride);
    });
  check_patch_dtype(self, "col2im_out_cpu");
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "col2im: expected out to have dtype ", self.scalar_type(),
              ", got ", out.scalar_type());
  const bool batched = self.dim() == 3;
  const int64_t n = batched ? self.size(0) : 1, rows = self.size(-2), c = rows / (p.kh * p.kw);
  const int64_t oh = at::native::sliding_window_count(h, p.ph, p.dh, p.kh, p.sh);
  const int64_t ow = at::native::sliding_window_count(w, p.pw, p.dw, p.kw, p.sw);
  std::vector<int64_t> shape = batched ? std::vector<int64_t>{n, c, h, w} : std::vector<int64_t>{c, h, w};
  c10::DeviceGuard guard(self.device());
  at::native::resize_output(out, shape);
  if (out.numel() == 0) return out;
  at::Tensor cols = self.contiguous();
  at::Tensor y = out.is_contiguous() ? out : at::empty(shape, self.options());
  launch_patches(NRT_OP_COL2IM, p, y, cols, {n, c, h, w}, {n, rows, oh, ow}, "col2im");
  if (!y.is_same(out)) out.copy_(y);
  return out;
}

at::Tensor col2im(const at::Tensor& self, c10::SymIntArrayRef output_size, at::IntArrayRef kernel_size,
                  at::IntArrayRef dilation, at::IntArrayRef padding, at::IntArrayRef stride) {
  NEURON_TRACK_OP("aten::col2im");
  at::Tensor out = at::empty({0}, self.options());
  return col2im_out(self, output_size, kernel_size, dilation, padding, stride, out);
}

}  // namespace

NEURON_LIBRARY_IMPL(aten, m) {
  m.impl("im2col", TORCH_FN(im2col));
  m.impl("im2col.out", TORCH_FN(im2col_out));
  m.impl("col2im", TORCH_FN(col2im));
  m.impl("col2im.out", TORCH_FN(col2im_out));
}

}  // namespace torchneuron
