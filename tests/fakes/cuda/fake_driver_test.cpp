// The fake libcuda's driver calls that libsluice does not make but third-party cuFile clients do
// (KvikIO, DALI, cuda-python): the context stack, cuCtxGetCurrent, cuPointerGetAttributes and the
// CONTEXT / DEVICE_POINTER / DEVICE_ORDINAL pointer attributes, cuMemcpyAsync, cuGetErrorString,
// cuDeviceGetAttribute. Called straight through dlsym, as such a client does, with
// FAKE_CUDA_DEVICES=2 so that the ordinal and context of an allocation can be told apart.
// FakeDriverBeforeInit runs in a process of its own (before anything calls cuInit).
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace {

// The driver's types and values (cuda.h), spelled out: the test builds without the toolkit.
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUstream = struct CUstream_st*;

constexpr CUresult kOk = 0;
constexpr CUresult kInvalidValue = 1;
constexpr CUresult kOutOfMemory = 2;
constexpr CUresult kNotInitialized = 3;
constexpr CUresult kInvalidDevice = 101;
constexpr CUresult kInvalidContext = 201;
constexpr CUresult kInvalidHandle = 400;

constexpr int kAttrContext = 1;  // CU_POINTER_ATTRIBUTE_*
constexpr int kAttrMemoryType = 2;
constexpr int kAttrDevicePointer = 3;
constexpr int kAttrHostPointer = 4;  // not modelled by the fake
constexpr int kAttrDeviceOrdinal = 9;
constexpr unsigned kMemoryTypeHost = 1;  // CU_MEMORYTYPE_*
constexpr unsigned kMemoryTypeDevice = 2;

// The fake, opened where SLUICE_LIBCUDA says, and its entry points.
struct Driver {
  void* lib = nullptr;
  template <class Fn>
  Fn* sym(const char* name) const {
    return lib != nullptr ? reinterpret_cast<Fn*>(dlsym(lib, name)) : nullptr;
  }
};

const Driver& driver() {
  static const Driver d = [] {
    Driver out;
    const char* path = std::getenv("SLUICE_LIBCUDA");
    if (path != nullptr) out.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    return out;
  }();
  return d;
}

#define DRIVER_FN(name, ...) auto* const name = driver().sym<CUresult(__VA_ARGS__)>(#name)

// Skips unless SLUICE_LIBCUDA names a library with every entry point the tests call.
#define NEED_DRIVER()                                                                 \
  do {                                                                                \
    if (driver().lib == nullptr) GTEST_SKIP() << "SLUICE_LIBCUDA must name the fake"; \
  } while (false)

DRIVER_FN(cuInit, unsigned);
DRIVER_FN(cuDeviceGet, CUdevice*, int);
DRIVER_FN(cuDeviceGetPCIBusId, char*, int, CUdevice);
DRIVER_FN(cuDeviceGetAttribute, int*, int, CUdevice);
DRIVER_FN(cuDevicePrimaryCtxRetain, CUcontext*, CUdevice);
DRIVER_FN(cuDevicePrimaryCtxRelease_v2, CUdevice);
DRIVER_FN(cuCtxSetCurrent, CUcontext);
DRIVER_FN(cuCtxGetCurrent, CUcontext*);
DRIVER_FN(cuCtxPushCurrent_v2, CUcontext);
DRIVER_FN(cuCtxPopCurrent_v2, CUcontext*);
DRIVER_FN(cuMemAlloc_v2, CUdeviceptr*, std::size_t);
DRIVER_FN(cuMemFree_v2, CUdeviceptr);
DRIVER_FN(cuMemHostAlloc, void**, std::size_t, unsigned);
DRIVER_FN(cuMemFreeHost, void*);
DRIVER_FN(cuMemHostRegister_v2, void*, std::size_t, unsigned);
DRIVER_FN(cuMemHostUnregister, void*);
DRIVER_FN(cuPointerGetAttribute, void*, int, CUdeviceptr);
DRIVER_FN(cuPointerGetAttributes, unsigned, int*, void**, CUdeviceptr);
DRIVER_FN(cuMemcpyAsync, CUdeviceptr, CUdeviceptr, std::size_t, CUstream);
DRIVER_FN(cuStreamCreate, CUstream*, unsigned);
DRIVER_FN(cuStreamDestroy_v2, CUstream);
DRIVER_FN(cuGetErrorName, CUresult, const char**);
DRIVER_FN(cuGetErrorString, CUresult, const char**);

CUdeviceptr dptr(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p);
}

