// RemoteWriter in a build without libcurl: opening a URL for writing says so (docs/remote.md,
// "Building").
#include "sluice/error.hpp"
#include "sluice/remote_writer.hpp"

namespace sluice {

struct RemoteWriter::State {
  std::string url, endpoint, abort_error;
  RemoteStats stats;
};

RemoteWriter::RemoteWriter(std::string url, RemoteOptions /*options*/,
                           std::optional<std::uint64_t> /*size_hint*/) {
  throw_usage_error({.op = "open", .path = std::move(url)},
                    "this libsluice was built without libcurl: install libcurl4-openssl-dev and "
                    "rebuild to write s3:// URLs");
}
RemoteWriter::~RemoteWriter() = default;
RemoteWriter::RemoteWriter(RemoteWriter&&) noexcept = default;
RemoteWriter& RemoteWriter::operator=(RemoteWriter&&) noexcept = default;
void RemoteWriter::append(const void* /*data*/, std::uint64_t /*size*/) {}
TransferResult RemoteWriter::commit() {
  return {};
}
void RemoteWriter::abort() noexcept {}
void RemoteWriter::set_cancel(std::function<bool()> /*stop*/) {}
std::uint64_t RemoteWriter::bytes_appended() const noexcept {
  return 0;
}
std::uint64_t RemoteWriter::bytes_uploaded() const noexcept {
  return 0;
}
std::uint64_t RemoteWriter::part_size() const noexcept {
  return 0;
}
bool RemoteWriter::committed() const noexcept {
  return false;
}
const std::string& RemoteWriter::abort_error() const noexcept {
  return state_->abort_error;
}
const std::string& RemoteWriter::url() const noexcept {
  return state_->url;
}
const std::string& RemoteWriter::endpoint() const noexcept {
  return state_->endpoint;
}
const RemoteStats& RemoteWriter::stats() const noexcept {
  return state_->stats;
}
std::string RemoteWriter::reason() const {
  return {};
}

void remote_delete(const std::string& url, const RemoteOptions& options) {
  RemoteWriter w(url, options);
}

std::string remote_join(const std::string& prefix, const std::string& name) {
  std::string p = prefix;
  while (p.ends_with('/')) p.pop_back();
  return p + "/" + name;
}

}  // namespace sluice
