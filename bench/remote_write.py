#!/usr/bin/python3
"""Uploads to S3 (docs/remote.md, "Writing to S3"): `sluice write FILE s3://...` against boto3's
upload_file (s3transfer: multipart, 8 MiB parts, 10 threads), over loopback to the emulator
@20minutes/s3rver (the one the tests use; a Node server that checks signatures and writes every
part to its store, so it is the bottleneck: the figures compare the clients' CPU and their
throughput against one slow server, not what S3 would take).

    bench/remote_write.py [BUILD_DIR] [ROUNDS] [SIZE_MIB]
        defaults: build/release, 5 rounds, 256 MiB

The file and the emulator's store sit in /dev/shm. Per round, in an order that alternates (A B,
then B A), each client uploads the same file to a fresh key. Printed: median wall seconds, MiB/s
and client CPU seconds (user + system of the process) per GiB, and the sluice/boto3 ratios."""
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

build = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "build/release").resolve()
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
size_mib = int(sys.argv[3]) if len(sys.argv) > 3 else 256
sluice = build / "bin" / "sluice"
modules = build / "tests" / "remote" / "s3rver" / "node_modules"
server_js = pathlib.Path(__file__).resolve().parents[1] / "tests" / "remote" / "s3_server.js"
if not sluice.exists() or not (modules / "@20minutes" / "s3rver").exists():
    sys.exit(f"needs {sluice} and {modules}/@20minutes/s3rver: build sluice_cli and remote_test first")

BOTO3 = """
import sys, boto3
from botocore.config import Config
s3 = boto3.client("s3", endpoint_url=sys.argv[1], region_name="us-east-1", aws_access_key_id="S3RVER",
                  aws_secret_access_key="S3RVER", config=Config(signature_version="s3v4", s3={"addressing_style": "path"}))
s3.upload_file(sys.argv[2], "sluice-test", sys.argv[3])
"""


def timed(argv, env):
    """Wall seconds and CPU seconds (user + system) of one command."""
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    if status != 0:
        sys.exit(f"{argv[0]} failed (status {status})")
    return wall, usage.ru_utime + usage.ru_stime


def main():
    work = pathlib.Path(tempfile.mkdtemp(dir="/dev/shm", prefix="sluice-remote-write-"))
    server = None
    try:
        (work / "store").mkdir()
        obj = work / "obj.bin"
        with open(obj, "wb") as f:
            for _ in range(size_mib):
                f.write(os.urandom(1 << 20))
        server = subprocess.Popen(["node", str(server_js), str(modules), str(work / "store")],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        endpoint = f"http://127.0.0.1:{int(server.stdout.readline())}"
        env = dict(os.environ, AWS_ENDPOINT_URL=endpoint, AWS_REGION="us-east-1",
                   AWS_ACCESS_KEY_ID="S3RVER", AWS_SECRET_ACCESS_KEY="S3RVER")
        clients = {
            "sluice write": lambda key: [str(sluice), "write", str(obj), f"s3://sluice-test/{key}"],
            "boto3 upload_file": lambda key: ["/usr/bin/python3", "-c", BOTO3, endpoint, str(obj), key],
        }
        results = {name: [] for name in clients}
        for r in range(rounds):
            order = list(clients) if r % 2 == 0 else list(reversed(clients))
            for name in order:
                results[name].append(timed(clients[name](f"r{r}-{name.split()[0]}"), env))
                for p in (work / "store" / "sluice-test").iterdir():  # the object, not the bucket
                    if p.is_file():
                        p.unlink()
        gib = size_mib / 1024
        print(f"{size_mib} MiB, {rounds} rounds, s3rver on {endpoint}; medians")
        print(f"{'client':20} {'wall s':>8} {'MiB/s':>8} {'CPU s/GiB':>10}")
        med = {}
        for name, rs in results.items():
            wall = statistics.median(w for w, _ in rs)
            cpu = statistics.median(c for _, c in rs) / gib
            med[name] = (wall, cpu)
            print(f"{name:20} {wall:8.2f} {size_mib / wall:8.1f} {cpu:10.2f}")
        (ws, cs), (wb, cb) = med["sluice write"], med["boto3 upload_file"]
        print(f"sluice/boto3: throughput {wb / ws:.2f}x, CPU per GiB {cs / cb:.2f}x")
    finally:
        if server is not None:
            server.stdin.close()
            server.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
