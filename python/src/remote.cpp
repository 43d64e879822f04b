// sluice.File for URLs (http://, https://, s3://): a read-only object read by ranges through
// RemoteReader (docs/remote.md) into host memory. sluice.File (python/sluice/_remote.py) returns
// one of these for a URL; it has File's read()/size/path/mode/close and context manager, and
// refuses writes and device memory with a clear error. The GIL is released while bytes move.
#include "remote.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <pybind11/stl.h>

#include "buffers.hpp"
#include "sluice/error.hpp"
#include "sluice/remote.hpp"

namespace py = pybind11;

namespace sluice::python {
namespace {

class RemoteFile {
 public:
  RemoteFile(const std::string& url, const std::string& mode) {
    if (mode != "r" && mode != "rb") {
      throw_os_error(
          EROFS, {.op = "open", .path = url},
          "remote objects open read-only (mode 'r'): writing to a URL is not supported yet");
    }
    reader_ = std::make_unique<RemoteReader>(url);
    url_ = reader_->url();  // the URL as errors show it: a presigned signature is hidden
  }

  TransferResult read(const py::object& buf, std::int64_t offset,
                      std::optional<std::int64_t> size) {
    Buffer b = Buffer::acquire(buf, Access::fill);
    if (b.cuda_device()) {
      throw py::value_error(
          "reading a URL into device memory is not supported yet: read into host memory (" + url() +
          ")");
    }
    if (offset < 0) throw py::value_error("offset must not be negative");
    std::uint64_t n = b.nbytes();
    if (size) {
      if (*size < 0 || static_cast<std::uint64_t>(*size) > n) {
        throw py::value_error("size must be in [0, the buffer's " + std::to_string(n) + " bytes]");
      }
      n = static_cast<std::uint64_t>(*size);
    }
    RemoteReader& r = open_reader();
    py::gil_scoped_release unlocked;
    const std::lock_guard lock(mutex_);  // one read at a time per reader
    return r.read(b.data(), n, static_cast<std::uint64_t>(offset));
  }

  void write(const py::object&, std::int64_t offset, const std::optional<std::int64_t>&) {
    throw_os_error(EROFS,
                   {.op = "write",
                    .path = url(),
                    .offset = static_cast<std::uint64_t>(std::max<std::int64_t>(offset, 0))},
                   "remote objects are read-only: writing to a URL is not supported yet");
  }

  // The object's size: known after the first read; else one ranged GET of its first byte says it.
  std::uint64_t size() {
    RemoteReader& r = open_reader();
    if (!r.size()) {
      std::byte one{};
      py::gil_scoped_release unlocked;
      const std::lock_guard lock(mutex_);
      (void)r.read(&one, 1, 0);
    }
    return r.size().value_or(0);
  }

  [[nodiscard]] const std::string& url() const { return url_; }
  [[nodiscard]] bool closed() const { return reader_ == nullptr; }
  void close() { reader_.reset(); }
  [[nodiscard]] std::string reason() const { return reader_ ? reader_->reason() : std::string(); }

 private:
  RemoteReader& open_reader() {
    if (!reader_) throw py::value_error("I/O on a closed file (" + url_ + ")");
    return *reader_;
  }

  std::unique_ptr<RemoteReader> reader_;
  std::string url_;
  std::mutex mutex_;
};

}  // namespace

void bind_remote(py::module_& m) {
  py::class_<RemoteFile>(
      m, "RemoteFile",
      "A URL (http://, https://, s3://) open read-only; sluice.File returns one for a URL.")
      .def(py::init<const std::string&, const std::string&>(), py::arg("path"),
           py::arg("mode") = "r")
      .def("read", &RemoteFile::read, py::arg("buf"), py::arg("offset") = 0,
           py::arg("size") = py::none(),
           "Reads up to `size` bytes (default: the buffer's size) at `offset` into host memory "
           "`buf` by ranged "
           "GETs in flight; fewer bytes only at the end of the object.")
      .def("write", &RemoteFile::write, py::arg("buf"), py::arg("offset") = 0,
           py::arg("size") = py::none(),
           "Refused: remote objects are read-only (sluice.Error, errno EROFS).")
      .def_property_readonly("size", &RemoteFile::size, "The object's size in bytes.")
      .def_property_readonly("path", &RemoteFile::url, "The URL (a query string shown as '?...').")
      .def_property_readonly("mode", [](const RemoteFile&) { return std::string("r"); })
      .def_property_readonly("closed", &RemoteFile::closed)
      .def_property_readonly(
          "reason", &RemoteFile::reason,
          "How this object's bytes came so far (ranged GETs, in flight, connections, retries).")
      .def("close", &RemoteFile::close)
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](RemoteFile& f, const py::args&) { f.close(); })
      .def("__repr__",
           [](const RemoteFile& f) { return "sluice.File('" + f.url() + "', mode='r')"; });
}

}  // namespace sluice::python
