// cufile.json and the CUFILE_* variables, as a cuFile program meets them: each case writes its
// file into a scratch folder and runs in a child process (libsluice_cufile applies the
// configuration once per process, on its first call) with CUFILE_ENV_PATH_JSON naming the file.
// The child captures the library's log (stderr) to check what it said, and reports what went
// wrong on the real stderr with exit status 1. The parent never calls a cuFile function.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cufile_test_util.hpp"

#ifndef SLUICE_CLI_PATH
#error "SLUICE_CLI_PATH must name the built sluice binary"
#endif

namespace cufile_test {
namespace {

using Env = std::vector<std::pair<std::string, std::string>>;

// What went wrong in a child, one line each.
class Verdict {
 public:
  void is(bool ok, const std::string& what) {
    if (!ok) out_ += what + "\n";
  }
  template <typename A, typename B>
  void eq(const A& got, const B& want, const std::string& what) {
    if (got == want) return;
    std::ostringstream s;
    s << what << ": got " << got << ", want " << want << "\n";
    out_ += s.str();
  }
  [[nodiscard]] const std::string& text() const { return out_; }

 private:
  std::string out_;
};

std::size_t count_of(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
    ++n;
  return n;
}

// The child: `env` set, the library's log going to a file, `body(verdict, log)` where log() reads
// what the library wrote so far. Exits 0 when the verdict is clean, else prints it and exits 1.
void child(const Env& env,
           const std::function<void(Verdict&, const std::function<std::string()>&)>& body) {
  for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
  const int real_stderr = ::dup(STDERR_FILENO);
  char log_path[] = "/tmp/sluice-cufile-log-XXXXXX";
  const int log_fd = ::mkstemp(log_path);
  ::dup2(log_fd, STDERR_FILENO);
  const auto log = [&] {
    std::ifstream in(log_path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  Verdict v;
  if (device_memory()) v.is(Cuda::get().ok(), "mode " + mode() + " needs libcuda.so.1");
  Cuda::get().bind();
  body(v, log);
  const std::string text = v.text().empty() ? "" : v.text() + "--- library log:\n" + log();
  ::unlink(log_path);
  if (!text.empty()) (void)!::write(real_stderr, text.data(), text.size());
  std::_Exit(v.text().empty() ? 0 : 1);
}

using Body = std::function<void(Verdict&, const std::function<std::string()>&)>;

// One case's checks, in a child of their own.
void in_child(const Env& env, const Body& body) {
  EXPECT_EXIT(child(env, body), ::testing::ExitedWithCode(0), "");
}

bool ok(CUfileError_t st) {
  return st.err == CU_FILE_SUCCESS;
}

std::size_t size_param(CUFileSizeTConfigParameter_t p) {
  size_t v = 0;
  return ok(cuFileGetParameterSizeT(p, &v)) ? v : SIZE_MAX;
}

int bool_param(CUFileBoolConfigParameter_t p) {
  bool v = false;
  return ok(cuFileGetParameterBool(p, &v)) ? static_cast<int>(v) : -1;
}

std::string string_param(CUFileStringConfigParameter_t p) {
  char buf[256] = {};
  return ok(cuFileGetParameterString(p, buf, sizeof buf)) ? std::string(buf) : "(error)";
}

class ConfigFile : public ::testing::Test {
 protected:
  // Writes `text` as a cufile.json and returns the environment naming it.
  Env file(const std::string& text, const std::string& name = "cufile.json") {
    const std::string path = dir_.file(name);
    std::ofstream(path) << text;
    return {{"CUFILE_ENV_PATH_JSON", path}};
  }
  TempDir dir_;
};

// NVIDIA's syntax: comments of both kinds, nested sections; each mapped key reaches its setting.
constexpr const char* kMapped = R"(// cufile.json as NVIDIA ships it: comments allowed
{
  /* logging */ "logging": { "level": "DEBUG", "dir": "/var/log/app" },
  "profile": { "cufile_stats": 2, "nvtx": true },
  "execution": { "max_io_queue_depth": 48, "max_io_threads": 3, "parallel_io": false,
                 "min_io_threshold_size_kb": 1024, "max_request_parallelism": 2 },
  "properties": {
    "max_direct_io_size_kb": 2048,   // Sluice's io_size
    "per_buffer_cache_size_kb": 512, "max_device_cache_size_kb": 4096,
    "max_device_pinned_mem_size_kb": 1048576, "io_batchsize": 32, "max_batch_io_timeout_msecs": 9,
    "use_poll_mode": true, "poll_mode_max_size_kb": 16, "prefer_iouring": true,
    "use_pci_p2pdma": true, "posix_pool_slab_size_kb": [64, 2048], "posix_pool_slab_count": [8, 4]
  },
  "miscellaneous": { "api_check_aggressive": true }
})";

TEST_F(ConfigFile, CommentsParseAndEachMappedKeyTakesEffect) {
  in_child(file(kMapped), [](Verdict& v, const auto& log) {
    v.eq(size_param(CUFILE_PARAM_EXECUTION_MAX_IO_QUEUE_DEPTH), 48U, "max_io_queue_depth");
    v.eq(size_param(CUFILE_PARAM_EXECUTION_MAX_IO_THREADS), 3U, "max_io_threads");
    v.eq(size_param(CUFILE_PARAM_EXECUTION_MIN_IO_THRESHOLD_SIZE_KB), 1024U,
         "min_io_threshold_size_kb");
    v.eq(size_param(CUFILE_PARAM_EXECUTION_MAX_REQUEST_PARALLELISM), 2U, "max_request_parallelism");
    v.eq(size_param(CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB), 2048U, "max_direct_io_size_kb");
    v.eq(size_param(CUFILE_PARAM_PROPERTIES_PER_BUFFER_CACHE_SIZE_KB), 512U,
         "per_buffer_cache_size_kb");
    v.eq(size_param(CUFILE_PARAM_PROPERTIES_MAX_DEVICE_CACHE_SIZE_KB), 4096U,
         "max_device_cache_size_kb");
    v.eq(size_param(CUFILE_PARAM_PROFILE_STATS), 2U, "cufile_stats");
    v.eq(bool_param(CUFILE_PARAM_EXECUTION_PARALLEL_IO), 0, "parallel_io");
    v.eq(bool_param(CUFILE_PARAM_PREFER_IO_URING), 1, "prefer_iouring");
    v.eq(bool_param(CUFILE_PARAM_USE_PCIP2PDMA), 1, "use_pci_p2pdma");
    v.eq(bool_param(CUFILE_PARAM_FS_MISC_API_CHECK_AGGRESSIVE), 1, "api_check_aggressive");
    v.eq(bool_param(CUFILE_PARAM_PROFILE_NVTX), 1, "nvtx");
    v.eq(string_param(CUFILE_PARAM_LOGGING_LEVEL), "DEBUG", "logging.level");
    v.eq(string_param(CUFILE_PARAM_LOG_DIR), "/var/log/app", "logging.dir");
    size_t sizes[8] = {}, counts[8] = {};
    v.is(ok(cuFileGetParameterPosixPoolSlabArray(sizes, counts, 8)), "posix slab getter");
    v.is(sizes[0] == 64 && sizes[1] == 2048 && counts[0] == 8 && counts[1] == 4, "posix slabs");
    CUfileDrvProps_t p{};
    v.is(ok(cuFileDriverGetProperties(&p)), "cuFileDriverGetProperties");
    v.eq(p.max_batch_io_size, 32U, "props.max_batch_io_size");
    v.eq(p.max_batch_io_timeout_msecs, 9U, "props.max_batch_io_timeout_msecs");
    v.eq(p.max_device_pinned_mem_size, 1048576U, "props.max_device_pinned_mem_size");
    v.eq(p.nvfs.max_direct_io_size, 2048U, "props.max_direct_io_size");
    v.eq(p.per_buffer_cache_size, 512U, "props.per_buffer_cache_size");
    v.eq(p.max_device_cache_size, 4096U, "props.max_device_cache_size");
    v.eq(p.nvfs.poll_thresh_size, 16U, "props.poll_thresh_size");
    v.is((p.nvfs.dcontrolflags & (1U << CU_FILE_USE_POLL_MODE)) != 0, "poll mode flag");
    v.is((p.nvfs.dcontrolflags & (1U << CU_FILE_ALLOW_COMPAT_MODE)) != 0, "compat allowed flag");
    CUfileStatsLevel2_t l2{};
    CUfileStatsLevel3_t l3{};
    v.is(ok(cuFileGetStatsL2(&l2)), "stats level 2 on");
    v.eq(cuFileGetStatsL3(&l3).err, CU_FILE_INVALID_VALUE, "stats level 3 off");
    v.eq(count_of(log(), "sluice_cufile: warn:") + count_of(log(), "sluice_cufile: error:"), 0U,
         "no warning or error for a file of known keys");
    v.is(ok(cuFileDriverClose()), "close");
  });
}

// NVIDIA's current default file sizes the GPU bounce buffers with slabs: both arrays reach
// cuFileGetParameterGpuBounceBufferSlabArray and the properties; one array alone takes the
// other's default, and arrays of different lengths are refused.
TEST_F(ConfigFile, GpuBounceBufferSlabsTakeEffect) {
  in_child(file(R"({"properties": {"gpu_bounce_buffer_slab_config":
                     {"slab_size_kb": [1024, 4096], "slab_count": [4, 2]}}})"),
           [](Verdict& v, const auto& log) {
             size_t sizes[8] = {}, counts[8] = {};
             v.is(ok(cuFileGetParameterGpuBounceBufferSlabArray(sizes, counts, 8)), "getter");
             v.is(sizes[0] == 1024 && sizes[1] == 4096 && counts[0] == 4 && counts[1] == 2,
                  "slabs");
             CUfileDrvProps_t p{};
             v.is(ok(cuFileDriverGetProperties(&p)), "properties");
             v.eq(p.per_buffer_cache_size, 4096U, "the largest slab");
             v.eq(p.max_device_cache_size, 12288U, "the slabs' total");
             v.eq(count_of(log(), "sluice_cufile: error:"), 0U, "no error");
           });
}

TEST_F(ConfigFile, GpuSlabArraysOfDifferentLengthsAreRefused) {
  in_child(file(R"({"properties": {"gpu_bounce_buffer_slab_config":
                     {"slab_size_kb": [1024, 4096], "slab_count": [4]}}})"),
           [](Verdict& v, const auto& log) {
             v.eq(size_param(CUFILE_PARAM_PROPERTIES_PER_BUFFER_CACHE_SIZE_KB), 4096U,
                  "bounce_buffer_size stays Sluice's default");
             v.is(log().find("2 sizes but 1 counts") != std::string::npos, "logged");
           });
}

