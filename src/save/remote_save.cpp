// Saving a safetensors file to S3 (save_safetensors with an s3:// path; docs/save.md). The file
// is laid out as for a local save (plan_safetensors) and streamed through a RemoteWriter in file
// order: the prefix, then each tensor. Host memory (pinned or pageable) is appended as it is;
// device memory is copied to a host staging buffer of one part at a time first (bounded memory
// whatever the tensor's size; pageable memory, so no pinned allocation per save, at the cost of
// CUDA's slower pageable copies: the network is the slower side here). The object appears only when
// the upload completes; any error aborts it.
#include "save/remote_save.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

#include <fmt/format.h>

#include "sluice/error.hpp"
#include "sluice/remote_writer.hpp"

namespace sluice::detail {
namespace {

using Clock = std::chrono::steady_clock;

// Appends `bytes` of device memory at `src` through `staging` (one part at a time).
void append_from_device(RemoteWriter& w, const std::shared_ptr<Device>& dev, const std::byte* src,
                        std::uint64_t bytes, std::vector<std::byte>& staging) {
  if (staging.empty()) staging.resize(static_cast<std::size_t>(w.part_size()));
  const Stream stream(dev);
  for (std::uint64_t at = 0; at < bytes;) {
    const std::size_t n =
        static_cast<std::size_t>(std::min<std::uint64_t>(staging.size(), bytes - at));
    dev->copy_to_host_async(staging.data(), src + at, n, stream.get());
    stream.synchronize();
    w.append(staging.data(), n);
    at += n;
  }
}

}  // namespace

SaveResult save_safetensors_remote(const std::string& url, std::span<const SaveTensor> tensors,
                                   const SaveOptions& options) {
  const auto t0 = Clock::now();
  const SafetensorsLayout layout = plan_safetensors(tensors, options.metadata);
  SaveResult result;
  result.path = url;
  result.file_bytes = layout.file_bytes;
  result.header_bytes = layout.prefix.size() - 8;

  RemoteWriter w(url, RemoteOptions::from_environment(), layout.file_bytes);
  w.append(layout.prefix.data(), layout.prefix.size());
  std::vector<std::byte> staging;
  std::uint64_t from_device = 0;
  for (const std::size_t i : layout.order) {
    const SaveTensor& t = tensors[i];
    const auto* src = static_cast<const std::byte*>(t.data);
    if (t.bytes > 0 && options.device && options.device->pointer_kind(src) == MemoryKind::device) {
      append_from_device(w, options.device, src, t.bytes, staging);
      from_device += t.bytes;
    } else if (t.bytes > 0) {
      w.append(src, t.bytes);
    }
  }
  result.transfer = w.commit();
  result.transfer.bytes = layout.file_bytes;
  if (from_device > 0) {
    result.transfer.reason +=
        fmt::format("; {} of device memory staged through host memory", format_size(from_device));
  }
  result.transfer.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return result;
}

void write_text_remote(const std::string& url, const std::string& text) {
  RemoteWriter w(url, RemoteOptions::from_environment(), text.size());
  w.append(text.data(), text.size());
  (void)w.commit();
}

}  // namespace sluice::detail
