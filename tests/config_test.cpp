// Configuration layering: defaults < SLUICE_CONFIG file < SLUICE_* environment < API.
#include "sluice/config.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <thread>

#include "sluice/error.hpp"
#include "sluice/units.hpp"
#include "support/test_util.hpp"

namespace sluice {
namespace {

using test::ScopedEnv;

const char* const foundation_settings[] = {"engine",          "threads",   "queue_depth", "io_size",
                                           "staging_buffers", "direct_io", "log_level"};

const char* const all_env[] = {"SLUICE_CONFIG",     "SLUICE_ENGINE",          "SLUICE_THREADS",
                               "SLUICE_QUEUE_DEPTH", "SLUICE_IO_SIZE",         "SLUICE_STAGING_BUFFERS",
                               "SLUICE_DIRECT_IO",   "SLUICE_LOG"};

// Every test starts from an environment without SLUICE_* and gets it back afterwards.
class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : all_env) cleared_.push_back(std::make_unique<ScopedEnv>(name, std::nullopt));
    // Any other SLUICE_* setting a later layer added.
    for (const auto& e : Config().entries()) cleared_.push_back(std::make_unique<ScopedEnv>(e.env, std::nullopt));
    dir_ = std::make_unique<test::TempDir>("/tmp");
  }

  std::string write_json(const std::string& text) {
    const std::string path = dir_->file("config.json");
    std::ofstream(path) << text;
    return path;
  }

  // The message of the Error `fn` throws; fails the test when it throws nothing.
  template <typename Fn>
  std::string error_of(Fn fn, ErrorDomain domain = ErrorDomain::usage) {
    try {
      fn();
    } catch (const Error& e) {
      EXPECT_EQ(e.domain(), domain) << e.what();
      return e.what();
    }
    ADD_FAILURE() << "no Error thrown";
    return {};
  }

  std::vector<std::unique_ptr<ScopedEnv>> cleared_;
  std::unique_ptr<test::TempDir> dir_;
};

TEST_F(ConfigTest, Defaults) {
  const Config c;
  EXPECT_EQ(c.engine, EngineSetting::automatic);
  EXPECT_EQ(c.threads, 0U);
  EXPECT_EQ(c.queue_depth, 16U);
  EXPECT_EQ(c.io_size, MiB);
  EXPECT_EQ(c.staging_buffers, 64U);
  EXPECT_TRUE(c.direct_io);
  EXPECT_EQ(c.log_level, LogLevel::warn);
  EXPECT_EQ(c.cache_policy, CachePolicy::automatic);
  EXPECT_EQ(c.device, DeviceSetting{});
  EXPECT_EQ(c.path, PathSetting::automatic);
  for (const auto& e : c.entries()) EXPECT_EQ(e.source, ConfigSource::default_value) << e.name;
  EXPECT_EQ(c.effective_threads(), std::clamp(std::thread::hardware_concurrency(), 1U, 4U));
}

TEST_F(ConfigTest, LoadWithNothingSetGivesDefaults) {
  const Config c = Config::load();
  const Config d;
  EXPECT_EQ(c.engine, d.engine);
  EXPECT_EQ(c.queue_depth, d.queue_depth);
  EXPECT_EQ(c.io_size, d.io_size);
  for (const auto& e : c.entries()) EXPECT_EQ(e.source, ConfigSource::default_value) << e.name;
}

TEST_F(ConfigTest, FileLayer) {
  ScopedEnv env("SLUICE_CONFIG", write_json(R"({"queue_depth": 8, "io_size": "64K",
      "direct_io": false, "engine": "psync", "threads": 3, "staging_buffers": "16",
      "log_level": "debug"})"));
  const Config c = Config::load();
  EXPECT_EQ(c.queue_depth, 8U);
  EXPECT_EQ(c.io_size, 64 * KiB);
  EXPECT_FALSE(c.direct_io);
  EXPECT_EQ(c.engine, EngineSetting::psync);
  EXPECT_EQ(c.threads, 3U);
  EXPECT_EQ(c.staging_buffers, 16U);
  EXPECT_EQ(c.log_level, LogLevel::debug);
  for (const char* name : foundation_settings) EXPECT_EQ(c.source(name), ConfigSource::file) << name;
}

