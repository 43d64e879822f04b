#!/usr/bin/env bash
# Lists what the last `ctest` run in each BUILD_DIR skipped, with the reason each test gave, from
# CTest's log (Testing/Temporary/LastTest.log): skipped test cases (GTEST_SKIP), whole programs
# that found the machine lacking (SLUICE_TEST_SKIPPED), and parts of passing tests that could not
# run here (SLUICE_PART_SKIPPED, say the io_uring pass of a loop over engines). `make test` ends
# with this list, so a skip is seen rather than counted as a pass.
#   tests/list-skips.sh BUILD_DIR...
set -uo pipefail
[ $# -gt 0 ] || { echo "usage: tests/list-skips.sh BUILD_DIR..." >&2; exit 2; }
for dir in "$@"; do
  log="$dir/Testing/Temporary/LastTest.log"
  [ -f "$log" ] || continue
  awk -v build="$dir" '
    function flush() {
      if (test == "") return
      if (skipped) { skips++; lines[++n] = sprintf("  skipped  %s: %s", test, reason == "" ? "(no reason given)" : reason) }
      for (i = 1; i <= nparts; i++) { parts++; lines[++n] = sprintf("  part     %s: %s", test, part[i]) }
      test = ""; skipped = 0; reason = ""; nparts = 0; grab = 0
    }
    /^[0-9]+\/[0-9]+ Test: / { flush(); test = $0; sub(/^[0-9]+\/[0-9]+ Test: /, "", test); next }
    test == "" { next }
    # gtest prints "file:line: Skipped", then the message given to GTEST_SKIP.
    grab { if (reason == "") reason = $0; grab = 0; next }
    / Skipped$/ { grab = 1; next }
    /^\[  SKIPPED \] [^0-9]/ { skipped = 1; next }
    /^SLUICE_TEST_SKIPPED: / { skipped = 1; if (reason == "") { reason = $0; sub(/^SLUICE_TEST_SKIPPED: /, "", reason) }; next }
    /^SLUICE_PART_SKIPPED: / { r = $0; sub(/^SLUICE_PART_SKIPPED: /, "", r); seen = 0
                               for (i = 1; i <= nparts; i++) if (part[i] == r) seen = 1
                               if (!seen) part[++nparts] = r; next }
    # A test that failed is not a skip, whatever it printed before failing.
    /^Test Failed\./ { skipped = 0; next }
    END {
      flush()
      if (n == 0) { printf "skips (%s): none\n", build; exit }
      printf "skips (%s): %d test(s) skipped, %d part(s) of passing tests not run:\n", build, skips, parts
      for (i = 1; i <= n; i++) print lines[i]
    }' "$log"
done
exit 0
