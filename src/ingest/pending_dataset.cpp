// TEMPORARY (branch h-ingest-loader only): the Dataset definitions that src/ingest/dataset.cpp
// of branch h-ingest-data provides, so this branch links and tests its Loader against test
// doubles until that branch is merged. Deleted by the merge.
#include "sluice/error.hpp"
#include "sluice/ingest.hpp"

namespace sluice {

std::string_view to_string(DatasetFormat f) noexcept {
  switch (f) {
    case DatasetFormat::megatron: return "megatron";
    case DatasetFormat::webdataset: return "wds";
    case DatasetFormat::npy: return "npy";
  }
  return "?";
}

std::optional<DatasetFormat> parse_dataset_format(std::string_view name) noexcept {
  if (name == "megatron") return DatasetFormat::megatron;
  if (name == "wds" || name == "webdataset") return DatasetFormat::webdataset;
  if (name == "npy") return DatasetFormat::npy;
  return std::nullopt;
}

void Dataset::fields(std::uint64_t, std::vector<std::string>&) const {}

std::shared_ptr<const Dataset> Dataset::open(std::span<const std::string>, const DatasetOptions&) {
  throw_usage_error({.op = "open dataset"}, "the dataset formats are not on this branch yet");
}

}  // namespace sluice
