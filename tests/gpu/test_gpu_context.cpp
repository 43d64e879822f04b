// libsluice leaves the calling thread's CUDA context stack as it found it. An application that
// pushed another GPU's context (cuda:1 here, over the fake libcuda with two devices) gets that
// context back from cuCtxGetCurrent and cuCtxPopCurrent after any sluice call on cuda:0: device
// methods, a read through libsluice, and a cuFileRead through libsluice_cufile. Before the fix,
// the device's cuCtxSetCurrent replaced the top of the caller's stack with cuda:0's context.
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>

#include "cufile.h"
#include "gpu/cuda_api.hpp"
#include "gpu_test_util.hpp"

namespace sluice {
namespace {

namespace cu = detail::cu;
using gpu_test::DeviceMemory;
using test::random_bytes;
using test::same_bytes;
using test::TempDir;
using test::test_seed;
using test::write_file;

constexpr std::size_t kSize = 1 << 20;

class CallerContext : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!gpu_test::need_mode("two_fake_gpus", gpu_test::fake_cuda_loaded(), &why)) GTEST_SKIP() << why;
    api_ = cu::driver();
    ASSERT_NE(api_, nullptr);
    int count = 0;
    ASSERT_EQ(api_->cuDeviceGetCount(&count), cu::success);
    ASSERT_GE(count, 2) << "the entry sets FAKE_CUDA_DEVICES=2";
    dev_ = gpu_test::try_open("cuda:0", &why);
    ASSERT_NE(dev_, nullptr) << why;
    ASSERT_EQ(api_->cuDevicePrimaryCtxRetain(&other_, 1), cu::success);
    ASSERT_EQ(api_->cuDevicePrimaryCtxRetain(&own_, 0), cu::success);
    ASSERT_NE(other_, own_);
    ASSERT_EQ(current(), nullptr) << "the thread starts with an empty stack";
    data_ = random_bytes(kSize, test_seed(31));
    path_ = dir_.file("data.bin");
    write_file(path_, data_);
  }
  void TearDown() override {
    if (api_ == nullptr || other_ == nullptr) return;
    EXPECT_EQ(api_->cuDevicePrimaryCtxRelease_v2(1), cu::success);
    EXPECT_EQ(api_->cuDevicePrimaryCtxRelease_v2(0), cu::success);
  }

  cu::CUcontext current() const {
    auto c = reinterpret_cast<cu::CUcontext>(std::uintptr_t{1});  // not a context: must be overwritten
    EXPECT_EQ(api_->cuCtxGetCurrent(&c), cu::success);
    return c;
  }
  // The caller's stack after a sluice call: cuda:1's context on top, and nothing below it.
  void expect_stack_untouched(const char* after) const {
    EXPECT_EQ(current(), other_) << "after " << after;
    cu::CUcontext popped = nullptr;
    EXPECT_EQ(api_->cuCtxPopCurrent_v2(&popped), cu::success) << after;
    EXPECT_EQ(popped, other_) << "after " << after << ": the pop gave back another context";
    EXPECT_EQ(current(), nullptr) << "after " << after << ": something was left below";
  }

  const cu::Api* api_ = nullptr;
  std::shared_ptr<Device> dev_;
  cu::CUcontext other_ = nullptr;
  cu::CUcontext own_ = nullptr;
  TempDir dir_{"/tmp"};
  std::string path_;
  std::vector<std::byte> data_;
};

TEST_F(CallerContext, DeviceMethodsGiveTheCallersContextBack) {
  ASSERT_EQ(api_->cuCtxPushCurrent_v2(other_), cu::success);
  void* p = dev_->alloc(4096);
  StreamHandle s = dev_->create_stream();
  EventHandle e = dev_->create_event();
  dev_->record_event(e, s);
  dev_->wait_event(e);
  EXPECT_EQ(dev_->pointer_kind(p), MemoryKind::device);
  dev_->destroy_event(e);
  dev_->destroy_stream(s);
  dev_->free(p);
  expect_stack_untouched("device methods");
}

TEST_F(CallerContext, SluiceReadGivesTheCallersContextBack) {
  DeviceMemory mem(dev_, kSize);
  const File f = File::open(path_, OpenMode::read);
  ASSERT_EQ(api_->cuCtxPushCurrent_v2(other_), cu::success);
  TransferOptions opts;
  opts.device = dev_;
  const TransferResult r = read(f, mem.data(), kSize, 0, opts);
  expect_stack_untouched("sluice::read");
  EXPECT_EQ(r.bytes, kSize);
  EXPECT_NE(r.path, Path::host) << r.reason;
  EXPECT_TRUE(same_bytes(mem.download(), data_));
}

TEST_F(CallerContext, CuFileReadGivesTheCallersContextBack) {
  DeviceMemory mem(dev_, kSize);
  ASSERT_EQ(cuFileDriverOpen().err, CU_FILE_SUCCESS);
  const int fd = ::open(path_.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  CUfileDescr_t descr{};
  descr.handle.fd = fd;
  descr.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
  CUfileHandle_t fh = nullptr;
  ASSERT_EQ(cuFileHandleRegister(&fh, &descr).err, CU_FILE_SUCCESS);
  ASSERT_EQ(api_->cuCtxPushCurrent_v2(other_), cu::success);
  const ssize_t n = cuFileRead(fh, mem.data(), kSize, 0, 0);
  expect_stack_untouched("cuFileRead");
  EXPECT_EQ(n, static_cast<ssize_t>(kSize));
  EXPECT_TRUE(same_bytes(mem.download(), data_));
  cuFileHandleDeregister(fh);
  ::close(fd);
  EXPECT_EQ(cuFileDriverClose().err, CU_FILE_SUCCESS);
}

}  // namespace
}  // namespace sluice
