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
#include "sluice/stats.hpp"
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

// Small reads into device memory go to the async I/O thread, which stages each in a pinned slot
// and copies it on its own stream: more reads in flight than the lane has slots (128), so some
// wait for one; every byte lands where asked, and each result says the path it took.
TEST_P(Async, SmallDeviceReadsGoThroughTheAsyncThreadsPinnedSlots) {
  std::string why;
  if (!test::engine_usable("uring", &why)) GTEST_SKIP() << why;
  constexpr std::uint64_t block = 4096;
  const std::uint64_t size = 4 * MiB;
  const std::string path = dir_->file("small.bin");
  const auto data = test::random_bytes(size, test::test_seed(41));
  test::write_file(path, data);
  const File f = File::open(path, OpenMode::read);
  if (!f.has_direct()) GTEST_SKIP() << "no O_DIRECT here: " << f.direct_reason();

  constexpr std::size_t n = 300;
  std::mt19937_64 rng(test::test_seed(42));
  struct Job {
    std::uint64_t off = 0, len = 0;
    std::size_t at = 0;
  };
  std::vector<Job> jobs(n);
  std::size_t total = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t blocks = i % 50 == 0 ? 16 : (i % 7 == 0 ? 2 : 1);  // 64 KiB, 8 KiB, 4 KiB
    jobs[i] = {rng() % (size / block - blocks) * block, blocks * block, total + i % 3};  // odd device offsets
    total = jobs[i].at + jobs[i].len;
  }
  DeviceMemory mem(dev_, total);
  mem.fill(std::byte{0x5a});
  std::uint64_t bytes = 0;
  for (const Job& j : jobs) bytes += j.len;
  const StatsSnapshot before = stats().snapshot();
  std::vector<BatchEntry> second_half;
  std::vector<TransferFuture> futs;
  for (std::size_t i = 0; i < n; ++i) {
    if (i < n / 2) {
      futs.push_back(read_async(f, mem.data() + jobs[i].at, jobs[i].len, jobs[i].off, options()));
    } else {
      second_half.push_back({IoOp::read, &f, mem.data() + jobs[i].at, jobs[i].len, jobs[i].off});
    }
  }
  for (auto& fu : submit_batch(second_half, options())) futs.push_back(std::move(fu));
  const auto got = [&] {
    std::vector<TransferResult> r;
    for (auto& fu : futs) r.push_back(fu.get());
    return r;
  }();
  const auto all = mem.download();
  for (std::size_t i = 0; i < n; ++i) {
    EXPECT_EQ(got[i].bytes, jobs[i].len) << "read " << i;
    EXPECT_EQ(got[i].path, Path::bounce) << "read " << i;
    EXPECT_EQ(got[i].ios, 1U) << "read " << i;
    EXPECT_TRUE(contains(got[i].reason, "auto: direct unavailable: ")) << "read " << i;
    EXPECT_TRUE(contains(got[i].reason, "; O_DIRECT; async I/O thread, a pinned slot of 64.0 KiB")) << "read " << i;
    EXPECT_TRUE(test::same_bytes(std::span(all).subspan(jobs[i].at, jobs[i].len),
                                 std::span(data).subspan(jobs[i].off, jobs[i].len)))
        << "read " << i;
    const std::size_t gap_end = i + 1 < n ? jobs[i + 1].at : all.size();
    EXPECT_TRUE(gpu_test::all_equal(std::span(all).subspan(jobs[i].at + jobs[i].len, gap_end - jobs[i].at - jobs[i].len),
                                    std::byte{0x5a}))
        << "bytes after read " << i;
  }
  // Counted as the synchronous path counts them: on the bounce path, on the device, and as
  // fallbacks from direct (no libcufile here).
  const StatsSnapshot after = stats().snapshot();
  EXPECT_EQ(after.at(Path::bounce, Direction::read).ops - before.at(Path::bounce, Direction::read).ops, n);
  EXPECT_EQ(after.at(Path::bounce, Direction::read).bytes - before.at(Path::bounce, Direction::read).bytes, bytes);
  EXPECT_EQ(after.fallbacks_for(Fallback::no_cufile) - before.fallbacks_for(Fallback::no_cufile), n);
  const std::string key = dev_->info().kind == DeviceKind::cuda ? "cuda:0" : "sim";
  const auto reads_on = [&](const StatsSnapshot& snap) -> std::uint64_t {
    for (const KeyedCounters& k : snap.devices) {
      if (k.key == key) return k.dirs[static_cast<std::size_t>(Direction::read)].ops;
    }
    return 0;
  };
  EXPECT_EQ(reads_on(after) - reads_on(before), n);
}

