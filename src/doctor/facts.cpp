// Platform facts the doctor reads besides the check library's: page-cache residency of the
// workload's files (the residency probe reads use: cachestat, else mincore), dropping just those
// files' cache (sluice/page_cache.hpp, scope files: never the system's), cgroup I/O limits on
// this process, the bytes read from a device and by this process (to tell whether others shared
// the device), and PCIe link arithmetic. They read state and change nothing but the named files'
// clean cache; what touches the page cache goes through src/io's helpers.
#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>

#include "doctor/facts.hpp"
#include "sluice/page_cache.hpp"
#include "sluice/residency.hpp"
#include "sluice/tools/doctor.hpp"
#include "sluice/units.hpp"

namespace sluice::doctor {
namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  if (!in) return {};
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::uint64_t to_u64(std::string_view s) {
  std::uint64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

// "devno value" lines of a v1 blkio.throttle.* file: the value for `devno`, or 0.
std::uint64_t v1_limit(const std::string& file, const std::string& devno) {
  std::istringstream in(read_all(file));
  std::string dev, val;
  while (in >> dev >> val) {
    if (dev == devno) return to_u64(val);
  }
  return 0;
}

// The cgroup folders (this process's and its ancestors') of one hierarchy mounted at `root`.
std::vector<std::string> cgroup_chain(const std::string& root, const std::string& rel) {
  std::vector<std::string> out;
  std::string p = rel;
  while (true) {
    const std::string dir = root + (p == "/" ? "" : p);
    if (exists(dir)) out.push_back(dir);
    if (p == "/" || p.empty()) break;
    const auto slash = p.rfind('/');
    p = slash == 0 ? "/" : p.substr(0, slash);
  }
  return out;
}

}  // namespace

double cached_fraction(const std::vector<std::string>& files) {
  std::uint64_t total = 0, resident = 0;
  for (const auto& f : files) {
    const int fd = ::open(f.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat st {};
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
      const Residency r = page_cache_residency(fd, 0, static_cast<std::uint64_t>(st.st_size));
      if (r.method != ResidencyMethod::none) {
        total += r.pages;
        resident += r.cached;
      }
    }
    ::close(fd);
  }
  return total == 0 ? -1.0 : static_cast<double>(resident) / static_cast<double>(total);
}

void drop_file_cache(const std::vector<std::string>& files) {
  (void)drop_page_cache(files, DropScope::files);
}

std::vector<Throttle> cgroup_throttles(const std::vector<std::string>& devnos) {
  std::vector<Throttle> out;
  std::istringstream cg(read_all("/proc/self/cgroup"));
  std::string line;
  while (std::getline(cg, line)) {
    // "7:blkio:/path" (v1) or "0::/path" (v2)
    const auto c1 = line.find(':');
    const auto c2 = line.find(':', c1 + 1);
    if (c1 == std::string::npos || c2 == std::string::npos) continue;
    const std::string controllers = line.substr(c1 + 1, c2 - c1 - 1);
    const std::string rel = line.substr(c2 + 1);
    if (controllers.find("blkio") != std::string::npos) {
      for (const auto& dir : cgroup_chain("/sys/fs/cgroup/blkio", rel)) {
        for (const auto& dev : devnos) {
          Throttle t;
          t.devno = dev;
          t.read_bps = v1_limit(dir + "/blkio.throttle.read_bps_device", dev);
          t.write_bps = v1_limit(dir + "/blkio.throttle.write_bps_device", dev);
          t.read_iops = v1_limit(dir + "/blkio.throttle.read_iops_device", dev);
          t.write_iops = v1_limit(dir + "/blkio.throttle.write_iops_device", dev);
          if (t.read_bps + t.write_bps + t.read_iops + t.write_iops == 0) continue;
          t.file = dir + (t.read_bps != 0    ? "/blkio.throttle.read_bps_device"
                          : t.write_bps != 0 ? "/blkio.throttle.write_bps_device"
                          : t.read_iops != 0 ? "/blkio.throttle.read_iops_device"
                                             : "/blkio.throttle.write_iops_device");
          out.push_back(std::move(t));
        }
      }
    } else if (controllers.empty()) {
      for (const char* root : {"/sys/fs/cgroup/unified", "/sys/fs/cgroup"}) {
        if (!exists(std::string(root) + "/cgroup.controllers")) continue;
        for (const auto& dir : cgroup_chain(root, rel)) {
          std::istringstream in(read_all(dir + "/io.max"));
          std::string l;
          while (std::getline(in, l)) {
            std::istringstream ls(l);
            std::string dev, kv;
            ls >> dev;
            if (std::find(devnos.begin(), devnos.end(), dev) == devnos.end()) continue;
            Throttle t;
            t.devno = dev;
            t.file = dir + "/io.max";
            while (ls >> kv) {
              const auto eq = kv.find('=');
              if (eq == std::string::npos) continue;
              const std::string k = kv.substr(0, eq), v = kv.substr(eq + 1);
              if (v == "max") continue;
              if (k == "rbps") t.read_bps = to_u64(v);
              if (k == "wbps") t.write_bps = to_u64(v);
              if (k == "riops") t.read_iops = to_u64(v);
              if (k == "wiops") t.write_iops = to_u64(v);
            }
            if (t.read_bps + t.write_bps + t.read_iops + t.write_iops != 0)
              out.push_back(std::move(t));
          }
        }
        break;
      }
    }
  }
  return out;
}

double pcie_gib_s(std::string_view speed, std::string_view width) {
  double gts = 0;
  const std::string s(speed);
  try {
    gts = std::stod(s);
  } catch (const std::exception&) {
    return 0;
  }
  const auto lanes = static_cast<double>(to_u64(width));
  if (gts <= 0 || lanes <= 0) return 0;
  // 8b/10b encoding up to 5 GT/s (Gen1-2), 128b/130b from 8 GT/s (Gen3+).
  const double efficiency = gts <= 5.0 ? 0.8 : 128.0 / 130.0;
  return gts * 1e9 * efficiency * lanes / 8 / static_cast<double>(GiB);
}

namespace detail {

unsigned numa_nodes() {
  unsigned n = 0;
  for (unsigned i = 0; i < 1024; ++i) {
    if (!exists("/sys/devices/system/node/node" + std::to_string(i))) break;
    ++n;
  }
  return std::max(1U, n);
}

unsigned usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN));
}

