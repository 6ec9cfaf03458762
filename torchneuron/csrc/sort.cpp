// Sorting and selection: sort (stable, also serving the default and
// argsort/msort composites), topk, kthvalue, median/nanmedian, and unique
// (_unique, _unique2, unique_consecutive, unique_dim,
// unique_dim_consecutive). Output geometry and argument
// checks follow PyTorch's meta functions and CPU wrappers; the work is the
// runtime's SORT/TOPK/KTHVALUE/UNIQUE_* ops. unique's output size depends
// on the data, so it synchronises once to read the number of runs.
#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/ReduceOpsUtils.h>
#include <ATen/native/SortingUtils.h>
#include <ATen/ops/sort_meta.h>
#include <ATen/ops/topk_meta.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <limits>

#include "op_tracking.h"
#include "shape_common.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {

// Runs a (values, indices, self) op; outputs that share memory with self
// are computed in temporaries first (the kernels read self while writing).
void launch_with_indices(nrt_op_code code, const at::Tensor& values, const at::Tensor& indices,
                         const at::Tensor& self, std::initializer_list<nrt_scalar> scalars) {
  const char* name = nrt_op_name(code);
  check_device(values, self.device(), name);
  check_device(indices, self.device(), name);
  if (values.numel() == 0) return;
  c10::DeviceGuard guard(self.device());
  bool alias = overlaps(values, self) || overlaps(indices, self);
  at::Tensor v = alias ? at::empty_like(values) : values;
  at::Tensor i = alias ? at::empty_like(indices) : indices;
  launch(self.device().index(), make_op(code, {&v, &i, &self}, 2, scalars));
  if (alias) {
    values.copy_(v);
    indices.copy_(i);
  }
}

int64_t wrap_dim(int64_t dim, const at::Tensor& self) {
  return c10::maybe_wrap_dim(dim, self.dim(), /*wrap_scalar=*/true);
}

// ---- sort -------------------------------------------------------------------

using SortMeta = NeuronStructured<at::meta::structured_sort_stable, 2>;

void run_sort(SortMeta& meta, const at::Tensor& self, std::optional<bool> stable, int64_t dim,
              bool descending) {
  meta.meta(self, stable, dim, descending);
  // Always stable: a stable order is also a valid unstable one.
  launch_with_indices(NRT_OP_SORT, meta.outputs[0], meta.outputs[1], self,
                      {int_scalar(wrap_dim(dim, self)), int_scalar(descending)});
}

std::tuple<at::Tensor, at::Tensor> sort(const at::Tensor& self, std::optional<bool> stable,
                                        int64_t dim, bool descending) {
  NEURON_TRACK_OP("aten::sort.stable");
  SortMeta meta("sort");
  run_sort(meta, self, stable, dim, descending);
  return {std::move(meta.outputs[0]), std::move(meta.outputs[1])};
}

std::tuple<at::Tensor&, at::Tensor&> sort_out(const at::Tensor& self, std::optional<bool> stable,
                                              int64_t dim, bool descending, at::Tensor& values,
                                              at::Tensor& indices) {
  NEURON_TRACK_OP("aten::sort.values_stable");
  SortMeta meta("sort", SortMeta::Kind::Out, {values, indices});
  run_sort(meta, self, stable, dim, descending);
  return {values, indices};
}

// ---- topk ---------------------------------------------------------------------

using TopkMeta = NeuronStructured<at::meta::structured_topk, 2>;

void run_topk(TopkMeta& meta, const at::Tensor& self, int64_t k, int64_t dim, bool largest,
              bool sorted) {
  meta.meta(self, k, dim, largest, sorted);
  TORCH_CHECK(self.scalar_type() != at::kBool, "topk does not support bool dtypes on neuron");
  // Always sorted: sorted output is a valid unsorted one.
  launch_with_indices(NRT_OP_TOPK, meta.outputs[0], meta.outputs[1], self,
                      {int_scalar(wrap_dim(dim, self)), int_scalar(k), int_scalar(largest)});
}

std::tuple<at::Tensor, at::Tensor> topk(const at::Tensor& self, int64_t k, int64_t dim,
                                        bool largest, bool sorted) {
  NEURON_TRACK_OP("aten::topk");
  TopkMeta meta("topk");
  run_topk(meta, self, k, dim, largest, sorted);
  return {std::move(meta.outputs[0]), std::move(meta.outputs[1])};
}

