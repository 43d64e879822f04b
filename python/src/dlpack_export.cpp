#include "dlpack_export.hpp"

#include <dlpack/dlpack.h>

#include <utility>

namespace py = pybind11;

namespace sluice::python {
namespace {

struct Export {
  DLManagedTensor managed{};
  std::shared_ptr<const void> owner;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;
};

void delete_export(DLManagedTensor* self) noexcept {
  delete static_cast<Export*>(self->manager_ctx);
}

// A capsule nobody consumed still owns its tensor; a consumer renames it "used_dltensor" and
// calls the deleter itself when done.
void capsule_destructor(PyObject* capsule) noexcept {
  if (PyCapsule_IsValid(capsule, "dltensor") == 0) return;
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
  if (managed != nullptr && managed->deleter != nullptr) managed->deleter(managed);
}

}  // namespace

py::capsule make_dlpack_capsule(DlpackRegion region) {
  auto ex = std::make_unique<Export>();
  ex->owner = std::move(region.owner);
  ex->shape = std::move(region.shape);
  ex->strides = std::move(region.strides);
  DLTensor& t = ex->managed.dl_tensor;
  t.data = region.data;
  t.device = {static_cast<DLDeviceType>(region.device_type), region.device_id};
  t.ndim = static_cast<std::int32_t>(ex->shape.size());
  t.dtype = {region.type.code, region.type.bits, region.type.lanes};
  t.shape = ex->shape.data();
  t.strides = ex->strides.empty() ? nullptr : ex->strides.data();
  t.byte_offset = 0;
  ex->managed.manager_ctx = ex.get();
  ex->managed.deleter = &delete_export;
  PyObject* capsule = PyCapsule_New(&ex->managed, "dltensor", &capsule_destructor);
  if (capsule == nullptr) throw py::error_already_set();
  ex.release();  // owned by the capsule, then by its consumer
  return py::reinterpret_steal<py::capsule>(capsule);
}

}  // namespace sluice::python