TEST(FakeDriverBeforeInit, ContextCallsNeedCuInit) {
  NEED_DRIVER();
  CUcontext ctx = nullptr;
  EXPECT_EQ(cuCtxGetCurrent(&ctx), kNotInitialized);
  EXPECT_EQ(cuCtxPopCurrent_v2(&ctx), kNotInitialized);
  int v = 0;
  EXPECT_EQ(cuDeviceGetAttribute(&v, 41, 0), kNotInitialized);
  int attr = kAttrMemoryType;
  unsigned type = 0;
  void* data[] = {&type};
  EXPECT_EQ(cuPointerGetAttributes(1, &attr, data, 0), kNotInitialized);
}

// Per test: cuInit, both primary contexts retained, and the calling thread's stack empty.
class FakeDriver : public ::testing::Test {
 protected:
  void SetUp() override {
    NEED_DRIVER();
    ASSERT_EQ(cuInit(0), kOk);
    for (int d = 0; d < 2; ++d) ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx_[d], d), kOk);
    ASSERT_NE(ctx_[0], ctx_[1]);
    ASSERT_EQ(cuCtxSetCurrent(nullptr), kOk);
    CUcontext cur = nullptr;
    ASSERT_EQ(cuCtxGetCurrent(&cur), kOk);
    ASSERT_EQ(cur, nullptr) << "the previous test left a context on the stack";
  }
  void TearDown() override {
    if (driver().lib == nullptr) return;
    CUcontext popped = nullptr;
    while (cuCtxPopCurrent_v2(&popped) == kOk) {
    }
    for (int d = 0; d < 2; ++d) EXPECT_EQ(cuDevicePrimaryCtxRelease_v2(d), kOk);
  }
  CUcontext current() {
    CUcontext c = reinterpret_cast<CUcontext>(1);
    EXPECT_EQ(cuCtxGetCurrent(&c), kOk);
    return c;
  }

  CUcontext ctx_[2] = {};
};

TEST_F(FakeDriver, PushAndPopFollowTheStack) {
  EXPECT_EQ(current(), nullptr);
  ASSERT_EQ(cuCtxPushCurrent_v2(ctx_[0]), kOk);
  EXPECT_EQ(current(), ctx_[0]);
  ASSERT_EQ(cuCtxPushCurrent_v2(ctx_[1]), kOk);
  EXPECT_EQ(current(), ctx_[1]);
  CUcontext popped = nullptr;
  ASSERT_EQ(cuCtxPopCurrent_v2(&popped), kOk);
  EXPECT_EQ(popped, ctx_[1]);
  EXPECT_EQ(current(), ctx_[0]) << "the context below becomes current again";
  ASSERT_EQ(cuCtxPopCurrent_v2(nullptr), kOk) << "the popped context may be discarded";
  EXPECT_EQ(current(), nullptr);
  EXPECT_EQ(cuCtxPopCurrent_v2(&popped), kInvalidContext) << "nothing left to pop";
  EXPECT_EQ(cuCtxGetCurrent(nullptr), kInvalidValue);
}

TEST_F(FakeDriver, SetCurrentReplacesTheTop) {
  ASSERT_EQ(cuCtxPushCurrent_v2(ctx_[0]), kOk);
  ASSERT_EQ(cuCtxPushCurrent_v2(ctx_[0]), kOk);
  ASSERT_EQ(cuCtxSetCurrent(ctx_[1]), kOk);
  EXPECT_EQ(current(), ctx_[1]);
  CUcontext popped = nullptr;
  ASSERT_EQ(cuCtxPopCurrent_v2(&popped), kOk);
  EXPECT_EQ(popped, ctx_[1]);
  EXPECT_EQ(current(), ctx_[0]);
  ASSERT_EQ(cuCtxSetCurrent(nullptr), kOk) << "NULL pops the top";
  EXPECT_EQ(current(), nullptr);
  EXPECT_EQ(cuCtxSetCurrent(nullptr), kOk) << "and is a no-op on an empty stack";
}

