// The Device conformance suite, run against the simulated device and the CUDA device over the
// fake libcuda: memory kinds, stream ordering of copies and host functions, events,
// synchronisation, bounds checks and leaks. Then the sim device's own model: bandwidth and
// latency give lower bounds on copy time (never upper bounds: these machines are shared), and
// copies of one direction serialise across streams.
#include <dlfcn.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "gpu/sim_device.hpp"
#include "gpu_test_util.hpp"
#include "sluice/units.hpp"

namespace sluice {
namespace {

using gpu_test::contains;
using gpu_test::DeviceMemory;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// A counter exported by the fake libcuda, from the copy the shim loaded (-1 when not loaded).
int fake_cuda_counter(const char* name) {
  const char* lib = std::getenv("SLUICE_LIBCUDA");
  if (lib == nullptr) return -1;
  void* h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
  if (h == nullptr) return -1;
  auto* fn = reinterpret_cast<int (*)()>(dlsym(h, name));
  const int n = fn != nullptr ? fn() : -1;
  dlclose(h);
  return n;
}

// A host function that holds its stream until the test opens the gate.
struct Gate {
  std::mutex m;
  std::condition_variable cv;
  bool open = false;
  std::atomic<bool> entered{false};

  static void hold(void* arg) {
    auto* g = static_cast<Gate*>(arg);
    g->entered = true;
    std::unique_lock lock(g->m);
    g->cv.wait(lock, [g] { return g->open; });
  }
  void release() {
    {
      std::lock_guard lock(m);
      open = true;
    }
    cv.notify_all();
  }
};

// Host functions append their index here; read only after the stream has been synchronised.
struct Order {
  std::mutex m;
  std::vector<int> seen;
  void add(int i) {
    std::lock_guard lock(m);
    seen.push_back(i);
  }
};
struct OrderStep {
  Order* order;
  int index;
  static void run(void* arg) {
    auto* s = static_cast<OrderStep*>(arg);
    s->order->add(s->index);
  }
};

std::vector<std::byte> pattern(std::size_t n, unsigned seed) {
  return test::random_bytes(n, test::test_seed(seed));
}

// ---------------------------------------------------------------------------------------------
// The conformance suite. Parameter: "sim" (a fresh SimDevice) or "cuda:0" (the fake libcuda).

class DeviceConformance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "sim") {
      sim_ = std::make_shared<detail::SimDevice>(detail::SimModel{25.0, 10.0});
      dev_ = sim_;
    } else {
      std::string why;
      dev_ = gpu_test::try_open(GetParam(), &why);
      if (!dev_) {
        if (gpu_test::mode() == "fake_cuda") FAIL() << "fake libcuda expected: " << why;
        GTEST_SKIP() << why;
      }
    }
    baseline_ = live();
  }
  void TearDown() override {
    if (!dev_) return;
    EXPECT_EQ(live(), baseline_) << "device memory, pinned memory, a stream or an event leaked";
  }

  // What the device still holds: allocations and (for the fake) streams and events.
  std::vector<long long> live() const {
    if (sim_) return {static_cast<long long>(sim_->device_bytes()), static_cast<long long>(sim_->pinned_bytes())};
    return {fake_cuda_counter("fake_cuda_live_allocations"), fake_cuda_counter("fake_cuda_live_handles")};
  }
  // Whether stream work runs on its own (the fake libcuda runs it at once, on the caller).
  bool asynchronous() const { return sim_ != nullptr; }

  std::shared_ptr<detail::SimDevice> sim_;
  std::shared_ptr<Device> dev_;
  std::vector<long long> baseline_;
};

TEST_P(DeviceConformance, Info) {
  const DeviceInfo& i = dev_->info();
  EXPECT_EQ(i.kind, GetParam() == "sim" ? DeviceKind::sim : DeviceKind::cuda);
  EXPECT_FALSE(i.name.empty());
  EXPECT_EQ(i.ordinal, 0);
}