// What DeepSpeed's GDS handle writes as local_cufile.json and points CUFILE_ENV_PATH_JSON at.
constexpr const char* kDeepSpeed =
    R"({"execution": {"max_io_queue_depth": 128, "max_request_parallelism": 8, "max_io_threads": 8, )"
    R"("parallel_io": true, "min_io_threshold_size_kb": 4096}})";

TEST_F(ConfigFile, DeepSpeedLocalCufileJsonTakesEffect) {
  in_child(file(kDeepSpeed, "local_cufile.json"), [](Verdict& v, const auto&) {
    v.eq(size_param(CUFILE_PARAM_EXECUTION_MAX_IO_QUEUE_DEPTH), 128U, "max_io_queue_depth");
    v.eq(size_param(CUFILE_PARAM_EXECUTION_MAX_IO_THREADS), 8U, "max_io_threads");
    v.eq(size_param(CUFILE_PARAM_EXECUTION_MAX_REQUEST_PARALLELISM), 8U, "max_request_parallelism");
    v.eq(size_param(CUFILE_PARAM_EXECUTION_MIN_IO_THRESHOLD_SIZE_KB), 4096U,
         "min_io_threshold_size_kb");
    v.eq(bool_param(CUFILE_PARAM_EXECUTION_PARALLEL_IO), 1, "parallel_io");
  });
}

