// Asynchronous, stream-ordered and batch transfers into device memory, on the simulated device
// and the CUDA device over the fake libcuda. Stream order is observed through the data: the work
// enqueued before a stream transfer changes the file (or the device memory) it moves, and the
// work enqueued after it copies the result out.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "gpu/cufile_api.hpp"
#include "gpu_test_util.hpp"
#include "sluice/units.hpp"

namespace sluice {
namespace {

using gpu_test::contains;
using gpu_test::DeviceMemory;
using gpu_test::throws_error;
using test::Folder;


class Async : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string why;
    if (!gpu_test::need_mode("no_cufile", !detail::CuFile::instance().available(), &why)) GTEST_SKIP() << why;
    dev_ = gpu_test::try_open(GetParam(), &why);
    if (!dev_) {
      if (GetParam() != "sim" && !gpu_test::mode().empty()) FAIL() << "the fake libcuda should load: " << why;
      GTEST_SKIP() << why;
    }
    const auto root = test::folder_root(Folder::disk, &why);
    if (!root) GTEST_SKIP() << why;
    dir_ = std::make_unique<test::TempDir>(*root, "sluice-gpu-async-");
  }

  TransferOptions options(std::optional<Path> p = std::nullopt) const {
    return {.config = gpu_test::make_config({"auto_t2_q4", "auto", 2, 4, true, 64 * KiB}), .device = dev_, .path = p};
  }

  std::shared_ptr<Device> dev_;
  std::unique_ptr<test::TempDir> dir_;
};

TEST_P(Async, ReadAsyncAndWriteAsyncWithDeviceMemory) {
  const std::uint64_t size = 6 * MiB + 99;
  const std::string path = dir_->file("in.bin");
  const auto data = test::random_bytes(size, test::test_seed(21));
  test::write_file(path, data);
  const File f = File::open(path, OpenMode::read);

  constexpr int n = 16;
  const std::optional<Path> paths[] = {Path::bounce, Path::posix, std::nullopt};
  std::mt19937_64 rng(test::test_seed(22));
  struct Job {
    std::uint64_t off, len;
    std::size_t dev_off;
    std::unique_ptr<DeviceMemory> mem;
    TransferFuture fut;
  };
  std::vector<Job> jobs(n);
  for (int i = 0; i < n; ++i) {
    Job& j = jobs[static_cast<std::size_t>(i)];
    j.off = rng() % size;
    j.len = rng() % (2 * MiB);
    j.dev_off = static_cast<std::size_t>(rng() % 5000);
    j.mem = std::make_unique<DeviceMemory>(dev_, j.dev_off + j.len);
    j.fut = read_async(f, j.mem->data() + j.dev_off, j.len, j.off, options(paths[i % 3]));
  }
  for (Job& j : jobs) {
    const TransferResult r = j.fut.get();
    const auto want = test::pread_file(path, j.off, j.len);
    ASSERT_EQ(r.bytes, want.size());
    EXPECT_TRUE(test::same_bytes(j.mem->download(j.dev_off, want.size()), want));
  }

  // Writes of disjoint ranges of one file, all at once.
  const std::string out = dir_->file("out.bin");
  const File w = File::open(out, OpenMode::read_write);
  constexpr std::uint64_t piece = 300001;
  std::vector<std::unique_ptr<DeviceMemory>> src;
  std::vector<TransferFuture> futs;
  for (int i = 0; i < 8; ++i) {
    src.push_back(std::make_unique<DeviceMemory>(dev_, piece));
    src.back()->upload(std::span(data).subspan(static_cast<std::size_t>(i) * piece, piece));
    futs.push_back(write_async(w, src.back()->data(), piece, static_cast<std::uint64_t>(i) * piece,
                               options(paths[i % 3])));
  }
  for (auto& fu : futs) EXPECT_EQ(fu.get().bytes, piece);
  EXPECT_TRUE(test::same_bytes(test::read_whole(out), std::span(data).first(8 * piece)));
}

// Work before it on the stream: sleeps, then rewrites the file and raises a flag.
struct RewriteFile {
  std::string path;
  std::vector<std::byte> bytes;
  std::atomic<bool> done{false};
  static void run(void* arg) {
    auto* s = static_cast<RewriteFile*>(arg);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    test::pwrite_file(s->path, s->bytes, 0);
    s->done = true;
  }
};

