// Resolving S3 settings the way the AWS SDKs do (aws_config.hpp). Only static keys are read:
// profiles that get credentials by running something (credential_process, SSO, an assumed role)
// are refused with a message saying how to export keys, never silently sent unsigned.
#include "io/aws_config.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "sluice/error.hpp"

namespace sluice::remote {
// Named so that, in a unity batch, these helpers cannot meet another file's of the same name.
namespace aws_files {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

std::string trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return {};
  return std::string(s.substr(b, s.find_last_not_of(" \t\r") - b + 1));
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool is_true(const std::string& v) {
  const std::string l = lower(v);
  return l == "true" || l == "1" || l == "yes";
}

// "~/x" as $HOME/x, as the SDKs expand the files' variables.
std::string expand_home(std::string p) {
  if (p.starts_with("~/")) p = env("HOME") + p.substr(1);
  return p;
}

// A file's text; nullopt when it does not exist (the SDKs treat that as empty).
std::optional<std::string> read_text(const std::string& path) {
  errno = 0;
  std::ifstream in(path);
  if (!in) {
    if (errno == ENOENT || errno == ENOTDIR) return std::nullopt;
    throw_os_error(errno == 0 ? EIO : errno, {.op = "open", .path = path},
                   "cannot read the AWS shared file");
  }
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Profile {
  std::string file;
  const std::map<std::string, std::string>* keys = nullptr;  // nullptr: not in the file
  [[nodiscard]] std::string get(const std::string& k) const {
    if (keys == nullptr) return {};
    const auto it = keys->find(k);
    return it == keys->end() ? std::string() : it->second;
  }
  [[nodiscard]] std::string where(const std::string& profile) const {
    return fmt::format("profile {} in {}", profile, file);
  }
};

Profile find_section(const IniSections& ini, const std::string& file, const std::string& name) {
  const auto it = ini.find(name);
  return {file, it == ini.end() ? nullptr : &it->second};
}

// Credentials from one profile section: static keys, or a refusal for the sources Sluice does
// not run. False when the section has none of them.
bool keys_from(const Profile& p, const std::string& profile, AwsSettings& s) {
  if (!p.get("aws_access_key_id").empty() && !p.get("aws_secret_access_key").empty()) {
    s.key_id = p.get("aws_access_key_id");
    s.secret = p.get("aws_secret_access_key");
    s.session_token = p.get("aws_session_token");
    s.credentials = p.where(profile);
    return true;
  }
  for (const char* k : {"credential_process", "role_arn", "sso_session", "sso_start_url",
                        "web_identity_token_file"}) {
    if (p.get(k).empty()) continue;
    throw_usage_error(
        {.op = "open", .path = p.file},
        fmt::format(
            "{} gets its credentials from {}, which sluice does not run: export static keys "
            "instead (eval \"$(aws configure export-credentials --profile {} --format "
            "env)\")",
            p.where(profile), k, profile));
  }
  return false;
}

void resolve_credentials(const Profile& creds, const Profile& conf, AwsSettings& s) {
  if (is_true(env("AWS_NO_SIGN_REQUEST"))) {
    s.credentials = "none: anonymous, unsigned requests (AWS_NO_SIGN_REQUEST)";
    return;
  }
  if (!env("AWS_ACCESS_KEY_ID").empty() && !env("AWS_SECRET_ACCESS_KEY").empty()) {
    s.key_id = env("AWS_ACCESS_KEY_ID");
    s.secret = env("AWS_SECRET_ACCESS_KEY");
    s.session_token = env("AWS_SESSION_TOKEN");
    s.credentials = "environment (AWS_ACCESS_KEY_ID)";
    return;
  }
  if (keys_from(creds, s.profile, s) || keys_from(conf, s.profile, s)) return;
  s.credentials = fmt::format(
      "none: anonymous, unsigned requests (no keys in the environment or in profile {})",
      s.profile);
}

// The first non-empty of: variables in order, then config keys of the profile in order.
AwsSetting first_of(std::initializer_list<const char*> vars, const Profile& conf,
                    const std::string& profile, std::initializer_list<const char*> keys) {
  for (const char* v : vars) {
    if (!env(v).empty()) return {env(v), v};
  }
  for (const char* k : keys) {
    if (!conf.get(k).empty()) return {conf.get(k), conf.where(profile)};
  }
  return {};
}

// AWS_ENDPOINT_URL_S3 > AWS_ENDPOINT_URL > the profile's services section's s3 endpoint_url > the
// profile's s3 endpoint_url > its endpoint_url; AWS_IGNORE_CONFIGURED_ENDPOINT_URLS drops them all.
AwsSetting resolve_endpoint(const IniSections& config, const Profile& conf,
                            const std::string& profile) {
  if (is_true(env("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"))) return {};
  for (const char* v : {"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"}) {
    if (!env(v).empty()) return {env(v), v};
  }
  if (const std::string services = conf.get("services"); !services.empty()) {
    const Profile sv = find_section(config, conf.file, "services " + services);
    if (!sv.get("s3.endpoint_url").empty()) {
      return {sv.get("s3.endpoint_url"),
              fmt::format("services {} (of profile {}) in {}", services, profile, conf.file)};
    }
  }
  return first_of({}, conf, profile, {"s3.endpoint_url", "endpoint_url"});
}

}  // namespace
}  // namespace aws_files

IniSections parse_aws_ini(std::string_view text) {
  using aws_files::lower, aws_files::trim;
  IniSections out;
  std::map<std::string, std::string>* section = nullptr;
  std::string nested;  // the key of the block indented lines belong to
  std::istringstream in{std::string(text)};
  for (std::string raw; std::getline(in, raw);) {
    const std::string line = trim(raw);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[' && line.back() == ']') {
      section = &out[trim(std::string_view(line).substr(1, line.size() - 2))];
      nested.clear();
      continue;
    }
    const auto eq = line.find('=');
    if (section == nullptr || eq == std::string::npos) continue;  // as the SDKs, skip stray lines
    const std::string key = lower(trim(std::string_view(line).substr(0, eq)));
    const std::string value = trim(std::string_view(line).substr(eq + 1));
    const bool indented = raw[0] == ' ' || raw[0] == '\t';
    if (indented && !nested.empty()) {
      (*section)[nested + "." + key] = value;
    } else {
      nested = value.empty() ? key : std::string();
      if (!value.empty()) (*section)[key] = value;
    }
  }
  return out;
}

