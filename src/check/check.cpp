#include "sluice/tools/check.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "check/check_remote.hpp"
#include "check/cufile_json.hpp"
#include "check/sysfs.hpp"
#include "sluice/device.hpp"
#include "sluice/error.hpp"
#include "sluice/file.hpp"
#include "sluice/internal/gpu_stack.hpp"
#include "sluice/remote.hpp"
#include "sluice/residency.hpp"
#include "sluice/transfer.hpp"

#if SLUICE_HAVE_HWLOC
#include <hwloc.h>
#endif

namespace sluice::check {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

PciLink to_link(const detail::PciInfo& i) {
  return {i.address,   i.link_speed, i.link_width, i.max_link_speed, i.max_link_width,
          i.numa_node, i.bar1_bytes, i.p2pmem,     i.acs_visible,    i.acs_redirect};
}

// CUDA writes "00000000:17:00.0" or "0000:17:00.0" in upper case; sysfs "0000:17:00.0".
std::string sysfs_pci_address(std::string id) {
  std::transform(id.begin(), id.end(), id.begin(), [](unsigned char c) { return std::tolower(c); });
  const auto colon = id.find(':');
  if (colon != std::string::npos && colon > 4) id.erase(0, colon - 4);
  return id;
}

Platform platform() {
  Platform p;
  std::error_code ec;
  p.nvidia_fs = fs::exists("/proc/driver/nvidia-fs", ec) || fs::exists("/sys/module/nvidia_fs", ec);
  p.nvidia_fs_version = detail::first_line("/sys/module/nvidia_fs/version");
  utsname u{};
  ::uname(&u);
  p.p2pdma = "unknown (no /boot/config-" + std::string(u.release) + ")";
  std::ifstream kcfg(std::string("/boot/config-") + u.release);
  for (std::string line; kcfg && std::getline(kcfg, line);) {
    if (line == "CONFIG_PCI_P2PDMA=y")
      p.p2pdma = "y";
    else if (line == "# CONFIG_PCI_P2PDMA is not set")
      p.p2pdma = "not set";
  }
  if (kcfg.is_open() && p.p2pdma.starts_with("unknown")) p.p2pdma = "not set";
  for (const auto& e : fs::directory_iterator("/sys/class/iommu", ec)) {
    (void)e;
    p.iommu = true;
  }
  for (const auto& e : fs::directory_iterator("/sys/kernel/iommu_groups", ec)) {
    (void)e;
    ++p.iommu_groups;
  }
  std::istringstream cmdline(detail::first_line("/proc/cmdline"));
  for (std::string tok; cmdline >> tok;) {
    if (tok.find("iommu") != std::string::npos)
      p.iommu_cmdline += (p.iommu_cmdline.empty() ? "" : " ") + tok;
  }
  return p;
}

BlockDevice to_block_device(const detail::BlockDevice& b) {
  BlockDevice d;
  d.name = b.name;
  d.devno = b.devno;
  d.kind = b.kind;
  d.disk = b.disk;
  d.model = b.model;
  d.backing_file = b.backing_file;
  auto q = [&](const char* k) {
    const auto it = b.queue.find(k);
    return it == b.queue.end() ? std::string() : it->second;
  };
  d.logical_block_size = q("logical_block_size");
  d.rotational = q("rotational");
  d.scheduler = q("scheduler");
  if (b.pci) d.pci = to_link(*b.pci);
  return d;
}

// An open File for `path`: the file or block device itself, or an empty probe file created in
// (and unlinked from) a folder, since O_DIRECT support belongs to the filesystem.
File open_probe(const std::string& path) {
  OpenOptions o;
  o.direct = config()->direct_io;
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return File::open(path, OpenMode::read, o);
  std::string name = (fs::path(path) / ".sluice-check-XXXXXX").string();
  const int fd = ::mkstemp(name.data());
  if (fd < 0) throw_os_error(errno, {.op = "check", .path = path}, "cannot create a probe file");
  ::close(fd);
  struct Unlink {
    std::string n;
    ~Unlink() { ::unlink(n.c_str()); }
  } unlink_probe{name};
  return File::open(name, OpenMode::read_write, o);
}

void add_residency(const File& f, PathReport& r) {
  if (f.is_block_device() || r.path != f.path()) return;  // a folder's probe file holds nothing
  const std::uint64_t size = f.size();
  if (size == 0) return;
  const Residency res = page_cache_residency(f.fd(), 0, size);
  r.cached_pages = res.cached;
  r.file_pages = res.pages;
  r.residency_method = std::string(to_string(res.method));
}

PathReport inspect_path(const std::string& path, const std::shared_ptr<Device>& device) {
  PathReport r;
  r.path = path;
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    r.error = fmt::format("{} does not exist", path);
    return r;
  }
  const detail::Mount m = detail::mount_of(path);
  r.fs_type = m.type;
  r.mount_point = m.point;
  r.mount_options = m.options;
  r.source = m.source;
  struct stat st {};
  std::vector<detail::BlockDevice> disks;
  if (::stat(path.c_str(), &st) == 0 && S_ISBLK(st.st_mode)) {
    disks = detail::backing_disks(fmt::format("{}:{}", major(st.st_rdev), minor(st.st_rdev)));
  } else {
    disks = detail::mount_block_devices(m);
  }
  for (const auto& b : disks) r.block_devices.push_back(to_block_device(b));
  try {
    const File f = open_probe(path);
    r.o_direct = f.has_direct();
    r.o_direct_reason = f.direct_reason();
    if (r.o_direct) {
      r.dio_mem_align = f.mem_align();
      r.dio_offset_align = f.offset_align();
    }
    add_residency(f, r);
    if (device) {
      DeviceBuffer buf(device, 1 << 20);
      TransferOptions o;
      o.device = device;
      try {
        const PathChoice c = choose_path(f, buf.data(), buf.size(), 0, o);
        r.sluice_path = std::string(to_string(c.path));
        r.reason = c.reason;
      } catch (const std::exception& e) {
        r.sluice_path = "none";
        r.reason = e.what();
      }
    }
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  return r;
}

std::string hwloc_summary() {
#if SLUICE_HAVE_HWLOC
  hwloc_topology_t t = nullptr;
  if (hwloc_topology_init(&t) != 0) return "hwloc: topology init failed";
  // No I/O objects: sysfs gives the PCI detail, and hwloc's PCI backend leaks when it runs.
  if (hwloc_topology_load(t) != 0) {
    hwloc_topology_destroy(t);
    return "hwloc: topology load failed";
  }
  auto n = [&](hwloc_obj_type_t type) { return hwloc_get_nbobjs_by_type(t, type); };
  std::string s = fmt::format("{} package(s), {} NUMA node(s), {} core(s), {} PU(s)", n(HWLOC_OBJ_PACKAGE),
                              n(HWLOC_OBJ_NUMANODE), n(HWLOC_OBJ_CORE), n(HWLOC_OBJ_PU));
  hwloc_topology_destroy(t);
  return s;
#else
  return "not available (built without hwloc)";
#endif
}

json link_json(const std::optional<PciLink>& l) {
  if (!l) return nullptr;
  return {{"address", l->address},          {"link_speed", l->speed},
          {"link_width", l->width},         {"max_link_speed", l->max_speed},
          {"max_link_width", l->max_width}, {"numa_node", l->numa_node},
          {"bar1_bytes", l->bar1_bytes},    {"p2pmem", l->p2pmem},
          {"acs_visible", l->acs_visible},  {"acs_redirect", l->acs_redirect}};
}

std::string link_text(const std::optional<PciLink>& l) {
  if (!l) return "no PCI function in sysfs";
  std::string s = fmt::format(
      "PCI {}, link {} x{} (max {} x{}), NUMA node {}", l->address,
      l->speed.empty() ? "?" : l->speed, l->width.empty() ? "?" : l->width,
      l->max_speed.empty() ? "?" : l->max_speed, l->max_width.empty() ? "?" : l->max_width,
      l->numa_node < 0 ? std::string("unknown") : std::to_string(l->numa_node));
  if (!l->speed.empty() && (l->speed != l->max_speed || l->width != l->max_width))
    s += " [link below its maximum]";
  if (!l->acs_redirect.empty()) {
    std::string list;
    for (const auto& a : l->acs_redirect) list += (list.empty() ? "" : ", ") + a;
    s += fmt::format(" [ACS P2P redirect on above it: {}]", list);
  }
  return s;
}

}  // namespace

