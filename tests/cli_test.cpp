// The `sluice` command line, run as a user runs it: exact bytes out of `read`, a round trip
// through `write`, parseable --json, and exit codes 0 (ok), 1 (the operation failed) and
// 2 (bad arguments) with a message.
#include <gtest/gtest.h>

#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sluice/config.hpp"
#include "sluice/units.hpp"
#include "sluice/version.hpp"
#include "support/test_util.hpp"

#ifndef SLUICE_CLI_PATH
#error "SLUICE_CLI_PATH must name the built sluice binary"
#endif

namespace sluice {
namespace {

using test::Folder;
using test::TempDir;
using test::shell_quote;

using test::CliRun;

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    scratch_ = std::make_unique<TempDir>("/tmp", "sluice-cli-");
  }

  // Runs `sluice ARGS` (ARGS already quoted for the shell) with optional standard input.
  CliRun sluice(const std::string& args, const std::string& stdin_path = "/dev/null") {
    return test::run_captured(SLUICE_CLI_PATH, args, scratch_->path(), "", stdin_path);
  }

  test::CleanSluiceEnv clean_env_;  // settings from the caller's environment must not leak in
  std::unique_ptr<TempDir> scratch_;
};

std::span<const std::byte> as_bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

TEST_F(Cli, VersionAndHelp) {
  const CliRun v = sluice("--version");
  EXPECT_EQ(v.rc, 0) << v.err;
  EXPECT_NE(v.out.find(fmt::format("sluice {}", version_string)), std::string::npos) << v.out;
  const CliRun h = sluice("--help");
  EXPECT_EQ(h.rc, 0) << h.err;
  EXPECT_NE(h.out.find("read"), std::string::npos) << h.out;
  EXPECT_NE(h.out.find("write"), std::string::npos) << h.out;
  const CliRun rh = sluice("read --help");
  EXPECT_EQ(rh.rc, 0) << rh.err;
  EXPECT_NE(rh.out.find("--offset"), std::string::npos) << rh.out;
  EXPECT_NE(rh.out.find("--json"), std::string::npos) << rh.out;
  EXPECT_EQ(sluice("write --help").rc, 0);
}

