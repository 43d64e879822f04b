#include <liburing.h>
#include <sys/uio.h>
#include <pthread.h>

#include <atomic>
#include <cstdlib>
#include <optional>
#include <mutex>

#include <fmt/format.h>

#include "psync_engine.hpp"
#include "sluice/error.hpp"
#include "sluice/io_engine.hpp"
#include "sluice/testing/engine_factory.hpp"
#include "sluice/testing/faulty_engine.hpp"
#include "uring_engine.hpp"

namespace sluice {
namespace {

std::mutex g_factory_mutex;
EngineFactory g_factory;
std::atomic<unsigned> g_factory_generation{0};

struct CachedEngine {
  std::unique_ptr<IoEngine> engine;
  unsigned generation = 0;
  unsigned forks = 0;  // g_forks when it was made
};

// fork() calls into this process so far. A child's copy of the forking thread's engine is its
// parent's: the ring's single issuer is the parent's task (the kernel answers EEXIST), and what
// is in flight there is the parent's.
std::atomic<unsigned> g_forks{0};
void count_fork() {
  g_forks.fetch_add(1);
}

// SLUICE_FAULTS, read once: every engine of the process then injects faults at random (see
// faulty_engine.hpp). Each engine draws from its own seed (the given one plus a count), so threads
// do not fail in lockstep and a run with the same seed and thread count fails alike.
std::unique_ptr<IoEngine> with_env_faults(std::unique_ptr<IoEngine> engine) {
  static const std::optional<RandomFaults> faults = []() -> std::optional<RandomFaults> {
    const char* spec = std::getenv("SLUICE_FAULTS");
    if (spec == nullptr || *spec == '\0') return std::nullopt;
    return parse_faults(spec);
  }();
  if (!faults) return engine;
  static std::atomic<std::uint64_t> engines{0};
  RandomFaults mine = *faults;
  mine.seed += engines.fetch_add(1);
  return std::make_unique<FaultyEngine>(std::move(engine), std::move(mine));
}

}  // namespace

std::string_view to_string(EngineKind k) noexcept {
  return k == EngineKind::uring ? "uring" : "psync";
}

std::unique_ptr<IoEngine> make_engine(EngineKind kind, unsigned depth) {
  if (depth == 0) throw_usage_error({.op = "make_engine"}, "queue depth must be at least 1");
  {
    std::lock_guard lock(g_factory_mutex);
    if (g_factory) return g_factory(kind, depth);
  }
  if (kind == EngineKind::uring) return with_env_faults(std::make_unique<UringEngine>(depth));
  return with_env_faults(std::make_unique<PsyncEngine>(depth));
}

std::int64_t IoEngine::transfer_now(const IoRequest& req) {
  prepare(req);
  IoCompletion done;
  // The contract gives the one request in flight its completion; -EAGAIN only defends it.
  return submit_and_wait({&done, 1}, 1) == 1 ? done.result : -EAGAIN;
}

namespace detail {

std::int64_t transfer_on_this_thread(const IoRequest& r) noexcept {
  iovec iov{r.buf, r.len};
  const int flags = r.op == IoOp::read && r.cached_only ? RWF_NOWAIT : 0;
  ssize_t n = 0;
  do {
    n = r.op == IoOp::read ? ::preadv2(r.fd, &iov, 1, static_cast<off_t>(r.offset), flags)
                           : ::pwritev2(r.fd, &iov, 1, static_cast<off_t>(r.offset), flags);
  } while (n < 0 && errno == EINTR);
  return n < 0 ? -static_cast<std::int64_t>(errno) : n;
}

}  // namespace detail

bool uring_available(std::string* reason) {
  static const std::pair<bool, std::string> answer = [] {
    io_uring ring{};
    const int rc = io_uring_queue_init(4, &ring, 0);
    if (rc < 0) {
      return std::pair{false, fmt::format("io_uring_setup failed: {}{}", std::strerror(-rc),
                                          rc == -EPERM ? " (disabled by sysctl or seccomp)" : "")};
    }
    io_uring_queue_exit(&ring);
    return std::pair{true, std::string()};
  }();
  if (reason != nullptr) *reason = answer.second;
  return answer.first;
}

EngineKind resolve_engine(EngineSetting setting) {
  if (setting == EngineSetting::psync) return EngineKind::psync;
  std::string why;
  if (uring_available(&why)) return EngineKind::uring;
  if (setting == EngineSetting::automatic) return EngineKind::psync;
  throw Error(ErrorDomain::os, ENOSYS, {.op = "engine"}, fmt::format("io_uring requested: {}", why));
}

void set_engine_factory(EngineFactory factory) {
  std::lock_guard lock(g_factory_mutex);
  g_factory = std::move(factory);
  g_factory_generation.fetch_add(1);
}

IoEngine& thread_engine(EngineKind kind, unsigned depth) {
  static const bool counting_forks = ::pthread_atfork(nullptr, nullptr, &count_fork) == 0;
  (void)counting_forks;
  thread_local CachedEngine cache[2];
  auto& slot = cache[static_cast<int>(kind)];
  const unsigned gen = g_factory_generation.load();
  const unsigned forks = g_forks.load();
  // In a forked child the parent's engine is left alone, not destroyed: draining it would wait
  // for the parent's requests through a ring this process may not use (one per thread and fork).
  if (slot.engine && slot.forks != forks) (void)slot.engine.release();
  if (!slot.engine || slot.generation != gen || slot.engine->capacity() < depth) {
    slot.engine.reset();  // drain and close the old ring before making the new one
    slot.engine = make_engine(kind, depth);
    slot.generation = gen;
    slot.forks = forks;
  }
  return *slot.engine;
}

}  // namespace sluice
