// copy_ in every direction: host->device, device->host, device->device on
// one device and across devices, with dtype conversion, broadcasting and any
// strides. Bytes move with nrt_memcpy_async; conversion and restriding run
// on the device as COPY ops, so nothing here touches elements. As on the
// CPU, a conjugate or negative bit that differs between source and
// destination is applied to the stored values (COPY's flags scalar).
#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "neuron_device.h"
#include "device_state.h"
#include "host_allocator.h"
#include "op_tracking.h"
#include "runtime_check.h"
#include "tensor_view.h"
#include "runtime_limits.h"

namespace torchneuron {
namespace {


size_t nbytes_of(const at::Tensor& t) { return static_cast<size_t>(t.numel()) * t.element_size(); }

// Same dtype, same sizes, dense, and the same stride wherever it matters:
// then the elements occupy the same byte span in the same order.
bool same_dense_layout(const at::Tensor& a, const at::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) return false;
  if (!a.is_non_overlapping_and_dense() || !b.is_non_overlapping_and_dense()) return false;
  for (int64_t d = 0; d < a.dim(); d++)
    if (a.size(d) != 1 && a.stride(d) != b.stride(d)) return false;
  return true;
}

// COPY's flags (neuronrt/ops: bit 0 conjugates, bit 1 negates the result).
int64_t copy_flags(const at::Tensor& dst, const at::Tensor& src) {
  return (dst.is_conj() != src.is_conj() ? 1 : 0) | (dst.is_neg() != src.is_neg() ? 2 : 0);
}

void launch_copy(c10::DeviceIndex device, const at::Tensor& dst, const at::Tensor& src,
                 int64_t flags) {
  nrt_op op{};
  op.code = NRT_OP_COPY;
  op.num_operands = 2;
  if (dst.dim() > NRT_MAX_DIMS || src.dim() > NRT_MAX_DIMS) {
    const at::Tensor s = src.sizes() == dst.sizes() ? src : src.expand(dst.sizes());
    try {
      elementwise_views(dst, s, &op.operands[0], &op.operands[1], "copy_");
    } catch (const DimsLimitError&) {
      // Too many dims even merged: one copy per index of the first dim
      // that is not size 1 (the copy is what the fallback moves data with,
      // so it cannot fall back itself).
      int64_t d = 0;
      while (dst.size(d) == 1) d++;
      for (int64_t i = 0; i < dst.size(d); i++) launch_copy(device, dst.select(d, i), s.select(d, i), flags);
      return;
    }
  } else {
    op.operands[0] = to_view(dst, "copy_"), op.operands[1] = to_view(src, "copy_");
  }
  if (flags) {
    op.num_scalars = 1;
    op.scalars[0].i = flags;
  }
  launch(device, op);
}

void synchronize(nrt_stream_t stream) { NRT_CHECK(nrt_stream_synchronize(stream)); }

// The smallest dense host tensor holding src's distinct elements: broadcast
// (stride-0) dimensions shrink to size 1; anything else not dense becomes
// contiguous. Expanding the result back to src's shape gives src.
at::Tensor dense_host_source(const at::Tensor& src) {
  std::vector<int64_t> sizes(src.sizes().begin(), src.sizes().end());
  for (int64_t d = 0; d < src.dim(); d++)
    if (src.stride(d) == 0) sizes[d] = 1;
  at::Tensor base = src.as_strided(sizes, src.strides(), src.storage_offset());
  return base.is_non_overlapping_and_dense() ? base : base.contiguous();
}

void copy_host_to_device(const at::Tensor& dst, const at::Tensor& src, bool non_blocking) {
  c10::DeviceGuard guard(dst.device());
  nrt_stream_t stream = current_stream(dst.device().index());
  if (!copy_flags(dst, src) && same_dense_layout(dst, src)) {
    NRT_CHECK(nrt_memcpy_async(stream, dst.data_ptr(), src.const_data_ptr(), nbytes_of(src)));
  } else {
    at::Tensor host = dense_host_source(src);
    at::Tensor staging = at::empty_strided(host.sizes(), host.strides(),
                                           host.options().device(dst.device()));
    NRT_CHECK(nrt_memcpy_async(stream, staging.data_ptr(), host.const_data_ptr(), nbytes_of(host)));
    // host may have resolved src's bits (contiguous() of a conjugate view).
    launch_copy(dst.device().index(), dst, staging.expand(dst.sizes()), copy_flags(dst, host));
  }
  if (!non_blocking) synchronize(stream);
}

void copy_device_to_host(const at::Tensor& dst, const at::Tensor& src, bool non_blocking,
                         int64_t flags) {
  c10::DeviceGuard guard(src.device());
  nrt_stream_t stream = current_stream(src.device().index());
  bool async = non_blocking && is_pinned(dst.const_data_ptr());
  if (!flags && same_dense_layout(dst, src)) {
    NRT_CHECK(nrt_memcpy_async(stream, dst.data_ptr(), src.const_data_ptr(), nbytes_of(dst)));
    if (!async) synchronize(stream);
    return;
  }
  // Convert and restride on the device into dst's layout (or a contiguous
  // one when dst is not dense), then move the bytes.
  at::TensorOptions staging_options = src.options().dtype(dst.scalar_type());
  bool dst_dense = dst.is_non_overlapping_and_dense();
  at::Tensor staging = dst_dense ? at::empty_strided(dst.sizes(), dst.strides(), staging_options)
                                 : at::empty(dst.sizes(), staging_options);
  launch_copy(src.device().index(), staging, src, flags);
  if (dst_dense) {
    NRT_CHECK(nrt_memcpy_async(stream, dst.data_ptr(), staging.const_data_ptr(), nbytes_of(dst)));
    if (!async) synchronize(stream);
    return;
  }
  at::Tensor host = at::empty(dst.sizes(), dst.options());
  NRT_CHECK(nrt_memcpy_async(stream, host.data_ptr(), staging.const_data_ptr(), nbytes_of(host)));
  synchronize(stream);
  // host holds dst's stored values: with dst's bits, the CPU copies them as
  // they are.
  host._set_conj(dst.is_conj());
  host._set_neg(dst.is_neg());
  dst.copy_(host);
}

void copy_device_to_device(const at::Tensor& dst, const at::Tensor& src, int64_t flags) {
  c10::DeviceIndex dst_device = dst.device().index(), src_device = src.device().index();
  if (dst_device == src_device) {
    c10::DeviceGuard guard(dst.device());
    launch_copy(dst_device, dst, src, flags);
    return;
  }
  // Across devices the copy runs on dst's stream, after the work queued on
  // src's stream; src's stream then waits for the copy so that src's memory
  // is not reused under it.
  c10::DeviceGuard guard(dst.device());
  nrt_stream_t dst_stream = current_stream(dst_device);
  nrt_stream_t src_stream = current_stream(src_device);
  nrt_event_t src_ready = nullptr, copy_done = nullptr;
  NRT_CHECK(nrt_event_create(NRT_EVENT_DEFAULT, &src_ready));
  NRT_CHECK(nrt_event_create(NRT_EVENT_DEFAULT, &copy_done));
  nrt_status status = nrt_event_record(src_ready, src_stream);
  if (!status) status = nrt_stream_wait_event(dst_stream, src_ready);
  if (!status) {
    try {
      launch_copy(dst_device, dst, src, flags);
    } catch (...) {
      nrt_event_destroy(src_ready);
      nrt_event_destroy(copy_done);
      throw;
    }
    status = nrt_event_record(copy_done, dst_stream);
  }
  if (!status) status = nrt_stream_wait_event(src_stream, copy_done);
  nrt_event_destroy(src_ready);
  nrt_event_destroy(copy_done);
  NRT_CHECK(status);
}

bool same_elements(const at::Tensor& a, const at::Tensor& b) {
  return a.is_alias_of(b) && a.storage_offset() == b.storage_offset() &&
         a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() &&
         a.strides() == b.strides();
}

}  // namespace

