#!/usr/bin/env bash
# The same cuFile programs on NVIDIA's libcufile.so.0 and on libsluice_cufile: cuda-python's call
# sequence (tests/cufile/cuda_python_sequence.c) and NVIDIA's samples 007 and error_and_properties
# (tests/cufile/nvidia_samples.c), each built once against Sluice's cufile.h and linked against a
# library named libcufile.so.0, then run with each library first on the loader path. Every
# expectation in them is NVIDIA's; where a program passes on one library and not the other, the
# two differ. Prints one line per program and library, then "parity: N of M".
#
# usage: cufile-parity.sh INCLUDE_DIR SLUICE_LIB_DIR [NVIDIA_LIB_DIR] [WORK_DIR]
#   INCLUDE_DIR     the folder holding Sluice's cufile.h (the kit's include/sluice, or abi/)
#   SLUICE_LIB_DIR  the folder with libsluice_cufile as libcufile.so.0 (the kit's lib/sluice)
#   NVIDIA_LIB_DIR  the folder with NVIDIA's libcufile.so.0 (site-packages/nvidia/cufile/lib);
#                   empty or absent: Sluice's side only
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
include=${1:?usage: cufile-parity.sh INCLUDE_DIR SLUICE_LIB_DIR [NVIDIA_LIB_DIR] [WORK_DIR]}
sluice_dir=${2:?usage: cufile-parity.sh INCLUDE_DIR SLUICE_LIB_DIR [NVIDIA_LIB_DIR] [WORK_DIR]}
nvidia_dir=${3:-}
work=${4:-$(mktemp -d)}
mkdir -p "$work"
# Absolute: the programs run from WORK_DIR.
include=$(cd "$include" && pwd) && sluice_dir=$(cd "$sluice_dir" && pwd) && work=$(cd "$work" && pwd) || exit 1
if [ -n "$nvidia_dir" ]; then nvidia_dir=$(cd "$nvidia_dir" && pwd) || exit 1; fi
cc=${CC:-cc}
# NVIDIA's library without nvidia-fs serves host memory in compatibility mode only where its
# config allows it.
printf '{ "logging": { "level": "ERROR" }, "properties": { "allow_compat_mode": true } }\n' > "$work/cufile.json"

# The programs need libcufile.so.0 (NEEDED), as when built against NVIDIA's library, and bind
# its functions at run time to whichever library the loader finds first. Sluice's drop-in link
# carries libsluice_cufile's own SONAME, so they link against a stand-in with NVIDIA's SONAME
# that defines each cuFile function libsluice_cufile exports (bodies never run).
mkdir -p "$work/link"
nm -D --defined-only "$sluice_dir/libcufile.so.0" | awk '$3 ~ /^cuFile/ { print "void " $3 "(void) {}" }' \
  > "$work/link/stand_in.c"
"$cc" -shared -fPIC -Wl,-soname,libcufile.so.0 -o "$work/link/libcufile.so.0" "$work/link/stand_in.c" || exit 1
build() {  # build NAME SOURCE
  "$cc" -std=c11 -O2 -I"$include" "$here/tests/cufile/$2" -o "$work/$1" -L"$work/link" \
    -l:libcufile.so.0 2>"$work/$1.cc.log" \
    || { echo "cannot build $2: $(tail -n 1 "$work/$1.cc.log")"; return 1; }
}
build sequence cuda_python_sequence.c || exit 1
build samples nvidia_samples.c || exit 1

libraries=(sluice)
[ -n "$nvidia_dir" ] && libraries=(nvidia sluice)
passed=0 total=0 verdicts=""
mkdir -p "$work/run"
for program in "sequence $work/run" "samples 007" "samples error_and_properties"; do
  for lib in "${libraries[@]}"; do
    dir=$sluice_dir; [ "$lib" = nvidia ] && dir=$nvidia_dir
    # shellcheck disable=SC2086  # the program's arguments are words
    out=$(cd "$work" && CUFILE_ENV_PATH_JSON="$work/cufile.json" LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
          timeout 120 "$work/"$program 2>&1)
    rc=$?
    total=$((total + 1))
    if [ "$rc" = 0 ]; then passed=$((passed + 1)); verdict=pass; else verdict="FAIL (exit $rc)"; fi
    verdicts+="$program/$lib:$verdict;"
    printf '%-32s %-7s %s\n' "${program%% /*}" "$lib" "$verdict"
    [ "$rc" = 0 ] || printf '%s\n' "$out" | grep -v '^$' | tail -n 5 | sed 's/^/    /'
  done
done
echo "parity: $passed of $total runs passed"
[ "$passed" = "$total" ]
