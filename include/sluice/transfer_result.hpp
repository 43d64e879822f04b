// What a transfer did: the bytes it moved, the path they took and why.
#pragma once

#include <cstdint>
#include <string>

#include "sluice/path.hpp"

namespace sluice {

struct TransferResult {
  std::uint64_t bytes = 0;  ///< bytes moved (a read stops at the end of the file)
  Path path = Path::host;   ///< the path the bytes took
  std::string reason;       ///< why that path, and how ("O_DIRECT", "buffered: filesystem ...")
  double seconds = 0;       ///< wall time of the call
  std::uint64_t ios = 0;    ///< I/O requests issued
  /// Of `bytes`, those read buffered because the page cache held them (cache_policy auto).
  std::uint64_t cached_bytes = 0;
};

}  // namespace sluice
