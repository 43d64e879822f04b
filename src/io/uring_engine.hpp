#pragma once

#include <liburing.h>

#include <cstdint>
#include <vector>

#include "sluice/io_engine.hpp"

namespace sluice {

/// io_uring with batched submission, optional registered (fixed) buffers and a sparse table of
/// registered files. One ring per engine, set up for the thread that creates it (single issuer,
/// deferred task running: see uring_engine.cpp); only wake() may be called from other threads.
class UringEngine final : public IoEngine {
 public:
  explicit UringEngine(unsigned depth);
  ~UringEngine() override;
  UringEngine(const UringEngine&) = delete;
  UringEngine& operator=(const UringEngine&) = delete;

  [[nodiscard]] EngineKind kind() const noexcept override { return EngineKind::uring; }
  [[nodiscard]] std::string_view name() const noexcept override { return "uring"; }
  [[nodiscard]] unsigned capacity() const noexcept override { return depth_; }
  [[nodiscard]] unsigned in_flight() const noexcept override { return in_flight_; }
  void prepare(const IoRequest& req) override;
  std::size_t submit_and_wait(std::span<IoCompletion> out, std::size_t min_complete) override;
  /// One preadv2/pwritev2 (a fixed-file slot is no descriptor: that one goes through the ring).
  std::int64_t transfer_now(const IoRequest& req) override;
  bool register_buffers(std::span<const iovec> buffers) override;
  void unregister_buffers() override;
  int register_file(int fd) override;
  void unregister_file(int slot) override;
  bool enable_wake() override;
  void wake() noexcept override;

  /// The io_uring_setup flags the ring was created with (the first set the kernel accepted).
  [[nodiscard]] unsigned setup_flags() const noexcept { return setup_flags_; }

  /// Whether a set of fixed buffers is registered with the ring now.
  [[nodiscard]] bool buffers_registered() const noexcept { return buffers_registered_; }
  /// Files registered in the sparse table now (0 where the kernel refused the table).
  [[nodiscard]] unsigned files_registered() const noexcept {
    return files_ready_ ? file_slots - static_cast<unsigned>(free_slots_.size()) : 0;
  }
  /// Slots in the sparse file table.
  static constexpr unsigned file_slots = 64;

 private:
  io_uring_sqe* next_sqe();
  void arm_wake();
  std::size_t reap(std::span<IoCompletion> out, bool* woken);

  io_uring ring_{};
  unsigned depth_;
  unsigned setup_flags_ = 0;
  unsigned in_flight_ = 0;
  bool buffers_registered_ = false;
  bool files_ready_ = false;   // sparse table set up
  bool files_failed_ = false;  // kernel refused: stop trying
  std::vector<int> free_slots_;
  int wake_fd_ = -1;         // eventfd other threads write to end a wait
  bool wake_armed_ = false;  // a read of wake_fd_ is in the ring
  std::uint64_t wake_count_ = 0;
};

}  // namespace sluice
