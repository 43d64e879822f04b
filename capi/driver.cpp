// The driver API: open/close, properties, the driver's Set* calls and the parameter API (error
// strings are static inline in cufile.h, as in NVIDIA's header). Parameters that have a Sluice
// counterpart change the Sluice configuration (the table in docs/cufile.md); the others are kept
// and reported back.
#include <cctype>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include "exports.hpp"
#include "log.hpp"
#include "sluice/config.hpp"
#include "sluice/error.hpp"
#include "state.hpp"

namespace sluice::capi {
namespace {

constexpr std::size_t kMaxKb = SIZE_MAX / 1024;
constexpr int kSizeParams = CUFILE_PARAM_PROPERTIES_BATCH_IO_TIMEOUT_MS + 1;
constexpr int kBoolParams = CUFILE_PARAM_STREAM_MEMOPS_BYPASS + 1;
constexpr int kStringParams = CUFILE_PARAM_LOG_DIR + 1;

struct Range {
  std::size_t min, max;
};

// Accepted values of each size_t parameter; the mapped ones follow Sluice's own limits.
Range size_range(CUFileSizeTConfigParameter_t p, const Config& cfg) {
  switch (p) {
    case CUFILE_PARAM_PROFILE_STATS:
      return {0, 3};
    case CUFILE_PARAM_EXECUTION_MAX_IO_QUEUE_DEPTH:
      return {1, 4096};
    case CUFILE_PARAM_EXECUTION_MAX_IO_THREADS:
      return {0, 256};
    case CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB:
      return {4, 65536};
    case CUFILE_PARAM_PROPERTIES_MAX_DEVICE_CACHE_SIZE_KB:
      return {2 * cfg.bounce_buffer_size / 1024, 4096 * cfg.bounce_buffer_size / 1024};
    case CUFILE_PARAM_PROPERTIES_PER_BUFFER_CACHE_SIZE_KB:
      return {64, 262144};
    case CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE:
      return {1, 4096};
    case CUFILE_PARAM_EXECUTION_MIN_IO_THRESHOLD_SIZE_KB:
    case CUFILE_PARAM_EXECUTION_MAX_REQUEST_PARALLELISM:
    case CUFILE_PARAM_PROPERTIES_MAX_DEVICE_PINNED_MEM_SIZE_KB:
    case CUFILE_PARAM_PROPERTIES_BATCH_IO_TIMEOUT_MS:
      return {1, kMaxKb};
    case CUFILE_PARAM_POLLTHRESHOLD_SIZE_KB:
      return {0, kMaxKb};
  }
  return {0, 0};
}

std::size_t size_value(CUFileSizeTConfigParameter_t p, const Config& cfg, const Params& params) {
  switch (p) {
    case CUFILE_PARAM_EXECUTION_MAX_IO_QUEUE_DEPTH:
      return cfg.queue_depth;
    case CUFILE_PARAM_EXECUTION_MAX_IO_THREADS:
      return cfg.effective_threads();
    case CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB:
      return cfg.io_size / 1024;
    case CUFILE_PARAM_PROPERTIES_MAX_DEVICE_CACHE_SIZE_KB:
      return cfg.bounce_buffers * cfg.bounce_buffer_size / 1024;
    case CUFILE_PARAM_PROPERTIES_PER_BUFFER_CACHE_SIZE_KB:
      return cfg.bounce_buffer_size / 1024;
    case CUFILE_PARAM_PROFILE_STATS:
      return static_cast<std::size_t>(State::get().stats_level().load());
    default:
      return params.size_t_values[static_cast<std::size_t>(p)];
  }
}

// Applies Sluice settings as one configuration change; caller holds the state mutex.
CUfileOpError set_sluice(std::initializer_list<std::pair<std::string_view, std::string>> settings) {
  Config c = *config();
  try {
    for (const auto& [name, value] : settings) c.set(name, value, ConfigSource::api);
  } catch (const Error& e) {
    log(LogLevel::info, "parameter refused: {}", e.what());
    return CU_FILE_DRIVER_UNSUPPORTED_LIMIT;
  }
  set_config(std::move(c));
  return CU_FILE_SUCCESS;
}

// Sets typed settings (recorded as the API's), for parameters that map onto an enum.
template <typename Fn>
CUfileOpError set_typed(Fn fn) {
  Config c = *config();
  fn(c);
  set_config(std::move(c));
  return CU_FILE_SUCCESS;
}

CUfileOpError set_size_locked(CUFileSizeTConfigParameter_t p, std::size_t v, Params& params) {
  const Config cfg = *config();
  const Range r = size_range(p, cfg);
  if (v < r.min || v > r.max) {
    log(LogLevel::info, "parameter {}: {} is outside {}..{}", static_cast<int>(p), v, r.min, r.max);
    return CU_FILE_DRIVER_UNSUPPORTED_LIMIT;
  }
  switch (p) {
    case CUFILE_PARAM_EXECUTION_MAX_IO_QUEUE_DEPTH:
      return set_sluice({{"queue_depth", std::to_string(v)}});
    case CUFILE_PARAM_EXECUTION_MAX_IO_THREADS:
      return set_sluice({{"threads", std::to_string(v)}});
    case CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB:
      return set_sluice({{"io_size", std::to_string(v * 1024)}});
    case CUFILE_PARAM_PROPERTIES_PER_BUFFER_CACHE_SIZE_KB:
      return set_sluice({{"bounce_buffer_size", std::to_string(v * 1024)}});
    case CUFILE_PARAM_PROPERTIES_MAX_DEVICE_CACHE_SIZE_KB:
      return set_sluice({{"bounce_buffers", std::to_string(v * 1024 / cfg.bounce_buffer_size)}});
    case CUFILE_PARAM_PROFILE_STATS:
      State::get().stats_level() = static_cast<int>(v);
      return CU_FILE_SUCCESS;
    default:
      params.size_t_values[static_cast<std::size_t>(p)] = v;
      return CU_FILE_SUCCESS;
  }
}

bool bool_value(CUFileBoolConfigParameter_t p, const Config& cfg, const Params& params) {
  switch (p) {
    case CUFILE_PARAM_PROPERTIES_ALLOW_COMPAT_MODE:
      return cfg.path != PathSetting::direct;
    case CUFILE_PARAM_FORCE_COMPAT_MODE:
      return cfg.path == PathSetting::bounce;
    case CUFILE_PARAM_PREFER_IO_URING:
      return cfg.engine == EngineSetting::uring;
    default:
      return params.bool_values[static_cast<std::size_t>(p)];
  }
}

CUfileOpError set_bool_locked(CUFileBoolConfigParameter_t p, bool v, Params& params) {
  const Config cfg = *config();
  switch (p) {
    // Compat mode is Sluice's bounce path: forced, it serves all device memory; disallowed,
    // the direct path is strict and a request it cannot serve fails.
    case CUFILE_PARAM_PROPERTIES_ALLOW_COMPAT_MODE:
      if (!v) return set_typed([](Config& c) { c.set_path(PathSetting::direct); });
      return cfg.path == PathSetting::direct ? set_typed([](Config& c) { c.set_path(PathSetting::automatic); })
                                             : CU_FILE_SUCCESS;
    case CUFILE_PARAM_FORCE_COMPAT_MODE:
      if (v) return set_typed([](Config& c) { c.set_path(PathSetting::bounce); });
      return cfg.path == PathSetting::bounce ? set_typed([](Config& c) { c.set_path(PathSetting::automatic); })
                                             : CU_FILE_SUCCESS;
    case CUFILE_PARAM_PREFER_IO_URING:
      if (v) return set_typed([](Config& c) { c.set_engine(EngineSetting::uring); });
      return cfg.engine == EngineSetting::uring ? set_typed([](Config& c) { c.set_engine(EngineSetting::automatic); })
                                                : CU_FILE_SUCCESS;
    default:
      params.bool_values[static_cast<std::size_t>(p)] = v;
      return CU_FILE_SUCCESS;
  }
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string string_value(CUFileStringConfigParameter_t p, const Config& cfg, const Params& params) {
  if (p == CUFILE_PARAM_LOGGING_LEVEL) {
    std::string s(to_string(cfg.log_level));
    for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return s;
  }
  return params.strings[static_cast<std::size_t>(p)];
}

CUfileOpError set_string_locked(CUFileStringConfigParameter_t p, const char* v, Params& params) {
  if (p == CUFILE_PARAM_LOGGING_LEVEL) {
    // cuFile's levels onto Sluice's: NOTICE -> error, TRACE -> debug, the rest by name.
    const std::string l = lower(v);
    const std::optional<LogLevel> level = l == "notice" ? LogLevel::error
                                          : l == "trace" ? LogLevel::debug
                                                         : parse_log_level(l);
    if (!level) return CU_FILE_INVALID_VALUE;
    return set_typed([level](Config& c) { c.set_log_level(*level); });
  }
  params.strings[static_cast<std::size_t>(p)] = v;
  return CU_FILE_SUCCESS;
}

// Runs `fn(params)` under the state mutex if the driver is not open yet (parameters are set
// before cuFileDriverOpen, as cuFile requires).
template <typename Fn>
CUfileError_t before_open(Fn fn) {
  State& s = State::get();
  try {
    std::lock_guard lock(s.mutex());
    if (s.open_locked()) return status(CU_FILE_DRIVER_ALREADY_OPEN);
    return status(fn(s.params()));
  } catch (const Error& e) {  // a bad SLUICE_* value in the environment or config file
    log(LogLevel::error, "configuration: {}", e.what());
    return status(CU_FILE_DRIVER_INVALID_PROPS);
  } catch (const std::bad_alloc&) {
    return status(CU_FILE_NOMEM_ERROR);
  }
}

// The same, at any time (cuFileDriverSet* calls, and every getter).
template <typename Fn>
CUfileError_t any_time(Fn fn) {
  State& s = State::get();
  try {
    std::lock_guard lock(s.mutex());
    return status(fn(s.params()));
  } catch (const Error& e) {
    log(LogLevel::error, "configuration: {}", e.what());
    return status(CU_FILE_DRIVER_INVALID_PROPS);
  } catch (const std::bad_alloc&) {
    return status(CU_FILE_NOMEM_ERROR);
  }
}

bool valid_size(const CUFileSizeTConfigParameter_t& p) {
  return raw(p) >= 0 && raw(p) < kSizeParams;
}
bool valid_bool(const CUFileBoolConfigParameter_t& p) {
  return raw(p) >= 0 && raw(p) < kBoolParams;
}
bool valid_string(const CUFileStringConfigParameter_t& p) {
  return raw(p) >= 0 && raw(p) < kStringParams;
}

}  // namespace
}  // namespace sluice::capi

using namespace sluice::capi;  // NOLINT(google-build-using-namespace): the C entry points below
using sluice::Config;
using sluice::config;

CUFILE_API CUfileError_t cuFileDriverOpen(void) {
  return State::get().open();
}

CUFILE_API CUfileError_t cuFileDriverClose_v2(void) {
  return State::get().close();
}

// The unversioned name, for programs built against headers older than the _v2 macro.
#undef cuFileDriverClose
CUFILE_API CUfileError_t cuFileDriverClose(void) {
  return State::get().close();
}

CUFILE_API long cuFileUseCount(void) {
  return State::get().use_count();
}

CUFILE_API CUfileError_t cuFileGetVersion(int* version) {
  if (version == nullptr) return status(CU_FILE_INVALID_VALUE);
  *version = kApiVersion;
  return kSuccess;
}

CUFILE_API CUfileError_t cuFileDriverGetProperties(CUfileDrvProps_t* props) {
  if (props == nullptr) return status(CU_FILE_INVALID_VALUE);
  if (const CUfileError_t st = State::get().ensure_open(); st.err != CU_FILE_SUCCESS) return st;
  return any_time([props](Params& p) {
    const auto cfg = config();
    CUfileDrvProps_t out{};
    // No nvidia-fs is involved: its version stays 0 and dstatusflags (file systems nvidia-fs
    // serves) stays empty; Sluice serves every file system through its own paths.
    out.nvfs.poll_thresh_size = p.size_t_values[CUFILE_PARAM_POLLTHRESHOLD_SIZE_KB];
    out.nvfs.max_direct_io_size = cfg->io_size / 1024;
    if (p.bool_values[CUFILE_PARAM_PROPERTIES_USE_POLL_MODE])
      out.nvfs.dcontrolflags |= 1U << CU_FILE_USE_POLL_MODE;
    if (cfg->path != sluice::PathSetting::direct) out.nvfs.dcontrolflags |= 1U << CU_FILE_ALLOW_COMPAT_MODE;
    out.fflags = (1U << CU_FILE_BATCH_IO_SUPPORTED) | (1U << CU_FILE_STREAMS_SUPPORTED) |
                 (1U << CU_FILE_PARALLEL_IO_SUPPORTED);
    const auto kb = [](std::uint64_t v) {
      return static_cast<unsigned>(std::min<std::uint64_t>(v, UINT32_MAX));
    };
    out.max_device_cache_size = kb(cfg->bounce_buffers * cfg->bounce_buffer_size / 1024);
    out.per_buffer_cache_size = kb(cfg->bounce_buffer_size / 1024);
    out.max_device_pinned_mem_size =
        kb(p.size_t_values[CUFILE_PARAM_PROPERTIES_MAX_DEVICE_PINNED_MEM_SIZE_KB]);
    out.max_batch_io_size = kb(p.size_t_values[CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE]);
    out.max_batch_io_timeout_msecs =
        kb(p.size_t_values[CUFILE_PARAM_PROPERTIES_BATCH_IO_TIMEOUT_MS]);
    *props = out;
    return CU_FILE_SUCCESS;
  });
}

CUFILE_API CUfileError_t cuFileDriverSetPollMode(bool poll, size_t poll_threshold_size) {
  return any_time([=](Params& p) {
    // Sluice's calls always block until done; the values are kept and reported.
    p.bool_values[CUFILE_PARAM_PROPERTIES_USE_POLL_MODE] = poll;
    p.size_t_values[CUFILE_PARAM_POLLTHRESHOLD_SIZE_KB] = poll_threshold_size;
    return CU_FILE_SUCCESS;
  });
}

CUFILE_API CUfileError_t cuFileDriverSetMaxDirectIOSize(size_t max_direct_io_size) {
  return any_time([=](Params& p) {
    return set_size_locked(CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB, max_direct_io_size, p);
  });
}

CUFILE_API CUfileError_t cuFileDriverSetMaxCacheSize(size_t max_cache_size) {
  return any_time([=](Params& p) {
    return set_size_locked(CUFILE_PARAM_PROPERTIES_MAX_DEVICE_CACHE_SIZE_KB, max_cache_size, p);
  });
}

CUFILE_API CUfileError_t cuFileDriverSetMaxPinnedMemSize(size_t max_pinned_size) {
  return any_time([=](Params& p) {
    return set_size_locked(CUFILE_PARAM_PROPERTIES_MAX_DEVICE_PINNED_MEM_SIZE_KB, max_pinned_size,
                           p);
  });
}

CUFILE_API CUfileError_t cuFileSetParameterSizeT(CUFileSizeTConfigParameter_t param, size_t value) {
  if (!valid_size(param)) return status(CU_FILE_INVALID_VALUE);
  return before_open([=](Params& p) { return set_size_locked(param, value, p); });
}

CUFILE_API CUfileError_t cuFileGetParameterSizeT(CUFileSizeTConfigParameter_t param,
                                                 size_t* value) {
  if (!valid_size(param) || value == nullptr) return status(CU_FILE_INVALID_VALUE);
  return any_time([=](Params& p) {
    *value = size_value(param, *config(), p);
    return CU_FILE_SUCCESS;
  });
}

CUFILE_API CUfileError_t cuFileGetParameterMinMaxValue(CUFileSizeTConfigParameter_t param,
                                                       size_t* min_value, size_t* max_value) {
  if (!valid_size(param) || min_value == nullptr || max_value == nullptr)
    return status(CU_FILE_INVALID_VALUE);
  return any_time([=](Params&) {
    const Range r = size_range(param, *config());
    *min_value = r.min;
    *max_value = r.max;
    return CU_FILE_SUCCESS;
  });
}

CUFILE_API CUfileError_t cuFileSetParameterBool(CUFileBoolConfigParameter_t param, bool value) {
  if (!valid_bool(param)) return status(CU_FILE_INVALID_VALUE);
  return before_open([=](Params& p) { return set_bool_locked(param, value, p); });
}

CUFILE_API CUfileError_t cuFileGetParameterBool(CUFileBoolConfigParameter_t param, bool* value) {
  if (!valid_bool(param) || value == nullptr) return status(CU_FILE_INVALID_VALUE);
  return any_time([=](Params& p) {
    *value = bool_value(param, *config(), p);
    return CU_FILE_SUCCESS;
  });
}

CUFILE_API CUfileError_t cuFileSetParameterString(CUFileStringConfigParameter_t param,
                                                  const char* desc_str) {
  if (!valid_string(param) || desc_str == nullptr) return status(CU_FILE_INVALID_VALUE);
  return before_open([=](Params& p) { return set_string_locked(param, desc_str, p); });
}

CUFILE_API CUfileError_t cuFileGetParameterString(CUFileStringConfigParameter_t param,
                                                  char* desc_str, int len) {
  if (!valid_string(param) || desc_str == nullptr || len <= 0) return status(CU_FILE_INVALID_VALUE);
  return any_time([=](Params& p) {
    const std::string v = string_value(param, *config(), p);
    if (v.size() + 1 > static_cast<std::size_t>(len)) return CU_FILE_INVALID_VALUE;
    std::memcpy(desc_str, v.c_str(), v.size() + 1);
    return CU_FILE_SUCCESS;
  });
}

CUFILE_API CUfileError_t cuFileSetParameterPosixPoolSlabArray(const size_t* size_values,
                                                              const size_t* count_values, int len) {
  if (size_values == nullptr || count_values == nullptr || len <= 0 ||
      len > static_cast<int>(Params{}.slab_sizes_kb.size())) {
    return status(CU_FILE_INVALID_VALUE);
  }
  return before_open([=](Params& p) {
    for (int i = 0; i < len; ++i) {
      if (size_values[i] == 0 || count_values[i] == 0) return CU_FILE_INVALID_VALUE;
    }
    // Kept and reported: Sluice's host staging pool is staging_buffers x io_size instead.
    for (int i = 0; i < len; ++i) {
      p.slab_sizes_kb[static_cast<std::size_t>(i)] = size_values[i];
      p.slab_counts[static_cast<std::size_t>(i)] = count_values[i];
    }
    p.slab_len = len;
    return CU_FILE_SUCCESS;
  });
}

CUFILE_API CUfileError_t cuFileGetParameterPosixPoolSlabArray(size_t* size_values,
                                                              size_t* count_values, int len) {
  if (size_values == nullptr || count_values == nullptr || len <= 0)
    return status(CU_FILE_INVALID_VALUE);
  return any_time([=](Params& p) {
    if (len < p.slab_len) return CU_FILE_INVALID_VALUE;
    for (int i = 0; i < p.slab_len; ++i) {
      size_values[i] = p.slab_sizes_kb[static_cast<std::size_t>(i)];
      count_values[i] = p.slab_counts[static_cast<std::size_t>(i)];
    }
    return CU_FILE_SUCCESS;
  });
}

// nvidia-fs / PCIe P2P specifics: Sluice routes through its own paths and has none of them.
CUFILE_API CUfileError_t cuFileGetBARSizeInKB(int gpuIndex, size_t* barSize) {
  if (gpuIndex < 0 || barSize == nullptr) return status(CU_FILE_INVALID_VALUE);
  log(LogLevel::info,
      "cuFileGetBARSizeInKB: not available (Sluice does not map GPU memory into BAR1)");
  return status(CU_FILE_PLATFORM_NOT_SUPPORTED);
}

CUFILE_API CUfileError_t cuFileDriverSetP2PFlags(CUfileDriverStatusFlags_t, CUfileP2PFlags_t) {
  log(LogLevel::info,
      "cuFileDriverSetP2PFlags: no P2P modes (Sluice's direct path is NVIDIA's cuFile's own)");
  return status(CU_FILE_PLATFORM_NOT_SUPPORTED);
}

CUFILE_API CUfileError_t cuFileDriverGetP2PFlags(CUfileDriverStatusFlags_t,
                                                 CUfileP2PFlags_t* p2p_flags) {
  if (p2p_flags == nullptr) return status(CU_FILE_INVALID_VALUE);
  return status(CU_FILE_PLATFORM_NOT_SUPPORTED);
}
