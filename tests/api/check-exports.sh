#!/usr/bin/env bash
# What a Sluice library exports, checked against two rules.
#
# 1. The public API's names only. For libsluice and libsluice_tools, every exported (dynamic,
#    defined) symbol is a name of namespace sluice that is not in sluice::detail. Demangled, a
#    symbol's name is what precedes its parameter list, after the prefix that says what kind of
#    object it is ("vtable for ", "typeinfo for ", "typeinfo name for ", "guard variable for ",
#    "VTT for ", "non-virtual thunk to ", "virtual thunk to "); that name must start with
#    "sluice::" and must not start with "sluice::detail::". So fmt::, nlohmann::, std:: (a
#    template instantiated over an exported type included), a C name, a sluice::detail:: helper
#    and anything the linker adds fail the check. For a C ABI library (--c-abi:
#    libsluice_cufile) every symbol is a C name instead: no C++ name at all.
# 2. No internals anywhere in a symbol: no detail:: namespace (sluice's or another's; not
#    libstdc++'s __detail) and no class named Impl, in the name, its parameter types or its
#    template arguments. A public name that takes an internal type (StreamGate's constructor
#    from detail::GateSlots) or a member of a class's private implementation (Loader::Impl, which
#    a SLUICE_API class would export with its members) is ABI nobody outside can use, and would
#    pin the internals' layout to the library's version.
#
# Hidden visibility, SLUICE_API (include/sluice/export.hpp) and the version scripts
# (src/libsluice.map, capi/libsluice_cufile.map) decide what is exported; this check is what
# keeps the answer honest.
#
# usage: check-exports.sh [--c-abi] LIBRARY [FORBIDDEN_NEEDED_REGEX]
#          LIBRARY's exported symbols; with a regex, also fails when a DT_NEEDED entry of
#          LIBRARY matches it (libsluice must not load MPI or hwloc).
#        check-exports.sh [--c-abi] --names FILE
#          judges the demangled names in FILE, one a line, instead (the self-test).
# Prints each offending symbol and exits 1; prints the count of exported symbols and exits 0
# when all pass; exits 2 on bad usage.
set -euo pipefail
c_abi=0
if [[ ${1:-} == --c-abi ]]; then c_abi=1; shift; fi
if [[ ${1:-} == --names ]]; then
  names=$(cat "${2:?usage: check-exports.sh [--c-abi] --names FILE}")
  what=${2}
else
  lib=${1:?usage: check-exports.sh [--c-abi] LIBRARY [FORBIDDEN_NEEDED_REGEX]}
  [[ -f $lib ]] || { echo "check-exports: no such library: $lib" >&2; exit 2; }
  # nm -D --defined-only: the dynamic symbols the library defines; -C demangles; the name is
  # what follows the value and the type letter.
  names=$(nm -D --defined-only -C "$lib" | sed -E 's/^[0-9a-f]* *[A-Za-z] //')
  what=$lib
  if [[ -n ${2:-} ]]; then
    needed=$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
    if bad_needed=$(grep -E "$2" <<<"$needed"); then
      echo "check-exports: $lib loads what it must not: $bad_needed" >&2
      exit 1
    fi
  fi
fi
bad=$(C_ABI=$c_abi perl -ne '
  chomp; my $sym = $_; next if $sym eq "";
  if ($sym =~ /(?<![A-Za-z0-9_])detail::|::Impl(?![A-Za-z0-9_])/) {
    print "$sym  (internal: detail:: or Impl)\n"; next;
  }
  if ($ENV{C_ABI}) {
    print "$sym  (not a C name)\n" unless $sym =~ /^[A-Za-z_][A-Za-z0-9_]*$/;
    next;
  }
  my $name = $sym;
  $name =~ s/^(?:(?:construction )?vtable for |typeinfo (?:name )?for |guard variable for |VTT for |(?:non-)?virtual thunk to )//;
  $name =~ s/\(.*//s;  # the parameter list, and what follows it
  print "$sym  (outside namespace sluice)\n" unless $name =~ /^sluice::/;
' <<<"$names")
count=$(grep -c . <<<"$names" || true)
if [[ -n $bad ]]; then
  n=$(grep -c . <<<"$bad")
  echo "check-exports: $what exports $n of its $count symbols outside the public API:" >&2
  echo "$bad" | head -100 >&2
  exit 1
fi
if ((c_abi)); then
  echo "check-exports: $what: $count exported symbols, all C names"
else
  echo "check-exports: $what: $count exported symbols, all in namespace sluice, none internal"
fi
