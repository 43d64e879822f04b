// sluice::Device over the CUDA driver API (see cuda_api.hpp for how the driver is loaded).
//
// The device works in the GPU's primary context, the one the CUDA runtime (and so PyTorch and
// friends) also uses, so pointers move freely between sluice and the application. Every method
// makes that context current for its own duration (Scope: push, call, pop) and leaves the
// calling thread's context stack as it found it: pool threads call in without ever having set a
// context, and an application thread may have pushed another GPU's context it expects back.
#include "gpu/cuda_device.hpp"

#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <string_view>

#include <fmt/format.h>

#include "gpu/cuda_api.hpp"
#include "gpu/stream_gate.hpp"
#include "sluice/error.hpp"

namespace sluice::detail {
namespace {

using namespace cu;  // NOLINT(google-build-using-namespace): the driver's vocabulary, local only

[[noreturn]] void throw_cuda(CUresult r, std::string_view op, std::string_view what = {}) {
  const std::string text = result_text(r);
  throw Error(ErrorDomain::cuda, r, {.op = op},
              what.empty() ? text : fmt::format("{}: {}", what, text));
}

void check(CUresult r, std::string_view op, std::string_view what = {}) {
  if (r != success) throw_cuda(r, op, what);
}

CUdeviceptr to_dptr(const void* p) {
  return static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(p));
}

// The driver, or an Error carrying the reason it cannot be used.
const Api& require_driver() {
  std::string reason;
  CUresult code = success;
  const Api* api = driver(&reason, &code);
  if (api == nullptr) throw Error(ErrorDomain::cuda, code, {.op = "cuInit"}, reason);
  return *api;
}

class CudaDevice final : public Device {
 public:
  CudaDevice(const Api& api, int ordinal) : api_(api) {
    info_.kind = DeviceKind::cuda;
    info_.ordinal = ordinal;
    if (const CUresult r = api_.cuDeviceGet(&dev_, ordinal); r != success) {
      throw_cuda(r, "cuDeviceGet",
                 fmt::format("no cuda:{} ({} device(s) present)", ordinal, cuda_device_count()));
    }
    check(api_.cuDevicePrimaryCtxRetain(&ctx_, dev_), "cuDevicePrimaryCtxRetain",
          fmt::format("cuda:{}", ordinal));
    try {
      const Scope current(*this);
      char buf[256] = {};
      check(api_.cuDeviceGetName(buf, static_cast<int>(sizeof buf) - 1, dev_), "cuDeviceGetName");
      info_.name = buf;
      std::size_t total = 0;
      check(api_.cuDeviceTotalMem_v2(&total, dev_), "cuDeviceTotalMem");
      info_.total_memory = total;
      // The PCI bus id is informational (topology, reports); some virtual GPUs lack one.
      char bus[32] = {};
      if (api_.cuDeviceGetPCIBusId(bus, static_cast<int>(sizeof bus) - 1, dev_) == success) {
        info_.pci_bus_id = bus;
      }
      const int v = api_.driver_version;
      info_.driver = fmt::format("CUDA driver {}.{}, {}", v / 1000,
                                    (v % 1000) / 10, api_.library);
    } catch (...) {
      api_.cuDevicePrimaryCtxRelease_v2(dev_);
      throw;
    }
  }

  // The primary context is reference-counted and shared with the application, so dropping our
  // reference is right while the process runs; once exit() is tearing libcuda down no call is
  // safe, and the OS reclaims the context anyway.
  ~CudaDevice() override {
    {
      std::lock_guard lock(gates_mutex_);
      gates_.reset();  // frees the gate pages while the context is still ours
    }
    if (!process_exiting()) api_.cuDevicePrimaryCtxRelease_v2(dev_);
  }

  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  [[nodiscard]] const DeviceInfo& info() const noexcept override { return info_; }

  void make_current() override { check(api_.cuCtxSetCurrent(ctx_), "cuCtxSetCurrent"); }

  [[nodiscard]] void* alloc(std::size_t bytes) override {
    if (bytes == 0) return nullptr;  // the driver rejects 0; nothing to hold
    const Scope current(*this);
    CUdeviceptr p = 0;
    check(api_.cuMemAlloc_v2(&p, bytes), "cuMemAlloc", fmt::format("{} bytes", bytes));
    return reinterpret_cast<void*>(static_cast<std::uintptr_t>(p));
  }

  void free(void* p) noexcept override {
    if (p == nullptr) return;
    const Scope current(*this, std::nothrow);
    if (current.ok()) api_.cuMemFree_v2(to_dptr(p));
  }

