// libsluice_cufile's log: one line per event on stderr, "sluice_cufile: <level>: <text>", shown
// when the Sluice configuration's log_level (SLUICE_LOG) admits the level. libsluice itself
// reports through results and errors rather than a log; this library has no caller to return a
// reason to (cuFile's API has no room for one), so it writes them here.
#pragma once

#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "sluice/config.hpp"

namespace sluice::capi {

using sluice::LogLevel;  // the configuration's log_level (error < warn < info < debug)

[[nodiscard]] bool log_enabled(LogLevel level) noexcept;
void log_line(LogLevel level, std::string_view text) noexcept;

template <typename... Args>
void log(LogLevel level, fmt::format_string<Args...> format, Args&&... args) noexcept {
  if (!log_enabled(level)) return;
  try {
    log_line(level, fmt::format(format, std::forward<Args>(args)...));
  } catch (...) {  // formatting may allocate; a log line is never worth a failed call
  }
}

}  // namespace sluice::capi
