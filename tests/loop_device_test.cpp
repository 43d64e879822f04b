// Real block devices and a real ext4 with 4 KiB sectors, where root allows: two loop devices,
// one holding an ext4 image mounted in a temporary folder (a subset of the conformance suite
// runs there, with a direct-I/O offset alignment of 4096 instead of the host's 512), and one
// read and written raw as a block device. Set up once for the program and always torn down
// (umount, losetup -d), also after failures and crashes. Skips without root; without loop
// devices, losetup or mkfs.ext4, or when a set-up step fails, it skips too, or fails under
// SLUICE_TEST_STRICT=1. The set-up lives in main(): see there.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include <fmt/format.h>

#include "sluice/file.hpp"
#include "sluice/transfer.hpp"
#include "sluice/units.hpp"
#include "support/conformance.hpp"
#include "support/test_util.hpp"

namespace sluice {
namespace {

using test::shell;
using test::shell_quote;

// Runs a command and returns its standard output without the trailing newline, or nullopt.
std::optional<std::string> capture(const std::string& cmd) {
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return std::nullopt;
  std::string out;
  char buf[256];
  while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
  if (::pclose(p) != 0) return std::nullopt;
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

constexpr std::uint64_t raw_size = 16 * MiB;
constexpr const char* sbin_path = "PATH=\"$PATH:/sbin:/usr/sbin\" ";

// The loop devices and mount, owned by the parent process (see main()).
struct Loops {
  std::string skip;  // why the machine cannot do this, or empty
  bool not_root = false;  // the one reason that stays a skip under SLUICE_TEST_STRICT=1
  std::unique_ptr<test::TempDir> work;
  std::string mnt, fs_dev, raw_dev;
  bool mounted = false;

  static std::string why_not() {
    if (::geteuid() != 0) return "needs root for loop devices and mount";
    for (const char* p : {"losetup", "mkfs.ext4", "mount", "umount", "truncate"}) {
      if (!test::have_program(p)) return fmt::format("{} is not installed", p);
    }
    if (::access("/dev/loop-control", F_OK) != 0) return "no /dev/loop-control";
    return {};
  }

  void set_up() {
    not_root = ::geteuid() != 0;
    skip = why_not();
    if (!skip.empty()) return;
    work = std::make_unique<test::TempDir>("/var/tmp", "sluice-loop-");
    mnt = work->file("mnt");
    const std::string img = work->file("ext4.img");
    const std::string raw = work->file("raw.img");
    // Each step's stderr, so that a failure says what the tool said.
    const std::string err = work->file("step.err"), to_err = " 2>" + shell_quote(err);
    if (shell(fmt::format("truncate -s 256M {} && {}mkfs.ext4 -q -F -b 4096 {} >/dev/null{}", shell_quote(img),
                          sbin_path, shell_quote(img), to_err)) != 0) {
      skip = fmt::format("mkfs.ext4 failed: {}", test::first_line(err));
      return;
    }
    // 4 KiB logical sectors: direct I/O must then be 4 KiB-aligned, not the usual 512.
    auto dev = capture(fmt::format("{}losetup -f --show -b 4096 {}{}", sbin_path, shell_quote(img), to_err));
    if (!dev) {
      skip = fmt::format("losetup could not attach the ext4 image: {}", test::first_line(err));
      return;
    }
    fs_dev = *dev;
    if (shell(fmt::format("mkdir {} && mount {} {}{}", shell_quote(mnt), shell_quote(fs_dev), shell_quote(mnt),
                          to_err)) != 0) {
      skip = fmt::format("mount of the ext4 loop device failed: {}", test::first_line(err));
      return;
    }
    mounted = true;
    test::write_file(raw, test::random_bytes(raw_size, 4242));
    dev = capture(fmt::format("{}losetup -f --show {}{}", sbin_path, shell_quote(raw), to_err));
    if (!dev) {
      skip = fmt::format("losetup could not attach the raw image: {}", test::first_line(err));
      return;
    }
    raw_dev = *dev;
  }

  void tear_down() {
    if (mounted) {
      shell("sync");
      bool done = false;
      for (int i = 0; i < 5 && !done; ++i) {
        done = shell(fmt::format("umount {} 2>/dev/null", shell_quote(mnt))) == 0;
        if (!done) ::usleep(200000);
      }
      if (!done) shell(fmt::format("umount -l {}", shell_quote(mnt)));
      mounted = false;
    }
    for (std::string* dev : {&fs_dev, &raw_dev}) {
      if (!dev->empty()) shell(fmt::format("{}losetup -d {}", sbin_path, shell_quote(*dev)));
      dev->clear();
    }
    work.reset();  // only now: the folder held the mount point
  }
};

Loops g_loops;

class LoopDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    if (g_loops.skip.empty()) return;
    if (g_loops.not_root) GTEST_SKIP() << g_loops.skip;
    SLUICE_SKIP_OR_FAIL(g_loops.skip);
  }
  const std::string& mnt_ = g_loops.mnt;
  const std::string& raw_dev_ = g_loops.raw_dev;
};

TEST_F(LoopDevice, Ext4WithFourKilobyteSectorsHasDirectIo) {
  const std::string path = mnt_ + "/probe.bin";
  test::write_file(path, test::random_bytes(8192, 1));
  const File f = File::open(path, OpenMode::read);
  EXPECT_EQ(f.fs_type(), "ext4");
  ASSERT_TRUE(f.has_direct()) << f.direct_reason();
  EXPECT_EQ(f.offset_align(), 4096U) << "a 4 KiB-sector device needs 4 KiB-aligned direct I/O";
}

TEST_F(LoopDevice, ConformanceOnExt4) {
  const test::Shape shapes[] = {
      {.name = "io4k_t1_qd1", .io_size = 4096, .threads = 1, .queue_depth = 1},
      {.name = "io16k_t4_qd8", .io_size = 16384, .threads = 4, .queue_depth = 8},
      {.name = "buffered", .io_size = 8192, .threads = 2, .queue_depth = 4, .direct_io = false},
  };
  std::uint64_t seed = 500;
  for (const char* engine : {"uring", "psync"}) {
    if (!test::engine_runs_here(engine)) continue;
    for (const auto& s : shapes) {
      SCOPED_TRACE(fmt::format("{} {}", engine, s.name));
      const test::TempDir dir(mnt_);
      const auto cfg = test::make_config(engine, s);
      test::conformance::reads_match_pread(dir.path(), cfg, ++seed);
      test::conformance::writes_then_reads(dir.path(), cfg, ++seed);
      test::conformance::read_past_eof(dir.path(), cfg, ++seed);
      test::conformance::write_extends_file(dir.path(), cfg, ++seed);
      test::conformance::path_and_reason(dir.path(), cfg, ++seed);
      if (HasFailure()) return;
    }
  }
}

TEST_F(LoopDevice, RawBlockDevice) {
  const File f = File::open(raw_dev_, OpenMode::read_write);
  EXPECT_TRUE(f.is_block_device());
  EXPECT_EQ(f.fs_type(), "block device");
  EXPECT_EQ(f.size(), raw_size);
  std::vector<std::byte> model = test::pread_file(raw_dev_, 0, raw_size);
  ASSERT_EQ(model.size(), raw_size);
  for (const char* engine : {"uring", "psync"}) {
    if (!test::engine_runs_here(engine)) continue;
    SCOPED_TRACE(engine);
    const auto opts = test::options_for(test::make_config(engine, {.io_size = 64 * KiB, .threads = 2, .queue_depth = 4}));
    struct Case {
      std::uint64_t off, n;
      std::size_t shift;
    };
    for (const Case c : {Case{0, raw_size, 0}, Case{1, MiB, 1}, Case{4095, 70000, 7},
                         Case{raw_size - 100, 4096, 0}}) {
      SCOPED_TRACE(fmt::format("read offset {} size {}", c.off, c.n));
      test::GuardedBuffer buf(c.n, c.shift);
      const TransferResult r = read(f, buf.data(), c.n, c.off, opts);
      const std::uint64_t want = std::min(c.n, raw_size - c.off);
      EXPECT_EQ(r.bytes, want);
      EXPECT_TRUE(test::same_bytes(buf.first(want), std::span(model).subspan(c.off, want)));
      EXPECT_TRUE(buf.guards_intact());
    }
    for (const Case c : {Case{0, 256 * KiB, 0}, Case{5000, 300000, 3}}) {
      SCOPED_TRACE(fmt::format("write offset {} size {}", c.off, c.n));
      test::GuardedBuffer buf(c.n, c.shift);
      const auto fresh = test::random_bytes(c.n, c.off + 1);
      std::copy(fresh.begin(), fresh.end(), buf.data());
      EXPECT_EQ(write(f, buf.data(), c.n, c.off, opts).bytes, c.n);
      std::copy(fresh.begin(), fresh.end(), model.begin() + static_cast<std::ptrdiff_t>(c.off));
    }
    EXPECT_TRUE(test::same_bytes(test::pread_file(raw_dev_, 0, raw_size), model));
  }
}

}  // namespace
}  // namespace sluice

