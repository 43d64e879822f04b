// Resolving remote URLs to requests (remote_target.hpp).
#include "io/remote_target.hpp"

#include <arpa/inet.h>

#include <cstdlib>

#include <curl/curl.h>

#include <fmt/format.h>

#include "io/aws_config.hpp"
#include "io/remote_response.hpp"
#include "sluice/error.hpp"

namespace sluice::remote {
namespace {

// The host of "scheme://host[:port][/...]", without brackets or port.
std::string host_of(std::string_view endpoint) {
  std::string_view h = endpoint.substr(endpoint.find("://") + 3);
  h = h.substr(0, h.find('/'));
  if (h.starts_with('[')) return std::string(h.substr(1, h.find(']') - 1));
  return std::string(h.substr(0, h.rfind(':') == std::string_view::npos ? h.size() : h.rfind(':')));
}

bool is_ip_or_localhost(const std::string& host) {
  unsigned char buf[16];
  return host == "localhost" || inet_pton(AF_INET, host.c_str(), buf) == 1 ||
         inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

// Path-style unless the style says virtual, or says auto and the endpoint is a named host and
// the bucket a valid TLS host label (no dot).
bool use_path_style(const AwsSetting& style, const std::string& host, const std::string& bucket,
                    std::string& why) {
  if (style.value != "auto") {
    why = fmt::format("addressing_style {} ({})", style.value, style.from);
    return style.value == "path";
  }
  if (is_ip_or_localhost(host)) {
    why = "auto: the endpoint's host is an IP address or localhost";
    return true;
  }
  if (bucket.find('.') != std::string::npos) {
    why = "auto: the bucket's name has a dot";
    return true;
  }
  why = "auto: a named endpoint";
  return false;
}

RemoteTarget resolve_s3(const std::string& url) {
  const std::string_view rest = std::string_view(url).substr(5);
  const auto slash = rest.find('/');
  const std::string bucket(rest.substr(0, slash));
  const std::string key(slash == std::string_view::npos ? "" : rest.substr(slash + 1));
  if (bucket.empty() || key.empty())
    throw_usage_error({.op = "open", .path = url}, "an S3 URL is s3://BUCKET/KEY");
  const AwsSettings cfg = resolve_aws_settings();
  std::string endpoint = cfg.endpoint.value;
  RemoteTarget t;
  t.endpoint_from = cfg.endpoint.from;
  if (endpoint.empty()) {
    endpoint = fmt::format("https://s3.{}.amazonaws.com", cfg.region.value);
    t.endpoint_from = "AWS's endpoint for the region";
  }
  while (endpoint.ends_with('/')) endpoint.pop_back();
  if (!endpoint.starts_with("http://") && !endpoint.starts_with("https://")) {
    throw_usage_error({.op = "open", .path = url},
                      fmt::format("endpoint '{}' ({}) is not an http(s):// URL", endpoint,
                                  t.endpoint_from));
  }
  t.ca_bundle = cfg.ca_bundle.value;
  t.ca_bundle_from = cfg.ca_bundle.from;
  t.region = cfg.region.value;
  t.region_from = cfg.region.from;
  const bool path_style = use_path_style(cfg.addressing, host_of(endpoint), bucket,
                                         t.addressing_from);
  t.addressing = path_style ? "path-style" : "virtual-hosted";
  if (path_style) {
    t.request_url = fmt::format("{}/{}/{}", endpoint, bucket, encode_key(key));
  } else {
    const auto scheme_end = endpoint.find("://") + 3;
    t.request_url = fmt::format("{}{}.{}/{}", endpoint.substr(0, scheme_end), bucket,
                                endpoint.substr(scheme_end), encode_key(key));
  }
  t.credentials = cfg.credentials;
  if (!cfg.key_id.empty()) t.sign = SigV4{cfg.region.value, cfg.key_id, cfg.secret, cfg.session_token};
  return t;
}

}  // namespace

std::string encode_key(std::string_view key) {
  std::string out;
  for (const char c : key) {
    const auto u = static_cast<unsigned char>(c);
    const bool plain = (u >= 'A' && u <= 'Z') || (u >= 'a' && u <= 'z') || (u >= '0' && u <= '9') ||
                       c == '-' || c == '.' || c == '_' || c == '~' || c == '/';
    out += plain ? std::string(1, c) : fmt::format("%{:02X}", u);
  }
  return out;
}

RemoteTarget resolve_remote(const std::string& url) {
  RemoteTarget t;
  if (url.starts_with("s3://")) {
    t = resolve_s3(url);
  } else if (url.starts_with("http://") || url.starts_with("https://")) {
    t.request_url = url;
  } else {
    throw_usage_error({.op = "open", .path = url}, "not an http://, https:// or s3:// URL");
  }
  t.endpoint = endpoint_of(t.request_url);
  return t;
}

curl_slist* sign_sigv4(void* easy, const SigV4& key, curl_slist* headers) {
  const std::string provider = "aws:amz:" + key.region + ":s3";
  curl_easy_setopt(easy, CURLOPT_AWS_SIGV4, provider.c_str());
  curl_easy_setopt(easy, CURLOPT_USERNAME, key.key_id.c_str());
  curl_easy_setopt(easy, CURLOPT_PASSWORD, key.secret.c_str());
  headers = curl_slist_append(headers, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
  if (!key.session_token.empty()) {
    headers = curl_slist_append(headers, ("x-amz-security-token: " + key.session_token).c_str());
  }
  return headers;
}

}  // namespace sluice::remote
