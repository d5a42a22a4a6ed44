"""A local stand-in for the parts of Kaggle's API that `mle-gym prepare` uses (and for GitHub's raw files).

The real client (kaggle 2.2 / kagglesdk) with `KAGGLE_API_ENVIRONMENT=TEST` talks to
http://localhost:7777. What it does there, and what this server answers:

- `POST /api/v1/competitions.CompetitionApiService/DownloadDataFiles` with `{"competitionName": ID}`
  and HTTP Basic auth (a legacy key) or a Bearer token. Kaggle answers 302 to a signed storage
  URL; here `/storage/ID.zip?...`. Wrong or missing credentials: 401, as JSON `{"code", "message"}`
  (the SDK turns that into an HTTPError). Rules not accepted: 403 with Kaggle's message. Unknown
  competition: 404.
- `GET /storage/ID.zip`: the zip with Content-Length, ETag, Last-Modified and `Accept-Ranges:
  bytes`; `Range: bytes=N-` gives 206 from byte N when `If-Range` matches the ETag, else the
  whole file. `cut_after[ID] = n` sends the full Content-Length but drops the connection after n
  bytes; `announce_bytes[ID] = n` claims an n-byte file and sends nothing (a disk-space check
  must refuse it first).
- `GET /mle-bench/PATH`: `texts[PATH]`, standing in for raw.githubusercontent.com (the tests set
  `MLE_GYM_MLEBENCH_URL` to `<url>/mle-bench`).

Every request is logged in `requests` (method, path, Range header, status).
"""

from __future__ import annotations

import base64
import email.utils
import hashlib
import io
import json
import socket
import threading
import time
import zipfile
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

DOWNLOAD_PATH = "/api/v1/competitions.CompetitionApiService/DownloadDataFiles"
RULES_MESSAGE = "You must accept this competition's rules before you'll be able to download files."
LAST_MODIFIED = email.utils.formatdate(1_700_000_000, usegmt=True)


