// Where a remote URL's requests go and how they are signed: an http(s):// URL as it is, an
// s3://bucket/key URL resolved the way the AWS SDKs do (docs/remote.md, "S3"): the endpoint from
// AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL (else AWS's regional one), the region from AWS_REGION /
// AWS_DEFAULT_REGION (else us-east-1), path-style addressing for an endpoint that is an IP
// address or localhost (or a bucket with a dot), virtual-hosted otherwise, and SigV4 with the
// keys of AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (/ AWS_SESSION_TOKEN), or unsigned requests
// when those are not set.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace sluice::remote {

struct SigV4 {
  std::string region;
  std::string key_id, secret, session_token;  // never printed
};

struct RemoteTarget {
  std::string request_url;  ///< the http(s):// URL the GETs go to
  std::string endpoint;     ///< "scheme://host[:port]" of request_url: the stats' key
  std::optional<SigV4> sign;
  std::string addressing;   ///< "path-style", "virtual-hosted" or "" (not S3)
  std::string credentials;  ///< where the keys came from ("environment", "none: unsigned")
  std::string ca_bundle;    ///< AWS_CA_BUNDLE for s3:// (empty: libcurl's default)
};

/// Throws a usage Error (op "open", path the URL) for a URL it cannot serve.
[[nodiscard]] RemoteTarget resolve_remote(const std::string& url);

/// RFC 3986 percent-encoding of an S3 key: every byte but A-Z a-z 0-9 - . _ ~ and '/'.
[[nodiscard]] std::string encode_key(std::string_view key);

}  // namespace sluice::remote
