// The driver API: open/close, properties, the driver's Set* calls and the parameter API (error
// strings are static inline in cufile.h, as in NVIDIA's header). Parameters that have a Sluice
// counterpart change the Sluice configuration (the table in docs/cufile.md); the others are kept
// and reported back.
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include "exports.hpp"
#include "log.hpp"
#include "sluice/config.hpp"
#include "sluice/error.hpp"
#include "sluice/internal/gpu_stack.hpp"
#include "state.hpp"

namespace sluice::capi {
namespace {

constexpr std::size_t kMaxKb = SIZE_MAX / 1024;
constexpr int kSizeParams = CUFILE_PARAM_PROPERTIES_BATCH_IO_TIMEOUT_MS + 1;
constexpr int kBoolParams = CUFILE_PARAM_GDS_FALLBACK_IO + 1;
constexpr int kStringParams = CUFILE_PARAM_RDMA_TRANSPORT + 1;

struct Range {
  std::size_t min, max;
};

// Accepted values of each size_t parameter. The sizes NVIDIA's limits allow and Sluice's staging
// cannot take exactly (a 64 KiB cache, a direct I/O size that is no multiple of 4 KiB) are
// accepted and rounded to the nearest staging that works; Get and the properties report them as
// given. UINT64_MAX pinned memory is NVIDIA's "no limit".
Range size_range(CUFileSizeTConfigParameter_t p) {
  switch (p) {
    case CUFILE_PARAM_PROFILE_STATS:
      return {0, 3};
    case CUFILE_PARAM_EXECUTION_MAX_IO_QUEUE_DEPTH:
      return {1, 4096};
    case CUFILE_PARAM_EXECUTION_MAX_IO_THREADS:
      return {0, 256};
    case CUFILE_PARAM_PROPERTIES_PER_BUFFER_CACHE_SIZE_KB:
      return {64, 262144};
    case CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE:
      return {1, 4096};
    case CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB:
    case CUFILE_PARAM_PROPERTIES_MAX_DEVICE_CACHE_SIZE_KB:
    case CUFILE_PARAM_EXECUTION_MIN_IO_THRESHOLD_SIZE_KB:
    case CUFILE_PARAM_EXECUTION_MAX_REQUEST_PARALLELISM:
    case CUFILE_PARAM_PROPERTIES_BATCH_IO_TIMEOUT_MS:
      return {1, kMaxKb};
    case CUFILE_PARAM_PROPERTIES_MAX_DEVICE_PINNED_MEM_SIZE_KB:
      return {1, SIZE_MAX};
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
      if (params.given_direct_io_kb != 0) return params.given_direct_io_kb;
      // With GPU slabs, a request is at most the largest slab, as NVIDIA's properties say (and
      // Sluice's staging chunks are at most its buffers, the largest slab's size).
      if (params.gpu_slabs.len > 0) {
        return *std::max_element(params.gpu_slabs.sizes_kb.begin(),
                                 params.gpu_slabs.sizes_kb.begin() + params.gpu_slabs.len);
      }
      return cfg.io_size / 1024;
    case CUFILE_PARAM_PROPERTIES_MAX_DEVICE_CACHE_SIZE_KB:
      return params.given_cache_kb != 0 ? params.given_cache_kb
                                        : cfg.bounce_buffers * cfg.bounce_buffer_size / 1024;
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

// A cuFile cache of `kb` KiB as Sluice's staging: as many bounce buffers of the current size as
// fit, at most 4096; below two of them (NVIDIA's sample asks for 64 KiB), two buffers of the
// largest multiple of 4 KiB that fits, at least 64 KiB: the smallest staging that still works.
CUfileOpError set_cache_kb(std::size_t kb, Params& params) {
  const Config cfg = *config();
  const std::uint64_t want = static_cast<std::uint64_t>(kb) * 1024;  // kb <= kMaxKb
  const std::uint64_t base =
      params.unshrunk_buffer_bytes != 0 ? params.unshrunk_buffer_bytes : cfg.bounce_buffer_size;
  std::uint64_t size = base;
  std::uint64_t count = std::min<std::uint64_t>(want / size, 4096);
  if (count < 2) {
    size = std::max<std::uint64_t>(64 * 1024, want / 2 / 4096 * 4096);
    count = 2;
    params.unshrunk_buffer_bytes = base;
  } else {
    params.unshrunk_buffer_bytes = 0;
  }
  const CUfileOpError e = set_sluice(
      {{"bounce_buffer_size", std::to_string(size)}, {"bounce_buffers", std::to_string(count)}});
  if (e == CU_FILE_SUCCESS) {
    params.given_cache_kb = kb;
    log(LogLevel::info, "max_device_cache_size {} KiB: staging of {} x {} KiB", kb, count,
        size / 1024);
  }
  return e;
}

// Sluice's request size for a cuFile max_direct_io_size: rounded up to 4 KiB, within 4 KiB ..
// 64 MiB (Sluice's io_size); DeepSpeed passes its block size, which need be neither.
CUfileOpError set_direct_io_kb(std::size_t kb, Params& params) {
  const std::uint64_t kib = std::clamp<std::uint64_t>((static_cast<std::uint64_t>(kb) + 3) / 4 * 4,
                                                      4, 65536);
  const CUfileOpError e = set_sluice({{"io_size", std::to_string(kib * 1024)}});
  if (e == CU_FILE_SUCCESS) {
    params.given_direct_io_kb = kb;
    if (kib != kb) log(LogLevel::info, "max_direct_io_size {} KiB: requests of {} KiB", kb, kib);
  }
  return e;
}

CUfileOpError set_size_locked(CUFileSizeTConfigParameter_t p, std::size_t v, Params& params) {
  const Config cfg = *config();
  const Range r = size_range(p);
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
      return set_direct_io_kb(v, params);
    case CUFILE_PARAM_PROPERTIES_PER_BUFFER_CACHE_SIZE_KB:
      return set_sluice({{"bounce_buffer_size", std::to_string(v * 1024)}});
    case CUFILE_PARAM_PROPERTIES_MAX_DEVICE_CACHE_SIZE_KB:
      return set_cache_kb(v, params);
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

// The cuFileDriverSet* calls: they take effect before the driver is opened and are a no-op
// (success) once it is open, as NVIDIA documents them; the log says which value stays.
template <typename Fn>
CUfileError_t until_open(const char* api, Fn fn) {
  State& s = State::get();
  {
    std::lock_guard lock(s.mutex());
    if (s.open_locked()) {
      log(LogLevel::info, "{}: no effect, the driver is already open (the value in force stays)",
          api);
      return kSuccess;
    }
  }
  return before_open(fn);
}

// The GPU bounce buffers the slabs ask for as Sluice's uniform staging: buffers of the largest
// slab size (64 KiB .. 256 MiB, a multiple of 4 KiB) holding the slabs' total, 2 .. 4096 of them.
CUfileOpError apply_gpu_slabs(const SlabArray& a, Params& params) {
  std::uint64_t largest_kb = 0;
  std::uint64_t total_kb = 0;
  for (int i = 0; i < a.len; ++i) {
    const auto k = static_cast<std::size_t>(i);
    largest_kb = std::max<std::uint64_t>(largest_kb, a.sizes_kb[k]);
    total_kb += std::min<std::uint64_t>(a.sizes_kb[k], kMaxKb / 4096) *
                std::min<std::uint64_t>(a.counts[k], 4096);
  }
  const std::uint64_t size = std::clamp<std::uint64_t>(largest_kb, 64, 262144) / 4 * 4 * 1024;
  const std::uint64_t count = std::clamp<std::uint64_t>(total_kb * 1024 / size, 2, 4096);
  const CUfileOpError e = set_sluice(
      {{"bounce_buffer_size", std::to_string(size)}, {"bounce_buffers", std::to_string(count)}});
  if (e == CU_FILE_SUCCESS) {
    params.given_cache_kb = static_cast<std::size_t>(total_kb);
    log(LogLevel::info, "GPU bounce-buffer slabs: {} KiB in all, staging of {} x {} KiB", total_kb,
        count, size / 1024);
  }
  return e;
}

// The GPU slabs in force: those set, else Sluice's uniform staging as one slab.
SlabArray gpu_slabs_in_force(const Params& p) {
  if (p.gpu_slabs.len > 0) return p.gpu_slabs;
  const auto cfg = config();
  SlabArray one;
  one.len = 1;
  one.sizes_kb[0] = cfg->bounce_buffer_size / 1024;
  one.counts[0] = cfg->bounce_buffers;
  return one;
}

// cuFileSetParameter*SlabArray: 1..8 slabs of positive sizes and counts, before the open.
template <typename Which>
CUfileError_t set_slabs(const size_t* sizes, const size_t* counts, int len, Which which) {
  if (sizes == nullptr || counts == nullptr || len <= 0 ||
      len > static_cast<int>(SlabArray{}.sizes_kb.size())) {
    return status(CU_FILE_INVALID_VALUE);
  }
  return before_open([=](Params& p) {
    SlabArray a;
    for (int i = 0; i < len; ++i) {
      if (sizes[i] == 0 || counts[i] == 0) return CU_FILE_INVALID_VALUE;
      a.sizes_kb[static_cast<std::size_t>(i)] = sizes[i];
      a.counts[static_cast<std::size_t>(i)] = counts[i];
    }
    a.len = len;
    SlabArray& target = which(p);
    if (&target == &p.gpu_slabs) {
      if (const CUfileOpError e = apply_gpu_slabs(a, p); e != CU_FILE_SUCCESS) return e;
    }
    target = a;
    return CU_FILE_SUCCESS;
  });
}

// cuFileGetParameter*SlabArray: `len` must hold every slab in force.
template <typename Which>
CUfileError_t get_slabs(size_t* sizes, size_t* counts, int len, Which which) {
  if (sizes == nullptr || counts == nullptr || len <= 0) return status(CU_FILE_INVALID_VALUE);
  return any_time([=](Params& p) {
    const SlabArray a = which(p);
    if (len < a.len) return CU_FILE_INVALID_VALUE;
    for (int i = 0; i < a.len; ++i) {
      sizes[i] = a.sizes_kb[static_cast<std::size_t>(i)];
      counts[i] = a.counts[static_cast<std::size_t>(i)];
    }
    return CU_FILE_SUCCESS;
  });
}

unsigned kb32(std::uint64_t v) {
  return static_cast<unsigned>(std::min<std::uint64_t>(v, UINT32_MAX));
}

// What cuFileDriverGetProperties reports. nvidia-fs's version and the file systems it serves
// come from NVIDIA's library where Sluice's direct path goes through it (so KvikIO's
// is_gds_available() and DALI choose as they would on NVIDIA's library), and are 0 where it
// cannot: there is no GDS then, only Sluice's bounce path, as NVIDIA's compat mode reports it.
CUfileDrvProps_t properties(const Params& p, const sluice::CuFileLibraryStatus& direct) {
  const auto cfg = config();
  CUfileDrvProps_t out{};
  if (direct.available) {
    out.nvfs.major_version = direct.nvfs_major;
    out.nvfs.minor_version = direct.nvfs_minor;
    out.nvfs.dstatusflags = direct.dstatusflags;
    out.fflags = direct.fflags & ((1U << CU_FILE_DYN_ROUTING_SUPPORTED) | (1U << CU_FILE_P2P_SUPPORTED));
  }
  out.fflags |= (1U << CU_FILE_BATCH_IO_SUPPORTED) | (1U << CU_FILE_STREAMS_SUPPORTED) |
                (1U << CU_FILE_PARALLEL_IO_SUPPORTED);
  out.nvfs.poll_thresh_size = p.size_t_values[CUFILE_PARAM_POLLTHRESHOLD_SIZE_KB];
  out.nvfs.max_direct_io_size = size_value(CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB, *cfg, p);
  const auto flag = [&](bool on, int bit) {
    if (on) out.nvfs.dcontrolflags |= 1U << bit;
  };
  flag(p.bool_values[CUFILE_PARAM_PROPERTIES_USE_POLL_MODE], CU_FILE_USE_POLL_MODE);
  flag(cfg->path != sluice::PathSetting::direct, CU_FILE_ALLOW_COMPAT_MODE);
  flag(p.bool_values[CUFILE_PARAM_PROPERTIES_POSIX_IO_MODE], CU_FILE_POSIX_IO_MODE);
  flag(p.bool_values[CUFILE_PARAM_GDS_FALLBACK_IO], CU_FILE_FALLBACK_IO_MODE);
  out.max_device_cache_size =
      kb32(size_value(CUFILE_PARAM_PROPERTIES_MAX_DEVICE_CACHE_SIZE_KB, *cfg, p));
  const SlabArray slabs = gpu_slabs_in_force(p);
  out.per_buffer_cache_size =
      kb32(*std::max_element(slabs.sizes_kb.begin(), slabs.sizes_kb.begin() + slabs.len));
  out.max_device_pinned_mem_size =
      kb32(p.size_t_values[CUFILE_PARAM_PROPERTIES_MAX_DEVICE_PINNED_MEM_SIZE_KB]);
  out.max_batch_io_size = kb32(p.size_t_values[CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE]);
  out.max_batch_io_timeout_msecs = kb32(p.size_t_values[CUFILE_PARAM_PROPERTIES_BATCH_IO_TIMEOUT_MS]);
  return out;
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
  // Asked outside the state lock: the first call loads NVIDIA's library.
  const sluice::CuFileLibraryStatus direct = sluice::cufile_library_status();
  return any_time([props, &direct](Params& p) {
    *props = properties(p, direct);
    return CU_FILE_SUCCESS;
  });
}

CUFILE_API CUfileError_t cuFileDriverSetPollMode(bool poll, size_t poll_threshold_size) {
  return until_open("cuFileDriverSetPollMode", [=](Params& p) {
    // Sluice's calls always block until done; the values are kept and reported.
    p.bool_values[CUFILE_PARAM_PROPERTIES_USE_POLL_MODE] = poll;
    p.size_t_values[CUFILE_PARAM_POLLTHRESHOLD_SIZE_KB] = poll_threshold_size;
    return CU_FILE_SUCCESS;
  });
}

CUFILE_API CUfileError_t cuFileDriverSetMaxDirectIOSize(size_t max_direct_io_size) {
  return until_open("cuFileDriverSetMaxDirectIOSize", [=](Params& p) {
    return set_size_locked(CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB, max_direct_io_size, p);
  });
}

CUFILE_API CUfileError_t cuFileDriverSetMaxCacheSize(size_t max_cache_size) {
  return until_open("cuFileDriverSetMaxCacheSize", [=](Params& p) {
    return set_size_locked(CUFILE_PARAM_PROPERTIES_MAX_DEVICE_CACHE_SIZE_KB, max_cache_size, p);
  });
}

CUFILE_API CUfileError_t cuFileDriverSetMaxPinnedMemSize(size_t max_pinned_size) {
  return until_open("cuFileDriverSetMaxPinnedMemSize", [=](Params& p) {
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
    const Range r = size_range(param);
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
  // Kept and reported: Sluice's host staging pool is staging_buffers x io_size instead.
  return set_slabs(size_values, count_values, len, [](Params& p) -> SlabArray& {
    return p.posix_slabs;
  });
}

CUFILE_API CUfileError_t cuFileGetParameterPosixPoolSlabArray(size_t* size_values,
                                                              size_t* count_values, int len) {
  return get_slabs(size_values, count_values, len, [](Params& p) { return p.posix_slabs; });
}

CUFILE_API CUfileError_t cuFileSetParameterGpuBounceBufferSlabArray(const size_t* size_values,
                                                                    const size_t* count_values,
                                                                    int len) {
  return set_slabs(size_values, count_values, len, [](Params& p) -> SlabArray& {
    return p.gpu_slabs;
  });
}

CUFILE_API CUfileError_t cuFileGetParameterGpuBounceBufferSlabArray(size_t* size_values,
                                                                    size_t* count_values,
                                                                    int len) {
  return get_slabs(size_values, count_values, len, [](Params& p) { return gpu_slabs_in_force(p); });
}
