// The CUDA device over the fake libcuda (fake_cuda.cpp). The driver is loaded once per process,
// so each loader outcome is its own CTest entry: SLUICE_CUDA_TEST_MODE names the outcome the
// entry set up, and suites written for another outcome skip.
#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "gpu/cuda_api.hpp"
#include "gpu/cuda_device.hpp"
#include "sluice/error.hpp"

namespace sluice::detail {
namespace {

// EXPECT_TRUE(contains(text, part)), printing both on failure.
::testing::AssertionResult contains(std::string_view text, std::string_view part) {
  if (text.find(part) != std::string_view::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << part << "'";
}

bool mode_is(const char* want) {
  const char* mode = std::getenv("SLUICE_CUDA_TEST_MODE");
  return mode != nullptr && std::strcmp(mode, want) == 0;
}

// A counter exported by the fake, found in the copy of it the shim already loaded.
int fake_counter(const char* name) {
  void* lib = dlopen(std::getenv("SLUICE_LIBCUDA"), RTLD_NOW | RTLD_NOLOAD);
  if (lib == nullptr) return -1;
  auto* fn = reinterpret_cast<int (*)()>(dlsym(lib, name));
  const int n = fn != nullptr ? fn() : -1;
  dlclose(lib);  // drops only the reference RTLD_NOLOAD took
  return n;
}
int live_allocations() { return fake_counter("fake_cuda_live_allocations"); }
int live_handles() { return fake_counter("fake_cuda_live_handles"); }

// Sets an environment variable for one scope; the fake reads its knobs at call time.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_.empty()) {
      unsetenv(name_);
    } else {
      setenv(name_, old_.c_str(), 1);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::string old_;
};

// Expects `fn` to throw a cuda Error with `code` whose message names `op` and `text`.
template <class Fn>
void expect_cuda_error(Fn&& fn, int code, const char* op, const char* text) {
  try {
    fn();
    ADD_FAILURE() << "no exception; expected " << op << " to fail with " << text;
  } catch (const Error& e) {
    EXPECT_EQ(e.domain(), ErrorDomain::cuda) << e.what();
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_EQ(e.op(), op) << e.what();
    EXPECT_TRUE(contains(e.what(), op));
    EXPECT_TRUE(contains(e.what(), text));
  }
}

// ---- SLUICE_CUDA_TEST_MODE=fake: the fake driver with FAKE_CUDA_DEVICES=2 ----

class CudaFake : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!mode_is("fake")) GTEST_SKIP() << "needs SLUICE_CUDA_TEST_MODE=fake (run through ctest)";
    dev_ = make_cuda_device(0);
    allocations_ = live_allocations();
    handles_ = live_handles();
  }
  void TearDown() override {
    if (!dev_) return;
    EXPECT_EQ(live_allocations(), allocations_) << "device or pinned memory leaked";
    EXPECT_EQ(live_handles(), handles_) << "stream or event leaked";
  }

  std::shared_ptr<Device> dev_;
  int allocations_ = 0;
  int handles_ = 0;
};

TEST_F(CudaFake, AvailableWithTwoDevices) {
  std::string reason = "stale";
  EXPECT_TRUE(cuda_available(&reason));
  EXPECT_EQ(reason, "");
  EXPECT_EQ(cuda_device_count(), 2);
  EXPECT_EQ(cu::result_text(2), "CUDA_ERROR_OUT_OF_MEMORY (2)");
  EXPECT_EQ(cu::result_text(12345), "CUresult 12345");
}

TEST_F(CudaFake, Info) {
  const DeviceInfo& i = dev_->info();
  EXPECT_EQ(i.kind, DeviceKind::cuda);
  EXPECT_EQ(i.ordinal, 0);
  EXPECT_EQ(i.name, "Fake CUDA Device 0");
  EXPECT_EQ(i.total_memory, std::uint64_t{16} << 30);
  EXPECT_EQ(i.pci_bus_id, "0000:17:00.0");
  EXPECT_TRUE(contains(i.driver, "CUDA driver"));

  const auto second = make_cuda_device(1);
  EXPECT_EQ(second->info().ordinal, 1);
  EXPECT_EQ(second->info().name, "Fake CUDA Device 1");
  EXPECT_EQ(second->info().pci_bus_id, "0000:18:00.0");
}

TEST_F(CudaFake, OrdinalOutOfRange) {
  expect_cuda_error([] { (void)make_cuda_device(5); }, cu::error_invalid_device, "cuDeviceGet",
                    "CUDA_ERROR_INVALID_DEVICE (101)");
}

TEST_F(CudaFake, AllocFree) {
  void* p = dev_->alloc(1 << 20);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(live_allocations(), allocations_ + 1);
  dev_->free(p);
  EXPECT_EQ(live_allocations(), allocations_);
  EXPECT_EQ(dev_->alloc(0), nullptr);
  dev_->free(nullptr);
}

