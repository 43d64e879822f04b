// TransferFuture and the library's TransferPromise (src/transfer/transfer_future.cpp): the
// result or the error arrives once, waits end when it arrives or at their timeout, misuse fails
// as std::future's does, and the shared state is freed whichever side lets go first (ASan and
// TSan builds run this program).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <stdexcept>
#include <thread>
#include <vector>

#include "sluice/transfer.hpp"
#include "transfer/transfer_promise.hpp"

namespace sluice {
namespace {

using detail::TransferPromise;
using namespace std::chrono_literals;

TransferResult result_of(std::uint64_t bytes) {
  TransferResult r;
  r.bytes = bytes;
  r.path = Path::bounce;
  r.reason = "a reason longer than the small-string buffer, " + std::to_string(bytes);
  return r;
}

template <class Fn>
std::future_errc future_errc_of(Fn fn) {
  try {
    fn();
  } catch (const std::future_error& e) {
    return static_cast<std::future_errc>(e.code().value());
  }
  ADD_FAILURE() << "no std::future_error";
  return {};
}

TEST(TransferFuture, AReadyFutureGivesItsResultOnce) {
  TransferFuture f = detail::ready_future(result_of(7));
  ASSERT_TRUE(f.valid());
  EXPECT_TRUE(f.ready());
  EXPECT_EQ(f.wait_for(0s), std::future_status::ready);
  const TransferResult r = f.get();
  EXPECT_EQ(r.bytes, 7U);
  EXPECT_EQ(r.path, Path::bounce);
  EXPECT_EQ(r.reason, result_of(7).reason);
  EXPECT_FALSE(f.valid());
  EXPECT_EQ(future_errc_of([&] { (void)f.get(); }), std::future_errc::no_state);
}

TEST(TransferFuture, OneWithoutATransferRefusesEveryCall) {
  TransferFuture f;
  EXPECT_FALSE(f.valid());
  EXPECT_EQ(future_errc_of([&] { (void)f.ready(); }), std::future_errc::no_state);
  EXPECT_EQ(future_errc_of([&] { f.wait(); }), std::future_errc::no_state);
  EXPECT_EQ(future_errc_of([&] { (void)f.wait_for(1ms); }), std::future_errc::no_state);
  EXPECT_EQ(future_errc_of([&] { (void)f.get(); }), std::future_errc::no_state);
}

TEST(TransferFuture, MovingHandsTheTransferOver) {
  TransferFuture a = detail::ready_future(result_of(1));
  TransferFuture b = std::move(a);
  EXPECT_FALSE(a.valid());  // NOLINT(bugprone-use-after-move): the moved-from state is specified
  ASSERT_TRUE(b.valid());
  b = detail::ready_future(result_of(2));  // lets go of the first
  EXPECT_EQ(b.get().bytes, 2U);
}

TEST(TransferFuture, WaitsTimeOutWhileTheResultIsAwayAndEndWhenItComes) {
  TransferPromise p;
  TransferFuture f = p.get_future();
  EXPECT_FALSE(f.ready());
  EXPECT_EQ(f.wait_for(0s), std::future_status::timeout);
  EXPECT_EQ(f.wait_for(-5ms), std::future_status::timeout);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(f.wait_for(30ms), std::future_status::timeout);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 30ms);
  EXPECT_EQ(f.wait_until(std::chrono::system_clock::now() + 10ms), std::future_status::timeout);
  EXPECT_EQ(f.wait_until(std::chrono::steady_clock::now() - 1s), std::future_status::timeout);
  p.set_value(result_of(3));
  EXPECT_TRUE(f.ready());
  EXPECT_EQ(f.wait_for(std::chrono::hours(1)), std::future_status::ready);
  EXPECT_EQ(f.wait_for(std::chrono::nanoseconds::max()), std::future_status::ready);
  EXPECT_EQ(f.get().bytes, 3U);
}

TEST(TransferFuture, ASleepingWaiterIsWokenByTheResult) {
  for (int kind = 0; kind < 4; ++kind) {
    TransferPromise p;
    TransferFuture f = p.get_future();
    std::atomic<bool> waiting{false};
    std::uint64_t got = 0;
    std::thread waiter([&] {
      waiting = true;
      switch (kind) {
        case 0:
          got = f.get().bytes;
          break;
        case 1:
          f.wait();
          got = f.get().bytes;
          break;
        case 2:
          EXPECT_EQ(f.wait_for(std::chrono::hours(1)), std::future_status::ready);
          got = f.get().bytes;
          break;
        default:
          EXPECT_EQ(f.wait_for(std::chrono::milliseconds::max()), std::future_status::ready);
          got = f.get().bytes;
          break;
      }
    });
    while (!waiting) std::this_thread::yield();
    std::this_thread::sleep_for(20ms);  // the waiter is most likely asleep in the kernel now
    p.set_value(result_of(100 + kind));
    waiter.join();
    EXPECT_EQ(got, 100U + kind) << "wait kind " << kind;
  }
}

TEST(TransferFuture, TheErrorArrivesThroughGet) {
  TransferPromise p;
  TransferFuture f = p.get_future();
  p.set_exception(std::make_exception_ptr(std::runtime_error("the disk went away")));
  EXPECT_TRUE(f.ready());
  try {
    (void)f.get();
    ADD_FAILURE() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "the disk went away");
  }
  EXPECT_FALSE(f.valid());
}

