#!/usr/bin/env bash
# check-exports.sh must fail on each kind of symbol that is not public API, and pass a list of
# public ones: a check that cannot fail would prove nothing.
# usage: self-test.sh CHECK_EXPORTS_SH
set -euo pipefail
check=${1:?usage: self-test.sh CHECK_EXPORTS_SH}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sluice-api-self-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# Passes MODE's good names, then refuses each bad one added to them, naming it.
# usage: judge MODE_FLAGS GOOD_ARRAY BAD_ARRAY
judge() {
  local -n good_names=$2 bad_names=$3
  local flags=$1 name out
  printf '%s\n' "${good_names[@]}" > "$tmp/good"
  # shellcheck disable=SC2086
  bash "$check" $flags --names "$tmp/good" >/dev/null || {
    echo "self-test: the public names were refused (${flags:-C++})" >&2; exit 1; }
  for name in "${bad_names[@]}"; do
    printf '%s\n' "${good_names[@]}" "$name" > "$tmp/bad"
    # shellcheck disable=SC2086
    if out=$(bash "$check" $flags --names "$tmp/bad" 2>&1); then
      echo "self-test: '$name' passed the check" >&2; exit 1
    fi
    grep -qF -- "$name" <<<"$out" || { echo "self-test: the check failed without naming '$name': $out" >&2; exit 1; }
  done
}

good=(
  'sluice::read(sluice::File const&, void*, unsigned long, unsigned long, sluice::TransferOptions const&)'
  'vtable for sluice::Device'
  'typeinfo for sluice::Error'
  'typeinfo name for sluice::IoEngine'
  'sluice::StreamGate::StreamGate(sluice::StreamGate&&)'
  'sluice::bench::run_plan(sluice::bench::Plan const&)'
  'non-virtual thunk to sluice::FaultyEngine::wake()'
  'sluice::Loader::Loader(std::shared_ptr<sluice::Dataset const>, sluice::IngestOptions)'
  'sluice::ImplicitOrder::next()'
  'sluice::f(std::__detail::_Node_iterator<int, false, false>)'
)
bad=(
  'sluice::detail::CuFile::instance()'
  'sluice::StreamGate::StreamGate(std::shared_ptr<sluice::detail::GateSlots>, unsigned int, unsigned int)'
  'sluice::Loader::Impl::set_state(sluice::detail::ProducerState)'
  'sluice::Loader::Impl::Impl(std::shared_ptr<sluice::Dataset const>, sluice::IngestOptions)'
  'typeinfo for sluice::Stream::Impl'
  'sluice::Stream::Stream(std::unique_ptr<sluice::Stream::Impl, std::default_delete<sluice::Stream::Impl> >)'
  'fmt::v9::format_error::~format_error()'
  'nlohmann::json_abi_v3_11_2::detail::exception::what() const'
  'std::vector<sluice::Entry, std::allocator<sluice::Entry> >::_M_realloc_insert(sluice::Entry&&)'
  'void std::__cxx11::basic_string<char>::_M_construct<char const*>(char const*, char const*)'
  'typeinfo for std::_Sp_counted_ptr_inplace<sluice::detail::SimDevice, std::allocator<void>, (__gnu_cxx::_Lock_policy)2>'
  'guard variable for sluice::detail::cu::driver()::api'
  'cuFileRead'
  '_end'
)
judge "" good bad

c_good=(cuFileRead cuFileDriverOpen cuFileHandleRegister cuFileBatchIOSubmit)
c_bad=(
  'sluice::detail::CuFile::instance()'
  'sluice::Loader::Impl::produce()'
  'sluice::to_cufile_result(sluice::Error const&)'
  'typeinfo for sluice::Error'
  'std::vector<int, std::allocator<int> >::~vector()'
)
judge --c-abi c_good c_bad
echo "self-test: check-exports.sh passed ${#good[@]} public names and refused each of ${#bad[@]} others;" \
     "as --c-abi, passed ${#c_good[@]} C names and refused each of ${#c_bad[@]} others"
