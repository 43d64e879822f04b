// The memory behind a Python object that a transfer reads into or writes from. Accepted, in this
// order: `__cuda_array_interface__` (PyTorch CUDA tensors, CuPy, Numba: device memory), the
// buffer protocol (NumPy arrays, bytearray, memoryview, mmap: host memory), and `__dlpack__`
// (PyTorch CPU tensors, JAX, ...: host or CUDA memory as its device says). The memory must be one
// contiguous range (C or Fortran order), and writable when bytes go into it; anything else is
// refused with a TypeError or ValueError that says why. A Buffer keeps what it took from the
// object (the object, its Py_buffer, the DLPack capsule) until it is destroyed, which needs the
// GIL, as acquiring does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <pybind11/pybind11.h>

struct DLManagedTensor;

namespace sluice::python {

enum class Access : unsigned char {
  fill,    ///< bytes go into the memory (a read): it must be writable
  source,  ///< bytes come out of it (a write)
};

class Buffer {
 public:
  /// Takes the memory of `obj`; throws TypeError/ValueError (pybind11's) when it cannot.
  static Buffer acquire(pybind11::handle obj, Access access);

  Buffer() = default;
  Buffer(Buffer&& o) noexcept;
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();  // with the GIL held

  [[nodiscard]] void* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t nbytes() const noexcept { return nbytes_; }
  /// The CUDA device ordinal of device memory; nullopt for host memory.
  [[nodiscard]] std::optional<int> cuda_device() const noexcept { return cuda_device_; }
  /// The CUDA stream `__cuda_array_interface__` says the memory's producer works on (1: the
  /// legacy default stream, 2: the per-thread default): the transfer waits for it first, as the
  /// interface asks of consumers. nullopt when none was given.
  [[nodiscard]] std::optional<std::uintptr_t> stream() const noexcept { return stream_; }
  /// What kind of object it came from, for messages ("buffer protocol", "DLPack", ...).
  [[nodiscard]] const char* source() const noexcept { return source_; }

 private:
  static Buffer from_cuda_array_interface(pybind11::handle obj, Access access, Buffer b);
  static Buffer from_buffer_protocol(pybind11::handle obj, Access access, Buffer b);
  static Buffer from_dlpack(pybind11::handle obj, Buffer b);
  void release() noexcept;

  void* data_ = nullptr;
  std::size_t nbytes_ = 0;
  std::optional<int> cuda_device_;
  std::optional<std::uintptr_t> stream_;
  const char* source_ = "";
  pybind11::object owner_;                    ///< the object the memory belongs to
  std::unique_ptr<Py_buffer> view_;           ///< the buffer protocol's view, released when done
  DLManagedTensor* managed_ = nullptr;        ///< a consumed DLPack tensor, deleted when done
};

}  // namespace sluice::python
