// cuFile calls from many threads at once (every cuFile API is thread-safe): each thread with its
// own files, many threads on one shared handle, racing registrations, and driver open/close
// references taken and dropped while I/O runs. The TSan build runs this (label concurrency).
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "cufile_test_util.hpp"

namespace cufile_test {
namespace {

constexpr int kThreads = 12;

bool ok(CUfileError_t st) {
  return st.err == CU_FILE_SUCCESS;
}

// Runs fn(i) on kThreads threads, each with the CUDA context current as an application sets it.
template <typename Fn>
void on_threads(Fn fn) {
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([i, &fn] {
      Cuda::get().bind();
      fn(i);
    });
  }
  for (auto& t : threads) t.join();
}

class Concurrency : public ::testing::Test {
 protected:
  void SetUp() override {
    if (device_memory()) {
      ASSERT_TRUE(Cuda::get().ok());
    }
    Cuda::get().bind();
    ASSERT_TRUE(ok(cuFileDriverOpen()));
  }
  void TearDown() override { EXPECT_TRUE(ok(cuFileDriverClose())); }
  TempDir dir_;
};

TEST_F(Concurrency, EachThreadItsOwnFileSyncBatchAndAsync) {
  on_threads([&](int t) {
    ASSERT_TRUE(ok(cuFileDriverOpen()));  // each thread holds its own reference
    // Appended, not `"t" + std::to_string(t)`: GCC 12 at -O3 flags that (bogus -Wrestrict, GCC
    // bug 105329).
    std::string name = "t";
    name += std::to_string(t);
    const std::string path = dir_.file(name);
    const auto data = random_bytes(300000, static_cast<unsigned>(t));
    const int fd = open_file(path, O_CREAT | O_RDWR);
    ASSERT_GE(fd, 0);
    CUfileHandle_t fh = nullptr;
    ASSERT_TRUE(ok(register_fd(&fh, fd)));
    Buffer buf(300000, device_memory()), back(300000, device_memory());
    buf.fill(data);
    ASSERT_TRUE(ok(cuFileBufRegister(buf.get(), buf.size(), 0)));
    for (int i = 0; i < 8; ++i) {
      const off_t at = (i * 4099) % 5000;
      const size_t n = 300000 - static_cast<size_t>(at);
      ASSERT_EQ(cuFileWrite(fh, buf.get(), n, at, at), static_cast<ssize_t>(n));
      ASSERT_EQ(cuFileRead(fh, back.get(), n, at, at), static_cast<ssize_t>(n));
      ASSERT_EQ(back.bytes(static_cast<size_t>(at), n),
                std::vector<unsigned char>(data.begin() + at, data.end()));
    }
    // A batch of four reads.
    CUfileBatchHandle_t batch = nullptr;
    ASSERT_TRUE(ok(cuFileBatchIOSetUp(&batch, 4)));
    CUfileIOParams_t io[4];
    std::memset(io, 0, sizeof io);
    for (int i = 0; i < 4; ++i) {
      io[i].mode = CUFILE_BATCH;
      io[i].fh = fh;
      io[i].opcode = CUFILE_READ;
      io[i].u.batch.devPtr_base = back.get();
      io[i].u.batch.file_offset = i * 75000;
      io[i].u.batch.devPtr_offset = i * 75000;
      io[i].u.batch.size = 75000;
    }
    ASSERT_TRUE(ok(cuFileBatchIOSubmit(batch, 4, io, 0)));
    CUfileIOEvents_t ev[4];
    unsigned nr = 4;
    ASSERT_TRUE(ok(cuFileBatchIOGetStatus(batch, 4, &nr, ev, nullptr)));
    ASSERT_EQ(nr, 4U);
    for (const auto& e : ev) EXPECT_EQ(e.status, CUFILE_COMPLETE);
    cuFileBatchIODestroy(batch);
    EXPECT_EQ(back.bytes(0, 300000), data);
    // And one asynchronous read on the NULL stream.
    size_t size = 1000;
    off_t file_off = 7, buf_off = 0;
    ssize_t got = 0;
    ASSERT_TRUE(ok(cuFileReadAsync(fh, back.get(), &size, &file_off, &buf_off, &got, nullptr)));
    EXPECT_EQ(got, 1000);
    ASSERT_TRUE(ok(cuFileBufDeregister(buf.get())));
    cuFileHandleDeregister(fh);
    ::close(fd);
    ASSERT_TRUE(ok(cuFileDriverClose()));
  });
}

TEST_F(Concurrency, ManyThreadsOnOneHandle) {
  constexpr size_t piece = 65537;
  const std::string path = dir_.file("shared");
  const int fd = open_file(path, O_CREAT | O_RDWR);
  CUfileHandle_t fh = nullptr;
  ASSERT_TRUE(ok(register_fd(&fh, fd)));
  std::atomic<int> registered{0};
  on_threads([&](int t) {
    const auto data = random_bytes(piece, static_cast<unsigned>(100 + t));
    Buffer buf(piece, device_memory()), back(piece, device_memory());
    buf.fill(data);
    // Registration of buffers races with I/O of the other threads.
    if (ok(cuFileBufRegister(buf.get(), piece, 0))) registered.fetch_add(1);
    const auto at = static_cast<off_t>(static_cast<size_t>(t) * piece);
    for (int i = 0; i < 5; ++i) {
      ASSERT_EQ(cuFileWrite(fh, buf.get(), piece, at, 0), static_cast<ssize_t>(piece));
      ASSERT_EQ(cuFileRead(fh, back.get(), piece, at, 0), static_cast<ssize_t>(piece));
      ASSERT_EQ(back.bytes(0, piece), data);
    }
    EXPECT_TRUE(ok(cuFileBufDeregister(buf.get())));
  });
  EXPECT_EQ(registered.load(), kThreads);
  cuFileHandleDeregister(fh);
  ::close(fd);
  const auto file = read_file(path);
  ASSERT_EQ(file.size(), kThreads * piece);
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(std::vector<unsigned char>(file.begin() + static_cast<long>(t * piece),
                                         file.begin() + static_cast<long>((t + 1) * piece)),
              random_bytes(piece, static_cast<unsigned>(100 + t)));
  }
}

