#!/usr/bin/env bash
# A soak under faults: for a set time, everything a user runs, at once, with faults injected at
# random into every I/O engine (SLUICE_FAULTS, docs/faults.md), and checks that nothing was lost.
#
# What runs concurrently, each in a loop until the time is up:
#   writers  `sluice bench --rw write --verify` on every path: host (library, O_DIRECT), bounce
#            and posix on the simulated device, direct on the fake libcufile (when built), and
#            cpu-only (the raw engine loop); hard faults (EIO, ENOSPC) and soft ones (short
#            transfers, EAGAIN, EINTR, delays) at random.
#   loads    `sluice load --checksum` of a safetensors checkpoint, under the same faults.
#   truncate a reader verifying a file that another loop shrinks and rewrites under it.
#   tiny     writes into a 8 MiB tmpfs that fill it up (root only).
#   kills    a publishing bench killed with SIGKILL and restarted, again and again.
#   stats    `sluice stats --json` polled every second.
#   long     one bench that reads and verifies for the whole soak under soft faults only: its
#            RSS, open fds, threads and staging waits are sampled every interval.
#   s3       objects uploaded by boto3 to the S3 emulator (@20minutes/s3rver, SigV4 checked, as
#            tests/remote starts it), read back by `sluice read s3://...` and Python's
#            `sluice.File("s3://...")` in turn; then the same readers against
#            tests/remote/fault_server.py as the S3 endpoint, each run with its own fault: 503
#            bursts, Retry-After, resets, short bodies, a slow body, a stall, random retryable
#            faults on every request (chaos), and hard ones (500 forever, 403, a wrong
#            Content-Range, the object replaced mid-read with and without If-Match honoured).
#   ranks    2 or 3 gloo processes loading a checkpoint with sluice.distributed.load or
#            sluice.torch.load_file(group=) under hard and soft faults in every rank
#            (bench/soak_lanes.py), compared with a single-process load.
# The checks (the script exits 1 when one fails, naming it):
#   - a run with an injected hard fault failed, with an error naming its file and range
#     ("'FILE' [offset N, M bytes]"); no false success;
#   - a run without one succeeded, with every byte verified (soft faults are retried);
#   - loads that succeed give the reference checksums; the truncated file's reader never reads a
#     wrong byte (it fails with end of file instead);
#   - the long run survives, and its RSS, fds and threads stay flat after the first interval;
#   - no segment of a killed process is left in /dev/shm after the next publisher starts;
#   - s3: every read that succeeds gives the object's bytes; a run with a retryable fault
#     succeeds (chaos may exhaust a part's tries: then the error says "gave up after"); a run
#     with a hard fault fails naming the URL and a range; nothing runs past its timeout (hang);
#   - ranks: without a hard fault every rank's tensors equal the single-process load; with one,
#     every rank fails naming a rank that was given one, the file and a range; no rank dies or
#     hangs.
#
# Files are written with `--verify` (sluice bench's position-dependent pattern), so any reader can
# check any range.
# Usage: bench/soak.sh [--minutes M] [--build DIR] [--dir DIR] [--seed N] [--keep]
#   --minutes  how long (default 30; `make test` runs 2)   --build  the CMake build (build/release)
#   --dir      where the files go (default /var/tmp)       --keep   keep the work folder
set -uo pipefail

minutes=30 build=build/release dir=/var/tmp seed=$RANDOM keep=0
while [ $# -gt 0 ]; do
  case $1 in
    --minutes) minutes=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    *) echo "soak.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
