// A fake libcuda.so.1: the driver entry points sluice uses, over host memory, so the CUDA device
// and its dlopen shim run in CI without a GPU. Loaded through SLUICE_LIBCUDA=<path to this file>.
//
// Device memory is malloc'd and tracked with the context that allocated it, so pointer queries
// (memory type, context, device pointer, device ordinal) and copy bounds behave like the driver's;
// copies and host functions run at once on the calling thread and events are always complete.
// Each thread has a context stack (cuCtxPushCurrent/PopCurrent; cuCtxSetCurrent replaces its
// top), as the driver has. A cuStreamWaitValue32 is kept with its stream, and the next call that
// enqueues on that stream blocks until the word reaches the value. Like the driver, memory and
// stream calls need cuInit and a current context, which catches a missing make_current() on a
// pool thread, and a driver call from inside a host function fails with CUDA_ERROR_NOT_PERMITTED.
//
// Knobs, read at call time so one test process can change them between calls:
//   FAKE_CUDA_DEVICES=N               devices (default 1, at most 16); 0: cuInit -> NO_DEVICE
//   FAKE_CUDA_FAIL=name[:code][,...]  that entry point returns `code` (default 999, UNKNOWN)
// Extra exports for tests: fake_cuda_live_allocations(), fake_cuda_live_handles().
// Device attributes (cuDeviceGetAttribute) describe what the fake does: unified addressing, mapped
// and registered host memory; no managed memory, memory pools, pageable access or GPUDirect RDMA;
// compute capability 9.0; PCI bus 0x17 + ordinal, as cuDeviceGetPCIBusId says.
//
// Self-contained on purpose (no libsluice, no cuda.h): it is the other side of the ABI.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#define FAKE_API extern "C" __attribute__((visibility("default")))

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
struct CUctx_st {
  int device;
  int refs;
};
struct CUstream_st {
  int unused;
};
struct CUevent_st {
  bool recorded;
};
using CUcontext = CUctx_st*;
using CUstream = CUstream_st*;
using CUevent = CUevent_st*;
using CUhostFn = void (*)(void*);