std::tuple<at::Tensor&, at::Tensor&> topk_out(const at::Tensor& self, int64_t k, int64_t dim,
                                              bool largest, bool sorted, at::Tensor& values,
                                              at::Tensor& indices) {
  NEURON_TRACK_OP("aten::topk.values");
  TopkMeta meta("topk", TopkMeta::Kind::Out, {values, indices});
  run_topk(meta, self, k, dim, largest, sorted);
  return {values, indices};
}

// ---- kthvalue, median, nanmedian ----------------------------------------------------

enum NanMode : int64_t { kNanLargest = 0, kNanPropagates = 1, kNanIgnored = 2 };

// The k-th smallest along dim into values/indices (resized as PyTorch's
// reductions with indices are).
void select_along_dim(const char* name, const at::Tensor& self, int64_t k, int64_t dim,
                      bool keepdim, NanMode mode, at::Tensor& values, at::Tensor& indices) {
  TORCH_CHECK_NOT_IMPLEMENTED(self.scalar_type() != at::kBool, "\"", name,
                              "\" not implemented for 'Bool'");
  dim = wrap_dim(dim, self);
  at::native::zero_numel_check_dims(self, dim, name);
  int64_t slice = self.dim() == 0 ? 1 : self.size(dim);
  if (mode == kNanLargest)
    TORCH_CHECK(k >= 1 && k <= slice, name, ": selected number k out of range for dimension ",
                dim);
  check_device(values, self.device(), name);
  check_device(indices, self.device(), name);
  at::assert_no_overlap(self, values);
  at::native::_reduction_with_indices_allocate_or_resize_output(values, indices, self, dim,
                                                                keepdim);
  launch_with_indices(NRT_OP_KTHVALUE, values, indices, self,
                      {int_scalar(dim), int_scalar(k), int_scalar(mode)});
  if (!keepdim && self.dim() > 0) {
    values.squeeze_(dim);
    indices.squeeze_(dim);
  }
}

std::tuple<at::Tensor&, at::Tensor&> kthvalue_out(const at::Tensor& self, int64_t k, int64_t dim,
                                                  bool keepdim, at::Tensor& values,
                                                  at::Tensor& indices) {
  NEURON_TRACK_OP("aten::kthvalue.values");
  select_along_dim("kthvalue()", self, k, dim, keepdim, kNanLargest, values, indices);
  return {values, indices};
}

std::tuple<at::Tensor&, at::Tensor&> median_dim_out(const at::Tensor& self, int64_t dim,
                                                    bool keepdim, at::Tensor& values,
                                                    at::Tensor& indices) {
  NEURON_TRACK_OP("aten::median.dim_values");
  select_along_dim("median()", self, 0, dim, keepdim, kNanPropagates, values, indices);
  return {values, indices};
}

std::tuple<at::Tensor&, at::Tensor&> nanmedian_dim_out(const at::Tensor& self, int64_t dim,
                                                       bool keepdim, at::Tensor& values,
                                                       at::Tensor& indices) {
  NEURON_TRACK_OP("aten::nanmedian.dim_values");
  select_along_dim("nanmedian()", self, 0, dim, keepdim, kNanIgnored, values, indices);
  return {values, indices};
}

// mode: the most frequent value along dim (the runtime's MODE has the CPU's
// rules for ties and NaN), resized as PyTorch's reductions with indices are.
void mode_along_dim(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& values,
                    at::Tensor& indices) {
  // The CPU's wording, which upstream's test_mode_wrong_dtype matches.
  TORCH_CHECK(values.scalar_type() == self.scalar_type(), "expected scalar type '",
              toString(self.scalar_type()), "' but got '", toString(values.scalar_type()),
              "' for values output");
  TORCH_CHECK(indices.scalar_type() == at::kLong, "expected scalar type 'Long' but got '",
              toString(indices.scalar_type()), "' for indices output");
  dim = wrap_dim(dim, self);
  at::native::zero_numel_check_dims(self, dim, "mode()");
  check_device(values, self.device(), "mode()");
  check_device(indices, self.device(), "mode()");
  at::assert_no_overlap(self, values);
  at::native::_reduction_with_indices_allocate_or_resize_output(values, indices, self, dim,
                                                                keepdim);
  launch_with_indices(NRT_OP_MODE, values, indices, self, {int_scalar(dim)});
  if (!keepdim && self.dim() > 0) {
    values.squeeze_(dim);
    indices.squeeze_(dim);
  }
}