TEST_P(DeviceConformance, AllocFree) {
  std::vector<void*> blocks;
  for (std::size_t n : {std::size_t{1}, std::size_t{4095}, std::size_t{4096}, std::size_t{1} << 20}) {
    void* p = dev_->alloc(n);
    ASSERT_NE(p, nullptr) << n;
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 256, 0U) << "device memory is at least 256-byte aligned";
    EXPECT_EQ(dev_->pointer_kind(p), MemoryKind::device);
    blocks.push_back(p);
  }
  // Distinct and non-overlapping.
  for (std::size_t i = 0; i + 1 < blocks.size(); ++i) EXPECT_NE(blocks[i], blocks[i + 1]);
  for (void* p : blocks) dev_->free(p);
  dev_->free(nullptr);  // a no-op, like cuMemFree(0)
}

TEST_P(DeviceConformance, PinnedMemoryIsHostMemory) {
  auto* p = static_cast<std::byte*>(dev_->alloc_pinned(64 << 10));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 4096, 0U) << "staging needs page-aligned pinned memory";
  EXPECT_EQ(dev_->pointer_kind(p), MemoryKind::pinned_host);
  EXPECT_EQ(dev_->pointer_kind(p + 12345), MemoryKind::pinned_host);
  std::memset(p, 0x5A, 64 << 10);  // the CPU can use it directly
  EXPECT_EQ(p[(64 << 10) - 1], std::byte{0x5A});
  dev_->free_pinned(p);
  dev_->free_pinned(nullptr);
}

TEST_P(DeviceConformance, PointerKindOfEveryKind) {
  DeviceMemory d(dev_, 8192);
  EXPECT_EQ(dev_->pointer_kind(d.data()), MemoryKind::device);
  EXPECT_EQ(dev_->pointer_kind(d.data() + 1), MemoryKind::device) << "an interior pointer";
  EXPECT_EQ(dev_->pointer_kind(d.data() + 8191), MemoryKind::device) << "the last byte";

  void* pinned = dev_->alloc_pinned(4096);
  EXPECT_EQ(dev_->pointer_kind(pinned), MemoryKind::pinned_host);
  dev_->free_pinned(pinned);

  std::vector<std::byte> heap(3 * 4096);
  int on_stack = 0;
  EXPECT_EQ(dev_->pointer_kind(heap.data()), MemoryKind::pageable_host);
  EXPECT_EQ(dev_->pointer_kind(&on_stack), MemoryKind::pageable_host);

  dev_->register_host(heap.data(), heap.size());
  EXPECT_EQ(dev_->pointer_kind(heap.data()), MemoryKind::pinned_host);
  EXPECT_EQ(dev_->pointer_kind(heap.data() + 5000), MemoryKind::pinned_host);
  dev_->unregister_host(heap.data());
  EXPECT_EQ(dev_->pointer_kind(heap.data()), MemoryKind::pageable_host);

  EXPECT_EQ(to_string(MemoryKind::device), "device");
  EXPECT_EQ(to_string(MemoryKind::pinned_host), "pinned host");
  EXPECT_EQ(to_string(MemoryKind::pageable_host), "pageable host");
}

TEST_P(DeviceConformance, SynchronousCopiesRoundTrip) {
  const auto src = pattern(300000, 1);
  DeviceMemory d(dev_, src.size());
  dev_->copy_to_device(d.data(), src.data(), src.size());
  std::vector<std::byte> back(src.size());
  dev_->copy_to_host(back.data(), d.data(), back.size());
  EXPECT_TRUE(test::same_bytes(back, src));
  // Part of an allocation, at an odd offset.
  std::vector<std::byte> part(1001);
  dev_->copy_to_host(part.data(), d.data() + 777, part.size());
  EXPECT_TRUE(test::same_bytes(part, std::span(src).subspan(777, 1001)));
}

