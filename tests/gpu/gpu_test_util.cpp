#include "gpu_test_util.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "fake_cufile.h"
#include "gpu/cuda_api.hpp"
#include "gpu/cuda_device.hpp"
#include "gpu/cufile_api.hpp"

namespace sluice::gpu_test {

::testing::AssertionResult contains(std::string_view text, std::string_view part) {
  if (text.find(part) != std::string_view::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << part << "'";
}

std::string mode() {
  const char* m = std::getenv("SLUICE_GPU_TEST_MODE");
  return m != nullptr ? m : "";
}

bool need_mode(std::string_view want, bool present, std::string* skip_reason) {
  const std::string m = mode();
  if (!m.empty() && m != want) {
    *skip_reason = fmt::format("written for SLUICE_GPU_TEST_MODE={}, this entry is {}", want, m);
    return false;
  }
  if (m.empty() && !present) {
    *skip_reason = fmt::format("this process is not set up for '{}' (run it through ctest)", want);
    return false;
  }
  // The entry named this situation: a process that lacks it is a broken set-up, not a skip.
  EXPECT_TRUE(present) << "SLUICE_GPU_TEST_MODE=" << want << " but the process does not match it";
  return present;
}

bool fake_cuda_loaded() {
  const auto* api = detail::cu::driver();
  if (api == nullptr || !detail::cuda_available()) return false;
  // The fake exports test hooks the real driver does not have.
  void* h = dlopen(api->library.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (h == nullptr) return false;
  const bool fake = dlsym(h, "fake_cuda_live_allocations") != nullptr;
  dlclose(h);
  return fake;
}

std::shared_ptr<Device> try_open(const std::string& spec, std::string* why) {
  if (spec.rfind("cuda", 0) == 0 && !fake_cuda_loaded()) {
    *why = "the fake libcuda is not loaded (SLUICE_LIBCUDA; run through ctest)";
    return nullptr;
  }
  try {
    return open_device(spec);
  } catch (const Error& e) {
    *why = e.what();
    return nullptr;
  }
}

DeviceMemory::DeviceMemory(std::shared_ptr<Device> dev, std::size_t bytes)
    : dev_(std::move(dev)), size_(bytes) {
  ptr_ = static_cast<std::byte*>(dev_->alloc(std::max<std::size_t>(bytes, 1)));
}

DeviceMemory::~DeviceMemory() { dev_->free(ptr_); }

void DeviceMemory::fill(std::byte b) {
  const std::vector<std::byte> v(size_, b);
  upload(v);
}

void DeviceMemory::upload(std::span<const std::byte> src, std::size_t at) {
  if (!src.empty()) dev_->copy_to_device(ptr_ + at, src.data(), src.size());
}

std::vector<std::byte> DeviceMemory::download(std::size_t at, std::size_t n) const {
  std::vector<std::byte> out(n);
  if (n > 0) dev_->copy_to_host(out.data(), ptr_ + at, n);
  return out;
}

::testing::AssertionResult all_equal(std::span<const std::byte> bytes, std::byte b) {
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] != b) {
      return ::testing::AssertionFailure()
             << "byte " << i << " of " << bytes.size() << " is 0x" << std::hex
             << std::to_integer<int>(bytes[i]) << ", want 0x" << std::to_integer<int>(b);
    }
  }
  return ::testing::AssertionSuccess();
}

std::shared_ptr<const Config> make_config(const Shape& s) {
  Config cfg;
  cfg.set("engine", s.engine);
  cfg.set("threads", std::to_string(s.threads));
  cfg.set("queue_depth", std::to_string(s.queue_depth));
  cfg.set("direct_io", s.direct_io ? "true" : "false");
  cfg.set("io_size", std::to_string(s.piece));
  cfg.set("bounce_buffer_size", std::to_string(s.piece));
  cfg.set("cache_policy", s.cache_policy);
  return std::make_shared<const Config>(std::move(cfg));
}

void use_small_pinned_pool(unsigned count, std::uint64_t size) {
  Config cfg = Config::load();
  if (cfg.source("bounce_buffers") == ConfigSource::default_value) {
    cfg.set("bounce_buffers", std::to_string(count));
  }
  if (cfg.source("bounce_buffer_size") == ConfigSource::default_value) {
    cfg.set("bounce_buffer_size", std::to_string(size));
  }
  set_config(std::move(cfg));
}

namespace {

// The fake as the cuFile loader loaded it: RTLD_NOLOAD finds that very copy (or nothing).
void* fake_cufile_handle() {
  const std::string& lib = detail::CuFile::instance().library();
  return dlopen(lib.c_str(), RTLD_NOW | RTLD_NOLOAD);
}

}  // namespace

bool fake_cufile_counters(FakeCuFileCounters* out) {
  void* h = fake_cufile_handle();
  if (h == nullptr) return false;
  auto get = [h](const char* name) -> std::uint64_t {
    auto fn = reinterpret_cast<fake_cufile_counter_fn>(dlsym(h, name));
    return fn != nullptr ? fn() : ~std::uint64_t{0};
  };
  const bool fake = dlsym(h, "fake_cufile_reads") != nullptr;
  if (fake) {
    out->reads = get("fake_cufile_reads");
    out->bytes_read = get("fake_cufile_bytes_read");
    out->writes = get("fake_cufile_writes");
    out->bytes_written = get("fake_cufile_bytes_written");
    out->live_handles = get("fake_cufile_live_handles");
  }
  dlclose(h);  // drops only the reference RTLD_NOLOAD took
  return fake;
}

std::uint64_t fake_cufile_calls(const char* function) {
  void* h = fake_cufile_handle();
  if (h == nullptr) return 0;
  auto fn = reinterpret_cast<fake_cufile_calls_fn>(dlsym(h, "fake_cufile_calls"));
  const std::uint64_t n = fn != nullptr ? fn(function) : 0;
  dlclose(h);
  return n;
}

void fake_cufile_reset() {
  void* h = fake_cufile_handle();
  if (h == nullptr) return;
  if (auto fn = reinterpret_cast<void (*)()>(dlsym(h, "fake_cufile_reset_counters"))) fn();
  dlclose(h);
}

}  // namespace sluice::gpu_test
