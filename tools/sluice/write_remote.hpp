// sluice write IN s3://BUCKET/KEY (write_remote.cpp).
#pragma once

#include <string>

namespace sluice::cli {

struct RemoteWrite {
  std::string in;  ///< input file, '-' for standard input
  std::string url;
  std::string part_size;   ///< --part-size, empty: the setting
  unsigned in_flight = 0;  ///< --in-flight, 0: the setting
  bool json = false;
};

int run_remote_write(const RemoteWrite& a);

}  // namespace sluice::cli