TEST(TransferFuture, APromiseDroppedUnfulfilledBreaksItsFuture) {
  TransferFuture f;
  {
    TransferPromise p;
    f = p.get_future();
  }
  EXPECT_TRUE(f.ready());
  EXPECT_EQ(future_errc_of([&] { (void)f.get(); }), std::future_errc::broken_promise);
}

TEST(TransferFuture, APromiseGivesOneFutureAndOneResult) {
  TransferPromise p;
  TransferFuture f = p.get_future();
  EXPECT_EQ(future_errc_of([&] { (void)p.get_future(); }),
            std::future_errc::future_already_retrieved);
  p.set_value(result_of(1));
  EXPECT_EQ(future_errc_of([&] { p.set_value(result_of(2)); }),
            std::future_errc::promise_already_satisfied);
  EXPECT_EQ(
      future_errc_of([&] { p.set_exception(std::make_exception_ptr(std::runtime_error("x"))); }),
      std::future_errc::promise_already_satisfied);
  EXPECT_EQ(f.get().bytes, 1U);
}

TEST(TransferFuture, EitherSideMayLetGoFirst) {
  {  // the future first, before the result
    TransferPromise p;
    { TransferFuture f = p.get_future(); }
    p.set_value(result_of(1));
  }
  {  // the promise first, after the result
    TransferFuture f;
    {
      TransferPromise p;
      f = p.get_future();
      p.set_value(result_of(2));
    }
    EXPECT_EQ(f.get().bytes, 2U);
  }
  {  // a future never taken
    TransferPromise p;
    p.set_value(result_of(3));
  }
  {  // a moved-from promise is empty; the one it moved to still serves
    TransferPromise a;
    TransferFuture f = a.get_future();
    TransferPromise b = std::move(a);
    b.set_value(result_of(4));
    EXPECT_EQ(f.get().bytes, 4U);
  }
}

// Results given on one thread while another polls, waits with and without a timeout, or drops
// its futures: each result arrives once, with its own value (the ASan and TSan builds check the
// memory and the ordering).
TEST(TransferFuture, ManyResultsAcrossTwoThreads) {
  constexpr std::size_t n = 20000;
  std::vector<TransferPromise> promises(n);
  std::vector<TransferFuture> futures;
  futures.reserve(n);
  for (auto& p : promises) futures.push_back(p.get_future());
  std::thread producer([&] {
    for (std::size_t i = 0; i < n; ++i) {
      if (i % 97 == 5) {
        promises[i].set_exception(std::make_exception_ptr(std::runtime_error("failed")));
      } else {
        promises[i].set_value(result_of(i));
      }
      if (i % 1000 == 0) std::this_thread::sleep_for(50us);  // let the consumer catch up and sleep
    }
  });
  std::size_t values = 0;
  std::size_t errors = 0;
  for (std::size_t i = 0; i < n; ++i) {
    TransferFuture& f = futures[i];
    if (i % 13 == 0) {  // dropped unread, maybe before its result
      f = TransferFuture();
      continue;
    }
    if (i % 3 == 0) {
      while (!f.ready()) std::this_thread::yield();
    } else if (i % 3 == 1) {
      while (f.wait_for(10us) != std::future_status::ready) {
      }
    }
    try {
      const TransferResult r = f.get();
      EXPECT_EQ(r.bytes, i);
      EXPECT_EQ(r.reason, result_of(i).reason);
      ++values;
    } catch (const std::runtime_error&) {
      EXPECT_EQ(i % 97, 5U);
      ++errors;
    }
  }
  producer.join();
  std::size_t want_values = 0;
  std::size_t want_errors = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (i % 13 == 0) continue;
    ++(i % 97 == 5 ? want_errors : want_values);
  }
  EXPECT_EQ(values, want_values);
  EXPECT_EQ(errors, want_errors);
}

}  // namespace
}  // namespace sluice
