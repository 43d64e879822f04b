// The GPU seam: memory, streams, events and copies, behind one interface with two
// implementations: `cuda` (the CUDA driver API, loaded at run time from libcuda.so.1) and `sim`
// (a simulated GPU in host memory with copy-engine threads and a bandwidth/latency model, so
// every pipeline runs, overlaps and can be timed on a machine without a GPU).
//
// Streams and events are opaque handles owned by the device that made them; applications hold
// them through the RAII types at the end of this header (Stream, Event, DeviceBuffer,
// PinnedBuffer), which give them back to their device. Asynchronous copies are ordered within a
// stream; an event completes when everything enqueued on its stream before it has completed. No
// method may be called from a static destructor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "sluice/config.hpp"
#include "sluice/export.hpp"

namespace sluice {

enum class MemoryKind : std::uint8_t {
  device,         ///< device memory (cuMemAlloc, or the sim device's heap)
  pinned_host,    ///< page-locked host memory (cuMemHostAlloc or registered with the device)
  pageable_host,  ///< ordinary host memory the device does not know
};

[[nodiscard]] SLUICE_API std::string_view to_string(MemoryKind k) noexcept;
/// A memory kind as every command's --memory spells it: device (or gpu), pinned (pinned-host,
/// pinned_host), pageable (host, pageable-host, pageable_host); to_string's spellings too ("pinned
/// host"), so printed kinds read back. nullopt for anything else.
[[nodiscard]] SLUICE_API std::optional<MemoryKind> parse_memory_kind(
    std::string_view text) noexcept;

/// What a device is (an opened one: the setting's "auto" has resolved to one of these).
enum class DeviceKind : std::uint8_t { sim, cuda };

[[nodiscard]] SLUICE_API std::string_view to_string(DeviceKind k) noexcept;

struct DeviceInfo {
  DeviceKind kind = DeviceKind::sim;
  int ordinal = 0;           ///< cuda:N
  std::string name;          ///< "NVIDIA H200", "sim (25.0 GB/s H2D, 10 us)"
  std::uint64_t total_memory = 0;
  std::string pci_bus_id;    ///< "0000:17:00.0" where known
  std::string driver;        ///< "CUDA driver 13.0, libcuda.so.1" where known
};

using StreamHandle = void*;
using EventHandle = void*;

class Device;
class StreamGate;
namespace detail {
class GateSlots;
/// Records how open_device() chose `d` (what Device::selection() returns); libsluice only.
void set_selection(Device& d, std::string selection);
/// A closed gate on a free word of `slots` (the devices' make_gate); libsluice only.
[[nodiscard]] StreamGate claim_gate(std::shared_ptr<GateSlots> slots);
}  // namespace detail

/// A gate later work on a stream can wait behind (Device::wait_gate) while the work it stands
/// for runs off the stream. Opening it (once, from any thread) lets the stream go on; a gate
/// destroyed closed opens itself, so a stream never waits on a gate nobody holds. Move-only.
class SLUICE_API StreamGate {
 public:
  StreamGate() = default;
  StreamGate(StreamGate&& o) noexcept;
  StreamGate& operator=(StreamGate&& o) noexcept;
  StreamGate(const StreamGate&) = delete;
  StreamGate& operator=(const StreamGate&) = delete;
  ~StreamGate();

  void open() noexcept;
  /// Which word of the device's gate memory the stream watches, and the value that opens the
  /// gate (cyclic >=, as CU_STREAM_WAIT_VALUE_GEQ compares). Safe to read while another thread
  /// opens the gate.
  [[nodiscard]] std::uint32_t index() const noexcept { return index_; }
  [[nodiscard]] std::uint32_t target() const noexcept { return target_; }

 private:
  // Private and inline, so hidden (-fvisibility-inlines-hidden): a constructor taking an internal
  // type is no part of the ABI (tests/api/check-exports.sh).
  friend StreamGate detail::claim_gate(std::shared_ptr<detail::GateSlots> slots);
  StreamGate(std::shared_ptr<detail::GateSlots> slots, std::uint32_t index, std::uint32_t target) noexcept
      : slots_(std::move(slots)), index_(index), target_(target) {}

  std::shared_ptr<detail::GateSlots> slots_;
  std::uint32_t index_ = 0;
  std::uint32_t target_ = 0;
};

class SLUICE_API Device {
 public:
  virtual ~Device() = default;
  [[nodiscard]] virtual const DeviceInfo& info() const noexcept = 0;

  /// Device memory. Throws an Error (domain cuda for the CUDA device) on failure.
  [[nodiscard]] virtual void* alloc(std::size_t bytes) = 0;
  virtual void free(void* p) noexcept = 0;
  /// Page-locked host memory, usable as the source/target of asynchronous copies.
  [[nodiscard]] virtual void* alloc_pinned(std::size_t bytes) = 0;
  virtual void free_pinned(void* p) noexcept = 0;
  /// Page-locks existing host memory (cuMemHostRegister).
  virtual void register_host(void* p, std::size_t bytes) = 0;
  virtual void unregister_host(void* p) noexcept = 0;
  [[nodiscard]] virtual MemoryKind pointer_kind(const void* p) const = 0;

