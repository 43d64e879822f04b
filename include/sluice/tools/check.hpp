// What this machine offers Sluice, as `sluice check` reports it: GPUs with their PCIe link and
// NUMA node, whether libcufile loads, nvidia-fs / PCI P2PDMA / IOMMU / ACS state, and for each
// path its filesystem, the disks behind it, O_DIRECT support and alignment, and the path Sluice
// would take for device memory and why. Inspecting never moves file data; it creates (and
// removes) one empty probe file in a folder to learn its O_DIRECT support.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sluice/config.hpp"
#include "sluice/export.hpp"
#include "sluice/remote_check.hpp"

namespace sluice::check {

struct PciLink {
  std::string address;  ///< "0000:17:00.0"
  std::string speed, width, max_speed,
      max_width;                 ///< as sysfs writes them ("16.0 GT/s PCIe", "16")
  int numa_node = -1;            ///< -1: unknown or a single-node machine
  std::uint64_t bar1_bytes = 0;  ///< BAR1 size (GPUs: the window peer DMA and GDS go through)
  bool p2pmem = false;           ///< exposed through the kernel's PCI P2PDMA (p2pmem/ in sysfs)
  bool acs_visible = false;      ///< the bridges above could be read (root)
  std::vector<std::string> acs_redirect;  ///< bridges above with ACS P2P redirect on
};

struct Gpu {
  bool cuda = true;  ///< opened through CUDA; false: seen in sysfs only (CUDA unavailable)
  int ordinal = 0;   ///< cuda:N (-1 when not seen by CUDA)
  std::string name;
  std::uint64_t total_memory = 0;
  std::string driver;          ///< CUDA driver, or the kernel driver bound (sysfs only)
  std::optional<PciLink> pci;  ///< where sysfs has the function
};

struct CufileState {
  bool loaded = false;  ///< libcufile loaded and cuFileDriverOpen succeeded
  int version = 0;      ///< cuFileGetVersion(), 0 when unknown
  std::string library;  ///< the file loaded (or tried)
  std::string reason;   ///< why not loaded; empty when loaded
};

struct Platform {
  bool nvidia_fs = false;         ///< the nvidia-fs module is loaded (/proc/driver/nvidia-fs)
  std::string nvidia_fs_version;  ///< /sys/module/nvidia_fs/version where present
  std::string p2pdma;             ///< kernel CONFIG_PCI_P2PDMA ("y", "not set", "unknown")
  bool iommu = false;             ///< /sys/class/iommu has a unit
  unsigned iommu_groups = 0;      ///< /sys/kernel/iommu_groups entries
  std::string iommu_cmdline;      ///< iommu-related kernel parameters ("intel_iommu=on iommu=pt")
};

struct BlockDevice {
  std::string name, devno, kind;  ///< kind: disk | partition | dm | md | loop
  std::string disk;               ///< the whole disk (a partition's parent; else the name)
  std::string model, backing_file;
  std::string logical_block_size, rotational, scheduler;
  std::optional<PciLink> pci;
};

struct PathReport {
  std::string path;
  std::string error;  ///< non-empty: the path could not be inspected (does not exist, ...)
  std::string fs_type, mount_point, mount_options, source;
  std::vector<BlockDevice> block_devices;
  bool o_direct = false;
  std::string o_direct_reason;         ///< why not, when o_direct is false
  std::uint32_t dio_mem_align = 0;     ///< buffer alignment O_DIRECT needs (0 without)
  std::uint32_t dio_offset_align = 0;  ///< offset/length alignment O_DIRECT needs (0 without)
  std::string sluice_path;             ///< direct | bounce | posix | host, for device memory
  std::string reason;                  ///< why that path
  /// Regular files: how much of the file the page cache holds (the probe reads use; with
  /// cache_policy auto they read those chunks through the cache). method "" for other paths.
  std::uint64_t cached_pages = 0, file_pages = 0;
  std::string residency_method;        ///< cachestat | mincore | none
};

/// One key of cufile.json, or one CUFILE_* variable, with what libsluice_cufile does with it
/// (docs/cufile.md, "cufile.json and the environment").
struct CufileJsonKey {
  std::string name;       ///< dotted key ("execution.max_io_threads") or variable name
  bool from_env = false;  ///< a CUFILE_* variable rather than a key of the file
  std::string value;      ///< as written (JSON text for the file's keys)
  /// sluice_setting | cufile_layer | kept | no_effect | unknown | invalid | overridden
  std::string effect;
  std::string detail;     ///< the setting and value it gives, or why it has no effect
};

/// The cuFile configuration a cuFile program would run with on libsluice_cufile here.
struct CufileJson {
  std::string path;                 ///< the file looked at
  std::string lookup;               ///< "CUFILE_ENV_PATH_JSON" or "default"
  bool read = false;                ///< the file was read; its keys are listed
  bool error = false;               ///< status is an error (named file missing, not JSON, ...)
  std::string status;               ///< "read", or why no file was read
  std::vector<CufileJsonKey> keys;  ///< the file's keys, then the variables
};

struct Report {
  bool cuda = false;
  std::string cuda_reason;  ///< why no CUDA GPU, when cuda is false
  std::vector<Gpu> gpus;
  std::string device;  ///< the device choose_path was asked with, and how it was selected
  CufileState cufile;
  Platform platform;
  std::vector<PathReport> paths;
  /// The PATHs that are URLs (s3://, http://, https://): resolved, and one GET of the first
  /// byte; error set when it could not be resolved or did not answer 206 (or 200).
  std::vector<RemoteCheck> remotes;
  std::vector<Config::Entry> config;
  CufileJson cufile_json;
  std::string hwloc;  ///< topology summary, or why there is none
};

/// Inspects the machine and each of `paths` (files, folders or block devices) under the
/// process-wide configuration. Never throws for a bad path: its PathReport carries the error.
[[nodiscard]] SLUICE_API Report inspect(const std::vector<std::string>& paths);

/// The report as the JSON object `sluice check --json` prints, and as human text.
[[nodiscard]] SLUICE_API std::string to_json(const Report& r);
[[nodiscard]] SLUICE_API std::string to_text(const Report& r);

}  // namespace sluice::check
