// The Communicator over MPI_COMM_WORLD. Errors keep MPI's default handler (MPI_ERRORS_ARE_FATAL),
// so a collective call that cannot complete because a process died ends the job instead of
// returning into code that would wait for it; mpirun then names the dead process.
#include <mpi.h>

#include <cstdlib>
#include <numeric>

#include <fmt/format.h>

#include "sluice/error.hpp"
#include "sluice/mpi.hpp"

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
        throw Error(ErrorDomain::usage, 0, {.op = "MPI_Init_thread"}, "MPI did not start");
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

  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

 private:
  int rank_ = 0;
  int size_ = 1;
  bool owned_ = false;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator() {
  return std::make_unique<MpiCommunicator>();
}

}  // namespace sluice
