// The native core every backend needs: factories, views, resize_, set_,
// fill_/zero_ and reading one element back. Views are pure metadata on the
// shared TensorImpl; everything that touches memory is a runtime op.
#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TensorFactories.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <cstring>

#include "neuron_device.h"
#include "allocator.h"
#include "device_state.h"
#include "op_tracking.h"
#include "runtime_check.h"
#include "tensor_view.h"
#include "runtime_limits.h"

namespace torchneuron {

at::Tensor& neuron_copy_(at::Tensor& self, const at::Tensor& src, bool non_blocking);

namespace {


c10::Device target_device(std::optional<c10::Device> device) {
  c10::DeviceIndex index = device && device->has_index() ? device->index() : current_device();
  check_device(index);
  return c10::Device(kNeuron, index);
}

// Also refuses dtypes the device cannot hold (float8, quantized, ...): a
// tensor that no op could touch is better refused where it is created. The
// storage dtypes (complex, wide unsigned) are held: copies, fills and views
// are native, other ops run natively where a kernel takes them and through
// the counted CPU fallback otherwise.
void check_factory_options(std::optional<at::ScalarType> dtype, std::optional<c10::Layout> layout,
                           std::optional<bool> pin_memory, const char* op) {
  TORCH_CHECK(!layout || *layout == at::kStrided, op, ": neuron tensors must be strided, got ",
              *layout);
  TORCH_CHECK(!pin_memory || !*pin_memory, op, ": only CPU tensors can be pinned");
  (void)to_storage_dtype(c10::dtype_or_default(dtype), op);
}

at::Tensor empty_memory_format(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                               std::optional<c10::Layout> layout,
                               std::optional<c10::Device> device, std::optional<bool> pin_memory,
                               std::optional<c10::MemoryFormat> memory_format) {
  NEURON_TRACK_OP("aten::empty.memory_format");
  check_factory_options(dtype, layout, pin_memory, "empty");
  c10::DeviceGuard guard(target_device(device));
  return at::detail::empty_generic(size, device_allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                   c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(at::IntArrayRef size, at::IntArrayRef stride,
                         std::optional<at::ScalarType> dtype, std::optional<c10::Layout> layout,
                         std::optional<c10::Device> device, std::optional<bool> pin_memory) {
  NEURON_TRACK_OP("aten::empty_strided");
  check_factory_options(dtype, layout, pin_memory, "empty_strided");
  c10::DeviceGuard guard(target_device(device));
  return at::detail::empty_strided_generic(size, stride, device_allocator(),
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                           c10::dtype_or_default(dtype));
}

// Zeros that own no memory (the ZeroTensor key): what autograd returns for
// gradients known to be zero (sgn or abs of real inputs, ...). An op that
// meets one sees zeros through PyTorch's ZeroTensor fallback. The allocator
// only hands out null pointers, so the stack instance is enough.
at::Tensor efficientzerotensor(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory) {
  NEURON_TRACK_OP("aten::_efficientzerotensor");
  check_factory_options(dtype, layout, pin_memory, "_efficientzerotensor");
  at::native::ZeroTensorAllocator allocator(target_device(device));
  const auto keys = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1) |
                    c10::DispatchKeySet(c10::DispatchKey::ZeroTensor);
  return at::detail::empty_generic(size, &allocator, keys, c10::dtype_or_default(dtype), std::nullopt);
}

at::Tensor as_strided(const at::Tensor& self, at::IntArrayRef size, at::IntArrayRef stride,
                      std::optional<int64_t> storage_offset) {
  NEURON_TRACK_OP("aten::as_strided");
  return at::native::as_strided_tensorimpl(self, size, stride, storage_offset);
}

at::Tensor view_of_size(const at::Tensor& self, at::IntArrayRef size) {
  NEURON_TRACK_OP("aten::view");
  return at::native::view(self, size);
}

at::Tensor reshape_alias(const at::Tensor& self, at::IntArrayRef size, at::IntArrayRef stride) {
  NEURON_TRACK_OP("aten::_reshape_alias");
  return at::native::_reshape_alias(self, size, stride);
}

// view_as_real and view_as_complex: metadata only, the same storage.
at::Tensor view_as_real(const at::Tensor& self) {
  NEURON_TRACK_OP("aten::view_as_real");
  return at::native::view_as_real(self);
}

at::Tensor view_as_complex(const at::Tensor& self) {
  NEURON_TRACK_OP("aten::view_as_complex");
  return at::native::view_as_complex(self);
}

at::Tensor unfold(const at::Tensor& self, int64_t dimension, int64_t size, int64_t step) {
  NEURON_TRACK_OP("aten::unfold");
  return at::native::unfold(self, dimension, size, step);
}

// Sets sizes (and strides, or contiguous ones) and grows the storage when the
// new geometry needs more bytes than it holds.
void set_geometry(const at::Tensor& self, at::IntArrayRef size,
                  std::optional<at::IntArrayRef> stride) {
  c10::TensorImpl* impl = self.unsafeGetTensorImpl();
  if (stride)
    impl->set_sizes_and_strides(size, *stride);
  else
    impl->set_sizes_contiguous(size);
  size_t itemsize = self.dtype().itemsize();
  size_t needed = at::detail::computeStorageNbytes(impl->sizes(), impl->strides(), itemsize,
                                                   impl->storage_offset());
  if (self.numel() > 0 && needed > impl->storage().nbytes())
    at::native::resize_bytes_nocuda(impl->storage(), static_cast<int64_t>(needed));
}

const at::Tensor& resize_(const at::Tensor& self, at::IntArrayRef size,
                          std::optional<c10::MemoryFormat> memory_format) {
  NEURON_TRACK_OP("aten::resize_");
  for (int64_t s : size) TORCH_CHECK(s >= 0, "resize_: negative size ", s, " in ", size);
  c10::DeviceGuard guard(self.device());
  set_geometry(self, size, std::nullopt);
  if (memory_format) {
    TORCH_CHECK(*memory_format != c10::MemoryFormat::Preserve,
                "resize_: unsupported memory format Preserve");
    self.unsafeGetTensorImpl()->empty_tensor_restride(*memory_format);
  }
  return self;
}

at::Tensor& set_storage_offset(at::Tensor& self, c10::Storage source, int64_t storage_offset,
                               at::IntArrayRef size, at::IntArrayRef stride) {
  NEURON_TRACK_OP("aten::set_.source_Storage_storage_offset");
  at::native::checkSetStorage(self, source, storage_offset, size, stride);
  self.unsafeGetTensorImpl()->set_storage_offset(storage_offset);
  c10::DeviceGuard guard(self.device());
  set_geometry(self, size,
               stride.data() != nullptr ? std::optional<at::IntArrayRef>(stride) : std::nullopt);
  return self;
}

at::Tensor& set_storage(at::Tensor& self, c10::Storage source) {
  NEURON_TRACK_OP("aten::set_.source_Storage");
  int64_t numel = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return set_storage_offset(self, std::move(source), 0, {numel}, {});
}

at::Tensor& set_tensor(at::Tensor& self, const at::Tensor& source) {
  NEURON_TRACK_OP("aten::set_.source_Tensor");
  if (self.is_same(source)) return self;
  return set_storage_offset(self, source.storage(), source.storage_offset(), source.sizes(),
                            source.strides());
}

at::Tensor& set_empty(at::Tensor& self) {
  NEURON_TRACK_OP("aten::set_");
  c10::Storage empty(c10::Storage::use_byte_size_t(), 0, device_allocator(), true);
  return set_storage_offset(self, std::move(empty), 0, {0}, {});
}

at::Tensor& fill_scalar(at::Tensor& self, const at::Scalar& value) {
  NEURON_TRACK_OP("aten::fill_.Scalar");
  if (self.numel() == 0) return self;
  nrt_op op{};
  op.code = NRT_OP_FILL;
  op.num_operands = 1;
  nrt_tensor_view unused;
  elementwise_views(self, self, &op.operands[0], &unused, "fill_");
  check_scalar_fits(value, self.scalar_type());  // a complex value into a real tensor: the CPU's error
  // The value as the tensor sees it: a conjugate or negative view stores the
  // conjugate or negation of what it shows.
  at::Scalar stored = value;
  if (self.is_conj() && value.isComplex()) stored = std::conj(value.toComplexDouble());
  if (self.is_neg()) stored = value.isComplex() ? at::Scalar(-stored.toComplexDouble())
                            : value.isFloatingPoint() ? at::Scalar(-value.toDouble())
                                                      : at::Scalar(-value.toLong());
  op.num_scalars = 1;
  if (stored.isComplex()) {
    c10::complex<double> c = stored.toComplexDouble();
    op.num_scalars = 2;
    op.scalars[0].is_float = 1;
    op.scalars[0].f = c.real();
    op.scalars[1].is_float = 1;
    op.scalars[1].f = c.imag();
  } else if (stored.isFloatingPoint()) {
    op.scalars[0].is_float = 1;
    op.scalars[0].f = stored.toDouble();
  } else if (stored.isIntegral(/*includeBool=*/false) && stored.isUnsigned()) {
    uint64_t u = stored.to<uint64_t>();  // above INT64_MAX too: the bits carry over
    std::memcpy(&op.scalars[0].i, &u, sizeof u);
  } else {
    op.scalars[0].i = stored.toLong();
  }
  c10::DeviceGuard guard(self.device());
  launch(self.device().index(), op);
  return self;
}

at::Tensor& fill_tensor(at::Tensor& self, const at::Tensor& value) {
  NEURON_TRACK_OP("aten::fill_.Tensor");
  TORCH_CHECK(value.dim() == 0,
              "fill_ only supports 0-dimension value tensor but got tensor with ", value.dim(),
              " dimensions.");
  if (value.device().type() != kNeuron) return fill_scalar(self, value.item());
  if (self.numel() == 0) return self;
  return neuron_copy_(self, value.expand(self.sizes()), false);
}

at::Tensor& zero_(at::Tensor& self) {
  NEURON_TRACK_OP("aten::zero_");
  return fill_scalar(self, 0);
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  NEURON_TRACK_OP("aten::_local_scalar_dense");
  TORCH_CHECK(self.numel() == 1, "a Tensor with ", self.numel(),
              " elements cannot be converted to Scalar");
  at::Tensor host = at::empty({}, self.options().device(at::kCPU));
  neuron_copy_(host, self.reshape({}), false);
  return at::_local_scalar_dense(host);
}

// Whether `param.data = from` may swap self's TensorImpl contents for from's.
// c10's own rule only knows the built-in dense backends, so a CPU tensor and
// a neuron tensor would count as incompatible and Module.to("neuron") would
// make a new Parameter per module, silently untying shared weights (a GPT's
// tied head and embedding). Both are plain strided TensorImpls, as CPU and
// CUDA tensors are, so the swap is as safe as it is for CUDA; the override
// point is the one c10 documents for PrivateUse1 backends.
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  NEURON_TRACK_OP("aten::_has_compatible_shallow_copy_type");
  if (self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set())) return true;
  constexpr auto dense_backends = c10::DispatchKeySet(
      {c10::BackendComponent::CPUBit, c10::BackendComponent::PrivateUse1Bit});
  constexpr auto dense = c10::DispatchKeySet(c10::DispatchKey::Dense);
  auto is_dense = [&](const at::Tensor& t) {
    auto ks = t.key_set();
    return ks.has_any(dense) && ks.has_any(dense_backends) && t.layout() == c10::kStrided &&
           !t.is_quantized();
  };
  return is_dense(self) && is_dense(from);
}

}  // namespace

NEURON_LIBRARY_IMPL(aten, m) {
  m.impl("_has_compatible_shallow_copy_type", has_compatible_shallow_copy_type);
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("empty_strided", empty_strided);
  m.impl("_efficientzerotensor", efficientzerotensor);
  m.impl("as_strided", as_strided);
  m.impl("view", view_of_size);
  m.impl("_reshape_alias", reshape_alias);
  m.impl("unfold", unfold);
  m.impl("view_as_complex", view_as_complex);
  m.impl("view_as_real", view_as_real);
  m.impl("resize_", resize_);
  m.impl("set_.source_Storage_storage_offset", set_storage_offset);
  m.impl("set_.source_Storage", set_storage);
  m.impl("set_.source_Tensor", set_tensor);
  m.impl("set_", set_empty);
  m.impl("fill_.Scalar", fill_scalar);
  m.impl("fill_.Tensor", fill_tensor);
  m.impl("zero_", zero_);
  m.impl("_local_scalar_dense", local_scalar_dense);
}

}  // namespace torchneuron
