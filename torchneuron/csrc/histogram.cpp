// torch.histogram (bin count or bin edges, weights, density) and the
// deprecated torch.cholesky, composed of native kernels with the CPU's
// checks, messages and warning.
//
// A value's bin is found against the edges themselves (searchsorted, the
// last edge closing the last bin), which is where the CPU's interpolation
// with local search lands too; values outside the edges (and NaN) count
// nowhere. The counts accumulate with index_put_.
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <cmath>

#include "op_tracking.h"
#include "structured_outputs.h"

namespace torchneuron {
namespace {

void check_histogram_input(const at::Tensor& self, const std::optional<at::Tensor>& weight) {
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()), "\"histogramdd\" not implemented for '",
                              at::toString(self.scalar_type()), "'");
  if (weight.has_value() && weight->defined())
    TORCH_CHECK(weight->sizes() == self.sizes(),
                "torch.histogramdd: if weight tensor is provided it should have the same shape as the input tensor "
                "excluding its innermost dimension, but got input with shape ",
                at::IntArrayRef({self.numel(), 1}), " and weight with shape ", weight->sizes());
}

std::tuple<at::Tensor, at::Tensor> histogram_with_edges(const at::Tensor& self, const at::Tensor& edges,
                                                        const std::optional<at::Tensor>& weight, bool density) {
  const int64_t bins = edges.numel() - 1;
  at::Tensor hist = at::zeros({std::max<int64_t>(bins, 0)}, self.options());
  if (bins <= 0 || self.numel() == 0) return {hist, edges};
  const at::Tensor x = self.reshape({-1});
  const at::Tensor first = edges.narrow(0, 0, 1), last = edges.narrow(0, bins, 1);
  at::Tensor bin = at::searchsorted(edges, x, /*out_int32=*/false, /*right=*/true) - 1;
  bin = at::where(x.eq(last), bins - 1, bin);
  const at::Tensor inside = x.ge(first).logical_and(x.le(last));
  bin = at::where(inside, bin, 0);
  at::Tensor amount = inside.to(self.scalar_type());
  if (weight.has_value() && weight->defined()) amount = amount * weight->reshape({-1});
  hist.index_put_({bin}, amount, /*accumulate=*/true);
  if (density) hist = hist / (hist.sum() * (edges.narrow(0, 1, bins) - edges.narrow(0, 0, bins)));
  return {hist, edges};
}

std::tuple<at::Tensor, at::Tensor> histogram_bin_ct(const at::Tensor& self, int64_t bins,
                                                    std::optional<at::ArrayRef<double>> range,
                                                    const std::optional<at::Tensor>& weight, bool density) {
  NEURON_TRACK_OP("aten::histogram.bin_ct");
  check_histogram_input(self, weight);
  TORCH_CHECK(bins > 0, "torch.histogram(): bins must be > 0, but got ", bins, " for dimension 0");
  double leftmost = 0, rightmost = 1;
  if (range.has_value()) {
    TORCH_CHECK(range->size() == 2, "torch.histogramdd: for 1 dimensions, range should have 2 elements, but got ",
                range->size());
    leftmost = (*range)[0];
    rightmost = (*range)[1];
  } else if (self.numel() > 0) {
    const at::Tensor extremes = at::stack({self.min(), self.max()}).to(at::kDouble).cpu();  // one read-back
    leftmost = extremes[0].item<double>();
    rightmost = extremes[1].item<double>();
  }
  TORCH_CHECK(std::isfinite(leftmost) && std::isfinite(rightmost), "torch.histogramdd: dimension 0's range [",
              leftmost, ", ", rightmost, "] is not finite");
  TORCH_CHECK(leftmost <= rightmost, "torch.histogramdd: min should not exceed max, but got min ", leftmost, " max ",
              rightmost, " for dimension 0");
  if (leftmost == rightmost) {  // one value: a bin of width 1 around it
    leftmost -= 0.5;
    rightmost += 0.5;
  }
  const at::Tensor edges = at::linspace(leftmost, rightmost, bins + 1, self.options());
  return histogram_with_edges(self, edges, weight, density);
}