TEST_F(ConfigTest, EnvironmentOverridesFileAndApiOverridesEnvironment) {
  ScopedEnv file("SLUICE_CONFIG", write_json(R"({"queue_depth": 8, "io_size": "64K", "engine": "psync"})"));
  ScopedEnv qd("SLUICE_QUEUE_DEPTH", "4");
  ScopedEnv log("SLUICE_LOG", "info");
  ScopedEnv empty("SLUICE_ENGINE", "");  // empty means unset
  Config c = Config::load();
  EXPECT_EQ(c.queue_depth, 4U);
  EXPECT_EQ(c.source("queue_depth"), ConfigSource::env);
  EXPECT_EQ(c.io_size, 64 * KiB);
  EXPECT_EQ(c.source("io_size"), ConfigSource::file);
  EXPECT_EQ(c.engine, EngineSetting::psync);
  EXPECT_EQ(c.source("engine"), ConfigSource::file);
  EXPECT_EQ(c.log_level, LogLevel::info);
  EXPECT_EQ(c.source("log_level"), ConfigSource::env);
  EXPECT_EQ(c.source("threads"), ConfigSource::default_value);

  c.set("queue_depth", "2");
  EXPECT_EQ(c.queue_depth, 2U);
  EXPECT_EQ(c.source("queue_depth"), ConfigSource::api);
}

TEST_F(ConfigTest, EveryEnvironmentVariable) {
  ScopedEnv a("SLUICE_ENGINE", "psync");
  ScopedEnv b("SLUICE_THREADS", "2");
  ScopedEnv c("SLUICE_QUEUE_DEPTH", "3");
  ScopedEnv d("SLUICE_IO_SIZE", "128K");
  ScopedEnv e("SLUICE_STAGING_BUFFERS", "5");
  ScopedEnv f("SLUICE_DIRECT_IO", "off");
  ScopedEnv g("SLUICE_LOG", "error");
  const Config cfg = Config::load();
  EXPECT_EQ(cfg.engine, EngineSetting::psync);
  EXPECT_EQ(cfg.threads, 2U);
  EXPECT_EQ(cfg.queue_depth, 3U);
  EXPECT_EQ(cfg.io_size, 128 * KiB);
  EXPECT_EQ(cfg.staging_buffers, 5U);
  EXPECT_FALSE(cfg.direct_io);
  EXPECT_EQ(cfg.log_level, LogLevel::error);
  for (const char* name : foundation_settings) EXPECT_EQ(cfg.source(name), ConfigSource::env) << name;
}

TEST_F(ConfigTest, Entries) {
  ScopedEnv qd("SLUICE_QUEUE_DEPTH", "4");
  Config c = Config::load();
  c.set("io_size", "256K");
  c.set("threads", "3");
  const auto entries = c.entries();
  std::vector<std::string> names;
  for (const auto& e : entries) {
    names.push_back(e.name);
    EXPECT_FALSE(e.help.empty()) << e.name;
    EXPECT_EQ(e.env.rfind("SLUICE_", 0), 0U) << e.env;
  }
  // The foundation's settings come first, in this order; later layers add theirs after them.
  ASSERT_GE(names.size(), std::size(foundation_settings));
  for (std::size_t i = 0; i < std::size(foundation_settings); ++i) EXPECT_EQ(names[i], foundation_settings[i]);
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size()) << "duplicate names";
  auto find = [&](std::string_view n) {
    return *std::find_if(entries.begin(), entries.end(), [&](const auto& e) { return e.name == n; });
  };
  EXPECT_EQ(find("queue_depth").value, "4");
  EXPECT_EQ(find("queue_depth").source, ConfigSource::env);
  EXPECT_EQ(find("queue_depth").env, "SLUICE_QUEUE_DEPTH");
  EXPECT_EQ(find("io_size").value, "256 KiB");
  EXPECT_EQ(find("io_size").source, ConfigSource::api);
  EXPECT_EQ(find("threads").value, "3");
  EXPECT_EQ(find("direct_io").value, "true");
  EXPECT_EQ(find("direct_io").source, ConfigSource::default_value);
  EXPECT_EQ(find("log_level").env, "SLUICE_LOG");
  // threads 0 shows what it resolves to.
  c.set("threads", "0");
  EXPECT_EQ(c.entries()[1].value, std::to_string(c.effective_threads()));
}

