// The job position from launcher variables, path placeholders, and the single-process
// communicator. No MPI here: see mpi_comm.cpp for the library that links it.
#include <unistd.h>

#include <cctype>
#include <charconv>
#include <cstdlib>
#include <fstream>

#include <fmt/format.h>

#include "sluice/error.hpp"
#include "sluice/tools/cluster.hpp"

namespace sluice {
namespace {

// A variable that must be a non-negative integer when set.
std::optional<int> number(const EnvLookup& env, const char* name) {
  const std::optional<std::string> v = env(name);
  if (!v) return std::nullopt;
  int n = -1;
  const char* end = v->data() + v->size();
  const auto [p, ec] = std::from_chars(v->data(), end, n);
  if (ec != std::errc{} || p != end || n < 0) {
    throw_usage_error({.op = "cluster"},
                      fmt::format("the launcher variable {}='{}' is not a number", name, *v));
  }
  return n;
}

std::optional<int> first_number(const EnvLookup& env, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (auto v = number(env, n)) return v;
  }
  return std::nullopt;
}

struct Source {
  Launcher launcher;
  const char* rank_var;
  std::initializer_list<const char*> size_vars;
  std::initializer_list<const char*> local_rank_vars;
  std::initializer_list<const char*> local_size_vars;
  const char* only_if = nullptr;  // a further variable that must be set
};

class SingleCommunicator final : public Communicator {
 public:
  [[nodiscard]] int rank() const noexcept override { return 0; }
  [[nodiscard]] int size() const noexcept override { return 1; }
  [[nodiscard]] std::string_view kind() const noexcept override { return "single"; }
  void barrier() override {}
  std::vector<std::string> gather(const std::string& mine, int) override { return {mine}; }
  std::string broadcast(const std::string& value, int) override { return value; }
  [[noreturn]] void abort(int code) override { std::_Exit(code); }
};

}  // namespace

std::string_view to_string(Launcher l) noexcept {
  switch (l) {
    case Launcher::none:
      return "none";
    case Launcher::openmpi:
      return "openmpi";
    case Launcher::pmix:
      return "pmix";
    case Launcher::pmi:
      return "pmi";
    case Launcher::slurm:
      return "slurm";
    case Launcher::torchrun:
      return "torchrun";
  }
  return "?";
}

bool is_mpi_launcher(Launcher l) noexcept {
  return l == Launcher::openmpi || l == Launcher::pmix || l == Launcher::pmi ||
         l == Launcher::slurm;
}

ClusterEnv detect_cluster_env(const EnvLookup& env) {
  static const Source sources[] = {
      {Launcher::openmpi,
       "OMPI_COMM_WORLD_RANK",
       {"OMPI_COMM_WORLD_SIZE"},
       {"OMPI_COMM_WORLD_LOCAL_RANK"},
       {"OMPI_COMM_WORLD_LOCAL_SIZE"}},
      {Launcher::pmix,
       "PMIX_RANK",
       {"PMI_SIZE", "OMPI_COMM_WORLD_SIZE"},
       {"MPI_LOCALRANKID"},
       {"MPI_LOCALNRANKS"}},
      {Launcher::pmi,
       "PMI_RANK",
       {"PMI_SIZE"},
       {"MPI_LOCALRANKID", "PMI_LOCAL_RANK"},
       {"MPI_LOCALNRANKS", "PMI_LOCAL_SIZE"}},
      {Launcher::slurm,
       "SLURM_PROCID",
       {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"},
       {"SLURM_LOCALID"},
       {"SLURM_STEP_TASKS_PER_NODE"},
       "SLURM_STEP_ID"},
      {Launcher::torchrun,
       "RANK",
       {"WORLD_SIZE"},
       {"LOCAL_RANK"},
       {"LOCAL_WORLD_SIZE"},
       "WORLD_SIZE"},
  };
  ClusterEnv out;
  for (const Source& s : sources) {
    if (s.only_if != nullptr && !env(s.only_if)) continue;
    const std::optional<int> rank = number(env, s.rank_var);
    if (!rank) continue;
    const std::optional<int> size = first_number(env, s.size_vars);
    if (!size) continue;  // a rank without a world size is not a usable position
    if (*size < 1 || *rank >= *size) {
      throw_usage_error({.op = "cluster"},
                        fmt::format("the launcher says rank {} of {} processes ({}), which "
                                    "cannot be",
                                    *rank, *size, s.rank_var));
    }
    out.launcher = s.launcher;
    out.rank = *rank;
    out.world_size = *size;
    out.local_rank = first_number(env, s.local_rank_vars).value_or(0);
    // Slurm writes tasks per node as "4(x2)": its leading number is this node's count.
    out.local_size = 0;
    for (const char* n : s.local_size_vars) {
      if (const auto v = env(n)) {
        out.local_size = std::atoi(v->c_str());
        break;
      }
    }
    break;
  }
  return out;
}

ClusterEnv detect_cluster_env() {
  ClusterEnv e = detect_cluster_env([](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  });
  e.host = host_name();
  return e;
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return {};
  return buf;
}

bool has_placeholders(std::string_view text) noexcept {
  for (std::string_view p : {"{rank}", "{local_rank}", "{world_size}", "{host}"}) {
    if (text.find(p) != std::string_view::npos) return true;
  }
  return false;
}

std::string expand_placeholders(std::string_view text, const ClusterEnv& where) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if ((c == '{' || c == '}') && i + 1 < text.size() && text[i + 1] == c) {
      out += c;
      ++i;
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    const std::size_t close = text.find('}', i);
    const std::string_view name =
        text.substr(i + 1, close == std::string_view::npos ? close : close - i - 1);
    if (close == std::string_view::npos) {
      throw_usage_error({.op = "placeholder"},
                        fmt::format("'{}': '{{' without '}}' (write {{{{ for a brace)", text));
    }
    if (name == "rank") {
      out += std::to_string(where.rank);
    } else if (name == "local_rank") {
      out += std::to_string(where.local_rank);
    } else if (name == "world_size") {
      out += std::to_string(where.world_size);
    } else if (name == "host") {
      out += where.host;
    } else {
      throw_usage_error(
          {.op = "placeholder"},
          fmt::format("'{}': unknown placeholder {{{}}} (known: {{rank}}, {{local_rank}}, "
                      "{{world_size}}, {{host}})",
                      text, name));
    }
    i = close;
  }
  return out;
}

int pci_numa_node(std::string_view bus_id) {
  if (bus_id.empty()) return -1;
  std::string id(bus_id);
  for (char& c : id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::ifstream in(fmt::format("/sys/bus/pci/devices/{}/numa_node", id));
  int node = -1;
  if (!(in >> node)) return -1;
  return node;
}

std::unique_ptr<Communicator> make_single_communicator() {
  return std::make_unique<SingleCommunicator>();
}

}  // namespace sluice