namespace {

constexpr CUresult ok = 0;
constexpr CUresult invalid_value = 1;
constexpr CUresult out_of_memory = 2;
constexpr CUresult not_initialized = 3;
constexpr CUresult no_device = 100;
constexpr CUresult invalid_device = 101;
constexpr CUresult invalid_context = 201;
constexpr CUresult invalid_handle = 400;
constexpr CUresult not_permitted = 800;
constexpr CUresult already_registered = 712;
constexpr CUresult not_registered = 713;
constexpr CUresult unknown = 999;

constexpr int max_devices = 16;
constexpr std::size_t total_memory = std::size_t{16} << 30;
constexpr unsigned memorytype_host = 1;
constexpr unsigned memorytype_device = 2;
// CUpointer_attribute values this fake answers.
constexpr int pointer_attribute_context = 1;
constexpr int pointer_attribute_memory_type = 2;
constexpr int pointer_attribute_device_pointer = 3;
constexpr int pointer_attribute_device_ordinal = 9;
// cudaInvalidDeviceId: the ordinal cuPointerGetAttributes gives memory CUDA does not know.
constexpr int invalid_device_ordinal = -2;
// Contexts a thread may have pushed. The driver has no fixed limit; this fake refuses a deeper
// push with OUT_OF_MEMORY, as its stack lives in static TLS (see CMakeLists.txt), which a
// dlopen'ed library has only a few hundred bytes of.
constexpr int max_context_depth = 8;

enum class Region { device, host_alloc, host_registered };
struct Block {
  std::size_t size;
  Region kind;
  CUcontext ctx;  // current when it was allocated or registered
};

// A cuStreamWaitValue32 not yet satisfied: later work on its stream waits for it.
struct ValueWait {
  const std::uint32_t* addr;
  std::uint32_t value;
};

struct State {
  std::mutex mu;
  std::map<std::uintptr_t, Block> blocks;  // by start address; ranges never overlap
  std::set<CUstream> streams;
  std::set<CUevent> events;
  std::map<CUstream, std::vector<ValueWait>> waits;  // per stream (nullptr: the default stream)
  bool initialized = false;
};

// Leaked: the library under test may call in from its own exit path.
State& state() {
  static State* s = new State;
  return *s;
}

CUctx_st contexts[max_devices];  // trivially destructible; one primary context per device

// The calling thread's context stack; its top is the current context. Plain arrays (trivially
// destructible) so the thread_locals need no TLS destructor in this dlopen'ed library.
thread_local CUcontext context_stack[max_context_depth];
thread_local int context_depth = 0;

CUcontext current() { return context_depth > 0 ? context_stack[context_depth - 1] : nullptr; }

// A primary context of this fake, retained by someone (the only kind that exists in the driver).
bool live_context(CUcontext ctx) {
  return ctx >= contexts && ctx < contexts + max_devices && ctx->refs > 0;
}
int ordinal_of(CUcontext ctx) { return static_cast<int>(ctx - contexts); }

int device_count() {
  const char* env = std::getenv("FAKE_CUDA_DEVICES");
  if (env == nullptr || *env == '\0') return 1;
  const int n = std::atoi(env);
  return n < 0 ? 0 : (n > max_devices ? max_devices : n);
}

// The CUresult FAKE_CUDA_FAIL assigns to entry point `name`, or ok.
CUresult injected(std::string_view name) {
  const char* env = std::getenv("FAKE_CUDA_FAIL");
  if (env == nullptr) return ok;
  std::string_view list = env;
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    std::string_view entry = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    const std::size_t colon = entry.find(':');
    if (entry.substr(0, colon) != name) continue;
    if (colon == std::string_view::npos) return unknown;
    const int code = std::atoi(std::string(entry.substr(colon + 1)).c_str());
    return code != ok ? code : unknown;
  }
  return ok;
}

// Set while a host function runs: CUDA forbids host functions to call the driver, and this
// fake refuses such calls with CUDA_ERROR_NOT_PERMITTED, as a real driver may deadlock instead.
thread_local bool in_host_function = false;

#define FAKE_ENTRY()                                        \
  do {                                                      \
    if (in_host_function) return not_permitted;             \
    if (const CUresult rc = injected(__func__); rc != ok) { \
      return rc;                                            \
    }                                                       \
  } while (false)