Report inspect(const std::vector<std::string>& paths) {
  Report r;
  const CudaLibraryStatus cuda = cuda_library_status();
  r.cuda = cuda.available;
  r.cuda_reason = cuda.reason;
  const int count = cuda.devices;
  for (int i = 0; i < count; ++i) {
    Gpu g;
    g.ordinal = i;
    try {
      const auto dev = open_device(fmt::format("cuda:{}", i));
      const DeviceInfo& info = dev->info();
      g.name = info.name;
      g.total_memory = info.total_memory;
      g.driver = info.driver;
      if (!info.pci_bus_id.empty()) {
        if (auto p = detail::pci_info(sysfs_pci_address(info.pci_bus_id))) g.pci = to_link(*p);
      }
    } catch (const std::exception& e) {
      g.name = fmt::format("(cannot open: {})", e.what());
    }
    r.gpus.push_back(std::move(g));
  }
  if (!r.cuda) {
    // GPUs CUDA cannot reach (no driver, bound to vfio, ...) still show in sysfs.
    for (const auto& [address, driver] : detail::nvidia_gpus_in_sysfs()) {
      Gpu g;
      g.cuda = false;
      g.ordinal = -1;
      g.name = "NVIDIA GPU (not usable through CUDA)";
      g.driver = driver.empty() ? "no kernel driver bound" : "kernel driver " + driver;
      if (auto p = detail::pci_info(address)) g.pci = to_link(*p);
      r.gpus.push_back(std::move(g));
    }
  }
  const CuFileLibraryStatus cf = cufile_library_status();
  r.cufile = {cf.available, cf.version, cf.library, cf.reason};
  r.platform = platform();
  std::shared_ptr<Device> device;
  try {
    device = open_device(config()->device);
    r.device = fmt::format("{} ({})", device->info().name, device->selection());
  } catch (const std::exception& e) {
    r.device = fmt::format("none: {}", e.what());
  }
  for (const auto& p : paths) {
    if (is_remote_url(p)) {
      r.remotes.push_back(inspect_remote(p));
    } else {
      r.paths.push_back(inspect_path(p, device));
    }
  }
  r.config = config()->entries();
  r.cufile_json = inspect_cufile_json();
  r.hwloc = hwloc_summary();
  return r;
}

