// Helpers for the GPU tests: which loader situation this process runs in, device memory filled
// and read back through the device's own copies, the fake libcufile's counters, and
// configurations for one transfer.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/config.hpp"
#include "sluice/device.hpp"
#include "sluice/error.hpp"
#include "sluice/transfer.hpp"
#include "support/test_util.hpp"

namespace sluice::gpu_test {

/// Whether `text` contains `part`, printing both when not.
[[nodiscard]] ::testing::AssertionResult contains(std::string_view text, std::string_view part);

/// The loader situation the CTest entry set up (SLUICE_GPU_TEST_MODE), or empty when the binary
/// runs by hand. Suites call need_mode() in SetUp: it skips (returning false) when the entry set
/// up another situation, or when none is named and `present` says this process lacks it.
[[nodiscard]] std::string mode();
[[nodiscard]] bool need_mode(std::string_view want, bool present, std::string* skip_reason);

/// Whether the fake libcuda is loaded and offers a device ("cuda:0" then opens on it).
[[nodiscard]] bool fake_cuda_loaded();

/// The devices the parameterized suites run on: "sim", and "cuda:0" over the fake libcuda.
/// Opens `spec`, or returns null with `why` when this process cannot.
[[nodiscard]] std::shared_ptr<Device> try_open(const std::string& spec, std::string* why);

/// Device memory that knows its device, with whole-allocation upload/download helpers.
class DeviceMemory {
 public:
  DeviceMemory(std::shared_ptr<Device> dev, std::size_t bytes);
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  [[nodiscard]] std::byte* data() const noexcept { return ptr_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  /// Every byte of the allocation set to `b` (through the device's copy).
  void fill(std::byte b);
  void upload(std::span<const std::byte> src, std::size_t at = 0);
  [[nodiscard]] std::vector<std::byte> download(std::size_t at, std::size_t n) const;
  [[nodiscard]] std::vector<std::byte> download() const { return download(0, size_); }

 private:
  std::shared_ptr<Device> dev_;
  std::byte* ptr_ = nullptr;
  std::size_t size_ = 0;
};

/// Bytes [at, at+n) of a downloaded allocation all equal `b`; else names the first that does not.
[[nodiscard]] ::testing::AssertionResult all_equal(std::span<const std::byte> bytes, std::byte b);

/// A configuration for one transfer. `piece` sets bounce_buffer_size, which is the posix path's
/// piece size (the pinned pool itself is sized once per process from the global configuration).
struct Shape {
  std::string name = "psync_t1_q1";
  std::string engine = "psync";
  unsigned threads = 1;
  unsigned queue_depth = 1;
  bool direct_io = true;
  std::uint64_t piece = 64 << 10;
  /// bypass: test files are read right after they are written, from the page cache, and these
  /// shapes are meant to cover O_DIRECT (tests/cache_policy_test.cpp covers auto).
  std::string cache_policy = "bypass";
};
[[nodiscard]] std::shared_ptr<const Config> make_config(const Shape& s);

/// Unless SLUICE_BOUNCE_BUFFERS / SLUICE_BOUNCE_BUFFER_SIZE say otherwise, makes the process
/// configuration use `count` pinned buffers of `size` (before the pool's first use).
void use_small_pinned_pool(unsigned count, std::uint64_t size);

/// The fake libcufile's counters, read from the copy the cuFile loader loaded.
struct FakeCuFileCounters {
  std::uint64_t reads = 0, bytes_read = 0, writes = 0, bytes_written = 0, live_handles = 0;
};
/// False when the loaded libcufile is not the fake (or none loaded).
[[nodiscard]] bool fake_cufile_counters(FakeCuFileCounters* out);
[[nodiscard]] std::uint64_t fake_cufile_calls(const char* function);
/// Zeroes the fake's counters, call counts included: FAKE_CUFILE_FAIL's <skip>/<times> count
/// calls from here.
void fake_cufile_reset();

/// Runs `fn`, expecting a sluice::Error of `domain` whose message contains every part.
template <class Fn>
::testing::AssertionResult throws_error(Fn&& fn, ErrorDomain domain,
                                        std::initializer_list<std::string_view> parts,
                                        Error* out = nullptr) {
  try {
    fn();
  } catch (const Error& e) {
    if (e.domain() != domain) {
      return ::testing::AssertionFailure()
             << "error of domain " << static_cast<int>(e.domain()) << ", want "
             << static_cast<int>(domain) << ": " << e.what();
    }
    for (std::string_view p : parts) {
      if (std::string_view(e.what()).find(p) == std::string_view::npos) {
        return ::testing::AssertionFailure() << "'" << e.what() << "' does not contain '" << p << "'";
      }
    }
    if (out != nullptr) *out = e;
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw a non-sluice exception: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

}  // namespace sluice::gpu_test
