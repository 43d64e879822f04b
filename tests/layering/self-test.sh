#!/usr/bin/env bash
# check-layering.sh must fail on each kind of call it forbids and pass what it allows: a small
# tree is planted in a temporary folder, one violation at a time.
# usage: self-test.sh PATH/TO/check-layering.sh
set -euo pipefail
check=${1:?usage: self-test.sh check-layering.sh}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# A clean tree: everything here is allowed.
plant_clean() {
  rm -rf "$tmp/t"
  mkdir -p "$tmp/t/src/io" "$tmp/t/src/gpu" "$tmp/t/src/transfer" "$tmp/t/capi" "$tmp/t/tools/sluice"
  printf 'int f(int fd) { return ::fdatasync(fd) + ::pread(fd, 0, 0, 0) > 0 && mincore(0, 0, 0); }\n' \
    >"$tmp/t/src/io/ok.cpp"
  printf '#include <cuda.h>\nint g() { return cuInit(0) + cudaSetDevice(0); }\n' >"$tmp/t/src/gpu/ok.cpp"
  cat >"$tmp/t/src/transfer/ok.cpp" <<'SRC'
// fsync(fd) in a comment, and ::pread(fd, ...) too
/* cuMemcpyHtoD(a, b, n) in a block comment
   spanning lines: posix_fadvise(fd, 0, 0, 4) */
const char* s = "cuFileRead(fh) failed; fdatasync(fd) failed";
bool fsync = false;
int h(File& f) { return f.sync(1) + dev.copy_to_device_async(0, 0, 0) + x->pread_at(0); }
SRC
  printf 'CUFILE_API CUfileError_t cuFileDriverOpen(void) { return cufileop_status_error(0) ? ok : no; }\n' \
    >"$tmp/t/capi/own.cpp"
  printf 'cmd->add_flag("--fsync", args->fsync, "fsync FILE");\n' >"$tmp/t/tools/sluice/cmd.cpp"
}

expect() {  # expect RC NAME: run the check on the planted tree
  local want=$1 name=$2 rc=0
  "$check" "$tmp/t" >"$tmp/out" 2>&1 || rc=$?
  if [[ $rc -ne $want ]]; then
    echo "FAIL: $name: exit $rc, want $want"
    sed 's/^/  /' "$tmp/out"
    fail=1
  elif [[ $want -eq 1 ]] && ! grep -q "$3" "$tmp/out"; then
    echo "FAIL: $name: the report does not name $3"
    sed 's/^/  /' "$tmp/out"
    fail=1
  else
    echo "ok: $name"
  fi
}

plant_clean
expect 0 "clean tree"

declare -A planted=(
  [src/transfer/p.cpp]='ssize_t r = ::pread(fd, buf, n, off);'
  [src/transfer/w.cpp]='auto r = pwrite(fd, buf, n, off);'
  [src/doctor/s.cpp]='  ::fdatasync(fd);'
  [src/check/f.cpp]='(void)::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);'
  [src/bench/m.cpp]='if (mincore(p, n, v) != 0) return;'
  [tools/sluice/y.cpp]='if (fsync(fd) != 0) fail();'
  [src/load/u.cpp]='io_uring_submit(&ring);'
  [src/bench/g.cpp]='::sync();'
  [src/transfer/c.cpp]='cuMemcpyHtoDAsync_v2(dst, src, n, stream);'
  [src/load/r.cpp]='cudaMemcpy(dst, src, n, kind);'
  [src/transfer/fi.cpp]='ssize_t r = cuFileRead(fh, buf, n, off, 0);'
  [src/check/i.cpp]='#include <cuda_runtime.h>'
  [capi/cu.cpp]='CUresult r = cuCtxGetCurrent(&ctx);'
)
for f in "${!planted[@]}"; do
  plant_clean
  mkdir -p "$(dirname "$tmp/t/$f")"
  printf '%s\n' "${planted[$f]}" >"$tmp/t/$f"
  expect 1 "planted in $f: ${planted[$f]}" "$f:1:"
done

exit $fail
