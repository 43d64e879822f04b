// What `sluice check URL` says about a remote object: where its requests would go and how they
// would be signed (endpoint, region, addressing, the credentials' source, the CA bundle), each
// with where the setting came from, and the answer to one ranged GET of its first byte (status,
// S3's error code, TLS verification, latency). No secret is ever part of it. docs/remote.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "sluice/export.hpp"

namespace sluice {

struct RemoteCheck {
  std::string url;                          ///< as given, its query string shown as "?..."
  std::string request_url;                  ///< where the GETs go, its query string shown as "?..."
  std::string endpoint, endpoint_from;      ///< "scheme://host[:port]"; from where (S3)
  std::string region, region_from;          ///< S3 only
  std::string addressing, addressing_from;  ///< S3: "path-style" / "virtual-hosted", and why
  /// Where the keys come from ("environment (...)", "profile NAME in FILE", "none: anonymous,
  /// unsigned requests (...)"); for http(s):// URLs "none: the URL as given".
  std::string credentials;
  std::string access_key;      ///< the key id masked but its last 4 characters; empty unsigned
  bool session_token = false;  ///< a session token is sent
  bool tls = false;            ///< an https endpoint
  std::string ca_bundle, ca_bundle_from;  ///< the CA file TLS verifies against, and from where

  // The probe: one GET with Range: bytes=0-0.
  bool probed = false;
  long http_status = 0;             ///< 0: no response (the transport failed)
  std::string s3_code, s3_message;  ///< S3's error document, when the body is one
  std::string tls_verify;           ///< "verified", "failed: ...", "not used (http)", ...
  double connect_ms = 0, tls_ms = 0, first_byte_ms = 0, total_ms = 0;  ///< from the start
  std::optional<std::uint64_t> object_size;  ///< from a 206's Content-Range
  std::string error;  ///< empty when the object answered 206 (or 200); else what went wrong
};

/// Resolves `url` as a read would and, with `probe`, sends one GET of its first byte (no retry,
/// a 30 s limit). Throws a usage Error only for a URL or configuration that cannot be resolved;
/// a failed request is reported in `error`, never thrown.
[[nodiscard]] SLUICE_API RemoteCheck check_remote(const std::string& url, bool probe = true);

}  // namespace sluice
