#include "generator.h"

#include <ATen/Utils.h>
#include <ATen/core/GeneratorForPrivateuseone.h>
#include <c10/core/ScalarType.h>
#include <c10/util/CallOnce.h>

#include <cstring>
#include <deque>
#include <mutex>

#include "device_state.h"

namespace torchneuron {
namespace {

// The serialized state: seed then offset, little-endian uint64 each.
constexpr size_t kStateBytes = 2 * sizeof(uint64_t);

c10::DispatchKeySet neuron_keys() { return c10::DispatchKeySet(c10::DispatchKey::PrivateUse1); }

}  // namespace

NeuronGeneratorImpl::NeuronGeneratorImpl(c10::DeviceIndex device, uint64_t seed)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, device), neuron_keys()),
      seed_(seed) {}

void NeuronGeneratorImpl::set_current_seed(uint64_t seed) {
  seed_ = seed;
  offset_ = 0;
}

uint64_t NeuronGeneratorImpl::current_seed() const { return seed_; }

uint64_t NeuronGeneratorImpl::seed() {
  uint64_t random = c10::detail::getNonDeterministicRandom();
  set_current_seed(random);
  return random;
}

void NeuronGeneratorImpl::set_offset(uint64_t offset) { offset_ = offset; }

uint64_t NeuronGeneratorImpl::get_offset() const { return offset_; }

uint64_t NeuronGeneratorImpl::reserve(uint64_t count) {
  uint64_t first = offset_;
  offset_ += count;
  return first;
}

c10::intrusive_ptr<c10::TensorImpl> NeuronGeneratorImpl::get_state() const {
  auto state = at::detail::empty_cpu({static_cast<int64_t>(kStateBytes)}, at::ScalarType::Byte,
                                     std::nullopt, std::nullopt, std::nullopt, std::nullopt);
  auto* bytes = state.data_ptr<uint8_t>();
  std::memcpy(bytes, &seed_, sizeof seed_);
  std::memcpy(bytes + sizeof seed_, &offset_, sizeof offset_);
  return state.getIntrusivePtr();
}

void NeuronGeneratorImpl::set_state(const c10::TensorImpl& new_state) {
  at::detail::check_rng_state(new_state);
  TORCH_CHECK(new_state.numel() == static_cast<int64_t>(kStateBytes),
              "neuron generator: RNG state must hold ", kStateBytes, " bytes (seed, offset), got ",
              new_state.numel());
  const auto* bytes = static_cast<const uint8_t*>(new_state.data());
  std::memcpy(&seed_, bytes, sizeof seed_);
  std::memcpy(&offset_, bytes + sizeof seed_, sizeof offset_);
}

NeuronGeneratorImpl* NeuronGeneratorImpl::clone_impl() const {
  auto* copy = new NeuronGeneratorImpl(device().index(), seed_);
  copy->offset_ = offset_;
  return copy;
}

const at::Generator& default_generator(c10::DeviceIndex device) {
  static std::once_flag once;
  static std::deque<at::Generator> generators;  // deque: stable references
  std::call_once(once, [] {
    for (c10::DeviceIndex d = 0; d < device_count(); d++)
      generators.push_back(at::make_generator<NeuronGeneratorImpl>(d));
  });
  if (device < 0) device = current_device();
  check_device(device);
  return generators[static_cast<size_t>(device)];
}

at::Generator new_generator(c10::DeviceIndex device) {
  if (device < 0) device = current_device();
  check_device(device);
  return at::make_generator<NeuronGeneratorImpl>(device);
}

}  // namespace torchneuron