std::string run_check_json(const std::string& env_path) {
  const std::string cmd =
      "CUFILE_ENV_PATH_JSON='" + env_path + "' " SLUICE_CLI_PATH " check --json";
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  for (std::size_t n = 0; p != nullptr && (n = std::fread(buf, 1, sizeof buf, p)) > 0;)
    out.append(buf, n);
  if (p != nullptr) ::pclose(p);
  return out;
}

TEST_F(ConfigFile, SluiceCheckShowsDeepSpeedKeys) {
  const std::string path = file(kDeepSpeed, "local_cufile.json")[0].second;
  const nlohmann::json j = nlohmann::json::parse(run_check_json(path));
  const nlohmann::json& c = j.at("cufile_json");
  EXPECT_EQ(c.at("path"), path);
  EXPECT_EQ(c.at("lookup"), "CUFILE_ENV_PATH_JSON");
  EXPECT_EQ(c.at("read"), true);
  const nlohmann::json& k = c.at("keys");
  EXPECT_EQ(k.at("execution.max_io_queue_depth").at("effect"), "sluice_setting");
  EXPECT_EQ(k.at("execution.max_io_queue_depth").at("value"), "128");
  EXPECT_NE(k.at("execution.max_io_queue_depth")
                .at("detail")
                .get<std::string>()
                .find("queue_depth = 128"),
            std::string::npos);
  EXPECT_NE(k.at("execution.max_io_threads").at("detail").get<std::string>().find("threads = 8"),
            std::string::npos);
  EXPECT_EQ(k.at("execution.parallel_io").at("effect"), "kept");
  EXPECT_EQ(k.at("execution.min_io_threshold_size_kb").at("effect"), "kept");
  EXPECT_EQ(k.at("execution.max_request_parallelism").at("effect"), "kept");
  EXPECT_EQ(k.size(), 5U);
}

