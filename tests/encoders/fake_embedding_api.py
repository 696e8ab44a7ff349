"""A local stand-in for the OpenAI and Voyage AI embedding endpoints (``POST /v1/embeddings``),
started by the tests on 127.0.0.1; nothing here touches the internet.

It answers as the providers document: OpenAI ``{"data": [{"object": "embedding", "index",
"embedding"}], "model", "usage": {"prompt_tokens", "total_tokens"}}`` (base64 float32 when
``encoding_format`` is ``base64``), Voyage the same shape with ``usage.total_tokens``. It
checks the bearer key (a wrong one gets 401 with the key echoed back, worse than OpenAI's
own masked echo, to test redaction), the per-request limits on inputs and tokens (400 when
exceeded, also listed in :attr:`violations`), and the parameters each provider accepts.

Tokens are whitespace words (at least 1 per input); embeddings are bag-of-words hashes of
the text (plus a marker dimension for Voyage queries), L2-normalised, so retrieval with
them makes sense and :meth:`embed` predicts every vector.

``fail(status, times, headers, body, after)`` answers ``times`` requests (``None``: all),
after ``after`` normal answers, with that status (with ``body``: that raw body) before any
check.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler

import numpy as np
from local_server import LocalServer, send_json, send_raw

DEFAULT_DIMS = {"text-embedding-3-large": 3072, "text-embedding-3-small": 1536}
OPENAI_KEYS = {"model", "input", "encoding_format", "dimensions", "user"}
VOYAGE_KEYS = {"model", "input", "input_type", "truncation", "output_dimension",
               "output_dtype", "encoding_format"}


def words(text: str) -> int:
    return max(1, len(text.split()))


class WordCounter:
    """The client-side token counter that agrees with this server."""

    name = "test-words"
    exact = True

    def count(self, text: str) -> int:
        return words(text)

    def truncate(self, text: str, max_tokens: int) -> str:
        return " ".join(text.split()[:max_tokens])


class FakeClock:
    """``clock``/``sleep`` for an encoder: sleeping advances time and is recorded."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []
        self.lock = threading.Lock()

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        with self.lock:
            self.sleeps.append(seconds)
            self.now += seconds


@dataclass
class Scripted:
    status: int
    remaining: int | None
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    after: int = 0


@dataclass
class Recorded:
    headers: dict[str, str]
    body: dict | None
    status: int = 0