std::tuple<at::Tensor, at::Tensor> mode(const at::Tensor& self, int64_t dim, bool keepdim) {
  NEURON_TRACK_OP("aten::mode");
  at::Tensor values = at::empty({0}, self.options());
  at::Tensor indices = at::empty({0}, self.options().dtype(at::kLong));
  mode_along_dim(self, dim, keepdim, values, indices);
  return {values, indices};
}

std::tuple<at::Tensor&, at::Tensor&> mode_out(const at::Tensor& self, int64_t dim, bool keepdim,
                                              at::Tensor& values, at::Tensor& indices) {
  NEURON_TRACK_OP("aten::mode.values");
  mode_along_dim(self, dim, keepdim, values, indices);
  return {values, indices};
}

// The median of all elements; NaN for an empty tensor, as on CPU.
at::Tensor median_all(const at::Tensor& self, NanMode mode, const char* name) {
  TORCH_CHECK_NOT_IMPLEMENTED(self.scalar_type() != at::kBool, "\"", name,
                              "\" not implemented for 'Bool'");
  if (self.numel() == 0)
    return at::full({}, std::numeric_limits<float>::quiet_NaN()).to(self.options());
  at::Tensor flat = self.reshape({self.numel()});
  at::Tensor values = at::empty({1}, self.options());
  at::Tensor indices = at::empty({1}, self.options().dtype(at::kLong));
  launch_with_indices(NRT_OP_KTHVALUE, values, indices, flat,
                      {int_scalar(0), int_scalar(0), int_scalar(mode)});
  return values.squeeze(0);
}

at::Tensor median(const at::Tensor& self) {
  NEURON_TRACK_OP("aten::median");
  return median_all(self, kNanPropagates, "median");
}

at::Tensor nanmedian(const at::Tensor& self) {
  NEURON_TRACK_OP("aten::nanmedian");
  return median_all(self, kNanIgnored, "nanmedian");
}

// ---- unique -----------------------------------------------------------------------

// Runs of equal items of `runs_of` (elements of a 1-d tensor or rows of a
// 2-d one, sorted or not): values, the inverse mapping (through perm when
// runs_of is a sorted permutation of the items) with shape inverse_shape,
// and counts. Reads the run count back from the device.
std::tuple<at::Tensor, at::Tensor, at::Tensor> collect_runs(const at::Tensor& runs_of,
                                                            at::IntArrayRef inverse_shape,
                                                            const at::Tensor& perm,
                                                            bool return_inverse,
                                                            bool return_counts) {
  const at::Tensor& self = runs_of;
  at::TensorOptions long_options = self.options().dtype(at::kLong);
  at::Tensor inverse = at::empty(return_inverse ? inverse_shape : at::IntArrayRef{0}, long_options);
  at::Tensor none = at::empty({0}, long_options);
  at::Tensor count = at::empty({}, long_options);
  at::Tensor inverse_flat = inverse.view({inverse.numel()});
  const at::Tensor& perm_or_none = perm.defined() ? perm : none;
  launch(self.device().index(),
         make_op(NRT_OP_UNIQUE_SCAN, {&count, &inverse_flat, &runs_of, &perm_or_none}, 2,
                 {int_scalar(return_inverse), int_scalar(perm.defined())}));
  int64_t runs = count.item<int64_t>();
  std::vector<int64_t> values_shape = runs_of.sizes().vec();
  values_shape[0] = runs;
  at::Tensor values = at::empty(values_shape, self.options());
  at::Tensor counts = at::empty({return_counts ? runs : 0}, long_options);
  if (runs > 0)
    launch(self.device().index(), make_op(NRT_OP_UNIQUE_COLLECT, {&values, &counts, &runs_of}, 2,
                                          {int_scalar(return_counts)}));
  return {values, inverse, counts};
}