std::string devno_of_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  const dev_t d = S_ISBLK(st.st_mode) ? st.st_rdev : st.st_dev;
  return std::to_string(major(d)) + ":" + std::to_string(minor(d));
}

bool file_covers(const std::string& path, std::uint64_t end) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return false;
  return S_ISBLK(st.st_mode) || static_cast<std::uint64_t>(st.st_size) >= end;
}

CpuTimes cpu_times() {
  std::istringstream in(read_all("/proc/stat"));
  std::string cpu;
  in >> cpu;  // "cpu": all CPUs together
  CpuTimes t;
  std::uint64_t v = 0;
  for (int i = 0; i < 8 && in >> v; ++i) {
    t.total += v;
    if (i != 3 && i != 4) t.busy += v;  // idle and iowait are not busy
  }
  return t;
}

std::optional<std::uint64_t> device_read_bytes(const std::string& devno) {
  const std::size_t colon = devno.find(':');
  if (devno.empty() || colon == std::string::npos) return std::nullopt;
  const std::uint64_t major = to_u64(std::string_view(devno).substr(0, colon));
  const std::uint64_t minor = to_u64(std::string_view(devno).substr(colon + 1));
  std::istringstream in(read_all("/proc/diskstats"));
  std::string line;
  while (std::getline(in, line)) {
    // major minor name reads merged sectors_read ...
    std::istringstream f(line);
    std::uint64_t ma = 0, mi = 0, reads = 0, merged = 0, sectors = 0;
    std::string name;
    if (f >> ma >> mi >> name >> reads >> merged >> sectors && ma == major && mi == minor) {
      return sectors * 512;
    }
  }
  return std::nullopt;
}

std::optional<std::uint64_t> own_read_bytes() {
  std::istringstream in(read_all("/proc/self/io"));
  std::string key;
  std::uint64_t v = 0;
  while (in >> key >> v) {
    if (key == "read_bytes:") return v;
  }
  return std::nullopt;
}

std::uint64_t file_size(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  const off_t end = ::lseek(fd, 0, SEEK_END);  // works for block devices too
  ::close(fd);
  return end > 0 ? static_cast<std::uint64_t>(end) : 0;
}

}  // namespace detail
}  // namespace sluice::doctor
