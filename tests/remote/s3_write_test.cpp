// Writing to S3 (RemoteWriter, `sluice write IN s3://...`): against the signature-checking
// emulator (@20minutes/s3rver), objects read back by an independent client (boto3) and by
// sluice, bytes equal; multipart sizes; a wrong secret is a clear error and leaves no object;
// `sluice write` killed with SIGKILL at random points leaves no object or the whole one. Faults
// from the scripted S3 server (s3_fault_server.py): retried to the whole object, or an Error with
// the upload aborted and no object.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "servers.hpp"
#include "sluice/device.hpp"
#include "sluice/remote.hpp"
#include "sluice/remote_writer.hpp"
#include "sluice/save.hpp"
#include "support/test_util.hpp"

extern char** environ;

namespace sluice {
namespace {

namespace fs = std::filesystem;

// Runs a shell command; its exit status and standard output.
std::pair<int, std::string> run_shell(const std::string& cmd) {
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return {-1, {}};
  std::string out;
  char buf[65536];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;)
    out.append(buf, n);  // binary-safe
  const int st = ::pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

// Starts argv (the sluice CLI) with this process's environment; stdin from `in_fd` if >= 0.
pid_t spawn(const std::vector<std::string>& argv, int in_fd = -1) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (in_fd >= 0) posix_spawn_file_actions_adddup2(&fa, in_fd, STDIN_FILENO);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  if (posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

int wait_status(pid_t pid) {
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  return st;
}

class S3WriteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::make_unique<test::TempDir>("/tmp", "sluice-s3w-");
    ::mkdir(dir_->file("store").c_str(), 0755);
    server_ = std::make_unique<test::S3Server>(dir_->file("store"));
    if (!server_->ok()) SLUICE_SKIP_OR_FAIL(server_->why());
    for (const char* name :
         {"AWS_ENDPOINT_URL_S3", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION", "AWS_CA_BUNDLE",
          "SLUICE_REMOTE_PART_SIZE", "SLUICE_REMOTE_IN_FLIGHT"}) {
      env_.push_back(std::make_unique<test::ScopedEnv>(name, std::nullopt));
    }
    set_env("AWS_ENDPOINT_URL", server_->endpoint());
    set_env("AWS_REGION", "us-east-1");
    set_env("AWS_ACCESS_KEY_ID", "S3RVER");
    set_env("AWS_SECRET_ACCESS_KEY", "S3RVER");
  }
  void set_env(const std::string& name, const std::string& value) {
    env_.push_back(std::make_unique<test::ScopedEnv>(name, value));
  }
  static RemoteOptions options() {
    RemoteOptions o;
    o.part_size = s3_min_part_size;  // S3's smallest: a few MiB make several parts
    o.in_flight = 4;
    return o;
  }
  // The object as boto3 reads it; nullopt when the key does not exist.
  std::optional<std::vector<std::byte>> boto3_get(const std::string& key) const {
    const std::string out = dir_->file("got.bin");
    ::unlink(out.c_str());
    const auto [rc, text] = run_shell(fmt::format("/usr/bin/python3 {} {} sluice-test '{}' {}",
                                                  SLUICE_S3_GET, server_->endpoint(), key, out));
    if (rc == 3) return std::nullopt;
    EXPECT_EQ(rc, 0) << "s3_get.py failed for " << key;
    return test::pread_file(out, 0, fs::file_size(out));
  }
  // Multipart uploads the emulator holds in progress (it has no ListMultipartUploads).
  std::size_t uploads_in_progress() const {
    std::error_code ec;
    std::size_t n = 0;
    for (const auto& e :
         fs::directory_iterator(dir_->file("store/sluice-test/._S3rver_uploads"), ec)) {
      (void)e;
      ++n;
    }
    return n;
  }
  std::unique_ptr<test::TempDir> dir_;
  std::unique_ptr<test::S3Server> server_;
  std::vector<std::unique_ptr<test::ScopedEnv>> env_;
};

// Sizes around the part boundaries: one PUT below one part, parts with a short last one, and
// full last parts; appended in uneven pieces. boto3 and sluice read back the same bytes.
TEST_F(S3WriteTest, UploadsReadBackEqualWithBoto3AndSluice) {
  const std::uint64_t part = s3_min_part_size;
  std::mt19937_64 rng(3);
  for (const std::uint64_t size :
       {std::uint64_t{0}, std::uint64_t{1000}, part, 2 * part, 2 * part + 321}) {
    const std::string key = fmt::format("w/obj {}.bin", size);
    const auto data = test::random_bytes(size, size + 1);
    RemoteWriter w("s3://sluice-test/" + key, options());
    for (std::uint64_t at = 0; at < size;) {
      const std::uint64_t n = std::min<std::uint64_t>(size - at, 1 + rng() % (3 * MiB));
      w.append(data.data() + at, n);
      at += n;
    }
    const TransferResult r = w.commit();
    EXPECT_EQ(r.bytes, size);
    const std::uint64_t parts = (size + part - 1) / part;
    if (parts <= 1) {
      EXPECT_NE(r.reason.find("one PUT"), std::string::npos) << r.reason;
    } else {
      EXPECT_NE(r.reason.find(fmt::format("multipart upload of {} parts", parts)),
                std::string::npos)
          << r.reason;
    }
    const auto got = boto3_get(key);
    ASSERT_TRUE(got) << key;
    EXPECT_TRUE(*got == data) << key << ": boto3 read " << got->size() << " bytes";
    if (size > 0) {
      RemoteReader reader("s3://sluice-test/" + key, RemoteOptions{});
      std::vector<std::byte> back(size);
      EXPECT_EQ(reader.read(back.data(), size, 0).bytes, size);
      EXPECT_TRUE(back == data) << key;
    }
  }
  EXPECT_EQ(uploads_in_progress(), 0U);  // each upload completed
}

TEST_F(S3WriteTest, WrongSecretIsAClearErrorAndLeavesNoObject) {
  set_env("AWS_SECRET_ACCESS_KEY", "not-the-secret");
  for (const std::uint64_t size : {std::uint64_t{1000}, 2 * s3_min_part_size + 5}) {
    const std::string key = fmt::format("w/denied-{}", size);
    const auto data = test::random_bytes(size, 1);
    RemoteWriter w("s3://sluice-test/" + key, options());
    const auto e = test::error_of([&] {
      w.append(data.data(), size);
      (void)w.commit();
    });
    ASSERT_TRUE(e);
    EXPECT_EQ(e->errno_value(), EACCES) << e->what();
    EXPECT_EQ(e->path(), "s3://sluice-test/" + key);
    EXPECT_NE(std::string(e->what()).find("HTTP 403 SignatureDoesNotMatch"), std::string::npos)
        << e->what();
    set_env("AWS_SECRET_ACCESS_KEY", "S3RVER");
    EXPECT_FALSE(boto3_get(key)) << key;
    set_env("AWS_SECRET_ACCESS_KEY", "not-the-secret");
  }
}

TEST_F(S3WriteTest, HttpsUrlsAreRefused) {
  const auto e = test::error_of([] { RemoteWriter w("https://example.com/x", RemoteOptions{}); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->errno_value(), EINVAL);
  EXPECT_NE(std::string(e->what()).find("only s3:// URLs are written"), std::string::npos)
      << e->what();
}

// SIGKILL cannot be caught: what the killed write leaves is up to S3's semantics, which say the
// key holds no object or the whole one (the object appears at CompleteMultipartUpload, at once).
// The killed process's upload may stay in progress: a lifecycle rule aborts those (docs/remote.md).
TEST_F(S3WriteTest, CliKilledAtRandomPointsLeavesNoObjectOrTheWholeOne) {
  const std::uint64_t size = 4 * s3_min_part_size + 12345;
  const auto data = test::random_bytes(size, 9);
  test::write_file(dir_->file("in.bin"), data);
  std::mt19937_64 rng(std::random_device{}());
  int whole = 0, none = 0;
  for (int round = 0; round < 8; ++round) {
    const std::string key = fmt::format("w/killed-{}", round);
    const pid_t pid = spawn({SLUICE_CLI_PATH, "write", dir_->file("in.bin"),
                             "s3://sluice-test/" + key, "--part-size", "5M", "--in-flight", "2"});
    ASSERT_GT(pid, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 600));
    ::kill(pid, SIGKILL);
    (void)wait_status(pid);
    const auto got = boto3_get(key);
    if (got) {
      EXPECT_TRUE(*got == data) << key << ": " << got->size() << " of " << size << " bytes";
      ++whole;
    } else {
      ++none;
    }
  }
  RecordProperty("whole", whole);
  RecordProperty("none", none);
  RecordProperty("uploads_left_in_progress", static_cast<int>(uploads_in_progress()));
}

TEST_F(S3WriteTest, CliWritesAUrlAndSaysRemote) {
  const std::uint64_t size = 2 * s3_min_part_size + 99;
  const auto data = test::random_bytes(size, 4);
  test::write_file(dir_->file("in.bin"), data);
  const auto [rc, out] =
      run_shell(fmt::format("{} write {} s3://sluice-test/w/cli.bin --part-size 5M --json",
                            SLUICE_CLI_PATH, dir_->file("in.bin")));
  ASSERT_EQ(rc, 0) << out;
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["path"], "remote");
  EXPECT_EQ(j["bytes"], size);
  EXPECT_NE(j["reason"].get<std::string>().find("multipart upload of 3 parts"), std::string::npos)
      << out;
  const auto got = boto3_get("w/cli.bin");
  ASSERT_TRUE(got);
  EXPECT_TRUE(*got == data);
  const auto [rc2, out2] = run_shell(fmt::format("{} write {} s3://sluice-test/w/x --offset 5 2>&1",
                                                 SLUICE_CLI_PATH, dir_->file("in.bin")));
  EXPECT_EQ(rc2, 2) << out2;  // an object is written whole
}

