// PrivateUse1HooksInterface: how ATen asks the backend for generators,
// pinned memory, the device of a pointer, and storage resizing.
#include <ATen/core/Generator.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/Storage.h>

#include <algorithm>
#include <cstring>

#include "allocator.h"
#include "device_state.h"
#include "generator.h"
#include "host_allocator.h"
#include "runtime_check.h"

namespace torchneuron {
namespace {

struct NeuronHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count() > 0; }

  const at::Generator& getDefaultGenerator(c10::DeviceIndex device) const override {
    return default_generator(device);
  }

  at::Generator getNewGenerator(c10::DeviceIndex device) const override {
    return new_generator(device);
  }

  at::Device getDeviceFromPtr(void* data) const override {
    int32_t device = 0;
    NRT_CHECK(nrt_pointer_get_device(data, &device));
    return c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device));
  }

  bool isPinnedPtr(const void* data) const override { return is_pinned(data); }

  at::Allocator* getPinnedMemoryAllocator() const override { return host_allocator(); }

  bool hasPrimaryContext(c10::DeviceIndex device) const override { return true; }

  c10::DeviceIndex deviceCount() const override { return device_count(); }
  void setCurrentDevice(c10::DeviceIndex device) const override { set_current_device(device); }
  c10::DeviceIndex getCurrentDevice() const override { return current_device(); }

  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    c10::DeviceIndex previous = current_device();
    if (device != previous) set_current_device(device);
    return previous;
  }

  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return exchangeDevice(device);
  }

  // Grows or shrinks a storage: new device memory, the old bytes copied on
  // the current stream, the old block freed in stream order.
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t new_bytes) const override {
    TORCH_CHECK(storage.resizable(), "Trying to resize storage that is not resizable");
    c10::DeviceIndex device = storage.device().index();
    c10::DeviceIndex previous = exchangeDevice(device);
    try {
      c10::DataPtr data = device_allocator()->allocate(new_bytes);
      size_t keep = std::min(new_bytes, storage.nbytes());
      if (keep > 0) {
        NRT_CHECK(nrt_memcpy_async(current_stream(device), data.get(), storage.data(), keep));
      }
      storage.unsafeGetStorageImpl()->set_data_ptr_noswap(std::move(data));
      storage.unsafeGetStorageImpl()->set_nbytes(new_bytes);
    } catch (...) {
      exchangeDevice(previous);
      throw;
    }
    exchangeDevice(previous);
  }
};

// Registered at load time, before Python renames the backend.
const bool hooks_registered = [] {
  at::RegisterPrivateUse1HooksInterface(new NeuronHooks());
  return true;
}();

}  // namespace
}  // namespace torchneuron