  [[nodiscard]] void* alloc_pinned(std::size_t bytes) override {
    if (bytes == 0) return nullptr;
    const Scope current(*this);
    void* p = nullptr;
    // PORTABLE: staging buffers are pinned for every context, not only the one that made them.
    check(api_.cuMemHostAlloc(&p, bytes, memhostalloc_portable), "cuMemHostAlloc",
          fmt::format("{} bytes", bytes));
    return p;
  }

  void free_pinned(void* p) noexcept override {
    if (p == nullptr) return;
    const Scope current(*this, std::nothrow);
    if (current.ok()) api_.cuMemFreeHost(p);
  }

  void register_host(void* p, std::size_t bytes) override {
    const Scope current(*this);
    check(api_.cuMemHostRegister_v2(p, bytes, memhostregister_portable), "cuMemHostRegister",
          fmt::format("{} bytes at {}", bytes, p));
  }

  void unregister_host(void* p) noexcept override {
    if (p == nullptr) return;
    const Scope current(*this, std::nothrow);
    if (current.ok()) api_.cuMemHostUnregister(p);
  }

  [[nodiscard]] MemoryKind pointer_kind(const void* p) const override {
    const Scope current(*this);
    unsigned type = 0;
    const CUresult r = api_.cuPointerGetAttribute(&type, pointer_attribute_memory_type, to_dptr(p));
    // The driver does not know ordinary host memory: that is its answer for pageable pointers.
    if (r == error_invalid_value) return MemoryKind::pageable_host;
    check(r, "cuPointerGetAttribute");
    if (type == memorytype_device) return MemoryKind::device;
    if (type == memorytype_host) return MemoryKind::pinned_host;
    // Arrays and unified memory are not sluice buffers; treating them as pageable makes
    // callers stage through pinned memory, which is always correct.
    return MemoryKind::pageable_host;
  }

  [[nodiscard]] StreamHandle create_stream() override {
    const Scope current(*this);
    CUstream s = nullptr;
    // NON_BLOCKING: sluice's copies must not serialise with the application's legacy stream 0.
    check(api_.cuStreamCreate(&s, stream_non_blocking), "cuStreamCreate");
    return s;
  }

  void destroy_stream(StreamHandle s) noexcept override {
    if (s == nullptr) return;
    const Scope current(*this, std::nothrow);
    if (current.ok()) api_.cuStreamDestroy_v2(static_cast<CUstream>(s));
  }

  void copy_to_device_async(void* dst, const void* src, std::size_t bytes,
                            StreamHandle s) override {
    if (bytes == 0) return;
    const Scope current(*this);
    check(api_.cuMemcpyHtoDAsync_v2(to_dptr(dst), src, bytes, static_cast<CUstream>(s)),
          "cuMemcpyHtoDAsync", fmt::format("{} bytes {} -> {}", bytes, src, dst));
  }

  void copy_to_host_async(void* dst, const void* src, std::size_t bytes, StreamHandle s) override {
    if (bytes == 0) return;
    const Scope current(*this);
    check(api_.cuMemcpyDtoHAsync_v2(dst, to_dptr(src), bytes, static_cast<CUstream>(s)),
          "cuMemcpyDtoHAsync", fmt::format("{} bytes {} -> {}", bytes, src, dst));
  }

  void launch_host_func(StreamHandle s, void (*fn)(void*), void* arg) override {
    const Scope current(*this);
    check(api_.cuLaunchHostFunc(static_cast<CUstream>(s), fn, arg), "cuLaunchHostFunc");
  }

  void synchronize(StreamHandle s) override {
    const Scope current(*this);
    check(api_.cuStreamSynchronize(static_cast<CUstream>(s)), "cuStreamSynchronize");
  }

  [[nodiscard]] StreamGate make_gate() override {
    if (api_.cuStreamWaitValue32_v2 == nullptr || api_.cuMemHostGetDevicePointer_v2 == nullptr) {
      throw Error(ErrorDomain::cuda, error_not_found, {.op = "cuStreamWaitValue32"},
                  fmt::format("{} has no stream memory operations (cuStreamWaitValue32_v2)", api_.library));
    }
    std::shared_ptr<GateSlots> slots;
    {
      std::lock_guard lock(gates_mutex_);
      if (!gates_) {
        // Pinned and mapped (DEVICEMAP), so the GPU can poll the words over the bus; PORTABLE,
        // so a stream of any context can. Freed only while the process is not exiting.
        gates_ = std::make_shared<GateSlots>(
            [this](std::size_t bytes) {
              const Scope current(*this);
              void* p = nullptr;
              check(api_.cuMemHostAlloc(&p, bytes, memhostalloc_portable | memhostalloc_devicemap),
                    "cuMemHostAlloc", fmt::format("{} bytes for stream gates", bytes));
              CUdeviceptr dptr = 0;
              if (const CUresult r = api_.cuMemHostGetDevicePointer_v2(&dptr, p, 0); r != success) {
                api_.cuMemFreeHost(p);
                check(r, "cuMemHostGetDevicePointer");
              }
              return GateSlots::Page{static_cast<std::uint32_t*>(p), dptr};
            },
            // The slots may outlive this device (a gate still held): no `this` here.
            [api = &api_, ctx = ctx_](const GateSlots::Page& page) {
              if (process_exiting() || api->cuCtxPushCurrent_v2(ctx) != success) return;
              api->cuMemFreeHost(page.host);
              api->cuCtxPopCurrent_v2(nullptr);
            });
      }
      slots = gates_;
    }
    return claim_gate(std::move(slots));
  }

