// One error type for the whole library: what was being done, to which file and range, and the
// code that came back (an errno, a CUDA driver result or a cuFile error). The message is built
// once, when the error is constructed, which only happens on the failure path.
#pragma once

#include <cstdint>
#include <exception>
#include <string>
#include <string_view>

namespace sluice {

/// Where an error code comes from; decides how `code` is turned into text.
enum class ErrorDomain : std::uint8_t {
  os,       ///< `code` is an errno value
  cuda,     ///< `code` is a CUresult from the CUDA driver API
  cufile,   ///< `code` is a CUfileOpError value
  usage,    ///< bad input from the caller; `code` is EINVAL-like, kept for the C ABI
  data,     ///< the data on disk is not what it should be (a truncated or malformed file)
};

/// The context of a failed operation. Every field but `op` is optional.
struct ErrorContext {
  std::string_view op;             ///< "read", "write", "open", "cuMemAlloc", ...
  std::string path{};              ///< file the operation was on
  std::uint64_t offset = 0;        ///< file offset of the range
  std::uint64_t size = 0;          ///< size of the range
  bool has_range = false;          ///< offset/size are meaningful
};

class Error : public std::exception {
 public:
  Error(ErrorDomain domain, int code, ErrorContext ctx, std::string_view detail = {});

  [[nodiscard]] const char* what() const noexcept override { return message_.c_str(); }
  [[nodiscard]] ErrorDomain domain() const noexcept { return domain_; }
  /// The raw code in its domain: errno for `os`, CUresult for `cuda`, ...
  [[nodiscard]] int code() const noexcept { return code_; }
  [[nodiscard]] const std::string& op() const noexcept { return op_; }
  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  [[nodiscard]] std::uint64_t offset() const noexcept { return offset_; }
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
  std::string detail_;
  std::string message_;
};

/// Throws an `os` error for `errno_value` (a positive errno).
[[noreturn]] void throw_os_error(int errno_value, ErrorContext ctx, std::string_view detail = {});
/// Throws a `usage` error: the caller passed something that cannot work.
[[noreturn]] void throw_usage_error(ErrorContext ctx, std::string_view detail);

}  // namespace sluice
