// libFuzzer target: any bytes, taken as a whole .npy file, either parse into one tensor that
// fills the file after its header, or give a sluice::Error. Anything else is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "sluice/error.hpp"
#include "sluice/formats.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> file(reinterpret_cast<const std::byte*>(data), size);
  try {
    const auto layout = sluice::formats::parse_npy(file, size, "fuzz.npy", "fuzz");
    if (layout.tensors.size() != 1) std::abort();
    const auto& t = layout.tensors[0];
    if (t.offset != layout.data_offset || t.offset + t.bytes != size) std::abort();
  } catch (const sluice::Error&) {
  }
  return 0;
}
