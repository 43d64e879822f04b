#!/usr/bin/python3
"""A scripted S3 server for the remote writer's fault tests (faults only: the normal path is
tested against @20minutes/s3rver, which checks signatures). It keeps objects and multipart
uploads in memory and speaks just what RemoteWriter sends: CreateMultipartUpload (POST ?uploads=),
UploadPart (PUT ?partNumber=&uploadId=), CompleteMultipartUpload (POST ?uploadId=),
AbortMultipartUpload (DELETE ?uploadId=), PutObject, DeleteObject and GetObject. The bucket (the
first path component, path-style) picks the fault:

  ok             no fault
  part503        the first UploadPart gets 503 SlowDown, then ok
  partreset      the first UploadPart's connection is closed after its headers are read, unanswered
  part403        UploadPart 2 gets 403 AccessDenied (every time)
  complete500    every CompleteMultipartUpload gets 500 InternalError
  complete200err the first CompleteMultipartUpload answers 200 with an InternalError document
  badcomplete    CompleteMultipartUpload with a wrong part ETag list gets 400 InvalidPart (the
                 server checks the list against the parts it has; every bucket does)

GET /state/BUCKET returns JSON: {"objects": {key: size}, "open_uploads": n, "aborted": n,
"parts_stored": n (parts received by the open uploads), "requests": {"UploadPart": n, ...}}, so a test can check that a failed write left no object and
no upload in progress. Usage: s3_fault_server.py. Binds 127.0.0.1 on a free port, prints the port,
and exits when its standard input closes.
"""
import hashlib
import http.server
import json
import re
import sys
import threading
import urllib.parse

LOCK = threading.Lock()
BUCKETS = {}  # name -> {"objects": {key: bytes}, "uploads": {id: {"key", "parts"}}, ...}
NEXT_ID = [0]


def bucket(name):
    return BUCKETS.setdefault(name, {"objects": {}, "uploads": {}, "aborted": 0, "requests": {}})


def s3_error(code, message):
    return (f"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code>"
            f"<Message>{message}</Message></Error>").encode()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send_body(self, status, body=b"", headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def target(self):
        url = urllib.parse.urlsplit(self.path)
        parts = url.path.lstrip("/").split("/", 1)
        query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        return parts[0], urllib.parse.unquote(parts[1]) if len(parts) > 1 else "", query

    def body(self):
        n = int(self.headers.get("Content-Length", "0"))
        return self.rfile.read(n) if n else b""

    def count(self, b, op):
        with LOCK:
            b["requests"][op] = b["requests"].get(op, 0) + 1
            return b["requests"][op]

    def do_GET(self):
        name, key, _ = self.target()
        if name == "state":
            with LOCK:
                b = bucket(key)
                doc = {"objects": {k: len(v) for k, v in b["objects"].items()},
                       "open_uploads": len(b["uploads"]), "aborted": b["aborted"],
                       "parts_stored": sum(len(u["parts"]) for u in b["uploads"].values()),
                       "requests": b["requests"]}
            return self.send_body(200, json.dumps(doc).encode())
        with LOCK:
            data = bucket(name)["objects"].get(key)
        if data is None:
            return self.send_body(404, s3_error("NoSuchKey", "no such key"))
        return self.send_body(200, data)

    def do_PUT(self):
        name, key, q = self.target()
        b = bucket(name)
        if "partNumber" not in q:
            data = self.body()
            self.count(b, "PutObject")
            with LOCK:
                b["objects"][key] = data
            return self.send_body(200, headers=[("ETag", f"\"{hashlib.md5(data).hexdigest()}\"")])
        n = self.count(b, "UploadPart")
        number, upload = int(q["partNumber"][0]), q["uploadId"][0]
        if name == "partreset" and n == 1:
            self.close_connection = True
            self.connection.shutdown(2)
            return None
        data = self.body()
        if name == "part503" and n == 1:
            return self.send_body(503, s3_error("SlowDown", "Please reduce your request rate."))
        if name == "part403" and number == 2:
            return self.send_body(403, s3_error("AccessDenied", "Access Denied"))
        with LOCK:
            if upload not in b["uploads"]:
                return self.send_body(404, s3_error("NoSuchUpload", "no such upload"))
            b["uploads"][upload]["parts"][number] = data
        return self.send_body(200, headers=[("ETag", f"\"{hashlib.md5(data).hexdigest()}\"")])

    def do_POST(self):
        name, key, q = self.target()
        b = bucket(name)
        body = self.body()
        if "uploads" in q:
            self.count(b, "CreateMultipartUpload")
            with LOCK:
                NEXT_ID[0] += 1
                upload = f"up{NEXT_ID[0]}"
                b["uploads"][upload] = {"key": key, "parts": {}}
            doc = (f"<InitiateMultipartUploadResult><Bucket>{name}</Bucket><Key>{key}</Key>"
                   f"<UploadId>{upload}</UploadId></InitiateMultipartUploadResult>")
            return self.send_body(200, doc.encode())
        n = self.count(b, "CompleteMultipartUpload")
        upload = q["uploadId"][0]
        if name == "complete500":
            return self.send_body(500, s3_error("InternalError", "We encountered an internal error."))
        if name == "complete200err" and n == 1:
            return self.send_body(200, s3_error("InternalError", "We encountered an internal error."))
        listed = [(int(p), e) for p, e in re.findall(
            r"<PartNumber>(\d+)</PartNumber><ETag>([^<]*)</ETag>", body.decode())]
        with LOCK:
            up = b["uploads"].get(upload)
            if up is None:
                return self.send_body(404, s3_error("NoSuchUpload", "no such upload"))
            want = [(p, f"&quot;{hashlib.md5(d).hexdigest()}&quot;") for p, d in sorted(up["parts"].items())]
            if listed != want:
                return self.send_body(400, s3_error("InvalidPart", f"parts {listed} are not {want}"))
            b["objects"][up["key"]] = b"".join(d for _, d in sorted(up["parts"].items()))
            del b["uploads"][upload]
        return self.send_body(200, b"<CompleteMultipartUploadResult><ETag>\"x-1\"</ETag>"
                                   b"</CompleteMultipartUploadResult>")

    def do_DELETE(self):
        name, key, q = self.target()
        b = bucket(name)
        with LOCK:
            if "uploadId" in q:
                b["requests"]["AbortMultipartUpload"] = b["requests"].get("AbortMultipartUpload", 0) + 1
                if b["uploads"].pop(q["uploadId"][0], None) is None:
                    return self.send_body(404, s3_error("NoSuchUpload", "no such upload"))
                b["aborted"] += 1
            else:
                b["objects"].pop(key, None)
        return self.send_body(204)


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # a client that hung up (the reset fault, an aborted write): nothing to report


def main():
    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(server.server_address[1], flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    main()
