#!/bin/sh
# Runs one cuFile example (examples/cufile) on scratch files, as a test: the readers get a
# random input file, the writers an output path; each example checks its own bytes.
# Usage: run-example.sh EXAMPLE_PROGRAM
set -eu
exe=$1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sluice-cufile-example.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
head -c 3000001 /dev/urandom > "$tmp/in.bin"
case $(basename "$exe") in
  read_to_gpu*) "$exe" "$tmp/in.bin" 3000001 --check ;;
  batch_read) "$exe" "$tmp/in.bin" ;;
  write_from_gpu) "$exe" "$tmp/out.bin" 1000003 ;;
  async_stream) "$exe" "$tmp/out.bin" 777777 ;;
  *) echo "run-example.sh: unknown example $exe" >&2; exit 2 ;;
esac