class FakeEmbeddingAPI(LocalServer):
    def __init__(self, provider: str = "openai", *, key: str = "test-key",
                 max_inputs: int | None = None, max_tokens: int | None = None,
                 max_input_tokens: int | None = None) -> None:
        self.provider = provider
        self.key = key
        self.max_inputs = max_inputs or (2048 if provider == "openai" else 1000)
        self.max_tokens = max_tokens or (300_000 if provider == "openai" else 120_000)
        self.max_input_tokens = max_input_tokens or (8191 if provider == "openai" else None)
        self.requests: list[Recorded] = []
        self.violations: list[str] = []
        self.script: list[Scripted] = []
        self.billed_tokens = 0
        self.lock = threading.Lock()
        super().__init__(_Handler)

    @property
    def base_url(self) -> str:
        return f"{self.address}/v1"

    def fail(self, status: int, times: int | None = 1, headers: dict | None = None,
             body: bytes | None = None, after: int = 0) -> None:
        """Answer ``times`` requests with ``status`` (and ``body``), after ``after`` normal
        answers."""
        self.script.append(Scripted(status, times, headers or {}, body, after))

    @property
    def embedded(self) -> list[list[str]]:
        """The inputs of every request answered 200."""
        return [r.body["input"] for r in self.requests if r.status == 200]

    # -- the model ---------------------------------------------------------------------
    @staticmethod
    def embed(text: str, dims: int, query_marker: bool = False) -> np.ndarray:
        vector = np.zeros(dims, dtype=np.float64)
        for word in text.lower().split():
            digest = hashlib.sha256(word.strip(".,;:()").encode()).digest()
            vector[int.from_bytes(digest[:4], "little") % dims] += 1.0
        if query_marker:
            vector[0] += 0.5
        if not vector.any():
            vector[0] = 1.0
        return (vector / np.linalg.norm(vector)).astype(np.float32)

    # -- the server side ---------------------------------------------------------------
    def handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        try:
            body = json.loads(raw)
        except json.JSONDecodeError:
            body = None
        record = Recorded({k.lower(): v for k, v in handler.headers.items()}, body)
        with self.lock:
            self.requests.append(record)
            scripted = self._scripted()
        if scripted is not None:
            record.status = scripted.status
            if scripted.body is not None:
                return send_raw(handler, scripted.status, scripted.body, scripted.headers)
            return send_json(handler, scripted.status,
                         {"error": {"message": "injected failure", "type": "server_error"}},
                         scripted.headers)
        record.status, payload = self._answer(handler, body)
        send_json(handler, record.status, payload)

    def _scripted(self) -> Scripted | None:
        for item in self.script:
            if item.remaining != 0:
                if item.after:
                    item.after -= 1
                    return None
                if item.remaining is not None:
                    item.remaining -= 1
                return item
        return None

    def _answer(self, handler: BaseHTTPRequestHandler, body) -> tuple[int, dict]:
        given = handler.headers.get("Authorization", "")
        if given != f"Bearer {self.key}":
            shown = given.removeprefix("Bearer ")
            return 401, {"error": {"message": f"Incorrect API key provided: {shown}.",
                                   "type": "invalid_request_error"}}
        if handler.path != "/v1/embeddings":
            return 404, {"error": {"message": f"no route {handler.path}"}}
        if not isinstance(body, dict) or not isinstance(body.get("input"), list):
            return 400, {"error": {"message": "'input' must be a list of strings"}}
        allowed = OPENAI_KEYS if self.provider == "openai" else VOYAGE_KEYS
        unknown = set(body) - allowed
        if unknown:
            return 400, {"error": {"message": f"Unrecognized request argument supplied: "
                                              f"{', '.join(sorted(unknown))}"}}
        texts = body["input"]
        if any(not isinstance(t, str) or not t for t in texts):
            return 400, {"error": {"message": "'$.input' is invalid: empty string"}}
        tokens = [words(t) for t in texts]
        problem = None
        if len(texts) > self.max_inputs:
            problem = f"{len(texts)} inputs, more than {self.max_inputs}"
        elif sum(tokens) > self.max_tokens:
            problem = f"{sum(tokens)} tokens, more than {self.max_tokens}"
        elif self.max_input_tokens and max(tokens, default=0) > self.max_input_tokens:
            problem = f"an input of {max(tokens)} tokens, more than {self.max_input_tokens}"
        if problem:
            with self.lock:
                self.violations.append(problem)
            return 400, {"error": {"message": problem}}
        model = body["model"]
        if self.provider == "openai":
            dims = body.get("dimensions") or DEFAULT_DIMS.get(model, 1536)
            marker = False
        else:
            if body.get("input_type") not in (None, "query", "document"):
                return 400, {"detail": f"input_type {body['input_type']!r} is invalid"}
            dims = body.get("output_dimension") or 1024
            marker = body.get("input_type") == "query"
        data = []
        for index, text in enumerate(texts):
            vector = self.embed(text, dims, marker)
            embedding = base64.b64encode(vector.astype("<f4").tobytes()).decode() \
                if body.get("encoding_format") == "base64" else vector.tolist()
            data.append({"object": "embedding", "index": index, "embedding": embedding})
        data.reverse()  # the index field, not the order, says which input a row belongs to
        with self.lock:
            self.billed_tokens += sum(tokens)
        usage = {"total_tokens": sum(tokens)}
        if self.provider == "openai":
            usage["prompt_tokens"] = sum(tokens)
        return 200, {"object": "list", "data": data, "model": model, "usage": usage}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.server.owner.handle(self)

    do_GET = do_POST

    def log_message(self, format: str, *args) -> None:
        pass