at::Tensor& neuron_copy_(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  NEURON_TRACK_OP("aten::copy_");
  TORCH_CHECK(self.defined() && src.defined(), "copy_: both tensors must be defined");
  TORCH_CHECK(self.layout() == at::kStrided && src.layout() == at::kStrided,
              "copy_: only strided tensors can be copied to or from neuron, got ", self.layout(),
              " and ", src.layout());
  TORCH_CHECK(defined_on_neuron(self) || defined_on_neuron(src), "copy_: expected a neuron tensor");
  TORCH_CHECK((defined_on_neuron(self) || self.is_cpu()) && (defined_on_neuron(src) || src.is_cpu()),
              "copy_: copies between neuron and ", defined_on_neuron(self) ? src.device() : self.device(),
              " are not supported; go through the CPU");
  // Same-dtype copies would move bytes without a kernel; refuse dtypes the
  // device does not have here too, with a message naming the dtype.
  (void)to_storage_dtype(self.scalar_type(), "copy_");
  (void)to_storage_dtype(src.scalar_type(), "copy_");
  if (!self.is_complex() && src.is_complex()) {
    TORCH_WARN_ONCE("Casting complex values to real discards the imaginary part");
  }
  int64_t flags = copy_flags(self, src);
  if (self.numel() == 0 || (!flags && same_elements(self, src))) return self;
  at::Tensor source = src.sizes() == self.sizes() ? src : src.expand(self.sizes());
  if (defined_on_neuron(self) && defined_on_neuron(source)) {
    at::assert_no_internal_overlap(self);
    at::assert_no_partial_overlap(self, source);
    copy_device_to_device(self, source, flags);
  } else if (defined_on_neuron(self)) {
    copy_host_to_device(self, source, non_blocking);
  } else {
    copy_device_to_host(self, source, non_blocking, flags);
  }
  return self;
}

