// torch.histogram and torch.histogramdd (bin counts or bin edges, weights,
// density) and the deprecated torch.cholesky, composed of native kernels with the CPU's
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
#include <utility>
#include <vector>

#include "op_tracking.h"
#include "structured_outputs.h"
#include "runtime_limits.h"

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

// Each row's bin along one dimension, found against that dimension's edges
// (the last edge closes the last bin); rows outside the edges or NaN are
// flagged not inside.
void bin_along(const at::Tensor& x, const at::Tensor& edges, at::Tensor& bin, at::Tensor& inside) {
  const int64_t bins = edges.numel() - 1;
  const at::Tensor first = edges.narrow(0, 0, 1), last = edges.narrow(0, bins, 1);
  at::Tensor b = at::searchsorted(edges, x, /*out_int32=*/false, /*right=*/true) - 1;
  b = at::where(x.eq(last), bins - 1, b);
  at::Tensor in = x.ge(first).logical_and(x.le(last));
  bin = at::where(in, b, 0);
  inside = in;
}

// The histogram of the rows of x [N, D] over per-dimension edges, counted
// into one flat tensor through row-major bin numbers.
at::Tensor histogramdd_with_edges(const at::Tensor& x, at::TensorList edges, const std::optional<at::Tensor>& weight,
                                  bool density) {
  std::vector<int64_t> bins;
  for (const at::Tensor& e : edges) bins.push_back(std::max<int64_t>(e.numel() - 1, 0));
  at::Tensor hist = at::zeros(bins, x.options());
  if (x.size(0) == 0 || hist.numel() == 0) return hist;
  at::Tensor flat_bin, inside;
  for (size_t d = 0; d < edges.size(); d++) {
    at::Tensor b, in;
    bin_along(x.select(1, static_cast<int64_t>(d)).contiguous(), edges[d], b, in);
    flat_bin = d == 0 ? b : flat_bin * bins[d] + b;
    inside = d == 0 ? in : inside.logical_and(in);
  }
  at::Tensor amount = inside.to(x.scalar_type());
  if (weight.has_value() && weight->defined()) amount = amount * weight->reshape({-1});
  hist.view({-1}).index_put_({flat_bin}, amount, /*accumulate=*/true);
  if (density) {
    at::Tensor volume = at::ones({}, x.options());
    for (size_t d = 0; d < edges.size(); d++) {
      std::vector<int64_t> shape(edges.size(), 1);
      shape[d] = bins[d];
      volume = volume * (edges[d].narrow(0, 1, bins[d]) - edges[d].narrow(0, 0, bins[d])).view(shape);
    }
    hist = hist / (hist.sum() * volume);
  }
  return hist;
}

std::tuple<at::Tensor, at::Tensor> histogram_with_edges(const at::Tensor& self, const at::Tensor& edges,
                                                        const std::optional<at::Tensor>& weight, bool density) {
  return {histogramdd_with_edges(self.reshape({-1, 1}), {edges}, weight, density), edges};
}

// Outer edges of each of the D dimensions of x [N, D]: the given range, else
// the data's extremes (one read-back for all dimensions), else [0, 1]; a
// single value gets a bin of width 1 around it.
std::vector<std::pair<double, double>> outer_edges(const at::Tensor& x, std::optional<at::ArrayRef<double>> range) {
  const int64_t D = x.size(1);
  std::vector<std::pair<double, double>> out(D, {0.0, 1.0});
  if (range.has_value()) {
    TORCH_CHECK(static_cast<int64_t>(range->size()) == 2 * D, "torch.histogramdd: for a ", D,
                "-dimensional histogram range should have ", 2 * D, " elements, but got ", range->size());
    for (int64_t d = 0; d < D; d++) out[d] = {(*range)[2 * d], (*range)[2 * d + 1]};
  } else if (x.size(0) > 0) {
    const at::Tensor extremes = at::stack({x.amin(0), x.amax(0)}).to(at::kDouble).cpu().contiguous();
    const double* e = extremes.const_data_ptr<double>();
    for (int64_t d = 0; d < D; d++) out[d] = {e[d], e[D + d]};
  }
  for (int64_t d = 0; d < D; d++) {
    auto& [lo, hi] = out[d];
    TORCH_CHECK(std::isfinite(lo) && std::isfinite(hi), "torch.histogramdd: dimension ", d, "'s range [", lo, ", ",
                hi, "] is not finite");
    TORCH_CHECK(lo <= hi, "torch.histogramdd: min should not exceed max, but got min ", lo, " max ", hi,
                " for dimension ", d);
    if (lo == hi) {
      lo -= 0.5;
      hi += 0.5;
    }
  }
  return out;
}