TEST_F(ConfigTest, CachePolicyInEveryLayer) {
  {
    ScopedEnv file("SLUICE_CONFIG", write_json(R"({"cache_policy": "use"})"));
    const Config c = Config::load();
    EXPECT_EQ(c.cache_policy, CachePolicy::use);
    EXPECT_EQ(c.source("cache_policy"), ConfigSource::file);
    ScopedEnv env("SLUICE_CACHE_POLICY", "bypass");
    const Config e = Config::load();
    EXPECT_EQ(e.cache_policy, CachePolicy::bypass);
    EXPECT_EQ(e.source("cache_policy"), ConfigSource::env);
  }
  Config c;
  for (const char* v : {"bypass", "use", "auto"}) {
    c.set("cache_policy", v);
    EXPECT_EQ(to_string(c.cache_policy), v);
  }
  const auto entries = c.entries();
  const auto it = std::find_if(entries.begin(), entries.end(), [](const auto& e) { return e.name == "cache_policy"; });
  ASSERT_NE(it, entries.end());
  EXPECT_EQ(it->env, "SLUICE_CACHE_POLICY");
  EXPECT_EQ(it->value, "auto");
  const std::string w = error_of([&] { c.set("cache_policy", "always"); });
  EXPECT_NE(w.find("cache_policy=always: cache_policy must be one of auto, bypass, use"), std::string::npos) << w;
  EXPECT_EQ(c.cache_policy, CachePolicy::automatic);
}

TEST_F(ConfigTest, SourceNames) {
  EXPECT_EQ(to_string(ConfigSource::default_value), "default");
  EXPECT_EQ(to_string(ConfigSource::file), "file");
  EXPECT_EQ(to_string(ConfigSource::env), "env");
  EXPECT_EQ(to_string(ConfigSource::api), "api");
}

TEST_F(ConfigTest, AcceptedSpellings) {
  Config c;
  for (const char* t : {"1", "true", "on", "yes"}) {
    c.set("direct_io", "false");
    c.set("direct_io", t);
    EXPECT_TRUE(c.direct_io) << t;
  }
  for (const char* f : {"0", "false", "off", "no"}) {
    c.set("direct_io", "true");
    c.set("direct_io", f);
    EXPECT_FALSE(c.direct_io) << f;
  }
  c.set("io_size", "4K");
  EXPECT_EQ(c.io_size, 4 * KiB);
  c.set("io_size", "64M");
  EXPECT_EQ(c.io_size, 64 * MiB);
  c.set("io_size", "12288");
  EXPECT_EQ(c.io_size, 12288U);
  c.set("queue_depth", "4096");
  EXPECT_EQ(c.queue_depth, 4096U);
  c.set("threads", "256");
  EXPECT_EQ(c.threads, 256U);
}

TEST_F(ConfigTest, UnknownSettingIsAClearError) {
  Config c;
  const std::string w = error_of([&] { c.set("queue_dpeth", "4"); });
  EXPECT_NE(w.find("unknown setting 'queue_dpeth'"), std::string::npos) << w;
  EXPECT_NE(error_of([&] { (void)c.source("nope"); }).find("unknown setting 'nope'"), std::string::npos);
}

