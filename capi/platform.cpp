// What the platform offers GDS, as cuFile's clients ask it: a GPU's BAR1 size
// (cuFileGetBARSizeInKB), the P2P modes each file system could use (cuFileDriverSet/GetP2PFlags)
// and the PCIe topology (cuFileExportPCIeTopology). The answers come from sysfs and from NVIDIA's
// library where Sluice's direct path goes through it, never from guesses: a fact nobody can
// read is an error code (BAR size) or an absent mode (P2P flags), as NVIDIA documents them.
//
// SLUICE_SYSFS (default /sys) roots the sysfs reads, so tests can stand up a GPU's PCI function.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "exports.hpp"
#include "guarded.hpp"
#include "log.hpp"
#include "sluice/device.hpp"
#include "sluice/internal/gpu_stack.hpp"
#include "state.hpp"

namespace sluice::capi {
namespace {

std::string sysfs_root() {
  const char* v = std::getenv("SLUICE_SYSFS");
  return v != nullptr && *v != '\0' ? v : "/sys";
}

std::string pci_dir(const std::string& address) {
  std::string a = address;
  for (char& c : a) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return sysfs_root() + "/bus/pci/devices/" + a;
}

// The size of the GPU's BAR1 aperture (the window peer DMA and GDS map device memory through)
// from the function's resource table, one "start end flags" line per region. Which line holds
// it depends on the BARs before it: a 64-bit BAR0 (as some GPUs have) takes regions 0 and 1 and
// moves the aperture to region 2. It is the largest region after the register window (region
// 0), among the six BARs; 0 when none is assigned.
std::uint64_t bar1_bytes(const std::string& address) {
  std::ifstream in(pci_dir(address) + "/resource");
  std::string line;
  std::uint64_t largest = 0;
  for (int region = 0; region < 6 && std::getline(in, line); ++region) {
    std::istringstream fields(line);
    std::uint64_t start = 0;
    std::uint64_t end = 0;
    fields >> std::hex >> start >> end;
    if (region > 0 && fields && end > start) largest = std::max(largest, end - start + 1);
  }
  return largest;
}

// The device cuFile's gpuIndex names: the driver's own where it is that ordinal, else
// cuda:<index> opened for the question; null when there is no such GPU.
std::shared_ptr<Device> gpu(int index) {
  const std::shared_ptr<Device> dev = State::get().device();
  if (dev && dev->info().kind == DeviceKind::cuda && dev->info().ordinal == index) return dev;
  if (dev && dev->info().kind != DeviceKind::cuda) return nullptr;  // the driver runs on sim
  // Before the driver opens (cuFileExportPCIeTopology needs no open driver): CUDA's GPUs.
  if (!dev && index >= cuda_library_status().devices) return nullptr;
  try {
    return open_device(fmt::format("cuda:{}", index));
  } catch (const std::exception&) {
    return nullptr;
  }
}

bool valid_status_flag(int f) {
  return f >= 0 && f < CU_FILE_MAX_TARGET_TYPES && f != 10;  // 10 is reserved
}

// The P2P modes Sluice's direct path offers file systems of type `f`: those NVIDIA's library
// serves it with (nvidia-fs, PCI P2PDMA); none without NVIDIA's library, where every transfer of
// device memory takes Sluice's bounce path.
unsigned available_p2p(int f) {
  const CuFileLibraryStatus direct = cufile_library_status();
  if (!direct.available || (direct.dstatusflags & (1U << f)) == 0) return 0;
  unsigned modes = 0;
  if (direct.nvfs_major != 0 || direct.nvfs_minor != 0) modes |= CU_FILE_P2P_FLAG_NVFS;
  if ((direct.fflags & (1U << CU_FILE_P2P_SUPPORTED)) != 0) modes |= CU_FILE_P2P_FLAG_PCI_P2PDMA;
  return modes;
}

// A PCI function in the topology: its address, NUMA node and the root port above it (the PCIe
// group routing is decided by), from sysfs.
nlohmann::json pci_entry(const std::string& address) {
  nlohmann::json j;
  j["pci"] = address;
  std::ifstream numa(pci_dir(address) + "/numa_node");
  int node = -1;
  if (!(numa >> node)) node = -1;
  j["numa_node"] = node;
  std::error_code ec;
  const auto real = std::filesystem::canonical(pci_dir(address), ec).string();
  // /sys/devices/pci0000:00/0000:00:01.0/.../<address>: the first function below the host bridge.
  const auto root = real.find("/pci");
  const auto port = root == std::string::npos ? root : real.find('/', root + 1);
  j["pcie_root_port"] =
      port == std::string::npos ? "" : real.substr(port + 1, real.find('/', port + 1) - port - 1);
  return j;
}

// The topology cuFile routes by: the GPUs (index, name, PCI function, NUMA node, root port,
// BAR1) and the NVMe controllers sysfs shows.
nlohmann::json topology() {
  nlohmann::json gpus = nlohmann::json::array();
  const int n = cuda_library_status().devices;
  for (int i = 0; i < n; ++i) {
    const std::shared_ptr<Device> dev = gpu(i);
    if (!dev || dev->info().pci_bus_id.empty()) continue;
    nlohmann::json g = pci_entry(dev->info().pci_bus_id);
    g["index"] = i;
    g["name"] = dev->info().name;
    g["bar1_kb"] = bar1_bytes(dev->info().pci_bus_id) / 1024;
    gpus.push_back(std::move(g));
  }
  nlohmann::json nvme = nlohmann::json::array();
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(sysfs_root() + "/class/nvme", ec)) {
    const auto target = std::filesystem::canonical(e.path() / "device", ec);
    if (ec) continue;
    nlohmann::json c = pci_entry(target.filename().string());
    c["name"] = e.path().filename().string();
    nvme.push_back(std::move(c));
  }
  return {{"format", "sluice PCIe topology 1"}, {"gpus", gpus}, {"nvme", nvme}};
}

constexpr unsigned kAsked = 1U << 31;  // in Params::p2p_requested: a request was made
constexpr unsigned kAllModes = (1U << (CUFILE_NVIDIA_PEERMEM + 1)) - 1;

}  // namespace
}  // namespace sluice::capi

