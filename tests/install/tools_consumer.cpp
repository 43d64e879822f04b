// A program on libsluice_tools, written against the installed headers only: a benchmark run of
// the file it is given (libsluice_tools driving libsluice in one process), the capacity model,
// the launcher's view and the communicators, and the report library's charting state, so that
// every installed tools header it names is backed by the installed library.
#include <sluice/tools/bench.hpp>
#include <sluice/tools/capacity.hpp>
#include <sluice/tools/cluster.hpp>
#include <sluice/tools/mpi.hpp>
#include <sluice/tools/report.hpp>

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  sluice::bench::Workload w;
  w.files = {argv[1]};
  w.block_size = 64 * 1024;
  w.xfer = sluice::bench::parse_xfer("cpu-only");
  w.direct = false;  // any file system, tmpfs included
  const sluice::bench::RunResult r = sluice::bench::run_workload(w);
  if (!r.error.empty() || r.bytes == 0) {
    std::fprintf(stderr, "bench: %s\n", r.error.c_str());
    return 1;
  }
  const sluice::capacity::Result cap = sluice::capacity::model(sluice::capacity::Inputs{
      .gpus = 8, .bytes_per_gpu_per_s = 1e9});
  const auto comm = sluice::make_single_communicator();
  const sluice::ClusterEnv env = sluice::detect_cluster_env();
  const sluice::report::ChartLibrary charts = sluice::report::chart_library();
  std::printf("bench %llu bytes via %s; capacity %s; rank %d of %d (%s, MPI %s); charts %s\n",
              static_cast<unsigned long long>(r.bytes), r.path.c_str(),
              cap.fits() ? "fits" : "does not fit", env.rank, comm->size(),
              std::string(comm->kind()).c_str(), sluice::have_mpi() ? "built in" : "not built",
              charts.available ? "built in" : charts.missing.c_str());
  return cap.nodes == 1 && comm->size() == 1 ? 0 : 1;
}