TEST_P(DeviceConformance, AsyncCopiesAreOrderedWithinAStream) {
  // Each round overwrites the same device bytes, then copies them back to its own host slot: the
  // slots only hold the right values if every copy ran after the one enqueued before it.
  constexpr int rounds = 40;
  constexpr std::size_t n = 64 << 10;
  std::vector<std::vector<std::byte>> in(rounds), out(rounds, std::vector<std::byte>(n));
  for (int i = 0; i < rounds; ++i) in[static_cast<std::size_t>(i)] = pattern(n, 100 + static_cast<unsigned>(i));
  DeviceMemory d(dev_, n);
  const StreamHandle s = dev_->create_stream();
  for (int i = 0; i < rounds; ++i) {
    const auto k = static_cast<std::size_t>(i);
    dev_->copy_to_device_async(d.data(), in[k].data(), n, s);
    dev_->copy_to_host_async(out[k].data(), d.data(), n, s);
  }
  dev_->synchronize(s);
  for (int i = 0; i < rounds; ++i) {
    const auto k = static_cast<std::size_t>(i);
    EXPECT_TRUE(test::same_bytes(out[k], in[k])) << "round " << i;
  }
  dev_->destroy_stream(s);
}

TEST_P(DeviceConformance, HostFunctionsRunInStreamOrderWithCopies) {
  constexpr int steps = 50;
  Order order;
  std::vector<OrderStep> step(steps);
  const auto src = pattern(1 << 20, 7);
  std::vector<std::byte> host(src.size());
  DeviceMemory d(dev_, src.size());
  struct Probe {
    const std::vector<std::byte>* host;
    const std::vector<std::byte>* want;
    bool saw_copy = false;
    static void run(void* arg) {
      auto* p = static_cast<Probe*>(arg);
      p->saw_copy = std::memcmp(p->host->data(), p->want->data(), p->want->size()) == 0;
    }
  } probe{&host, &src};

  const StreamHandle s = dev_->create_stream();
  for (int i = 0; i < steps; ++i) {
    step[static_cast<std::size_t>(i)] = {&order, i};
    dev_->launch_host_func(s, &OrderStep::run, &step[static_cast<std::size_t>(i)]);
    if (i == steps / 2) {
      dev_->copy_to_device_async(d.data(), src.data(), src.size(), s);
      dev_->copy_to_host_async(host.data(), d.data(), src.size(), s);
      dev_->launch_host_func(s, &Probe::run, &probe);
    }
  }
  dev_->synchronize(s);
  std::vector<int> want(steps);
  for (int i = 0; i < steps; ++i) want[static_cast<std::size_t>(i)] = i;
  {
    std::lock_guard lock(order.m);
    EXPECT_EQ(order.seen, want);
  }
  EXPECT_TRUE(probe.saw_copy) << "a host function ran before the copies enqueued ahead of it";
  dev_->destroy_stream(s);
}

TEST_P(DeviceConformance, SynchronizeWaitsForEverythingEnqueued) {
  struct Slow {
    std::atomic<bool> done{false};
    static void run(void* arg) {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      static_cast<Slow*>(arg)->done = true;
    }
  } slow;
  const StreamHandle s = dev_->create_stream();
  dev_->launch_host_func(s, &Slow::run, &slow);
  dev_->synchronize(s);
  EXPECT_TRUE(slow.done.load());
  dev_->synchronize(s);  // nothing enqueued: returns at once
  dev_->destroy_stream(s);
}