// What the slots cannot take goes to the pool, as before: reads larger than a slot, unaligned
// ones, reads past the end of the file (read again there, which clamps them), and writes.
TEST_P(Async, DeviceTransfersTheSlotsCannotTakeGoToThePool) {
  std::string why;
  if (!test::engine_usable("uring", &why)) GTEST_SKIP() << why;
  constexpr std::uint64_t block = 4096;
  const std::uint64_t size = 40 * block + 1000;
  const std::string path = dir_->file("pool.bin");
  const auto data = test::random_bytes(size, test::test_seed(43));
  test::write_file(path, data);
  const File f = File::open(path, OpenMode::read_write);
  if (!f.has_direct()) GTEST_SKIP() << "no O_DIRECT here: " << f.direct_reason();
  DeviceMemory big(dev_, 32 * block), odd(dev_, block), tail(dev_, 2 * block), past(dev_, block);
  auto a = read_async(f, big.data(), 32 * block, 0, options());  // 128 KiB: larger than a slot
  auto b = read_async(f, odd.data(), block, 100, options());     // unaligned offset
  auto c = read_async(f, tail.data(), 2 * block, 39 * block, options());  // crosses the end
  auto d = read_async(f, past.data(), block, 50 * block, options());      // past the end
  const TransferResult ra = a.get(), rb = b.get(), rc = c.get(), rd = d.get();
  for (const TransferResult* r : {&ra, &rb}) {
    EXPECT_EQ(r->path, Path::bounce);
    EXPECT_EQ(r->reason.find("async I/O thread"), std::string::npos) << r->reason;
  }
  EXPECT_EQ(ra.bytes, 32 * block);
  EXPECT_TRUE(test::same_bytes(big.download(), std::span(data).first(32 * block)));
  EXPECT_EQ(rb.bytes, block);
  EXPECT_TRUE(test::same_bytes(odd.download(), std::span(data).subspan(100, block)));
  EXPECT_EQ(rc.bytes, block + 1000);
  EXPECT_TRUE(contains(rc.reason, "(read again on a pool thread: the async I/O thread's O_DIRECT read came back short"));
  EXPECT_TRUE(test::same_bytes(tail.download(0, block + 1000), std::span(data).subspan(39 * block, block + 1000)));
  EXPECT_EQ(rd.bytes, 0U);

  DeviceMemory src(dev_, block);
  src.upload(std::span(data).first(block));
  const TransferResult w = write_async(f, src.data(), block, 8 * block, options()).get();
  EXPECT_EQ(w.bytes, block);
  EXPECT_EQ(w.reason.find("async I/O thread"), std::string::npos) << w.reason;
  EXPECT_TRUE(test::same_bytes(test::pread_file(path, 8 * block, block), std::span(data).first(block)));
}

INSTANTIATE_TEST_SUITE_P(Devices, Async, ::testing::Values("sim", "cuda:0"),
                         [](const auto& p) { return p.param == "sim" ? std::string("sim") : std::string("cuda0"); });

// The sim, failing on demand as a CUDA context does once it has failed: copies refused when they
// are queued, or accepted while host functions never run (cuLaunchHostFunc does not call them
// after a context error) and synchronize reports the error.
class FailingDevice final : public Device {
 public:
  explicit FailingDevice(std::shared_ptr<Device> inner) : inner_(std::move(inner)) {}
  std::atomic<bool> refuse_copies{false};
  std::atomic<bool> context_failed{false};

