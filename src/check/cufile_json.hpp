// The cufile.json part of `sluice check`: libsluice's reader (sluice/internal/cufile_config.hpp)
// under this process's configuration and environment, as the report's fields, JSON and text.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "sluice/tools/check.hpp"

namespace sluice::check {

[[nodiscard]] CufileJson inspect_cufile_json();
[[nodiscard]] nlohmann::ordered_json cufile_json_json(const CufileJson& c);
/// The report's "cuFile configuration" section, one line a key.
[[nodiscard]] std::string cufile_json_text(const CufileJson& c);

}  // namespace sluice::check