// API > environment > file, whichever comes first: the first call applies file and environment
// before its own effect.
constexpr const char* kPrecedence =
    R"({"logging": {"level": "WARN"}, "properties": {"allow_compat_mode": false, "io_batchsize": 16},
        "execution": {"max_io_queue_depth": 64, "max_io_threads": 2}})";

TEST_F(ConfigFile, EnvironmentBeatsFileAndSluiceVariablesBeatBoth) {
  Env env = file(kPrecedence);
  env.push_back({"CUFILE_LOGGING_LEVEL", "INFO"});
  env.push_back({"CUFILE_ALLOW_COMPAT_MODE", "true"});
  env.push_back({"SLUICE_QUEUE_DEPTH", "8"});
  in_child(env, [](Verdict& v, const auto&) {
    v.eq(string_param(CUFILE_PARAM_LOGGING_LEVEL), "INFO", "env beats file: logging level");
    v.eq(bool_param(CUFILE_PARAM_PROPERTIES_ALLOW_COMPAT_MODE), 1,
         "env beats file: allow_compat_mode");
    v.eq(size_param(CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE), 16U, "the file's own keys stay");
    v.eq(size_param(CUFILE_PARAM_EXECUTION_MAX_IO_QUEUE_DEPTH), 8U,
         "SLUICE_QUEUE_DEPTH beats the file");
    v.eq(size_param(CUFILE_PARAM_EXECUTION_MAX_IO_THREADS), 2U, "max_io_threads from the file");
    v.is(ok(cuFileSetParameterSizeT(CUFILE_PARAM_EXECUTION_MAX_IO_QUEUE_DEPTH, 32)),
         "set queue depth");
    v.eq(size_param(CUFILE_PARAM_EXECUTION_MAX_IO_QUEUE_DEPTH), 32U,
         "the API beats SLUICE_QUEUE_DEPTH");
  });
}

