// The remote part of `sluice check` (check_remote.hpp): formatting only; the resolution and the
// request are libsluice's check_remote().
#include "check/check_remote.hpp"

#include <fmt/format.h>

#include "sluice/error.hpp"

namespace sluice::check {

RemoteCheck inspect_remote(const std::string& url) {
  try {
    return check_remote(url);
  } catch (const Error& e) {
    RemoteCheck c;
    c.url = url.substr(0, url.find('?')) + (url.find('?') == std::string::npos ? "" : "?...");
    c.error = e.what();
    return c;
  }
}

nlohmann::ordered_json remote_json(const RemoteCheck& c) {
  using json = nlohmann::ordered_json;
  json j = {{"url", c.url},
            {"request_url", c.request_url},
            {"endpoint", {{"value", c.endpoint}, {"from", c.endpoint_from}}},
            {"region", {{"value", c.region}, {"from", c.region_from}}},
            {"addressing", {{"value", c.addressing}, {"from", c.addressing_from}}},
            {"credentials", c.credentials},
            {"access_key", c.access_key},
            {"session_token", c.session_token},
            {"tls", c.tls},
            {"ca_bundle", {{"value", c.ca_bundle}, {"from", c.ca_bundle_from}}},
            {"error", c.error}};
  if (c.probed) {
    j["request"] = {{"range", "bytes=0-0"},
                    {"http_status", c.http_status},
                    {"s3_code", c.s3_code},
                    {"s3_message", c.s3_message},
                    {"tls_verify", c.tls_verify},
                    {"connect_ms", c.connect_ms},
                    {"tls_ms", c.tls_ms},
                    {"first_byte_ms", c.first_byte_ms},
                    {"total_ms", c.total_ms},
                    {"object_size", c.object_size ? json(*c.object_size) : json(nullptr)}};
  }
  return j;
}

namespace {

std::string from(const std::string& where) {
  return where.empty() ? std::string() : fmt::format(" ({})", where);
}

std::string request_line(const RemoteCheck& c) {
  if (c.http_status == 0) return fmt::format("  request: GET bytes=0-0 failed: {}", c.error);
  std::string s = fmt::format("  request: GET bytes=0-0 -> HTTP {}", c.http_status);
  if (!c.s3_code.empty()) s += " " + c.s3_code + (c.s3_message.empty() ? "" : ": " + c.s3_message);
  if (c.http_status == 200) s += " (the server ignored Range: reads refuse such answers)";
  s += fmt::format(" in {:.1f} ms (connect {:.1f} ms{}, first byte {:.1f} ms)", c.total_ms,
                   c.connect_ms, c.tls ? fmt::format(", TLS done at {:.1f} ms", c.tls_ms) : "",
                   c.first_byte_ms);
  if (c.object_size) s += fmt::format(", object {} bytes", *c.object_size);
  return s;
}

}  // namespace

std::string remote_text(const RemoteCheck& c) {
  std::string s;
  auto line = [&](const std::string& l) { s += l + "\n"; };
  line(fmt::format("Remote {}", c.url));
  if (c.request_url.empty()) {  // not resolved
    line(fmt::format("  error: {}", c.error));
    return s;
  }
  line(fmt::format("  endpoint: {}{}", c.endpoint, from(c.endpoint_from)));
  if (!c.region.empty()) line(fmt::format("  region: {}{}", c.region, from(c.region_from)));
  if (!c.addressing.empty())
    line(fmt::format("  addressing: {}{}", c.addressing, from(c.addressing_from)));
  line(fmt::format("  requests go to: {}", c.request_url));
  std::string cred = fmt::format("  credentials: {}", c.credentials);
  if (!c.access_key.empty()) {
    cred += fmt::format(", access key {}, session token {}", c.access_key,
                        c.session_token ? "sent" : "none");
  }
  line(cred);
  if (c.tls) {
    line(fmt::format("  TLS: CA bundle {}{}", c.ca_bundle.empty() ? "(libcurl's)" : c.ca_bundle,
                     from(c.ca_bundle_from)));
    if (c.probed) line(fmt::format("  TLS verification: {}", c.tls_verify));
  } else {
    line("  TLS: none (http)");
  }
  if (c.probed) line(request_line(c));
  if (!c.error.empty() && c.http_status != 0) line(fmt::format("  error: {}", c.error));
  return s;
}

}  // namespace sluice::check