TEST_F(ConfigTest, BadValuesAreClearErrorsAndChangeNothing) {
  struct Bad {
    const char* name;
    const char* value;
    const char* expected;  // part of the message saying what would be accepted
  };
  const Bad cases[] = {
      {"queue_depth", "0", "[1, 4096]"},      {"queue_depth", "4097", "[1, 4096]"},
      {"queue_depth", "abc", "[1, 4096]"},    {"queue_depth", "-1", "[1, 4096]"},
      {"queue_depth", "8 ", "[1, 4096]"},     {"queue_depth", "", "[1, 4096]"},
      {"queue_depth", "99999999999", "[1, 4096]"},
      {"threads", "257", "[0, 256]"},         {"staging_buffers", "0", "[1, 65536]"},
      {"io_size", "1000", "multiple of 4K"},  {"io_size", "2K", "4K to 64M"},
      {"io_size", "128M", "4K to 64M"},       {"io_size", "1Q", "4K to 64M"},
      {"io_size", "0", "4K to 64M"},          {"direct_io", "maybe", "true or false"},
      {"engine", "spdk", "one of auto, uring, psync"},
      {"log_level", "verbose", "one of error, warn, info, debug"},
      {"cache_policy", "always", "one of auto, bypass, use"},
      {"path", "sideways", "one of auto, direct, bounce, posix, host"},
      {"path", "AUTO", "one of auto, direct, bounce, posix, host"},
      {"device", "tpu", "one of auto, sim, cuda, cuda:N"},
      {"device", "cuda:", "one of auto, sim, cuda, cuda:N"},
      {"device", "cuda:1024", "one of auto, sim, cuda, cuda:N"},
      {"device", "sim:0", "one of auto, sim, cuda, cuda:N"},
  };
  for (const auto& b : cases) {
    Config c;
    const Config before;
    const std::string w = error_of([&] { c.set(b.name, b.value); });
    // "config: queue_depth=0: queue_depth must be an integer in [1, 4096]"
    EXPECT_NE(w.find(std::string("config: ") + b.name + "=" + b.value + ": " + b.name + " must be "), std::string::npos) << w;
    EXPECT_NE(w.find(b.expected), std::string::npos) << w;
    EXPECT_EQ(c.source(b.name), ConfigSource::default_value) << b.name;
    EXPECT_EQ(c.queue_depth, before.queue_depth);
    EXPECT_EQ(c.io_size, before.io_size);
    EXPECT_EQ(c.engine, before.engine);
    EXPECT_EQ(c.path, before.path);
    EXPECT_EQ(c.device, before.device);
  }
}

TEST_F(ConfigTest, BadEnvironmentValueNamesTheVariable) {
  ScopedEnv qd("SLUICE_QUEUE_DEPTH", "zero");
  const std::string w = error_of([] { (void)Config::load(); });
  EXPECT_NE(w.find("config: SLUICE_QUEUE_DEPTH=zero: queue_depth must be an integer in [1, 4096]"), std::string::npos) << w;
}

TEST_F(ConfigTest, BadFileContentsNameTheFile) {
  struct Bad {
    const char* json;
    const char* says;
  };
  const Bad cases[] = {
      {R"({"bogus": 1})", "unknown setting 'bogus'"},
      {R"({"queue_depth": 0})", "queue_depth=0: queue_depth must be"},
      {R"({"queue_depth": 1.5})", "queue_depth=1.5: queue_depth must be"},
      {R"({"queue_depth": null})", "queue_depth=null: queue_depth must be"},
      {R"({"queue_depth": [4]})", "queue_depth=[4]: queue_depth must be"},
      {R"({"direct_io": "sometimes"})", "direct_io=sometimes: direct_io must be true or false"},
      {R"({"engine": "spdk"})", "engine=spdk: engine must be one of auto, uring, psync"},
      {R"({"path": 3})", "path=3: path must be one of"},
      {R"({"device": "gpu"})", "device=gpu: device must be one of"},
      {R"({"cache_policy": true})", "cache_policy=true: cache_policy must be one of"},
      {R"({"log_level": "loud"})", "log_level=loud: log_level must be one of"},
      {R"([1, 2])", "expected a JSON object"},
      {R"({"queue_depth": 4)", "not valid JSON"},
      {"", "not valid JSON"},
  };
  for (const auto& b : cases) {
    const std::string path = write_json(b.json);
    ScopedEnv env("SLUICE_CONFIG", path);
    const std::string w = error_of([] { (void)Config::load(); });
    EXPECT_NE(w.find(path), std::string::npos) << b.json << " -> " << w;
    EXPECT_NE(w.find(b.says), std::string::npos) << b.json << " -> " << w;
  }
}