  [[nodiscard]] virtual StreamHandle create_stream() = 0;
  virtual void destroy_stream(StreamHandle s) noexcept = 0;
  virtual void copy_to_device_async(void* dst, const void* src, std::size_t bytes, StreamHandle s) = 0;
  virtual void copy_to_host_async(void* dst, const void* src, std::size_t bytes, StreamHandle s) = 0;
  /// Runs fn(arg) on a device-owned thread once the work before it on `s` is done; later work on
  /// `s` waits for fn to return. fn must not call into the device (CUDA's cuLaunchHostFunc rule).
  virtual void launch_host_func(StreamHandle s, void (*fn)(void*), void* arg) = 0;
  virtual void synchronize(StreamHandle s) = 0;

  /// A closed gate (see StreamGate). Throws an Error when the device cannot gate streams.
  [[nodiscard]] virtual StreamGate make_gate() = 0;
  /// Later work on `s` waits until `gate` opens, polled by the device (cuStreamWaitValue32 on the
  /// gate's word) rather than by a blocked host thread, so stream-ordered work may run off the
  /// stream and use the device itself. Throws an Error when the device cannot (the driver lacks
  /// stream memory operations); callers then wait in a host function instead.
  virtual void wait_gate(StreamHandle s, const StreamGate& gate) = 0;

  [[nodiscard]] virtual EventHandle create_event() = 0;
  virtual void destroy_event(EventHandle e) noexcept = 0;
  virtual void record_event(EventHandle e, StreamHandle s) = 0;
  /// True when the work captured by the last record_event has completed.
  [[nodiscard]] virtual bool event_done(EventHandle e) = 0;
  virtual void wait_event(EventHandle e) = 0;

  /// Makes this device current on the calling thread for good (cuCtxSetCurrent: replaces the top
  /// of the thread's context stack); a no-op for sim. Only for threads the caller owns (bench's
  /// workers): every other method makes the device current for its own duration and then gives
  /// the calling thread back the context it had, so libsluice never changes an application
  /// thread's context stack.
  virtual void make_current() = 0;

  /// Synchronous copies on the default stream, for tests and tools. The transfer paths copy on
  /// their own non-blocking streams instead: work on the legacy default stream waits for every
  /// blocking stream, one held behind a stream-ordered transfer's gate included.
  void copy_to_device(void* dst, const void* src, std::size_t bytes);
  void copy_to_host(void* dst, const void* src, std::size_t bytes);

  /// How open_device() chose this device ("auto: no CUDA GPU (libcuda.so.1 not found), using sim").
  [[nodiscard]] const std::string& selection() const noexcept { return selection_; }

 private:
  friend void detail::set_selection(Device& d, std::string selection);
  std::string selection_;
};

/// Opens a device: auto (the first CUDA GPU if libcuda loads and has one, else sim, saying
/// why in selection()), sim, cuda or cuda:N. Devices are cached per setting, so every
/// caller in the process shares one context per GPU. Throws an Error with the reason when
/// cuda:N cannot be opened, and a usage Error for an ordinal on a kind other than cuda.
[[nodiscard]] SLUICE_API std::shared_ptr<Device> open_device(const DeviceSetting& setting);
/// The same from text ("auto", "sim", "cuda", "cuda:N"): the edge for CLI flags and tools.
/// Throws a usage Error for any other text.
[[nodiscard]] SLUICE_API std::shared_ptr<Device> open_device(std::string_view spec);

// --- What user code holds: RAII owners of streams, events and memory -------------------------
//
// Each owns one resource of a device and the shared_ptr<Device> that made it (so the device
// outlives it), and gives the resource back to that device when destroyed. Move-only; a
// moved-from or default-constructed one owns nothing. The raw Device methods above are the
// provider interface a device implements; applications need only these.

/// A stream of a device (non-blocking, like every stream Device::create_stream makes). Work
/// queued on it when it is destroyed still runs: CUDA's cuStreamDestroy returns at once and the
/// device finishes it; the sim device waits for it.
class SLUICE_API Stream {
 public:
  Stream() = default;
  /// Creates a stream on `device` (not null). Throws an Error when the device cannot.
  explicit Stream(std::shared_ptr<Device> device);
  Stream(Stream&& o) noexcept;
  Stream& operator=(Stream&& o) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream();

  /// The handle for the Device calls and the stream-ordered transfers; null when empty (which
  /// the devices read as their default stream, so check before use).
  [[nodiscard]] StreamHandle get() const noexcept { return handle_; }
  [[nodiscard]] const std::shared_ptr<Device>& device() const noexcept { return device_; }
  [[nodiscard]] explicit operator bool() const noexcept { return handle_ != nullptr; }
  /// Waits until everything queued so far on the stream has completed.
  void synchronize() const;
  /// Destroys the stream now (a no-op when empty).
  void reset() noexcept;
  /// Gives up ownership without destroying the stream (for one that must not be destroyed, say
  /// after a failed synchronize); the caller now owns the handle. Leaves this Stream empty.
  [[nodiscard]] StreamHandle release() noexcept;