TEST_F(ConfigFile, ApiBeatsEnvironmentWhenItComesAfterTheFirstCall) {
  Env env = file(kPrecedence);
  env.push_back({"CUFILE_LOGGING_LEVEL", "INFO"});
  in_child(env, [](Verdict& v, const auto&) {
    v.eq(string_param(CUFILE_PARAM_LOGGING_LEVEL), "INFO", "before the API call");
    v.eq(bool_param(CUFILE_PARAM_PROPERTIES_ALLOW_COMPAT_MODE), 0, "file's allow_compat_mode");
    v.is(ok(cuFileSetParameterString(CUFILE_PARAM_LOGGING_LEVEL, "ERROR")), "set level");
    v.is(ok(cuFileSetParameterBool(CUFILE_PARAM_PROPERTIES_ALLOW_COMPAT_MODE, true)), "set compat");
    v.is(ok(cuFileSetParameterSizeT(CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE, 100)), "set batch size");
    v.eq(string_param(CUFILE_PARAM_LOGGING_LEVEL), "ERROR", "the API beats the environment");
    v.eq(bool_param(CUFILE_PARAM_PROPERTIES_ALLOW_COMPAT_MODE), 1, "the API beats the file");
    v.eq(size_param(CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE), 100U, "the API beats the file (size)");
  });
}

TEST_F(ConfigFile, ApiBeatsEnvironmentWhenItIsTheFirstCall) {
  Env env = file(kPrecedence);
  env.push_back({"CUFILE_LOGGING_LEVEL", "INFO"});
  in_child(env, [](Verdict& v, const auto&) {
    // The very first calls: file and environment are applied inside them, before their effect.
    v.is(ok(cuFileSetParameterString(CUFILE_PARAM_LOGGING_LEVEL, "ERROR")), "set level");
    v.is(ok(cuFileSetParameterSizeT(CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE, 100)), "set batch size");
    v.eq(string_param(CUFILE_PARAM_LOGGING_LEVEL), "ERROR", "the API beats the environment");
    v.eq(size_param(CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE), 100U, "the API beats the file");
    v.eq(size_param(CUFILE_PARAM_EXECUTION_MAX_IO_THREADS), 2U, "the rest of the file applies");
    v.eq(bool_param(CUFILE_PARAM_PROPERTIES_ALLOW_COMPAT_MODE), 0, "the file's allow_compat_mode");
  });
}

// ------------------------------------------------------------------ compat mode

// cuFileRead of the whole file into a fresh buffer (device memory where the mode has it, else
// host memory): its result, and the bytes checked against `want` on success.
ssize_t read_all(const std::string& path, bool device, const std::vector<unsigned char>& want,
                 Verdict& v) {
  const int fd = open_file(path, O_RDONLY);
  CUfileHandle_t fh = nullptr;
  v.is(ok(register_fd(&fh, fd)), "cuFileHandleRegister");
  Buffer buf(want.size(), device);
  const ssize_t n = cuFileRead(fh, buf.get(), want.size(), 0, 0);
  if (n == static_cast<ssize_t>(want.size())) v.is(buf.bytes(0, want.size()) == want, "bytes read");
  cuFileHandleDeregister(fh);
  ::close(fd);
  return n;
}

class Compat : public ConfigFile {
 protected:
  void SetUp() override {
    data_ = random_bytes(1 << 20, 11);
    path_ = dir_.file("data.bin");
    write_file(path_, data_);
  }
  // Device memory cannot take the direct path: no libcufile (fake_cuda), or this library itself.
  static bool direct_impossible() { return mode() == "fake_cuda" || mode() == "self"; }

  std::string path_;
  std::vector<unsigned char> data_;
};

