#include "sluice/thread_pool.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <latch>
#include <set>
#include <stdexcept>

namespace sluice {
namespace {

TEST(ThreadPool, SubmitReturnsResults) {
  ThreadPool pool(2);
  auto a = pool.submit([] { return 6 * 7; });
  auto b = pool.submit([] { return std::string("done"); });
  auto c = pool.submit([] {});
  EXPECT_EQ(a.get(), 42);
  EXPECT_EQ(b.get(), "done");
  c.get();
}

TEST(ThreadPool, ExceptionsTravelThroughTheFuture) {
  ThreadPool pool(1);
  auto f = pool.submit([]() -> int { throw std::runtime_error("boom"); });
  EXPECT_THROW((void)f.get(), std::runtime_error);
  EXPECT_EQ(pool.submit([] { return 1; }).get(), 1);  // the worker survived
}

TEST(ThreadPool, OneThreadRunsInOrder) {
  ThreadPool pool(1);
  std::vector<int> order;
  std::vector<std::future<void>> fs;
  for (int i = 0; i < 100; ++i) fs.push_back(pool.submit([&order, i] { order.push_back(i); }));
  for (auto& f : fs) f.get();
  ASSERT_EQ(order.size(), 100U);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[static_cast<std::size_t>(i)], i);
}

TEST(ThreadPool, SizeGrowsNeverShrinks) {
  ThreadPool pool(0);  // at least one thread
  EXPECT_EQ(pool.size(), 1U);
  pool.ensure_threads(3);
  EXPECT_EQ(pool.size(), 3U);
  pool.ensure_threads(2);
  EXPECT_EQ(pool.size(), 3U);
}

TEST(ThreadPool, AllThreadsWorkAtOnce) {
  constexpr unsigned n = 4;
  ThreadPool pool(n);
  std::latch all_started(n);
  std::vector<std::future<std::thread::id>> fs;
  for (unsigned i = 0; i < n; ++i) {
    // Each task waits until every task has started: only possible with n threads running.
    fs.push_back(pool.submit([&] {
      all_started.arrive_and_wait();
      return std::this_thread::get_id();
    }));
  }
  std::set<std::thread::id> ids;
  for (auto& f : fs) ids.insert(f.get());
  EXPECT_EQ(ids.size(), n);
}

TEST(ThreadPool, DestructorRunsWhatIsQueued) {
  std::atomic<int> ran{0};
  {
    ThreadPool pool(1);
    std::latch gate(1);
    pool.post([&] { gate.wait(); });
    for (int i = 0; i < 50; ++i) pool.post([&] { ran.fetch_add(1); });
    gate.count_down();
  }
  EXPECT_EQ(ran.load(), 50);
}

TEST(ThreadPool, TasksMayQueueMoreTasks) {
  ThreadPool pool(2);
  std::promise<int> inner_result;
  auto outer = pool.submit([&] {
    pool.post([&] { inner_result.set_value(7); });
    return 1;
  });
  EXPECT_EQ(outer.get(), 1);
  EXPECT_EQ(inner_result.get_future().get(), 7);
}

TEST(ThreadPool, ManyProducersManyTasks) {
  ThreadPool pool(4);
  std::atomic<std::uint64_t> sum{0};
  std::vector<std::thread> producers;
  for (int p = 0; p < 4; ++p) {
    producers.emplace_back([&] {
      std::vector<std::future<void>> fs;
      for (int i = 1; i <= 1000; ++i) fs.push_back(pool.submit([&sum, i] { sum.fetch_add(static_cast<std::uint64_t>(i)); }));
      for (auto& f : fs) f.get();
    });
  }
  for (auto& t : producers) t.join();
  EXPECT_EQ(sum.load(), 4U * 500500U);
}

TEST(ThreadPool, DefaultPoolIsSharedAndSized) {
  ThreadPool& a = default_pool();
  EXPECT_EQ(&a, &default_pool());
  EXPECT_GE(a.size(), 1U);
  EXPECT_EQ(a.submit([] { return 3; }).get(), 3);
}

}  // namespace
}  // namespace sluice
