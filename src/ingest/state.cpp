// LoaderState as JSON: what `sluice ingest --save-state` writes and the Python state_dict holds.
// The fingerprint is written as 16 hex digits: a 64-bit hash does not survive JSON readers that
// hold numbers as doubles.
#include <charconv>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sluice/error.hpp"
#include "sluice/ingest.hpp"

namespace sluice {
namespace {

constexpr std::string_view state_format = "sluice-loader-state";
constexpr int state_version = 1;

[[noreturn]] void refuse(std::string_view why) {
  throw_usage_error({.op = "loader state"}, why);
}

std::uint64_t number(const nlohmann::json& j, const char* field) {
  const auto it = j.find(field);
  if (it == j.end()) refuse(fmt::format("field '{}' is missing", field));
  if (!it->is_number_unsigned()) refuse(fmt::format("field '{}' is not an unsigned integer", field));
  return it->get<std::uint64_t>();
}

std::uint64_t hex64(const nlohmann::json& j, const char* field) {
  const auto it = j.find(field);
  if (it == j.end()) refuse(fmt::format("field '{}' is missing", field));
  if (!it->is_string()) refuse(fmt::format("field '{}' is not a string of 16 hex digits", field));
  const auto& s = it->get_ref<const std::string&>();
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 16);
  if (s.size() != 16 || ec != std::errc() || end != s.data() + s.size()) {
    refuse(fmt::format("field '{}' is not 16 hex digits: '{}'", field, s));
  }
  return v;
}

}  // namespace

std::string LoaderState::to_json() const {
  const nlohmann::json j = {{"format", state_format},
                            {"version", state_version},
                            {"seed", seed},
                            {"shuffle", shuffle},
                            {"epoch", epoch},
                            {"consumed", consumed},
                            {"fingerprint", fmt::format("{:016x}", fingerprint)}};
  return j.dump();
}

LoaderState LoaderState::from_json(std::string_view json) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json);
  } catch (const nlohmann::json::exception& e) {
    refuse(fmt::format("not JSON: {}", e.what()));
  }
  if (!j.is_object()) refuse("not a JSON object");
  const auto format = j.find("format");
  if (format == j.end() || !format->is_string() || format->get<std::string>() != state_format) {
    refuse(fmt::format("field 'format' is not \"{}\"", state_format));
  }
  if (number(j, "version") != state_version) {
    refuse(fmt::format("field 'version' is {}; this build reads version {}", j["version"].dump(), state_version));
  }
  const auto shuffle = j.find("shuffle");
  if (shuffle == j.end() || !shuffle->is_boolean()) refuse("field 'shuffle' is missing or not true/false");
  LoaderState s;
  s.seed = number(j, "seed");
  s.shuffle = shuffle->get<bool>();
  s.epoch = number(j, "epoch");
  s.consumed = number(j, "consumed");
  s.fingerprint = hex64(j, "fingerprint");
  return s;
}

}  // namespace sluice
