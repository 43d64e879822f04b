#include "check/cufile_json.hpp"

#include <fmt/format.h>

#include "sluice/config.hpp"
#include "sluice/internal/cufile_config.hpp"

namespace sluice::check {

CufileJson inspect_cufile_json() {
  const internal::CufileConfig c =
      internal::read_cufile_config(*config(), internal::process_environment());
  CufileJson out{c.path, c.from_env ? "CUFILE_ENV_PATH_JSON" : "default", c.read, c.error, c.status,
                 {}};
  for (const internal::CufileEntry& e : c.entries) {
    out.keys.push_back({e.name, e.from_env, e.value, std::string(to_string(e.effect)), e.detail});
  }
  return out;
}

nlohmann::ordered_json cufile_json_json(const CufileJson& c) {
  nlohmann::ordered_json keys = nlohmann::ordered_json::object();
  for (const CufileJsonKey& k : c.keys) {
    keys[k.name] = {{"value", k.value},
                    {"from", k.from_env ? "environment" : "file"},
                    {"effect", k.effect},
                    {"detail", k.detail}};
  }
  return {{"path", c.path},   {"lookup", c.lookup}, {"read", c.read},
          {"error", c.error}, {"status", c.status}, {"keys", keys}};
}

std::string cufile_json_text(const CufileJson& c) {
  std::string s = "cuFile configuration (libsluice_cufile)\n";
  s += fmt::format("  file {} ({}): {}\n", c.path, c.lookup, c.status);
  for (const CufileJsonKey& k : c.keys) {
    s += fmt::format("  {}{}{}: {}\n", k.name, k.from_env ? "=" : " = ", k.value, k.detail);
  }
  return s;
}

}  // namespace sluice::check
