// Commands that reproduce a result (DESIGN principle 7: numbers come with their method).
#pragma once

#include <string>

#include "report/model.hpp"

namespace sluice::report::detail {

/// `sluice bench ...` running just this result again (its transfer type, mode, block size,
/// threads and depth, with the rest of its document's workload). Empty when the document has
/// no "config".
[[nodiscard]] std::string rerun_command(const Row& r);

/// `s` as one POSIX shell word.
[[nodiscard]] std::string shell_quote(const std::string& s);

}  // namespace sluice::report::detail
