// Loading libcuda: once per process, never unloaded.
//
// The library handle is leaked on purpose. dlclose at exit would unmap libcuda while its own exit
// handlers, and any device still cached in a static (open_device keeps one per spec), may still
// run; and libcuda's teardown is not written to survive being unloaded and reloaded. The Loaded
// record is heap-allocated and never freed for the same reason: no static destructor here may
// touch the driver.
#include "gpu/cuda_api.hpp"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include <fmt/format.h>

namespace sluice::detail::cu {
namespace {

constexpr const char* default_library = "libcuda.so.1";

struct Loaded {
  Api api;
  bool ok = false;
  std::string reason;
  CUresult code = success;
};

std::atomic<bool> exiting{false};
std::atomic<const Api*> loaded_api{nullptr};  // for result_text, which must not trigger a load

// Binds one entry point; dlsym's object pointer becomes the typed function pointer (POSIX
// guarantees the conversion).
template <class Fn>
bool bind(void* handle, Fn& fn, const char* name) {
  void* sym = dlsym(handle, name);
  fn = reinterpret_cast<Fn>(sym);
  return sym != nullptr;
}

void fail(Loaded& l, CUresult code, std::string reason) {
  l.ok = false;
  l.code = code;
  l.reason = std::move(reason);
}

Loaded* load() {
  auto* l = new Loaded;  // leaked: see the note atop this file
  const char* env = std::getenv("SLUICE_LIBCUDA");
  const bool from_env = env != nullptr && *env != '\0';
  l->api.library = from_env ? env : default_library;

  // RTLD_LOCAL: libcuda's symbols must not satisfy lookups from other libraries (a fake and the
  // real driver, or two drivers, must never mix).
  void* handle = dlopen(l->api.library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    const std::string_view why = err != nullptr ? err : "unknown dlopen error";
    const bool missing = why.find("No such file") != std::string_view::npos;
    fail(*l, error_not_initialized,
         fmt::format("{} {}{} (dlopen: {})", l->api.library,
                     missing ? "not found" : "failed to load", from_env ? " (SLUICE_LIBCUDA)" : "",
                     why));
    return l;
  }

#define SLUICE_CUDA_BIND(name, params)                                                   \
  if (!bind(handle, l->api.name, #name)) {                                               \
    fail(*l, error_not_found,                                                            \
         fmt::format("{}: missing symbol {} (driver too old?)", l->api.library, #name)); \
    return l;                                                                            \
  }
  SLUICE_CUDA_ENTRY_POINTS(SLUICE_CUDA_BIND)
#undef SLUICE_CUDA_BIND
#define SLUICE_CUDA_BIND_OPTIONAL(name, params) (void)bind(handle, l->api.name, #name);
  SLUICE_CUDA_OPTIONAL_ENTRY_POINTS(SLUICE_CUDA_BIND_OPTIONAL)
#undef SLUICE_CUDA_BIND_OPTIONAL

  // From here on result_text can name codes, including cuInit's.
  loaded_api.store(&l->api, std::memory_order_release);

  if (const CUresult r = l->api.cuInit(0); r != success) {
    fail(*l, r, fmt::format("cuInit: {}", result_text(r)));
    return l;
  }
  // Registered after cuInit, so it runs before the exit handlers libcuda installed during cuInit
  // (exit runs them in reverse order): every destructor that runs after it sees the flag.
  (void)std::atexit([] { exiting.store(true, std::memory_order_relaxed); });

  if (const CUresult r = l->api.cuDriverGetVersion(&l->api.driver_version); r != success) {
    l->api.driver_version = 0;  // informational only
  }
  l->ok = true;
  return l;
}

const Loaded& loaded() {
  static const Loaded* const l = load();  // thread-safe initialisation, never destroyed
  return *l;
}

}  // namespace

const Api* driver(std::string* reason, CUresult* code) {
  const Loaded& l = loaded();
  if (reason != nullptr) *reason = l.reason;
  if (code != nullptr) *code = l.code;
  return l.ok ? &l.api : nullptr;
}

std::string result_text(CUresult r) {
  const Api* api = loaded_api.load(std::memory_order_acquire);
  const char* name = nullptr;
  if (api != nullptr && api->cuGetErrorName(r, &name) == success && name != nullptr) {
    return fmt::format("{} ({})", name, r);
  }
  return fmt::format("CUresult {}", r);
}

bool process_exiting() noexcept { return exiting.load(std::memory_order_relaxed); }

}  // namespace sluice::detail::cu