std::tuple<at::Tensor, at::Tensor> histogram_bins_tensor(const at::Tensor& self, const at::Tensor& bins,
                                                         const std::optional<at::Tensor>& weight, bool density) {
  NEURON_TRACK_OP("aten::histogram.bins_tensor");
  check_histogram_input(self, weight);
  TORCH_CHECK(bins.dim() == 1, "torch.histogramdd: bins tensor should have one dimension, but got ", bins.dim(),
              " dimensions in the bins tensor for dimension 0");
  TORCH_CHECK(bins.numel() > 0, "torch.histogramdd: bins tensor should have at least 1 element, but got ",
              bins.numel(), " elements in the bins tensor for dimension 0");
  TORCH_CHECK(bins.numel() > 1, "torch.histogram(): bins must be > 0, but got 0 for dimension 0");
  TORCH_CHECK(bins.scalar_type() == self.scalar_type(),
              "torch.histogramdd: input tensor and bins tensors should have the same dtype, but got input with "
              "dtype ",
              self.dtype(), " and bins for dimension 0 with dtype ", bins.dtype());
  return histogram_with_edges(self, bins.contiguous(), weight, density);
}

std::tuple<at::Tensor&, at::Tensor&> copy_pair(const std::tuple<at::Tensor, at::Tensor>& result, at::Tensor& hist,
                                               at::Tensor& bin_edges) {
  return {assign_out(hist, std::get<0>(result)), assign_out(bin_edges, std::get<1>(result))};
}

std::tuple<at::Tensor&, at::Tensor&> histogram_bin_ct_out(const at::Tensor& self, int64_t bins,
                                                          std::optional<at::ArrayRef<double>> range,
                                                          const std::optional<at::Tensor>& weight, bool density,
                                                          at::Tensor& hist, at::Tensor& bin_edges) {
  NEURON_TRACK_OP("aten::histogram.bin_ct_out");
  return copy_pair(histogram_bin_ct(self, bins, range, weight, density), hist, bin_edges);
}

std::tuple<at::Tensor&, at::Tensor&> histogram_bins_tensor_out(const at::Tensor& self, const at::Tensor& bins,
                                                               const std::optional<at::Tensor>& weight, bool density,
                                                               at::Tensor& hist, at::Tensor& bin_edges) {
  NEURON_TRACK_OP("aten::histogram.bins_tensor_out");
  return copy_pair(histogram_bins_tensor(self, bins, weight, density), hist, bin_edges);
}

void warn_cholesky_deprecated() {
  TORCH_WARN_ONCE(
      "torch.cholesky is deprecated in favor of torch.linalg.cholesky and will be removed in a future PyTorch "
      "release.\nL = torch.cholesky(A)\nshould be replaced with\nL = torch.linalg.cholesky(A)\nand\nU = "
      "torch.cholesky(A, upper=True)\nshould be replaced with\nU = torch.linalg.cholesky(A).mH\nThis transform "
      "will produce equivalent results for all valid (symmetric positive definite) inputs.");
}

at::Tensor cholesky(const at::Tensor& self, bool upper) {
  NEURON_TRACK_OP("aten::cholesky");
  warn_cholesky_deprecated();
  TORCH_CHECK(self.dim() >= 2, "cholesky: The input tensor A must have at least 2 dimensions.");
  TORCH_CHECK(self.size(-1) == self.size(-2), "cholesky: A must be batches of square matrices, but they are ",
              self.size(-2), " by ", self.size(-1), " matrices");
  auto [factor, info] = at::linalg_cholesky_ex(self, upper, /*check_errors=*/false);
  at::_linalg_check_errors(info, "cholesky", self.dim() == 2);
  return factor;
}

at::Tensor& cholesky_out(const at::Tensor& self, bool upper, at::Tensor& out) {
  NEURON_TRACK_OP("aten::cholesky.out");
  return assign_out(out, torchneuron::cholesky(self, upper));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("histogram.bin_ct", histogram_bin_ct);
  m.impl("histogram.bin_ct_out", histogram_bin_ct_out);
  m.impl("histogram.bins_tensor", histogram_bins_tensor);
  m.impl("histogram.bins_tensor_out", histogram_bins_tensor_out);
  m.impl("cholesky", cholesky);
  m.impl("cholesky.out", cholesky_out);
}

}  // namespace torchneuron