TEST_P(DeviceConformance, EventsCompleteWithTheWorkBeforeThem) {
  const EventHandle never = dev_->create_event();
  EXPECT_TRUE(dev_->event_done(never)) << "an event never recorded counts as complete (cuEventQuery)";
  dev_->wait_event(never);
  dev_->destroy_event(never);

  const auto src = pattern(256 << 10, 9);
  std::vector<std::byte> back(src.size());
  DeviceMemory d(dev_, src.size());
  const StreamHandle s = dev_->create_stream();
  const EventHandle e = dev_->create_event();
  dev_->copy_to_device_async(d.data(), src.data(), src.size(), s);
  dev_->copy_to_host_async(back.data(), d.data(), back.size(), s);
  dev_->record_event(e, s);
  dev_->wait_event(e);
  EXPECT_TRUE(dev_->event_done(e));
  EXPECT_TRUE(test::same_bytes(back, src)) << "wait_event returned before the copies finished";

  // Recording again captures the new work only.
  std::vector<std::byte> again(src.size());
  dev_->copy_to_host_async(again.data(), d.data(), again.size(), s);
  dev_->record_event(e, s);
  dev_->wait_event(e);
  EXPECT_TRUE(test::same_bytes(again, src));
  dev_->destroy_event(e);
  dev_->destroy_stream(s);
}

TEST_P(DeviceConformance, AnEventIsNotDoneWhileItsStreamIsHeld) {
  if (!asynchronous()) GTEST_SKIP() << "the fake libcuda runs stream work at once, on the caller";
  Gate gate;
  const StreamHandle s = dev_->create_stream();
  const StreamHandle other = dev_->create_stream();
  const EventHandle e = dev_->create_event();
  dev_->launch_host_func(s, &Gate::hold, &gate);
  dev_->record_event(e, s);
  EXPECT_FALSE(dev_->event_done(e));
  // Another stream is not held up by this one.
  const auto src = pattern(4096, 3);
  std::vector<std::byte> back(4096);
  DeviceMemory d(dev_, 4096);
  dev_->copy_to_device_async(d.data(), src.data(), 4096, other);
  dev_->copy_to_host_async(back.data(), d.data(), 4096, other);
  dev_->synchronize(other);
  EXPECT_TRUE(test::same_bytes(back, src));
  EXPECT_FALSE(dev_->event_done(e));
  gate.release();
  dev_->wait_event(e);
  EXPECT_TRUE(dev_->event_done(e));
  dev_->destroy_event(e);
  dev_->destroy_stream(other);
  dev_->destroy_stream(s);
}

TEST_P(DeviceConformance, DefaultStreamWorks) {
  const auto src = pattern(10000, 11);
  std::vector<std::byte> back(src.size());
  DeviceMemory d(dev_, src.size());
  dev_->copy_to_device_async(d.data(), src.data(), src.size(), nullptr);
  dev_->copy_to_host_async(back.data(), d.data(), back.size(), nullptr);
  dev_->synchronize(nullptr);
  EXPECT_TRUE(test::same_bytes(back, src));
}

TEST_P(DeviceConformance, CopyOutsideAnAllocationFails) {
  DeviceMemory d(dev_, 4096);
  std::vector<std::byte> host(8192);
  const StreamHandle s = dev_->create_stream();
  EXPECT_TRUE(gpu_test::throws_error([&] { dev_->copy_to_device_async(d.data() + 1, host.data(), 4096, s); },
                                     ErrorDomain::cuda, {}));
  EXPECT_TRUE(gpu_test::throws_error([&] { dev_->copy_to_host_async(host.data(), d.data(), 8192, s); },
                                     ErrorDomain::cuda, {}));
  EXPECT_TRUE(gpu_test::throws_error([&] { dev_->copy_to_device_async(host.data(), host.data() + 4096, 16, s); },
                                     ErrorDomain::cuda, {}))
      << "host memory is not a copy target";
  dev_->synchronize(s);
  dev_->destroy_stream(s);
}

TEST_P(DeviceConformance, DeviceBufferReleasesOnDestruction) {
  {
    DeviceBuffer a(dev_, 1 << 16);
    EXPECT_EQ(dev_->pointer_kind(a.data()), MemoryKind::device);
    EXPECT_EQ(a.size(), std::size_t{1} << 16);
    DeviceBuffer b(std::move(a));
    EXPECT_EQ(a.data(), nullptr);  // NOLINT(bugprone-use-after-move): moved-from state is specified
    EXPECT_NE(b.data(), nullptr);
    DeviceBuffer c(dev_, 100);
    c = std::move(b);  // frees c's old allocation
    EXPECT_EQ(c.size(), std::size_t{1} << 16);
  }
  // TearDown checks nothing is left.
}