// The CPU's checks of histogramdd's input, weight and bin counts; x is the
// input seen as [N, D].
at::Tensor histogramdd_input(const at::Tensor& self, const std::optional<at::Tensor>& weight, int64_t edge_sets,
                             bool bin_counts) {
  TORCH_CHECK(self.dim() >= 2, "torch.histogramdd: input tensor should have at least 2 dimensions");
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()), "\"histogramdd\" not implemented for '",
                              at::toString(self.scalar_type()), "'");
  const int64_t D = self.size(-1);
  TORCH_CHECK(!bin_counts || edge_sets == D,
              "histogramdd: The size of bins must be equal to the innermost dimension of the input.");
  TORCH_CHECK(edge_sets == D, "torch.histogramdd: expected ", D, " sequences of bin edges for a ", D,
              "-dimensional histogram but got ", edge_sets);
  if (weight.has_value() && weight->defined()) {
    TORCH_CHECK(weight->sizes() == self.sizes().slice(0, self.dim() - 1),
                "torch.histogramdd: if weight tensor is provided it should have the same shape as the input tensor "
                "excluding its innermost dimension, but got input with shape ",
                self.sizes(), " and weight with shape ", weight->sizes());
    TORCH_CHECK(weight->scalar_type() == self.scalar_type(),
                "torch.histogramdd: if weight tensor is provided, input tensor and weight tensor should have the "
                "same dtype, but got input(",
                self.dtype(), "), and weight(", weight->dtype(), ")");
  }
  return self.reshape({-1, D});
}

void check_bin_counts(at::IntArrayRef bins) {
  for (size_t d = 0; d < bins.size(); d++)
    TORCH_CHECK(bins[d] > 0, "torch.histogram(): bins must be > 0, but got ", bins[d], " for dimension ", d);
}

std::vector<at::Tensor> histogramdd_edges(const at::Tensor& x, at::IntArrayRef bins,
                                          std::optional<at::ArrayRef<double>> range) {
  const auto outer = outer_edges(x, range);
  std::vector<at::Tensor> edges;
  for (size_t d = 0; d < bins.size(); d++)
    edges.push_back(at::linspace(outer[d].first, outer[d].second, bins[d] + 1, x.options()));
  return edges;
}

std::vector<at::Tensor> histogramdd_bin_edges(const at::Tensor& self, at::IntArrayRef bins,
                                              std::optional<at::ArrayRef<double>> range,
                                              const std::optional<at::Tensor>& weight, bool /*density*/) {
  NEURON_TRACK_OP("aten::_histogramdd_bin_edges");
  const at::Tensor x = histogramdd_input(self, weight, static_cast<int64_t>(bins.size()), /*bin_counts=*/true);
  check_bin_counts(bins);
  return histogramdd_edges(x, bins, range);
}

at::Tensor histogramdd_from_bin_cts(const at::Tensor& self, at::IntArrayRef bins,
                                    std::optional<at::ArrayRef<double>> range,
                                    const std::optional<at::Tensor>& weight, bool density) {
  NEURON_TRACK_OP("aten::_histogramdd_from_bin_cts");
  const at::Tensor x = histogramdd_input(self, weight, static_cast<int64_t>(bins.size()), /*bin_counts=*/true);
  check_bin_counts(bins);
  return histogramdd_with_edges(x, histogramdd_edges(x, bins, range), weight, density);
}