  [[nodiscard]] const DeviceInfo& info() const noexcept override { return inner_->info(); }
  [[nodiscard]] void* alloc(std::size_t bytes) override { return inner_->alloc(bytes); }
  void free(void* p) noexcept override { inner_->free(p); }
  [[nodiscard]] void* alloc_pinned(std::size_t bytes) override { return inner_->alloc_pinned(bytes); }
  void free_pinned(void* p) noexcept override { inner_->free_pinned(p); }
  void register_host(void* p, std::size_t bytes) override { inner_->register_host(p, bytes); }
  void unregister_host(void* p) noexcept override { inner_->unregister_host(p); }
  [[nodiscard]] MemoryKind pointer_kind(const void* p) const override { return inner_->pointer_kind(p); }
  [[nodiscard]] StreamHandle create_stream() override { return inner_->create_stream(); }
  void destroy_stream(StreamHandle s) noexcept override { inner_->destroy_stream(s); }
  void copy_to_device_async(void* dst, const void* src, std::size_t bytes, StreamHandle s) override {
    if (refuse_copies) fail("cuMemcpyHtoDAsync");
    inner_->copy_to_device_async(dst, src, bytes, s);
  }
  void copy_to_host_async(void* dst, const void* src, std::size_t bytes, StreamHandle s) override {
    inner_->copy_to_host_async(dst, src, bytes, s);
  }
  void launch_host_func(StreamHandle s, void (*fn)(void*), void* arg) override {
    if (!context_failed) inner_->launch_host_func(s, fn, arg);
  }
  void synchronize(StreamHandle s) override {
    if (context_failed) fail("cuStreamSynchronize");
    inner_->synchronize(s);
  }
  [[nodiscard]] StreamGate make_gate() override { return inner_->make_gate(); }
  void wait_gate(StreamHandle s, const StreamGate& gate) override { inner_->wait_gate(s, gate); }
  [[nodiscard]] EventHandle create_event() override { return inner_->create_event(); }
  void destroy_event(EventHandle e) noexcept override { inner_->destroy_event(e); }
  void record_event(EventHandle e, StreamHandle s) override { inner_->record_event(e, s); }
  [[nodiscard]] bool event_done(EventHandle e) override { return inner_->event_done(e); }
  void wait_event(EventHandle e) override { inner_->wait_event(e); }
  void make_current() override { inner_->make_current(); }

 private:
  [[noreturn]] static void fail(const char* op) {
    throw Error(ErrorDomain::cuda, 700, {.op = op}, "CUDA_ERROR_ILLEGAL_ADDRESS (700), injected by the test");
  }
  std::shared_ptr<Device> inner_;
};

class AsyncDeviceLane : public ::testing::Test {
 protected:
  static constexpr std::uint64_t block = 4096;

  void SetUp() override {
    std::string why;
    if (!test::engine_usable("uring", &why)) GTEST_SKIP() << why;
    sim_ = gpu_test::try_open("sim", &why);
    if (!sim_) GTEST_SKIP() << why;
    const auto root = test::folder_root(Folder::disk, &why);
    if (!root) GTEST_SKIP() << why;
    dir_ = std::make_unique<test::TempDir>(*root, "sluice-gpu-lane-");
    path_ = dir_->file("lane.bin");
    data_ = test::random_bytes(256 * block, test::test_seed(44));
    test::write_file(path_, data_);
    file_ = File::open(path_, OpenMode::read);
    if (!file_.has_direct()) GTEST_SKIP() << "no O_DIRECT here: " << file_.direct_reason();
  }

  // The bounce path requested: no libcufile decides anything here.
  [[nodiscard]] TransferOptions options(std::shared_ptr<Device> dev) const {
    return {.config = gpu_test::make_config({"uring_t1_q32", "uring", 1, 32, true, 64 * KiB}), .device = std::move(dev),
            .path = Path::bounce};
  }

  // `n` one-block reads at block i*3 (mod 256), all in flight.
  struct Reads {
    std::unique_ptr<DeviceMemory> mem;
    std::vector<TransferFuture> futs;
  };
  Reads start_reads(const std::shared_ptr<Device>& dev, std::size_t n) const {
    Reads r{std::make_unique<DeviceMemory>(dev, n * block), {}};
    for (std::size_t i = 0; i < n; ++i) {
      r.futs.push_back(read_async(file_, r.mem->data() + i * block, block, i * 3 % 256 * block, options(dev)));
    }
    return r;
  }
  [[nodiscard]] ::testing::AssertionResult landed(const Reads& r, std::size_t i) const {
    return test::same_bytes(r.mem->download(i * block, block), std::span(data_).subspan(i * 3 % 256 * block, block));
  }

