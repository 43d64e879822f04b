// sluice read on a URL (read_remote.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace sluice::cli {

struct RemoteRead {
  std::string url;
  std::uint64_t offset = 0;
  std::optional<std::uint64_t> length;  ///< to the end of the object when unset
  std::string out;
  std::string part_size;   ///< --part-size, empty: the setting
  unsigned in_flight = 0;  ///< --in-flight, 0: the setting
  bool json = false;
};

int run_remote_read(const RemoteRead& a);

}  // namespace sluice::cli
