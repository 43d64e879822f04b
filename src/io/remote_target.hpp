// Where a remote URL's requests go and how they are signed: an http(s):// URL as it is, an
// s3://bucket/key URL resolved the way the AWS SDKs do (docs/remote.md, "S3"): endpoint, region,
// keys and CA bundle from the environment, then the profile's shared files (io/aws_config.hpp);
// path-style addressing for an endpoint that is an IP address or localhost (or a bucket with a
// dot), virtual-hosted otherwise, unless an addressing style is set; SigV4 with the keys found,
// or unsigned requests when there are none.
#pragma once

#include <optional>
#include <string>
#include <string_view>

struct curl_slist;

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
  std::string credentials;  ///< where the keys came from ("environment (...)", "none: ...")
  std::string ca_bundle;    ///< AWS_CA_BUNDLE or the profile's ca_bundle (empty: libcurl's)
  // Where each S3 setting came from (a variable, "profile NAME in FILE", "default"), and why the
  // addressing is what it is: what `sluice check s3://...` prints.
  std::string region;  ///< S3's region (also when unsigned)
  std::string region_from, endpoint_from, addressing_from, ca_bundle_from;
};

/// Throws a usage Error (op "open", path the URL) for a URL it cannot serve.
[[nodiscard]] RemoteTarget resolve_remote(const std::string& url);

/// Signs the request of `easy` (a CURL*) with SigV4 for S3 in the key's region (libcurl's
/// CURLOPT_AWS_SIGV4, which copies the strings) and returns `headers` with what S3 also needs:
/// x-amz-content-sha256 (Debian 12's libcurl 7.88 signs it but does not send it; 8.0.0 does)
/// and the session token. The one signer of the reader, the writer and `sluice check`.
[[nodiscard]] curl_slist* sign_sigv4(void* easy, const SigV4& key, curl_slist* headers);

/// RFC 3986 percent-encoding of an S3 key: every byte but A-Z a-z 0-9 - . _ ~ and '/'.
[[nodiscard]] std::string encode_key(std::string_view key);

}  // namespace sluice::remote
