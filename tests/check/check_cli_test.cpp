// `sluice check` as a user runs it: a tmpfs folder has no O_DIRECT and says why, an ext4 folder
// on a loop device names the loop device and its alignment, the JSON has its documented fields
// with their types, and a machine without a GPU or libcufile says so with exit 0.
#include <gtest/gtest.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "support/residency_util.hpp"
#include "support/test_util.hpp"

#ifndef SLUICE_CLI_PATH
#error "SLUICE_CLI_PATH must name the built sluice binary"
#endif

namespace sluice {
namespace {

using nlohmann::json;
using test::shell_quote;

using test::CliRun;

class Check : public ::testing::Test {
 protected:
  void SetUp() override {
    scratch_ = std::make_unique<test::TempDir>("/tmp", "sluice-check-");
  }

  CliRun sluice(const std::string& args, const std::string& env = "") {
    return test::run_captured(SLUICE_CLI_PATH, args, scratch_->path(), env);
  }

  json check_json(const std::string& paths, int want_rc = 0, const std::string& env = "") {
    const CliRun r = sluice("check --json " + paths, env);
    EXPECT_EQ(r.rc, want_rc) << r.err << r.out;
    return json::parse(r.out);
  }

  test::CleanSluiceEnv clean_env_;
  std::unique_ptr<test::TempDir> scratch_;
};

bool is_tmpfs(const std::string& dir) {
  struct statfs s {};
  return ::statfs(dir.c_str(), &s) == 0 && s.f_type == 0x01021994;  // TMPFS_MAGIC
}

TEST_F(Check, TmpfsFolderHasNoODirectAndSaysWhy) {
  if (!is_tmpfs("/dev/shm") || ::access("/dev/shm", W_OK) != 0)
    GTEST_SKIP() << "/dev/shm is not a writable tmpfs";
  test::TempDir dir("/dev/shm", "sluice-check-");
  const json j = check_json(shell_quote(dir.path()));
  ASSERT_EQ(j.at("paths").size(), 1U);
  const json& p = j["paths"][0];
  EXPECT_EQ(p.at("path"), dir.path());
  EXPECT_EQ(p.at("fs_type"), "tmpfs");
  EXPECT_EQ(p.at("error"), "");
  EXPECT_FALSE(p.at("o_direct").get<bool>());
  EXPECT_NE(p.at("o_direct_reason").get<std::string>().find("tmpfs has no O_DIRECT"),
            std::string::npos)
      << p;
  EXPECT_EQ(p.at("dio_alignment").at("offset"), 0);
  EXPECT_TRUE(p.at("block_devices").empty()) << p;
  // Device memory on tmpfs: never GPUDirect; bounce through pinned memory (sim or real GPU).
  EXPECT_NE(p.at("sluice_path"), "direct") << p;
  EXPECT_FALSE(p.at("reason").get<std::string>().empty()) << p;
  // The probe file is gone.
  EXPECT_EQ(test::shell(fmt::format("ls -A {} | grep -q .", shell_quote(dir.path()))), 1);

  const CliRun text = sluice("check " + shell_quote(dir.path()));
  EXPECT_EQ(text.rc, 0) << text.err;
  EXPECT_NE(text.out.find("O_DIRECT: no: filesystem tmpfs has no O_DIRECT"), std::string::npos)
      << text.out;
}

// An ext4 image on a loop device with 4 KiB sectors, mounted for the test; undone in TearDown.
class CheckLoop : public Check {
 protected:
  void SetUp() override {
    Check::SetUp();
    if (::geteuid() != 0) GTEST_SKIP() << "needs root for loop devices and mount";
    for (const char* p : {"losetup", "mkfs.ext4", "mount", "umount", "truncate"}) {
      if (!test::have_program(p)) SLUICE_SKIP_OR_FAIL(fmt::format("{} is not installed", p));
    }
    if (::access("/dev/loop-control", F_OK) != 0) SLUICE_SKIP_OR_FAIL("no /dev/loop-control");
    work_ = std::make_unique<test::TempDir>("/var/tmp", "sluice-check-loop-");
    img_ = work_->file("ext4.img");
    mnt_ = work_->file("mnt");
    const std::string sbin = "PATH=\"$PATH:/sbin:/usr/sbin\" ";
    // Each step's stderr, so that a failure says what the tool said.
    const std::string err = work_->file("step.err"), to_err = " 2>" + shell_quote(err);
    if (test::shell(fmt::format("truncate -s 64M {0} && {1}mkfs.ext4 -q -F -b 4096 {0} >/dev/null{2}",
                                shell_quote(img_), sbin, to_err)) != 0) {
      SLUICE_SKIP_OR_FAIL("mkfs.ext4 failed: " + test::first_line(err));
    }
    const std::string devfile = work_->file("dev");
    if (test::shell(fmt::format("{}losetup -f --show -b 4096 {} >{}{}", sbin, shell_quote(img_),
                                shell_quote(devfile), to_err)) != 0) {
      SLUICE_SKIP_OR_FAIL("losetup could not attach the image: " + test::first_line(err));
    }
    dev_ = test::read_text(devfile);
    while (!dev_.empty() && dev_.back() == '\n') dev_.pop_back();
    if (test::shell(fmt::format("mkdir {0} && mount {1} {0}{2}", shell_quote(mnt_), shell_quote(dev_), to_err)) != 0) {
      SLUICE_SKIP_OR_FAIL("mount of the loop device failed: " + test::first_line(err));
    }
    mounted_ = true;
  }
  void TearDown() override {
    if (mounted_) {
      if (test::shell(fmt::format("umount {} 2>/dev/null", shell_quote(mnt_))) != 0) {
        test::shell(fmt::format("umount -l {}", shell_quote(mnt_)));
      }
    }
    if (!dev_.empty())
      test::shell(fmt::format("PATH=\"$PATH:/sbin:/usr/sbin\" losetup -d {}", shell_quote(dev_)));
    work_.reset();
  }
  std::unique_ptr<test::TempDir> work_;
  std::string img_, mnt_, dev_;
  bool mounted_ = false;
};

TEST_F(CheckLoop, Ext4OnLoopDeviceNamesTheDeviceAndAlignment) {
  const json j = check_json(shell_quote(mnt_));
  const json& p = j.at("paths").at(0);
  EXPECT_EQ(p.at("fs_type"), "ext4");
  EXPECT_EQ(p.at("mount_point"), mnt_);
  ASSERT_EQ(p.at("block_devices").size(), 1U) << p;
  const json& b = p["block_devices"][0];
  EXPECT_EQ("/dev/" + b.at("name").get<std::string>(), dev_) << b;
  EXPECT_EQ(b.at("kind"), "loop");
  EXPECT_EQ(b.at("backing_file"), img_);
  EXPECT_EQ(b.at("logical_block_size"), "4096");
  EXPECT_TRUE(p.at("o_direct").get<bool>()) << p;
  EXPECT_EQ(p.at("dio_alignment").at("offset"), 4096) << p;
  EXPECT_GE(p.at("dio_alignment").at("memory").get<int>(), 1);
  EXPECT_FALSE(p.at("sluice_path").get<std::string>().empty());

  // The block device itself is a PATH too.
  const json d = check_json(shell_quote(dev_));
  const json& dp = d.at("paths").at(0);
  ASSERT_EQ(dp.at("block_devices").size(), 1U) << dp;
  EXPECT_EQ("/dev/" + dp["block_devices"][0].at("name").get<std::string>(), dev_);
  EXPECT_TRUE(dp.at("o_direct").get<bool>()) << dp;
}

// A regular file's page-cache residency, from the probe reads use; none for a folder.
TEST_F(Check, PageCacheResidencyOfAFile) {
  const auto root = test::folder_root(test::Folder::disk);
  if (!root) GTEST_SKIP() << "no disk-backed folder";
  test::TempDir dir(*root, "sluice-check-");
  const std::string file = dir.file("data.bin");
  test::write_file(file, test::random_bytes(1 << 20, 3));
  if (!test::drop_cache(file)) GTEST_SKIP() << "the page cache of " << file << " cannot be dropped per file";
  // The first quarter, pinned (test::pin_resident) so the count below is exact.
  const test::PinnedRange pin = test::pin_resident(file, 0, 1 << 18);
  const json j = check_json(shell_quote(file) + " " + shell_quote(dir.path()));
  const json& pc = j.at("paths").at(0).at("page_cache");
  EXPECT_EQ(pc.at("pages"), 256) << pc;
  EXPECT_EQ(pc.at("cached_pages"), 64) << pc;
  EXPECT_TRUE(pc.at("method") == "cachestat" || pc.at("method") == "mincore") << pc;
  EXPECT_TRUE(j["paths"][1].at("page_cache").is_null()) << j["paths"][1];
  const CliRun text = sluice("check " + shell_quote(file));
  EXPECT_NE(text.out.find("page cache: 25% of the file (64 of 256 pages"), std::string::npos) << text.out;
}

TEST_F(Check, JsonHasTheDocumentedFieldsWithTheirTypes) {
  const json j = check_json(shell_quote(scratch_->path()));
  ASSERT_TRUE(j.at("gpus").is_array());
  for (const auto& g : j["gpus"]) {
    EXPECT_TRUE(g.at("cuda").is_boolean());
    EXPECT_TRUE(g.at("ordinal").is_number_integer());
    EXPECT_TRUE(g.at("name").is_string());
    EXPECT_TRUE(g.at("total_memory").is_number_unsigned());
    EXPECT_TRUE(g.at("pci").is_null() || g["pci"].at("link_width").is_string());
    EXPECT_TRUE(g.at("pci").is_null() || g["pci"].at("bar1_bytes").is_number_unsigned());
  }
  EXPECT_TRUE(j.at("cuda").at("available").is_boolean());
  EXPECT_TRUE(j.at("cufile").at("loaded").is_boolean());
  EXPECT_TRUE(j.at("cufile").at("version").is_number_integer());
  EXPECT_TRUE(j.at("cufile").at("reason").is_string());
  EXPECT_TRUE(j.at("platform").at("iommu").is_boolean());
  EXPECT_TRUE(j.at("platform").at("nvidia_fs").is_boolean());
  EXPECT_TRUE(j.at("platform").at("pci_p2pdma").is_string());
  EXPECT_TRUE(j.at("hwloc").is_string());
  const json& p = j.at("paths").at(0);
  for (const char* s : {"path", "error", "fs_type", "mount_point", "mount_options",
                        "o_direct_reason", "sluice_path", "reason"}) {
    EXPECT_TRUE(p.at(s).is_string()) << s;
  }
  EXPECT_TRUE(p.at("o_direct").is_boolean());
  EXPECT_TRUE(p.at("block_devices").is_array());
  EXPECT_TRUE(p.at("dio_alignment").at("memory").is_number_unsigned());
  EXPECT_TRUE(p.at("dio_alignment").at("offset").is_number_unsigned());
  for (const auto& b : p["block_devices"]) {
    for (const char* s : {"name", "devno", "kind", "disk", "model"})
      EXPECT_TRUE(b.at(s).is_string()) << s;
  }
  // Every setting, with its value and where it came from: the defaults docs/configuration.md
  // states, written out here rather than read back from Config (threads: 0 = min(4, cores)).
  const long cores = ::sysconf(_SC_NPROCESSORS_ONLN);
  const std::string threads = std::to_string(std::clamp(cores, 1L, 4L));
  const std::vector<std::array<std::string, 3>> defaults = {
      {"engine", "SLUICE_ENGINE", "auto"},
      {"threads", "SLUICE_THREADS", threads},
      {"queue_depth", "SLUICE_QUEUE_DEPTH", "16"},
      {"io_size", "SLUICE_IO_SIZE", "1.00 MiB"},
      {"staging_buffers", "SLUICE_STAGING_BUFFERS", "64"},
      {"direct_io", "SLUICE_DIRECT_IO", "true"},
      {"cache_policy", "SLUICE_CACHE_POLICY", "auto"},
      {"log_level", "SLUICE_LOG", "warn"},
      {"device", "SLUICE_DEVICE", "auto"},
      {"path", "SLUICE_PATH", "auto"},
      {"bounce_buffers", "SLUICE_BOUNCE_BUFFERS", "16"},
      {"bounce_buffer_size", "SLUICE_BOUNCE_BUFFER_SIZE", "4.00 MiB"},
      {"sim_h2d_gbps", "SLUICE_SIM_H2D_GBPS", "25"},
      {"sim_latency_us", "SLUICE_SIM_LATENCY_US", "10"},
  };
  const json& cfg = j.at("config");
  ASSERT_TRUE(cfg.is_object());
  EXPECT_EQ(cfg.size(), defaults.size()) << cfg.dump(1);
  for (const auto& [name, env, value] : defaults) {
    ASSERT_TRUE(cfg.contains(name)) << name;
    EXPECT_EQ(cfg[name].at("value"), value) << name;
    EXPECT_EQ(cfg[name].at("source"), "default") << name;
    EXPECT_EQ(cfg[name].at("env"), env) << name;
  }
  const json env = check_json(shell_quote(scratch_->path()), 0, "SLUICE_QUEUE_DEPTH=7");
  EXPECT_EQ(env.at("config").at("queue_depth").at("value"), "7");
  EXPECT_EQ(env.at("config").at("queue_depth").at("source"), "env");
  // The O_DIRECT answer follows the configuration, as transfers would.
  const json off = check_json(shell_quote(scratch_->path()), 0, "SLUICE_DIRECT_IO=0");
  EXPECT_FALSE(off.at("paths").at(0).at("o_direct").get<bool>());
  EXPECT_EQ(off["paths"][0].at("o_direct_reason"), "direct I/O disabled by configuration");
}

// The cufile.json a cuFile program would run with: the file found, each key's effect, the
// variables, and Sluice's own settings winning over both; in the JSON and in the text.
TEST_F(Check, CufileJsonKeysVariablesAndOverrides) {
  const std::string file = scratch_->path() + "/cufile.json";
  std::ofstream(file) << R"(// as NVIDIA writes it
    { "execution": { "max_io_queue_depth": 64, /* beaten by SLUICE_QUEUE_DEPTH */ "max_io_threads": 3 },
      "properties": { "allow_compat_mode": false, "use_poll_mode": "yes", "no_such_key": 1 },
      "fs": { "generic": { "posix_unaligned_writes": true } } })";
  const std::string env =
      "CUFILE_ENV_PATH_JSON=" + shell_quote(file) +
      " CUFILE_FORCE_COMPAT_MODE=true CUFILE_ALLOW_COMPAT_MODE=true SLUICE_QUEUE_DEPTH=7";
  const json c = check_json("", 0, env).at("cufile_json");
  EXPECT_EQ(c.at("path"), file);
  EXPECT_EQ(c.at("lookup"), "CUFILE_ENV_PATH_JSON");
  EXPECT_EQ(c.at("read"), true);
  EXPECT_EQ(c.at("error"), false);
  const json& k = c.at("keys");
  const auto effect = [&](const char* key) { return k.at(key).at("effect").get<std::string>(); };
  EXPECT_EQ(effect("execution.max_io_queue_depth"), "overridden");
  EXPECT_EQ(k.at("execution.max_io_queue_depth").at("detail"),
            "overridden by SLUICE_QUEUE_DEPTH=7");
  EXPECT_EQ(effect("execution.max_io_threads"), "sluice_setting");
  EXPECT_EQ(effect("properties.allow_compat_mode"), "overridden");
  EXPECT_EQ(k.at("properties.allow_compat_mode").at("detail"),
            "overridden by CUFILE_ALLOW_COMPAT_MODE=true");
  EXPECT_EQ(effect("properties.use_poll_mode"), "invalid");
  EXPECT_EQ(effect("properties.no_such_key"), "unknown");
  EXPECT_EQ(effect("fs.generic.posix_unaligned_writes"), "no_effect");
  EXPECT_EQ(effect("CUFILE_FORCE_COMPAT_MODE"), "sluice_setting");
  EXPECT_EQ(k.at("CUFILE_FORCE_COMPAT_MODE").at("from"), "environment");
  EXPECT_EQ(k.at("execution.max_io_threads").at("from"), "file");

