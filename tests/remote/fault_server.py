#!/usr/bin/python3
"""A scripted HTTP server for the remote reader's fault tests (faults only: the normal path is
tested against nginx). It serves one object, the file given, under /FAULT/obj, and the first path
component picks the fault. Each fault path counts its requests, and GET /count/FAULT returns that
count, so a test can check how many tries a fault cost.

  ok            plain ranged responses (206 + Content-Range, strong ETag, If-Match honoured)
  burst503      the first 3 requests get 503 SlowDown (S3's XML), then ok
  retryafter    the first request gets 503 with Retry-After: 1, then ok
  slow          the first request drips its body at about 40 KiB/s (slow, never stalled)
  reset         the first request sends half its body, then a TCP reset
  short         the first request sends half its body with its Content-Length, then closes
  shortlen      the first request says and sends half the range (Content-Length) with a 206
  norange       always 200 with the whole object (a server that ignores Range)
  badrange      206 whose Content-Range starts one byte late
  replaced      the ETag and the bytes change after the first request; If-Match ignored
  replaced412   the ETag changes after the first request; If-Match honoured (412)
  stall         the first request sends headers, then nothing for 30 s
  stallalways   every request stalls
  always500     500 InternalError every time
  denied        403 AccessDenied
  chaos         each request independently, with probability 0.3: a 503 SlowDown, a reset
                mid-body, a short body or a short Content-Length (retryable faults only; the
                choice is seeded by the path and the request count, so a run can be replayed)

A first component FAULT-ID (e.g. burst503-17, chaos-4) is the fault FAULT with its own count: the
soak (bench/soak.sh) gives every run its own ID, so "the first request" is each run's first.
GET /injected returns the faults sent so far by kind ("kind count" lines), for the soak's summary.

Usage: fault_server.py FILE. Binds 127.0.0.1 on a free port, prints the port on stdout, and
exits when its standard input closes (the test's end, however it ends).
"""
import http.server
import os
import random
import re
import socket
import struct
import sys
import threading
import time

LOCK = threading.Lock()
COUNTS = {}
INJECTED = {}
DATA = b""
CHAOS = ("burst503", "reset", "short", "shortlen")
RECOVERED = {"burst503": lambda n: n <= 3, "retryafter": lambda n: n == 1, "slow": lambda n: n == 1,
             "reset": lambda n: n == 1, "short": lambda n: n == 1, "shortlen": lambda n: n == 1,
             "stall": lambda n: n == 1}


def injected(kind):
    with LOCK:
        INJECTED[kind] = INJECTED.get(kind, 0) + 1


def s3_error(code, message):
    return (f"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code>"
            f"<Message>{message}</Message></Error>").encode()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send_body(self, status, body, headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def parse_range(self):
        m = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        if not m:
            return None
        first = int(m.group(1))
        last = int(m.group(2)) if m.group(2) else len(DATA) - 1
        return first, min(last, len(DATA) - 1)

    def do_GET(self):
        parts = self.path.strip("/").split("/")
        if parts[0] == "count":
            with LOCK:
                n = COUNTS.get(parts[1], 0)
            return self.send_body(200, str(n).encode())
        if parts[0] == "injected":
            with LOCK:
                text = "".join(f"{k} {v}\n" for k, v in sorted(INJECTED.items()))
            return self.send_body(200, text.encode())
        with LOCK:
            n = COUNTS.get(parts[0], 0) + 1
            COUNTS[parts[0]] = n
        fault = parts[0].split("-")[0]
        if fault == "chaos":  # a retryable fault at random, or none, the same for the same path and n
            pick = random.Random(f"{parts[0]}:{n}")
            fault, n = (pick.choice(CHAOS), 1) if pick.random() < 0.3 else ("ok", 1)
        if fault in RECOVERED and RECOVERED[fault](n) or fault in ("always500", "denied", "badrange") or \
                fault.startswith("replaced") and n > 1:
            injected(fault)
        self.serve(fault, n)

    def serve(self, fault, n):
        data, etag = DATA, '"v1"'
        if fault in ("replaced", "replaced412") and n > 1:
            data, etag = bytes(b ^ 0xFF for b in DATA[:4096]) + DATA[4096:], '"v2"'
        if fault == "burst503" and n <= 3:
            return self.send_body(503, s3_error("SlowDown", "Please reduce your request rate."))
        if fault == "retryafter" and n == 1:
            return self.send_body(503, s3_error("SlowDown", "Please reduce your request rate."),
                                  [("Retry-After", "1")])
        if fault == "always500":
            return self.send_body(500, s3_error("InternalError", "We encountered an internal error."))
        if fault == "denied":
            return self.send_body(403, s3_error("AccessDenied", "Access Denied"))
        if fault == "norange":
            return self.send_body(200, data, [("ETag", etag)])
        want = self.headers.get("If-Match")
        if fault != "replaced" and want is not None and want != etag:
            return self.send_body(412, s3_error("PreconditionFailed", "At least one of the pre-conditions you specified did not hold"))
        r = self.parse_range()
        if r is None or r[0] >= len(data):
            return self.send_body(416, b"", [("Content-Range", f"bytes */{len(data)}")])
        self.send_range(fault, n, data, etag, *r)

    def send_range(self, fault, n, data, etag, first, last):
        body = data[first:last + 1]
        shown = first + 1 if fault == "badrange" else first
        length = len(body)
        if fault == "shortlen" and n == 1:
            length = body and len(body) // 2
            body = body[:length]
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {shown}-{last}/{len(data)}")
        self.send_header("ETag", etag)
        self.send_header("Content-Length", str(length))
        self.end_headers()
        if (fault == "stall" and n == 1) or fault == "stallalways":
            self.wfile.flush()
            time.sleep(30)
            self.close_connection = True
            return
        if fault == "slow" and n == 1:
            for i in range(0, len(body), 2048):
                self.wfile.write(body[i:i + 2048])
                self.wfile.flush()
                time.sleep(0.05)
            return
        if fault in ("reset", "short") and n == 1:
            self.wfile.write(body[:len(body) // 2])
            self.wfile.flush()
            if fault == "reset":  # SO_LINGER 0: close() sends RST
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            return
        self.wfile.write(body)


def main():
    global DATA
    with open(sys.argv[1], "rb") as f:
        DATA = f.read()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdin.read()  # returns when the test closes its end of the pipe, or dies
    os._exit(0)


if __name__ == "__main__":
    main()
