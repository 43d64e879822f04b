// The words behind StreamGate: pages of 32-bit words a stream can wait on, in pinned,
// device-mapped memory for CUDA (cuStreamWaitValue32 polls them) and in ordinary memory for the
// sim device. A word is reused as soon as its gate opens: each new gate on it waits for a value
// one higher, and the device compares cyclically (CU_STREAM_WAIT_VALUE_GEQ), so a wait still
// queued for an earlier gate on the same word stays satisfied.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

namespace sluice::detail {

class GateSlots {
 public:
  struct Page {
    std::uint32_t* host = nullptr;       ///< kWordsPerPage words, zeroed
    std::uint64_t device_address = 0;    ///< where the device sees them (CUDA); 0 for sim
  };
  using AllocPage = std::function<Page(std::size_t bytes)>;
  using FreePage = std::function<void(const Page&)>;

  static constexpr std::uint32_t kWordsPerPage = 1024;
  static constexpr std::uint32_t kMaxPages = 256;  // 262144 gates closed at once

  GateSlots(AllocPage alloc, FreePage free);
  ~GateSlots();
  GateSlots(const GateSlots&) = delete;
  GateSlots& operator=(const GateSlots&) = delete;

  struct Claim {
    std::uint32_t index = 0;
    std::uint32_t target = 0;
  };
  /// A free word and the value that will open its next gate. Throws an Error when every word of
  /// every page is held by a closed gate.
  [[nodiscard]] Claim acquire();
  /// Stores `target` in the word (release) and frees the word for the next gate.
  void open(std::uint32_t index, std::uint32_t target) noexcept;
  /// Blocks until the word has reached `target`.
  void wait(std::uint32_t index, std::uint32_t target) const;

  [[nodiscard]] const std::uint32_t* word(std::uint32_t index) const noexcept;
  [[nodiscard]] std::uint64_t device_address(std::uint32_t index) const noexcept;

  /// CU_STREAM_WAIT_VALUE_GEQ: (int32_t)(value - target) >= 0.
  [[nodiscard]] static bool reached(std::uint32_t value, std::uint32_t target) noexcept {
    return static_cast<std::int32_t>(value - target) >= 0;
  }

 private:
  [[nodiscard]] std::uint32_t load(std::uint32_t index) const noexcept;

  AllocPage alloc_;
  FreePage release_page_;
  mutable std::mutex mutex_;
  mutable std::condition_variable opened_;
  // Written under mutex_ before any index on the page is handed out; read without it after.
  std::array<std::atomic<Page*>, kMaxPages> pages_{};
  std::uint32_t page_count_ = 0;
  std::vector<std::uint32_t> last_target_;  // per word: the target of its latest gate
  std::vector<std::uint32_t> idle_;         // words with no closed gate
};

}  // namespace sluice::detail
