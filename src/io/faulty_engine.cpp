#include "sluice/testing/faulty_engine.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <thread>

#include <fmt/format.h>

#include "sluice/error.hpp"
#include "sluice/units.hpp"

namespace sluice {
namespace {

[[noreturn]] void bad_faults(std::string_view item, std::string_view why) {
  throw_usage_error({.op = "SLUICE_FAULTS"}, fmt::format("cannot read '{}': {}", item, why));
}

double probability(std::string_view item, std::string_view text) {
  double p = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), p);
  if (ec != std::errc() || end != text.data() + text.size() || p < 0 || p > 1) {
    bad_faults(item, "expected a probability between 0 and 1");
  }
  return p;
}

// The duration spellings of every other option (units.hpp), to the microsecond.
std::chrono::microseconds duration(std::string_view item, std::string_view text) {
  const auto seconds = parse_duration(text);
  if (!seconds || *seconds * 1e6 > static_cast<double>(std::chrono::microseconds::max().count())) {
    bad_faults(item, "expected a duration like 500us, 2ms or 1s");
  }
  return std::chrono::microseconds(std::llround(*seconds * 1e6));
}

void set_item(RandomFaults& f, std::string_view item) {
  const auto eq = item.find('=');
  if (eq == std::string_view::npos) bad_faults(item, "expected KEY=VALUE");
  const std::string_view key = item.substr(0, eq), value = item.substr(eq + 1);
  if (key == "eio") {
    f.eio = probability(item, value);
  } else if (key == "enospc") {
    f.enospc = probability(item, value);
  } else if (key == "eagain") {
    f.eagain = probability(item, value);
  } else if (key == "eintr") {
    f.eintr = probability(item, value);
  } else if (key == "short") {
    f.short_transfer = probability(item, value);
  } else if (key == "delay") {
    const auto colon = value.find(':');
    f.delay = probability(item, value.substr(0, colon));
    if (colon != std::string_view::npos) f.delay_for = duration(item, value.substr(colon + 1));
  } else if (key == "seed") {
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), f.seed);
    if (ec != std::errc() || end != value.data() + value.size()) bad_faults(item, "expected a number");
  } else if (key == "only") {
    if (value != "read" && value != "write") bad_faults(item, "expected read or write");
    f.only = value == "read" ? IoOp::read : IoOp::write;
  } else if (key == "log") {
    f.log = std::string(value);
  } else {
    bad_faults(item, "unknown key (eio, enospc, eagain, eintr, short, delay, seed, only, log)");
  }
}

}  // namespace

RandomFaults parse_faults(std::string_view spec) {
  RandomFaults f;
  const std::string_view all = spec;
  while (!spec.empty()) {
    const auto comma = spec.find(',');
    const std::string_view item = spec.substr(0, comma);
    if (!item.empty()) set_item(f, item);
    spec = comma == std::string_view::npos ? std::string_view() : spec.substr(comma + 1);
  }
  if (f.eio + f.enospc + f.eagain + f.eintr + f.short_transfer > 1) {
    bad_faults(all, "the fault probabilities add up to more than 1");
  }
  return f;
}

FaultyEngine::FaultyEngine(std::unique_ptr<IoEngine> inner, FaultPlan plan)
    : inner_(std::move(inner)), plan_(plan) {}

FaultyEngine::FaultyEngine(std::unique_ptr<IoEngine> inner, RandomFaults faults)
    : inner_(std::move(inner)), random_(std::move(faults)), rng_(random_->seed) {
  if (!random_->log.empty()) {
    log_fd_ = ::open(random_->log.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (log_fd_ < 0) {
      throw Error(ErrorDomain::os, errno, {.op = "SLUICE_FAULTS", .path = random_->log},
                  "cannot open the fault log");
    }
  }
}

FaultyEngine::~FaultyEngine() {
  if (log_fd_ >= 0) ::close(log_fd_);
}

unsigned FaultyEngine::in_flight() const noexcept {
  return inner_->in_flight() + static_cast<unsigned>(synthetic_.size());
}

void FaultyEngine::inject(const IoRequest& req, std::string_view kind, int error) {
  ++injected_;
  if (log_fd_ >= 0) {
    // One write of one line with O_APPEND: lines of concurrent engines never interleave.
    const std::string line = fmt::format("pid={} fault={} op={} offset={} len={}\n", ::getpid(), kind,
                                         req.op == IoOp::read ? "read" : "write", req.offset, req.len);
    (void)!::write(log_fd_, line.data(), line.size());
  }
  if (error != 0) synthetic_.push_back({req.tag, -static_cast<std::int64_t>(error)});
}

void FaultyEngine::prepare_random(const IoRequest& req) {
  const RandomFaults& f = *random_;
  std::uniform_real_distribution<double> unit(0, 1);
  if (f.delay > 0 && unit(rng_) < f.delay) {
    inject(req, "delay", 0);
    std::this_thread::sleep_for(f.delay_for);
  }
  if (f.only && *f.only != req.op) {
    inner_->prepare(req);
    return;
  }
  double u = unit(rng_);
  const bool write = req.op == IoOp::write;
  const std::pair<double, int> errors[] = {
      {f.eio, EIO}, {write ? f.enospc : 0, ENOSPC}, {f.eagain, EAGAIN}, {f.eintr, EINTR}};
  for (const auto& [p, error] : errors) {
    if (u < p) {
      inject(req, error == EIO ? "eio" : error == ENOSPC ? "enospc" : error == EAGAIN ? "eagain" : "eintr", error);
      return;
    }
    u -= p;
  }
  if (u < f.short_transfer && req.len > 512) {
    inject(req, "short", 0);
    IoRequest shorter = req;
    shorter.len = std::max<std::uint32_t>(512, (req.len / 2) / 512 * 512);
    inner_->prepare(shorter);
    return;
  }
  inner_->prepare(req);
}

void FaultyEngine::prepare(const IoRequest& req) {
  ++seen_;
  if (random_) {
    prepare_random(req);
    return;
  }
  if (plan_.delay.count() > 0) std::this_thread::sleep_for(plan_.delay);
  const bool eligible = !plan_.only || *plan_.only == req.op;
  if (eligible && plan_.every != 0 && seen_ % plan_.every == 0) {
    ++injected_;
    if (plan_.error != 0) {
      synthetic_.push_back({req.tag, -static_cast<std::int64_t>(plan_.error)});
      return;
    }
    if (plan_.short_transfer && req.len > 512) {
      // Half, rounded down to 512, but never 0: a zero-byte result is not a short transfer but
      // end of file (reads) or no space (writes), which the caller rightly treats as errors.
      IoRequest shorter = req;
      shorter.len = std::max<std::uint32_t>(512, (req.len / 2) / 512 * 512);
      inner_->prepare(shorter);
      return;
    }
  }
  inner_->prepare(req);
}

std::size_t FaultyEngine::submit_and_wait(std::span<IoCompletion> out, std::size_t min_complete) {
  std::size_t count = 0;
  while (!synthetic_.empty() && count < out.size()) {
    out[count++] = synthetic_.back();
    synthetic_.pop_back();
  }
  if (inner_->in_flight() == 0 || count == out.size()) return count;
  const std::size_t need = min_complete > count ? min_complete - count : 0;
  return count + inner_->submit_and_wait(out.subspan(count), need);
}

}  // namespace sluice
