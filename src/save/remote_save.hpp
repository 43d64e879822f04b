// The s3:// side of saving (remote_save.cpp): save_safetensors and the checkpoint functions call
// these when their path is a URL. Internal (hidden): the public API is sluice/save.hpp.
#pragma once

#include <span>
#include <string>

#include "sluice/save.hpp"

namespace sluice::detail {

/// save_safetensors to s3://BUCKET/KEY: the same bytes, uploaded through a RemoteWriter.
SaveResult save_safetensors_remote(const std::string& url, std::span<const SaveTensor> tensors,
                                   const SaveOptions& options);

/// Uploads `text` as the object `url` (a checkpoint's index), whole or not at all.
void write_text_remote(const std::string& url, const std::string& text);

}  // namespace sluice::detail
