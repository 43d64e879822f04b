// The checkpoint of a seed, the same in save_kill_test and the child it kills: a few tensors of
// assorted sizes (about 24 MiB), their bytes drawn from the seed, and the file they make.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "sluice/save.hpp"
#include "support/test_util.hpp"

namespace sluice::test {

struct KillCheckpoint {
  std::vector<std::vector<std::byte>> data;
  std::vector<SaveTensor> tensors;

  explicit KillCheckpoint(std::uint64_t seed) {
    const std::uint64_t sizes[] = {4 * MiB, 12 * MiB + 4, 3, 7 * MiB + 1000, 64 * KiB, 1 * MiB};
    for (std::uint64_t s : sizes) data.push_back(random_bytes(s, seed * 16 + data.size()));
    for (std::size_t i = 0; i < data.size(); ++i) {
      tensors.push_back({fmt::format("layer.{}.weight", i), DType::u8, {data[i].size()}, data[i].data(), data[i].size()});
    }
  }

  /// The whole file save_safetensors makes of it.
  [[nodiscard]] std::vector<std::byte> file() const {
    const SafetensorsLayout l = plan_safetensors(tensors);
    std::vector<std::byte> out = l.prefix;
    for (std::size_t i : l.order) out.insert(out.end(), data[i].begin(), data[i].end());
    return out;
  }
};

}  // namespace sluice::test