std::string to_json(const Report& r) {
  json j = json::object();
  json gpus = json::array();
  for (const auto& g : r.gpus) {
    gpus.push_back({{"cuda", g.cuda},
                    {"ordinal", g.ordinal},
                    {"name", g.name},
                    {"total_memory", g.total_memory},
                    {"driver", g.driver},
                    {"pci", link_json(g.pci)}});
  }
  j["gpus"] = gpus;
  j["cuda"] = {{"available", r.cuda}, {"reason", r.cuda_reason}};
  j["device"] = r.device;
  j["cufile"] = {{"loaded", r.cufile.loaded},
                 {"version", r.cufile.version},
                 {"library", r.cufile.library},
                 {"reason", r.cufile.reason}};
  const Platform& p = r.platform;
  j["platform"] = {{"nvidia_fs", p.nvidia_fs},       {"nvidia_fs_version", p.nvidia_fs_version},
                   {"pci_p2pdma", p.p2pdma},         {"iommu", p.iommu},
                   {"iommu_groups", p.iommu_groups}, {"iommu_cmdline", p.iommu_cmdline}};
  json paths = json::array();
  for (const auto& x : r.paths) {
    json devs = json::array();
    for (const auto& b : x.block_devices) {
      devs.push_back({{"name", b.name},
                      {"devno", b.devno},
                      {"kind", b.kind},
                      {"disk", b.disk},
                      {"model", b.model},
                      {"backing_file", b.backing_file},
                      {"logical_block_size", b.logical_block_size},
                      {"rotational", b.rotational},
                      {"scheduler", b.scheduler},
                      {"pci", link_json(b.pci)}});
    }
    json e = {{"path", x.path},
              {"error", x.error},
              {"fs_type", x.fs_type},
              {"mount_point", x.mount_point},
              {"mount_options", x.mount_options},
              {"source", x.source},
              {"block_devices", devs},
              {"o_direct", x.o_direct},
              {"o_direct_reason", x.o_direct_reason},
              {"dio_alignment", {{"memory", x.dio_mem_align}, {"offset", x.dio_offset_align}}},
              {"sluice_path", x.sluice_path},
              {"reason", x.reason},
              {"page_cache", x.residency_method.empty()
                                 ? json(nullptr)
                                 : json{{"cached_pages", x.cached_pages},
                                        {"pages", x.file_pages},
                                        {"method", x.residency_method}}}};
    paths.push_back(std::move(e));
  }
  j["paths"] = paths;
  json remotes = json::array();
  for (const auto& x : r.remotes) remotes.push_back(remote_json(x));
  j["remote"] = remotes;
  json cfg = json::object();
  for (const auto& c : r.config) {
    cfg[c.name] = {{"value", c.value}, {"source", to_string(c.source)}, {"env", c.env}};
  }
  j["config"] = cfg;
  j["cufile_json"] = cufile_json_json(r.cufile_json);
  j["hwloc"] = r.hwloc;
  return j.dump(2);
}

