// The Communicator over MPI_COMM_WORLD, built as the plugin libsluice_mpi.so that
// make_mpi_communicator() (src/cluster/mpi_plugin.cpp) loads on first use: only this file calls
// MPI, and only processes that run under a launcher load MPI's libraries. Errors keep MPI's
// default handler (MPI_ERRORS_ARE_FATAL), so a collective call that cannot complete because a
// process died ends the job instead of returning into code that would wait for it; mpirun then
// names the dead process.
#include <mpi.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <numeric>
#include <vector>

#include <fmt/format.h>

#include "sluice/error.hpp"
#include "sluice/tools/cluster.hpp"
#include "sluice/internal/mpi_plugin.hpp"

namespace sluice {
namespace {

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized == 0) {
      int provided = 0;
      if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        throw Error(ErrorDomain::usage, EINVAL, {.op = "MPI_Init_thread"}, "MPI did not start");
      }
      owned_ = true;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  ~MpiCommunicator() override {
    if (owned_) MPI_Finalize();
  }
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  [[nodiscard]] int rank() const noexcept override { return rank_; }
  [[nodiscard]] int size() const noexcept override { return size_; }
  [[nodiscard]] std::string_view kind() const noexcept override { return "mpi"; }

  void barrier() override { MPI_Barrier(MPI_COMM_WORLD); }

  std::vector<std::string> gather(const std::string& mine, int root) override {
    const int len = static_cast<int>(mine.size());
    std::vector<int> lens(rank_ == root ? static_cast<std::size_t>(size_) : 0);
    MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, root, MPI_COMM_WORLD);
    std::vector<int> displs(lens.size());
    std::string all;
    if (rank_ == root) {
      std::exclusive_scan(lens.begin(), lens.end(), displs.begin(), 0);
      all.resize(static_cast<std::size_t>(std::accumulate(lens.begin(), lens.end(), 0L)));
    }
    MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR, root,
                MPI_COMM_WORLD);
    std::vector<std::string> out;
    for (std::size_t r = 0; r < lens.size(); ++r) {
      out.push_back(
          all.substr(static_cast<std::size_t>(displs[r]), static_cast<std::size_t>(lens[r])));
    }
    return out;
  }

  std::string broadcast(const std::string& value, int root) override {
    int len = static_cast<int>(value.size());
    MPI_Bcast(&len, 1, MPI_INT, root, MPI_COMM_WORLD);
    std::string out = rank_ == root ? value : std::string(static_cast<std::size_t>(len), '\0');
    MPI_Bcast(out.data(), len, MPI_CHAR, root, MPI_COMM_WORLD);
    return out;
  }

  std::vector<std::string> allgather(const std::string& mine) override {
    const int len = static_cast<int>(mine.size());
    std::vector<int> lens(static_cast<std::size_t>(size_));
    MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD);
    std::vector<int> displs(lens.size());
    std::exclusive_scan(lens.begin(), lens.end(), displs.begin(), 0);
    std::string all(static_cast<std::size_t>(std::accumulate(lens.begin(), lens.end(), 0L)), '\0');
    MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR, MPI_COMM_WORLD);
    std::vector<std::string> out;
    for (std::size_t r = 0; r < lens.size(); ++r) {
      out.push_back(all.substr(static_cast<std::size_t>(displs[r]), static_cast<std::size_t>(lens[r])));
    }
    return out;
  }

  // MPI counts are ints: large moves go in pieces of 1 GiB.
  void broadcast_bytes(void* data, std::size_t size, int root) override {
    for_pieces(data, size, [&](char* p, int n) { MPI_Bcast(p, n, MPI_BYTE, root, MPI_COMM_WORLD); });
  }
  void send_bytes(const void* data, std::size_t size, int dest) override {
    for_pieces(const_cast<void*>(data), size,
               [&](char* p, int n) { MPI_Send(p, n, MPI_BYTE, dest, move_tag, MPI_COMM_WORLD); });
  }
  void recv_bytes(void* data, std::size_t size, int source) override {
    for_pieces(data, size, [&](char* p, int n) {
      MPI_Recv(p, n, MPI_BYTE, source, move_tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    });
  }

  void arm_done() override {
    if (done_recv_ != MPI_REQUEST_NULL) return;
    MPI_Irecv(&done_buf_, 1, MPI_INT, MPI_ANY_SOURCE, done_tag, MPI_COMM_WORLD, &done_recv_);
  }

  void raise_done() override {
    if (!done_sends_.empty()) return;
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      done_sends_.push_back(MPI_REQUEST_NULL);
      MPI_Isend(&rank_, 1, MPI_INT, r, done_tag, MPI_COMM_WORLD, &done_sends_.back());
    }
    if (done_sends_.empty()) done_sends_.push_back(MPI_REQUEST_NULL);  // one process: still "sent"
  }

  bool done_raised() override {
    if (done_recv_ == MPI_REQUEST_NULL) return false;
    int flag = 0;
    MPI_Test(&done_recv_, &flag, MPI_STATUS_IGNORE);  // completes (and nulls) the request
    done_seen_ = done_seen_ || flag != 0;
    return done_seen_;
  }

  // Every process that raised sent one message to each other one: receive exactly those, so
  // none is left to be matched by the next phase's receive.
  void settle_done() override {
    const int mine = done_sends_.empty() ? 0 : 1;
    int senders = 0;
    MPI_Allreduce(&mine, &senders, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    int expected = senders - mine;
    if (done_recv_ != MPI_REQUEST_NULL) {
      if (expected == 0) {
        MPI_Cancel(&done_recv_);
      } else {
        --expected;
      }
      MPI_Wait(&done_recv_, MPI_STATUS_IGNORE);
    } else if (done_seen_) {
      --expected;
    }
    for (; expected > 0; --expected) {
      MPI_Recv(&done_buf_, 1, MPI_INT, MPI_ANY_SOURCE, done_tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    MPI_Waitall(static_cast<int>(done_sends_.size()), done_sends_.data(), MPI_STATUSES_IGNORE);
    done_sends_.clear();
    done_seen_ = false;
  }

  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

 private:
  template <class F>
  static void for_pieces(void* data, std::size_t size, F&& f) {
    constexpr std::size_t piece = std::size_t{1} << 30;
    auto* p = static_cast<char*>(data);
    for (std::size_t done = 0; done < size; done += piece) f(p + done, static_cast<int>(std::min(piece, size - done)));
  }
  static constexpr int done_tag = 7001;
  static constexpr int move_tag = 7002;
  int rank_ = 0;
  int size_ = 1;
  MPI_Request done_recv_ = MPI_REQUEST_NULL;
  int done_buf_ = 0;
  bool done_seen_ = false;
  std::vector<MPI_Request> done_sends_;
  bool owned_ = false;
};

}  // namespace

}  // namespace sluice

// The plugin's one entry point (sluice/internal/mpi_plugin.hpp): the caller owns the result.
extern "C" __attribute__((visibility("default"))) sluice::Communicator*
sluice_mpi_plugin_make_communicator() {
  return new sluice::MpiCommunicator();
}