TEST_F(Cli, BadArgumentsExitTwoWithAMessage) {
  const std::string file = scratch_->file("data.bin");
  test::write_file(file, test::random_bytes(1000, 1));
  const std::string out = shell_quote(scratch_->file("out.bin"));
  const std::string f = shell_quote(file);
  struct Case {
    std::string args;
    std::string says;  // part of the message, or empty
  };
  const Case cases[] = {
      {"", ""},                                                   // no command
      {"frobnicate", ""},                                         // unknown command
      {fmt::format("read {} --out {} --bogus", f, out), "--bogus"},  // unknown option
      {fmt::format("read {} --out {} --length 1Q", f, out), "1Q"},   // bad size
      {fmt::format("read {} --out {} --offset 12x", f, out), "12x"},
      {fmt::format("read --out {}", out), "FILE"},                // missing FILE
      {fmt::format("read {}", f), "--out"},                       // missing --out
      {fmt::format("read {} --out {} --path warp", f, out), "warp"},  // no such path
      {fmt::format("read {} --out {} --device bogus", f, out), "bogus"},
      {fmt::format("read {} --out {} --piece 0", f, out), "--piece"},
      {fmt::format("read {} --out {} --cache-policy sometimes", f, out), "sometimes"},
      {fmt::format("write {}", f), "FILE"},                       // missing FILE
      {fmt::format("write {} {} --offset 1Q", f, out), "1Q"},
      {fmt::format("write {} {} --path nowhere", f, out), "nowhere"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE("sluice " + c.args);
    const CliRun r = sluice(c.args);
    EXPECT_EQ(r.rc, 2) << r.out << r.err;
    EXPECT_FALSE(r.err.empty() && r.out.empty()) << "no message";
    if (!c.says.empty()) {
      EXPECT_NE((r.err + r.out).find(c.says), std::string::npos) << r.err << r.out;
    }
  }
  EXPECT_EQ(test::file_size(file), 1000U);  // nothing was written by a refused command
}

// A strict path that this machine cannot give is a failed operation (exit 1) that says why,
// never a silent fallback (DESIGN.md principle 1).
TEST_F(Cli, StrictPathThatCannotBeHonouredFailsWithTheReason) {
  const std::string file = scratch_->file("data.bin");
  test::write_file(file, test::random_bytes(10000, 1));
  const CliRun r = sluice(fmt::format("read {} --out {} --path direct --json", shell_quote(file),
                                      shell_quote(scratch_->file("o"))));
  if (r.rc == 0) {
    EXPECT_EQ(nlohmann::json::parse(r.out).at("path"), "direct") << r.out;
    GTEST_SKIP() << "GPUDirect Storage works here";
  }
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_NE(r.err.find("direct"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(file), std::string::npos) << r.err;
}

TEST_F(Cli, MissingFileExitsOneNamingIt) {
  const std::string missing = scratch_->file("no-such-file.bin");
  const CliRun r = sluice(fmt::format("read {} --out {}", shell_quote(missing), shell_quote(scratch_->file("o"))));
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_NE(r.err.find(missing), std::string::npos) << r.err;
  const CliRun w = sluice(fmt::format("write {} {}", shell_quote(missing), shell_quote(scratch_->file("o2"))));
  EXPECT_EQ(w.rc, 1) << w.err;
  EXPECT_NE(w.err.find(missing), std::string::npos) << w.err;
  const std::string nodir = scratch_->file("no-dir/x.bin");
  const std::string in = scratch_->file("in.bin");
  test::write_file(in, test::random_bytes(10, 2));
  const CliRun d = sluice(fmt::format("write {} {}", shell_quote(in), shell_quote(nodir)));
  EXPECT_EQ(d.rc, 1) << d.err;
  EXPECT_NE(d.err.find(nodir), std::string::npos) << d.err;
}

// The exit code follows the error model (docs/errors.md#exit-codes): what the library throws
// decides it, not which command ran. An injected EIO is a failed operation (1) whose message
// names the errno; a bad setting the library refuses is a usage error (2).
TEST_F(Cli, ExitCodesFollowTheErrorModel) {
  const std::string file = shell_quote(scratch_->file("data.bin"));
  test::write_file(scratch_->file("data.bin"), test::random_bytes(1 << 16, 5));
  const std::string out = shell_quote(scratch_->file("o"));
  struct Case {
    std::string env;
    std::string args;
    int rc;
    std::string says;
  };
  const Case cases[] = {
      {"SLUICE_FAULTS=eio=1,only=read", fmt::format("read {} --out {}", file, out), 1,
       "Input/output error (errno 5)"},
      {"SLUICE_FAULTS=eio=1,only=read", fmt::format("read {} --out {} --path bounce --device sim", file, out), 1,
       "Input/output error (errno 5)"},
      {"SLUICE_FAULTS=enospc=1,only=write", fmt::format("write {} {}", file, shell_quote(scratch_->file("w"))), 1,
       "No space left on device (errno 28)"},
      {"SLUICE_FAULTS=sometimes=1", fmt::format("read {} --out {}", file, out), 2, "SLUICE_FAULTS"},
      {"SLUICE_DEVICE=warp", fmt::format("read {} --out {} --path bounce", file, out), 2, "warp"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.env + " sluice " + c.args);
    const CliRun r = test::run_captured(SLUICE_CLI_PATH, c.args, scratch_->path(), "env " + c.env);
    EXPECT_EQ(r.rc, c.rc) << r.out << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
  }
}

// Each typed setting, refused at each edge the CLI has (environment, the SLUICE_CONFIG file,
// the flag): exit 2 and a message naming the setting, where it came from and what it accepts.
TEST_F(Cli, BadSettingsExitTwoNamingTheSettingAndItsSource) {
  const std::string file = shell_quote(scratch_->file("data.bin"));
  test::write_file(scratch_->file("data.bin"), test::random_bytes(1 << 12, 6));
  const std::string json = scratch_->file("bad.json");
  std::ofstream(json) << R"({"engine": "spdk"})";
  const std::string out = shell_quote(scratch_->file("o"));
  const std::string read = fmt::format("read {} --out {}", file, out);
  struct Case {
    std::string env;
    std::string args;
    std::string says;
  };
  const Case cases[] = {
      {"SLUICE_ENGINE=foo", read, "SLUICE_ENGINE=foo: engine must be one of auto, uring, psync"},
      {"SLUICE_PATH=foo", read + " --device sim", "SLUICE_PATH=foo: path must be one of"},
      {"SLUICE_DEVICE=foo", read + " --path bounce", "SLUICE_DEVICE=foo: device must be one of"},
      {"SLUICE_CACHE_POLICY=foo", read, "SLUICE_CACHE_POLICY=foo: cache_policy must be one of auto, bypass, use"},
      {"SLUICE_LOG=foo", read, "SLUICE_LOG=foo: log_level must be one of"},
      {"SLUICE_CONFIG=" + shell_quote(json), read, json + "': engine=spdk: engine must be one of"},
      {"", read + " --path foo", "--path: path=foo: path must be one of auto, direct, bounce, posix, host"},
      {"", read + " --cache-policy foo", "--cache-policy: cache_policy=foo: cache_policy must be one of"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.env + " sluice " + c.args);
    const CliRun r = test::run_captured(SLUICE_CLI_PATH, c.args, scratch_->path(), "env " + c.env);
    EXPECT_EQ(r.rc, 2) << r.out << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
  }
}

TEST_F(Cli, NonRegularFilesAreRefused) {
  const CliRun dir = sluice(fmt::format("read {} --out {}", shell_quote(scratch_->path()),
                                     shell_quote(scratch_->file("o"))));
  EXPECT_NE(dir.rc, 0);
  EXPECT_NE(dir.err.find(scratch_->path()), std::string::npos) << dir.err;
  const CliRun dev = sluice(fmt::format("read /dev/null --out {}", shell_quote(scratch_->file("o"))));
  EXPECT_NE(dev.rc, 0);
  EXPECT_NE(dev.err.find("/dev/null"), std::string::npos) << dev.err;
}

class CliOnFolder : public Cli, public ::testing::WithParamInterface<Folder> {
 protected:
  void SetUp() override {
    Cli::SetUp();
    std::string why;
    const auto root = test::folder_root(GetParam(), &why);
    if (!root) GTEST_SKIP() << why;
    dir_ = std::make_unique<TempDir>(*root, "sluice-cli-");
  }
  std::unique_ptr<TempDir> dir_;
};

TEST_P(CliOnFolder, ReadGivesExactlyTheRange) {
  const std::string file = dir_->file("data.bin");
  const std::uint64_t size = 20 * MiB + 5;
  test::write_file(file, test::random_bytes(size, 3));
  const std::string out = scratch_->file("out.bin");
  struct Case {
    std::string offset, length, extra;
    std::uint64_t off, want;
  };
  const Case cases[] = {
      {"0", "", "", 0, size},                             // default length: to the end
      {"4097", "100000", "", 4097, 100000},
      {"1M", "5K", "", MiB, 5 * KiB},                     // size units
      {"1", std::to_string(MiB + 3), "--piece 64K", 1, MiB + 3},  // many pieces, four in flight
      {"7", "300000", "--piece 4097", 7, 300000},          // odd piece size
      {"3", "", "--piece 16400K", 3, size - 3},            // pieces over 16 MiB: two in flight
      {"0", std::to_string(size + 300000), "--piece 64K", 0, size},  // reads in flight past the end
      {"0", "", "--path host", 0, size},                    // the host path by name
      {std::to_string(size - 10), "100", "", size - 10, 10},  // past the end: the bytes there were
      {std::to_string(size + 10), "5", "", size + 10, 0},
      {"0", "0", "", 0, 0},
  };
  for (const auto& c : cases) {
    const std::string args = fmt::format("read {} --offset {} {} --out {} {}", shell_quote(file), c.offset,
                                         c.length.empty() ? "" : "--length " + c.length, shell_quote(out), c.extra);
    SCOPED_TRACE("sluice " + args);
    const CliRun r = sluice(args);
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_TRUE(test::same_bytes(test::read_whole(out), test::pread_file(file, c.off, c.want)));
    EXPECT_EQ(test::file_size(out), c.want);
    EXPECT_NE(r.out.find("path: host"), std::string::npos) << r.out;
  }
}

TEST_P(CliOnFolder, ReadToStandardOutput) {
  const std::string file = dir_->file("data.bin");
  test::write_file(file, test::random_bytes(200000, 4));
  const CliRun r = sluice(fmt::format("read {} --offset 3 --length 150000 --out -", shell_quote(file)));
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(test::same_bytes(as_bytes(r.out), test::pread_file(file, 3, 150000)));
  EXPECT_NE(r.err.find("path: host"), std::string::npos) << "the summary goes to stderr: " << r.err;
}

TEST_P(CliOnFolder, WriteRoundTrips) {
  const std::string file = dir_->file("target.bin");
  const auto before = test::random_bytes(100000, 5);
  test::write_file(file, before);
  const std::string in = scratch_->file("in.bin");
  const auto payload = test::random_bytes(700 * KiB + 3, 6);
  test::write_file(in, payload);

  std::vector<std::byte> model = before;
  auto apply = [&](std::uint64_t off) {
    if (model.size() < off + payload.size()) model.resize(off + payload.size(), std::byte{0});
    std::copy(payload.begin(), payload.end(), model.begin() + static_cast<std::ptrdiff_t>(off));
  };
  CliRun r = sluice(fmt::format("write {} {} --offset 12345", shell_quote(in), shell_quote(file)));
  ASSERT_EQ(r.rc, 0) << r.err;
  apply(12345);
  EXPECT_TRUE(test::same_bytes(test::read_whole(file), model));

  r = sluice(fmt::format("write {} {} --offset 1M --piece 64K --fsync", shell_quote(in), shell_quote(file)));
  ASSERT_EQ(r.rc, 0) << r.err;
  apply(MiB);
  EXPECT_TRUE(test::same_bytes(test::read_whole(file), model));

  r = sluice(fmt::format("write - {} --offset 5", shell_quote(file)), in);  // from standard input
  ASSERT_EQ(r.rc, 0) << r.err;
  apply(5);
  EXPECT_TRUE(test::same_bytes(test::read_whole(file), model));

  // And back out with `sluice read`.
  const std::string out = scratch_->file("back.bin");
  r = sluice(fmt::format("read {} --offset 5 --length {} --out {}", shell_quote(file), payload.size(),
                         shell_quote(out)));
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(test::same_bytes(test::read_whole(out), payload));
}

TEST_P(CliOnFolder, JsonOutput) {
  const std::string file = dir_->file("data.bin");
  test::write_file(file, test::random_bytes(300000, 7));
  const CliRun r = sluice(fmt::format("read {} --offset 10 --length 200000 --out {} --json", shell_quote(file),
                                   shell_quote(scratch_->file("o"))));
  ASSERT_EQ(r.rc, 0) << r.err;
  nlohmann::json j;
  ASSERT_NO_THROW(j = nlohmann::json::parse(r.out)) << r.out;
  EXPECT_EQ(j.at("op"), "read");
  EXPECT_EQ(j.at("file"), file);
  EXPECT_EQ(j.at("path"), "host");
  EXPECT_TRUE(j.at("reason").is_string());
  EXPECT_FALSE(j.at("reason").get<std::string>().empty());
  EXPECT_EQ(j.at("bytes"), 200000);
  EXPECT_TRUE(j.at("seconds").is_number());
  EXPECT_GE(j.at("seconds").get<double>(), 0.0);
  if (GetParam() == Folder::tmpfs) {
    EXPECT_NE(j.at("reason").get<std::string>().find("tmpfs"), std::string::npos) << j.dump();
  }

  const std::string in = scratch_->file("in.bin");
  test::write_file(in, test::random_bytes(5000, 8));
  const CliRun w = sluice(fmt::format("write {} {} --json", shell_quote(in), shell_quote(dir_->file("w.bin"))));
  ASSERT_EQ(w.rc, 0) << w.err;
  nlohmann::json wj;
  ASSERT_NO_THROW(wj = nlohmann::json::parse(w.out)) << w.out;
  EXPECT_EQ(wj.at("op"), "write");
  EXPECT_EQ(wj.at("path"), "host");
  EXPECT_EQ(wj.at("bytes"), 5000);
  EXPECT_TRUE(wj.at("reason").is_string());
  EXPECT_TRUE(wj.at("seconds").is_number());
}

TEST_P(CliOnFolder, EnvironmentSettingsApply) {
  const std::string file = dir_->file("data.bin");
  test::write_file(file, test::random_bytes(100000, 9));
  test::ScopedEnv direct("SLUICE_DIRECT_IO", "false");
  const CliRun r = sluice(fmt::format("read {} --out {} --json", shell_quote(file), shell_quote(scratch_->file("o"))));
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_NE(j.at("reason").get<std::string>().find("direct I/O disabled"), std::string::npos) << j.dump();
  test::ScopedEnv bad("SLUICE_QUEUE_DEPTH", "lots");
  const CliRun b = sluice(fmt::format("read {} --out {}", shell_quote(file), shell_quote(scratch_->file("o"))));
  EXPECT_EQ(b.rc, 2) << b.err;
  EXPECT_NE(b.err.find("SLUICE_QUEUE_DEPTH"), std::string::npos) << b.err;
}

// --cache-policy reaches the library: the reason says what each policy did with a file the
// page cache holds (it was just written), and SLUICE_CACHE_POLICY is the default it overrides.
TEST_P(CliOnFolder, CachePolicyOption) {
  const std::string file = dir_->file("data.bin");
  test::write_file(file, test::random_bytes(3 * MiB + 5, 10));
  const std::string out = shell_quote(scratch_->file("o"));
  auto reason = [&](const std::string& extra) {
    const CliRun r = sluice(fmt::format("read {} --out {} --json {}", shell_quote(file), out, extra));
    EXPECT_EQ(r.rc, 0) << r.err;
    EXPECT_TRUE(test::same_bytes(test::read_whole(scratch_->file("o")), test::read_whole(file)));
    return nlohmann::json::parse(r.out).at("reason").get<std::string>();
  };
  if (GetParam() == Folder::tmpfs) {  // no O_DIRECT: every policy reads buffered, and says why
    EXPECT_NE(reason("--cache-policy bypass").find("tmpfs"), std::string::npos);
    return;
  }
  EXPECT_EQ(reason("--cache-policy bypass"), "O_DIRECT; unaligned head/tail through staging");
  EXPECT_EQ(reason("--cache-policy use"), "buffered: cache_policy use");
  const std::string cached = reason("--cache-policy auto");
  EXPECT_TRUE(cached.starts_with("page cache held ")) << cached;
  test::ScopedEnv env("SLUICE_CACHE_POLICY", "bypass");
  EXPECT_EQ(reason(""), "O_DIRECT; unaligned head/tail through staging");
  EXPECT_TRUE(reason("--cache-policy auto").starts_with("page cache held "));
}

INSTANTIATE_TEST_SUITE_P(Folders, CliOnFolder, ::testing::Values(Folder::disk, Folder::tmpfs),
                         [](const auto& p) { return std::string(test::to_string(p.param)); });

}  // namespace
}  // namespace sluice