// Work here runs when it is enqueued, so work enqueued behind a stream wait runs once the wait is
// satisfied: the enqueuing call blocks until then (without the lock, so others proceed).
void drain_waits(CUstream stream) {
  State& s = state();
  for (;;) {
    ValueWait w{};
    {
      std::lock_guard lock(s.mu);
      auto it = s.waits.find(stream);
      if (it == s.waits.end() || it->second.empty()) return;
      w = it->second.front();
    }
    while (static_cast<std::int32_t>(__atomic_load_n(w.addr, __ATOMIC_ACQUIRE) - w.value) < 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    std::lock_guard lock(s.mu);
    auto& list = s.waits[stream];
    if (!list.empty()) list.erase(list.begin());
  }
}

CUresult need_init() { return state().initialized ? ok : not_initialized; }
CUresult need_context() {
  if (!state().initialized) return not_initialized;
  return current() != nullptr ? ok : invalid_context;
}
bool valid_device(CUdevice d) { return d >= 0 && d < device_count(); }

// The block holding address `p`, or end(). Caller holds the lock.
std::map<std::uintptr_t, Block>::iterator find_block(State& s, std::uintptr_t p) {
  auto it = s.blocks.upper_bound(p);
  if (it == s.blocks.begin()) return s.blocks.end();
  --it;
  return p < it->first + it->second.size ? it : s.blocks.end();
}

// Whether [p, p+n) lies inside one live device allocation.
bool device_range(State& s, CUdeviceptr p, std::size_t n) {
  const auto it = find_block(s, static_cast<std::uintptr_t>(p));
  return it != s.blocks.end() && it->second.kind == Region::device &&
         n <= it->first + it->second.size - static_cast<std::uintptr_t>(p);
}

// Whether [p, p+n) overlaps any tracked block.
bool overlaps(State& s, std::uintptr_t p, std::size_t n) {
  auto it = s.blocks.lower_bound(p + n);
  if (it == s.blocks.begin()) return false;
  --it;
  return it->first + it->second.size > p;
}

bool valid_stream(State& s, CUstream st) { return st == nullptr || s.streams.count(st) != 0; }

CUresult copy_check(State& s, CUdeviceptr dev, const void* host, std::size_t n, CUstream st) {
  if (!valid_stream(s, st)) return invalid_handle;
  if (host == nullptr || !device_range(s, dev, n)) return invalid_value;
  return ok;
}

// Writes attribute `attribute` of `ptr`, which lies in `b`, to `data` (the type the driver
// documents for it). Caller holds the lock.
CUresult block_attribute(const Block& b, int attribute, CUdeviceptr ptr, void* data) {
  switch (attribute) {
    case pointer_attribute_context:
      std::memcpy(data, &b.ctx, sizeof b.ctx);
      return ok;
    case pointer_attribute_memory_type: {
      const unsigned type = b.kind == Region::device ? memorytype_device : memorytype_host;
      std::memcpy(data, &type, sizeof type);
      return ok;
    }
    case pointer_attribute_device_pointer:
      // Unified addressing: host and device see every block at one address. The driver answers
      // for the current context, so it needs one.
      if (current() == nullptr) return invalid_context;
      std::memcpy(data, &ptr, sizeof ptr);
      return ok;
    case pointer_attribute_device_ordinal: {
      const int ordinal = ordinal_of(b.ctx);
      std::memcpy(data, &ordinal, sizeof ordinal);
      return ok;
    }
    default:
      return invalid_value;  // an attribute this fake does not model
  }
}

// The empty value cuPointerGetAttributes gives an attribute of memory the driver never saw.
CUresult unknown_attribute(int attribute, void* data) {
  switch (attribute) {
    case pointer_attribute_context: {
      const CUcontext none = nullptr;
      std::memcpy(data, &none, sizeof none);
      return ok;
    }
    case pointer_attribute_memory_type: {
      const unsigned none = 0;
      std::memcpy(data, &none, sizeof none);
      return ok;
    }
    case pointer_attribute_device_pointer: {
      const CUdeviceptr none = 0;
      std::memcpy(data, &none, sizeof none);
      return ok;
    }
    case pointer_attribute_device_ordinal:
      std::memcpy(data, &invalid_device_ordinal, sizeof invalid_device_ordinal);
      return ok;
    default:
      return invalid_value;
  }
}

// One side of a cuMemcpyAsync: device memory must lie inside its allocation; any other address
// is host memory (pinned or pageable), which unified addressing lets the copy use as it is.
bool copy_operand_ok(State& s, std::uintptr_t p, std::size_t n) {
  if (p == 0) return false;
  const auto it = find_block(s, p);
  if (it == s.blocks.end() || it->second.kind != Region::device) return true;
  return n <= it->first + it->second.size - p;
}

CUresult remove_block(std::uintptr_t p, Region kind, CUresult missing) {
  State& s = state();
  std::lock_guard lock(s.mu);
  const auto it = s.blocks.find(p);
  if (it == s.blocks.end() || it->second.kind != kind) return missing;
  s.blocks.erase(it);
  return ok;
}

// The codes this fake returns, with the driver's names and (shortened) descriptions.
struct ErrorText {
  CUresult code;
  const char* name;
  const char* text;
};
constexpr ErrorText error_texts[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {600, "CUDA_ERROR_NOT_READY", "device not ready"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {712, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
     "part or all of the requested memory range is already mapped"},
    {713, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
     "pointer does not correspond to a registered memory region"},
    {800, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

// cuGetErrorName/cuGetErrorString: `pick` chooses the column. A code the driver does not know
// gives NULL and INVALID_VALUE, as the driver does.
template <class Pick>
CUresult error_lookup(CUresult error, const char** str, Pick pick) {
  if (str == nullptr) return invalid_value;
  for (const ErrorText& e : error_texts) {
    if (e.code == error) {
      *str = pick(e);
      return ok;
    }
  }
  *str = nullptr;
  return invalid_value;
}

}  // namespace

FAKE_API CUresult cuGetErrorName(CUresult error, const char** str) {
  FAKE_ENTRY();
  return error_lookup(error, str, [](const ErrorText& e) { return e.name; });
}

FAKE_API CUresult cuGetErrorString(CUresult error, const char** str) {
  FAKE_ENTRY();
  return error_lookup(error, str, [](const ErrorText& e) { return e.text; });
}

FAKE_API CUresult cuInit(unsigned int flags) {
  FAKE_ENTRY();
  if (flags != 0) return invalid_value;
  if (device_count() == 0) return no_device;
  State& s = state();
  std::lock_guard lock(s.mu);
  s.initialized = true;
  return ok;
}

FAKE_API CUresult cuDriverGetVersion(int* version) {
  FAKE_ENTRY();
  if (version == nullptr) return invalid_value;
  *version = 13000;
  return ok;
}

FAKE_API CUresult cuDeviceGetCount(int* count) {
  FAKE_ENTRY();
  if (count == nullptr) return invalid_value;
  if (const CUresult r = need_init(); r != ok) return r;
  *count = device_count();
  return ok;
}

FAKE_API CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  FAKE_ENTRY();
  if (const CUresult r = need_init(); r != ok) return r;
  if (device == nullptr) return invalid_value;
  if (!valid_device(ordinal)) return invalid_device;
  *device = ordinal;
  return ok;
}

FAKE_API CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  FAKE_ENTRY();
  if (const CUresult r = need_init(); r != ok) return r;
  if (name == nullptr || len <= 0) return invalid_value;
  if (!valid_device(dev)) return invalid_device;
  (void)std::snprintf(name, static_cast<std::size_t>(len), "Fake CUDA Device %d", dev);
  return ok;
}

FAKE_API CUresult cuDeviceGetPCIBusId(char* bus_id, int len, CUdevice dev) {
  FAKE_ENTRY();
  if (const CUresult r = need_init(); r != ok) return r;
  if (bus_id == nullptr || len <= 0) return invalid_value;
  if (!valid_device(dev)) return invalid_device;
  (void)std::snprintf(bus_id, static_cast<std::size_t>(len), "0000:%02x:00.0", 0x17 + dev);
  return ok;
}

// The attributes of a fake device (see the note at the top); any other attribute is refused.
FAKE_API CUresult cuDeviceGetAttribute(int* value, int attribute, CUdevice dev) {
  FAKE_ENTRY();
  if (const CUresult r = need_init(); r != ok) return r;
  if (value == nullptr) return invalid_value;
  if (!valid_device(dev)) return invalid_device;
  static constexpr struct {
    int attribute;
    int value;
  } fixed[] = {
      {18, 0},   // INTEGRATED
      {19, 1},   // CAN_MAP_HOST_MEMORY: cuMemHostGetDevicePointer works
      {34, 0},   // PCI_DEVICE_ID
      {41, 1},   // UNIFIED_ADDRESSING: one address for host and device
      {50, 0},   // PCI_DOMAIN_ID, as cuDeviceGetPCIBusId prints it
      {75, 9},   // COMPUTE_CAPABILITY_MAJOR
      {76, 0},   // COMPUTE_CAPABILITY_MINOR
      {83, 0},   // MANAGED_MEMORY: no cuMemAllocManaged here
      {88, 0},   // PAGEABLE_MEMORY_ACCESS
      {89, 0},   // CONCURRENT_MANAGED_ACCESS
      {91, 1},   // CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM: see CU_POINTER_ATTRIBUTE_DEVICE_POINTER
      {99, 1},   // HOST_REGISTER_SUPPORTED: cuMemHostRegister works
      {100, 0},  // PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES
      {115, 0},  // MEMORY_POOLS_SUPPORTED: no cuMemAllocAsync here
      {116, 0},  // GPU_DIRECT_RDMA_SUPPORTED: no peer-to-peer DMA here
  };
  constexpr int pci_bus_id = 33;
  if (attribute == pci_bus_id) {
    *value = 0x17 + dev;  // as cuDeviceGetPCIBusId prints it
    return ok;
  }
  for (const auto& f : fixed) {
    if (f.attribute == attribute) {
      *value = f.value;
      return ok;
    }
  }
  return invalid_value;
}

FAKE_API CUresult cuDeviceTotalMem_v2(std::size_t* bytes, CUdevice dev) {
  FAKE_ENTRY();
  if (const CUresult r = need_init(); r != ok) return r;
  if (bytes == nullptr) return invalid_value;
  if (!valid_device(dev)) return invalid_device;
  *bytes = total_memory;
  return ok;
}

FAKE_API CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice dev) {
  FAKE_ENTRY();
  if (const CUresult r = need_init(); r != ok) return r;
  if (ctx == nullptr) return invalid_value;
  if (!valid_device(dev)) return invalid_device;
  State& s = state();
  std::lock_guard lock(s.mu);
  contexts[dev].device = dev;
  ++contexts[dev].refs;
  *ctx = &contexts[dev];
  return ok;
}