// --- Faults (s3_fault_server.py) ---

class S3FaultServer {
 public:
  S3FaultServer() : child_({"/usr/bin/python3", SLUICE_S3_FAULT_SERVER}, true) {
    char buf[32] = {};
    std::size_t n = 0;
    while (n + 1 < sizeof buf && ::read(child_.stdout_fd(), buf + n, 1) == 1 && buf[n] != '\n') ++n;
    port_ = std::atoi(buf);
  }
  [[nodiscard]] bool ok() const { return port_ > 0; }
  [[nodiscard]] std::string endpoint() const { return fmt::format("http://127.0.0.1:{}", port_); }
  // {"objects": {key: size}, "open_uploads": n, "aborted": n, "requests": {...}} of a bucket.
  [[nodiscard]] nlohmann::json state(const std::string& bucket) const {
    const auto [rc, out] =
        run_shell(fmt::format("/usr/bin/python3 -c \"import urllib.request as u; "
                              "print(u.urlopen('{}/state/{}').read().decode())\"",
                              endpoint(), bucket));
    return rc == 0 ? nlohmann::json::parse(out) : nlohmann::json();
  }
  [[nodiscard]] std::vector<std::byte> object(const std::string& bucket,
                                              const std::string& key) const {
    const auto [rc, out] =
        run_shell(fmt::format("/usr/bin/python3 -c \"import urllib.request as u, sys; "
                              "sys.stdout.buffer.write(u.urlopen('{}/{}/{}').read())\"",
                              endpoint(), bucket, key));
    std::vector<std::byte> b(out.size());
    std::memcpy(b.data(), out.data(), out.size());
    return rc == 0 ? b : std::vector<std::byte>{};
  }

