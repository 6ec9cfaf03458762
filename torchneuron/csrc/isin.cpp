// isin on neuron, composed of native ops (no kernel of its own, no element
// loop here). Membership is exact, so the result does not depend on how it
// is found; as on the CPU, a small set of test elements (below the CPU's
// size rule) is compared with the elements one test element at a time (eq,
// logical_or), a larger one is sorted and each element looked up by binary
// search (sort + searchsorted + gather + eq). Both compare in the two
// inputs' promoted dtype, so NaN is never a member and -0.0 finds 0.0, as
// on the CPU.
#include <ATen/ATen.h>
#include <ATen/ScalarOps.h>
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <cmath>

#include "op_tracking.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {

void check_isin_dtype(at::ScalarType type) {
  TORCH_CHECK(type != at::ScalarType::Bool && !at::isComplexType(type),
              "Unsupported input type encountered for isin(): ", type);
}

// The membership of every element of `elements` (any shape) in `tests`,
// written to out (bool, elements' shape).
void isin_into(const at::Tensor& elements, const at::Tensor& tests, bool invert, at::Tensor& out) {
  check_isin_dtype(elements.scalar_type());
  check_isin_dtype(tests.scalar_type());
  TORCH_CHECK(out.scalar_type() == at::kBool, "isin: expected a bool out tensor, got ",
              out.scalar_type());
  TORCH_CHECK(elements.device() == tests.device() || tests.dim() == 0,
              "isin: expected elements and test_elements on one device, got ", elements.device(),
              " and ", tests.device());
  at::native::resize_output(out, elements.sizes());
  if (elements.numel() == 0) return;
  c10::DeviceGuard guard(elements.device());
  const at::ScalarType common = at::result_type(elements, tests);
  at::Tensor e = elements.to(common);
  at::Tensor t = tests.to(elements.device(), common).reshape({-1});
  const int64_t m = t.numel();
  at::Tensor found;
  if (m == 0) {
    found = at::zeros(elements.sizes(), elements.options().dtype(at::kBool));
  } else if (static_cast<double>(m) < 10.0 * std::pow(static_cast<double>(elements.numel()), 0.145)) {
    // One pass per test element, each compared as a 0-d device tensor (no
    // read back): far cheaper than an [elements, m] comparison reduced
    // over its short last dim.
    found = e.eq(t.select(0, 0));
    at::Tensor hit = m > 1 ? at::empty_like(found) : at::Tensor();
    for (int64_t k = 1; k < m; k++) found.logical_or_(at::eq_out(hit, e, t.select(0, k)));
  } else {
    at::Tensor sorted = std::get<0>(t.sort());
    at::Tensor flat = e.reshape({-1}).contiguous();  // searchsorted wants it so
    at::Tensor where = at::searchsorted(sorted, flat).clamp_max_(m - 1);
    found = sorted.index_select(0, where).eq(flat).reshape(elements.sizes());
  }
  if (invert) found = found.logical_not();
  out.copy_(found);
}

at::Tensor& isin_tt_out(const at::Tensor& elements, const at::Tensor& tests, bool assume_unique,
                        bool invert, at::Tensor& out) {
  NEURON_TRACK_OP("aten::isin.Tensor_Tensor_out");
  (void)assume_unique;  // only a hint: the result is the same
  isin_into(elements, tests, invert, out);
  return out;
}

at::Tensor isin_tt(const at::Tensor& elements, const at::Tensor& tests, bool assume_unique,
                   bool invert) {
  NEURON_TRACK_OP("aten::isin.Tensor_Tensor");
  (void)assume_unique;
  at::Tensor out = at::empty({0}, elements.options().dtype(at::kBool));
  isin_into(elements, tests, invert, out);
  return out;
}

// A scalar test element: membership is (in)equality.
at::Tensor& isin_ts_out(const at::Tensor& elements, const at::Scalar& test, bool assume_unique,
                        bool invert, at::Tensor& out) {
  NEURON_TRACK_OP("aten::isin.Tensor_Scalar_out");
  (void)assume_unique;
  isin_into(elements, at::native::wrapped_scalar_tensor(test, elements.device()), invert, out);
  return out;
}

at::Tensor isin_ts(const at::Tensor& elements, const at::Scalar& test, bool assume_unique,
                   bool invert) {
  NEURON_TRACK_OP("aten::isin.Tensor_Scalar");
  (void)assume_unique;
  at::Tensor out = at::empty({0}, elements.options().dtype(at::kBool));
  isin_into(elements, at::native::wrapped_scalar_tensor(test, elements.device()), invert, out);
  return out;
}

// A scalar element: a 0-d result.
at::Tensor& isin_st_out(const at::Scalar& element, const at::Tensor& tests, bool assume_unique,
                        bool invert, at::Tensor& out) {
  NEURON_TRACK_OP("aten::isin.Scalar_Tensor_out");
  (void)assume_unique;
  isin_into(at::native::wrapped_scalar_tensor(element, tests.device()), tests, invert, out);
  return out;
}

at::Tensor isin_st(const at::Scalar& element, const at::Tensor& tests, bool assume_unique,
                   bool invert) {
  NEURON_TRACK_OP("aten::isin.Scalar_Tensor");
  (void)assume_unique;
  at::Tensor out = at::empty({0}, tests.options().dtype(at::kBool));
  isin_into(at::native::wrapped_scalar_tensor(element, tests.device()), tests, invert, out);
  return out;
}

}  // namespace
}  // namespace torchneuron

NEURON_LIBRARY_IMPL(aten, m) {
  m.impl("isin.Tensor_Tensor", torchneuron::isin_tt);
  m.impl("isin.Tensor_Tensor_out", torchneuron::isin_tt_out);
  m.impl("isin.Tensor_Scalar", torchneuron::isin_ts);
  m.impl("isin.Tensor_Scalar_out", torchneuron::isin_ts_out);
  m.impl("isin.Scalar_Tensor", torchneuron::isin_st);
  m.impl("isin.Scalar_Tensor_out", torchneuron::isin_st_out);
}
