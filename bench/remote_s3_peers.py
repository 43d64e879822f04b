#!/usr/bin/python3
"""The S3 half of bench/remote.sh: one object in the S3 emulator (@20minutes/s3rver, the remote
tests' one), read to a file in /dev/shm by each S3 client that is installed, in interleaved rounds
(the order rotates each round). Peers: sluice read of a presigned URL (s3:// itself is another
helper's work), curl of the same URL (one stream), aws s3 cp (awscli), rclone copyto with
multi-thread streams, boto3 download_fileobj, and the CRT S3 client (python3-awscrt) when it runs
(Debian's 0.16.8 ignores the port of the Host header and is refused on port 80: left out).
A peer that is missing or fails its first round is left out with the reason printed.
Printed: median wall seconds, GiB/s, CPU seconds (user + system of the process and its children)
per GiB, and each peer's throughput relative to sluice.
usage: remote_s3_peers.py SLUICE ENDPOINT PUT_PY ROUNDS SIZE_MIB WORKDIR"""
import os, shutil, statistics, subprocess, sys, textwrap, time

sluice, endpoint, put_py, rounds, size_mib, work = sys.argv[1:7]
rounds, size_mib = int(rounds), int(size_mib)
bucket, key = "sluice-test", "obj.bin"
out = os.path.join(work, "out.bin")
env = dict(os.environ, AWS_ACCESS_KEY_ID="S3RVER", AWS_SECRET_ACCESS_KEY="S3RVER",
           AWS_DEFAULT_REGION="us-east-1", AWS_CONFIG_FILE=os.path.join(work, "aws.cfg"))
# The endpoint is plain http: a CA bundle in the environment only makes rclone refuse to start
# ("unsupported transport").
env.pop("AWS_CA_BUNDLE", None)
with open(env["AWS_CONFIG_FILE"], "w") as f:
    f.write("[default]\ns3 =\n  addressing_style = path\n  max_concurrent_requests = 16\n"
            "  multipart_chunksize = 8MB\n")
rclone_cfg = os.path.join(work, "rclone.conf")
with open(rclone_cfg, "w") as f:
    f.write(f"[emu]\ntype = s3\nprovider = Other\naccess_key_id = S3RVER\n"
            f"secret_access_key = S3RVER\nendpoint = {endpoint}\nregion = us-east-1\n"
            f"force_path_style = true\n")
url = subprocess.check_output(["/usr/bin/python3", put_py, endpoint, bucket, key, "--presign",
                               "3600"], text=True).strip()
port = endpoint.rsplit(":", 1)[1]

BOTO3 = textwrap.dedent(f"""
    import boto3
    from boto3.s3.transfer import TransferConfig
    from botocore.config import Config
    s3 = boto3.client("s3", endpoint_url="{endpoint}", region_name="us-east-1",
                      config=Config(s3={{"addressing_style": "path"}}, max_pool_connections=16))
    with open("{out}", "wb") as f:
        s3.download_fileobj("{bucket}", "{key}", f,
                            Config=TransferConfig(max_concurrency=16, multipart_chunksize=8 << 20))
    """)
CRT = textwrap.dedent(f"""
    from awscrt import io, auth, http, s3
    elg = io.EventLoopGroup(); bs = io.ClientBootstrap(elg, io.DefaultHostResolver(elg))
    creds = auth.AwsCredentialsProvider.new_static("S3RVER", "S3RVER")
    c = s3.S3Client(bootstrap=bs, region="us-east-1", credential_provider=creds,
                    tls_mode=s3.S3RequestTlsMode.DISABLED, part_size=8 << 20,
                    throughput_target_gbps=10)
    req = http.HttpRequest("GET", "/{bucket}/{key}",
                           http.HttpHeaders([("Host", "127.0.0.1:{port}")]))
    r = c.make_request(type=s3.S3RequestType.GET_OBJECT, request=req, recv_filepath="{out}")
    r.finished_future.result(600)
    """)
peers = {
    "sluice": [sluice, "read", url, "--out", out],
    "curl": ["curl", "-sf", "-o", out, url],
    "aws-cli": ["/usr/bin/aws", "--endpoint-url", endpoint, "s3", "cp", "--quiet",
                f"s3://{bucket}/{key}", out],
    "rclone": ["rclone", "--config", rclone_cfg, "copyto", f"emu:{bucket}/{key}", out,
               "--multi-thread-streams", "16", "--multi-thread-cutoff", "64M"],
    "boto3": ["/usr/bin/python3", "-c", BOTO3],
    "crt": ["/usr/bin/python3", "-c", CRT],
}


def run(cmd):
    if os.path.exists(out):
        os.unlink(out)
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    err = p.stderr.read().decode(errors="replace").strip().splitlines()
    ok = status == 0 and os.path.exists(out) and os.path.getsize(out) == size_mib << 20
    return ok, wall, ru.ru_utime + ru.ru_stime, (err[-1] if err else f"status {status}")


res = {}
for name, cmd in list(peers.items()):
    if shutil.which(cmd[0]) is None:
        print(f"{name}: left out ({cmd[0]} not installed)")
        del peers[name]
        continue
    ok, wall, cpu, why = run(cmd)  # a warm-up round that also checks the peer works
    if not ok:
        print(f"{name}: left out (failed: {why[:150]})")
        del peers[name]
    else:
        res[name] = []
names = list(peers)
for r in range(rounds):
    for name in names[r % len(names):] + names[:r % len(names)]:
        ok, wall, cpu, why = run(peers[name])
        assert ok, (name, why)
        res[name].append((wall, cpu))
if os.path.exists(out):
    os.unlink(out)
gib = size_mib / 1024
print(f"object {size_mib} MiB in the S3 emulator (s3rver, one node process) over loopback, "
      f"{rounds} interleaved rounds (medians), written to /dev/shm")
print(f"{'tool':8} {'wall s':>8} {'GiB/s':>8} {'CPU s/GiB':>10} {'sluice/tool':>12}")
med = {n: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v))
       for n, v in res.items()}
for n, (w, c) in med.items():
    ratio = f"{w / med['sluice'][0]:.2f}x" if "sluice" in med else "-"
    print(f"{n:8} {w:8.3f} {gib / w:8.2f} {c / gib:10.3f} {ratio:>12}")