FAKE_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  FAKE_ENTRY();
  if (const CUresult r = need_init(); r != ok) return r;
  if (!valid_device(dev)) return invalid_device;
  State& s = state();
  std::lock_guard lock(s.mu);
  if (contexts[dev].refs == 0) return invalid_context;
  --contexts[dev].refs;
  return ok;
}

FAKE_API CUresult cuCtxSetCurrent(CUcontext ctx) {
  FAKE_ENTRY();
  if (const CUresult r = need_init(); r != ok) return r;
  if (ctx != nullptr && (ctx < contexts || ctx >= contexts + max_devices)) return invalid_context;
  // As the driver: replaces the top of the thread's stack; NULL pops it (nothing if empty).
  if (ctx == nullptr) {
    if (context_depth > 0) --context_depth;
  } else if (context_depth == 0) {
    context_stack[context_depth++] = ctx;
  } else {
    context_stack[context_depth - 1] = ctx;
  }
  return ok;
}

FAKE_API CUresult cuCtxGetCurrent(CUcontext* pctx) {
  FAKE_ENTRY();
  if (const CUresult r = need_init(); r != ok) return r;
  if (pctx == nullptr) return invalid_value;
  *pctx = current();  // NULL when the thread has none, with success
  return ok;
}

FAKE_API CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  FAKE_ENTRY();
  if (const CUresult r = need_init(); r != ok) return r;
  {
    State& s = state();
    std::lock_guard lock(s.mu);
    if (!live_context(ctx)) return invalid_context;
  }
  if (context_depth == max_context_depth) return out_of_memory;
  context_stack[context_depth++] = ctx;
  return ok;
}