 private:
  std::shared_ptr<Device> device_;
  StreamHandle handle_ = nullptr;
};

/// An event of a device: record() it on a stream, then ask done() or wait().
class SLUICE_API Event {
 public:
  Event() = default;
  /// Creates an event on `device` (not null). Throws an Error when the device cannot.
  explicit Event(std::shared_ptr<Device> device);
  Event(Event&& o) noexcept;
  Event& operator=(Event&& o) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event();

  [[nodiscard]] EventHandle get() const noexcept { return handle_; }
  [[nodiscard]] const std::shared_ptr<Device>& device() const noexcept { return device_; }
  [[nodiscard]] explicit operator bool() const noexcept { return handle_ != nullptr; }
  /// Captures the work queued on `stream` so far. A usage Error for a stream of another device.
  void record(const Stream& stream);
  /// The same on a stream the caller made by other means (an application's CUstream).
  void record(StreamHandle stream);
  /// True when the work captured by the last record() has completed (true if never recorded).
  [[nodiscard]] bool done() const;
  /// Blocks until the work captured by the last record() has completed.
  void wait() const;
  /// Destroys the event now (a no-op when empty).
  void reset() noexcept;

 private:
  std::shared_ptr<Device> device_;
  EventHandle handle_ = nullptr;
};

namespace detail {

/// What DeviceBuffer and PinnedBuffer share: one allocation of a device, freed through the same
/// device when the owner goes. Inline but for the allocating constructor, which only the
/// library's DeviceBuffer and PinnedBuffer constructors call: nothing of namespace detail is
/// exported (docs/architecture.md, "Libraries"), and freeing goes through Device's vtable.
class DeviceAllocation {
 public:
  DeviceAllocation(const DeviceAllocation&) = delete;
  DeviceAllocation& operator=(const DeviceAllocation&) = delete;
  ~DeviceAllocation() { reset(); }

  [[nodiscard]] void* data() const noexcept { return ptr_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] bool empty() const noexcept { return ptr_ == nullptr; }
  /// The allocation as bytes. For device memory these are device addresses: for transfers and
  /// device copies, not for the host to read (only the sim device's memory is host memory).
  [[nodiscard]] std::span<std::byte> bytes() const noexcept {
    return {static_cast<std::byte*>(ptr_), ptr_ == nullptr ? 0 : size_};
  }
  [[nodiscard]] const std::shared_ptr<Device>& device() const noexcept { return device_; }
  /// Frees the memory now (a no-op when empty).
  void reset() noexcept {
    if (ptr_ != nullptr) {
      if (kind_ == Kind::device) {
        device_->free(ptr_);
      } else {
        device_->free_pinned(ptr_);
      }
    }
    ptr_ = nullptr;
    size_ = 0;
    device_.reset();
  }

 protected:
  enum class Kind : std::uint8_t { device, pinned };
  DeviceAllocation() = default;
  DeviceAllocation(std::shared_ptr<Device> device, std::size_t bytes, Kind kind);
  DeviceAllocation(DeviceAllocation&& o) noexcept
      : device_(std::move(o.device_)),
        ptr_(std::exchange(o.ptr_, nullptr)),
        size_(std::exchange(o.size_, 0)),
        kind_(o.kind_) {}
  DeviceAllocation& operator=(DeviceAllocation&& o) noexcept {
    if (this != &o) {
      reset();
      device_ = std::move(o.device_);
      ptr_ = std::exchange(o.ptr_, nullptr);
      size_ = std::exchange(o.size_, 0);
      kind_ = o.kind_;
    }
    return *this;
  }

 private:
  std::shared_ptr<Device> device_;
  void* ptr_ = nullptr;
  std::size_t size_ = 0;
  Kind kind_ = Kind::device;
};

}  // namespace detail

/// Device memory (Device::alloc: cuMemAlloc, or the sim device's heap), freed when destroyed.
class SLUICE_API DeviceBuffer : public detail::DeviceAllocation {
 public:
  DeviceBuffer() = default;
  /// Allocates `bytes` on `device` (not null). Throws an Error (domain cuda on CUDA) on failure.
  DeviceBuffer(std::shared_ptr<Device> device, std::size_t bytes);
};

/// Page-locked host memory of a device (Device::alloc_pinned: cuMemHostAlloc), the source or
/// target of asynchronous copies; the host may read and write it. Freed when destroyed.
class SLUICE_API PinnedBuffer : public detail::DeviceAllocation {
 public:
  PinnedBuffer() = default;
  /// Allocates `bytes` of pinned memory with `device` (not null). Throws an Error on failure.
  PinnedBuffer(std::shared_ptr<Device> device, std::size_t bytes);
};

}  // namespace sluice