TEST_F(ConfigTest, MissingFileIsAnOsErrorNamingIt) {
  const std::string path = dir_->file("does-not-exist.json");
  ScopedEnv env("SLUICE_CONFIG", path);
  try {
    (void)Config::load();
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.domain(), ErrorDomain::os);
    EXPECT_EQ(e.code(), ENOENT);
    EXPECT_EQ(e.path(), path);
    EXPECT_NE(std::string(e.what()).find("SLUICE_CONFIG"), std::string::npos) << e.what();
  }
}

// Every spelling of every typed setting parses to its enum, prints back the same (the text
// reports and `sluice check` show), and goes through Config::set.
TEST_F(ConfigTest, TypedSettingsRoundTrip) {
  auto entry_value = [](const Config& c, std::string_view name) {
    for (const auto& e : c.entries()) {
      if (e.name == name) return e.value;
    }
    return std::string("missing");
  };
  Config c;
  for (auto v : {EngineSetting::automatic, EngineSetting::uring, EngineSetting::psync}) {
    EXPECT_EQ(parse_engine_setting(to_string(v)), v);
    c.set("engine", to_string(v));
    EXPECT_EQ(c.engine, v);
    EXPECT_EQ(entry_value(c, "engine"), to_string(v));
  }
  for (auto v : {PathSetting::automatic, PathSetting::host, PathSetting::bounce, PathSetting::posix, PathSetting::direct}) {
    EXPECT_EQ(parse_path_setting(to_string(v)), v);
    c.set("path", to_string(v));
    EXPECT_EQ(c.path, v);
    EXPECT_EQ(entry_value(c, "path"), to_string(v));
    // Every path but auto names the same Path the transfer API uses.
    EXPECT_EQ(forced_path(v).has_value(), v != PathSetting::automatic);
    if (auto p = forced_path(v)) {
      EXPECT_EQ(to_string(*p), to_string(v));
    }
  }
  for (auto v : {CachePolicy::automatic, CachePolicy::bypass, CachePolicy::use}) {
    EXPECT_EQ(parse_cache_policy(to_string(v)), v);
    c.set("cache_policy", to_string(v));
    EXPECT_EQ(c.cache_policy, v);
    EXPECT_EQ(entry_value(c, "cache_policy"), to_string(v));
  }
  for (auto v : {LogLevel::error, LogLevel::warn, LogLevel::info, LogLevel::debug}) {
    EXPECT_EQ(parse_log_level(to_string(v)), v);
    c.set("log_level", to_string(v));
    EXPECT_EQ(c.log_level, v);
    EXPECT_EQ(entry_value(c, "log_level"), to_string(v));
  }
  EXPECT_LT(LogLevel::error, LogLevel::warn);  // log filters compare levels
  EXPECT_LT(LogLevel::info, LogLevel::debug);
  const std::pair<const char*, DeviceSetting> devices[] = {
      {"auto", {DeviceChoice::automatic, std::nullopt}}, {"sim", {DeviceChoice::sim, std::nullopt}},
      {"cuda", {DeviceChoice::cuda, std::nullopt}},      {"cuda:0", {DeviceChoice::cuda, 0U}},
      {"cuda:7", {DeviceChoice::cuda, 7U}},              {"cuda:1023", {DeviceChoice::cuda, 1023U}}};
  for (const auto& [text, want] : devices) {
    EXPECT_EQ(parse_device_setting(text), want) << text;
    EXPECT_EQ(to_string(want), text);
    c.set("device", text);
    EXPECT_EQ(c.device, want) << text;
    EXPECT_EQ(entry_value(c, "device"), text);
  }
  for (const char* bad : {"", "Auto", "cuda:", "cuda:x", "cuda:-1", "cuda:1024", "sim:0", "cuda: 1"}) {
    EXPECT_EQ(parse_device_setting(bad), std::nullopt) << bad;
  }
  EXPECT_EQ(parse_engine_setting("URING"), std::nullopt);
  EXPECT_EQ(parse_path_setting(""), std::nullopt);
}

