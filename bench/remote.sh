#!/usr/bin/env bash
# Remote reads (docs/remote.md) against their peers, over loopback: first sluice against one curl
# stream from nginx, then (when the S3 emulator is built) sluice against the S3 clients that are
# installed, from the same object in s3rver (bench/remote_s3_peers.py: aws s3 cp, rclone
# multi-thread, boto3 download_fileobj, the CRT S3 client).
#
#   bench/remote.sh [BUILD_DIR] [ROUNDS] [SIZE_MIB] [LIMIT_RATE]
#        defaults: build/release, 5 rounds, 512 MiB, no limit; e.g. LIMIT_RATE=20m caps each
#        connection (nginx limit_rate), the way S3 caps each of its connections. SIZE_MIB=2048
#        is issue 35's 2 GiB object (the default is smaller: 2 shared cores, 24 GiB, and the
#        object is in /dev/shm several times over). S3=0 skips the S3 half; S3RVER_MODULES names
#        the node_modules holding @20minutes/s3rver (default: the remote tests' npm ci,
#        BUILD_DIR/tests/remote/s3rver/node_modules, target remote_test_s3rver).
#        IN_FLIGHT=1,4,16,64 PART_SIZES=1M,8M,16M (either or both) adds a sweep of sluice read
#        against nginx: per setting, median GiB/s and request latency p50/p99 (--json).
#
# The object sits in /dev/shm (so the server side is never disk-bound), nginx serves it with
# sendfile on a free port of 127.0.0.1 (master_process off, everything in a temp folder, stopped
# at the end). Per round, in an order that alternates (A B, then B A): curl -o /dev/null, and
# sluice read URL --out /dev/null (defaults: 8 MiB parts, 16 in flight). Printed: median wall
# seconds, GiB/s and CPU seconds (user + system of the process) per GiB, and sluice/curl ratios.
set -euo pipefail
build=${1:-build/release}
rounds=${2:-5}
size_mib=${3:-512}
limit=${4:-}
sluice=$build/bin/sluice
[[ -x $sluice ]] || { echo "no $sluice: build the sluice_cli target first" >&2; exit 2; }
command -v nginx >/dev/null || [[ -x /usr/sbin/nginx ]] || { echo "needs nginx (nginx-light)" >&2; exit 2; }

work=$(mktemp -d /dev/shm/sluice-remote-bench.XXXXXX)
trap '[[ -f $work/nginx.pid ]] && kill "$(cat "$work/nginx.pid")" 2>/dev/null; rm -rf "$work"' EXIT
mkdir -p "$work/www"
head -c "$((size_mib << 20))" /dev/urandom >"$work/www/obj.bin"
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$work/nginx.conf" <<EOF
daemon on;
master_process off;
pid $work/nginx.pid;
error_log $work/error.log;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $work; proxy_temp_path $work; fastcgi_temp_path $work;
  uwsgi_temp_path $work; scgi_temp_path $work;
  sendfile on;
  server { listen 127.0.0.1:$port; root $work/www; ${limit:+limit_rate $limit;} }
}
EOF
nginx -c "$work/nginx.conf" -p "$work" -e "$work/error.log"
url=http://127.0.0.1:$port/obj.bin
for _ in $(seq 50); do curl -s -o /dev/null -r 0-0 "$url" && break; sleep 0.1; done

/usr/bin/python3 - "$rounds" "$size_mib" "$url" "$sluice" "${limit:-none}" <<'EOF'
import os, statistics, subprocess, sys, time
rounds, size_mib, url, sluice, limit = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
cmds = {"curl": ["curl", "-s", "-o", "/dev/null", url],
        "sluice": [sluice, "read", url, "--out", "/dev/null"]}
res = {k: [] for k in cmds}
for r in range(rounds):
    for name in (list(cmds) if r % 2 == 0 else list(reversed(cmds))):
        t0 = time.monotonic()
        p = subprocess.Popen(cmds[name], stdout=subprocess.DEVNULL)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.monotonic() - t0
        assert status == 0, (name, status)
        res[name].append((wall, ru.ru_utime + ru.ru_stime))
gib = size_mib / 1024
print(f"object {size_mib} MiB over loopback from nginx, limit_rate per connection: {limit}, {rounds} interleaved rounds (medians)")
print(f"{'tool':8} {'wall s':>8} {'GiB/s':>8} {'CPU s/GiB':>10}")
med = {}
for name, v in res.items():
    w = statistics.median(x[0] for x in v); c = statistics.median(x[1] for x in v)
    med[name] = (w, c)
    print(f"{name:8} {w:8.3f} {gib / w:8.2f} {c / gib:10.3f}")
print(f"sluice/curl throughput {med['curl'][0] / med['sluice'][0]:.2f}x, CPU per GiB {med['sluice'][1] / max(med['curl'][1], 1e-9):.2f}x")
EOF

if [[ -n ${IN_FLIGHT:-}${PART_SIZES:-} ]]; then
  /usr/bin/python3 - "$rounds" "$size_mib" "$url" "$sluice" "${IN_FLIGHT:-16}" "${PART_SIZES:-8M}" <<'EOF'
import itertools, json, statistics, subprocess, sys
rounds, size_mib, url, sluice = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
cells = list(itertools.product(sys.argv[5].split(","), sys.argv[6].split(",")))
res = {c: [] for c in cells}
for r in range(rounds):  # interleaved: every setting once per round, the order rotating
    for c in cells[r % len(cells):] + cells[:r % len(cells)]:
        out = subprocess.run([sluice, "read", url, "--out", "/dev/null", "--json", "--in-flight",
                              c[0], "--part-size", c[1]], check=True, capture_output=True, text=True)
        res[c].append(json.loads(out.stdout))
print(f"sweep: sluice read of {size_mib} MiB from nginx, {rounds} interleaved rounds (medians)")
print(f"{'in flight':>9} {'part':>5} {'GiB/s':>7} {'p50 ms':>8} {'p99 ms':>8} {'conns':>6}")
for c, v in res.items():
    med = lambda k: statistics.median(k(j) for j in v)
    print(f"{c[0]:>9} {c[1]:>5} {med(lambda j: j['gib_per_s']):7.2f} "
          f"{med(lambda j: j['latency_us']['p50']) / 1e3:8.1f} "
          f"{med(lambda j: j['latency_us']['p99']) / 1e3:8.1f} {med(lambda j: j['connections']):6.0f}")
EOF
fi

# The S3 half: the emulator of the remote tests, its objects in /dev/shm.
modules=${S3RVER_MODULES:-$build/tests/remote/s3rver/node_modules}
if [[ ${S3:-1} == 0 ]]; then exit 0; fi
if [[ ! -f $modules/@20minutes/s3rver/package.json ]] || ! command -v node >/dev/null; then
  echo "S3 peers skipped: no s3rver in $modules (build target remote_test_s3rver) or no node"
  exit 0
fi
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$work/s3"
coproc S3RVER { exec node "$here/tests/remote/s3_server.js" "$modules" "$work/s3"; }
read -r s3port <&"${S3RVER[0]}"
endpoint=http://127.0.0.1:$s3port
/usr/bin/python3 "$here/tests/remote/s3_put.py" "$endpoint" sluice-test obj.bin "$work/www/obj.bin"
rm -f "$work/www/obj.bin"  # the S3 copy is enough from here on (memory)
/usr/bin/python3 "$here/bench/remote_s3_peers.py" "$sluice" "$endpoint" \
  "$here/tests/remote/s3_put.py" "$rounds" "$size_mib" "$work"
