"""Serves the bare repositories under ROOT over git's smart HTTP protocol with TLS: each request
runs the real `git http-backend` (CGI, git's own server side of HTTP fetches) and its answer is
sent back. Used by tests/common/git_remote.rs (GitHttps).

Usage: git_https.py ROOT CERT KEY
Binds a free loopback port, prints it on one line, then serves until killed.
"""
import http.server
import os
import ssl
import subprocess
import sys

ROOT, CERT, KEY = sys.argv[1:4]


class Handler(http.server.BaseHTTPRequestHandler):
    # One request per connection: the CGI's answer is read whole, then the connection closes.
    protocol_version = "HTTP/1.0"

    def do_GET(self):
        self.backend()

    def do_POST(self):
        self.backend()

    def body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                chunk = self.rfile.read(size + 2)[:size]
                if size == 0:
                    return data
                data += chunk
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def backend(self):
        path, _, query = self.path.partition("?")
        env = {
            "PATH": os.environ["PATH"], "HOME": ROOT, "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_PROJECT_ROOT": ROOT, "GIT_HTTP_EXPORT_ALL": "1", "GATEWAY_INTERFACE": "CGI/1.1",
            "PATH_INFO": path, "QUERY_STRING": query, "REQUEST_METHOD": self.command,
            "REMOTE_ADDR": self.client_address[0], "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
            "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
        }
        out = subprocess.run(["git", "http-backend"], input=self.body(), env=env, capture_output=True).stdout
        head, _, payload = out.partition(b"\r\n\r\n")
        headers = [line.split(b":", 1) for line in head.split(b"\r\n") if b":" in line]
        status = next((int(v.split()[0]) for k, v in headers if k.lower() == b"status"), 200)
        self.send_response(status)
        for k, v in headers:
            if k.lower() != b"status":
                self.send_header(k.decode(), v.strip().decode())
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(CERT, KEY)
server.socket = context.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
server.serve_forever()