// Sorted unique (the CPU returns sorted values whatever `sorted` says).
std::tuple<at::Tensor, at::Tensor, at::Tensor> unique_sorted(const at::Tensor& self,
                                                             bool return_inverse,
                                                             bool return_counts) {
  c10::DeviceGuard guard(self.device());
  at::Tensor flat = self.reshape({self.numel()});
  at::Tensor sorted = at::empty_like(flat, at::MemoryFormat::Contiguous);
  at::Tensor perm = at::empty(flat.sizes(), self.options().dtype(at::kLong));
  if (flat.numel() > 0)
    launch(self.device().index(),
           make_op(NRT_OP_SORT, {&sorted, &perm, &flat}, 2, {int_scalar(0), int_scalar(0)}));
  return collect_runs(sorted, self.sizes(), perm, return_inverse, return_counts);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> unique2(const at::Tensor& self, bool sorted,
                                                       bool return_inverse, bool return_counts) {
  NEURON_TRACK_OP("aten::_unique2");
  return unique_sorted(self, return_inverse, return_counts);
}

std::tuple<at::Tensor, at::Tensor> unique(const at::Tensor& self, bool sorted,
                                          bool return_inverse) {
  NEURON_TRACK_OP("aten::_unique");
  auto [values, inverse, counts] = unique_sorted(self, return_inverse, false);
  return {values, inverse};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> unique_consecutive(const at::Tensor& self,
                                                                  bool return_inverse,
                                                                  bool return_counts,
                                                                  std::optional<int64_t> dim) {
  NEURON_TRACK_OP("aten::unique_consecutive");
  if (dim.has_value()) return at::unique_dim_consecutive(self, *dim, return_inverse, return_counts);
  c10::DeviceGuard guard(self.device());
  at::Tensor flat = self.reshape({self.numel()});
  return collect_runs(flat, self.sizes(), at::Tensor(), return_inverse, return_counts);
}

// unique along a dim: the slices along dim are the items, compared as rows
// of an (n, m) matrix. Zero sizes are handled as on CPU.
std::tuple<at::Tensor, at::Tensor, at::Tensor> unique_slices(const at::Tensor& self, int64_t dim,
                                                             bool consecutive, bool return_inverse,
                                                             bool return_counts) {
  dim = c10::maybe_wrap_dim(dim, self.dim());
  auto sizes = self.sizes().vec();
  auto zero_dims = std::count(sizes.begin(), sizes.end(), 0);
  if (self.size(dim) == 0) {
    TORCH_CHECK(zero_dims == 1, "Number of zero sized dimensions is more than one, so unique cannot "
                "be applied ");
    at::TensorOptions long_options = self.options().dtype(at::kLong);
    return {at::empty(sizes, self.options()), at::empty({0}, long_options),
            at::empty({0}, long_options)};
  }
  TORCH_CHECK(zero_dims == 0, "There are 0 sized dimensions, and they aren't selected, so unique "
              "cannot be applied");
  c10::DeviceGuard guard(self.device());
  at::Tensor moved = self.movedim(dim, 0);
  at::Tensor rows = moved.reshape({moved.size(0), -1});
  at::Tensor perm;
  if (!consecutive) {
    at::Tensor sorted = at::empty(rows.sizes(), rows.options());
    perm = at::empty({rows.size(0)}, self.options().dtype(at::kLong));
    // rows holding NaN in the CPU's order (its sort, where NaN orders neither way)
    launch(self.device().index(), make_op(NRT_OP_SORT_ROWS, {&sorted, &perm, &rows}, 2, {int_scalar(1)}));
    rows = sorted;
  }
  auto [values, inverse, counts] =
      collect_runs(rows, {rows.size(0)}, perm, return_inverse, return_counts);
  auto values_shape = moved.sizes().vec();
  values_shape[0] = values.size(0);
  return {values.view(values_shape).movedim(0, dim), inverse, counts};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> unique_dim(const at::Tensor& self, int64_t dim,
                                                          bool sorted, bool return_inverse,
                                                          bool return_counts) {
  NEURON_TRACK_OP("aten::unique_dim");
  return unique_slices(self, dim, false, return_inverse, return_counts);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> unique_dim_consecutive(const at::Tensor& self,
                                                                      int64_t dim,
                                                                      bool return_inverse,
                                                                      bool return_counts) {
  NEURON_TRACK_OP("aten::unique_dim_consecutive");
  return unique_slices(self, dim, true, return_inverse, return_counts);
}

}  // namespace

NEURON_LIBRARY_IMPL(aten, m) {
  m.impl("sort.stable", sort);
  m.impl("sort.values_stable", sort_out);
  m.impl("topk", topk);
  m.impl("topk.values", topk_out);
  m.impl("kthvalue.values", kthvalue_out);
  m.impl("median.dim_values", median_dim_out);
  m.impl("nanmedian.dim_values", nanmedian_dim_out);
  m.impl("mode", mode);
  m.impl("mode.values", mode_out);
  m.impl("median", median);
  m.impl("nanmedian", nanmedian);
  m.impl("_unique2", unique2);
  m.impl("_unique", unique);
  m.impl("unique_consecutive", unique_consecutive);
  m.impl("unique_dim", unique_dim);
  m.impl("unique_dim_consecutive", unique_dim_consecutive);
}

}  // namespace torchneuron