def zip_folder(folder: Path) -> bytes:
    """The files under `folder` as one zip, byte-for-byte the same on every run."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            info = zipfile.ZipInfo(path.relative_to(folder).as_posix(), date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, path.read_bytes())
    return buffer.getvalue()


@dataclass
class RequestRecord:
    method: str
    path: str
    range: str | None
    status: int


@dataclass
class KaggleStandIn:
    host: str = "127.0.0.1"
    port: int = 7777
    users: dict[str, str] = field(default_factory=lambda: {"mle-gym-tester": "the-right-key"})
    tokens: set[str] = field(default_factory=set)
    archives: dict[str, bytes] = field(default_factory=dict)
    rules_not_accepted: set[str] = field(default_factory=set)
    cut_after: dict[str, int] = field(default_factory=dict)
    announce_bytes: dict[str, int] = field(default_factory=dict)
    texts: dict[str, bytes] = field(default_factory=dict)
    requests: list[RequestRecord] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, wait_s: float = 300.0) -> KaggleStandIn:
        """Listen, waiting up to `wait_s` for the port: the client's TEST environment knows port 7777 only,
        so two test runs on one machine take turns."""
        handler = type("Handler", (_Handler,), {"standin": self})
        deadline = time.monotonic() + wait_s
        while True:
            try:
                self._server = ThreadingHTTPServer((self.host, self.port), handler)
                break
            except OSError as exc:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"the Kaggle stand-in cannot listen on {self.url} ({exc}) after {wait_s:g} s; the Kaggle "
                        "client's TEST environment talks to port 7777 only. Stop what holds it and run again."
                    ) from exc
                time.sleep(1.0)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="kaggle-standin", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def record(self, entry: RequestRecord) -> None:
        with self._lock:
            self.requests.append(entry)

    def downloads_of(self, competition_id: str) -> list[RequestRecord]:
        with self._lock:
            return [r for r in self.requests if r.path.startswith(f"/storage/{competition_id}.zip")]

    @staticmethod
    def etag(data: bytes) -> str:
        return '"' + hashlib.md5(data).hexdigest() + '"'


class _Handler(BaseHTTPRequestHandler):
    standin: KaggleStandIn
    protocol_version = "HTTP/1.0"  # one response per connection: cutting one short is closing it

    def log_message(self, format: str, *args: object) -> None:  # quiet: the tests read `requests`
        pass

    def _send_json(self, status: int, body: dict[str, object]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.standin.record(RequestRecord(self.command, self.path, self.headers.get("Range"), status))

    def _authorised(self) -> bool:
        kind, _, value = (self.headers.get("Authorization") or "").partition(" ")
        if kind == "Basic":
            user, _, key = base64.b64decode(value).decode().partition(":")
            return self.standin.users.get(user) == key
        return kind == "Bearer" and value in self.standin.tokens

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path != DOWNLOAD_PATH:
            return self._send_json(404, {"code": 404, "message": f"no such endpoint {self.path}"})
        if not self._authorised():
            return self._send_json(401, {"code": 401, "message": "Unauthenticated"})
        competition = json.loads(body or b"{}").get("competitionName", "")
        if competition not in self.standin.archives and competition not in self.standin.announce_bytes:
            return self._send_json(404, {"code": 404, "message": f"Competition {competition!r} not found"})
        if competition in self.standin.rules_not_accepted:
            return self._send_json(403, {"code": 403, "message": RULES_MESSAGE})
        self.send_response(302)
        self.send_header("Location", f"/storage/{competition}.zip?GoogleAccessId=standin&Signature=x")
        self.send_header("Content-Length", "0")
        self.end_headers()
        self.standin.record(RequestRecord("POST", self.path, None, 302))

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path.startswith("/mle-bench/"):
            text = self.standin.texts.get(path.removeprefix("/mle-bench/"))
            if text is None:
                return self._send_json(404, {"message": "not found"})
            return self._send_bytes(200, text, {"Content-Type": "text/plain; charset=utf-8"})
        if not (path.startswith("/storage/") and path.endswith(".zip")):
            return self._send_json(404, {"message": "not found"})
        competition = path.removeprefix("/storage/").removesuffix(".zip")
        if competition in self.standin.announce_bytes:
            return self._claim(self.standin.announce_bytes[competition])
        data = self.standin.archives.get(competition)
        if data is None:
            return self._send_json(404, {"message": "not found"})
        etag = self.standin.etag(data)
        headers = {"Content-Type": "application/zip", "ETag": etag, "Last-Modified": LAST_MODIFIED,
                   "Accept-Ranges": "bytes"}
        status, start = 200, 0
        asked = self.headers.get("Range")
        if asked and asked.startswith("bytes=") and self.headers.get("If-Range", etag) == etag:
            start = int(asked.removeprefix("bytes=").split("-")[0])
            if start >= len(data):
                return self._send_json(416, {"message": "range not satisfiable"})
            status = 206
            headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
        self._send_bytes(status, data[start:], headers, cut=self.standin.cut_after.get(competition))

    def _send_bytes(self, status: int, data: bytes, headers: dict[str, str], cut: int | None = None) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.standin.record(RequestRecord(self.command, self.path, self.headers.get("Range"), status))
        if cut is None:
            self.wfile.write(data)
            return
        self.wfile.write(data[:cut])
        self.wfile.flush()
        self.connection.shutdown(socket.SHUT_RDWR)  # the rest never comes
        self.close_connection = True

    def _claim(self, size: int) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/zip")
        self.send_header("Content-Length", str(size))
        self.send_header("ETag", '"huge"')
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        self.standin.record(RequestRecord(self.command, self.path, self.headers.get("Range"), 200))
        self.wfile.flush()
        self.connection.shutdown(socket.SHUT_RDWR)
        self.close_connection = True