TEST_F(FakeDriver, PushRefusesWhatIsNotALiveContext) {
  EXPECT_EQ(cuCtxPushCurrent_v2(nullptr), kInvalidContext);
  CUcontext bogus = reinterpret_cast<CUcontext>(&ctx_);
  EXPECT_EQ(cuCtxPushCurrent_v2(bogus), kInvalidContext);
  // A primary context released by everyone no longer exists.
  ASSERT_EQ(cuDevicePrimaryCtxRelease_v2(1), kOk);
  EXPECT_EQ(cuCtxPushCurrent_v2(ctx_[1]), kInvalidContext);
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx_[1], 1), kOk);
  EXPECT_EQ(cuCtxPushCurrent_v2(ctx_[1]), kOk);
  EXPECT_EQ(current(), ctx_[1]);
}

TEST_F(FakeDriver, TheStackHasALimit) {
  int pushed = 0;
  CUresult r = kOk;
  while (pushed < 1000 && (r = cuCtxPushCurrent_v2(ctx_[0])) == kOk) ++pushed;
  EXPECT_EQ(r, kOutOfMemory);
  EXPECT_GE(pushed, 4) << "room for the nesting real clients do";
  EXPECT_EQ(current(), ctx_[0]);
}

TEST_F(FakeDriver, EachThreadHasItsOwnStack) {
  ASSERT_EQ(cuCtxPushCurrent_v2(ctx_[0]), kOk);
  CUcontext seen = reinterpret_cast<CUcontext>(1);
  CUresult pushed = -1;
  CUcontext after_push = nullptr;
  std::thread([&] {
    (void)cuCtxGetCurrent(&seen);
    pushed = cuCtxPushCurrent_v2(ctx_[1]);
    (void)cuCtxGetCurrent(&after_push);
  }).join();
  EXPECT_EQ(seen, nullptr) << "a new thread starts with no context";
  EXPECT_EQ(pushed, kOk);
  EXPECT_EQ(after_push, ctx_[1]);
  EXPECT_EQ(current(), ctx_[0]) << "the other thread's push left this thread alone";
}

// Every attribute of a device allocation made in each device's context.
TEST_F(FakeDriver, PointerAttributesNameTheAllocatingContext) {
  CUdeviceptr mem[2] = {};
  for (int d = 0; d < 2; ++d) {
    ASSERT_EQ(cuCtxPushCurrent_v2(ctx_[d]), kOk);
    ASSERT_EQ(cuMemAlloc_v2(&mem[d], 4096), kOk);
    ASSERT_EQ(cuCtxPopCurrent_v2(nullptr), kOk);
  }
  ASSERT_EQ(cuCtxPushCurrent_v2(ctx_[0]), kOk);  // DEVICE_POINTER needs a current context
  for (int d = 0; d < 2; ++d) {
    const CUdeviceptr inner = mem[d] + 100;
    CUcontext ctx = nullptr;
    unsigned type = 0;
    CUdeviceptr device_pointer = 0;
    int ordinal = -1;
    EXPECT_EQ(cuPointerGetAttribute(&ctx, kAttrContext, inner), kOk);
    EXPECT_EQ(ctx, ctx_[d]);
    EXPECT_EQ(cuPointerGetAttribute(&type, kAttrMemoryType, inner), kOk);
    EXPECT_EQ(type, kMemoryTypeDevice);
    EXPECT_EQ(cuPointerGetAttribute(&device_pointer, kAttrDevicePointer, inner), kOk);
    EXPECT_EQ(device_pointer, inner) << "unified addressing: the address itself";
    EXPECT_EQ(cuPointerGetAttribute(&ordinal, kAttrDeviceOrdinal, inner), kOk);
    EXPECT_EQ(ordinal, d);

    // The plural call answers the same, in one go.
    CUcontext ctx2 = nullptr;
    unsigned type2 = 0;
    CUdeviceptr device_pointer2 = 0;
    int ordinal2 = -1;
    int attrs[] = {kAttrContext, kAttrMemoryType, kAttrDevicePointer, kAttrDeviceOrdinal};
    void* data[] = {&ctx2, &type2, &device_pointer2, &ordinal2};
    ASSERT_EQ(cuPointerGetAttributes(4, attrs, data, inner), kOk);
    EXPECT_EQ(ctx2, ctx_[d]);
    EXPECT_EQ(type2, kMemoryTypeDevice);
    EXPECT_EQ(device_pointer2, inner);
    EXPECT_EQ(ordinal2, d);
  }
  for (const CUdeviceptr m : mem) EXPECT_EQ(cuMemFree_v2(m), kOk);
  // Freed memory is memory the driver does not know.
  unsigned type = 0;
  EXPECT_EQ(cuPointerGetAttribute(&type, kAttrMemoryType, mem[1]), kInvalidValue);
}