// The CPU's checks of one dimension's edges tensor.
void check_edges(const at::Tensor& self, const at::Tensor& edges, size_t d) {
  TORCH_CHECK(edges.dim() == 1, "torch.histogramdd: bins tensor should have one dimension, but got ", edges.dim(),
              " dimensions in the bins tensor for dimension ", d);
  TORCH_CHECK(edges.numel() > 0, "torch.histogramdd: bins tensor should have at least 1 element, but got ",
              edges.numel(), " elements in the bins tensor for dimension ", d);
  TORCH_CHECK(edges.numel() > 1, "torch.histogram(): bins must be > 0, but got 0 for dimension ", d);
  TORCH_CHECK(edges.scalar_type() == self.scalar_type(),
              "torch.histogramdd: input tensor and bins tensors should have the same dtype, but got input with "
              "dtype ",
              self.dtype(), " and bins for dimension ", d, " with dtype ", edges.dtype());
}

at::Tensor histogramdd_from_bin_tensors(const at::Tensor& self, at::TensorList bins,
                                        const std::optional<at::Tensor>& weight, bool density) {
  NEURON_TRACK_OP("aten::_histogramdd_from_bin_tensors");
  const at::Tensor x = histogramdd_input(self, weight, static_cast<int64_t>(bins.size()), /*bin_counts=*/false);
  std::vector<at::Tensor> edges;
  for (size_t d = 0; d < bins.size(); d++) {
    check_edges(self, bins[d], d);
    edges.push_back(bins[d].contiguous());
  }
  return histogramdd_with_edges(x, edges, weight, density);
}

std::tuple<at::Tensor, at::Tensor> histogram_bin_ct(const at::Tensor& self, int64_t bins,
                                                    std::optional<at::ArrayRef<double>> range,
                                                    const std::optional<at::Tensor>& weight, bool density) {
  NEURON_TRACK_OP("aten::histogram.bin_ct");
  check_histogram_input(self, weight);
  TORCH_CHECK(bins > 0, "torch.histogram(): bins must be > 0, but got ", bins, " for dimension 0");
  TORCH_CHECK(!range.has_value() || range->size() == 2,
              "torch.histogramdd: for 1 dimensions, range should have 2 elements, but got ", range->size());
  const auto [leftmost, rightmost] = outer_edges(self.reshape({-1, 1}), range)[0];
  const at::Tensor edges = at::linspace(leftmost, rightmost, bins + 1, self.options());
  return histogram_with_edges(self, edges, weight, density);
}

std::tuple<at::Tensor, at::Tensor> histogram_bins_tensor(const at::Tensor& self, const at::Tensor& bins,
                                                         const std::optional<at::Tensor>& weight, bool density) {
  NEURON_TRACK_OP("aten::histogram.bins_tensor");
  check_histogram_input(self, weight);
  check_edges(self, bins, 0);
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

NEURON_LIBRARY_IMPL(aten, m) {
  m.impl("histogram.bin_ct", histogram_bin_ct);
  m.impl("histogram.bin_ct_out", histogram_bin_ct_out);
  m.impl("histogram.bins_tensor", histogram_bins_tensor);
  m.impl("histogram.bins_tensor_out", histogram_bins_tensor_out);
  m.impl("_histogramdd_bin_edges", histogramdd_bin_edges);
  m.impl("_histogramdd_from_bin_cts", histogramdd_from_bin_cts);
  m.impl("_histogramdd_from_bin_tensors", histogramdd_from_bin_tensors);
  m.impl("cholesky", cholesky);
  m.impl("cholesky.out", cholesky_out);
}

}  // namespace torchneuron