  std::shared_ptr<Device> sim_;
  std::unique_ptr<test::TempDir> dir_;
  std::string path_;
  std::vector<std::byte> data_;
  File file_;
};

// A copy the device refuses fails its read through the future; the lane goes on serving.
TEST_F(AsyncDeviceLane, ACopyTheDeviceRefusesFailsItsRead) {
  auto dev = std::make_shared<FailingDevice>(sim_);
  dev->refuse_copies = true;
  Reads bad = start_reads(dev, 10);
  for (auto& f : bad.futs) {
    EXPECT_TRUE(throws_error([&] { (void)f.get(); }, ErrorDomain::cuda, {"cuMemcpyHtoDAsync", "(700)"}));
  }
  dev->refuse_copies = false;
  Reads good = start_reads(dev, 10);
  for (std::size_t i = 0; i < good.futs.size(); ++i) {
    const TransferResult r = good.futs[i].get();
    EXPECT_EQ(r.reason, "O_DIRECT; async I/O thread, a pinned slot of 64.0 KiB");
    EXPECT_TRUE(landed(good, i)) << "read " << i;
  }
}

// A failed context runs no host functions: the reads whose copies were queued get the error the
// stream reports (the thread asks it while idle), never a hang; later reads of that device take
// the pool.
TEST_F(AsyncDeviceLane, AFailedContextFailsTheQueuedReadsAndLaterOnesTakeThePool) {
  // Kept for the process: the pool's pinned buffers are per device and never released.
  static auto* dev = new std::shared_ptr<FailingDevice>(std::make_shared<FailingDevice>(sim_));
  (*dev)->context_failed = true;
  Reads lost = start_reads(*dev, 20);
  for (std::size_t i = 0; i < lost.futs.size(); ++i) {
    ASSERT_EQ(lost.futs[i].wait_for(std::chrono::seconds(20)), std::future_status::ready) << "read " << i;
    EXPECT_TRUE(throws_error([&] { (void)lost.futs[i].get(); }, ErrorDomain::cuda, {"cuStreamSynchronize", "(700)"}))
        << "read " << i;
  }
  (*dev)->context_failed = false;
  Reads later = start_reads(*dev, 5);
  for (std::size_t i = 0; i < later.futs.size(); ++i) {
    const TransferResult r = later.futs[i].get();
    EXPECT_EQ(r.path, Path::bounce);
    EXPECT_TRUE(r.reason.starts_with("O_DIRECT via ")) << r.reason;
    EXPECT_TRUE(contains(r.reason, "(on a pool thread: the device failed the async I/O thread's copies)"));
    EXPECT_TRUE(landed(later, i)) << "read " << i;
  }
}

// The lane holds its device only while others do: once the caller lets go, the thread releases
// the lane (its stream and pinned slots) the next time it goes idle, and the device goes with it.
TEST_F(AsyncDeviceLane, ALaneLetsGoOfADeviceNobodyElseHolds) {
  auto dev = std::make_shared<FailingDevice>(sim_);
  const std::weak_ptr<Device> watch = dev;
  {
    Reads r = start_reads(dev, 40);
    for (std::size_t i = 0; i < r.futs.size(); ++i) {
      EXPECT_EQ(r.futs[i].get().bytes, block);
      EXPECT_TRUE(landed(r, i)) << "read " << i;
    }
  }
  dev.reset();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::vector<std::byte> host(block);
  const TransferOptions host_opts{.config = gpu_test::make_config({"uring_t1_q32", "uring", 1, 32, true, 64 * KiB})};
  while (!watch.expired() && std::chrono::steady_clock::now() < deadline) {
    // A host read wakes the thread; it releases the lane when it is idle again.
    std::vector<std::byte> buf(2 * block);
    auto* aligned = reinterpret_cast<std::byte*>((reinterpret_cast<std::uintptr_t>(buf.data()) + block - 1) / block * block);
    (void)read_async(file_, aligned, block, 0, host_opts).get();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(watch.expired()) << "the async I/O thread still holds the device";
}


}  // namespace
}  // namespace sluice
