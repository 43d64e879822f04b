// Reading a tensor file's header through the library (host path) and parsing it.
#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "checked.hpp"
#include "sluice/file.hpp"
#include "sluice/formats.hpp"
#include "sluice/transfer.hpp"

namespace sluice::formats {

TensorFileLayout read_layout(const File& file) {
  const std::uint64_t size = file.size();
  std::vector<std::byte> head(static_cast<std::size_t>(std::min<std::uint64_t>(size, 16)));
  const auto got = read(file, head.data(), head.size(), 0).bytes;
  head.resize(static_cast<std::size_t>(got));
  const TensorFormat format = detect_format(head);
  const std::uint64_t extent = header_extent(format, head, size, file.path());
  // extent is bounded by the format's header limit and by the file's size.
  std::vector<std::byte> header(static_cast<std::size_t>(extent));
  const auto n = read(file, header.data(), header.size(), 0).bytes;
  if (n != extent) {
    detail::bad_file(to_string(format), file.path(),
                     fmt::format("the file shrank while its header was read ({} of {} bytes)", n, extent));
  }
  if (format == TensorFormat::safetensors) return parse_safetensors(header, size, file.path());
  std::string name = file.path();
  if (const auto slash = name.rfind('/'); slash != std::string::npos) name.erase(0, slash + 1);
  if (name.size() > 4 && name.ends_with(".npy")) name.resize(name.size() - 4);
  return parse_npy(header, size, file.path(), name);
}

}  // namespace sluice::formats
