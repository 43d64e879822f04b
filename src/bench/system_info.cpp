// The "system" part of a benchmark report: what a reader needs to judge or reproduce the numbers
// (CPU, memory, kernel, GPUs, each file's filesystem, mount options and block device with its
// model and PCIe link where sysfs shows them, and the effective sluice configuration).
#include <sys/utsname.h>

#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "check/sysfs.hpp"
#include "sluice/config.hpp"
#include "sluice/tools/bench_report.hpp"

namespace sluice::bench {
namespace {

using nlohmann::json;

using detail::first_line;

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

json block_device(const std::string& devno) {
  json d = json::object();
  const auto b = detail::block_device(devno);
  if (!b) return d;
  d["sysfs"] = b->sysfs;
  d["name"] = b->name;
  for (const auto& [k, v] : b->queue) d["queue_" + k] = v;
  if (!b->model.empty()) d["model"] = b->model;
  if (b->pci) {
    d["pci_address"] = b->pci->address;
    d["pcie_link"] = {{"speed", b->pci->link_speed}, {"width", b->pci->link_width},
                      {"max_speed", b->pci->max_link_speed}, {"max_width", b->pci->max_link_width}};
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
        gpus.push_back({{"spec", item}, {"kind", to_string(i.kind)}, {"ordinal", i.ordinal}, {"name", i.name},
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
    const detail::Mount m = detail::mount_of(path);
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
