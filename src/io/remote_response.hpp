// What a remote reader reads out of an HTTP response, apart from the body: the Content-Range, the
// ETag, an S3 error document, and whether a failure is worth another try. Pure functions, tested
// on their own (tests/remote/remote_response_test.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>

namespace sluice::remote {

/// "bytes FIRST-LAST/TOTAL", "bytes FIRST-LAST/*" (total unknown) or "bytes */TOTAL" (a 416's).
struct ContentRange {
  bool satisfied = true;              ///< false for "bytes */TOTAL"
  std::uint64_t first = 0, last = 0;  ///< inclusive, when satisfied
  std::optional<std::uint64_t> total;
};
[[nodiscard]] std::optional<ContentRange> parse_content_range(std::string_view value) noexcept;

/// One header line ("Name: value\r\n") as a name and a trimmed value; nullopt for a status line
/// or the blank line that ends the headers.
struct HeaderLine {
  std::string_view name, value;
};
[[nodiscard]] std::optional<HeaderLine> parse_header_line(std::string_view line) noexcept;
[[nodiscard]] bool header_is(std::string_view name, std::string_view wanted) noexcept;

/// S3's error document: <Error><Code>NoSuchKey</Code><Message>...</Message></Error>. Empty
/// fields when the body is not one (nginx's HTML page, for one).
struct S3Error {
  std::string code, message;
};
[[nodiscard]] S3Error parse_s3_error(std::string_view body);

/// A retryable HTTP status (429, 5xx) or libcurl transport error (reset, timeout, stall, partial
/// body, connect, nothing received): the cause as the stats and the reason name it ("503
/// SlowDown", "HTTP 500", "reset", "timeout"); nullopt when another try cannot help.
[[nodiscard]] std::optional<std::string> retry_cause_of_status(long status, const S3Error& s3);
[[nodiscard]] std::optional<std::string> retry_cause_of_curl(int curl_code);

/// Whether a retry cause is the server throttling (429, 503): the requests in flight are cut.
[[nodiscard]] bool is_throttle_cause(std::string_view cause) noexcept;

/// The wait before the next try of a request tried `attempts` times so far: full jitter under
/// base_ms doubled per try (at most cap_ms), and never less than a server's Retry-After
/// (`retry_after_s` seconds, 0 when none; at most 20 s). The one retry policy of every remote
/// request, GETs and uploads alike.
[[nodiscard]] std::uint64_t backoff_ms(unsigned attempts, unsigned base_ms, unsigned cap_ms,
                                       long long retry_after_s, std::mt19937_64& rng);

/// The errno a failed GET stands for (404 ENOENT, 401/403 EACCES, 412 ESTALE, other EIO).
[[nodiscard]] int errno_of_status(long status) noexcept;

/// "scheme://host[:port]" of a URL; empty when the URL has no scheme.
[[nodiscard]] std::string endpoint_of(std::string_view url);

}  // namespace sluice::remote