TEST_F(FakeDriver, HostMemoryHasTheContextItWasMadeIn) {
  ASSERT_EQ(cuCtxPushCurrent_v2(ctx_[1]), kOk);
  void* pinned = nullptr;
  ASSERT_EQ(cuMemHostAlloc(&pinned, 8192, 0), kOk);
  std::vector<char> plain(8192);
  ASSERT_EQ(cuMemHostRegister_v2(plain.data(), plain.size(), 0), kOk);
  for (void* p : {pinned, static_cast<void*>(plain.data())}) {
    CUcontext ctx = nullptr;
    unsigned type = 0;
    int ordinal = -1;
    CUdeviceptr device_pointer = 0;
    EXPECT_EQ(cuPointerGetAttribute(&ctx, kAttrContext, dptr(p)), kOk);
    EXPECT_EQ(ctx, ctx_[1]);
    EXPECT_EQ(cuPointerGetAttribute(&type, kAttrMemoryType, dptr(p)), kOk);
    EXPECT_EQ(type, kMemoryTypeHost);
    EXPECT_EQ(cuPointerGetAttribute(&ordinal, kAttrDeviceOrdinal, dptr(p)), kOk);
    EXPECT_EQ(ordinal, 1);
    EXPECT_EQ(cuPointerGetAttribute(&device_pointer, kAttrDevicePointer, dptr(p)), kOk);
    EXPECT_EQ(device_pointer, dptr(p));
  }
  EXPECT_EQ(cuMemHostUnregister(plain.data()), kOk);
  EXPECT_EQ(cuMemFreeHost(pinned), kOk);
}

TEST_F(FakeDriver, UnknownMemoryGetsEmptyAttributesNotAnError) {
  std::vector<char> plain(64);
  for (const int attr : {kAttrContext, kAttrMemoryType, kAttrDevicePointer, kAttrDeviceOrdinal}) {
    std::uint64_t sink = 0;
    EXPECT_EQ(cuPointerGetAttribute(&sink, attr, dptr(plain.data())), kInvalidValue) << attr;
  }
  CUcontext ctx = reinterpret_cast<CUcontext>(1);
  unsigned type = 99;
  CUdeviceptr device_pointer = 99;
  int ordinal = 99;
  int attrs[] = {kAttrContext, kAttrMemoryType, kAttrDevicePointer, kAttrDeviceOrdinal};
  void* data[] = {&ctx, &type, &device_pointer, &ordinal};
  ASSERT_EQ(cuPointerGetAttributes(4, attrs, data, dptr(plain.data())), kOk);
  EXPECT_EQ(ctx, nullptr);
  EXPECT_EQ(type, 0U);
  EXPECT_EQ(device_pointer, 0U);
  EXPECT_EQ(ordinal, -2) << "cudaInvalidDeviceId, never a real device's ordinal";
}