TEST_F(Concurrency, RacingRegistrationsOfOneFdAndOneBuffer) {
  write_file(dir_.file("f"), random_bytes(4096, 1));
  const int fd = open_file(dir_.file("f"), O_RDONLY);
  Buffer buf(4096, device_memory());
  for (int round = 0; round < 5; ++round) {
    std::atomic<int> handles{0}, already{0}, bufs{0}, buf_already{0};
    std::vector<CUfileHandle_t> fhs(kThreads, nullptr);
    on_threads([&](int t) {
      const CUfileError_t st = register_fd(&fhs[static_cast<size_t>(t)], fd);
      (ok(st) ? handles : already).fetch_add(1);
      if (!ok(st)) {
        EXPECT_EQ(st.err, CU_FILE_HANDLE_ALREADY_REGISTERED);
      }
      const CUfileError_t bst = cuFileBufRegister(buf.get(), 4096, 0);
      (ok(bst) ? bufs : buf_already).fetch_add(1);
      if (!ok(bst)) {
        EXPECT_EQ(bst.err, CU_FILE_MEMORY_ALREADY_REGISTERED);
      }
    });
    EXPECT_EQ(handles.load(), 1);
    EXPECT_EQ(already.load(), kThreads - 1);
    EXPECT_EQ(bufs.load(), 1);
    for (CUfileHandle_t fh : fhs) {
      if (fh != nullptr) cuFileHandleDeregister(fh);
    }
    ASSERT_TRUE(ok(cuFileBufDeregister(buf.get())));
  }
  ::close(fd);
}

TEST_F(Concurrency, DriverReferencesComeAndGoDuringIo) {
  write_file(dir_.file("f"), random_bytes(1 << 20, 2));
  const int fd = open_file(dir_.file("f"), O_RDONLY);
  CUfileHandle_t fh = nullptr;
  ASSERT_TRUE(ok(register_fd(&fh, fd)));
  const long before = cuFileUseCount();
  on_threads([&](int t) {
    Buffer buf(1 << 16, device_memory());
    for (int i = 0; i < 20; ++i) {
      if (t % 2 == 0) {
        ASSERT_TRUE(ok(cuFileDriverOpen()));
        ASSERT_TRUE(ok(cuFileDriverClose()));
      } else {
        ASSERT_EQ(cuFileRead(fh, buf.get(), 1 << 16, (i * 4096) % (1 << 19), 0), 1 << 16);
      }
    }
  });
  EXPECT_EQ(cuFileUseCount(), before);
  cuFileHandleDeregister(fh);
  ::close(fd);
}

