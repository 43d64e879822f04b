// NVIDIA's cuFile configuration (cufile.json and the CUFILE_* variables, read by libsluice's
// sluice/internal/cufile_config.hpp) applied once per process, on the first call of any entry
// point and before that call's own effect: State::get() calls in here. Each key goes through
// this library's own cuFileSetParameter* entry points, so the file and the environment meet the
// same limits as the API, and a cuFileSetParameter* call the program makes later wins, as NVIDIA
// documents (API > environment > file). docs/cufile.md, "cufile.json and the environment".
#include "cufile_config.hpp"

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "log.hpp"
#include "sluice/config.hpp"
#include "sluice/error.hpp"
#include "sluice/internal/cufile_config.hpp"
#include "state.hpp"

namespace sluice::capi {
namespace {

using internal::CufileConfig;
using internal::CufileEffect;
using internal::CufileEntry;
using internal::CufileParam;

std::atomic<bool> g_applied{false};
std::once_flag g_once;
thread_local bool t_applying = false;  // this thread is applying: its own Set calls pass through

CUfileError_t set_slabs(const CufileEntry& e, bool gpu) {
  const int len = static_cast<int>(e.sizes.size());
  if (!gpu) return cuFileSetParameterPosixPoolSlabArray(e.sizes.data(), e.counts.data(), len);
  return cuFileSetParameterGpuBounceBufferSlabArray(e.sizes.data(), e.counts.data(), len);
}

// The entry through the cuFile parameter call that carries it.
CUfileError_t set(const CufileEntry& e) {
  switch (e.param) {
    case CufileParam::size_t_value:
      return cuFileSetParameterSizeT(static_cast<CUFileSizeTConfigParameter_t>(e.index), e.number);
    case CufileParam::bool_value:
      return cuFileSetParameterBool(static_cast<CUFileBoolConfigParameter_t>(e.index), e.flag);
    case CufileParam::string_value:
      return cuFileSetParameterString(static_cast<CUFileStringConfigParameter_t>(e.index),
                                      e.text.c_str());
    case CufileParam::posix_slabs:
      return set_slabs(e, false);
    case CufileParam::gpu_slabs:
      return set_slabs(e, true);
    case CufileParam::none:
      break;
  }
  return kSuccess;
}

std::string origin(const CufileConfig& c, const CufileEntry& e) {
  return e.from_env ? std::string("environment") : "cufile.json " + c.path;
}

// Before anything is applied, so that the file's own logging.level cannot hide its problems.
void report_problems(const CufileConfig& c) {
  if (c.error) {
    log(LogLevel::error, "cufile.json {}{}: {}; cuFile's defaults stay", c.path,
        c.from_env ? " (CUFILE_ENV_PATH_JSON)" : "", c.status);
  }
  std::vector<std::string> idle;
  for (const CufileEntry& e : c.entries) {
    if (e.effect == CufileEffect::unknown) {
      log(LogLevel::warn, "{}: {} = {}: {}, ignored", origin(c, e), e.name, e.value, e.detail);
    } else if (e.effect == CufileEffect::invalid) {
      log(LogLevel::error, "{}: {} = {}: {}; the value before it stays", origin(c, e), e.name,
          e.value, e.detail);
    } else if (e.effect == CufileEffect::no_effect) {
      idle.push_back(e.name);
    }
  }
  // Info, not a warning: NVIDIA's stock /etc/cufile.json sets about twenty such keys (fs.*,
  // denylist.*, rdma_*), and every program would print them on each start.
  if (!idle.empty()) {
    log(LogLevel::info, "cuFile configuration: no effect in Sluice: {} (docs/cufile.md says why)",
        fmt::join(idle, ", "));
  }
}

void apply(CufileConfig& c) {
  for (CufileEntry& e : c.entries) {
    if (e.param == CufileParam::none) continue;
    const CUfileError_t st = set(e);
    if (st.err == CU_FILE_SUCCESS) continue;
    log(LogLevel::error, "{}: {} = {}: refused with {}; the value before it stays", origin(c, e),
        e.name, e.value, code_name(st.err));
    e.effect = CufileEffect::invalid;
    e.detail = "refused with " + code_name(st.err);
  }
  // At the level now in force, which the file may have set.
  log(LogLevel::info, "cufile.json {}{}: {}", c.path, c.from_env ? " (CUFILE_ENV_PATH_JSON)" : "",
      c.status);
  for (const CufileEntry& e : c.entries) {
    if (e.effect != CufileEffect::unknown && e.effect != CufileEffect::invalid)
      log(LogLevel::info, "{}: {} = {}: {}", origin(c, e), e.name, e.value, e.detail);
  }
}

void read_and_apply() noexcept {
  try {
    CufileConfig c = internal::read_cufile_config(*config(), internal::process_environment());
    report_problems(c);
    apply(c);
  } catch (const Error&) {
    // A bad SLUICE_* value: cuFileDriverOpen reports it, and no parameter can be set meanwhile.
  } catch (const std::exception& e) {
    log(LogLevel::error, "cuFile configuration not applied: {}", e.what());
  }
}

}  // namespace

void apply_cufile_config_once() noexcept {
  if (g_applied.load(std::memory_order_acquire) || t_applying) return;
  try {
    std::call_once(g_once, [] {
      t_applying = true;
      read_and_apply();
      t_applying = false;
      g_applied.store(true, std::memory_order_release);
    });
  } catch (...) {  // call_once reports a failure to start a thread-safe once as system_error
  }
}

}  // namespace sluice::capi