TEST_F(FakeDriver, PointerAttributeArgumentsAreChecked) {
  ASSERT_EQ(cuCtxPushCurrent_v2(ctx_[0]), kOk);
  CUdeviceptr mem = 0;
  ASSERT_EQ(cuMemAlloc_v2(&mem, 4096), kOk);
  void* host = nullptr;
  EXPECT_EQ(cuPointerGetAttribute(&host, kAttrHostPointer, mem), kInvalidValue)
      << "an attribute the fake does not model is refused, not made up";
  EXPECT_EQ(cuPointerGetAttribute(nullptr, kAttrMemoryType, mem), kInvalidValue);
  int attr = kAttrMemoryType;
  unsigned type = 0;
  void* data[] = {&type};
  void* no_data[] = {nullptr};
  EXPECT_EQ(cuPointerGetAttributes(1, nullptr, data, mem), kInvalidValue);
  EXPECT_EQ(cuPointerGetAttributes(1, &attr, nullptr, mem), kInvalidValue);
  EXPECT_EQ(cuPointerGetAttributes(1, &attr, no_data, mem), kInvalidValue);
  EXPECT_EQ(cuPointerGetAttributes(0, nullptr, nullptr, mem), kOk);
  // DEVICE_POINTER answers for the current context: without one, none.
  ASSERT_EQ(cuCtxPopCurrent_v2(nullptr), kOk);
  CUdeviceptr device_pointer = 0;
  EXPECT_EQ(cuPointerGetAttribute(&device_pointer, kAttrDevicePointer, mem), kInvalidContext);
  ASSERT_EQ(cuCtxPushCurrent_v2(ctx_[0]), kOk);
  EXPECT_EQ(cuMemFree_v2(mem), kOk);
}

TEST_F(FakeDriver, MemcpyAsyncCopiesEveryDirection) {
  ASSERT_EQ(cuCtxPushCurrent_v2(ctx_[0]), kOk);
  CUdeviceptr a = 0;
  CUdeviceptr b = 0;
  ASSERT_EQ(cuMemAlloc_v2(&a, 4096), kOk);
  ASSERT_EQ(cuMemAlloc_v2(&b, 4096), kOk);
  CUstream stream = nullptr;
  ASSERT_EQ(cuStreamCreate(&stream, 0), kOk);
  std::vector<unsigned char> src(4096);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 7 + 3);
  std::vector<unsigned char> back(4096, 0);
  std::vector<unsigned char> host_copy(4096, 0);
  EXPECT_EQ(cuMemcpyAsync(a + 16, dptr(src.data()), 4000, stream), kOk);   // host to device
  EXPECT_EQ(cuMemcpyAsync(b, a, 4096, nullptr), kOk);                      // device to device
  EXPECT_EQ(cuMemcpyAsync(dptr(back.data()), b + 16, 4000, stream), kOk);  // device to host
  EXPECT_EQ(cuMemcpyAsync(dptr(host_copy.data()), dptr(back.data()), 4000, stream), kOk);
  EXPECT_EQ(std::memcmp(back.data(), src.data(), 4000), 0);
  EXPECT_EQ(std::memcmp(host_copy.data(), src.data(), 4000), 0);

  EXPECT_EQ(cuMemcpyAsync(a + 1, dptr(src.data()), 4096, stream), kInvalidValue)
      << "past the end of the device allocation";
  EXPECT_EQ(cuMemcpyAsync(dptr(back.data()), b + 4000, 97, stream), kInvalidValue);
  EXPECT_EQ(cuMemcpyAsync(0, dptr(src.data()), 16, stream), kInvalidValue);
  auto* bogus_stream = reinterpret_cast<CUstream>(&stream);
  EXPECT_EQ(cuMemcpyAsync(a, dptr(src.data()), 16, bogus_stream), kInvalidHandle);
  ASSERT_EQ(cuCtxPopCurrent_v2(nullptr), kOk);
  EXPECT_EQ(cuMemcpyAsync(a, dptr(src.data()), 16, nullptr), kInvalidContext);
  ASSERT_EQ(cuCtxPushCurrent_v2(ctx_[0]), kOk);
  EXPECT_EQ(cuStreamDestroy_v2(stream), kOk);
  EXPECT_EQ(cuMemFree_v2(a), kOk);
  EXPECT_EQ(cuMemFree_v2(b), kOk);
}