// Work after it on the stream: records that it ran and what the host copy held by then.
struct AfterProbe {
  const std::vector<std::byte>* host = nullptr;
  const std::vector<std::byte>* want = nullptr;
  std::string file;  // when set: compare the file instead
  std::atomic<bool> ran{false};
  std::atomic<bool> matched{false};
  static void run(void* arg) {
    auto* p = static_cast<AfterProbe*>(arg);
    if (p->file.empty()) {
      p->matched = *p->host == *p->want;
    } else {
      p->matched = test::pread_file(p->file, 0, p->want->size()) == *p->want;
    }
    p->ran = true;
  }
};

TEST_P(Async, ReadOnStreamRunsInStreamOrder) {
  const std::uint64_t n = 3 * MiB + 5;
  const std::string path = dir_->file("s.bin");
  test::write_file(path, test::random_bytes(n, 1));  // the old contents
  RewriteFile before;
  before.path = path;
  before.bytes = test::random_bytes(n, 2);           // what the read must see
  const File f = File::open(path, OpenMode::read);
  DeviceMemory mem(dev_, n);
  std::vector<std::byte> host(n);
  AfterProbe after;
  after.host = &host;
  after.want = &before.bytes;

  const Stream s(dev_);
  dev_->launch_host_func(s.get(), &RewriteFile::run, &before);
  auto fut = read_on_stream(f, mem.data(), n, 0, s, options());
  dev_->copy_to_host_async(host.data(), mem.data(), n, s.get());
  dev_->launch_host_func(s.get(), &AfterProbe::run, &after);

  const TransferResult r = fut.get();
  EXPECT_TRUE(before.done.load()) << "the transfer finished before the work ahead of it";
  EXPECT_EQ(r.bytes, n);
  EXPECT_EQ(r.path, Path::bounce);
  EXPECT_TRUE(contains(r.reason, "libcufile"));
  s.synchronize();
  EXPECT_TRUE(after.ran.load());
  EXPECT_TRUE(after.matched.load()) << "work after the transfer ran before its bytes were there";
  EXPECT_TRUE(test::same_bytes(host, before.bytes)) << "the read did not see the rewrite enqueued ahead of it";
  EXPECT_TRUE(test::same_bytes(mem.download(), before.bytes));
}

TEST_P(Async, WriteOnStreamWritesWhatTheCopiesBeforeItPut) {
  const std::uint64_t n = 2 * MiB + 3;
  const auto old_bytes = test::random_bytes(n, 3);
  const auto new_bytes = test::random_bytes(n, 4);
  const std::string path = dir_->file("w.bin");
  const File f = File::open(path, OpenMode::read_write);
  DeviceMemory mem(dev_, n);
  mem.upload(old_bytes);

  struct Sleep {
    static void run(void*) { std::this_thread::sleep_for(std::chrono::milliseconds(50)); }
  };
  AfterProbe after;
  after.want = &new_bytes;
  after.file = path;

  const Stream s(dev_);
  dev_->launch_host_func(s.get(), &Sleep::run, nullptr);
  dev_->copy_to_device_async(mem.data(), new_bytes.data(), n, s.get());
  auto fut = write_on_stream(f, mem.data(), n, 0, s, options(Path::bounce));
  dev_->launch_host_func(s.get(), &AfterProbe::run, &after);
  EXPECT_EQ(fut.get().bytes, n);
  s.synchronize();
  EXPECT_TRUE(after.ran.load());
  EXPECT_TRUE(after.matched.load()) << "work after the write ran before the file had the bytes";
  EXPECT_TRUE(test::same_bytes(test::read_whole(path), new_bytes)) << "the write did not wait for the copy before it";
}

TEST_P(Async, StreamTransferErrorsArriveThroughTheFuture) {
  const std::string path = dir_->file("e.bin");
  test::write_file(path, test::random_bytes(8192, 5));
  const File wo = File::open(path, OpenMode::write);
  DeviceMemory mem(dev_, 8192);
  AfterProbe after;
  const std::vector<std::byte> none;
  after.host = &none;
  after.want = &none;
  const Stream s(dev_);
  auto fut = read_on_stream(wo, mem.data(), 4096, 0, s, options());
  dev_->launch_host_func(s.get(), &AfterProbe::run, &after);
  EXPECT_TRUE(throws_error([&] { (void)fut.get(); }, ErrorDomain::usage, {"writing only"}));
  s.synchronize();
  EXPECT_TRUE(after.ran.load()) << "the stream goes on after a failed transfer";
}

