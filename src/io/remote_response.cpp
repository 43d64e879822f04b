// Parsing of HTTP response parts for the remote reader (remote_response.hpp).
#include "io/remote_response.hpp"

#include <curl/curl.h>

#include <algorithm>
#include <cerrno>
#include <charconv>

namespace sluice::remote {
namespace {

std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n')) {
    s.remove_suffix(1);
  }
  return s;
}

// The whole of `s` as a decimal number; nullopt for anything else (signs, spaces, overflow).
std::optional<std::uint64_t> to_u64(std::string_view s) noexcept {
  std::uint64_t v = 0;
  if (s.empty()) return std::nullopt;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
  return v;
}

std::string xml_element(std::string_view body, std::string_view name) {
  const std::string open = "<" + std::string(name) + ">";
  const std::string close = "</" + std::string(name) + ">";
  const auto a = body.find(open);
  if (a == std::string_view::npos) return {};
  const auto b = body.find(close, a + open.size());
  if (b == std::string_view::npos) return {};
  return std::string(trim(body.substr(a + open.size(), b - a - open.size())));
}

}  // namespace

std::optional<ContentRange> parse_content_range(std::string_view value) noexcept {
  value = trim(value);
  if (!value.starts_with("bytes ")) return std::nullopt;
  value.remove_prefix(6);
  const auto slash = value.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  ContentRange r;
  const std::string_view range = value.substr(0, slash), total = value.substr(slash + 1);
  if (total != "*") {
    r.total = to_u64(total);
    if (!r.total) return std::nullopt;
  }
  if (range == "*") {
    if (!r.total) return std::nullopt;
    r.satisfied = false;
    return r;
  }
  const auto dash = range.find('-');
  if (dash == std::string_view::npos) return std::nullopt;
  const auto first = to_u64(range.substr(0, dash)), last = to_u64(range.substr(dash + 1));
  if (!first || !last || *last < *first || (r.total && *last >= *r.total)) return std::nullopt;
  r.first = *first;
  r.last = *last;
  return r;
}

std::optional<HeaderLine> parse_header_line(std::string_view line) noexcept {
  const auto colon = line.find(':');
  if (colon == std::string_view::npos || colon == 0 || line.starts_with("HTTP/"))
    return std::nullopt;
  return HeaderLine{line.substr(0, colon), trim(line.substr(colon + 1))};
}

bool header_is(std::string_view name, std::string_view wanted) noexcept {
  if (name.size() != wanted.size()) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const auto lower = [](char c) {
      return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
    };
    if (lower(name[i]) != lower(wanted[i])) return false;
  }
  return true;
}

S3Error parse_s3_error(std::string_view body) {
  return {xml_element(body, "Code"), xml_element(body, "Message")};
}

std::optional<std::string> retry_cause_of_status(long status, const S3Error& s3) {
  if (status != 429 && (status < 500 || status > 599)) return std::nullopt;
  if (!s3.code.empty()) return std::to_string(status) + " " + s3.code;
  return "HTTP " + std::to_string(status);
}

std::optional<std::string> retry_cause_of_curl(int curl_code) {
  switch (static_cast<CURLcode>(curl_code)) {
    case CURLE_OPERATION_TIMEDOUT:
      return "timeout or stall";
    case CURLE_COULDNT_CONNECT:
      return "connect";
    case CURLE_SEND_ERROR:
      return "send";
    case CURLE_RECV_ERROR:
      return "reset";
    case CURLE_PARTIAL_FILE:
      return "short body";
    case CURLE_GOT_NOTHING:
      return "empty reply";
    default:
      return std::nullopt;
  }
}

bool is_throttle_cause(std::string_view cause) noexcept {
  return cause.starts_with("429") || cause.starts_with("503") || cause == "HTTP 429" ||
         cause == "HTTP 503";
}

std::uint64_t backoff_ms(unsigned attempts, unsigned base_ms, unsigned cap_ms,
                         long long retry_after_s, std::mt19937_64& rng) {
  constexpr std::uint64_t max_retry_after_ms = 20000;  // a longer Retry-After waits this long
  const std::uint64_t ceiling = std::min<std::uint64_t>(
      cap_ms, static_cast<std::uint64_t>(base_ms) << std::min(std::max(attempts, 1U) - 1, 20U));
  std::uint64_t wait = std::uniform_int_distribution<std::uint64_t>(0, ceiling)(rng);
  if (retry_after_s > 0) {
    wait = std::max<std::uint64_t>(
        wait, std::min<std::uint64_t>(static_cast<std::uint64_t>(retry_after_s) * 1000,
                                      max_retry_after_ms));
  }
  return wait;
}

int errno_of_status(long status) noexcept {
  switch (status) {
    case 404:
      return ENOENT;
    case 401:
    case 403:
      return EACCES;
    case 412:
      return ESTALE;
    case 416:
      return EINVAL;
    default:
      return EIO;
  }
}

std::string endpoint_of(std::string_view url) {
  const auto scheme = url.find("://");
  if (scheme == std::string_view::npos) return {};
  const auto end = std::min(url.size(), url.find_first_of("/?#", scheme + 3));
  // Never user:password@ (the stats and the reasons print the endpoint).
  const auto at = url.substr(0, end).rfind('@');
  const auto host = at == std::string_view::npos || at < scheme ? scheme + 3 : at + 1;
  return std::string(url.substr(0, scheme + 3)) + std::string(url.substr(host, end - host));
}

}  // namespace sluice::remote
