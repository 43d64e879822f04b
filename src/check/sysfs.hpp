// What procfs and sysfs say about mounts, block devices and PCI functions. Shared by
// `sluice check` and the system part of benchmark reports. Nothing here throws: a file sysfs does
// not have reads as empty.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace sluice::detail {

/// First line of a (sysfs) file without trailing blanks; empty when it cannot be read.
[[nodiscard]] std::string first_line(const std::string& path);

struct Mount {
  std::string point, type, options, source, devno;  ///< options: mount + superblock options
};
/// The mount holding `path` (the longest mount point that prefixes its canonical form).
[[nodiscard]] Mount mount_of(const std::string& path);

/// A PCI function's link and NUMA node, from /sys/bus/pci/devices/<address>.
struct PciInfo {
  std::string address;  ///< "0000:17:00.0"
  std::string link_speed, link_width, max_link_speed, max_link_width;
  int numa_node = -1;            ///< -1: unknown or single node
  std::uint64_t bar1_bytes = 0;  ///< size of BAR1 (a GPU's window for peer DMA), 0 if none
  bool p2pmem = false;  ///< the kernel's PCI P2PDMA exposes this function (p2pmem/ in sysfs)
  /// Bridges above the function with ACS P2P request or completion redirect on (config space
  /// readable as root only): "0000:00:01.0 (ctrl 0x1d)".
  std::vector<std::string> acs_redirect;
  bool acs_visible = false;  ///< config space of the bridges above could be read
};
/// NVIDIA display/3D controllers (vendor 0x10de, class 0x03xxxx) sysfs knows, by address, with
/// the kernel driver bound to each ("nvidia", "vfio-pci", "" for none).
[[nodiscard]] std::vector<std::pair<std::string, std::string>> nvidia_gpus_in_sysfs();

/// The PCI function at `address`; nullopt when sysfs has no such function.
[[nodiscard]] std::optional<PciInfo> pci_info(const std::string& address);

struct BlockDevice {
  std::string name;          ///< "nvme0n1", "loop3", "dm-0"
  std::string devno;         ///< "259:0"
  std::string sysfs;         ///< canonical sysfs folder
  std::string kind;          ///< disk | partition | dm | md | loop
  std::string model;         ///< where the disk or an ancestor names one
  std::string backing_file;  ///< loop devices
  std::string disk;          ///< the whole disk a partition is on (its own name otherwise)
  std::map<std::string, std::string> queue;  ///< scheduler, rotational, logical_block_size, ...
  std::optional<PciInfo> pci;  ///< the PCI function the device hangs off, where there is one
};
/// The block device `devno` ("major:minor") as one entry (a partition's queue and PCI link come
/// from its disk); nullopt when sysfs does not know it.
[[nodiscard]] std::optional<BlockDevice> block_device(const std::string& devno);
/// The disks behind `devno`: device mapper and md targets resolved through slaves/, partitions
/// to their disk. A plain disk gives itself.
[[nodiscard]] std::vector<BlockDevice> backing_disks(const std::string& devno);
/// The block devices behind a mount: its devno, or its source (/dev/...) where the devno is
/// anonymous (btrfs, overlay of a device); empty for memory and network filesystems.
[[nodiscard]] std::vector<BlockDevice> mount_block_devices(const Mount& m);

}  // namespace sluice::detail