 private:
  test::Child child_;
  int port_ = 0;
};

class S3WriteFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!server_.ok()) GTEST_FAIL() << "s3_fault_server.py did not start";
    for (const char* name : {"AWS_ENDPOINT_URL_S3", "AWS_SESSION_TOKEN", "AWS_CA_BUNDLE"})
      env_.push_back(std::make_unique<test::ScopedEnv>(name, std::nullopt));
    env_.push_back(std::make_unique<test::ScopedEnv>("AWS_ENDPOINT_URL", server_.endpoint()));
    env_.push_back(std::make_unique<test::ScopedEnv>("AWS_REGION", "us-east-1"));
    env_.push_back(std::make_unique<test::ScopedEnv>("AWS_ACCESS_KEY_ID", "K"));
    env_.push_back(std::make_unique<test::ScopedEnv>("AWS_SECRET_ACCESS_KEY", "S"));
  }
  static RemoteOptions options() {
    RemoteOptions o;
    o.part_size = s3_min_part_size;
    o.in_flight = 3;
    o.max_attempts = 3;
    o.backoff_base_ms = 10;
    o.backoff_cap_ms = 50;
    return o;
  }
  // Writes `size` bytes to s3://BUCKET/obj; the bytes written.
  static std::vector<std::byte> write(const std::string& bucket, std::uint64_t size,
                                      TransferResult* r = nullptr) {
    auto data = test::random_bytes(size, size);
    RemoteWriter w("s3://" + bucket + "/obj", options());
    w.append(data.data(), size);
    const TransferResult got = w.commit();
    if (r != nullptr) *r = got;
    return data;
  }
  S3FaultServer server_;
  std::vector<std::unique_ptr<test::ScopedEnv>> env_;
};

