// `sluice read` / `sluice write` with a GPU target, run as a user runs them: exact bytes through
// device memory on every GPU path, --json naming the path and the reason, and exit codes
// 0 (ok), 1 (the operation failed: no libcufile for --path direct, no such GPU) and 2 (bad
// arguments). Each run sets the child's loader environment itself (the fakes or missing files).
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gpu_test_util.hpp"
#include "sluice/units.hpp"

#if !defined(SLUICE_CLI_PATH) || !defined(SLUICE_FAKE_CUFILE_PATH) || !defined(SLUICE_FAKE_CUDA_PATH) || \
    !defined(SLUICE_MISSING_DIR)
#error "the build defines SLUICE_CLI_PATH, SLUICE_FAKE_CUFILE_PATH, SLUICE_FAKE_CUDA_PATH, SLUICE_MISSING_DIR"
#endif

namespace sluice {
namespace {

using gpu_test::contains;
using test::shell_quote;


using test::CliRun;

// Loader situations of the child process.
struct Env {
  bool fake_cufile = false;
  bool fake_cuda = false;
  int cuda_devices = 1;
  [[nodiscard]] std::string prefix() const {
    const std::string missing = SLUICE_MISSING_DIR;
    return fmt::format(
        "env SLUICE_LIBCUFILE={} SLUICE_LIBCUDA={} FAKE_CUDA_DEVICES={} FAKE_CUFILE_FAIL= "
        "SLUICE_BOUNCE_BUFFERS=3 SLUICE_BOUNCE_BUFFER_SIZE=64K SLUICE_PATH= SLUICE_DEVICE= SLUICE_CONFIG=",
        shell_quote(fake_cufile ? SLUICE_FAKE_CUFILE_PATH : missing + "/libcufile.so.0"),
        shell_quote(fake_cuda ? SLUICE_FAKE_CUDA_PATH : missing + "/libcuda.so.1"), cuda_devices);
  }
};

class GpuCli : public ::testing::Test {
 protected:
  void SetUp() override {
    scratch_ = std::make_unique<test::TempDir>("/tmp", "sluice-gpu-cli-");
    std::string why;
    const auto root = test::folder_root(test::Folder::disk, &why);
    if (!root) GTEST_SKIP() << why;
    dir_ = std::make_unique<test::TempDir>(*root, "sluice-gpu-cli-");
  }

  CliRun sluice(const std::string& args, const Env& env = {}) const {
    return test::run_captured(SLUICE_CLI_PATH, args, scratch_->path(), env.prefix());
  }

  // A data file of `size` random bytes on disk.
  std::string data_file(std::uint64_t size, unsigned seed) const {
    const std::string f = dir_->file(fmt::format("data{}.bin", seed));
    test::write_file(f, test::random_bytes(static_cast<std::size_t>(size), seed));
    return f;
  }

