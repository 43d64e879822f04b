// An object of the library's made on first use, once per process, that a forked child makes
// afresh: the library's threads (the default pool, the async I/O thread, the sim device's streams)
// do not survive fork(), so an object that owns or feeds them must not be shared with the child
// (docs/lifetimes.md, "Across fork()"). The parent's instance stays allocated and untouched in
// the child (leaked, like every such object here: none is torn down by static destructors).
// Creation is locked across fork() (pthread_atfork), so the child never inherits the lock held.
#pragma once

#include <pthread.h>

#include <atomic>
#include <mutex>

namespace sluice::detail {

/// One T per process, made by `make()` (a `T*`, never freed) on the first get() in a process.
/// Distinct uses need distinct T: the instance is per type.
template <class T>
class PerProcess {
 public:
  template <class Make>
  static T& get(Make&& make) {
    static const bool fork_aware = ::pthread_atfork(&lock, &unlock, &forget_in_child) == 0;
    (void)fork_aware;
    if (T* t = instance_.load(std::memory_order_acquire)) return *t;
    const std::lock_guard guard(creation_);
    if (T* t = instance_.load(std::memory_order_relaxed)) return *t;
    T* t = make();
    instance_.store(t, std::memory_order_release);
    return *t;
  }

 private:
  static void lock() { creation_.lock(); }
  static void unlock() { creation_.unlock(); }
  static void forget_in_child() {
    instance_.store(nullptr);
    creation_.unlock();
  }

  static inline std::atomic<T*> instance_{nullptr};
  static inline std::mutex creation_;
};

}  // namespace sluice::detail