FAKE_API CUresult cuCtxPopCurrent_v2(CUcontext* pctx) {
  FAKE_ENTRY();
  if (const CUresult r = need_init(); r != ok) return r;
  if (context_depth == 0) return invalid_context;
  const CUcontext popped = context_stack[--context_depth];
  if (pctx != nullptr) *pctx = popped;
  return ok;
}

FAKE_API CUresult cuMemAlloc_v2(CUdeviceptr* dptr, std::size_t bytes) {
  FAKE_ENTRY();
  if (const CUresult r = need_context(); r != ok) return r;
  if (dptr == nullptr || bytes == 0) return invalid_value;
  void* p = nullptr;
  if (posix_memalign(&p, 4096, bytes) != 0) return out_of_memory;
  State& s = state();
  std::lock_guard lock(s.mu);
  s.blocks[reinterpret_cast<std::uintptr_t>(p)] = {bytes, Region::device, current()};
  *dptr = reinterpret_cast<std::uintptr_t>(p);
  return ok;
}

FAKE_API CUresult cuMemFree_v2(CUdeviceptr dptr) {
  FAKE_ENTRY();
  if (const CUresult r = need_context(); r != ok) return r;
  if (dptr == 0) return ok;
  const CUresult r = remove_block(static_cast<std::uintptr_t>(dptr), Region::device, invalid_value);
  if (r == ok) std::free(reinterpret_cast<void*>(static_cast<std::uintptr_t>(dptr)));
  return r;
}

