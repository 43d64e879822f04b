// Test hook, not user API (the contract of include/sluice/testing/: exported, unstable, may
// change in any release): interposes on the creation of I/O engines, so a test can wrap every
// engine the library makes, e.g. in a FaultyEngine (sluice/testing/faulty_engine.hpp).
#pragma once

#include <functional>
#include <memory>

#include "sluice/export.hpp"
#include "sluice/io_engine.hpp"

namespace sluice {

/// Makes the engine of `kind` with room for `depth` requests in flight.
using EngineFactory = std::function<std::unique_ptr<IoEngine>(EngineKind, unsigned)>;
/// Every engine made after this call comes from `factory`; each thread's cached engine is
/// rebuilt after a change. Pass an empty function to restore the default.
SLUICE_API void set_engine_factory(EngineFactory factory);

}  // namespace sluice
