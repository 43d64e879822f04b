// Writing an object to S3: RemoteWriter uploads the bytes appended to it as an S3 multipart
// upload (CreateMultipartUpload, UploadPart requests in flight over libcurl's multi interface,
// CompleteMultipartUpload), or as one PUT when the whole object fits in one part. The object
// appears under its key only when commit() completes, whole; on any failure, on abort() and on
// destruction without commit() the upload is aborted (AbortMultipartUpload), so Sluice leaves
// neither a partial object nor parts behind. A process killed outright (SIGKILL) cannot abort:
// its upload stays in progress, invisible, until a bucket lifecycle rule
// (AbortIncompleteMultipartUpload) removes it (docs/remote.md, "Writing to S3").
//
// Only s3:// URLs are written: S3 is what defines the multipart upload that makes a write atomic;
// a plain https:// PUT is refused. Requests are signed and retried as the reader's are
// (RemoteOptions: part size, requests in flight, tries, backoff).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "sluice/export.hpp"
#include "sluice/remote.hpp"
#include "sluice/transfer_result.hpp"
#include "sluice/units.hpp"

namespace sluice {

/// S3's limits on a multipart upload: parts of at least 5 MiB (but the last), 10,000 parts.
inline constexpr std::uint64_t s3_min_part_size = 5 * MiB;
inline constexpr std::uint64_t s3_max_part_size = 5 * GiB;
inline constexpr std::uint64_t s3_max_parts = 10000;

/// One object written to S3. Not thread-safe: the requests run on the thread that calls
/// append() and commit(). Memory: at most in_flight + 1 buffers of one part each.
class SLUICE_API RemoteWriter {
 public:
  /// Checks the URL and the options; sends no request. Parts are options.part_size, raised to
  /// S3's 5 MiB minimum, and raised further when `size_hint` (the object's size, when known)
  /// would take more than 10,000 of them. Throws a usage Error for a URL that is not s3://.
  explicit RemoteWriter(std::string url, RemoteOptions options = RemoteOptions::from_environment(),
                        std::optional<std::uint64_t> size_hint = std::nullopt);
  /// Aborts the upload unless it was committed (never throws).
  ~RemoteWriter();
  RemoteWriter(RemoteWriter&&) noexcept;
  RemoteWriter& operator=(RemoteWriter&&) noexcept;
  RemoteWriter(const RemoteWriter&) = delete;
  RemoteWriter& operator=(const RemoteWriter&) = delete;

  /// Appends `size` bytes of host memory at the end of the object. The bytes are copied into a
  /// part buffer; a full one goes out as an UploadPart at once (the first after
  /// CreateMultipartUpload). Blocks only while every buffer is in flight. On any error the
  /// upload is aborted and a sluice::Error thrown (op the request, path the URL, the part's
  /// range; the message carries the HTTP status and S3's code and message).
  void append(const void* data, std::uint64_t size);

  /// Sends the last part, waits for every part and completes the upload (or sends the one PUT):
  /// the object is visible from now on, whole. Throws as append() does, after aborting.
  TransferResult commit();

  /// Moves the requests in flight along for up to `wait_ms` milliseconds (less when none is
  /// left): for a caller that waits for its next bytes (a pipe), so that the parts already
  /// appended keep going out meanwhile. Returns whether requests are still in flight (false:
  /// nothing to drive, it returned at once). Throws as append() does, after aborting.
  bool drive(unsigned wait_ms);

  /// Stops every request in flight and aborts the upload, unless committed. Never throws; a
  /// failed AbortMultipartUpload is kept in abort_error(). Idempotent.
  void abort() noexcept;

  /// A test polled about ten times a second while requests run (a signal handler's flag): when
  /// it says true, the upload is aborted and append()/commit() throw an Error (ECANCELED).
  void set_cancel(std::function<bool()> stop);

  [[nodiscard]] std::uint64_t bytes_appended() const noexcept;
  /// Bytes of the parts the server has acknowledged so far.
  [[nodiscard]] std::uint64_t bytes_uploaded() const noexcept;
  /// The part size in use (after the 5 MiB minimum and the size hint).
  [[nodiscard]] std::uint64_t part_size() const noexcept;
  [[nodiscard]] bool committed() const noexcept;
  /// Why the last abort could not be confirmed by the server ("" when it was, or when no
  /// multipart upload had begun).
  [[nodiscard]] const std::string& abort_error() const noexcept;
  [[nodiscard]] const std::string& url() const noexcept;
  [[nodiscard]] const std::string& endpoint() const noexcept;
  [[nodiscard]] const RemoteStats& stats() const noexcept;
  /// "remote: multipart upload of 3 parts of 8 MiB, 16 in flight over 3 new connections".
  [[nodiscard]] std::string reason() const;

  struct State;

 private:
  friend SLUICE_API void remote_delete(const std::string& url, const RemoteOptions& options);
  std::unique_ptr<State> state_;
};

/// Deletes the object s3://BUCKET/KEY (a key that is not there is no error: S3 answers 204
/// either way). Throws an Error as the writer does.
SLUICE_API void remote_delete(const std::string& url,
                              const RemoteOptions& options = RemoteOptions::from_environment());

/// Joins an s3:// prefix and a name with exactly one '/' ("s3://b/ckpt" + "model.safetensors").
[[nodiscard]] SLUICE_API std::string remote_join(const std::string& prefix,
                                                 const std::string& name);

}  // namespace sluice