FAKE_API CUresult cuMemHostAlloc(void** pp, std::size_t bytes, unsigned int /*flags*/) {
  FAKE_ENTRY();
  if (const CUresult r = need_context(); r != ok) return r;
  if (pp == nullptr || bytes == 0) return invalid_value;
  void* p = nullptr;
  // Page-aligned like the driver's pinned memory, which O_DIRECT staging relies on.
  if (posix_memalign(&p, 4096, bytes) != 0) return out_of_memory;
  State& s = state();
  std::lock_guard lock(s.mu);
  s.blocks[reinterpret_cast<std::uintptr_t>(p)] = {bytes, Region::host_alloc, current()};
  *pp = p;
  return ok;
}

FAKE_API CUresult cuMemFreeHost(void* p) {
  FAKE_ENTRY();
  if (const CUresult r = need_context(); r != ok) return r;
  const CUresult r =
      remove_block(reinterpret_cast<std::uintptr_t>(p), Region::host_alloc, invalid_value);
  if (r == ok) std::free(p);
  return r;
}

FAKE_API CUresult cuMemHostRegister_v2(void* p, std::size_t bytes, unsigned int /*flags*/) {
  FAKE_ENTRY();
  if (const CUresult r = need_context(); r != ok) return r;
  if (p == nullptr || bytes == 0) return invalid_value;
  State& s = state();
  std::lock_guard lock(s.mu);
  const auto start = reinterpret_cast<std::uintptr_t>(p);
  if (overlaps(s, start, bytes)) return already_registered;
  s.blocks[start] = {bytes, Region::host_registered, current()};
  return ok;
}

FAKE_API CUresult cuMemHostUnregister(void* p) {
  FAKE_ENTRY();
  if (const CUresult r = need_context(); r != ok) return r;
  return remove_block(reinterpret_cast<std::uintptr_t>(p), Region::host_registered, not_registered);
}

FAKE_API CUresult cuPointerGetAttribute(void* data, int attribute, CUdeviceptr ptr) {
  FAKE_ENTRY();
  if (const CUresult r = need_init(); r != ok) return r;
  if (data == nullptr) return invalid_value;
  State& s = state();
  std::lock_guard lock(s.mu);
  const auto it = find_block(s, static_cast<std::uintptr_t>(ptr));
  if (it == s.blocks.end()) return invalid_value;  // memory the driver never saw
  return block_attribute(it->second, attribute, ptr, data);
}