sluice=$(realpath "$build/bin/sluice") || { echo "soak.sh: no $build/bin/sluice (build first)" >&2; exit 2; }
src=$(cd "$(dirname "$0")/.." && pwd)
py=/usr/bin/python3  # Debian's interpreter: the one with boto3 and torch (make deps)
[ -x "$py" ] || py=python3
pymodule=$(realpath "$build/python" 2>/dev/null || true)
s3modules=$(realpath "$build/tests/remote/s3rver/node_modules" 2>/dev/null || true)
fakes=$(realpath "$build/tests/fakes" 2>/dev/null || true)
work=$(mktemp -d "$dir/sluice-soak.XXXXXX")
results=$work/results  # one line per finished run: COMPONENT OUTCOME BYTES
mkdir -p "$work/logs"
: > "$results"
seconds=$(awk -v m="$minutes" 'BEGIN { printf "%d", m * 60 }')
deadline=$(( $(date +%s) + seconds ))
interval=$(( seconds / 6 < 60 ? (seconds / 6 > 5 ? seconds / 6 : 5) : 60 ))
tiny=$work/tiny
servers=""  # pids of the test servers (each also exits when its standard input, our fifo, closes)
cleanup() {
  jobs -p | xargs -r kill 2>/dev/null
  [ -n "$servers" ] && kill $servers 2>/dev/null
  wait 2>/dev/null
  mountpoint -q "$tiny" && umount "$tiny"
  [ "$keep" = 1 ] && echo "soak.sh: kept $work" || rm -rf "$work"
}
trap cleanup EXIT
export SLUICE_STATS=1 SLUICE_DEVICE=sim
hard="eio=0.0005,enospc=0.0005"
soft="short=0.01,eagain=0.01,eintr=0.01,delay=0.002:200us"

alive() { [ "$(date +%s)" -lt "$deadline" ]; }
record() { echo "$*" >> "$results"; }

# Runs one faulted command and classifies it. $1 component, $2 bytes it verifies, $3 the file
# its errors must name, the rest the command. Outcomes: ok, failed_as_injected, false_success,
# unexplained_failure, error_without_range.
faulted_run() {
  local comp=$1 bytes=$2 file=$3; shift 3
  local n; n=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
  local log=$work/logs/$comp.$n.faults out=$work/logs/$comp.$n.out
  SLUICE_FAULTS="$hard,$soft,seed=$n,log=$log" "$@" > "$out" 2>&1
  local rc=$?
  local injected=0
  [ -f "$log" ] && injected=$(grep -cE 'fault=(eio|enospc)' "$log")
  if [ $rc -eq 0 ] && [ "$injected" -eq 0 ]; then
    record "$comp ok $bytes"; rm -f "$out" "$log"
  elif [ $rc -eq 0 ]; then
    record "$comp false_success 0"; echo "FALSE SUCCESS: $comp ($out, $log)" >&2
  elif [ "$injected" -gt 0 ] && grep -qF "'$file' [offset " "$out"; then
    record "$comp failed_as_injected 0"; rm -f "$out"
  elif [ "$injected" -gt 0 ]; then
    record "$comp error_without_range 0"; echo "ERROR WITHOUT FILE AND RANGE: $comp ($out)" >&2
  else
    record "$comp unexplained_failure 0"; echo "UNEXPLAINED FAILURE: $comp ($out)" >&2
  fi
  [ -f "$log" ] && cat "$log" >> "$work/all.faults" && rm -f "$log"
}

writer() {  # $1 name, the rest: bench options choosing the path
  local name=$1; shift
  local f=$work/$name.dat
  while alive; do
    faulted_run "$name" $((32 << 20)) "$f" "$sluice" bench --file "$f" --size 32M --rw write --verify \
      --block-size 1M --iodepth 4 "$@"
  done
}

loads() {
  python3 - "$work/ckpt.safetensors" <<'PY'
import json, struct, sys, os
tensors, blobs, off = {}, [], 0
for i in range(12):
    n = (i + 1) * 1_000_003  # odd sizes: unaligned tensor boundaries
    blob = os.urandom(n * 2)
    tensors[f"layer.{i}.weight"] = {"dtype": "F16", "shape": [n], "data_offsets": [off, off + len(blob)]}
    blobs.append(blob); off += len(blob)
header = json.dumps(tensors).encode()
header += b" " * (-len(header) % 8)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(header))); f.write(header)
    for b in blobs: f.write(b)
