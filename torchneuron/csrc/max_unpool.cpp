// max_unpool2d and max_unpool3d: every input value is written to the
// output position its index names within its (batch, channel) plane, the
// rest of the output is zero. Composed of native kernels: a zero fill, one
// scatter over (planes, positions) views, and a copy into the input's
// memory format. A bad index is the scatter's IndexOutOfRangeError
// (asynchronous, as every device-side index check here); the CPU's other
// checks and messages are repeated before anything runs.
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "op_tracking.h"
#include "structured_outputs.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {

void check_indices(const at::Tensor& self, const at::Tensor& indices) {
  TORCH_CHECK(indices.scalar_type() == at::kLong, "elements in indices should be type int64 but got: ",
              indices.scalar_type());
  TORCH_CHECK(indices.sizes() == self.sizes(), "Expected shape of indices to be same as that of the input tensor (",
              self.sizes(), ") but got indices tensor with shape: ", indices.sizes());
}

// The scatter, for an input of `spatial` trailing dims (plus channel and
// an optional batch dim) into `output_size`.
at::Tensor unpool(const at::Tensor& self, const at::Tensor& indices, at::IntArrayRef output_size) {
  const int64_t spatial = static_cast<int64_t>(output_size.size());
  std::vector<int64_t> out_shape(self.sizes().begin(), self.sizes().end() - spatial);
  int64_t positions = 1;
  for (int64_t s : output_size) {
    out_shape.push_back(s);
    positions *= s;
  }
  int64_t planes = 1;
  for (int64_t d = 0; d < self.dim() - spatial; d++) planes *= self.size(d);
  at::Tensor flat = at::zeros({planes, positions}, self.options());
  if (self.numel() > 0)
    flat.scatter_(1, indices.reshape({planes, -1}), self.reshape({planes, -1}));
  at::Tensor out = flat.view(out_shape);
  const auto format = self.suggest_memory_format();
  return format == at::MemoryFormat::Contiguous ? out : out.contiguous(format);
}

at::Tensor max_unpool2d(const at::Tensor& self, const at::Tensor& indices, c10::SymIntArrayRef output_size_sym) {
  NEURON_TRACK_OP("aten::max_unpool2d");
  const std::vector<int64_t> output_size = C10_AS_INTARRAYREF_SLOW(output_size_sym).vec();
  check_indices(self, indices);
  TORCH_CHECK(output_size.size() == 2, "There should be exactly two elements (height, width) in output_size, but got ",
              output_size.size(), " elements.");
  TORCH_CHECK(self.dim() == 3 || self.dim() == 4,
              "Input to max_unpooling2d should be a 3d or 4d Tensor, but got a tensor with ", self.dim(),
              " dimensions.");
  for (int64_t d = 1; d < self.dim(); d++)
    TORCH_CHECK(self.size(d) > 0, "max_unpooling2d(): Expected input to have non-zero size for non-batch ",
                "dimensions, but got ", self.sizes(), " with dimension ", d, " being empty.");
  return unpool(self, indices, output_size);
}

at::Tensor max_unpool3d(const at::Tensor& self, const at::Tensor& indices, c10::SymIntArrayRef output_size_sym,
                        at::IntArrayRef stride, at::IntArrayRef padding) {
  NEURON_TRACK_OP("aten::max_unpool3d");
  const std::vector<int64_t> output_size = C10_AS_INTARRAYREF_SLOW(output_size_sym).vec();
  check_indices(self, indices);
  TORCH_CHECK(self.dim() == 4 || self.dim() == 5,
              "Input to max_unpooling3d should be a 4d or 5d Tensor, but got a tensor with ", self.dim(),
              " dimensions.");
  TORCH_CHECK(output_size.size() == 3, "There should be exactly three elements (depth, height, width) in ",
              "output_size, but got ", output_size.size(), " elements.");
  TORCH_CHECK(stride.size() == 3, "There should be exactly three elements (depth, height, width) in stride, but got: ",
              stride.size(), " elements.");
  TORCH_CHECK(padding.size() == 3, "There should be exactly three elements (depth, height, width) in padding, but ",
              "got: ", padding.size(), " elements.");
  TORCH_CHECK(stride[0] > 0 && stride[1] > 0 && stride[2] > 0, "strides should be greater than zero, but got stride: ",
              stride);
  for (int64_t d = 1; d < self.dim(); d++)
    TORCH_CHECK(self.size(d) > 0, "max_unpooling3d(): Expected input to have non-zero size for non-batch ",
                "dimensions, but got ", self.sizes(), " with dimension ", d, " being empty.");
  return unpool(self, indices, output_size);
}

at::Tensor& max_unpool2d_out(const at::Tensor& self, const at::Tensor& indices, c10::SymIntArrayRef output_size,
                             at::Tensor& out) {
  NEURON_TRACK_OP("aten::max_unpool2d.out");
  return assign_out(out, max_unpool2d(self, indices, output_size));
}

at::Tensor& max_unpool3d_out(const at::Tensor& self, const at::Tensor& indices, c10::SymIntArrayRef output_size,
                             at::IntArrayRef stride, at::IntArrayRef padding, at::Tensor& out) {
  NEURON_TRACK_OP("aten::max_unpool3d.out");
  return assign_out(out, max_unpool3d(self, indices, output_size, stride, padding));
}

}  // namespace

NEURON_LIBRARY_IMPL(aten, m) {
  m.impl("max_unpool2d", max_unpool2d);
  m.impl("max_unpool2d.out", max_unpool2d_out);
  m.impl("max_unpool3d", max_unpool3d);
  m.impl("max_unpool3d.out", max_unpool3d_out);
}

}  // namespace torchneuron
