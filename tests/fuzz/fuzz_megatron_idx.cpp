// libFuzzer target: any bytes, taken as a whole Megatron .idx (of a .bin 64 times its size),
// either parse into sequences that each lie inside the .bin, after the one before, or give a
// sluice::Error. Anything else is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "ingest/dataset_parts.hpp"
#include "sluice/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> idx(reinterpret_cast<const std::byte*>(data), size);
  const std::uint64_t bin_size = std::uint64_t{size} * 64;
  try {
    const auto ix = sluice::ingest::parse_megatron_index(idx, bin_size, "fuzz.idx", "fuzz.bin");
    if (ix.cumulative.size() != ix.pointers.size() + 1 || ix.cumulative[0] != 0) std::abort();
    std::uint64_t previous_end = 0;
    for (std::size_t i = 0; i < ix.pointers.size(); ++i) {
      if (ix.cumulative[i + 1] < ix.cumulative[i]) std::abort();
      const std::uint64_t end = ix.pointers[i] + (ix.cumulative[i + 1] - ix.cumulative[i]) * ix.token_bytes;
      if (ix.pointers[i] < previous_end || end > bin_size) std::abort();
      previous_end = end;
    }
  } catch (const sluice::Error&) {
  }
  return 0;
}