// Deregistering a handle with I/O in flight is undefined in NVIDIA's cuFile ("call only with no
// outstanding IO"). Here it must not crash: each batch entry and stream-ordered call looks its
// handle up when it runs and holds it until done, so it either completes with the right bytes or
// fails with CU_FILE_HANDLE_NOT_REGISTERED. ASan (and TSan: label concurrency) check the rest.
TEST_F(Concurrency, DeregisteringWithIoInFlightNeverCrashes) {
  constexpr size_t piece = 65536;
  constexpr unsigned entries = 16;
  const std::string path = dir_.file("inflight");
  const auto data = random_bytes(entries * piece, 77);
  write_file(path, data);
  const int fd = open_file(path, O_RDONLY);
  Buffer back(entries * piece, device_memory());
  CUstream stream = device_memory() ? Cuda::get().create_stream() : nullptr;
  unsigned completed = 0, refused = 0;
  // Each entry: done with the right bytes, or refused for the handle; anything else is counted.
  auto check = [&](unsigned i, ssize_t ret) {
    const auto at = static_cast<std::ptrdiff_t>(i * piece);
    if (ret == static_cast<ssize_t>(piece) &&
        back.bytes(i * piece, piece) ==
            std::vector<unsigned char>(data.begin() + at, data.begin() + at + static_cast<std::ptrdiff_t>(piece))) {
      ++completed;
    } else {
      EXPECT_EQ(ret, -CU_FILE_HANDLE_NOT_REGISTERED) << "entry " << i;
      ++refused;
    }
  };
  for (int round = 0; round < 5; ++round) {
    CUfileHandle_t fh = nullptr;
    ASSERT_TRUE(ok(register_fd(&fh, fd)));
    CUfileBatchHandle_t batch = nullptr;
    ASSERT_TRUE(ok(cuFileBatchIOSetUp(&batch, entries)));
    CUfileIOParams_t io[entries];
    std::memset(io, 0, sizeof io);
    for (unsigned i = 0; i < entries; ++i) {
      io[i].mode = CUFILE_BATCH;
      io[i].fh = fh;
      io[i].opcode = CUFILE_READ;
      io[i].cookie = reinterpret_cast<void*>(static_cast<std::uintptr_t>(i));
      io[i].u.batch.devPtr_base = back.get();
      io[i].u.batch.file_offset = static_cast<off_t>(i * piece);
      io[i].u.batch.devPtr_offset = static_cast<off_t>(i * piece);
      io[i].u.batch.size = piece;
    }
    ASSERT_TRUE(ok(cuFileBatchIOSubmit(batch, entries, io, 0)));
    cuFileHandleDeregister(fh);
    CUfileIOEvents_t ev[entries];
    unsigned nr = entries;
    ASSERT_TRUE(ok(cuFileBatchIOGetStatus(batch, entries, &nr, ev, nullptr)));
    ASSERT_EQ(nr, entries);
    for (const auto& e : ev) {
      const auto ret = static_cast<ssize_t>(e.ret);
      EXPECT_EQ(e.status == CUFILE_COMPLETE, ret >= 0) << "status " << e.status << ", ret " << ret;
      check(static_cast<unsigned>(reinterpret_cast<std::uintptr_t>(e.cookie)), ret);
    }
    cuFileBatchIODestroy(batch);
    if (stream == nullptr) continue;  // only the NULL stream (synchronous) without libcuda
    // The same on a CUDA stream: the calls read their arguments and look the handle up when the
    // stream reaches them.
    ASSERT_TRUE(ok(register_fd(&fh, fd)));
    std::vector<size_t> sizes(entries, piece);
    std::vector<off_t> offsets(entries), buf_offsets(entries);
    std::vector<ssize_t> got(entries, 0);
    for (unsigned i = 0; i < entries; ++i) {
      offsets[i] = buf_offsets[i] = static_cast<off_t>(i * piece);
      ASSERT_TRUE(ok(cuFileReadAsync(fh, back.get(), &sizes[i], &offsets[i], &buf_offsets[i],
                                     &got[i], stream)));
    }
    cuFileHandleDeregister(fh);
    ASSERT_EQ(Cuda::get().synchronize(stream), 0);
    for (unsigned i = 0; i < entries; ++i) check(i, got[i]);
  }
  EXPECT_EQ(completed + refused, (stream != nullptr ? 10U : 5U) * entries);
  if (stream != nullptr) Cuda::get().destroy_stream(stream);
  ::close(fd);
}

}  // namespace
}  // namespace cufile_test