PY
  local ck=$work/ckpt.safetensors
  SLUICE_STATS=0 "$sluice" load "$ck" --memory host --checksum > "$work/reference.sums" 2>&1 ||
    { record "load reference_failed 0"; return; }
  local size; size=$(stat -c %s "$ck")
  while alive; do
    local n; n=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
    local log=$work/logs/load.$n.faults out=$work/logs/load.$n.out
    # --host-load read: the checkpoint is cached, and a mapped load reads nothing to inject into.
    SLUICE_FAULTS="$hard,$soft,seed=$n,log=$log" "$sluice" load "$ck" --memory host --host-load read --checksum > "$out" 2>&1
    local rc=$? injected=0
    [ -f "$log" ] && injected=$(grep -cE 'fault=(eio|enospc)' "$log")
    if [ $rc -eq 0 ] && [ "$injected" -eq 0 ] && diff -q <(awk '$1 ~ /^layer/ {print $1, $5}' "$work/reference.sums") \
         <(awk '$1 ~ /^layer/ {print $1, $5}' "$out") >/dev/null; then
      record "load ok $size"; rm -f "$out"
    elif [ $rc -eq 0 ] && [ "$injected" -eq 0 ]; then
      record "load wrong_bytes 0"; echo "WRONG BYTES: load ($out)" >&2
    elif [ $rc -eq 0 ]; then
      record "load false_success 0"; echo "FALSE SUCCESS: load ($out, $log)" >&2
    elif [ "$injected" -gt 0 ] && grep -qF "[offset " "$out"; then
      record "load failed_as_injected 0"; rm -f "$out"
    else
      record "load unexplained_failure 0"; echo "UNEXPLAINED FAILURE: load ($out)" >&2
    fi
    [ -f "$log" ] && cat "$log" >> "$work/all.faults" && rm -f "$log"
  done
}

truncator() {  # shrinks the file, then rewrites the pattern in order (queue depth 1: no holes)
  local f=$work/shrinking.dat
  while alive; do
    truncate -s $(( (RANDOM % 24 + 8) << 20 )) "$f" 2>/dev/null
    SLUICE_STATS=0 "$sluice" bench --file "$f" --size 32M --rw write --verify --block-size 1M --iodepth 1 >/dev/null 2>&1
    sleep 1  # readers get whole files too, not only shrinking ones
  done
}

truncated_reader() {
  local f=$work/shrinking.dat
  SLUICE_STATS=0 "$sluice" bench --file "$f" --size 32M --rw write --verify --block-size 1M >/dev/null 2>&1
  truncator &
  while alive; do
    local out=$work/logs/shrink.$RANDOM.out
    if "$sluice" bench --file "$f" --rw read --verify --block-size 1M --iodepth 4 > "$out" 2>&1; then
      record "truncate ok 0"; rm -f "$out"
    elif grep -q "mismatch" "$out"; then
      record "truncate wrong_bytes 0"; echo "WRONG BYTES under truncation ($out)" >&2
    elif grep -qF "'$f' [offset " "$out"; then
      record "truncate failed_as_shrunk 0"; rm -f "$out"
    else
      record "truncate unexplained_failure 0"; echo "UNEXPLAINED FAILURE under truncation ($out)" >&2
    fi
  done
}

tiny_fs() {
  mkdir -p "$tiny"
  if [ "$(id -u)" != 0 ] || ! mount -t tmpfs -o size=8m tmpfs "$tiny" 2>/dev/null; then
    echo "soak.sh: not root or no tmpfs mount: the tiny file system part is skipped" >&2
    return
  fi
  while alive; do
    local out=$work/logs/tiny.$RANDOM.out
    if "$sluice" bench --file "$tiny/big.dat" --size 16M --rw write --block-size 1M > "$out" 2>&1; then
      record "tiny false_success 0"; echo "FALSE SUCCESS: 16 MiB into an 8 MiB file system ($out)" >&2
    elif grep -q "No space left" "$out" && grep -qF "'$tiny/big.dat'" "$out"; then
      record "tiny failed_as_full 0"; rm -f "$out"
    else
      record "tiny unexplained_failure 0"; echo "UNEXPLAINED FAILURE: tiny ($out)" >&2
    fi
    rm -f "$tiny/big.dat"
    if "$sluice" bench --file "$tiny/small.dat" --size 4M --rw write --verify --block-size 1M > "$out" 2>&1; then
      record "tiny ok $((4 << 20))"; rm -f "$out"
    else
      record "tiny unexplained_failure 0"; echo "UNEXPLAINED FAILURE: 4 MiB into tiny ($out)" >&2
    fi
    rm -f "$tiny/small.dat"
  done
}

