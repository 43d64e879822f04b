#!/usr/bin/env bash
# check-exports.sh must fail on each kind of symbol that is not public API, and pass a list of
# public ones: a check that cannot fail would prove nothing.
# usage: self-test.sh CHECK_EXPORTS_SH
set -euo pipefail
check=${1:?usage: self-test.sh CHECK_EXPORTS_SH}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sluice-api-self-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
good=(
  'sluice::read(sluice::File const&, void*, unsigned long, unsigned long, sluice::TransferOptions const&)'
  'vtable for sluice::Device'
  'typeinfo for sluice::Error'
  'typeinfo name for sluice::IoEngine'
  'sluice::StreamGate::StreamGate(std::shared_ptr<sluice::detail::GateSlots>, unsigned int, unsigned int)'
  'sluice::bench::run_plan(sluice::bench::Plan const&)'
  'non-virtual thunk to sluice::FaultyEngine::wake()'
)
bad=(
  'sluice::detail::CuFile::instance()'
  'fmt::v9::format_error::~format_error()'
  'nlohmann::json_abi_v3_11_2::detail::exception::what() const'
  'std::vector<sluice::Entry, std::allocator<sluice::Entry> >::_M_realloc_insert(sluice::Entry&&)'
  'void std::__cxx11::basic_string<char>::_M_construct<char const*>(char const*, char const*)'
  'typeinfo for std::_Sp_counted_ptr_inplace<sluice::detail::SimDevice, std::allocator<void>, (__gnu_cxx::_Lock_policy)2>'
  'guard variable for sluice::detail::cu::driver()::api'
  'cuFileRead'
  '_end'
)
printf '%s\n' "${good[@]}" > "$tmp/good"
bash "$check" --names "$tmp/good" >/dev/null || { echo "self-test: the public names were refused" >&2; exit 1; }
for name in "${bad[@]}"; do
  printf '%s\n' "${good[@]}" "$name" > "$tmp/bad"
  if out=$(bash "$check" --names "$tmp/bad" 2>&1); then
    echo "self-test: '$name' passed the check" >&2; exit 1
  fi
  grep -qF -- "$name" <<<"$out" || { echo "self-test: the check failed without naming '$name': $out" >&2; exit 1; }
done
echo "self-test: check-exports.sh passed ${#good[@]} public names and refused each of ${#bad[@]} others"
