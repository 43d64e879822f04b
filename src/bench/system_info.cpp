// The "system" part of a benchmark report: what a reader needs to judge or reproduce the numbers
// (CPU, memory, kernel, GPUs, each file's filesystem, mount options and block device with its
// model and PCIe link where sysfs shows them, and the effective sluice configuration).
#include <sys/utsname.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sluice/bench_report.hpp"
#include "sluice/config.hpp"

namespace sluice::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string first_line(const fs::path& p) {
  std::ifstream in(p);
  std::string s;
  std::getline(in, s);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n')) s.pop_back();
  return s;
}

std::string proc_value(const char* file, std::string_view key) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with(key)) {
      const auto colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string v = line.substr(colon + 1);
      v.erase(0, v.find_first_not_of(" \t"));
      return v;
    }
  }
  return {};
}

struct Mount {
  std::string point, type, options, source, devno;
};

// The mount holding `path` (the longest mount point that prefixes it), from mountinfo.
Mount mount_of(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  const std::string target = p.string();
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  Mount best;
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    std::string id, parent, devno, root, point, options;
    ss >> id >> parent >> devno >> root >> point >> options;
    std::string tok;
    while (ss >> tok && tok != "-") {
    }
    std::string type, source, super;
    ss >> type >> source >> super;
    const bool prefix = target == point || point == "/" ||
                        (target.starts_with(point) && target.size() > point.size() && target[point.size()] == '/');
    if (prefix && point.size() >= best.point.size()) {
      best = {point, type, options + (super.empty() ? "" : "," + super), source, devno};
    }
  }
  return best;
}

json block_device(const std::string& devno) {
  json d = json::object();
  if (devno.empty()) return d;
  std::error_code ec;
  fs::path dev = fs::canonical("/sys/dev/block/" + devno, ec);
  if (ec) return d;
  d["sysfs"] = dev.string();
  d["name"] = dev.filename().string();
  // A partition's queue and device live on its parent.
  fs::path disk = fs::exists(dev / "partition") ? dev.parent_path() : dev;
  for (const char* q : {"scheduler", "rotational", "max_sectors_kb", "nr_requests"}) {
    if (fs::exists(disk / "queue" / q)) d[std::string("queue_") + q] = first_line(disk / "queue" / q);
  }
  // Walk up the device tree: the model where the disk names it, the PCIe link where a PCI
  // function does.
  for (fs::path p = fs::canonical(disk / "device", ec); !ec && p.has_parent_path() && p != "/sys/devices";
       p = p.parent_path()) {
    if (!d.contains("model") && fs::exists(p / "model")) d["model"] = first_line(p / "model");
    if (!d.contains("pcie_link") && fs::exists(p / "current_link_speed")) {
      d["pci_address"] = p.filename().string();
      d["pcie_link"] = {{"speed", first_line(p / "current_link_speed")},
                        {"width", first_line(p / "current_link_width")},
                        {"max_speed", first_line(p / "max_link_speed")},
                        {"max_width", first_line(p / "max_link_width")}};
    }
  }
  return d;
}

std::vector<std::string> plan_paths(const Plan& plan) {
  const Workload& w = plan.workload;
  if (!w.dir.empty()) return {w.dir};
  return w.files;
}

}  // namespace

std::string system_json(const Plan& plan) {
  utsname u{};
  ::uname(&u);
  json sys;
  sys["hostname"] = u.nodename;
  sys["kernel"] = fmt::format("{} {} {}", u.sysname, u.release, u.machine);
  sys["kernel_version"] = u.version;
  sys["cpu"] = {{"model", proc_value("/proc/cpuinfo", "model name")},
                {"logical_cpus", std::thread::hardware_concurrency()},
                {"governor", first_line("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")}};
  sys["memory"] = {{"total", proc_value("/proc/meminfo", "MemTotal")}};

  json gpus = json::array();
  const auto& x = plan.xfers;
  const bool gpu = uses_gpu(plan.workload.xfer) || std::any_of(x.begin(), x.end(), [](XferType t) { return uses_gpu(t); });
  if (gpu) {
    std::string spec = plan.workload.device;
    std::size_t pos = 0;
    while (pos <= spec.size()) {
      const std::size_t comma = std::min(spec.find(',', pos), spec.size());
      std::string item = spec.substr(pos, comma - pos);
      if (!item.empty() && std::all_of(item.begin(), item.end(), ::isdigit)) item = "cuda:" + item;
      pos = comma + 1;
      if (item.empty()) continue;
      try {
        auto dev = open_device(item);
        const DeviceInfo& i = dev->info();
        gpus.push_back({{"spec", item}, {"kind", i.kind}, {"ordinal", i.ordinal}, {"name", i.name},
                        {"total_memory", i.total_memory}, {"pci_bus_id", i.pci_bus_id},
                        {"driver", i.driver}, {"selection", dev->selection()}});
      } catch (const std::exception& e) {
        gpus.push_back({{"spec", item}, {"error", e.what()}});
      }
    }
  }
  sys["gpus"] = gpus;

  json files = json::array();
  for (const auto& path : plan_paths(plan)) {
    const Mount m = mount_of(path);
    files.push_back({{"path", path}, {"mount_point", m.point}, {"fs_type", m.type},
                     {"mount_options", m.options}, {"source", m.source}, {"devno", m.devno},
                     {"block_device", block_device(m.devno)}});
  }
  sys["files"] = files;

  json cfg = json::array();
  for (const auto& e : config()->entries()) {
    cfg.push_back({{"name", e.name}, {"value", e.value}, {"source", to_string(e.source)}, {"env", e.env}});
  }
  sys["sluice_config"] = cfg;
  return sys.dump();
}

}  // namespace sluice::bench
