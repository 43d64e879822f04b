// The control-path entry points' last line of defence: no C++ exception crosses into a C caller.
#pragma once

#include <exception>
#include <new>

#include "log.hpp"
#include "state.hpp"

namespace sluice::capi {

/// Runs fn() (which returns a CUfileError_t); out of memory becomes CU_FILE_NOMEM_ERROR and any
/// other exception CU_FILE_INTERNAL_ERROR, logged with the entry point's name.
template <typename Fn>
CUfileError_t guarded(const char* api, Fn fn) noexcept {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return status(CU_FILE_NOMEM_ERROR);
  } catch (const std::exception& e) {
    log(LogLevel::error, "{}: internal error: {}", api, e.what());
    return status(CU_FILE_INTERNAL_ERROR);
  }
}

}  // namespace sluice::capi