TEST_F(Compat, DisallowedFailsWhereTheDirectPathCannotServe) {
  const std::string path = path_;
  const std::vector<unsigned char> data = data_;
  in_child(file(R"({"properties": {"allow_compat_mode": false}})"), [&](Verdict& v, const auto&) {
    v.eq(bool_param(CUFILE_PARAM_PROPERTIES_ALLOW_COMPAT_MODE), 0, "allow_compat_mode");
    CUfileDrvProps_t p{};
    v.is(ok(cuFileDriverGetProperties(&p)), "properties");
    v.is((p.nvfs.dcontrolflags & (1U << CU_FILE_ALLOW_COMPAT_MODE)) == 0, "compat flag off");
    const ssize_t want = static_cast<ssize_t>(data.size());
    v.eq(read_all(path, false, data, v), want, "host memory takes the host path regardless");
    if (device_memory()) {
      v.eq(read_all(path, true, data, v), direct_impossible() ? -CU_FILE_IO_NOT_SUPPORTED : want,
           "device memory without compat mode");
    }
  });
}

TEST_F(Compat, DisallowedByTheEnvironmentToo) {
  if (!direct_impossible()) GTEST_SKIP() << "needs device memory the direct path cannot serve";
  const std::string path = path_;
  const std::vector<unsigned char> data = data_;
  in_child((Env{{"CUFILE_ALLOW_COMPAT_MODE", "false"}}), [&](Verdict& v, const auto&) {
    v.eq(read_all(path, true, data, v), -CU_FILE_IO_NOT_SUPPORTED, "device memory");
  });
}

TEST_F(Compat, AllowedByDefaultTheSameReadsSucceed) {
  const std::string path = path_;
  const std::vector<unsigned char> data = data_;
  in_child(file(R"({"properties": {"allow_compat_mode": true}})"), [&](Verdict& v, const auto&) {
    const ssize_t want = static_cast<ssize_t>(data.size());
    v.eq(read_all(path, false, data, v), want, "host memory");
    if (device_memory()) v.eq(read_all(path, true, data, v), want, "device memory");
  });
}

TEST_F(Compat, ForcedServesHostAndDeviceMemory) {
  const std::string path = path_;
  const std::vector<unsigned char> data = data_;
  in_child(file(R"({"properties": {"force_compat_mode": true}})"), [&](Verdict& v, const auto&) {
    v.eq(bool_param(CUFILE_PARAM_FORCE_COMPAT_MODE), 1, "force_compat_mode");
    const ssize_t want = static_cast<ssize_t>(data.size());
    v.eq(read_all(path, false, data, v), want, "host memory");
    if (device_memory()) v.eq(read_all(path, true, data, v), want, "device memory");
  });
}

// ------------------------------------------------------------------ bad files

// The defaults (Sluice's queue_depth 16) stay and the driver opens.
void expect_defaults(Verdict& v) {
  v.eq(size_param(CUFILE_PARAM_EXECUTION_MAX_IO_QUEUE_DEPTH), 16U, "queue depth stays the default");
  v.is(ok(cuFileDriverOpen()), "cuFileDriverOpen");
  v.is(ok(cuFileDriverClose()), "cuFileDriverClose");
}

TEST_F(ConfigFile, SyntaxErrorIsLoggedWithFileAndLine) {
  const Env env =
      file("{\n  \"execution\": {\n    \"max_io_queue_depth\": 32,\n  }\n}\n", "bad.json");
  const std::string path = env[0].second;
  in_child(env, [&](Verdict& v, const auto& log) {
    expect_defaults(v);
    const std::string l = log();
    v.is(l.find("error: cufile.json " + path) != std::string::npos, "an error naming the file");
    v.is(l.find("line 4") != std::string::npos, "the line of the error");
    v.eq(count_of(l, "not valid JSON"), 1U, "logged once");
  });
}