killer() {
  local f=$work/killed.dat previous=""
  SLUICE_STATS=0 "$sluice" bench --file "$f" --size 16M --rw write --block-size 1M >/dev/null 2>&1
  while alive; do
    "$sluice" bench --file "$f" --rw read --time 60 >/dev/null 2>&1 &
    local pid=$!
    for _ in $(seq 100); do [ -e "/dev/shm/sluice-stats.$pid" ] && break; sleep 0.05; done
    if [ -n "$previous" ] && [ -e "/dev/shm/sluice-stats.$previous" ]; then
      record "kill stale_segment_left 0"; echo "STALE SEGMENT of killed pid $previous left" >&2
    elif [ -n "$previous" ]; then
      record "kill segment_removed 0"
    fi
    sleep "0.$((RANDOM % 9 + 1))"
    kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
    previous=$pid
  done
}

poller() {
  while alive; do
    if "$sluice" stats --json 2>/dev/null | python3 -c 'import json,sys; json.load(sys.stdin)'; then
      record "stats ok 0"
    else
      record "stats failed 0"; echo "sluice stats --json failed or printed bad JSON" >&2
    fi
    sleep 1
  done
}

# Starts a test server that prints its port and exits when its standard input closes: its input is
# a fifo this shell holds open (and cleanup kills it). $1 name, the rest the command. Sets port.
start_server() {
  local name=$1 fd; shift
  mkfifo "$work/$name.in"
  "$@" < "$work/$name.in" > "$work/$name.port" 2> "$work/logs/$name.server.log" &
  servers+=" $!"
  exec {fd}> "$work/$name.in"
  for _ in $(seq 600); do
    [ -s "$work/$name.port" ] && { port=$(head -1 "$work/$name.port"); return 0; }
    sleep 0.1
  done
  return 1
}

