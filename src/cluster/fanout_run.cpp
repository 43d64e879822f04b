// `sluice load --fanout`: the fan-out plan (src/load/fanout.cpp) executed over a Communicator.
// Every rank walks the plan's reads in the same order. For each read, the reader waits for its
// bytes (its next read is already in flight, so reading chunk k+1 overlaps moving chunk k), every
// rank then exchanges a status (an empty string, or the reader's error), and only when all are
// empty does the chunk move: a failed read thus ends every rank with the same Error, never a rank
// waiting in a receive for bytes that will not come.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <map>
#include <optional>

#include <fmt/format.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "sluice/error.hpp"
#include "sluice/file.hpp"
#include "sluice/load.hpp"
#include "sluice/tools/load_fanout.hpp"
#include "sluice/transfer.hpp"

namespace sluice {

std::vector<std::string> Communicator::allgather(const std::string& mine) {
  const std::vector<std::string> at_root = gather(mine, 0);
  std::vector<std::string> out(static_cast<std::size_t>(size()));
  for (int r = 0; r < size(); ++r) {
    out[static_cast<std::size_t>(r)] =
        broadcast(rank() == 0 ? at_root[static_cast<std::size_t>(r)] : std::string(), 0);
  }
  return out;
}

void Communicator::broadcast_bytes(void* /*data*/, std::size_t /*size*/, int /*root*/) {
  if (size() > 1)
    throw_usage_error({.op = "broadcast"},
                      fmt::format("the {} communicator cannot move bytes", kind()));
}
void Communicator::send_bytes(const void* /*data*/, std::size_t /*size*/, int /*dest*/) {
  throw_usage_error({.op = "send"}, fmt::format("the {} communicator cannot move bytes", kind()));
}
void Communicator::recv_bytes(void* /*data*/, std::size_t /*size*/, int /*source*/) {
  throw_usage_error({.op = "receive"},
                    fmt::format("the {} communicator cannot move bytes", kind()));
}

std::uint64_t host_xxh3(const std::vector<std::byte>& bytes) noexcept {
  return XXH3_64bits(bytes.data(), bytes.size());
}

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Every rank's status; throws on every rank, naming each failed rank, when any is not empty.
void check_statuses(Communicator& comm, const std::string& mine, std::string_view op) {
  const std::vector<std::string> all = comm.allgather(mine);
  std::string failed;
  for (std::size_t r = 0; r < all.size(); ++r) {
    if (!all[r].empty())
      failed += fmt::format("{}rank {}: {}", failed.empty() ? "" : "; ", r, all[r]);
  }
  if (!failed.empty()) throw FanoutJobError(ErrorDomain::os, EIO, {.op = op}, failed);
}

std::string error_text(const std::exception& e) {
  std::string s = e.what();
  return s.empty() ? std::string("unknown error") : s;
}

// Node ids from the hosts: ranks on the same host are one node, numbered by first appearance.
std::vector<unsigned> node_ids(Communicator& comm, const ClusterEnv& env, unsigned* nodes) {
  const std::vector<std::string> hosts = comm.allgather(env.host);
  std::map<std::string, unsigned> ids;
  std::vector<unsigned> out;
  for (const auto& h : hosts)
    out.push_back(ids.emplace(h, static_cast<unsigned>(ids.size())).first->second);
  *nodes = static_cast<unsigned>(ids.size());
  return out;
}

FanoutPlan plan_for(Communicator& comm, const ClusterEnv& env, const Checkpoint& cp,
                    FanoutScope scope, std::uint64_t budget, FanoutLoadStats* stats) {
  FanoutInput in{.items = fanout_items(cp),
                 .ranks = {},
                 .nodes = 1,
                 .scope = scope,
                 .exchange_budget = budget};
  const std::vector<unsigned> nodes = node_ids(comm, env, &in.nodes);
  for (std::size_t r = 0; r < nodes.size(); ++r)
    in.ranks.push_back(
        {.rank = static_cast<unsigned>(r), .node = nodes[r], .everything = true, .needs = {}});
  FanoutPlan plan = plan_fanout(in);
  stats->scope = scope;
  stats->nodes = in.nodes;
  stats->unique_bytes = plan.unique_bytes;
  stats->job_read_bytes = plan.read_bytes;
  stats->reads = plan.reads.size();
  return plan;
}

// One rank's walk through the plan.
class Walk {
 public:
  Walk(Communicator& comm, const Checkpoint& cp, const FanoutPlan& plan, FanoutLoaded* out)
      : comm_(comm), cp_(cp), plan_(plan), out_(*out), me_(static_cast<unsigned>(comm.rank())) {
    move_of_.assign(plan.reads.size(), -1);
    for (std::size_t m = 0; m < plan.moves.size(); ++m)
      move_of_[plan.moves[m].read] = static_cast<long>(m);
  }