TEST_F(CudaFake, PinnedAlloc) {
  auto* p = static_cast<unsigned char*>(dev_->alloc_pinned(3 * 4096 + 5));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 4096, 0u);
  std::memset(p, 0xab, 3 * 4096 + 5);  // host memory: writable from the CPU
  EXPECT_EQ(live_allocations(), allocations_ + 1);
  dev_->free_pinned(p);
  dev_->free_pinned(nullptr);
}

TEST_F(CudaFake, PointerKinds) {
  auto* d = static_cast<char*>(dev_->alloc(8192));
  auto* h = static_cast<char*>(dev_->alloc_pinned(8192));
  std::vector<char> pageable(8192);
  int on_stack = 0;

  EXPECT_EQ(dev_->pointer_kind(d), MemoryKind::device);
  EXPECT_EQ(dev_->pointer_kind(d + 4000), MemoryKind::device);  // interior pointers too
  EXPECT_EQ(dev_->pointer_kind(h), MemoryKind::pinned_host);
  EXPECT_EQ(dev_->pointer_kind(h + 8191), MemoryKind::pinned_host);
  EXPECT_EQ(dev_->pointer_kind(pageable.data()), MemoryKind::pageable_host);
  EXPECT_EQ(dev_->pointer_kind(&on_stack), MemoryKind::pageable_host);
  EXPECT_EQ(dev_->pointer_kind(nullptr), MemoryKind::pageable_host);

  dev_->register_host(pageable.data(), pageable.size());
  EXPECT_EQ(dev_->pointer_kind(pageable.data() + 100), MemoryKind::pinned_host);
  expect_cuda_error([&] { dev_->register_host(pageable.data(), pageable.size()); }, 712,
                    "cuMemHostRegister", "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED");
  dev_->unregister_host(pageable.data());
  EXPECT_EQ(dev_->pointer_kind(pageable.data()), MemoryKind::pageable_host);

  dev_->free(d);
  dev_->free_pinned(h);
}

TEST_F(CudaFake, AsyncCopiesRoundTrip) {
  constexpr std::size_t n = 1 << 20;
  auto* src = static_cast<unsigned char*>(dev_->alloc_pinned(n));
  auto* d = static_cast<unsigned char*>(dev_->alloc(n));
  std::vector<unsigned char> back(n);
  for (std::size_t i = 0; i < n; ++i) src[i] = static_cast<unsigned char>(i * 7 + i / 251);

  StreamHandle s = dev_->create_stream();
  ASSERT_NE(s, nullptr);
  // Two halves at interior offsets, then one copy back into pageable memory.
  dev_->copy_to_device_async(d, src, n / 2, s);
  dev_->copy_to_device_async(d + n / 2, src + n / 2, n / 2, s);
  dev_->copy_to_host_async(back.data(), d, n, s);
  dev_->copy_to_device_async(d, src, 0, s);  // empty copies are no-ops
  dev_->synchronize(s);
  EXPECT_EQ(std::memcmp(back.data(), src, n), 0);

  dev_->destroy_stream(s);
  dev_->free(d);
  dev_->free_pinned(src);
}

TEST_F(CudaFake, CopyOutsideAllocationFails) {
  auto* d = static_cast<char*>(dev_->alloc(4096));
  std::vector<char> host(8192);
  StreamHandle s = dev_->create_stream();
  expect_cuda_error([&] { dev_->copy_to_device_async(d + 1, host.data(), 4096, s); },
                    cu::error_invalid_value, "cuMemcpyHtoDAsync", "CUDA_ERROR_INVALID_VALUE (1)");
  expect_cuda_error([&] { dev_->copy_to_host_async(host.data(), host.data(), 16, s); },
                    cu::error_invalid_value, "cuMemcpyDtoHAsync", "CUDA_ERROR_INVALID_VALUE (1)");
  dev_->destroy_stream(s);
  dev_->free(d);
}

TEST_F(CudaFake, Events) {
  StreamHandle s = dev_->create_stream();
  EventHandle e = dev_->create_event();
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(live_handles(), handles_ + 2);
  dev_->record_event(e, s);
  EXPECT_TRUE(dev_->event_done(e));
  dev_->wait_event(e);
  {
    // The driver answers NOT_READY while the work is in flight: not done, not an error.
    ScopedEnv fail("FAKE_CUDA_FAIL", "cuEventQuery:600");
    EXPECT_FALSE(dev_->event_done(e));
  }
  dev_->destroy_event(e);
  dev_->destroy_stream(s);
}

