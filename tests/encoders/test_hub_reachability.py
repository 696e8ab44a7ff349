"""A Hub model that is not cached, online: an unreachable Hub or a missing model is one line."""

from __future__ import annotations

import socket
from http.server import BaseHTTPRequestHandler

import pytest
from huggingface_hub import constants
from local_server import LocalServer, send_raw

from tapt.cli import main
from tapt.encoders.loading import check_model_source


class _NotFound(BaseHTTPRequestHandler):
    def do_GET(self):
        send_raw(self, 404, b'{"error": "Repository not found"}',
                 {"Content-Type": "application/json", "X-Error-Code": "RepoNotFound"})

    def log_message(self, *args):
        pass


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # nothing listens there once the socket is closed


@pytest.fixture
def online(monkeypatch):
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)

    def endpoint(url: str) -> None:
        monkeypatch.setattr(constants, "ENDPOINT", url)
    return endpoint


def test_an_unreachable_hub_fails_at_once_in_one_line(online, tiny_beir_path, capsys):
    online(f"http://127.0.0.1:{_closed_port()}")
    code = main(["eval", "--model", "someorg/some-model", "--data", str(tiny_beir_path),
                 "--quiet"])
    printed = capsys.readouterr().out
    assert code == 2
    assert "cannot be reached" in printed and "HF_HUB_OFFLINE" in printed
    assert "Traceback" not in printed


def test_a_model_the_hub_does_not_have_says_so(online):
    server = LocalServer(_NotFound).start()
    try:
        online(server.address)
        with pytest.raises(FileNotFoundError, match="no such model on the Hub"):
            check_model_source("someorg/missing-model")
    finally:
        server.stop()