TEST_F(FakeDriver, ErrorStringsBesideErrorNames) {
  const char* name = nullptr;
  const char* text = nullptr;
  for (const CUresult code : {0, 1, 2, 3, 100, 101, 201, 400, 500, 600, 700, 712, 713, 800, 999}) {
    ASSERT_EQ(cuGetErrorName(code, &name), kOk) << code;
    ASSERT_EQ(cuGetErrorString(code, &text), kOk) << code;
    ASSERT_NE(name, nullptr);
    ASSERT_NE(text, nullptr);
    EXPECT_STRNE(name, text) << code;
    EXPECT_GT(std::strlen(text), 5U) << code;
  }
  ASSERT_EQ(cuGetErrorString(201, &text), kOk);
  EXPECT_STREQ(text, "invalid device context");
  text = "stale";
  EXPECT_EQ(cuGetErrorString(12345, &text), kInvalidValue);
  EXPECT_EQ(text, nullptr) << "the driver's answer for a code it does not know";
  EXPECT_EQ(cuGetErrorString(0, nullptr), kInvalidValue);
}

TEST_F(FakeDriver, DeviceAttributesMatchTheFakesOtherAnswers) {
  for (int d = 0; d < 2; ++d) {
    char bus_id[32] = {};
    ASSERT_EQ(cuDeviceGetPCIBusId(bus_id, sizeof bus_id, d), kOk);
    int domain = -1;
    int bus = -1;
    int device = -1;
    ASSERT_EQ(cuDeviceGetAttribute(&domain, 50, d), kOk);
    ASSERT_EQ(cuDeviceGetAttribute(&bus, 33, d), kOk);
    ASSERT_EQ(cuDeviceGetAttribute(&device, 34, d), kOk);
    char expect[32];
    std::snprintf(expect, sizeof expect, "%04x:%02x:%02x.0", domain, bus, device);
    EXPECT_STREQ(bus_id, expect) << "PCI attributes and cuDeviceGetPCIBusId agree";
  }
  int v = -1;
  EXPECT_EQ(cuDeviceGetAttribute(&v, 41, 0), kOk);  // UNIFIED_ADDRESSING
  EXPECT_EQ(v, 1) << "pointer attributes report device pointers equal to host addresses";
  EXPECT_EQ(cuDeviceGetAttribute(&v, 99, 0), kOk);  // HOST_REGISTER_SUPPORTED
  EXPECT_EQ(v, 1);
  EXPECT_EQ(cuDeviceGetAttribute(&v, 83, 0), kOk);  // MANAGED_MEMORY: no cuMemAllocManaged
  EXPECT_EQ(v, 0);
  int major = 0;
  EXPECT_EQ(cuDeviceGetAttribute(&major, 75, 1), kOk);
  EXPECT_GE(major, 6) << "cuFile needs compute capability 6.0 or newer";
  EXPECT_EQ(cuDeviceGetAttribute(&v, 41, 2), kInvalidDevice);
  EXPECT_EQ(cuDeviceGetAttribute(&v, -1, 0), kInvalidValue);
  EXPECT_EQ(cuDeviceGetAttribute(&v, 10, 0), kInvalidValue) << "WARP_SIZE: not modelled";
  EXPECT_EQ(cuDeviceGetAttribute(nullptr, 41, 0), kInvalidValue);
}

// FAKE_CUDA_FAIL reaches the new entry points too.
TEST_F(FakeDriver, InjectedFailures) {
  ASSERT_EQ(setenv("FAKE_CUDA_FAIL", "cuCtxPushCurrent_v2:201,cuMemcpyAsync:700", 1), 0);
  EXPECT_EQ(cuCtxPushCurrent_v2(ctx_[0]), kInvalidContext);
  EXPECT_EQ(cuMemcpyAsync(1, 2, 3, nullptr), 700);
  ASSERT_EQ(unsetenv("FAKE_CUDA_FAIL"), 0);
  EXPECT_EQ(cuCtxPushCurrent_v2(ctx_[0]), kOk);
}

}  // namespace