  void run() {
    issue_after(0);
    for (std::size_t i = 0; i < plan_.reads.size(); ++i) {
      std::string status;
      if (plan_.reads[i].reader == me_) status = finish_read(i);
      const auto t = Clock::now();
      check_statuses(comm_, status, "load --fanout");
      if (plan_.reads[i].reader == me_) issue_after(i + 1);  // the next read overlaps this move
      if (move_of_[i] >= 0)
        move(plan_.moves[static_cast<std::size_t>(move_of_[i])], plan_.reads[i]);
      out_.stats.move_seconds += since(t);
    }
  }

 private:
  std::byte* dest(const FanoutRead& r) { return out_.tensors[r.item].data() + r.offset; }

  const File& file(std::size_t index) {
    auto it = files_.find(index);
    if (it == files_.end())
      it = files_.emplace(index, File::open(cp_.layouts()[index].path, OpenMode::read)).first;
    return it->second;
  }

  // Starts this rank's first read at or after `from` (kept in pending_).
  void issue_after(std::size_t from) {
    for (std::size_t i = from; i < plan_.reads.size(); ++i) {
      const FanoutRead& r = plan_.reads[i];
      if (r.reader != me_) continue;
      pending_index_ = i;
      try {
        pending_ = read_async(file(r.file_index), dest(r), r.size, r.file_offset);
        pending_error_.clear();
      } catch (const std::exception& e) {
        pending_error_ = error_text(e);
      }
      return;
    }
  }

  // Waits for read i (started by issue_after); "" or the error naming file and range.
  std::string finish_read(std::size_t i) {
    const FanoutRead& r = plan_.reads[i];
    const auto t = Clock::now();
    std::string err = pending_index_ == i ? pending_error_ : std::string("read not started");
    if (err.empty() && pending_.valid()) {
      try {
        const TransferResult got = pending_.get();
        if (got.bytes != r.size) {
          err = fmt::format("read '{}' [offset {}, {} bytes]: {} bytes came back",
                            cp_.layouts()[r.file_index].path, r.file_offset, r.size, got.bytes);
        }
      } catch (const std::exception& e) {
        err = error_text(e);
      }
    }
    out_.stats.read_seconds += since(t);
    if (err.empty()) out_.stats.read_bytes += r.size;
    return err;
  }

  void move(const FanoutMove& m, const FanoutRead& r) {
    const bool to_all = m.receivers.size() + 1 == static_cast<std::size_t>(comm_.size());
    if (to_all && m.kind == FanoutMoveKind::broadcast) {
      comm_.broadcast_bytes(dest(r), r.size, static_cast<int>(m.source));
      if (m.source == me_) {
        out_.stats.sent_bytes += r.size * m.receivers.size();
      } else {
        out_.stats.received_bytes += r.size;
      }
      return;
    }
    if (m.source == me_) {
      for (unsigned to : m.receivers) comm_.send_bytes(dest(r), r.size, static_cast<int>(to));
      out_.stats.sent_bytes += r.size * m.receivers.size();
    } else if (std::find(m.receivers.begin(), m.receivers.end(), me_) != m.receivers.end()) {
      comm_.recv_bytes(dest(r), r.size, static_cast<int>(m.source));
      out_.stats.received_bytes += r.size;
    }
  }

  Communicator& comm_;
  const Checkpoint& cp_;
  const FanoutPlan& plan_;
  FanoutLoaded& out_;
  unsigned me_;
  std::vector<long> move_of_;
  std::map<std::size_t, File> files_;
  TransferFuture pending_;
  std::size_t pending_index_ = static_cast<std::size_t>(-1);
  std::string pending_error_;
};

}  // namespace

Checkpoint open_on_every_rank(Communicator& comm, const std::vector<std::string>& paths) {
  std::optional<Checkpoint> cp;
  std::string status;
  try {
    cp.emplace(Checkpoint::open(paths));
  } catch (const std::exception& e) {
    status = error_text(e);
  }
  check_statuses(comm, status, "open");
  return std::move(*cp);
}

FanoutLoaded load_fanout(Communicator& comm, const ClusterEnv& env, const Checkpoint& checkpoint,
                         FanoutScope scope, std::uint64_t exchange_budget) {
  const auto started = Clock::now();
  FanoutLoaded out;
  const FanoutPlan plan = plan_for(comm, env, checkpoint, scope, exchange_budget, &out.stats);
  for (const TensorInfo& t : checkpoint.tensors()) out.tensors.emplace_back(t.bytes);
  Walk(comm, checkpoint, plan, &out).run();
  out.stats.seconds = since(started);
  return out;
}

}  // namespace sluice
