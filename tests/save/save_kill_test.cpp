// A save killed with SIGKILL at random moments never leaves a partial file under the final name:
// after each kill the file there is, byte for byte, the previous checkpoint or the new one. The
// next save removes what a killed one left behind (its temporary). Kill times are drawn from the
// duration of an unkilled save, so kills land before, during and after the writes and the rename.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <thread>

#include "kill_data.hpp"
#include "sluice/atomic_file.hpp"

namespace sluice {
namespace {

namespace fs = std::filesystem;

pid_t spawn(const std::string& path, std::uint64_t seed) {
  const std::string s = std::to_string(seed);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execl(SLUICE_KILL_CHILD, SLUICE_KILL_CHILD, path.c_str(), s.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

int wait_for(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

std::size_t temporaries(const std::string& dir) {
  std::size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    n += e.path().filename().string().find(atomic_temporary_marker) != std::string::npos ? 1 : 0;
  }
  return n;
}

TEST(SaveKill, AKilledSaveLeavesTheOldFileOrTheNewOneNeverAPartOfEither) {
  std::string why;
  const auto root = test::folder_root(test::Folder::disk, &why);
  if (!root) GTEST_SKIP() << why;
  test::TempDir dir(*root);
  const std::string path = dir.file("model.safetensors");
  constexpr int trials = 60;

  // The first checkpoint, saved whole; its duration sets the range of kill times.
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(wait_for(spawn(path, 1)), 0);
  const auto whole = std::chrono::steady_clock::now() - t0;
  const auto span_us = std::max<std::int64_t>(
      2000, std::chrono::duration_cast<std::chrono::microseconds>(whole).count() * 3 / 2);
  std::mt19937_64 rng(test::test_seed(21));
  std::vector<std::byte> current = test::KillCheckpoint(1).file();
  int old_seen = 0, new_seen = 0, killed_midway = 0;
  for (int trial = 0; trial < trials; ++trial) {
    const std::uint64_t seed = 2 + static_cast<std::uint64_t>(trial);
    const std::vector<std::byte> next = test::KillCheckpoint(seed).file();
    const pid_t pid = spawn(path, seed);
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % static_cast<std::uint64_t>(span_us)));
    ::kill(pid, SIGKILL);
    const int status = wait_for(pid);
    if (WIFSIGNALED(status)) ++killed_midway;
    const std::vector<std::byte> got = test::read_whole(path);
    if (got == next) {
      ++new_seen;
      current = next;
    } else {
      ASSERT_TRUE(test::same_bytes(got, current)) << "trial " << trial << ": neither the old nor the new file";
      ++old_seen;
    }
  }
  RecordProperty("old", old_seen);
  RecordProperty("new", new_seen);
  std::printf("%d trials: %d killed before finishing; the old file %d times, the new one %d times\n", trials,
              killed_midway, old_seen, new_seen);
  // A save that finishes removes every temporary the killed ones left.
  ASSERT_EQ(wait_for(spawn(path, 1000)), 0);
  EXPECT_TRUE(test::same_bytes(test::read_whole(path), test::KillCheckpoint(1000).file()));
  EXPECT_EQ(temporaries(dir.path()), 0U);
}

}  // namespace
}  // namespace sluice
