#include "check/sysfs.hpp"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

namespace sluice::detail {
namespace {

namespace fs = std::filesystem;

bool present(const fs::path& p) {
  std::error_code ec;
  return fs::exists(p, ec);
}

// The config space word at `off` (little endian), or nullopt past what could be read.
std::optional<std::uint32_t> word(const std::string& cfg, std::size_t off, std::size_t bytes) {
  if (off + bytes > cfg.size()) return std::nullopt;
  std::uint32_t v = 0;
  for (std::size_t i = 0; i < bytes; ++i)
    v |= static_cast<std::uint32_t>(static_cast<unsigned char>(cfg[off + i])) << (8 * i);
  return v;
}

// ACS control of a bridge, from the extended capability list (ID 0x000d) of its config space.
// nullopt: the extended space could not be read (not root); 0: no ACS capability.
std::optional<std::uint16_t> acs_control(const fs::path& dev) {
  std::ifstream in(dev / "config", std::ios::binary);
  std::string cfg((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (cfg.size() <= 0x100) return std::nullopt;
  std::size_t off = 0x100;
  for (int guard = 0; guard < 64 && off >= 0x100; ++guard) {
    const auto h = word(cfg, off, 4);
    if (!h || *h == 0 || *h == 0xffffffffU) return 0;
    if ((*h & 0xffffU) == 0x000dU) {
      const auto ctrl = word(cfg, off + 6, 2);
      return ctrl ? static_cast<std::uint16_t>(*ctrl) : 0;
    }
    off = (*h >> 20) & 0xffcU;
  }
  return 0;
}

bool is_pci_address(const std::string& s) {
  // dddd:bb:dd.f
  return s.size() == 12 && s[4] == ':' && s[7] == ':' && s[10] == '.';
}

}  // namespace

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n' || s.back() == '\t')) s.pop_back();
  return s;
}

Mount mount_of(const std::string& path) {
  std::error_code ec;
  const fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
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
    const bool prefix =
        target == point || point == "/" ||
        (target.starts_with(point) && target.size() > point.size() && target[point.size()] == '/');
    if (prefix && point.size() >= best.point.size()) {
      best = {point, type, options + (super.empty() ? "" : "," + super), source, devno};
    }
  }
  return best;
}

std::optional<PciInfo> pci_info(const std::string& address) {
  const fs::path dev = fs::path("/sys/bus/pci/devices") / address;
  if (!present(dev)) return std::nullopt;
  PciInfo i;
  i.address = address;
  i.link_speed = first_line(dev / "current_link_speed");
  i.link_width = first_line(dev / "current_link_width");
  i.max_link_speed = first_line(dev / "max_link_speed");
  i.max_link_width = first_line(dev / "max_link_width");
  const std::string numa = first_line(dev / "numa_node");
  if (!numa.empty()) i.numa_node = std::atoi(numa.c_str());
  i.p2pmem = present(dev / "p2pmem");
  {
    std::ifstream res(dev / "resource");
    std::string line;
    std::getline(res, line);  // BAR0
    unsigned long long start = 0, end = 0;
    if (std::getline(res, line) && std::sscanf(line.c_str(), "%llx %llx", &start, &end) == 2 &&
        end > start) {
      i.bar1_bytes = end - start + 1;
    }
  }
  std::error_code ec;
  i.acs_visible = true;
  for (fs::path p = fs::canonical(dev, ec).parent_path();
       !ec && is_pci_address(p.filename().string()); p = p.parent_path()) {
    const auto ctrl = acs_control(p);
    if (!ctrl) {
      i.acs_visible = false;
      continue;
    }
    // Bit 2: P2P request redirect, bit 3: P2P completion redirect.
    if ((*ctrl & 0x0cU) != 0)
      i.acs_redirect.push_back(fmt::format("{} (ctrl {:#x})", p.filename().string(), *ctrl));
  }
  return i;
}

std::vector<std::pair<std::string, std::string>> nvidia_gpus_in_sysfs() {
  std::vector<std::pair<std::string, std::string>> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/sys/bus/pci/devices", ec)) {
    if (first_line(e.path() / "vendor") != "0x10de" ||
        !first_line(e.path() / "class").starts_with("0x03"))
      continue;
    std::error_code lec;
    const fs::path drv = fs::read_symlink(e.path() / "driver", lec);
    out.emplace_back(e.path().filename().string(), lec ? std::string() : drv.filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<BlockDevice> block_device(const std::string& devno) {
  if (devno.empty()) return std::nullopt;
  std::error_code ec;
  const fs::path dev = fs::canonical("/sys/dev/block/" + devno, ec);
  if (ec) return std::nullopt;
  BlockDevice b;
  b.name = dev.filename().string();
  b.devno = devno;
  b.sysfs = dev.string();
  const bool partition = present(dev / "partition");
  if (partition)
    b.kind = "partition";
  else if (present(dev / "dm"))
    b.kind = "dm";
  else if (present(dev / "md"))
    b.kind = "md";
  else if (present(dev / "loop"))
    b.kind = "loop";
  else
    b.kind = "disk";
  if (b.kind == "loop") b.backing_file = first_line(dev / "loop" / "backing_file");
  const fs::path disk = partition ? dev.parent_path() : dev;
  b.disk = disk.filename().string();
  for (const char* q :
       {"scheduler", "rotational", "logical_block_size", "max_sectors_kb", "nr_requests"}) {
    if (present(disk / "queue" / q)) b.queue[q] = first_line(disk / "queue" / q);
  }
  // Up the device tree: the model where the disk names it, the link where a PCI function does.
  for (fs::path p = fs::canonical(disk / "device", ec);
       !ec && p.has_parent_path() && p != "/sys/devices"; p = p.parent_path()) {
    if (b.model.empty() && present(p / "model")) b.model = first_line(p / "model");
    if (!b.pci && present(p / "current_link_speed")) b.pci = pci_info(p.filename().string());
  }
  return b;
}

std::vector<BlockDevice> backing_disks(const std::string& devno) {
  std::vector<BlockDevice> out;
  std::set<std::string> seen;
  auto walk = [&](auto&& self, const std::string& no, int depth) -> void {
    if (depth > 8 || !seen.insert(no).second) return;
    auto b = block_device(no);
    if (!b) return;
    std::vector<std::string> slaves;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(fs::path(b->sysfs) / "slaves", ec)) {
      const std::string s = first_line((e.path() / "dev").string());
      if (!s.empty()) slaves.push_back(s);
    }
    if (!slaves.empty()) {
      for (const auto& s : slaves) self(self, s, depth + 1);
      return;
    }
    out.push_back(std::move(*b));
  };
  walk(walk, devno, 0);
  return out;
}

std::vector<BlockDevice> mount_block_devices(const Mount& m) {
  std::vector<BlockDevice> disks = backing_disks(m.devno);
  if (disks.empty() && m.source.starts_with("/dev/")) {
    struct stat st {};
    if (::stat(m.source.c_str(), &st) == 0 && S_ISBLK(st.st_mode)) {
      disks = backing_disks(fmt::format("{}:{}", major(st.st_rdev), minor(st.st_rdev)));
    }
  }
  return disks;
}

}  // namespace sluice::detail
