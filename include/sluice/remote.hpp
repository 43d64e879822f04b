// Remote sources: byte ranges of an object behind http:// or https:// (and, later, s3://) read
// into host memory by many ranged GETs in flight over libcurl's multi interface. docs/remote.md
// has the URLs, settings, retries and errors.
//
// The reader is the remote counterpart of File + read(): read() fills the caller's buffer
// straight from the network (no staging copy), stops short at the end of the object as a file
// read does, and returns a TransferResult whose reason says how the bytes came (parts, requests
// in flight, connections, retries and their causes). The object's size and ETag come from the
// first ranged GET's Content-Range (no HEAD); every later GET sends If-Match with that ETag, so an
// object replaced during the read is an Error, never a mix of two versions.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "sluice/export.hpp"
#include "sluice/histogram.hpp"
#include "sluice/transfer_result.hpp"

namespace sluice {

/// Whether `path` names a remote object (http://, https:// or s3://) rather than a local file.
[[nodiscard]] SLUICE_API bool is_remote_url(std::string_view path) noexcept;

/// How a remote reader splits, paces and retries its requests. Defaults are docs/remote.md's.
struct RemoteOptions {
  std::uint64_t part_size = 8ULL << 20;  ///< bytes per ranged GET
  unsigned in_flight = 16;               ///< ranged GETs in flight at most (1..128)
  unsigned max_attempts = 5;             ///< tries per part, the first included
  unsigned backoff_base_ms = 100;        ///< first retry waits up to this (full jitter), doubling
  unsigned backoff_cap_ms = 5000;        ///< no retry waits longer
  unsigned connect_timeout_ms = 10000;   ///< TCP (and TLS) connect
  /// A transfer slower than low_speed_bytes per second for low_speed_seconds is a stall: the
  /// request is cut and retried (from its last good byte). No whole-transfer timeout.
  unsigned low_speed_bytes = 1024;
  unsigned low_speed_seconds = 15;

  /// The defaults, overridden by SLUICE_REMOTE_PART_SIZE (size units allowed),
  /// SLUICE_REMOTE_IN_FLIGHT (else in_flight_for(SLUICE_REMOTE_BANDWIDTH) when that is set) and
  /// SLUICE_REMOTE_MAX_ATTEMPTS. Throws a usage Error on a bad value.
  [[nodiscard]] SLUICE_API static RemoteOptions from_environment();
  /// Requests in flight for a target bandwidth: one per 85 MB/s (what one S3 connection gives),
  /// rounded up, clamped to 8..128.
  [[nodiscard]] SLUICE_API static unsigned in_flight_for(std::uint64_t bytes_per_second) noexcept;
  /// Throws a usage Error naming the setting when a value is out of range.
  SLUICE_API void validate() const;
};

/// What the requests to one endpoint (scheme://host:port) cost: the figures of "why was it slow".
struct RemoteStats {
  std::uint64_t requests = 0;     ///< GETs sent, retries included
  std::uint64_t bytes = 0;        ///< body bytes accepted into the destination
  std::uint64_t connections = 0;  ///< new connections libcurl opened (the rest were reused)
  std::map<std::string, std::uint64_t> retries;  ///< retries by cause ("503 SlowDown", "reset")
  /// The fewest requests in flight that throttling (429, 503) left (0: never throttled).
  unsigned lowest_in_flight = 0;
  LatencyHistogram latency_us;  ///< per request, from sent to last byte, microseconds

  [[nodiscard]] SLUICE_API std::uint64_t retry_count() const noexcept;
  SLUICE_API void merge(const RemoteStats& other);
};

/// The process's remote statistics so far, by endpoint ("http://127.0.0.1:8080").
[[nodiscard]] SLUICE_API std::map<std::string, RemoteStats> remote_endpoint_stats();

/// One remote object, read by ranges. Not thread-safe: one read() at a time (it drives the
/// requests on the calling thread, over a connection cache kept warm between calls).
class SLUICE_API RemoteReader {
 public:
  /// Checks the URL only (no request is sent). Throws a usage Error for a URL it cannot read.
  explicit RemoteReader(std::string url, RemoteOptions options = RemoteOptions::from_environment());
  ~RemoteReader();
  RemoteReader(RemoteReader&&) noexcept;
  RemoteReader& operator=(RemoteReader&&) noexcept;
  RemoteReader(const RemoteReader&) = delete;
  RemoteReader& operator=(const RemoteReader&) = delete;

  /// Reads [offset, offset + size) into host memory at `dst`; fewer bytes only at the end of the
  /// object (0 at or past it). Throws sluice::Error (op "GET", path the URL, the range) on an
  /// HTTP error, a response that does not match the request, an object replaced during the read,
  /// or retries exhausted; the message carries the HTTP status, S3's error code and message.
  TransferResult read(void* dst, std::uint64_t size, std::uint64_t offset);

  /// The object's size once a response has said it (after the first read()).
  [[nodiscard]] std::optional<std::uint64_t> size() const noexcept;
  /// The URL as given, its query string shown as "?..." (a presigned URL's signature is a
  /// credential): the path of this reader's errors.
  [[nodiscard]] const std::string& url() const noexcept;
  /// "http://host:port": the key of remote_endpoint_stats().
  [[nodiscard]] const std::string& endpoint() const noexcept;
  [[nodiscard]] const RemoteOptions& options() const noexcept;
  /// This reader's requests so far.
  [[nodiscard]] const RemoteStats& stats() const noexcept;
  /// The reason line of all this reader's requests so far ("remote: 32 ranged GETs of 8 MiB, 16
  /// in flight over 16 new connections, 3 retried after 503 SlowDown").
  [[nodiscard]] std::string reason() const;

  struct State;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace sluice