// Stream-ordered transfers hold their File: the caller drops it (from the heap, so a transfer
// that still pointed at it is a use-after-free ASan reports) and then its Stream right after
// enqueueing, and the bytes still arrive. On the sim device a host function holds the stream
// until the File is gone (the fake libcuda runs stream work at once, on the caller).
TEST_P(Async, StreamTransfersHoldTheirFile) {
  const std::uint64_t n = MiB + 333;
  const std::string in = dir_->file("held-in.bin");
  const std::string out = dir_->file("held-out.bin");
  const auto data = test::random_bytes(n, 12);
  test::write_file(in, data);
  DeviceMemory dst(dev_, n);
  DeviceMemory src(dev_, n);
  src.upload(data);
  std::promise<void> file_gone;
  struct Hold {
    static void run(void* arg) { static_cast<std::shared_future<void>*>(arg)->wait(); }
  };
  std::shared_future<void> gone = file_gone.get_future().share();
  TransferFuture r, w;
  {
    auto stream = std::make_unique<Stream>(dev_);
    if (GetParam() == "sim") dev_->launch_host_func(stream->get(), &Hold::run, &gone);
    auto reading = std::make_unique<File>(File::open(in, OpenMode::read));
    auto writing = std::make_unique<File>(File::open(out, OpenMode::write));
    r = read_on_stream(*reading, dst.data(), n, 0, *stream, options(Path::bounce));
    w = write_on_stream(*writing, src.data(), n, 0, *stream, options(Path::posix));
    reading.reset();
    writing.reset();
    file_gone.set_value();
    stream.reset();  // the device finishes what is queued (the sim device waits for it here)
  }
  EXPECT_EQ(r.get().bytes, n);
  EXPECT_EQ(w.get().bytes, n);
  EXPECT_TRUE(test::same_bytes(dst.download(), data));
  EXPECT_TRUE(test::same_bytes(test::read_whole(out), data));
}

bool stream_waits_disabled() {
  const char* f = std::getenv("FAKE_CUDA_FAIL");
  return f != nullptr && std::string_view(f).find("cuStreamWaitValue32_v2") != std::string_view::npos;
}

// CUDA runs the host functions of every stream on one driver thread and forbids them to wait for
// device work. The transfer's host function must only start the work: here the work cannot finish
// until a host function on another stream, enqueued after it, has run. A host function that held
// its thread until the work was done would stall both until the work gave up.
TEST_P(Async, StreamTransferLeavesTheHostFunctionThreadFree) {
  if (stream_waits_disabled()) GTEST_SKIP() << "this entry disables stream memory operations";
  struct Flag {
    std::atomic<bool> set{false};
    static void raise(void* arg) { static_cast<Flag*>(arg)->set = true; }
  };
  Flag other_stream_ran;
  std::atomic<bool> work_started{false};
  std::atomic<bool> work_done{false};
  const Stream s1(dev_);
  const Stream s2(dev_);
  auto fut = run_on_stream(dev_, s1.get(), [&] {
    work_started = true;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!other_stream_ran.set.load() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (!other_stream_ran.set.load()) {
      throw Error(ErrorDomain::usage, 0, {.op = "test"}, "the host function on the other stream never ran");
    }
    work_done = true;
    return TransferResult{.bytes = 1, .path = Path::bounce, .reason = "test work"};
  });
  struct Check {  // on s1, behind the transfer: must see the work done
    std::atomic<bool>* done;
    std::atomic<bool> saw_done{false};
    static void run(void* arg) {
      auto* c = static_cast<Check*>(arg);
      c->saw_done = c->done->load();
    }
  };
  Check check{&work_done};
  // Only once the transfer's host function has run (it started the work) may the one on s2 go.
  while (!work_started.load()) std::this_thread::sleep_for(std::chrono::microseconds(100));
  // s2 before s1: the fake libcuda runs work when it is enqueued, so enqueueing on s1 blocks there.
  dev_->launch_host_func(s2.get(), &Flag::raise, &other_stream_ran);
  dev_->launch_host_func(s1.get(), &Check::run, &check);

  const TransferResult r = fut.get();
  EXPECT_EQ(r.bytes, 1U);
  EXPECT_TRUE(contains(r.reason, "stream held by a device-side wait")) << r.reason;
  s1.synchronize();
  EXPECT_TRUE(check.saw_done.load()) << "work behind the transfer on its stream ran before the transfer finished";
}

