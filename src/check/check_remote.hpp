// `sluice check URL`: the remote part of the report (sluice/remote_check.hpp's RemoteCheck) as
// JSON and as text; check.cpp calls these for each PATH that is a URL.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "sluice/remote_check.hpp"

namespace sluice::check {

/// check_remote(url), with an unresolvable URL or configuration reported in `error`.
[[nodiscard]] RemoteCheck inspect_remote(const std::string& url);
[[nodiscard]] nlohmann::ordered_json remote_json(const RemoteCheck& c);
/// "Remote URL" and its indented lines, each ending in '\n'.
[[nodiscard]] std::string remote_text(const RemoteCheck& c);

}  // namespace sluice::check
