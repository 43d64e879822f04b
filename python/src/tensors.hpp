// sluice.Tensor: one loaded tensor, readable by any framework through DLPack (tensors.cpp).
//
// Lifetime: every Tensor of one load shares one LoadedTensors (one allocation) through a
// shared_ptr<const Loaded>; each DLPack export holds another reference in its manager_ctx, so
// the memory lives as long as any sluice.Tensor or any torch/NumPy tensor made from one does, and
// is freed (munmap, or Device::free for sim and CUDA memory) when the last goes. The DLPack
// deleter touches no Python object: consumers may call it without the GIL, from any thread.
#pragma once

#include <memory>
#include <string>

#include <pybind11/pybind11.h>

#include "sluice/load.hpp"

namespace sluice::python {

/// One load's tensors and where they are.
struct Loaded {
  LoadedTensors tensors;
  std::string device;   ///< "cpu", "pinned", "sim", "cuda:N"
  int dlpack_type = 1;  ///< DLDeviceType: kDLCPU (1) for host and sim memory, kDLCUDA (2)
  int dlpack_id = 0;    ///< the CUDA ordinal; 0 otherwise
};

/// A tensor's bytes in host memory, for the buffer protocol (writable, one dimension of U8).
struct HostBytes {
  std::shared_ptr<const Loaded> owner;
  void* data = nullptr;
  pybind11::ssize_t nbytes = 0;
};

/// The dtype as sluice.Tensor.dtype spells it: safetensors' name ("F32", "BF16"; "C128", which
/// safetensors lacks), or for an .npy type sluice has no DType for, NumPy's descr ("|S5", ">i4").
[[nodiscard]] std::string dtype_name(const TensorInfo& t);

class Tensor {
 public:
  /// `bytes_view`: the tensor's bytes as a 1-d U8 tensor (view_bytes()).
  Tensor(std::shared_ptr<const Loaded> owner, const LoadedTensor* tensor, bool bytes_view = false)
      : owner_(std::move(owner)), tensor_(tensor), bytes_view_(bytes_view) {}

  [[nodiscard]] const TensorInfo& info() const noexcept { return *tensor_->info; }
  [[nodiscard]] const std::string& name() const noexcept { return info().name; }
  /// dtype_name(), or "U8" for a bytes view.
  [[nodiscard]] std::string dtype() const;
  [[nodiscard]] pybind11::tuple shape() const;
  [[nodiscard]] std::uint64_t nbytes() const noexcept { return info().bytes; }
  [[nodiscard]] bool fortran_order() const noexcept { return !bytes_view_ && info().fortran_order; }
  [[nodiscard]] const std::string& device() const noexcept { return owner_->device; }
  [[nodiscard]] pybind11::tuple dlpack_device() const;
  /// A "dltensor" capsule of an unversioned DLManagedTensor (DLPack 0.6, which torch and NumPy
  /// read). Raises TypeError for a type DLPack cannot describe.
  [[nodiscard]] pybind11::capsule dlpack(const pybind11::object& stream,
                                         const pybind11::object& dl_device,
                                         const pybind11::object& copy) const;
  [[nodiscard]] Tensor view_bytes() const { return {owner_, tensor_, true}; }
  /// BufferError for memory the host cannot read (CUDA).
  [[nodiscard]] HostBytes host_bytes() const;
  [[nodiscard]] std::string repr() const;

 private:
  std::shared_ptr<const Loaded> owner_;
  const LoadedTensor* tensor_;  ///< owned by owner_
  bool bytes_view_ = false;
};

/// A dict name -> sluice.Tensor of every tensor of `loaded`, in load order.
[[nodiscard]] pybind11::dict tensor_dict(std::shared_ptr<const Loaded> loaded);

void bind_tensors(pybind11::module_& m);

}  // namespace sluice::python