  std::unique_ptr<test::TempDir> scratch_;
  std::unique_ptr<test::TempDir> dir_;
};

TEST_F(GpuCli, ReadGivesExactlyTheRangeOnEveryGpuPath) {
  const std::uint64_t size = 3 * MiB + 5;
  const std::string file = data_file(size, 1);
  const std::string out = scratch_->file("out.bin");
  struct Range {
    std::string offset, length, extra;
    std::uint64_t off, want;
  };
  const Range ranges[] = {
      {"0", "", "", 0, size},
      {"4097", "100000", "", 4097, 100000},
      {"1", std::to_string(MiB + 3), "--piece 64K", 1, MiB + 3},
      {"7", "300000", "--piece 4097", 7, 300000},
      {std::to_string(size - 10), "100", "", size - 10, 10},
      {std::to_string(size + 10), "5", "", size + 10, 0},
      {"0", "0", "", 0, 0},
  };
  for (const char* path : {"bounce", "posix", "auto"}) {
    for (const Range& c : ranges) {
      const std::string args = fmt::format("read {} --device sim --path {} --offset {} {} --out {} {}",
                                           shell_quote(file), path, c.offset,
                                           c.length.empty() ? "" : "--length " + c.length, shell_quote(out), c.extra);
      SCOPED_TRACE("sluice " + args);
      const CliRun r = sluice(args);
      ASSERT_EQ(r.rc, 0) << r.err;
      EXPECT_EQ(test::file_size(out), c.want);
      EXPECT_TRUE(test::same_bytes(test::read_whole(out), test::pread_file(file, c.off, c.want)));
      if (c.want > 0) {
        const std::string_view shown = std::string_view(path) == "posix" ? "path: posix" : "path: bounce";
        EXPECT_TRUE(contains(r.out, shown));
      }
    }
  }
}

TEST_F(GpuCli, WriteRoundTripsThroughDeviceMemory) {
  const std::string in = data_file(700 * KiB + 3, 2);
  for (const char* path : {"bounce", "posix"}) {
    SCOPED_TRACE(path);
    const std::string target = dir_->file(fmt::format("target-{}.bin", path));
    std::vector<std::byte> model = test::random_bytes(100000, 3);
    test::write_file(target, model);
    for (std::uint64_t off : {std::uint64_t{0}, std::uint64_t{4097}, std::uint64_t{1} << 20}) {
      const CliRun r = sluice(fmt::format("write {} {} --device sim --path {} --offset {} --piece 64K",
                                       shell_quote(in), shell_quote(target), path, off));
      ASSERT_EQ(r.rc, 0) << r.err;
      EXPECT_TRUE(contains(r.out, fmt::format("path: {}", path)));
      const auto payload = test::read_whole(in);
      if (off + payload.size() > model.size()) model.resize(off + payload.size(), std::byte{0});
      std::copy(payload.begin(), payload.end(), model.begin() + static_cast<std::ptrdiff_t>(off));
      EXPECT_TRUE(test::same_bytes(test::read_whole(target), model)) << "offset " << off;
    }
    // And back out through the same path.
    const std::string out = scratch_->file("back.bin");
    const CliRun r = sluice(fmt::format("read {} --device sim --path {} --offset 4097 --length {} --out {}",
                                     shell_quote(target), path, 700 * KiB + 3, shell_quote(out)));
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_TRUE(test::same_bytes(test::read_whole(out), test::read_whole(in)));
  }
}

TEST_F(GpuCli, JsonNamesPathReasonBytesAndSeconds) {
  const std::string file = data_file(MiB + 1, 4);
  const std::string out = scratch_->file("o.bin");
  const CliRun r = sluice(fmt::format("read {} --device sim --json --out {}", shell_quote(file), shell_quote(out)));
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("path"), "bounce");
  EXPECT_TRUE(contains(j.at("reason").get<std::string>(), "libcufile"));
  EXPECT_EQ(j.at("bytes").get<std::uint64_t>(), MiB + 1);
  EXPECT_GE(j.at("seconds").get<double>(), 0.0);

  const std::string in = data_file(5000, 5);
  const CliRun w = sluice(fmt::format("write {} {} --device sim --path posix --json", shell_quote(in),
                                   shell_quote(dir_->file("w.bin"))));
  ASSERT_EQ(w.rc, 0) << w.err;
  const auto jw = nlohmann::json::parse(w.out);
  EXPECT_EQ(jw.at("path"), "posix");
  EXPECT_EQ(jw.at("bytes").get<std::uint64_t>(), 5000U);
  EXPECT_TRUE(jw.contains("reason"));
  EXPECT_TRUE(jw.contains("seconds"));
}

TEST_F(GpuCli, StrictDirectWithoutLibcufileExitsOne) {
  const std::string file = data_file(MiB, 6);
  const std::string out = scratch_->file("o.bin");
  const CliRun r = sluice(fmt::format("read {} --device sim --path direct --out {}", shell_quote(file), shell_quote(out)));
  EXPECT_EQ(r.rc, 1) << r.out << r.err;
  EXPECT_TRUE(contains(r.err, "libcufile"));
  EXPECT_TRUE(contains(r.err, "direct"));
  const CliRun w = sluice(fmt::format("write {} {} --device sim --path direct", shell_quote(file),
                                   shell_quote(dir_->file("w.bin"))));
  EXPECT_EQ(w.rc, 1) << w.out << w.err;
  EXPECT_TRUE(contains(w.err, "libcufile"));
}

TEST_F(GpuCli, WithTheFakeLibcufileAutoGoesDirect) {
  const std::string file = data_file(MiB, 7);  // whole 4 KiB blocks: direct qualifies
  const std::string out = scratch_->file("o.bin");
  const Env env{.fake_cufile = true};
  const CliRun r = sluice(fmt::format("read {} --device sim --json --out {}", shell_quote(file), shell_quote(out)), env);
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("path"), "direct") << j.dump();
  EXPECT_TRUE(contains(j.at("reason").get<std::string>(), "GPUDirect Storage"));
  EXPECT_TRUE(test::same_bytes(test::read_whole(out), test::read_whole(file)));

