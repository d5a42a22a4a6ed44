"""Serving one written page over HTTP (the page alone, nothing else of its folder)."""

from __future__ import annotations

import http.server
import logging
from pathlib import Path
from typing import Any

from mle_gym.records.viewer.data import ViewerServeError

log = logging.getLogger(__name__)


def make_server(page: Path, *, host: str = "127.0.0.1", port: int = 8000) -> http.server.ThreadingHTTPServer:
    """An HTTP server for the page alone (at / and at its file name): nothing else of the folder
    it sits in is reachable. Port 0 picks a free one. Raises ViewerServeError when it cannot bind."""
    name = page.name

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's spelling)
            if self.path.split("?", 1)[0] not in ("/", f"/{name}", "/index.html"):
                self.send_error(404, "only the page is served here")
                return
            data = page.read_bytes()  # read per request: a rewritten page shows on reload
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class's name)
            log.info("%s " + format, self.address_string(), *args)

    try:
        return http.server.ThreadingHTTPServer((host, port), Handler)
    except OSError as exc:
        raise ViewerServeError(f"cannot serve on {host}:{port}: {exc.strerror or exc}; "
                               "pass another --port (0 picks a free one)") from exc