// The owners user code holds (Stream, Event, PinnedBuffer, DeviceBuffer) work as the raw calls
// do and give everything back to their device, moved or not; TearDown checks nothing is left.
TEST_P(DeviceConformance, OwnersWorkAndReleaseOnDestruction) {
  const auto src = pattern(64 << 10, 21);
  {
    PinnedBuffer staged(dev_, src.size());
    EXPECT_EQ(dev_->pointer_kind(staged.data()), MemoryKind::pinned_host);
    ASSERT_EQ(staged.bytes().size(), src.size());
    std::copy(src.begin(), src.end(), staged.bytes().begin());  // the CPU writes it directly
    const DeviceBuffer on_device(dev_, src.size());
    EXPECT_EQ(dev_->pointer_kind(on_device.data()), MemoryKind::device);
    PinnedBuffer back(dev_, src.size());
    EXPECT_NE(live(), baseline_) << "the owners allocated nothing the device counts";

    Stream s(dev_);
    Event e(dev_);
    EXPECT_TRUE(e.done()) << "an event never recorded counts as complete";
    dev_->copy_to_device_async(on_device.data(), staged.data(), src.size(), s.get());
    dev_->copy_to_host_async(back.data(), on_device.data(), src.size(), s.get());
    e.record(s);
    e.wait();
    EXPECT_TRUE(e.done());
    EXPECT_TRUE(test::same_bytes(back.bytes(), src));

    // Moves hand ownership over and leave the source empty; assigning frees what was there.
    const Stream moved(std::move(s));
    EXPECT_FALSE(s);  // NOLINT(bugprone-use-after-move): the moved-from state is specified
    EXPECT_TRUE(moved);
    moved.synchronize();
    Event other(dev_);
    other = std::move(e);
    EXPECT_FALSE(e);  // NOLINT(bugprone-use-after-move)
    other.record(moved.get());
    other.wait();
    PinnedBuffer taken(std::move(staged));
    EXPECT_TRUE(staged.empty());  // NOLINT(bugprone-use-after-move)
    EXPECT_EQ(staged.bytes().size(), 0U);  // NOLINT(bugprone-use-after-move)
    back = std::move(taken);
    EXPECT_TRUE(test::same_bytes(back.bytes(), src));
    back.reset();
    EXPECT_TRUE(back.empty());
  }
}

TEST_P(DeviceConformance, OwnersRefuseMisuse) {
  EXPECT_TRUE(gpu_test::throws_error([] { const DeviceBuffer b(nullptr, 16); }, ErrorDomain::usage, {"device"}));
  EXPECT_TRUE(gpu_test::throws_error([] { const Stream s(nullptr); }, ErrorDomain::usage, {"device"}));
  const Stream empty;
  EXPECT_TRUE(gpu_test::throws_error([&] { empty.synchronize(); }, ErrorDomain::usage, {"empty"}));
  const Event none;
  EXPECT_TRUE(gpu_test::throws_error([&] { (void)none.done(); }, ErrorDomain::usage, {"empty"}));
  // A stream of one device cannot carry another device's event.
  const auto elsewhere = std::make_shared<detail::SimDevice>(detail::SimModel{25.0, 10.0});
  const Stream foreign(elsewhere);
  Event e(dev_);
  EXPECT_TRUE(gpu_test::throws_error([&] { e.record(foreign); }, ErrorDomain::usage, {"another device"}));
}

TEST_P(DeviceConformance, ManyStreamsAndEvents) {
  std::vector<Stream> streams;
  std::vector<Event> events;
  for (int i = 0; i < 32; ++i) {
    streams.emplace_back(dev_);
    events.emplace_back(dev_);
    events.back().record(streams.back());
  }
  for (const Event& e : events) e.wait();
}