  const CliRun s = sluice(fmt::format("read {} --device sim --path direct --json --out {}", shell_quote(file),
                                   shell_quote(out)), env);
  ASSERT_EQ(s.rc, 0) << s.err;
  EXPECT_EQ(nlohmann::json::parse(s.out).at("path"), "direct");

  // An unaligned range goes bounce under auto, saying why.
  const CliRun u = sluice(fmt::format("read {} --device sim --offset 1 --length 5000 --json --out {}", shell_quote(file),
                                   shell_quote(out)), env);
  ASSERT_EQ(u.rc, 0) << u.err;
  const auto ju = nlohmann::json::parse(u.out);
  EXPECT_EQ(ju.at("path"), "bounce");
  EXPECT_TRUE(contains(ju.at("reason").get<std::string>(), "not 4 KiB aligned"));
  EXPECT_TRUE(test::same_bytes(test::read_whole(out), test::pread_file(file, 1, 5000)));
}

TEST_F(GpuCli, CudaDeviceOverTheFakeLibcuda) {
  const std::string file = data_file(2 * MiB + 3, 8);
  const std::string out = scratch_->file("o.bin");
  const Env env{.fake_cuda = true};
  for (const char* path : {"bounce", "posix", "auto"}) {
    SCOPED_TRACE(path);
    const CliRun r = sluice(fmt::format("read {} --device cuda:0 --path {} --offset 4095 --json --out {}",
                                     shell_quote(file), path, shell_quote(out)), env);
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out).at("bytes").get<std::uint64_t>(), 2 * MiB + 3 - 4095);
    EXPECT_TRUE(test::same_bytes(test::read_whole(out), test::pread_file(file, 4095, 2 * MiB)));
  }
  const std::string target = dir_->file("t.bin");
  const CliRun w = sluice(fmt::format("write {} {} --device cuda:0 --path bounce", shell_quote(file), shell_quote(target)), env);
  ASSERT_EQ(w.rc, 0) << w.err;
  EXPECT_TRUE(test::same_bytes(test::read_whole(target), test::read_whole(file)));
}

TEST_F(GpuCli, AMissingGpuExitsOneSayingWhy) {
  const std::string file = data_file(10000, 9);
  const std::string out = scratch_->file("o.bin");
  const CliRun r = sluice(fmt::format("read {} --device cuda:3 --out {}", shell_quote(file), shell_quote(out)),
                       Env{.fake_cuda = true, .cuda_devices = 1});
  EXPECT_EQ(r.rc, 1) << r.out << r.err;
  EXPECT_TRUE(contains(r.err, "cuda:3"));
  EXPECT_TRUE(contains(r.err, "1 CUDA device"));
  const CliRun none = sluice(fmt::format("read {} --device cuda:0 --out {}", shell_quote(file), shell_quote(out)));
  EXPECT_EQ(none.rc, 1) << none.out << none.err;
  EXPECT_TRUE(contains(none.err, "libcuda"));
}

TEST_F(GpuCli, AnUnknownDeviceIsAUsageError) {
  const std::string file = data_file(10000, 10);
  const std::string out = scratch_->file("o.bin");
  for (const char* spec : {"bogus", "cuda:x"}) {
    const CliRun r = sluice(fmt::format("read {} --device {} --out {}", shell_quote(file), spec, shell_quote(out)));
    EXPECT_EQ(r.rc, 2) << r.out << r.err;
    EXPECT_TRUE(contains(r.err, spec));
  }
  const CliRun w = sluice(fmt::format("write {} {} --device bogus", shell_quote(file), shell_quote(dir_->file("w.bin"))));
  EXPECT_EQ(w.rc, 2) << w.out << w.err;
}

}  // namespace
}  // namespace sluice
