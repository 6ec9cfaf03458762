#include "device_state.h"

#include <array>

#include "runtime_check.h"

namespace torchneuron {
namespace {

// Stream ids are small per-device integers; 0 is the default stream.
thread_local std::array<int64_t, NRT_MAX_DEVICES> current_stream_ids{};

}  // namespace

c10::DeviceIndex current_device() {
  int32_t index = 0;
  NRT_CHECK(nrt_device_get_current(&index));
  return static_cast<c10::DeviceIndex>(index);
}

void set_current_device(c10::DeviceIndex index) { NRT_CHECK(nrt_device_set_current(index)); }

c10::DeviceIndex device_count() noexcept {
  int32_t count = 0;
  if (nrt_device_count(&count) != NRT_SUCCESS) return 0;
  return static_cast<c10::DeviceIndex>(count);
}

void check_device(c10::DeviceIndex index) {
  int32_t count = 0;
  NRT_CHECK(nrt_device_count(&count));
  TORCH_CHECK(index >= 0 && index < count, "Invalid device: neuron:", static_cast<int>(index),
              " does not exist (", count, " neuron device", count == 1 ? " is" : "s are",
              " visible)");
}

nrt_stream_t current_stream(c10::DeviceIndex index) {
  nrt_stream_t stream = nullptr;
  NRT_CHECK(nrt_stream_from_id(index, current_stream_ids[static_cast<size_t>(index)], &stream));
  return stream;
}

c10::Stream exchange_stream(c10::Stream stream) {
  check_device(stream.device_index());
  auto& slot = current_stream_ids[static_cast<size_t>(stream.device_index())];
  c10::Stream previous = to_c10(current_stream(stream.device_index()));
  slot = stream.id();
  return previous;
}

c10::Stream to_c10(nrt_stream_t stream) {
  return c10::Stream(c10::Stream::UNSAFE,
                     c10::Device(c10::DeviceType::PrivateUse1,
                                 static_cast<c10::DeviceIndex>(nrt_stream_device(stream))),
                     nrt_stream_id(stream));
}

nrt_stream_t to_runtime(const c10::Stream& stream) {
  TORCH_CHECK(stream.device_type() == c10::DeviceType::PrivateUse1,
              "expected a neuron stream, got a ", stream.device_type(), " stream");
  nrt_stream_t handle = nullptr;
  NRT_CHECK(nrt_stream_from_id(stream.device_index(), stream.id(), &handle));
  return handle;
}

}  // namespace torchneuron