  void wait_gate(StreamHandle s, const StreamGate& gate) override {
    std::shared_ptr<GateSlots> slots;
    {
      std::lock_guard lock(gates_mutex_);
      slots = gates_;
    }
    if (!slots) throw_usage_error({.op = "wait_gate"}, "the gate was not made by this device");
    const Scope current(*this);
    check(api_.cuStreamWaitValue32_v2(static_cast<CUstream>(s), slots->device_address(gate.index()),
                                      gate.target(), stream_wait_value_geq),
          "cuStreamWaitValue32");
  }

  [[nodiscard]] EventHandle create_event() override {
    const Scope current(*this);
    CUevent e = nullptr;
    // Events only order and signal completion; timing costs extra work on every record.
    check(api_.cuEventCreate(&e, event_disable_timing), "cuEventCreate");
    return e;
  }

  void destroy_event(EventHandle e) noexcept override {
    if (e == nullptr) return;
    const Scope current(*this, std::nothrow);
    if (current.ok()) api_.cuEventDestroy_v2(static_cast<CUevent>(e));
  }

  void record_event(EventHandle e, StreamHandle s) override {
    const Scope current(*this);
    check(api_.cuEventRecord(static_cast<CUevent>(e), static_cast<CUstream>(s)), "cuEventRecord");
  }

  [[nodiscard]] bool event_done(EventHandle e) override {
    const Scope current(*this);
    const CUresult r = api_.cuEventQuery(static_cast<CUevent>(e));
    if (r == error_not_ready) return false;
    check(r, "cuEventQuery");
    return true;
  }

  void wait_event(EventHandle e) override {
    const Scope current(*this);
    check(api_.cuEventSynchronize(static_cast<CUevent>(e)), "cuEventSynchronize");
  }

 private:
  // The primary context, current on the calling thread for one call. Pushed only when another
  // context (or none) is current, and popped again, so the caller's stack comes back as it was;
  // cuCtxSetCurrent would have replaced the caller's top for good. The nothrow form is for the
  // noexcept release methods, which also skip the driver once exit() is tearing it down.
  class Scope {
   public:
    explicit Scope(const CudaDevice& d) : api_(d.api_) {
      CUcontext now = nullptr;
      check(api_.cuCtxGetCurrent(&now), "cuCtxGetCurrent");
      if (now == d.ctx_) return;
      check(api_.cuCtxPushCurrent_v2(d.ctx_), "cuCtxPushCurrent");
      pushed_ = true;
    }
    Scope(const CudaDevice& d, std::nothrow_t) noexcept : api_(d.api_), ok_(false) {
      CUcontext now = nullptr;
      if (process_exiting() || api_.cuCtxGetCurrent(&now) != success) return;
      ok_ = now == d.ctx_ || api_.cuCtxPushCurrent_v2(d.ctx_) == success;
      pushed_ = ok_ && now != d.ctx_;
    }
    ~Scope() {
      if (pushed_) api_.cuCtxPopCurrent_v2(nullptr);
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    [[nodiscard]] bool ok() const noexcept { return ok_; }

   private:
    const Api& api_;
    bool pushed_ = false;
    bool ok_ = true;
  };

  const Api& api_;
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  DeviceInfo info_;
  std::mutex gates_mutex_;
  std::shared_ptr<GateSlots> gates_;  // made on first use
};

}  // namespace

bool cuda_available(std::string* reason) {
  std::string why;
  const Api* api = driver(&why);
  if (api != nullptr && cuda_device_count() == 0) {
    why = "no CUDA device (cuDeviceGetCount returned 0)";
    api = nullptr;
  }
  if (reason != nullptr) *reason = api != nullptr ? std::string() : why;
  return api != nullptr;
}

int cuda_device_count() {
  const Api* api = driver();
  int count = 0;
  if (api == nullptr || api->cuDeviceGetCount(&count) != success) return 0;
  return count;
}

std::shared_ptr<Device> make_cuda_device(int ordinal) {
  const Api& api = require_driver();
  return std::make_shared<CudaDevice>(api, ordinal);
}

}  // namespace sluice::detail