// Unlike cuPointerGetAttribute, memory the driver never saw is no error: every attribute gets
// its empty value (NULL, 0; the ordinal -2) and the call succeeds.
FAKE_API CUresult cuPointerGetAttributes(unsigned int count, int* attributes, void** data,
                                         CUdeviceptr ptr) {
  FAKE_ENTRY();
  if (const CUresult r = need_init(); r != ok) return r;
  if (count > 0 && (attributes == nullptr || data == nullptr)) return invalid_value;
  State& s = state();
  std::lock_guard lock(s.mu);
  const auto it = find_block(s, static_cast<std::uintptr_t>(ptr));
  for (unsigned i = 0; i < count; ++i) {
    if (data[i] == nullptr) return invalid_value;
    const CUresult r = it == s.blocks.end()
                           ? unknown_attribute(attributes[i], data[i])
                           : block_attribute(it->second, attributes[i], ptr, data[i]);
    if (r != ok) return r;
  }
  return ok;
}

FAKE_API CUresult cuStreamCreate(CUstream* stream, unsigned int /*flags*/) {
  FAKE_ENTRY();
  if (const CUresult r = need_context(); r != ok) return r;
  if (stream == nullptr) return invalid_value;
  State& s = state();
  std::lock_guard lock(s.mu);
  *stream = new CUstream_st{};
  s.streams.insert(*stream);
  return ok;
}

FAKE_API CUresult cuStreamDestroy_v2(CUstream stream) {
  FAKE_ENTRY();
  if (const CUresult r = need_context(); r != ok) return r;
  State& s = state();
  std::lock_guard lock(s.mu);
  if (s.streams.erase(stream) == 0) return invalid_handle;
  s.waits.erase(stream);
  delete stream;
  return ok;
}

FAKE_API CUresult cuStreamSynchronize(CUstream stream) {
  FAKE_ENTRY();
  if (const CUresult r = need_context(); r != ok) return r;
  drain_waits(stream);
  State& s = state();
  std::lock_guard lock(s.mu);
  return valid_stream(s, stream) ? ok : invalid_handle;
}

FAKE_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, std::size_t bytes,
                                       CUstream stream) {
  FAKE_ENTRY();
  if (const CUresult r = need_context(); r != ok) return r;
  drain_waits(stream);
  State& s = state();
  std::lock_guard lock(s.mu);
  if (const CUresult r = copy_check(s, dst, src, bytes, stream); r != ok) return r;
  std::memcpy(reinterpret_cast<void*>(static_cast<std::uintptr_t>(dst)), src, bytes);
  return ok;
}

FAKE_API CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, std::size_t bytes,
                                       CUstream stream) {
  FAKE_ENTRY();
  if (const CUresult r = need_context(); r != ok) return r;
  drain_waits(stream);
  State& s = state();
  std::lock_guard lock(s.mu);
  if (const CUresult r = copy_check(s, src, dst, bytes, stream); r != ok) return r;
  std::memcpy(dst, reinterpret_cast<const void*>(static_cast<std::uintptr_t>(src)), bytes);
  return ok;
}

// Unified addressing: the direction follows from the addresses (see copy_operand_ok).
FAKE_API CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, std::size_t bytes,
                                CUstream stream) {
  FAKE_ENTRY();
  if (const CUresult r = need_context(); r != ok) return r;
  drain_waits(stream);
  State& s = state();
  std::lock_guard lock(s.mu);
  if (!valid_stream(s, stream)) return invalid_handle;
  if (!copy_operand_ok(s, static_cast<std::uintptr_t>(dst), bytes) ||
      !copy_operand_ok(s, static_cast<std::uintptr_t>(src), bytes)) {
    return invalid_value;
  }
  std::memmove(reinterpret_cast<void*>(static_cast<std::uintptr_t>(dst)),
               reinterpret_cast<const void*>(static_cast<std::uintptr_t>(src)), bytes);
  return ok;
}

FAKE_API CUresult cuLaunchHostFunc(CUstream stream, CUhostFn fn, void* user_data) {
  FAKE_ENTRY();
  if (const CUresult r = need_context(); r != ok) return r;
  drain_waits(stream);
  if (fn == nullptr) return invalid_value;
  {
    State& s = state();
    std::lock_guard lock(s.mu);
    if (!valid_stream(s, stream)) return invalid_handle;
  }
  in_host_function = true;
  fn(user_data);  // everything before it on the stream is already done
  in_host_function = false;
  return ok;
}