// A driver without cuStreamWaitValue32 (FAKE_CUDA_FAIL makes the fake refuse it): the stream is
// held by a host function instead, the transfer is still correct and the reason says so.
TEST_P(Async, WithoutStreamMemoryOperationsAHostFunctionHoldsTheStream) {
  if (!stream_waits_disabled() || GetParam() == "sim") {
    GTEST_SKIP() << "for the fake libcuda with FAKE_CUDA_FAIL=cuStreamWaitValue32_v2";
  }
  const std::uint64_t n = MiB + 17;
  const std::string path = dir_->file("h.bin");
  const auto data = test::random_bytes(n, 8);
  test::write_file(path, data);
  const File f = File::open(path, OpenMode::read);
  DeviceMemory mem(dev_, n);
  std::vector<std::byte> host(n);
  const Stream s(dev_);
  auto fut = read_on_stream(f, mem.data(), n, 0, s, options());
  dev_->copy_to_host_async(host.data(), mem.data(), n, s.get());
  s.synchronize();
  const TransferResult r = fut.get();
  EXPECT_EQ(r.bytes, n);
  EXPECT_TRUE(contains(r.reason, "stream held by a waiting host function")) << r.reason;
  EXPECT_TRUE(contains(r.reason, "cuStreamWaitValue32")) << r.reason;
  EXPECT_TRUE(test::same_bytes(host, data)) << "work behind the transfer ran before its bytes were there";
}

// Gates are words reused as soon as they open: far more stream transfers than a page has words,
// one after another and many at once, all keep their order.
TEST_P(Async, ManyMoreStreamTransfersThanGateWords) {
  constexpr int per_wave = 2500;  // more than two pages of gate words closed at once
  const Stream s(dev_);
  for (int wave = 0; wave < 2; ++wave) {  // the second wave reuses the words the first opened
    std::atomic<int> ran{0};
    std::vector<TransferFuture> futs;
    futs.reserve(per_wave);
    for (int i = 0; i < per_wave; ++i) {
      futs.push_back(run_on_stream(dev_, s.get(), [&ran, i] {
        const int before = ran.fetch_add(1);
        return TransferResult{.bytes = static_cast<std::uint64_t>(before == i ? 1 : 0), .reason = "order"};
      }));
    }
    s.synchronize();
    int in_order = 0;
    for (auto& fu : futs) in_order += static_cast<int>(fu.get().bytes);
    EXPECT_EQ(ran.load(), per_wave);
    EXPECT_EQ(in_order, per_wave) << "stream-ordered work on one stream ran out of order";
  }
}

TEST_P(Async, ManyStreamsAtOnce) {
  const std::uint64_t size = 4 * MiB;
  const std::string path = dir_->file("m.bin");
  const auto data = test::random_bytes(size, 6);
  test::write_file(path, data);
  const File f = File::open(path, OpenMode::read);
  constexpr int streams = 6;
  constexpr int per_stream = 4;
  constexpr std::uint64_t each = 128 * KiB + 1;
  std::vector<Stream> s;
  std::vector<std::unique_ptr<DeviceMemory>> mem;
  std::vector<TransferFuture> futs;
  for (int i = 0; i < streams; ++i) {
    s.emplace_back(dev_);
    mem.push_back(std::make_unique<DeviceMemory>(dev_, per_stream * each));
    for (int k = 0; k < per_stream; ++k) {
      const auto off = static_cast<std::uint64_t>(i * per_stream + k) * each;
      futs.push_back(read_on_stream(f, mem.back()->data() + static_cast<std::uint64_t>(k) * each, each, off,
                                    s.back(), options(k % 2 == 0 ? std::optional<Path>{} : Path::posix)));
    }
  }
  for (auto& fu : futs) EXPECT_EQ(fu.get().bytes, each);
  for (int i = 0; i < streams; ++i) {
    s[static_cast<std::size_t>(i)].synchronize();
    const auto off = static_cast<std::size_t>(i * per_stream) * each;
    EXPECT_TRUE(test::same_bytes(mem[static_cast<std::size_t>(i)]->download(),
                                 std::span(data).subspan(off, per_stream * each)));
  }
}

