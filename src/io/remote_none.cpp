// RemoteReader in a build without libcurl: opening a URL says so (docs/remote.md, "Building").
#include "sluice/error.hpp"
#include "sluice/remote.hpp"
#include "sluice/remote_check.hpp"

namespace sluice {

struct RemoteReader::State {
  std::string url, endpoint;
  RemoteOptions opt;
  RemoteStats stats;
};

RemoteReader::RemoteReader(std::string url, RemoteOptions /*options*/) {
  throw_usage_error({.op = "open", .path = std::move(url)},
                    "this libsluice was built without libcurl: install libcurl4-openssl-dev and "
                    "rebuild to read http:// and https:// URLs");
}
RemoteReader::~RemoteReader() = default;
RemoteReader::RemoteReader(RemoteReader&&) noexcept = default;
RemoteReader& RemoteReader::operator=(RemoteReader&&) noexcept = default;
TransferResult RemoteReader::read(void* /*dst*/, std::uint64_t /*size*/, std::uint64_t /*offset*/) {
  return {};
}
std::optional<std::uint64_t> RemoteReader::size() const noexcept {
  return std::nullopt;
}
const std::string& RemoteReader::url() const noexcept {
  return state_->url;
}
const std::string& RemoteReader::endpoint() const noexcept {
  return state_->endpoint;
}
const RemoteOptions& RemoteReader::options() const noexcept {
  return state_->opt;
}
const RemoteStats& RemoteReader::stats() const noexcept {
  return state_->stats;
}
std::string RemoteReader::reason() const {
  return {};
}
RemoteCheck check_remote(const std::string& url, bool /*probe*/) {
  throw_usage_error({.op = "check", .path = url},
                    "this libsluice was built without libcurl: install libcurl4-openssl-dev and "
                    "rebuild to read http://, https:// and s3:// URLs");
}

}  // namespace sluice