constexpr std::uint64_t three_parts = 2 * s3_min_part_size + 4321;

TEST_F(S3WriteFaultTest, NoFaultCompletesTheUpload) {
  const auto data = write("ok", three_parts);
  EXPECT_TRUE(server_.object("ok", "obj") == data);
  const auto st = server_.state("ok");
  EXPECT_EQ(st["open_uploads"], 0);
  EXPECT_EQ(st["requests"]["UploadPart"], 3);
}

TEST_F(S3WriteFaultTest, UploadPart503IsRetriedToTheWholeObject) {
  TransferResult r;
  const auto data = write("part503", three_parts, &r);
  EXPECT_TRUE(server_.object("part503", "obj") == data);
  EXPECT_EQ(server_.state("part503")["requests"]["UploadPart"], 4);
  EXPECT_NE(r.reason.find("1 retried after 503 SlowDown"), std::string::npos) << r.reason;
}

TEST_F(S3WriteFaultTest, UploadPartResetIsRetriedFromThePartsFirstByte) {
  const auto data = write("partreset", three_parts);
  EXPECT_TRUE(server_.object("partreset", "obj") == data);
  EXPECT_EQ(server_.state("partreset")["open_uploads"], 0);
}

TEST_F(S3WriteFaultTest, CompleteAnswered200WithAnErrorIsRetried) {
  const auto data = write("complete200err", three_parts);
  EXPECT_TRUE(server_.object("complete200err", "obj") == data);
  EXPECT_EQ(server_.state("complete200err")["requests"]["CompleteMultipartUpload"], 2);
}

// The failures that end a write: the Error says what and where, the upload is aborted, the key
// holds no object, and no upload is left in progress.
void expect_aborted(const S3FaultServer& server, const std::string& bucket,
                    const std::optional<Error>& e, const std::string& text) {
  ASSERT_TRUE(e);
  EXPECT_EQ(e->path(), "s3://" + bucket + "/obj");
  EXPECT_NE(std::string(e->what()).find(text), std::string::npos) << e->what();
  const auto st = server.state(bucket);
  EXPECT_TRUE(st["objects"].empty()) << st.dump();
  EXPECT_EQ(st["open_uploads"], 0) << st.dump();
  EXPECT_EQ(st["aborted"], 1) << st.dump();
}

TEST_F(S3WriteFaultTest, Complete500UntilTheTriesRunOutAbortsTheUpload) {
  const auto e = test::error_of([] { (void)write("complete500", three_parts); });
  expect_aborted(
      server_, "complete500", e,
      "CompleteMultipartUpload gave up after 3 tries, the last failed with 500 InternalError");
  EXPECT_EQ(server_.state("complete500")["requests"]["CompleteMultipartUpload"], 3);
}

TEST_F(S3WriteFaultTest, UploadPart403FailsAtOnceWithItsRangeAndAborts) {
  const auto e = test::error_of([] { (void)write("part403", three_parts); });
  expect_aborted(server_, "part403", e,
                 "UploadPart: HTTP 403 AccessDenied: Access Denied (part 2)");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->errno_value(), EACCES);
  EXPECT_TRUE(e->has_range());
  EXPECT_EQ(e->offset(), s3_min_part_size);
}

TEST_F(S3WriteFaultTest, DestroyedWithoutCommitAbortsTheUpload) {
  {
    const auto data = test::random_bytes(three_parts, 2);
    RemoteWriter w("s3://destroyed/obj", options());
    w.append(data.data(), data.size());
    EXPECT_GE(server_.state("destroyed")["requests"]["CreateMultipartUpload"], 1);
  }
  const auto st = server_.state("destroyed");
  EXPECT_TRUE(st["objects"].empty()) << st.dump();
  EXPECT_EQ(st["open_uploads"], 0) << st.dump();
  EXPECT_EQ(st["aborted"], 1) << st.dump();
}

