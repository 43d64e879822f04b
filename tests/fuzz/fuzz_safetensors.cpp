// libFuzzer target: any bytes, taken as a whole safetensors file, either parse into a layout
// whose every tensor lies inside the file, or give a sluice::Error. Anything else (a crash, a
// sanitizer report, another exception) is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "sluice/error.hpp"
#include "sluice/formats.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> file(reinterpret_cast<const std::byte*>(data), size);
  try {
    const auto layout = sluice::formats::parse_safetensors(file, size, "fuzz.safetensors");
    std::uint64_t end = layout.data_offset;
    for (const auto& t : layout.tensors) {
      if (t.offset != end || t.offset + t.bytes > size) std::abort();
      end = t.offset + t.bytes;
    }
    if (end != size) std::abort();
  } catch (const sluice::Error&) {
  }
  return 0;
}
