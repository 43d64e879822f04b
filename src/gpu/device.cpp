#include <map>
#include <mutex>
#include <utility>

#include <fmt/format.h>

#include "core/cuda_codes.hpp"
#include "core/per_process.hpp"
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

std::optional<MemoryKind> parse_memory_kind(std::string_view text) noexcept {
  static constexpr std::pair<std::string_view, MemoryKind> names[] = {
      {"device", MemoryKind::device},
      {"gpu", MemoryKind::device},
      {"pinned", MemoryKind::pinned_host},
      {"pinned-host", MemoryKind::pinned_host},
      {"pinned_host", MemoryKind::pinned_host},
      {"pinned host", MemoryKind::pinned_host},
      {"pageable", MemoryKind::pageable_host},
      {"host", MemoryKind::pageable_host},
      {"pageable-host", MemoryKind::pageable_host},
      {"pageable_host", MemoryKind::pageable_host},
      {"pageable host", MemoryKind::pageable_host},
  };
  for (const auto& [name, kind] : names) {
    if (text == name) return kind;
  }
  return std::nullopt;
}

std::string_view to_string(DeviceKind k) noexcept {
  return k == DeviceKind::cuda ? "cuda" : "sim";
}

void Device::copy_to_device(void* dst, const void* src, std::size_t bytes) {
  copy_to_device_async(dst, src, bytes, nullptr);
  synchronize(nullptr);
}

void Device::copy_to_host(void* dst, const void* src, std::size_t bytes) {
  copy_to_host_async(dst, src, bytes, nullptr);
  synchronize(nullptr);
}

void detail::set_selection(Device& d, std::string selection) { d.selection_ = std::move(selection); }

namespace {

std::shared_ptr<Device> make_sim(std::string selection) {
  auto cfg = config();
  auto dev = std::make_shared<detail::SimDevice>(detail::SimModel{cfg->sim_h2d_gbps, cfg->sim_latency_us});
  detail::set_selection(*dev, std::move(selection));
  return dev;
}

std::shared_ptr<Device> open_cuda(const DeviceSetting& setting, const std::string& spec) {
  const int ordinal = static_cast<int>(setting.ordinal.value_or(0));
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
  detail::set_selection(*dev, fmt::format("{} requested", spec));
  return dev;
}

std::shared_ptr<Device> open_uncached(const DeviceSetting& setting, const std::string& spec) {
  switch (setting.kind) {
    case DeviceChoice::sim: return make_sim("sim requested");
    case DeviceChoice::automatic: {
      std::string why;
      if (detail::cuda_available(&why)) {
        auto dev = detail::make_cuda_device(0);
        detail::set_selection(*dev, "auto: first CUDA GPU");
        return dev;
      }
      return make_sim(fmt::format("auto: no CUDA GPU ({}), using the simulated device", why));
    }
    case DeviceChoice::cuda: return open_cuda(setting, spec);
  }
  throw_usage_error({.op = "device"}, fmt::format("unknown device '{}'", spec));
}

}  // namespace

namespace {

// The devices open_device() made, by setting. Leaked on purpose: devices must not be torn down
// from static destructors (CUDA may already be unloading, and pool threads may still hold
// streams). One per process (per_process.hpp): a forked child's parent's devices have no threads
// there (the sim's streams) and no context CUDA lets it use. The parent's stay allocated, so no
// device of the child's takes one's address (the pinned pools are kept by device address).
struct DeviceCache {
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<Device>, std::less<>> devices;  // under mutex
};

}  // namespace

std::shared_ptr<Device> open_device(const DeviceSetting& setting) {
  if (setting.ordinal && setting.kind != DeviceChoice::cuda) {
    throw_usage_error({.op = "device"}, fmt::format("an ordinal ({}) needs device kind cuda, not {}",
                                                    *setting.ordinal, to_string(setting.kind)));
  }
  DeviceCache& cache = detail::PerProcess<DeviceCache>::get([] { return new DeviceCache(); });
  const std::string spec = to_string(setting);
  const std::lock_guard lock(cache.mutex);
  if (auto it = cache.devices.find(spec); it != cache.devices.end()) return it->second;
  auto dev = open_uncached(setting, spec);
  cache.devices[spec] = dev;
  return dev;
}

