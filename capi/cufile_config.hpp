// cufile.json and the CUFILE_* environment, applied once per process (capi/cufile_config.cpp).
#pragma once

namespace sluice::capi {

/// Applies the cuFile configuration file and variables the first time any thread calls it (and
/// returns at once after that, or when called again from inside the application itself). The
/// calls that follow on other threads wait until it is done.
void apply_cufile_config_once() noexcept;

}  // namespace sluice::capi