// The parent sets the devices up, runs the tests in a child process and tears everything down
// however the child ends (a failed assertion, a crash, a sanitizer abort), so no loop device or
// mount outlives the run. The child learns the devices from the environment.
int main(int argc, char** argv) {
  std::vector<char*> args(argv, argv + argc);
  args.push_back(nullptr);
  ::testing::InitGoogleTest(&argc, argv);
  using sluice::g_loops;
  if (const char* mnt = std::getenv("SLUICE_LOOP_MNT"); mnt != nullptr) {
    g_loops.mnt = mnt;
    g_loops.raw_dev = std::getenv("SLUICE_LOOP_RAW_DEV");
    return RUN_ALL_TESTS();
  }
  if (::testing::GTEST_FLAG(list_tests)) return RUN_ALL_TESTS();
  g_loops.set_up();
  if (!g_loops.skip.empty()) {
    // The marker makes CTest count the program as skipped, so it is left out where the tests fail.
    if (g_loops.not_root || !sluice::test::strict_mode()) {
      std::cout << "SLUICE_TEST_SKIPPED: " << g_loops.skip << std::endl;
    }
    g_loops.tear_down();
    return RUN_ALL_TESTS();  // every test skips (or fails under strict mode), saying why
  }
  const pid_t child = ::fork();
  if (child == 0) {
    ::setenv("SLUICE_LOOP_MNT", g_loops.mnt.c_str(), 1);
    ::setenv("SLUICE_LOOP_RAW_DEV", g_loops.raw_dev.c_str(), 1);
    ::execv("/proc/self/exe", args.data());
    std::perror("execv");
    ::_exit(127);
  }
  int status = 0;
  while (child > 0 && ::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  g_loops.tear_down();
  if (child < 0) {
    std::perror("fork");
    return 1;
  }
  if (WIFSIGNALED(status)) {
    std::cerr << "loop_device_test: the tests died of signal " << WTERMSIG(status) << std::endl;
    return 1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
