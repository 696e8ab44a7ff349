"""A threaded HTTP server on 127.0.0.1 for the fake Hub and the fake embedding APIs."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class LocalServer:
    """Serves ``handler`` on a free local port; the handler reaches this object as
    ``self.server.owner``. Subclasses (the fakes) call ``super().__init__(handler)``."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.server.owner = self
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,),
                                       daemon=True)

    @property
    def address(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> LocalServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def send_raw(handler: BaseHTTPRequestHandler, status: int, data: bytes,
             headers: dict | None = None) -> None:
    """Answer ``data`` with ``status`` and ``headers`` (Content-Length added)."""
    handler.send_response(status)
    for key, value in (headers or {}).items():
        handler.send_header(key, value)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def send_json(handler: BaseHTTPRequestHandler, status: int, payload: object,
              headers: dict | None = None) -> None:
    """Answer ``payload`` as JSON."""
    send_raw(handler, status, json.dumps(payload).encode(),
             {"Content-Type": "application/json", **(headers or {})})
