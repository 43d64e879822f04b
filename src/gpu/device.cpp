#include <charconv>
#include <map>
#include <mutex>
#include <utility>

#include <fmt/format.h>

#include "core/cuda_codes.hpp"
#include "cuda_device.hpp"
#include "sim_device.hpp"
#include "sluice/config.hpp"
#include "sluice/device.hpp"
#include "sluice/error.hpp"

namespace sluice {

std::string_view to_string(MemoryKind k) noexcept {
  switch (k) {
    case MemoryKind::device: return "device";
    case MemoryKind::pinned_host: return "pinned host";
    case MemoryKind::pageable_host: return "pageable host";
  }
  return "?";
}

void Device::copy_to_device(void* dst, const void* src, std::size_t bytes) {
  copy_to_device_async(dst, src, bytes, nullptr);
  synchronize(nullptr);
}

void Device::copy_to_host(void* dst, const void* src, std::size_t bytes) {
  copy_to_host_async(dst, src, bytes, nullptr);
  synchronize(nullptr);
}

namespace {

std::shared_ptr<Device> make_sim(std::string selection) {
  auto cfg = config();
  auto dev = std::make_shared<detail::SimDevice>(detail::SimModel{cfg->sim_h2d_gbps, cfg->sim_latency_us});
  dev->set_selection(std::move(selection));
  return dev;
}

int parse_ordinal(std::string_view spec) {
  int n = -1;
  const auto digits = spec.substr(5);
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (ec != std::errc() || ptr != digits.data() + digits.size() || n < 0) {
    throw_usage_error({.op = "device"}, fmt::format("bad device '{}' (expected auto, sim, cuda or cuda:N)", spec));
  }
  return n;
}

std::shared_ptr<Device> open_uncached(std::string_view spec) {
  if (spec == "sim") return make_sim("sim requested");
  if (spec == "auto") {
    std::string why;
    if (detail::cuda_available(&why)) {
      auto dev = detail::make_cuda_device(0);
      dev->set_selection("auto: first CUDA GPU");
      return dev;
    }
    return make_sim(fmt::format("auto: no CUDA GPU ({}), using the simulated device", why));
  }
  if (spec == "cuda" || spec.substr(0, 5) == "cuda:") {
    const int ordinal = spec == "cuda" ? 0 : parse_ordinal(spec);
    std::string why;
    if (!detail::cuda_available(&why)) {
      throw Error(ErrorDomain::cuda, detail::cu::error_no_device, {.op = "device"}, fmt::format("{} requested: {}", spec, why));
    }
    if (ordinal >= detail::cuda_device_count()) {
      throw Error(ErrorDomain::cuda, detail::cu::error_invalid_device, {.op = "device"},
                  fmt::format("{} requested but this machine has {} CUDA device(s)", spec,
                              detail::cuda_device_count()));
    }
    auto dev = detail::make_cuda_device(ordinal);
    dev->set_selection(fmt::format("{} requested", spec));
    return dev;
  }
  throw_usage_error({.op = "device"}, fmt::format("unknown device '{}' (expected auto, sim, cuda or cuda:N)", spec));
}

}  // namespace

std::shared_ptr<Device> open_device(std::string_view spec) {
  // Leaked on purpose: devices must not be torn down from static destructors (CUDA may already be
  // unloading, and pool threads may still hold streams).
  static auto* cache = new std::map<std::string, std::shared_ptr<Device>, std::less<>>();
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  if (auto it = cache->find(spec); it != cache->end()) return it->second;
  auto dev = open_uncached(spec);
  (*cache)[std::string(spec)] = dev;
  return dev;
}

DeviceBuffer::DeviceBuffer(std::shared_ptr<Device> dev, std::size_t bytes)
    : dev_(std::move(dev)), ptr_(dev_->alloc(bytes)), size_(bytes) {}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_ != nullptr) dev_->free(ptr_);
    dev_ = std::move(o.dev_);
    ptr_ = std::exchange(o.ptr_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_ != nullptr) dev_->free(ptr_);
}

}  // namespace sluice
