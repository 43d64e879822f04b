// One error type for the whole library: what was being done, to which file and range, and the
// code that came back (an errno, a CUDA driver result or a cuFile error). The message is built
// once, when the error is constructed, which only happens on the failure path.
//
// Every error also has an errno (errno_value(), decided by one table in core/error_map.cpp), so
// a C caller, the CLI and the Python bindings (OSError with errno, filename, offset, length)
// read the same answer; cufile_errors.hpp maps it to and from cuFile's codes. docs/errors.md
// has the tables.
#pragma once

#include <cstdint>
#include <exception>
#include <string>
#include <string_view>

#include "sluice/export.hpp"

namespace sluice {

/// Where an error code comes from; decides how `code` is turned into text.
enum class ErrorDomain : std::uint8_t {
  os,       ///< `code` is an errno value
  cuda,     ///< `code` is a CUresult from the CUDA driver API
  cufile,   ///< `code` is a CUfileOpError value
  usage,    ///< bad input from the caller; `code` is always EINVAL (the constructor sets it)
  data,     ///< the data on disk is not what it should be (a truncated or malformed file);
            ///< `code` is the errno that says so (EINVAL for a malformed file; EIO when 0 is given)
};

/// The context of a failed operation. Every field but `op` is optional.
struct ErrorContext {
  std::string_view op;             ///< "read", "write", "open", "cuMemAlloc", ...
  std::string path{};              ///< file the operation was on
  std::uint64_t offset = 0;        ///< file offset of the range
  std::uint64_t size = 0;          ///< size of the range
  bool has_range = false;          ///< offset/size are meaningful
};

class SLUICE_API Error : public std::exception {
 public:
  Error(ErrorDomain domain, int code, ErrorContext ctx, std::string_view detail = {});

  [[nodiscard]] const char* what() const noexcept override { return message_.c_str(); }
  [[nodiscard]] ErrorDomain domain() const noexcept { return domain_; }
  /// The raw code in its domain: errno for `os`, CUresult for `cuda`, ...
  [[nodiscard]] int code() const noexcept { return code_; }
  [[nodiscard]] const std::string& op() const noexcept { return op_; }
  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  /// The errno this error stands for, whatever its domain: `code()` for `os`, EINVAL for
  /// `usage`, and by the table of docs/errors.md for CUDA and cuFile codes. Never 0.
  [[nodiscard]] int errno_value() const noexcept;
  /// Whether the error concerns a byte range of path(): then offset() and length() give it.
  [[nodiscard]] bool has_range() const noexcept { return has_range_; }
  /// File offset of the range (0 without one).
  [[nodiscard]] std::uint64_t offset() const noexcept { return offset_; }
  /// Length of the range in bytes (0 without one).
  [[nodiscard]] std::uint64_t length() const noexcept { return size_; }
  /// The same as length().
  [[nodiscard]] std::uint64_t size() const noexcept { return size_; }
  /// The detail text alone ("file was truncated during the read", ...), without the context.
  [[nodiscard]] const std::string& detail() const noexcept { return detail_; }

 private:
  ErrorDomain domain_;
  int code_;
  std::string op_;
  std::string path_;
  std::uint64_t offset_;
  std::uint64_t size_;
  bool has_range_;
  std::string detail_;
  std::string message_;
};

/// Throws an `os` error for `errno_value` (a positive errno).
[[noreturn]] SLUICE_API void throw_os_error(int errno_value, ErrorContext ctx,
                                            std::string_view detail = {});
/// The errno `e` stands for (the same as e.errno_value()).
[[nodiscard]] SLUICE_API int to_errno(const Error& e) noexcept;

/// Throws a `usage` error (code EINVAL): the caller passed something that cannot work.
[[noreturn]] SLUICE_API void throw_usage_error(ErrorContext ctx, std::string_view detail);

}  // namespace sluice