namespace {

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  at::Tensor out = dst;
  neuron_copy_(out, self, non_blocking);
  return out;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.sizes() != self.sizes()) dst.resize_(self.sizes());
  at::Tensor out = dst;
  neuron_copy_(out, self, false);
  return out;
}

}  // namespace

// conj_physical: a COPY whose flags conjugate (real dtypes: a plain copy).
// conj_physical() itself is composite and only reaches here for complex
// tensors without the conjugate bit.
at::Tensor& conj_physical_out(const at::Tensor& self, at::Tensor& out) {
  NEURON_TRACK_OP("aten::conj_physical.out");
  TORCH_CHECK(defined_on_neuron(self) && defined_on_neuron(out) && self.device() == out.device(),
              "conj_physical: expected self and out on the same neuron device, got ",
              self.device(), " and ", out.device());
  // the CPU's unary-op check: out= has exactly self's dtype
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "Found dtype ", out.scalar_type(), " but expected ",
              self.scalar_type());
  at::native::resize_output(out, self.sizes());
  if (self.numel() == 0) return out;
  at::assert_no_internal_overlap(out);
  at::assert_no_partial_overlap(out, self);
  copy_device_to_device(out, self, copy_flags(out, self) ^ (self.is_complex() ? 1 : 0));
  return out;
}

at::Tensor& conj_physical_(at::Tensor& self) {
  NEURON_TRACK_OP("aten::conj_physical_");
  if (!self.is_complex() || self.numel() == 0) return self;
  at::assert_no_internal_overlap(self);
  c10::DeviceGuard guard(self.device());
  launch_copy(self.device().index(), self, self, 1);
  return self;
}

NEURON_LIBRARY_IMPL(aten, m) {
  m.impl("copy_", neuron_copy_);
  m.impl("conj_physical.out", conj_physical_out);
  m.impl("conj_physical_", conj_physical_);
  m.impl("_copy_from", copy_from);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
}

}  // namespace torchneuron
