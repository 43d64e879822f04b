// A simulated GPU in host memory. Each stream is a FIFO served by its own thread; copies run on
// one copy engine per direction (a mutex), each taking max(memcpy time, latency + bytes/bandwidth)
// so copies of one direction serialise at the modelled bandwidth while reads, copies in the other
// direction and host work overlap, as on a real GPU with one copy engine per direction.
// Host functions of every stream run on one device-wide thread, as CUDA runs them, so a host
// function that blocks stalls the host functions of other streams here as it does there.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>

#include "stream_gate.hpp"

#include "sluice/device.hpp"

namespace sluice::detail {

struct SimModel {
  double gbps = 25.0;        ///< bytes per nanosecond, per direction (0 = unlimited)
  double latency_us = 10.0;  ///< per copy
};

class SimDevice final : public Device {
 public:
  explicit SimDevice(SimModel model);
  ~SimDevice() override;

  [[nodiscard]] const DeviceInfo& info() const noexcept override { return info_; }
  [[nodiscard]] void* alloc(std::size_t bytes) override;
  void free(void* p) noexcept override;
  [[nodiscard]] void* alloc_pinned(std::size_t bytes) override;
  void free_pinned(void* p) noexcept override;
  void register_host(void* p, std::size_t bytes) override;
  void unregister_host(void* p) noexcept override;
  [[nodiscard]] MemoryKind pointer_kind(const void* p) const override;

  [[nodiscard]] StreamHandle create_stream() override;
  void destroy_stream(StreamHandle s) noexcept override;
  void copy_to_device_async(void* dst, const void* src, std::size_t bytes, StreamHandle s) override;
  void copy_to_host_async(void* dst, const void* src, std::size_t bytes, StreamHandle s) override;
  void launch_host_func(StreamHandle s, void (*fn)(void*), void* arg) override;
  void synchronize(StreamHandle s) override;
  [[nodiscard]] StreamGate make_gate() override;
  void wait_gate(StreamHandle s, const StreamGate& gate) override;

  [[nodiscard]] EventHandle create_event() override;
  void destroy_event(EventHandle e) noexcept override;
  void record_event(EventHandle e, StreamHandle s) override;
  [[nodiscard]] bool event_done(EventHandle e) override;
  void wait_event(EventHandle e) override;
  void make_current() override {}

  /// Bytes of device memory currently allocated (tests check for leaks).
  [[nodiscard]] std::size_t device_bytes() const;
  /// Bytes of pinned memory currently allocated.
  [[nodiscard]] std::size_t pinned_bytes() const;

  struct Stream;
  struct Engine;
  struct Callbacks;

 private:
  struct Range {
    std::size_t size;
    MemoryKind kind;
    bool owned = true;  // false for caller memory registered with register_host()
  };
  void* allocate(std::size_t bytes, MemoryKind kind);
  void release(void* p, MemoryKind kind) noexcept;
  void check_device_range(const void* p, std::size_t bytes, const char* op) const;
  Stream& stream_of(StreamHandle s);
  void modelled_copy(Engine& engine, Stream& stream, std::chrono::steady_clock::time_point enqueued,
                     void* dst, const void* src, std::size_t n) const;

  DeviceInfo info_;
  SimModel model_;
  mutable std::mutex mutex_;
  std::map<std::uintptr_t, Range> ranges_;  // start -> range, for pointer queries
  std::unique_ptr<Engine> engines_[2];      // [0] host->device, [1] device->host
  std::shared_ptr<GateSlots> gates_;        // made on first use, under mutex_
  std::unique_ptr<Callbacks> callbacks_;    // outlives the streams that hand it work
  std::unique_ptr<Stream> default_stream_;  // for StreamHandle nullptr
};

}  // namespace sluice::detail