AwsSettings resolve_aws_settings() {
  using namespace aws_files;  // NOLINT(google-build-using-namespace): this file's helpers
  AwsSettings s;
  const bool named = !env("AWS_PROFILE").empty();
  s.profile = named ? env("AWS_PROFILE") : "default";
  std::string creds_path = env("AWS_SHARED_CREDENTIALS_FILE");
  std::string config_path = env("AWS_CONFIG_FILE");
  creds_path = expand_home(creds_path.empty() ? "~/.aws/credentials" : creds_path);
  config_path = expand_home(config_path.empty() ? "~/.aws/config" : config_path);
  const IniSections creds_ini = parse_aws_ini(read_text(creds_path).value_or(""));
  const IniSections config_ini = parse_aws_ini(read_text(config_path).value_or(""));
  const Profile creds = find_section(creds_ini, creds_path, s.profile);
  Profile conf = find_section(config_ini, config_path, "profile " + s.profile);
  if (conf.keys == nullptr && s.profile == "default")
    conf = find_section(config_ini, config_path, "default");
  if (named && creds.keys == nullptr && conf.keys == nullptr) {
    throw_usage_error({.op = "open", .path = config_path},
                      fmt::format("AWS_PROFILE names profile '{}', which is in neither {} nor {}",
                                  s.profile, creds_path, config_path));
  }
  resolve_credentials(creds, conf, s);
  s.region = first_of({"AWS_REGION", "AWS_DEFAULT_REGION"}, conf, s.profile, {"region"});
  if (s.region.value.empty()) s.region = {"us-east-1", "default"};
  s.endpoint = resolve_endpoint(config_ini, conf, s.profile);
  s.ca_bundle = first_of({"AWS_CA_BUNDLE"}, conf, s.profile, {"ca_bundle"});
  s.ca_bundle.value = expand_home(s.ca_bundle.value);
  s.addressing = first_of({"SLUICE_S3_ADDRESSING_STYLE"}, conf, s.profile, {"s3.addressing_style"});
  if (s.addressing.value.empty()) s.addressing = {"auto", "default"};
  s.addressing.value = lower(s.addressing.value);
  if (s.addressing.value != "auto" && s.addressing.value != "path" &&
      s.addressing.value != "virtual") {
    throw_usage_error(
        {.op = "open", .path = s.addressing.from},
        fmt::format("addressing style '{}' is not auto, path or virtual", s.addressing.value));
  }
  return s;
}

}  // namespace sluice::remote