TEST_P(DeviceConformance, ConcurrentUseFromManyThreads) {
  // Pool threads call the device without any set-up of their own (make_current is the device's job).
  constexpr int threads = 6;
  std::vector<std::thread> ts;
  std::atomic<int> bad{0};
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      try {
        const StreamHandle s = dev_->create_stream();
        const EventHandle e = dev_->create_event();
        for (int round = 0; round < 10; ++round) {
          const auto src = pattern(32 << 10, static_cast<unsigned>(1000 + t * 100 + round));
          std::vector<std::byte> back(src.size());
          void* d = dev_->alloc(src.size());
          dev_->copy_to_device_async(d, src.data(), src.size(), s);
          dev_->copy_to_host_async(back.data(), d, back.size(), s);
          dev_->record_event(e, s);
          dev_->wait_event(e);
          if (back != src) ++bad;
          dev_->free(d);
        }
        dev_->destroy_event(e);
        dev_->destroy_stream(s);
      } catch (const std::exception& ex) {
        ADD_FAILURE() << ex.what();
        ++bad;
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(Devices, DeviceConformance, ::testing::Values("sim", "cuda:0"),
                         [](const auto& p) { return p.param == "sim" ? std::string("sim") : std::string("cuda0"); });

// ---------------------------------------------------------------------------------------------
// open_device() and the simulated device's model.

TEST(OpenDevice, SimIsASimDeviceAndCached) {
  auto a = open_device("sim");
  auto b = open_device("sim");
  EXPECT_EQ(a.get(), b.get()) << "one device per spec in a process";
  EXPECT_NE(dynamic_cast<detail::SimDevice*>(a.get()), nullptr);
  EXPECT_EQ(a->info().kind, DeviceKind::sim);
  EXPECT_TRUE(contains(a->selection(), "sim"));
}

TEST(OpenDevice, BadSpecsAreUsageErrors) {
  for (const char* spec : {"bogus", "cuda:", "cuda:x", "cuda:-1", "gpu0"}) {
    EXPECT_TRUE(gpu_test::throws_error([&] { (void)open_device(spec); }, ErrorDomain::usage, {spec})) << spec;
  }
}

TEST(OpenDevice, AnOrdinalPastTheLastGpuSaysHowManyThereAre) {
  if (!gpu_test::fake_cuda_loaded()) GTEST_SKIP() << "needs the fake libcuda (run through ctest)";
  EXPECT_TRUE(gpu_test::throws_error([] { (void)open_device("cuda:3"); }, ErrorDomain::cuda,
                                     {"cuda:3", "1 CUDA device"}));
  auto d = open_device("cuda:0");
  EXPECT_EQ(d->info().kind, DeviceKind::cuda);
  EXPECT_EQ(d.get(), open_device("cuda:0").get());
}


TEST(SimModel, NameStatesTheModel) {
  detail::SimDevice limited(detail::SimModel{2.5, 7});
  EXPECT_TRUE(contains(limited.info().name, "2.5 GB/s"));
  EXPECT_TRUE(contains(limited.info().name, "7 us"));
  detail::SimDevice unlimited(detail::SimModel{0, 1});
  EXPECT_TRUE(contains(unlimited.info().name, "unlimited"));
}

TEST(SimModel, BandwidthBoundsCopyTimeFromBelow) {
  // 1 GB/s is one byte per nanosecond: 64 MiB take at least 67 ms each way.
  auto dev = std::make_shared<detail::SimDevice>(detail::SimModel{1.0, 10.0});
  std::vector<std::byte> host(64 * MiB, std::byte{1});
  DeviceMemory d(dev, host.size());
  const double want = static_cast<double>(host.size()) / 1e9;
  auto t0 = Clock::now();
  dev->copy_to_device(d.data(), host.data(), host.size());
  EXPECT_GE(seconds_since(t0), 0.95 * want) << "host to device faster than the model";
  t0 = Clock::now();
  dev->copy_to_host(host.data(), d.data(), host.size());
  EXPECT_GE(seconds_since(t0), 0.95 * want) << "device to host faster than the model";
}

TEST(SimModel, CopiesOfOneDirectionSerialiseAcrossStreams) {
  auto dev = std::make_shared<detail::SimDevice>(detail::SimModel{1.0, 10.0});
  constexpr int streams = 4;
  constexpr std::size_t each = 8 * MiB;
  std::vector<std::byte> host(each, std::byte{2});
  DeviceMemory d(dev, streams * each);
  std::vector<StreamHandle> s;
  for (int i = 0; i < streams; ++i) s.push_back(dev->create_stream());
  const auto t0 = Clock::now();
  for (int i = 0; i < streams; ++i) {
    dev->copy_to_device_async(d.data() + static_cast<std::size_t>(i) * each, host.data(), each,
                              s[static_cast<std::size_t>(i)]);
  }
  for (StreamHandle h : s) dev->synchronize(h);
  // One copy engine per direction: four streams together are no faster than one after another.
  EXPECT_GE(seconds_since(t0), 0.95 * streams * static_cast<double>(each) / 1e9);
  for (StreamHandle h : s) dev->destroy_stream(h);
}

TEST(SimModel, LatencyBoundsEachCopyFromBelow) {
  auto dev = std::make_shared<detail::SimDevice>(detail::SimModel{0, 2000.0});  // 2 ms a copy
  DeviceMemory d(dev, 64);
  std::byte b[64] = {};
  const StreamHandle s = dev->create_stream();
  const auto t0 = Clock::now();
  for (int i = 0; i < 10; ++i) dev->copy_to_device_async(d.data(), b, sizeof b, s);
  dev->synchronize(s);
  EXPECT_GE(seconds_since(t0), 0.95 * 10 * 2e-3);
  dev->destroy_stream(s);
}

// The copy engine runs on a modelled timeline (a queued copy starts when its predecessors end in
// the model, not when a host thread wakes), but a copy still waits for the work before it on its
// stream: 16 MiB at 1 GB/s queued behind a 30 ms host function end no sooner than 30 + 16.8 ms.
TEST(SimModel, ACopyStartsOnlyAfterTheWorkBeforeItOnItsStream) {
  auto dev = std::make_shared<detail::SimDevice>(detail::SimModel{1.0, 10.0});
  std::vector<std::byte> host(16 * MiB, std::byte{3});
  DeviceMemory d(dev, host.size());
  const StreamHandle s = dev->create_stream();
  const auto t0 = Clock::now();
  dev->launch_host_func(
      s, [](void*) { std::this_thread::sleep_for(std::chrono::milliseconds(30)); }, nullptr);
  dev->copy_to_device_async(d.data(), host.data(), host.size(), s);
  dev->synchronize(s);
  EXPECT_GE(seconds_since(t0), 0.95 * (0.030 + static_cast<double>(host.size()) / 1e9));
  dev->destroy_stream(s);
}

TEST(SimModel, TracksDeviceAndPinnedBytes) {
  detail::SimDevice dev(detail::SimModel{});
  EXPECT_EQ(dev.device_bytes(), 0U);
  EXPECT_EQ(dev.pinned_bytes(), 0U);
  void* a = dev.alloc(1000);
  void* p = dev.alloc_pinned(5000);
  EXPECT_EQ(dev.device_bytes(), 1000U);
  EXPECT_EQ(dev.pinned_bytes(), 5000U);
  dev.free_pinned(a);  // the wrong kind: ignored, as the driver rejects it
  EXPECT_EQ(dev.device_bytes(), 1000U);
  dev.free(a);
  dev.free_pinned(p);
  EXPECT_EQ(dev.device_bytes(), 0U);
  EXPECT_EQ(dev.pinned_bytes(), 0U);
}

}  // namespace
}  // namespace sluice