using namespace sluice::capi;  // NOLINT(google-build-using-namespace): the C entry points below

CUFILE_API CUfileError_t cuFileGetBARSizeInKB(int gpuIndex, size_t* barSize) {
  return guarded("cuFileGetBARSizeInKB", [&] {
    if (gpuIndex < 0 || barSize == nullptr) return status(CU_FILE_INVALID_VALUE);
    if (!State::get().is_open()) return status(CU_FILE_DRIVER_NOT_INITIALIZED);
    const std::shared_ptr<sluice::Device> dev = gpu(gpuIndex);
    const std::string address = dev ? dev->info().pci_bus_id : "";
    const std::uint64_t bytes = address.empty() ? 0 : bar1_bytes(address);
    if (bytes == 0) {
      log(LogLevel::info, "cuFileGetBARSizeInKB({}): unknown ({})", gpuIndex,
          !dev              ? "no such CUDA GPU"
          : address.empty() ? "no PCI address"
                            : pci_dir(address));
      return status(CU_FILE_INVALID_VALUE);
    }
    *barSize = static_cast<size_t>(bytes / 1024);
    return kSuccess;
  });
}

CUFILE_API CUfileError_t cuFileDriverSetP2PFlags(CUfileDriverStatusFlags_t status_flag,
                                                 CUfileP2PFlags_t p2p_flags) {
  const int f = raw(status_flag);
  const auto modes = static_cast<unsigned>(raw(p2p_flags));
  if (!valid_status_flag(f) || (modes & ~kAllModes) != 0) return status(CU_FILE_INVALID_VALUE);
  const unsigned offered = available_p2p(f);
  State& s = State::get();
  std::lock_guard lock(s.mutex());
  s.params().p2p_requested[static_cast<std::size_t>(f)] = modes | kAsked;
  if ((modes & ~offered) != 0)
    log(LogLevel::info, "cuFileDriverSetP2PFlags({}, {:#x}): this platform offers {:#x}", f, modes,
        offered);
  return kSuccess;
}

CUFILE_API CUfileError_t cuFileDriverGetP2PFlags(CUfileDriverStatusFlags_t status_flag,
                                                 CUfileP2PFlags_t* p2p_flags) {
  const int f = raw(status_flag);
  if (!valid_status_flag(f) || p2p_flags == nullptr) return status(CU_FILE_INVALID_VALUE);
  unsigned modes = available_p2p(f);
  State& s = State::get();
  {
    std::lock_guard lock(s.mutex());
    const unsigned asked = s.params().p2p_requested[static_cast<std::size_t>(f)];
    if ((asked & kAsked) != 0) modes &= asked;  // only the modes asked for, where offered
  }
  // A mask, not one enumerator: stored as the int a C caller reads back.
  const int bits = static_cast<int>(modes);
  std::memcpy(p2p_flags, &bits, sizeof bits);
  return kSuccess;
}

CUFILE_API CUfileError_t cuFileExportPCIeTopology(const char* filename) {
  return guarded("cuFileExportPCIeTopology", [&] {
    if (filename == nullptr || *filename == '\0') return status(CU_FILE_INVALID_VALUE);
    const std::string text = topology().dump(2) + "\n";
    const std::string tmp = fmt::format("{}.tmp.{}", filename, ::getpid());
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << text;
      out.flush();
      if (!out) {
        const int err = errno;
        std::remove(tmp.c_str());
        log(LogLevel::info, "cuFileExportPCIeTopology: cannot write {}: {}", filename,
            std::strerror(err));
        return status(err == EACCES || err == EPERM ? CU_FILE_PERMISSION_DENIED
                                                    : CU_FILE_INVALID_VALUE);
      }
    }
    if (std::rename(tmp.c_str(), filename) != 0) {
      std::remove(tmp.c_str());
      return status(CU_FILE_INVALID_VALUE);
    }
    log(LogLevel::info, "cuFileExportPCIeTopology: wrote {}", filename);
    return kSuccess;
  });
}