// save_safetensors to s3:// from (sim) device memory: staged through host memory a part at a
// time, the object byte for byte the local save of the same tensors.
TEST_F(S3WriteFaultTest, SaveSafetensorsFromDeviceMemoryEqualsTheLocalFile) {
  test::TempDir dir("/tmp", "sluice-s3w-");
  const auto dev = open_device("sim");
  const auto big = test::random_bytes(11 * MiB + 5, 1), small = test::random_bytes(64, 2);
  DeviceBuffer big_dev(dev, big.size());
  dev->copy_to_device(big_dev.data(), big.data(), big.size());
  const std::vector<SaveTensor> on_device{
      {"big", DType::u8, {big.size()}, big_dev.data(), big.size()},
      {"small", DType::f32, {16}, small.data(), small.size()}};
  const std::vector<SaveTensor> on_host{{"big", DType::u8, {big.size()}, big.data(), big.size()},
                                        {"small", DType::f32, {16}, small.data(), small.size()}};
  const SaveResult r = save_safetensors("s3://ok/dev.safetensors", on_device, {.device = dev});
  EXPECT_NE(r.transfer.reason.find("multipart upload of 2 parts"), std::string::npos)
      << r.transfer.reason;
  EXPECT_NE(r.transfer.reason.find("staged through host memory"), std::string::npos)
      << r.transfer.reason;
  (void)save_safetensors(dir.file("host.safetensors"), on_host);
  const auto local = test::pread_file(dir.file("host.safetensors"), 0,
                                      fs::file_size(dir.file("host.safetensors")));
  EXPECT_EQ(r.file_bytes, local.size());
  EXPECT_TRUE(server_.object("ok", "dev.safetensors") == local);
}

// `sluice write - s3://...` fed by a slow pipe: the parts already appended go out while it waits
// for the next bytes (the first part is stored before the input ends), and the object is whole.
TEST_F(S3WriteFaultTest, CliUploadsWhileAPipeIsSlow) {
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  const pid_t pid =
      spawn({SLUICE_CLI_PATH, "write", "-", "s3://ok/piped", "--part-size", "5M"}, fds[0]);
  ::close(fds[0]);
  ASSERT_GT(pid, 0);
  const auto data = test::random_bytes(2 * s3_min_part_size + 7, 6);
  const std::size_t first = s3_min_part_size + 1;  // part 1 is full and goes once a byte follows
  ASSERT_EQ(::write(fds[1], data.data(), first), static_cast<ssize_t>(first));
  int stored = 0;
  for (int i = 0; i < 200 && stored < 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    stored = server_.state("ok").value("parts_stored", 0);
  }
  EXPECT_EQ(stored, 1);  // while the writer waits on the pipe
  ASSERT_EQ(::write(fds[1], data.data() + first, data.size() - first),
            static_cast<ssize_t>(data.size() - first));
  ::close(fds[1]);
  const int st = wait_status(pid);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0);
  EXPECT_TRUE(server_.object("ok", "piped") == data);
}

// SIGTERM and SIGINT make `sluice write` abort its upload before it exits 128 + the signal.
TEST_F(S3WriteFaultTest, CliSigtermAndSigintAbortTheUpload) {
  for (const auto& [sig, bucket] : {std::pair{SIGTERM, "sigterm"}, std::pair{SIGINT, "sigint"}}) {
    int fds[2];
    ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
    const pid_t pid = spawn(
        {SLUICE_CLI_PATH, "write", "-", fmt::format("s3://{}/obj", bucket), "--part-size", "5M"},
        fds[0]);
    ::close(fds[0]);
    ASSERT_GT(pid, 0);
    const auto data = test::random_bytes(2 * s3_min_part_size + 1, 8);  // the first part goes out
    ASSERT_EQ(::write(fds[1], data.data(), data.size()), static_cast<ssize_t>(data.size()));
    for (int i = 0; i < 200 && server_.state(bucket)["requests"].value("UploadPart", 0) < 1; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ::kill(pid, sig);
    const int st = wait_status(pid);
    ::close(fds[1]);
    ASSERT_TRUE(WIFEXITED(st)) << bucket;
    EXPECT_EQ(WEXITSTATUS(st), 128 + sig) << bucket;
    const auto s = server_.state(bucket);
    EXPECT_TRUE(s["objects"].empty()) << s.dump();
    EXPECT_EQ(s["open_uploads"], 0) << s.dump();
    EXPECT_EQ(s["aborted"], 1) << s.dump();
  }
}

}  // namespace
}  // namespace sluice