TEST_F(ConfigFile, NotAnObjectIsLogged) {
  in_child(file("[1, 2]"), [](Verdict& v, const auto& log) {
    expect_defaults(v);
    v.is(log().find("expected a JSON object") != std::string::npos, "logged");
  });
}

TEST_F(ConfigFile, WrongTypeIsLoggedAndOtherKeysApply) {
  const char* text =
      R"({"execution": {"max_io_queue_depth": "32", "max_io_threads": 2}, "properties": {"use_poll_mode": 1}})";
  in_child(file(text), [](Verdict& v, const auto& log) {
    expect_defaults(v);
    v.eq(size_param(CUFILE_PARAM_EXECUTION_MAX_IO_THREADS), 2U, "the well-typed key applies");
    v.eq(bool_param(CUFILE_PARAM_PROPERTIES_USE_POLL_MODE), 0, "use_poll_mode stays false");
    const std::string l = log();
    v.is(l.find("execution.max_io_queue_depth = \"32\": expected a non-negative integer") !=
             std::string::npos,
         "the string for a count is logged");
    v.is(l.find("properties.use_poll_mode = 1: expected true or false") != std::string::npos,
         "the number for a boolean is logged");
  });
}

TEST_F(ConfigFile, ValueOutsideTheLimitsIsRefusedAndLogged) {
  in_child(file(R"({"execution": {"max_io_queue_depth": 100000}})"), [](Verdict& v,
                                                                        const auto& log) {
    expect_defaults(v);
    const std::string code = "(" + std::to_string(CU_FILE_DRIVER_UNSUPPORTED_LIMIT) + ")";
    v.is(log().find("execution.max_io_queue_depth = 100000: refused with ") != std::string::npos &&
             log().find(code) != std::string::npos,
         "the refusal is logged with its code");
  });
}

TEST_F(ConfigFile, MissingNamedFileIsLoggedAndDefaultsStay) {
  const std::string path = dir_.file("no-such.json");
  in_child((Env{{"CUFILE_ENV_PATH_JSON", path}}), [&](Verdict& v, const auto& log) {
    expect_defaults(v);
    v.eq(count_of(log(), "error: cufile.json " + path + " (CUFILE_ENV_PATH_JSON): not found"), 1U,
         "one error naming the file");
  });
}

TEST_F(ConfigFile, NoDefaultFileIsSilent) {
  if (::access("/etc/cufile.json", F_OK) == 0) GTEST_SKIP() << "/etc/cufile.json exists here";
  in_child(Env{}, [](Verdict& v, const auto& log) {
    expect_defaults(v);
    v.eq(log(), "", "nothing logged");
  });
}

TEST_F(ConfigFile, UnknownKeysWarnOnceWithTheirNames) {
  Env env = file(R"({"properties": {"no_such_key": 1, "io_batchsize": 8},
                     "fs": {"generic": {"posix_unaligned_writes": true}}})");
  env.push_back({"CUFILE_NO_SUCH_VARIABLE", "1"});
  in_child(env, [](Verdict& v, const auto& log) {
    for (int i = 0; i < 3; ++i) {
      v.is(ok(cuFileDriverOpen()), "open");
      CUfileDrvProps_t p{};
      v.is(ok(cuFileDriverGetProperties(&p)), "properties");
      v.is(ok(cuFileDriverClose()), "close");
    }
    v.eq(size_param(CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE), 8U, "the known key applies");
    const std::string l = log();
    v.eq(count_of(l, "properties.no_such_key"), 1U, "the unknown key, once");
    v.is(l.find("warn: cufile.json") != std::string::npos, "as a warning naming the file");
    v.eq(count_of(l, "CUFILE_NO_SUCH_VARIABLE"), 1U, "the unknown variable, once");
    v.eq(count_of(l, "fs.generic.posix_unaligned_writes"), 0U,
         "a documented key with no effect is no warning (NVIDIA's stock file has twenty)");
  });
}

}  // namespace
}  // namespace cufile_test
