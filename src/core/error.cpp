#include "sluice/error.hpp"

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace sluice {
namespace {

std::string code_text(ErrorDomain domain, int code) {
  switch (domain) {
    case ErrorDomain::os: {
      char buf[128];
      // GNU strerror_r returns the message pointer; it may not use buf.
      const char* msg = strerror_r(code, buf, sizeof buf);
      return fmt::format("{} (errno {})", msg, code);
    }
    case ErrorDomain::cuda: return fmt::format("CUDA driver error {}", code);
    case ErrorDomain::cufile: return fmt::format("cuFile error {}", code);
    case ErrorDomain::usage: return "invalid argument";
    case ErrorDomain::data: return "bad data";
  }
  return "unknown error";
}

}  // namespace

Error::Error(ErrorDomain domain, int code, ErrorContext ctx, std::string_view detail)
    : domain_(domain),
      // One errno per kind of failure: a usage error is EINVAL and a data error without its own
      // errno is EIO, whoever built it.
      code_(domain == ErrorDomain::usage                ? EINVAL
            : domain == ErrorDomain::data && code == 0 ? EIO
                                                       : code),
      op_(ctx.op),
      path_(std::move(ctx.path)),
      offset_(ctx.offset),
      size_(ctx.size),
      has_range_(ctx.has_range),
      detail_(detail) {
  std::string msg = op_.empty() ? std::string("sluice") : op_;
  if (!path_.empty()) msg += fmt::format(" '{}'", path_);
  if (ctx.has_range) msg += fmt::format(" [offset {}, {} bytes]", offset_, size_);
  msg += ": ";
  if (!detail_.empty()) {
    msg += detail_;
    // CUDA and cuFile details already name their code ("CUDA_ERROR_OUT_OF_MEMORY (2)").
    if (domain_ == ErrorDomain::os) msg += fmt::format(": {}", code_text(domain_, code_));
  } else {
    msg += code_text(domain_, code_);
  }
  message_ = std::move(msg);
}

int Error::errno_value() const noexcept {
  return to_errno(*this);
}

void throw_os_error(int errno_value, ErrorContext ctx, std::string_view detail) {
  throw Error(ErrorDomain::os, errno_value, std::move(ctx), detail);
}

void throw_usage_error(ErrorContext ctx, std::string_view detail) {
  throw Error(ErrorDomain::usage, EINVAL, std::move(ctx), detail);
}

}  // namespace sluice