TEST_P(Async, BatchAcrossSeveralFiles) {
  constexpr int files = 4;
  std::vector<std::string> paths;
  std::vector<File> open;
  for (int i = 0; i < files; ++i) {
    paths.push_back(dir_->file(fmt::format("b{}.bin", i)));
    test::write_file(paths.back(), test::random_bytes(MiB + static_cast<std::size_t>(i) * 12345, 30 + static_cast<unsigned>(i)));
    open.push_back(File::open(paths.back(), OpenMode::read));
  }
  constexpr int entries = 48;
  std::mt19937_64 rng(test::test_seed(31));
  std::vector<BatchEntry> batch;
  std::vector<std::unique_ptr<DeviceMemory>> mem;
  for (int i = 0; i < entries; ++i) {
    const auto k = static_cast<std::size_t>(i % files);
    const std::uint64_t fsize = test::file_size(paths[k]);
    const std::uint64_t off = i % 7 == 0 ? fsize - 10 : rng() % fsize;  // some cross the end
    const std::uint64_t len = rng() % (256 * KiB) + 1;
    const std::size_t dev_off = static_cast<std::size_t>(rng() % 3) * 2049;
    mem.push_back(std::make_unique<DeviceMemory>(dev_, dev_off + len));
    batch.push_back({IoOp::read, &open[k], mem.back()->data() + dev_off, len, off});
  }
  auto futs = submit_batch(batch, options());
  ASSERT_EQ(futs.size(), batch.size());
  for (std::size_t i = 0; i < futs.size(); ++i) {
    const TransferResult r = futs[i].get();
    const auto want = test::pread_file(paths[i % files], batch[i].offset, batch[i].size);
    ASSERT_EQ(r.bytes, want.size()) << "entry " << i;
    const auto dev_off = static_cast<std::size_t>(static_cast<std::byte*>(batch[i].buf) - mem[i]->data());
    EXPECT_TRUE(test::same_bytes(mem[i]->download(dev_off, want.size()), want)) << "entry " << i;
  }

  // A batch of writes to disjoint ranges of two files.
  std::vector<std::string> outs = {dir_->file("o0.bin"), dir_->file("o1.bin")};
  std::vector<File> wf;
  for (const auto& p : outs) wf.push_back(File::open(p, OpenMode::read_write));
  const auto data = test::random_bytes(16 * 100000, 40);
  DeviceMemory src(dev_, data.size());
  src.upload(data);
  std::vector<BatchEntry> writes;
  for (int i = 0; i < 16; ++i) {
    const auto k = static_cast<std::uint64_t>(i);
    writes.push_back({IoOp::write, &wf[k % 2], src.data() + k * 100000, 100000, (k / 2) * 100000});
  }
  for (auto& fu : submit_batch(writes, options())) EXPECT_EQ(fu.get().bytes, 100000U);
  for (int i = 0; i < 16; ++i) {
    const auto k = static_cast<std::size_t>(i);
    EXPECT_TRUE(test::same_bytes(test::pread_file(outs[k % 2], (k / 2) * 100000, 100000),
                                 std::span(data).subspan(k * 100000, 100000)))
        << "entry " << i;
  }
}

TEST_P(Async, ABatchEntryWithoutAFileIsAUsageErrorAndNothingRuns) {
  const std::string path = dir_->file("n.bin");
  const File f = File::open(path, OpenMode::read_write);
  DeviceMemory mem(dev_, 8192);
  const BatchEntry entries[] = {
      {IoOp::write, &f, mem.data(), 4096, 0},
      {IoOp::read, nullptr, mem.data(), 4096, 0},
  };
  EXPECT_TRUE(throws_error([&] { (void)submit_batch(entries, options()); }, ErrorDomain::usage,
                           {"entry 1 has no file"}));
  EXPECT_EQ(f.size(), 0U) << "a batch that fails at once runs none of its entries";
  EXPECT_TRUE(submit_batch({}, options()).empty());
}

INSTANTIATE_TEST_SUITE_P(Devices, Async, ::testing::Values("sim", "cuda:0"),
                         [](const auto& p) { return p.param == "sim" ? std::string("sim") : std::string("cuda0"); });

}  // namespace
}  // namespace sluice
