// libFuzzer target: any bytes, taken as a whole tar archive, either give members whose contents
// lie inside it, block-aligned and in order, or a sluice::Error. Anything else is a bug.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "ingest/dataset_parts.hpp"
#include "sluice/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> archive(reinterpret_cast<const std::byte*>(data), size);
  const sluice::ingest::TarBytesAt bytes_at = [&](std::uint64_t offset, std::size_t n) {
    if (offset > size) std::abort();  // the scanner asked for bytes it never checked exist
    return archive.subspan(static_cast<std::size_t>(offset), std::min<std::size_t>(n, size - offset));
  };
  try {
    const auto members = sluice::ingest::scan_tar(size, bytes_at, "fuzz.tar");
    std::uint64_t previous_end = 0;
    for (const auto& m : members) {
      if (m.offset % 512 != 0 || m.offset < previous_end + 512 || m.offset + m.size > size || m.name.empty()) {
        std::abort();
      }
      previous_end = m.offset + m.size;
    }
  } catch (const sluice::Error&) {
  }
  return 0;
}
