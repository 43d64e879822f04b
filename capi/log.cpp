#include "log.hpp"

#include <unistd.h>

#include <string>

#include "sluice/config.hpp"

namespace sluice::capi {

bool log_enabled(LogLevel level) noexcept {
  try {
    // Read each time: cuFileSetParameterString(CUFILE_PARAM_LOGGING_LEVEL) changes it.
    return level <= config()->log_level;
  } catch (...) {  // a bad SLUICE_* value: the driver open reports it; log errors meanwhile
    return level == LogLevel::error;
  }
}

void log_line(LogLevel level, std::string_view text) noexcept {
  try {
    std::string line = "sluice_cufile: ";
    line += to_string(level);
    line += ": ";
    line += text;
    line += '\n';
    // One write(2) per line, so lines of concurrent calls do not interleave.
    const char* p = line.data();
    std::size_t left = line.size();
    while (left > 0) {
      const ssize_t n = ::write(STDERR_FILENO, p, left);
      if (n <= 0) break;
      p += n;
      left -= static_cast<std::size_t>(n);
    }
  } catch (...) {
  }
}

}  // namespace sluice::capi