# One read of an s3:// URL. $1 component, $2 endpoint, $3 URL, $4 the file it must equal, $5 what
# the run's fault allows (ok: none or retryable; chaos: may exhaust a part's tries; hard: must
# fail), $6 the reader (cli or py).
remote_run() {
  local comp=$1 endpoint=$2 url=$3 ref=$4 expect=$5 reader=$6
  local out=$work/logs/$comp.$reader.$RANDOM.out got=$work/$comp.got rc outcome
  if [ "$reader" = cli ]; then
    AWS_ENDPOINT_URL=$endpoint timeout 180 "$sluice" read "$url" --out "$got" > "$out" 2>&1
    rc=$?
    outcome=failed
    [ $rc -eq 0 ] && { cmp -s "$got" "$ref" && outcome=ok || outcome=wrong_bytes; }
  else
    AWS_ENDPOINT_URL=$endpoint PYTHONPATH=$pymodule timeout 180 "$py" "$src/bench/soak_lanes.py" file "$url" "$ref" \
      > "$out" 2>&1
    rc=$?
    outcome=$(awk 'NR == 1 {print $1}' "$out")
    [ $rc -eq 0 ] || outcome=failed
  fi
  rm -f "$got"
  [ $rc -eq 124 ] && outcome=hang
  case $outcome/$expect in
    ok/hard) record "$comp false_success 0"; echo "FALSE SUCCESS: $comp $url ($out)" >&2 ;;
    ok/*) record "$comp ok $(stat -c %s "$ref")"; rm -f "$out" ;;
    wrong_bytes/*) record "$comp wrong_bytes 0"; echo "WRONG BYTES: $comp $url ($out)" >&2 ;;
    hang/*) record "$comp hang 0"; echo "HANG: $comp $url did not finish in 180 s ($out)" >&2 ;;
    failed/ok) record "$comp unexplained_failure 0"; echo "UNEXPLAINED FAILURE: $comp $url ($out)" >&2 ;;
    failed/*)
      if grep -qF "'$url' [offset " "$out" && { [ "$expect" = hard ] || grep -q "gave up after" "$out"; }; then
        record "$comp failed_as_injected 0"; rm -f "$out"
      else
        record "$comp error_without_range 0"; echo "ERROR WITHOUT URL AND RANGE: $comp $url ($out)" >&2
      fi ;;
    *) record "$comp unexplained_failure 0"; echo "UNEXPLAINED FAILURE: $comp $url ($out)" >&2 ;;
  esac
}

# s3:// reads: the emulator (SigV4 checked, no faults), then the fault server as the S3 endpoint.
remote() {
  local s3=$1 faults=$2 i=0 reader fault expect
  local recoverable="ok chaos chaos chaos chaos burst503 retryafter reset short shortlen burst503 reset short shortlen slow stall"
  local hardfaults="always500 denied badrange replaced replaced412"
  local -a picks=($recoverable $hardfaults)
  while alive; do
    i=$((i + 1))
    reader=$([ $((i % 2)) = 0 ] && echo py || echo cli)
    head -c $(( (RANDOM % 24 << 20) + RANDOM * 7 + 1 )) /dev/urandom > "$work/s3obj.bin"
    if "$py" "$src/tests/remote/s3_put.py" "$s3" sluice-test "soak/obj $i" "$work/s3obj.bin" \
        > "$work/logs/s3put.out" 2>&1; then
      remote_run s3 "$s3" "s3://sluice-test/soak/obj $i" "$work/s3obj.bin" ok "$reader"
    else
      record "s3 upload_failed 0"; echo "soak.sh: boto3 could not upload ($work/logs/s3put.out)" >&2
    fi
    alive || break
    fault=${picks[RANDOM % ${#picks[@]}]}
    case " $hardfaults " in *" $fault "*) expect=hard ;; *) expect=ok ;; esac
    [ "$fault" = chaos ] && expect=chaos
    remote_run s3-faults "$faults" "s3://$fault-$i/obj" "$work/remote.bin" "$expect" "$reader"
  done
}

remote_lane() {
  local why=""
  [ -n "$s3modules" ] && [ -d "$s3modules/@20minutes/s3rver" ] || why="no $build/tests/remote/s3rver (build remote_test_s3rver)"
  command -v node >/dev/null || why="no node"
  "$py" -c 'import boto3' 2>/dev/null || why="no boto3 for $py"
  PYTHONPATH=$pymodule "$py" -c 'import sluice' 2>/dev/null || why="no sluice Python module in $build/python"
  if [ -n "$why" ]; then echo "soak.sh: $why: the s3 lane is skipped" >&2; return; fi
  mkdir -p "$work/s3rver"
  head -c $(( (20 << 20) + 12345 )) /dev/urandom > "$work/remote.bin"
  local port s3port fport
  start_server s3rver node "$src/tests/remote/s3_server.js" "$s3modules" "$work/s3rver" && s3port=$port &&
    start_server faultserver "$py" "$src/tests/remote/fault_server.py" "$work/remote.bin" && fport=$port ||
    { record "s3 server_failed 0"; echo "soak.sh: a test server did not start ($work/logs)" >&2; return; }
  # 1 MiB parts, 4 in flight: many requests per object, so many faults per run.
  AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER SLUICE_REMOTE_PART_SIZE=1M \
    SLUICE_REMOTE_IN_FLIGHT=4 remote "http://127.0.0.1:$s3port" "http://127.0.0.1:$fport" &
}

# Multi-rank loads under faults: each run its own processes (bench/soak_lanes.py ranks).
ranks() {
  local ck=$work/ranks.safetensors i=0
  if ! "$py" -c 'import torch.distributed' 2>/dev/null || ! PYTHONPATH=$pymodule "$py" -c 'import sluice.distributed' 2>/dev/null; then
    echo "soak.sh: no torch.distributed or sluice module for $py: the ranks lane is skipped" >&2
    return
  fi
  "$py" - "$ck" <<'PY'
import json, struct, sys, os
tensors, blobs, off = {}, [], 0
for i in range(7):
    n = (i + 1) * 300_007  # odd sizes: unaligned tensor boundaries
    blob = os.urandom(n * 2)
    tensors[f"layer.{i}.weight"] = {"dtype": "F16", "shape": [n], "data_offsets": [off, off + len(blob)]}
    blobs.append(blob); off += len(blob)
header = json.dumps(tensors).encode()
header += b" " * (-len(header) % 8)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(header))); f.write(header)
    for b in blobs: f.write(b)
PY
  while alive; do
    i=$((i + 1))
    local world=$((2 + i % 2)) api d=$work/ranks.$i out=$work/logs/ranks.$i.out
    api=$([ $(( (i / 2) % 2 )) = 0 ] && echo distributed || echo load_file)
    mkdir -p "$d"
    # eio 1% a request: about a run in four fails somewhere (the reads are few and large).
    PYTHONPATH=$pymodule timeout 300 "$py" "$src/bench/soak_lanes.py" ranks "$ck" "$world" "$api" "$d" \
      "eio=0.01,$soft" 120 > "$out" 2>&1
    local outcome bytes
    read -r outcome bytes < <(head -1 "$out")
    case $outcome in
      ok|failed_as_injected|false_success|wrong_bytes|error_without_range|unexplained_failure|rank_died|hang) ;;
      *) outcome=unexplained_failure bytes=0 ;;
    esac
    record "ranks $outcome ${bytes:-0}"
    cat "$d"/rank*.faults >> "$work/all.faults" 2>/dev/null
    case $outcome in
      ok|failed_as_injected) rm -rf "$d" "$out" ;;
      *) echo "$(echo "$outcome" | tr a-z_ A-Z\ ): ranks run $i ($out)" >&2 ;;
    esac
  done
}

sample() {  # PID: rss_kib fds threads
  local p=$1
  [ -d "/proc/$p" ] || { echo "gone"; return; }
  echo "$(awk '/^VmRSS/ {print $2}' "/proc/$p/status") $(ls "/proc/$p/fd" | wc -l) $(awk '/^Threads/ {print $2}' "/proc/$p/status")"
}

echo "soak: $minutes min, seed $seed, work in $work, samples every $interval s"
SLUICE_STATS=0 "$sluice" bench --file "$work/long.dat" --size 64M --rw write --verify --block-size 1M >/dev/null 2>&1
SLUICE_FAULTS="$soft,seed=$seed,log=$work/long.faults" "$sluice" bench --file "$work/long.dat" --rw read \
  --verify --block-size 1M --iodepth 8 --threads 2 --time $((seconds + 5)) > "$work/long.out" 2>&1 &
long=$!

writer host --xfer gpu-direct --memory pageable &
writer bounce --xfer gpu-direct &
writer posix --xfer cpu-gpu &
writer engine --xfer cpu-only &
if [ -n "$fakes" ] && [ -e "$fakes/cufile/lib/libcufile.so.0" ]; then
  SLUICE_LIBCUFILE=$fakes/cufile/lib/libcufile.so.0 SLUICE_LIBCUDA=$fakes/cuda/lib/libcuda.so.1 FAKE_CUDA_DEVICES=1 \
    writer direct --xfer gpu-direct --device cuda:0 &
else
  echo "soak.sh: no fake libcufile in $build: the direct path is not soaked" >&2
fi
loads &
truncated_reader &
tiny_fs &
killer &
poller &
remote_lane  # not in the background: this shell holds the servers' input
ranks &

printf '%8s %10s %5s %8s %9s %s\n' "t (s)" "RSS KiB" "fds" "threads" "segments" "runs by outcome so far"
start=$(date +%s) first="" last=""
while alive; do
  sleep "$interval"
  s=$(sample "$long")
  [ -z "$first" ] && first=$s
  [ "$s" != gone ] && last=$s
  segs=$(ls /dev/shm | grep -c '^sluice-stats\.')
  summary=$(awk '{n[$2]++} END {for (k in n) printf "%s=%d ", k, n[k]}' "$results")
  printf '%8d %10s %5s %8s %9s %s\n' $(( $(date +%s) - start )) $s "$segs" "$summary"
done
wait "$long"; long_rc=$?
served=""  # asked before the servers are stopped with the other jobs
[ -s "$work/faultserver.port" ] &&
  served=$(curl -s "http://127.0.0.1:$(head -1 "$work/faultserver.port")/injected" | awk '{printf "%s %s  ", $1, $2}')
jobs -p | xargs -r kill 2>/dev/null
wait 2>/dev/null

echo
echo "== summary ($minutes min, seed $seed)"
awk '{runs[$1]++; out[$1" "$2]++; bytes+=$3} END {
  for (k in out) printf "  %-32s %d\n", k, out[k]; printf "  verified bytes: %.1f GiB\n", bytes / 2^30 }' "$results" | sort
awk '$1 ~ /^s3/ {s3 += $3} $1 == "ranks" {ranks += $3} END {
  printf "  of which s3 (emulator and fault server): %.2f GiB; ranks (every rank counted): %.2f GiB\n", s3 / 2^30, ranks / 2^30 }' "$results"
cat "$work/long.faults" >> "$work/all.faults" 2>/dev/null
echo "  faults injected: $(awk '{print $2}' "$work/all.faults" 2>/dev/null | sort | uniq -c | awk '{printf "%s %s  ", $2, $1}')"
[ -n "$served" ] && echo "  remote faults served (fault server, by kind): $served"
echo "  hard faults (eio, enospc, remote) surfaced: $(grep -c ' failed_as_injected ' "$results") runs failed naming file and range;" \
  "$(grep -c ' false_success ' "$results") false successes"
echo "  long run: exit $long_rc; RSS KiB, fds, threads first sample: $first, last: $last"
tail -2 "$work/long.out" | sed 's/^/    /'

failures=""
grep -qE ' (false_success|wrong_bytes|unexplained_failure|error_without_range|stale_segment_left|failed|reference_failed|hang|rank_died|upload_failed|server_failed) ' "$results" &&
  failures+="bad outcomes above; "
[ "$long_rc" -eq 0 ] || failures+="the long run exited $long_rc; "
if [ -n "$first" ] && [ -n "$last" ]; then
  read -r rss0 fd0 th0 <<< "$first"
  read -r rss1 fd1 th1 <<< "$last"
  [ "$rss1" -le $(( rss0 + rss0 / 10 + 8192 )) ] || failures+="RSS grew from $rss0 to $rss1 KiB; "
  [ "$fd1" -le "$fd0" ] || failures+="fds grew from $fd0 to $fd1; "
  [ "$th1" -le "$th0" ] || failures+="threads grew from $th0 to $th1; "
fi
for comp in host bounce posix engine load; do
  grep -q "^$comp ok " "$results" || failures+="no successful $comp run; "
done
# Where the lane ran (it says so above when it is skipped) 4 runs or more: a run of these lanes
# takes seconds, and a third of the faulted ones may fail as injected.
for comp in s3 s3-faults ranks; do
  [ "$(grep -c "^$comp " "$results")" -ge 4 ] && ! grep -q "^$comp ok " "$results" && failures+="no successful $comp run; "
done
if [ -n "$failures" ]; then
  echo "soak: FAILED: $failures"
  keep=1
  exit 1
fi
echo "soak: passed"
