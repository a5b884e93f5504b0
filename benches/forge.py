"""A recording forge for `benches/run preview`: the GitHub REST shapes gitward's `[[preview]]`
speaks (as tests/forge/server.rs answers them), served by a threaded http.server on loopback.

It answers `GET /user`, `GET /repos/{o}/{r}/pulls/{n}`, `GET/POST /repos/{o}/{r}/issues/{n}/comments`
(`per_page`, `page`, a `Link` header to the next page), `PATCH/DELETE
/repos/{o}/{r}/issues/comments/{id}` and `POST /repos/{o}/{r}/statuses/{sha}`, for one repository
and one token, and records with a wall-clock timestamp each request, each comment created or
edited and each status posted ([`Forge.events`]). The bench tells it each pull request's head
([`Forge.pull`]) before it sends the webhook, as the forge knows it before it sends its own.
"""
import json
import os
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

REPO = "acme/deploy"
LOGIN = "gitward-bot"
TOKEN = "bench-forge-token"


class Forge:
    """The forge's state and its server, started on a free loopback port."""

    def __init__(self, tmp):
        self.lock = threading.Lock()
        self.pulls = {}          # pr -> head sha
        self.comments = {}       # id -> (pr, author, body)
        self.next_id = 1000
        self.events = []         # (wall seconds, kind, pr or sha, detail)
        self.requests = []       # (wall seconds, method, path, ms to answer)
        self.token_file = os.path.join(tmp, "forge-token")
        open(self.token_file, "w").write(TOKEN + "\n")
        forge = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _serve(self):
                start = time.time()
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                status, answer, headers = forge.route(self.command, self.path, self.headers, body)
                data = json.dumps(answer).encode() if answer is not None else b""
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
                with forge.lock:
                    forge.requests.append((start, self.command, self.path, round((time.time() - start) * 1000, 1)))

            do_GET = do_POST = do_PATCH = do_DELETE = _serve

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def pull(self, pr, sha):
        """Pull request `pr` is open with head `sha`, in the repository itself (no fork)."""
        with self.lock:
            self.pulls[pr] = sha

    def statuses(self, sha):
        """The states posted for `sha`, in order, with when: [(wall seconds, state)]."""
        with self.lock:
            return [(at, detail) for at, kind, key, detail in self.events if kind == "status" and key == sha]

    def final(self, sha):
        """When the first `success` or `failure` status of `sha` was posted, and which; None yet."""
        done = [(at, state) for at, state in self.statuses(sha) if state in ("success", "failure")]
        return done[0] if done else None

    def close(self):
        self.server.shutdown()

    def _record(self, kind, key, detail):
        self.events.append((time.time(), kind, key, detail))

    def route(self, method, target, headers, body):
        path, _, query = target.partition("?")
        if headers.get("Authorization") != f"Bearer {TOKEN}":
            return 401, {"message": "Bad credentials"}, {}
        params = dict(kv.split("=", 1) for kv in query.split("&") if "=" in kv)
        with self.lock:
            if method == "GET" and path == "/user":
                return 200, {"id": 1, "login": LOGIN}, {}
            m = re.fullmatch(r"/repos/" + REPO + r"/(.+)", path)
            if not m:
                return 404, {"message": "Not Found"}, {}
            rest = m.group(1).split("/")
            if method == "GET" and len(rest) == 2 and rest[0] == "pulls":
                sha = self.pulls.get(int(rest[1]))
                if sha is None:
                    return 404, {"message": "Not Found"}, {}
                return 200, {"number": int(rest[1]), "state": "open",
                             "head": {"sha": sha, "repo": {"full_name": REPO}},
                             "base": {"repo": {"full_name": REPO}}}, {}
            if len(rest) == 3 and rest[0] == "issues" and rest[2] == "comments":
                pr = int(rest[1])
                if method == "GET":
                    return self._list(pr, params)
                if method == "POST":
                    self.next_id += 1
                    self.comments[self.next_id] = (pr, LOGIN, body["body"])
                    self._record("comment created", pr, len(body["body"]))
                    return 201, {"id": self.next_id, "body": body["body"], "user": {"login": LOGIN}}, {}
            if len(rest) == 3 and rest[:2] == ["issues", "comments"]:
                cid = int(rest[2])
                if cid not in self.comments:
                    return 404, {"message": "Not Found"}, {}
                pr, author, _ = self.comments[cid]
                if method == "PATCH":
                    self.comments[cid] = (pr, author, body["body"])
                    self._record("comment edited", pr, len(body["body"]))
                    return 200, {"id": cid, "body": body["body"], "user": {"login": author}}, {}
                if method == "DELETE":
                    del self.comments[cid]
                    self._record("comment deleted", pr, cid)
                    return 204, None, {}
            if method == "POST" and len(rest) == 2 and rest[0] == "statuses":
                self._record("status", rest[1], body["state"])
                return 201, {"id": len(self.events), "state": body["state"]}, {}
        return 404, {"message": "Not Found"}, {}

    def _list(self, pr, params):
        ours = [{"id": cid, "body": body, "user": {"login": author}}
                for cid, (p, author, body) in sorted(self.comments.items()) if p == pr]
        per_page = max(1, min(100, int(params.get("per_page", 30))))
        page = max(1, int(params.get("page", 1)))
        headers = {}
        if len(ours) > page * per_page:
            headers["Link"] = (f'<{self.url}/repos/{REPO}/issues/{pr}/comments?per_page={per_page}&page={page + 1}>; '
                               'rel="next"')
        return 200, ours[(page - 1) * per_page:page * per_page], headers