// A bad value of a typed setting in the environment is a usage error (EINVAL) naming the
// variable, the value and what the setting accepts.
TEST_F(ConfigTest, BadTypedValueInEachEnvironmentVariable) {
  const std::pair<const char*, const char*> cases[] = {
      {"SLUICE_ENGINE", "config: SLUICE_ENGINE=foo: engine must be one of auto, uring, psync"},
      {"SLUICE_PATH", "config: SLUICE_PATH=foo: path must be one of auto, direct, bounce, posix, host"},
      {"SLUICE_DEVICE", "config: SLUICE_DEVICE=foo: device must be one of auto, sim, cuda, cuda:N"},
      {"SLUICE_CACHE_POLICY", "config: SLUICE_CACHE_POLICY=foo: cache_policy must be one of auto, bypass, use"},
      {"SLUICE_LOG", "config: SLUICE_LOG=foo: log_level must be one of error, warn, info, debug"},
  };
  for (const auto& [var, says] : cases) {
    ScopedEnv env(var, "foo");
    try {
      (void)Config::load();
      ADD_FAILURE() << var << ": no Error";
    } catch (const Error& e) {
      EXPECT_EQ(e.domain(), ErrorDomain::usage) << e.what();
      EXPECT_EQ(e.errno_value(), EINVAL) << e.what();
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  }
}

// The file layer's error names the file as well as the setting.
TEST_F(ConfigTest, BadTypedValueInTheFileNamesTheFile) {
  const std::string path = write_json(R"({"device": "cuda:x"})");
  ScopedEnv env("SLUICE_CONFIG", path);
  const std::string w = error_of([] { (void)Config::load(); });
  EXPECT_NE(w.find("config file '" + path + "': device=cuda:x: device must be one of"), std::string::npos) << w;
}

TEST_F(ConfigTest, TypedSettersRecordTheSource) {
  Config c;
  c.set_engine(EngineSetting::psync);
  c.set_path(PathSetting::bounce, ConfigSource::env);
  c.set_device({DeviceChoice::cuda, 2U});
  c.set_cache_policy(CachePolicy::use, ConfigSource::file);
  c.set_log_level(LogLevel::debug);
  EXPECT_EQ(c.engine, EngineSetting::psync);
  EXPECT_EQ(c.source("engine"), ConfigSource::api);
  EXPECT_EQ(c.path, PathSetting::bounce);
  EXPECT_EQ(c.source("path"), ConfigSource::env);
  EXPECT_EQ(to_string(c.device), "cuda:2");
  EXPECT_EQ(c.source("device"), ConfigSource::api);
  EXPECT_EQ(c.cache_policy, CachePolicy::use);
  EXPECT_EQ(c.source("cache_policy"), ConfigSource::file);
  EXPECT_EQ(c.log_level, LogLevel::debug);
  // An ordinal belongs to cuda only; refused, the setting stays as it was.
  const std::string w = error_of([&] { c.set_device({DeviceChoice::sim, 1U}); });
  EXPECT_NE(w.find("device must be one of"), std::string::npos) << w;
  EXPECT_EQ(to_string(c.device), "cuda:2");
}

TEST_F(ConfigTest, ProcessWideConfiguration) {
  Config c;
  c.set("queue_depth", "7");
  set_config(c);
  const auto first = config();
  EXPECT_EQ(first->queue_depth, 7U);
  EXPECT_EQ(first->source("queue_depth"), ConfigSource::api);
  EXPECT_EQ(config(), first);  // shared, not copied each call
  c.set("queue_depth", "9");
  set_config(c);
  EXPECT_EQ(config()->queue_depth, 9U);
  EXPECT_EQ(first->queue_depth, 7U);  // holders of the old one keep it
}

}  // namespace
}  // namespace sluice