FAKE_API CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr* dptr, void* p, unsigned int flags) {
  FAKE_ENTRY();
  if (const CUresult r = need_context(); r != ok) return r;
  if (dptr == nullptr || flags != 0) return invalid_value;
  State& s = state();
  std::lock_guard lock(s.mu);
  const auto it = find_block(s, reinterpret_cast<std::uintptr_t>(p));
  if (it == s.blocks.end() || it->second.kind != Region::host_alloc) return invalid_value;
  *dptr = reinterpret_cast<std::uintptr_t>(p);  // unified addressing: the same address
  return ok;
}

// Only CU_STREAM_WAIT_VALUE_GEQ (0), on a word of cuMemHostAlloc memory.
FAKE_API CUresult cuStreamWaitValue32_v2(CUstream stream, CUdeviceptr addr, unsigned int value,
                                         unsigned int flags) {
  FAKE_ENTRY();
  if (const CUresult r = need_context(); r != ok) return r;
  if (flags != 0 || addr % alignof(std::uint32_t) != 0) return invalid_value;
  State& s = state();
  std::lock_guard lock(s.mu);
  if (!valid_stream(s, stream)) return invalid_handle;
  const auto it = find_block(s, static_cast<std::uintptr_t>(addr));
  if (it == s.blocks.end() || it->second.kind != Region::host_alloc) return invalid_value;
  s.waits[stream].push_back({reinterpret_cast<const std::uint32_t*>(static_cast<std::uintptr_t>(addr)), value});
  return ok;
}

FAKE_API CUresult cuEventCreate(CUevent* event, unsigned int /*flags*/) {
  FAKE_ENTRY();
  if (const CUresult r = need_context(); r != ok) return r;
  if (event == nullptr) return invalid_value;
  State& s = state();
  std::lock_guard lock(s.mu);
  *event = new CUevent_st{};
  s.events.insert(*event);
  return ok;
}

FAKE_API CUresult cuEventDestroy_v2(CUevent event) {
  FAKE_ENTRY();
  if (const CUresult r = need_context(); r != ok) return r;
  State& s = state();
  std::lock_guard lock(s.mu);
  if (s.events.erase(event) == 0) return invalid_handle;
  delete event;
  return ok;
}

FAKE_API CUresult cuEventRecord(CUevent event, CUstream stream) {
  FAKE_ENTRY();
  if (const CUresult r = need_context(); r != ok) return r;
  drain_waits(stream);
  State& s = state();
  std::lock_guard lock(s.mu);
  if (s.events.count(event) == 0 || !valid_stream(s, stream)) return invalid_handle;
  event->recorded = true;
  return ok;
}

FAKE_API CUresult cuEventQuery(CUevent event) {
  FAKE_ENTRY();
  if (const CUresult r = need_context(); r != ok) return r;
  State& s = state();
  std::lock_guard lock(s.mu);
  return s.events.count(event) != 0 ? ok : invalid_handle;
}

FAKE_API CUresult cuEventSynchronize(CUevent event) {
  FAKE_ENTRY();
  if (const CUresult r = need_context(); r != ok) return r;
  State& s = state();
  std::lock_guard lock(s.mu);
  return s.events.count(event) != 0 ? ok : invalid_handle;
}

/// Device allocations, cuMemHostAlloc blocks and registered ranges still alive.
FAKE_API int fake_cuda_live_allocations() {
  State& s = state();
  std::lock_guard lock(s.mu);
  return static_cast<int>(s.blocks.size());
}

/// Streams and events still alive.
FAKE_API int fake_cuda_live_handles() {
  State& s = state();
  std::lock_guard lock(s.mu);
  return static_cast<int>(s.streams.size() + s.events.size());
}