std::string to_text(const Report& r) {
  std::string s;
  auto line = [&](std::string l) { s += l + "\n"; };
  line("GPUs");
  if (!r.cuda) line(fmt::format("  no CUDA GPU: {}", r.cuda_reason));
  for (const auto& g : r.gpus) {
    if (g.cuda) {
      line(fmt::format("  cuda:{} {}, {:.1f} GiB, {}", g.ordinal, g.name,
                       static_cast<double>(g.total_memory) / (1024.0 * 1024 * 1024), g.driver));
    } else {
      line(fmt::format("  {} ({})", g.name, g.driver));
    }
    line(fmt::format("    {}", link_text(g.pci)));
    if (g.pci && g.pci->bar1_bytes != 0)
      line(fmt::format("    BAR1 {} MiB", g.pci->bar1_bytes >> 20));
  }
  line(fmt::format("  device for GPU paths: {}", r.device));
  line("cuFile");
  if (r.cufile.loaded) {
    line(fmt::format("  {} loaded, version {}.{}", r.cufile.library, r.cufile.version / 1000,
                     (r.cufile.version % 1000) / 10));
  } else {
    line(fmt::format("  not loaded: {}", r.cufile.reason));
  }
  const Platform& p = r.platform;
  line("Platform");
  line(fmt::format("  nvidia-fs: {}",
                   p.nvidia_fs ? "loaded " + p.nvidia_fs_version : std::string("not loaded")));
  line(fmt::format("  PCI P2PDMA (CONFIG_PCI_P2PDMA): {}", p.p2pdma));
  line(fmt::format("  IOMMU: {} ({} groups){}", p.iommu ? "on" : "off", p.iommu_groups,
                   p.iommu_cmdline.empty() ? "" : ", kernel parameters: " + p.iommu_cmdline));
  line(fmt::format("  topology (hwloc): {}", r.hwloc));
  for (const auto& x : r.paths) {
    line(fmt::format("Path {}", x.path));
    if (!x.error.empty() && x.fs_type.empty()) {
      line(fmt::format("  error: {}", x.error));
      continue;
    }
    line(fmt::format("  filesystem {} on {} (mounted at {}), options {}", x.fs_type, x.source,
                     x.mount_point, x.mount_options));
    if (x.block_devices.empty()) line("  block devices: none (memory or network filesystem)");
    for (const auto& b : x.block_devices) {
      line(fmt::format("  block device {} ({} {}{}{}), {}-byte sectors, rotational {}", b.name,
                       b.kind, b.devno, b.model.empty() ? "" : ", " + b.model,
                       b.backing_file.empty() ? "" : ", backed by " + b.backing_file,
                       b.logical_block_size.empty() ? "?" : b.logical_block_size,
                       b.rotational.empty() ? "?" : b.rotational));
      if (b.pci) line(fmt::format("    {}", link_text(b.pci)));
    }
    if (!x.error.empty()) {
      line(fmt::format("  error: {}", x.error));
      continue;
    }
    if (x.o_direct) {
      line(fmt::format("  O_DIRECT: yes, buffers aligned to {} bytes, offsets and lengths to {}",
                       x.dio_mem_align, x.dio_offset_align));
    } else {
      line(fmt::format("  O_DIRECT: no: {}", x.o_direct_reason));
    }
    if (!x.sluice_path.empty())
      line(fmt::format("  device memory would take: {} ({})", x.sluice_path, x.reason));
    if (!x.residency_method.empty()) {
      line(fmt::format("  page cache: {}% of the file ({} of {} pages, {}); cache_policy auto reads those through it",
                       x.cached_pages * 100 / std::max<std::uint64_t>(x.file_pages, 1), x.cached_pages,
                       x.file_pages, x.residency_method));
    }
  }
  for (const auto& x : r.remotes) s += remote_text(x);
  line("Configuration");
  for (const auto& c : r.config)
    line(fmt::format("  {:<20} {:<12} {} ({})", c.name, c.value, to_string(c.source), c.env));
  s += cufile_json_text(r.cufile_json);
  return s;
}

}  // namespace sluice::check