std::shared_ptr<Device> open_device(std::string_view spec) {
  const auto setting = parse_device_setting(spec);
  if (!setting) {
    throw_usage_error({.op = "device"}, fmt::format("unknown device '{}' (expected auto, sim, cuda or cuda:N)", spec));
  }
  return open_device(*setting);
}

namespace {

void require_device(const std::shared_ptr<Device>& device, const char* what) {
  if (!device) throw_usage_error({.op = what}, "needs a device (got none)");
}

}  // namespace

Stream::Stream(std::shared_ptr<Device> device) : device_(std::move(device)) {
  require_device(device_, "stream");
  handle_ = device_->create_stream();
}

Stream::Stream(Stream&& o) noexcept
    : device_(std::move(o.device_)), handle_(std::exchange(o.handle_, nullptr)) {}

Stream& Stream::operator=(Stream&& o) noexcept {
  if (this != &o) {
    reset();
    device_ = std::move(o.device_);
    handle_ = std::exchange(o.handle_, nullptr);
  }
  return *this;
}

Stream::~Stream() { reset(); }

void Stream::synchronize() const {
  if (handle_ == nullptr) throw_usage_error({.op = "stream"}, "synchronize on an empty Stream");
  device_->synchronize(handle_);
}

void Stream::reset() noexcept {
  if (handle_ != nullptr) device_->destroy_stream(std::exchange(handle_, nullptr));
  device_.reset();
}

StreamHandle Stream::release() noexcept {
  device_.reset();
  return std::exchange(handle_, nullptr);
}

Event::Event(std::shared_ptr<Device> device) : device_(std::move(device)) {
  require_device(device_, "event");
  handle_ = device_->create_event();
}

Event::Event(Event&& o) noexcept
    : device_(std::move(o.device_)), handle_(std::exchange(o.handle_, nullptr)) {}

Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    reset();
    device_ = std::move(o.device_);
    handle_ = std::exchange(o.handle_, nullptr);
  }
  return *this;
}

Event::~Event() { reset(); }

void Event::record(const Stream& stream) {
  if (stream.device() != device_) {
    throw_usage_error({.op = "event"}, "record on a stream of another device");
  }
  record(stream.get());
}

void Event::record(StreamHandle stream) {
  if (handle_ == nullptr) throw_usage_error({.op = "event"}, "record of an empty Event");
  device_->record_event(handle_, stream);
}

bool Event::done() const {
  if (handle_ == nullptr) throw_usage_error({.op = "event"}, "done() of an empty Event");
  return device_->event_done(handle_);
}

void Event::wait() const {
  if (handle_ == nullptr) throw_usage_error({.op = "event"}, "wait() of an empty Event");
  device_->wait_event(handle_);
}

void Event::reset() noexcept {
  if (handle_ != nullptr) device_->destroy_event(std::exchange(handle_, nullptr));
  device_.reset();
}

namespace detail {

DeviceAllocation::DeviceAllocation(std::shared_ptr<Device> device, std::size_t bytes, Kind kind)
    : device_(std::move(device)), size_(bytes), kind_(kind) {
  require_device(device_, kind == Kind::device ? "device buffer" : "pinned buffer");
  ptr_ = kind == Kind::device ? device_->alloc(bytes) : device_->alloc_pinned(bytes);
}

}  // namespace detail

DeviceBuffer::DeviceBuffer(std::shared_ptr<Device> device, std::size_t bytes)
    : DeviceAllocation(std::move(device), bytes, Kind::device) {}

PinnedBuffer::PinnedBuffer(std::shared_ptr<Device> device, std::size_t bytes)
    : DeviceAllocation(std::move(device), bytes, Kind::pinned) {}

}  // namespace sluice
