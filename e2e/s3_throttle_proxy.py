#!/usr/bin/env python3
"""e2e/s3_throttle_proxy.py -- an HTTP proxy in front of an S3-compatible server that answers every
Nth request with S3's own throttling answer (503 Slow Down, error code SlowDown), as S3 does
under load; the others are passed through unchanged (method, path, headers, body).

Usage: s3_throttle_proxy.py LISTEN_PORT UPSTREAM_PORT EVERY STATS_FILE
After each request STATS_FILE holds "<requests> <throttled>". Stdlib only; loopback only.
"""
import http.client
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LISTEN, UPSTREAM, EVERY, STATS = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
LOCK = threading.Lock()
COUNTS = [0, 0]

SLOW_DOWN = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
             b'<Message>Please reduce your request rate.</Message><RequestId>e2e</RequestId></Error>')


class Proxy(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def handle_any(self):
        with LOCK:
            COUNTS[0] += 1
            throttle = EVERY > 0 and COUNTS[0] % EVERY == 0
            if throttle:
                COUNTS[1] += 1
            with open(STATS, "w") as f:
                f.write(f"{COUNTS[0]} {COUNTS[1]}\n")
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        if throttle:
            self.send_response(503, "Slow Down")
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(SLOW_DOWN)))
            self.end_headers()
            self.wfile.write(SLOW_DOWN)
            return
        upstream = http.client.HTTPConnection("127.0.0.1", UPSTREAM, timeout=30)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("connection", "keep-alive")}
        upstream.request(self.command, self.path, body=body, headers=headers)
        answer = upstream.getresponse()
        data = answer.read()
        self.send_response(answer.status, answer.reason)
        for k, v in answer.getheaders():
            if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        upstream.close()

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = handle_any


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", LISTEN), Proxy).serve_forever()