TEST_F(CudaFake, HostFuncsRunInStreamOrder) {
  std::vector<int> order;
  struct Step {
    std::vector<int>* order;
    int id;
  };
  Step steps[] = {{&order, 1}, {&order, 2}, {&order, 3}};
  auto record = [](void* arg) {
    auto* st = static_cast<Step*>(arg);
    st->order->push_back(st->id);
  };
  auto* d = static_cast<char*>(dev_->alloc(64));
  char host[64] = {};
  StreamHandle s = dev_->create_stream();
  dev_->launch_host_func(s, record, &steps[0]);
  dev_->copy_to_device_async(d, host, sizeof host, s);
  dev_->launch_host_func(s, record, &steps[1]);
  dev_->launch_host_func(s, record, &steps[2]);
  dev_->synchronize(s);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
  dev_->destroy_stream(s);
  dev_->free(d);
}

TEST_F(CudaFake, PoolThreadsNeedNoSetup) {
  // The fake, like the driver, refuses memory calls on a thread with no current context ...
  const cu::Api* api = cu::driver();
  ASSERT_NE(api, nullptr);
  std::thread([api] {
    cu::CUdeviceptr p = 0;
    EXPECT_EQ(api->cuMemAlloc_v2(&p, 64), cu::error_invalid_context);
  }).join();
  // ... and the device makes its context current itself on every call.
  std::thread([this] {
    void* p = dev_->alloc(64);
    StreamHandle s = dev_->create_stream();
    char host[64] = {1, 2, 3};
    dev_->copy_to_device_async(p, host, sizeof host, s);
    dev_->synchronize(s);
    EXPECT_EQ(dev_->pointer_kind(p), MemoryKind::device);
    dev_->destroy_stream(s);
    dev_->free(p);
  }).join();
}

TEST_F(CudaFake, InjectedAllocFailure) {
  {
    ScopedEnv fail("FAKE_CUDA_FAIL", "cuMemAlloc_v2:2");
    expect_cuda_error([&] { (void)dev_->alloc(1 << 20); }, cu::error_out_of_memory, "cuMemAlloc",
                      "CUDA_ERROR_OUT_OF_MEMORY (2)");
  }
  {
    ScopedEnv fail("FAKE_CUDA_FAIL", "cuStreamSynchronize,cuMemHostAlloc");  // default: UNKNOWN
    expect_cuda_error([&] { (void)dev_->alloc_pinned(4096); }, cu::error_unknown, "cuMemHostAlloc",
                      "CUDA_ERROR_UNKNOWN (999)");
  }
  {
    // Only INVALID_VALUE means "pageable"; any other failure is reported.
    ScopedEnv fail("FAKE_CUDA_FAIL", "cuPointerGetAttribute:201");
    int x = 0;
    expect_cuda_error([&] { (void)dev_->pointer_kind(&x); }, cu::error_invalid_context,
                      "cuPointerGetAttribute", "CUDA_ERROR_INVALID_CONTEXT (201)");
  }
  void* p = dev_->alloc(64);  // the knob is read per call: gone with the variable
  dev_->free(p);
}

// ---- SLUICE_CUDA_TEST_MODE=missing: SLUICE_LIBCUDA names a file that does not exist ----

TEST(CudaMissingLibrary, UnavailableWithReason) {
  if (!mode_is("missing")) GTEST_SKIP() << "needs SLUICE_CUDA_TEST_MODE=missing";
  std::string reason;
  EXPECT_FALSE(cuda_available(&reason));
  EXPECT_TRUE(contains(reason, "not found"));
  EXPECT_TRUE(contains(reason, std::getenv("SLUICE_LIBCUDA")));
  EXPECT_EQ(cuda_device_count(), 0);
  expect_cuda_error([] { (void)make_cuda_device(0); }, cu::error_not_initialized, "cuInit",
                    "not found");
}

// ---- SLUICE_CUDA_TEST_MODE=nosymbol: SLUICE_LIBCUDA names a library that is not libcuda ----

TEST(CudaWrongLibrary, UnavailableWithMissingSymbol) {
  if (!mode_is("nosymbol")) GTEST_SKIP() << "needs SLUICE_CUDA_TEST_MODE=nosymbol";
  std::string reason;
  EXPECT_FALSE(cuda_available(&reason));
  EXPECT_TRUE(contains(reason, "missing symbol cuGetErrorName"));
  expect_cuda_error([] { (void)make_cuda_device(0); }, cu::error_not_found, "cuInit",
                    "missing symbol");
}

// ---- SLUICE_CUDA_TEST_MODE=nodevice: the fake with FAKE_CUDA_DEVICES=0 ----

TEST(CudaNoDevice, UnavailableWithReason) {
  if (!mode_is("nodevice")) GTEST_SKIP() << "needs SLUICE_CUDA_TEST_MODE=nodevice";
  std::string reason;
  EXPECT_FALSE(cuda_available(&reason));
  EXPECT_EQ(reason, "cuInit: CUDA_ERROR_NO_DEVICE (100)");
  EXPECT_EQ(cuda_device_count(), 0);
  expect_cuda_error([] { (void)make_cuda_device(0); }, cu::error_no_device, "cuInit",
                    "CUDA_ERROR_NO_DEVICE (100)");
}

}  // namespace
}  // namespace sluice::detail
