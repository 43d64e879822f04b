#include "stream_gate.hpp"

#include <cstring>
#include <memory>
#include <utility>

#include <fmt/format.h>

#include "core/cuda_codes.hpp"
#include "sluice/device.hpp"
#include "sluice/error.hpp"

namespace sluice::detail {

GateSlots::GateSlots(AllocPage alloc, FreePage free) : alloc_(std::move(alloc)), release_page_(std::move(free)) {}

GateSlots::~GateSlots() {
  for (std::uint32_t i = 0; i < page_count_; ++i) {
    Page* page = pages_[i].load(std::memory_order_relaxed);
    release_page_(*page);
    delete page;
  }
}

GateSlots::Claim GateSlots::acquire() {
  std::lock_guard lock(mutex_);
  if (idle_.empty()) {
    if (page_count_ == kMaxPages) {
      throw Error(ErrorDomain::cuda, detail::cu::error_out_of_memory, {.op = "stream gate"},
                  fmt::format("{} stream-ordered transfers are waiting at once; no gate words are left",
                              kMaxPages * kWordsPerPage));
    }
    auto page = std::make_unique<Page>(alloc_(kWordsPerPage * sizeof(std::uint32_t)));
    std::memset(page->host, 0, kWordsPerPage * sizeof(std::uint32_t));  // every word starts open at 0
    pages_[page_count_].store(page.release(), std::memory_order_release);
    const std::uint32_t first = page_count_ * kWordsPerPage;
    ++page_count_;
    last_target_.resize(static_cast<std::size_t>(page_count_) * kWordsPerPage, 0);
    for (std::uint32_t i = kWordsPerPage; i-- > 0;) idle_.push_back(first + i);
  }
  const std::uint32_t index = idle_.back();
  idle_.pop_back();
  const std::uint32_t target = ++last_target_[index];
  return {index, target};
}

void GateSlots::open(std::uint32_t index, std::uint32_t target) noexcept {
  auto* w = const_cast<std::uint32_t*>(word(index));
  std::atomic_ref<std::uint32_t>(*w).store(target, std::memory_order_release);
  {
    std::lock_guard lock(mutex_);
    idle_.push_back(index);
  }
  opened_.notify_all();
}

void GateSlots::wait(std::uint32_t index, std::uint32_t target) const {
  std::unique_lock lock(mutex_);
  opened_.wait(lock, [&] { return reached(load(index), target); });
}

const std::uint32_t* GateSlots::word(std::uint32_t index) const noexcept {
  const Page* page = pages_[index / kWordsPerPage].load(std::memory_order_acquire);
  return page->host + index % kWordsPerPage;
}

std::uint64_t GateSlots::device_address(std::uint32_t index) const noexcept {
  const Page* page = pages_[index / kWordsPerPage].load(std::memory_order_acquire);
  return page->device_address + std::uint64_t{index % kWordsPerPage} * sizeof(std::uint32_t);
}

std::uint32_t GateSlots::load(std::uint32_t index) const noexcept {
  auto* w = const_cast<std::uint32_t*>(word(index));
  return std::atomic_ref<std::uint32_t>(*w).load(std::memory_order_acquire);
}

StreamGate claim_gate(std::shared_ptr<GateSlots> slots) {
  const GateSlots::Claim claim = slots->acquire();
  return {std::move(slots), claim.index, claim.target};
}

}  // namespace sluice::detail

namespace sluice {

StreamGate::StreamGate(StreamGate&& o) noexcept
    : slots_(std::move(o.slots_)), index_(o.index_), target_(o.target_) {}

StreamGate& StreamGate::operator=(StreamGate&& o) noexcept {
  if (this != &o) {
    open();
    slots_ = std::move(o.slots_);
    index_ = o.index_;
    target_ = o.target_;
  }
  return *this;
}

StreamGate::~StreamGate() { open(); }

void StreamGate::open() noexcept {
  if (slots_) std::exchange(slots_, nullptr)->open(index_, target_);
}

}  // namespace sluice