  const CliRun text = sluice("check", env);
  EXPECT_NE(text.out.find("cuFile configuration (libsluice_cufile)\n  file " + file +
                          " (CUFILE_ENV_PATH_JSON): read"),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("  execution.max_io_threads = 3: threads = 3"), std::string::npos)
      << text.out;

  // A file named but missing: an error, no keys.
  const json missing =
      check_json("", 0, "CUFILE_ENV_PATH_JSON=" + shell_quote(file + ".gone")).at("cufile_json");
  EXPECT_EQ(missing.at("error"), true);
  EXPECT_EQ(missing.at("read"), false);
  EXPECT_EQ(missing.at("status"), "not found");
  EXPECT_TRUE(missing.at("keys").empty());
}

TEST_F(Check, NoGpuAndNoCufileAreStatedWithoutAnErrorExit) {
  const std::string env =
      "SLUICE_LIBCUFILE=/nonexistent/libcufile.so.0 SLUICE_LIBCUDA=/nonexistent/libcuda.so.1";
  const json j = check_json(shell_quote(scratch_->path()), 0, env);
  EXPECT_FALSE(j.at("cuda").at("available").get<bool>());
  EXPECT_NE(j["cuda"].at("reason").get<std::string>().find("not found"), std::string::npos)
      << j["cuda"];
  // GPUs sysfs shows (none on most CI machines) are listed as not usable through CUDA.
  for (const auto& g : j.at("gpus")) EXPECT_FALSE(g.at("cuda").get<bool>()) << g;
  EXPECT_FALSE(j.at("cufile").at("loaded").get<bool>());
  EXPECT_EQ(j["cufile"].at("version"), 0);
  EXPECT_NE(j["cufile"].at("reason").get<std::string>().find("/nonexistent/libcufile.so.0"),
            std::string::npos)
      << j["cufile"];
  // Without a GPU, device memory is the sim device's: never the direct path.
  EXPECT_NE(j.at("paths").at(0).at("sluice_path"), "direct");

  const CliRun text = sluice("check " + shell_quote(scratch_->path()), env);
  EXPECT_EQ(text.rc, 0) << text.err;
  EXPECT_NE(text.out.find("no CUDA GPU:"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("cuFile\n  not loaded:"), std::string::npos) << text.out;
}

TEST_F(Check, MissingPathIsReportedAndExitsOne) {
  const std::string missing = scratch_->file("no-such-file");
  const CliRun r =
      sluice("check --json " + shell_quote(scratch_->path()) + " " + shell_quote(missing));
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_NE(r.err.find(missing + " does not exist"), std::string::npos) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j.at("paths").size(), 2U);
  EXPECT_EQ(j["paths"][0].at("error"), "");
  EXPECT_EQ(j["paths"][1].at("error"), missing + " does not exist");
  EXPECT_EQ(sluice("check --no-such-option").rc, 2);
}

}  // namespace
}  // namespace sluice
