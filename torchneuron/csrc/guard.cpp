// DeviceGuardImplInterface for neuron: devices, streams and events for
// c10's generic machinery (DeviceGuard, torch.Stream, torch.Event,
// torch.accelerator). Every call is a thin call into the runtime.
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "neuron_device.h"
#include "allocator.h"
#include "device_state.h"
#include "runtime_check.h"

namespace torchneuron {
namespace {


c10::Device neuron_device(c10::DeviceIndex index) { return c10::Device(kNeuron, index); }

// c10 passes index -1 for "neuron" without an index (torch.Stream("neuron")):
// it means the current device, as in CUDA's guard.
c10::DeviceIndex resolve(c10::Device device) {
  return device.index() < 0 ? current_device() : device.index();
}

nrt_event_t as_event(void* event) { return static_cast<nrt_event_t>(event); }

struct NeuronGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kNeuron; }

  c10::Device exchangeDevice(c10::Device device) const override {
    c10::DeviceIndex previous = current_device();
    if (device.index() != previous) set_current_device(device.index());
    return neuron_device(previous);
  }

  c10::Device getDevice() const override { return neuron_device(current_device()); }

  void setDevice(c10::Device device) const override { set_current_device(device.index()); }

  void uncheckedSetDevice(c10::Device device) const noexcept override {
    (void)nrt_device_set_current(device.index());
  }

  c10::Stream getStream(c10::Device device) const override {
    return to_c10(current_stream(resolve(device)));
  }

  c10::Stream getDefaultStream(c10::Device device) const override {
    nrt_stream_t stream = nullptr;
    NRT_CHECK(nrt_stream_get_default(resolve(device), &stream));
    return to_c10(stream);
  }

  c10::Stream getStreamFromGlobalPool(c10::Device device, bool high_priority) const override {
    return getNewStream(device, high_priority ? NRT_STREAM_PRIORITY_HIGH : 0);
  }

  c10::Stream getNewStream(c10::Device device, int priority) const override {
    nrt_stream_t stream = nullptr;
    NRT_CHECK(nrt_stream_get_pooled(resolve(device), priority, &stream));
    return to_c10(stream);
  }

  c10::Stream exchangeStream(c10::Stream stream) const override {
    return exchange_stream(stream);
  }

  c10::DeviceIndex deviceCount() const noexcept override { return device_count(); }

  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(),
                "Event device index ", static_cast<int>(device_index),
                " does not match recording stream's device index ",
                static_cast<int>(stream.device_index()), ".");
    if (*event == nullptr) {
      nrt_event_t created = nullptr;
      uint32_t flags = flag == c10::EventFlag::BACKEND_DEFAULT ? NRT_EVENT_TIMING : 0u;
      NRT_CHECK(nrt_event_create(flags, &created));
      *event = created;
    }
    NRT_CHECK(nrt_event_record(as_event(*event), to_runtime(stream)));
  }

  void block(void* event, const c10::Stream& stream) const override {
    if (event == nullptr) return;
    NRT_CHECK(nrt_stream_wait_event(to_runtime(stream), as_event(event)));
  }

  bool queryEvent(void* event) const override {
    if (event == nullptr) return true;
    nrt_status status = nrt_event_query(as_event(event));
    if (status == NRT_ERROR_NOT_READY) return false;
    NRT_CHECK(status);
    return true;
  }

  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    if (event != nullptr) (void)nrt_event_destroy(as_event(event));
  }

  bool queryStream(const c10::Stream& stream) const override {
    nrt_status status = nrt_stream_query(to_runtime(stream));
    if (status == NRT_ERROR_NOT_READY) return false;
    NRT_CHECK(status);
    return true;
  }

  void synchronizeStream(const c10::Stream& stream) const override {
    NRT_CHECK(nrt_stream_synchronize(to_runtime(stream)));
  }

  void synchronizeEvent(void* event) const override {
    if (event != nullptr) NRT_CHECK(nrt_event_synchronize(as_event(event)));
  }

  void synchronizeDevice(const c10::DeviceIndex device_index) const override {
    NRT_CHECK(nrt_device_synchronize(device_index < 0 ? current_device() : device_index));
  }

  void recordDataPtrOnStream(const c10::DataPtr& data_ptr,
                             const c10::Stream& stream) const override {
    record_stream(data_ptr, stream);
  }

  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    TORCH_CHECK(start != nullptr && end != nullptr,
                "Both events must be recorded before calculating elapsed time.");
    float ms = 0;
    NRT_CHECK(nrt_event_elapsed_ms(as_event(start), as_event(end), &ms));
    return ms;
  }
};

}  // namespace

C10_REGISTER_GUARD_IMPL(PrivateUse1, NeuronGuardImpl);

}  // namespace torchneuron
