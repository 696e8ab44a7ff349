"""The shared machinery of hosted embedding models: cache, packing, concurrency, accounting.

:class:`APIEncoder` is a :class:`~tapt.encoders.base.Encoder`, so ``DenseRetriever``,
``evaluate`` and ``tapt eval`` use it like any local model. Its :meth:`encode_stream`:

1. hashes every text (with provider, model, input type and width) and serves what the
   on-disk cache holds (:mod:`tapt.encoders.api.cache`) without a request;
2. sends each remaining distinct text once (repeated texts share one embedding);
3. cuts texts the provider would refuse (OpenAI: 8,191 tokens) and packs the rest,
   longest first, into requests under the provider's limits on inputs and tokens per
   request (:mod:`tapt.encoders.api.models`; token counts from
   :mod:`tapt.encoders.api.tokens`);
4. runs ``concurrency`` requests at a time under a requests- and tokens-per-minute limit,
   retrying 429/5xx (:mod:`tapt.encoders.api.client`);
5. stores each answer in the cache as it arrives, then yields it, so a run interrupted at
   any point resumes without paying twice.

``batch_size`` is ignored: requests are sized by the provider's limits
(``max_inputs_per_request`` / ``max_tokens_per_request`` to lower them). Embeddings are
float32 and scored by cosine (``normalize`` is True). :attr:`usage` counts requests,
retries, cache hits and the tokens the provider billed (its ``usage`` field), priced with
the table in :mod:`~tapt.encoders.api.models`; :meth:`result_info` is what ``tapt eval``
writes under ``evaluated.api`` in its JSON.
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass
from typing import ClassVar
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from tapt.encoders.api.cache import EmbeddingCache, cache_key
from tapt.encoders.api.client import JSONClient, MalformedResponse, RetryPolicy
from tapt.encoders.api.models import PRICE_DATE, ModelInfo, check_dimensions, model_info
from tapt.encoders.api.ratelimit import RateLimiter
from tapt.encoders.api.tokens import ByteBound, TokenCounter
from tapt.encoders.base import EncodedBatch, Encoder, TextKind, collect_in_order
from tapt.util.bounds import NON_NEGATIVE_FLOAT, POSITIVE_FLOAT, POSITIVE_INT, check_optional

logger = logging.getLogger(__name__)

CACHED_BATCH = 1024
"""Cached embeddings yielded per batch."""


@dataclass
class APIUsage:
    """What an encoder's requests cost, summed over its calls (queries and corpus)."""

    texts: int = 0
    """Texts asked for."""
    cache_hits: int = 0
    """Texts served from the cache."""
    duplicates: int = 0
    """Repeated texts that shared a request's embedding."""
    texts_sent: int = 0
    truncated_texts: int = 0
    """Texts cut to the provider's per-input limit before sending."""
    requests: int = 0
    """Successful requests."""
    retries: int = 0
    retry_wait_s: float = 0.0
    tokens: int = 0
    """Tokens billed, from the answers' ``usage`` field."""
    requests_without_usage: int = 0
    cached_tokens: int = 0
    """What the cached texts cost when they were fetched (not paid again)."""


def pack(estimates: Sequence[int], max_inputs: int, max_tokens: int) -> list[list[int]]:
    """Indices of ``estimates`` grouped into requests, longest first, each with at most
    ``max_inputs`` texts and ``max_tokens`` estimated tokens (a longer text goes alone)."""
    order = sorted(range(len(estimates)), key=lambda i: -estimates[i])
    batches: list[list[int]] = []
    current: list[int] = []
    total = 0
    for i in order:
        if current and (len(current) >= max_inputs or total + estimates[i] > max_tokens):
            batches.append(current)
            current, total = [], 0
        current.append(i)
        total += estimates[i]
    if current:
        batches.append(current)
    return batches


def apportion(total: int, weights: Sequence[int]) -> list[int]:
    """``total`` split in proportion to ``weights`` into integers that sum to ``total``
    (largest remainders; equal shares when every weight is 0)."""
    if not weights:
        return []
    weights = [max(0, w) for w in weights] if any(w > 0 for w in weights) else [1] * len(weights)
    whole = sum(weights)
    exact = [total * w / whole for w in weights]
    shares = [int(x) for x in exact]
    by_remainder = sorted(range(len(weights)), key=lambda i: shares[i] - exact[i])
    for i in by_remainder[:total - sum(shares)]:
        shares[i] += 1
    return shares


def public_url(url: str) -> str:
    """``url`` without user info, query or fragment (where a proxy might carry a secret)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


@dataclass
class _Answer:
    embeddings: np.ndarray
    tokens: int | None
    attempts: int
    backoff_s: float


class APIEncoder(Encoder):
    """An embedding model behind an HTTP API (subclassed per provider).

    Args:
        model: The provider's model name (``text-embedding-3-large``, ``voyage-3.5``).
        dimensions: Width to ask for (OpenAI ``dimensions``, Voyage ``output_dimension``);
            default: the model's own. Required for a model missing from the table.
        api_key: Default: the provider's environment variable (``OPENAI_API_KEY``,
            ``VOYAGE_API_KEY``). Never logged, cached or written.
        base_url: Default: ``OPENAI_BASE_URL`` / ``VOYAGE_BASE_URL``, else the provider's.
        cache_dir: Folder of the embedding cache (see :mod:`tapt.encoders.api.cache`);
            ``cache=False`` turns it off.
        concurrency: Requests in flight at once.
        requests_per_minute, tokens_per_minute: Client-side rate limit (default: the
            provider's usage-tier-1 limits for the model; 0: none).
        max_inputs_per_request, max_tokens_per_request: Lower the provider's limits.
        token_counter: Counts tokens to pack requests (default: exact for OpenAI with
            tiktoken, else a UTF-8 byte bound).
        retry: Attempts and backoff for 408/429/5xx and network failures.
        clock, sleep: Injected by tests.

    Example::

        encoder = OpenAIEncoder("text-embedding-3-small")   # OPENAI_API_KEY from the env
        report = tapt.evaluate(tapt.DenseRetriever(encoder), dataset, "test")
        print(encoder.usage.tokens, encoder.cost_usd)
    """

    provider: ClassVar[str] = ""
    display_name: ClassVar[str] = ""
    key_env: ClassVar[str] = ""
    base_url_env: ClassVar[str] = ""
    default_base_url: ClassVar[str] = ""
    path: ClassVar[str] = "/embeddings"
    normalize = True

    def __init__(self, model: str, *, dimensions: int | None = None,
                 api_key: str | None = None, base_url: str | None = None,
                 cache_dir: str | os.PathLike | None = None, cache: bool = True,
                 concurrency: int = 4, requests_per_minute: float | None = None,
                 tokens_per_minute: float | None = None,
                 max_inputs_per_request: int | None = None,
                 max_tokens_per_request: int | None = None,
                 token_counter: TokenCounter | None = None, retry: RetryPolicy | None = None,
                 timeout: float = 60.0, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        dimensions = check_optional(POSITIVE_INT, dimensions, "dimensions")
        requests_per_minute = check_optional(NON_NEGATIVE_FLOAT, requests_per_minute,
                                             "requests_per_minute")
        tokens_per_minute = check_optional(NON_NEGATIVE_FLOAT, tokens_per_minute,
                                           "tokens_per_minute")
        timeout = POSITIVE_FLOAT.check(timeout, "timeout")
        self.info: ModelInfo = model_info(self.provider, model, dimensions)
        self.model = model
        self.dimensions = check_dimensions(self.info, dimensions)
        self.name = f"{self.provider}:{model}" + (
            f"@{self.dimensions}" if self.dimensions != self.info.dimensions else "")
        key = api_key or os.environ.get(self.key_env, "").strip()
        if not key:
            raise ValueError(f"{self.display_name} needs an API key: set {self.key_env}")
        self.base_url = (base_url or os.environ.get(self.base_url_env)
                         or self.default_base_url).rstrip("/")
        parts = urlsplit(self.base_url)
        if parts.scheme == "http" and parts.hostname not in ("localhost", "127.0.0.1", "::1"):
            logger.warning("%s: the API key goes to %s over plain HTTP", self.display_name,
                           public_url(self.base_url))
        self.max_inputs = min(self.info.max_inputs_per_request,
                              max_inputs_per_request or self.info.max_inputs_per_request)
        self.max_request_tokens = min(self.info.max_tokens_per_request,
                                      max_tokens_per_request
                                      or self.info.max_tokens_per_request)
        self.max_input_tokens = min(self.info.max_tokens_per_input, self.max_request_tokens)
        self.concurrency = POSITIVE_INT.check(concurrency, "concurrency")
        rpm = self.info.requests_per_minute if requests_per_minute is None \
            else requests_per_minute
        tpm = self.info.tokens_per_minute if tokens_per_minute is None else tokens_per_minute
        self.limiter = RateLimiter(rpm, tpm, clock=clock, sleep=sleep)
        self.client = JSONClient(f"{self.display_name} {model}", self.base_url, key,
                                 timeout=timeout, retry=retry, limiter=self.limiter,
                                 sleep=sleep)
        self.counter: TokenCounter = token_counter or self.default_counter()
        self.cache = EmbeddingCache(cache_dir) if cache else None
        self.usage = APIUsage()

    # -- provider specifics --------------------------------------------------------------
    def default_counter(self) -> TokenCounter:
        return ByteBound()

    def payload(self, texts: list[str], input_type: str) -> dict:
        raise NotImplementedError

    @property
    def requested_dimensions(self) -> int | None:
        """The width to send, or None to leave the parameter out."""
        return self.dimensions if self.dimensions != self.info.dimensions else None

    # -- the Encoder interface -----------------------------------------------------------
    @property
    def embedding_dim(self) -> int:
        return self.dimensions

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model!r}, dimensions={self.dimensions}, " \
               f"base_url={public_url(self.base_url)!r})"

    def encode_queries(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        return collect_in_order(self.encode_stream(texts, "query"), len(texts), self.dimensions)

    def encode_corpus(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        return collect_in_order(self.encode_stream(texts, "document"), len(texts),
                                self.dimensions)

    def count_tokens(self, texts: Sequence[str]) -> int | None:
        if not self.counter.exact:
            return None
        return sum(self._prepare(text)[1] for text in texts)

    def _prepare(self, text: str) -> tuple[str, int, bool]:
        """(text to send, estimated tokens, whether it was cut). An empty text is sent as
        one space (both providers refuse empty inputs)."""
        text = text or " "
        tokens = self.counter.count(text)
        if tokens <= self.max_input_tokens:
            return text, tokens, False
        if self.info.server_truncates and self.info.max_tokens_per_input <= \
                self.max_request_tokens:
            return text, self.max_input_tokens, False
        text = self.counter.truncate(text, self.max_input_tokens)
        return text, min(self.counter.count(text), self.max_input_tokens), True

    def encode_stream(self, texts: Sequence[str], kind: TextKind = "document",
                      batch_size: int = 32) -> Iterator[EncodedBatch]:
        input_type = "query" if kind == "query" else "document"
        usage = self.usage
        usage.texts += len(texts)
        groups: dict[bytes, list[int]] = {}
        for position, text in enumerate(texts):
            key = cache_key(self.provider, self.model, input_type, self.dimensions, text)
            groups.setdefault(key, []).append(position)
        cached = self.cache.get_many(list(groups), self.dimensions) if self.cache else {}
        hits = [key for key in groups if key in cached]
        for start in range(0, len(hits), CACHED_BATCH):
            chunk = hits[start:start + CACHED_BATCH]
            tokens = sum(cached[key][1] or 0 for key in chunk)
            usage.cache_hits += sum(len(groups[key]) for key in chunk)
            usage.cached_tokens += tokens
            yield self._batch(chunk, groups, np.stack([cached[key][0] for key in chunk]), tokens)

        todo = [key for key in groups if key not in cached]
        usage.duplicates += sum(len(groups[key]) - 1 for key in todo)
        prepared = [self._prepare(texts[groups[key][0]]) for key in todo]
        truncated = sum(cut for _, _, cut in prepared)
        usage.truncated_texts += truncated
        if truncated:
            logger.warning("%s: %d texts were cut to %d tokens (%s)", self.name, truncated,
                           self.max_input_tokens, self.counter.name)
        requests = iter(pack([tokens for _, tokens, _ in prepared], self.max_inputs,
                             self.max_request_tokens))
        pool = ThreadPoolExecutor(max_workers=self.concurrency,
                                  thread_name_prefix=f"tapt-{self.provider}")
        pending: dict[Future, list[int]] = {}
        cancelled = threading.Event()

        def submit_next() -> None:
            members = next(requests, None)
            if members is not None:
                pending[pool.submit(self._request, [prepared[i][0] for i in members],
                                    input_type, sum(prepared[i][1] for i in members),
                                    cancelled)] = members

        try:
            for _ in range(self.concurrency):
                submit_next()
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    members = pending.pop(future)
                    answer = future.result()
                    submit_next()
                    usage.requests += 1
                    usage.retries += answer.attempts - 1
                    usage.retry_wait_s += answer.backoff_s
                    usage.texts_sent += len(members)
                    if answer.tokens is None:
                        usage.requests_without_usage += 1
                    else:
                        usage.tokens += answer.tokens
                    keys = [todo[i] for i in members]
                    if self.cache is not None:
                        self._store(keys, [prepared[i][1] for i in members], answer, input_type)
                    yield self._batch(keys, groups, answer.embeddings, answer.tokens)
        finally:  # on an error or an abandoned stream, requests in flight stop retrying
            cancelled.set()
            pool.shutdown(wait=False, cancel_futures=True)

    # -- helpers -------------------------------------------------------------------------
    @staticmethod
    def _batch(keys: list[bytes], groups: dict[bytes, list[int]], rows: np.ndarray,
               tokens: int | None) -> EncodedBatch:
        counts = [len(groups[key]) for key in keys]
        positions = np.fromiter((p for key in keys for p in groups[key]), dtype=np.int64,
                                count=sum(counts))
        embeddings = np.repeat(np.asarray(rows, dtype=np.float32), counts, axis=0)
        return EncodedBatch(positions=positions, embeddings=embeddings, tokens=tokens)

    def _store(self, keys: list[bytes], estimates: list[int], answer: _Answer,
               input_type: str) -> None:
        shares = [None] * len(keys) if answer.tokens is None \
            else apportion(answer.tokens, estimates)
        finite = np.isfinite(answer.embeddings).all(axis=1)
        rows = [(key, answer.embeddings[i], shares[i]) for i, key in enumerate(keys)
                if finite[i]]
        self.cache.put_many(rows, provider=self.provider, model=self.model,
                            input_type=input_type, dimensions=self.dimensions)

    def _request(self, texts: list[str], input_type: str, estimate: int,
                 cancelled: threading.Event | None = None) -> _Answer:
        reply = self.client.post(self.path, self.payload(texts, input_type), tokens=estimate,
                                 cancelled=cancelled)
        embeddings, tokens = self.parse(reply.data, len(texts))
        self.limiter.settle(estimate, tokens)
        return _Answer(embeddings, tokens, reply.attempts, reply.backoff_s)

    def parse(self, body: object, count: int) -> tuple[np.ndarray, int | None]:
        """``(embeddings in input order, billed tokens or None)`` from an answer shaped
        ``{"data": [{"index": i, "embedding": [...] | "base64"}], "usage": {...}}``."""
        def bad(problem: str) -> MalformedResponse:
            return self.client.error(f"malformed response: {problem}", MalformedResponse)

        if not isinstance(body, dict):
            raise bad(f"expected a JSON object, got {type(body).__name__}")
        data = body.get("data")
        if not isinstance(data, list):
            raise bad(f"no 'data' list (keys: {', '.join(sorted(map(str, body))) or 'none'})")
        if len(data) != count:
            raise bad(f"{len(data)} embeddings for {count} inputs")
        indices = []
        for order, item in enumerate(data):
            if not isinstance(item, dict) or "embedding" not in item:
                raise bad(f"data[{order}] has no 'embedding'")
            index = item.get("index", order)
            if not isinstance(index, int) or not 0 <= index < count or index in indices:
                raise bad(f"data[{order}] has index {index!r} (expected each of 0..{count - 1} "
                          "once)")
            indices.append(index)
        out = np.empty((count, self.dimensions), dtype=np.float32)
        for order, (item, index) in enumerate(zip(data, indices)):
            vector = self._vector(item["embedding"], order, bad)
            if vector.shape != (self.dimensions,):
                raise bad(f"data[{order}] has {vector.size} dimensions, expected "
                          f"{self.dimensions}")
            out[index] = vector
        found = body.get("usage")
        tokens = None
        if isinstance(found, dict):
            value = found.get("total_tokens", found.get("prompt_tokens"))
            if isinstance(value, int) and value >= 0:
                tokens = value
        return out, tokens

    @staticmethod
    def _vector(raw: object, order: int, bad) -> np.ndarray:
        if isinstance(raw, str):
            try:
                data = base64.b64decode(raw, validate=True)
            except (binascii.Error, ValueError):
                raise bad(f"data[{order}].embedding is neither numbers nor base64") from None
            if len(data) % 4:
                raise bad(f"data[{order}].embedding: {len(data)} base64 bytes are not float32s")
            return np.frombuffer(data, dtype="<f4").astype(np.float32)
        if not isinstance(raw, list) or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in raw):
            raise bad(f"data[{order}].embedding is not a list of numbers")
        return np.asarray(raw, dtype=np.float32)

    # -- accounting ----------------------------------------------------------------------
    @property
    def cost_usd(self) -> float | None:
        """List price of the tokens billed so far (None when the model has no price)."""
        price = self.info.usd_per_million_tokens
        return None if price is None else self.usage.tokens * price / 1e6

    def result_info(self) -> dict:
        """What ``tapt eval --output`` records under ``evaluated.api``."""
        price = self.info.usd_per_million_tokens
        return {"api": {
            "provider": self.provider,
            "model": self.model,
            "dimensions": self.dimensions,
            "base_url": public_url(self.base_url),
            **asdict(self.usage),
            "retry_wait_s": round(self.usage.retry_wait_s, 3),
            "rate_limit_wait_s": round(self.limiter.waited_s, 3),
            "cost_usd": self.cost_usd,
            "saved_by_cache_usd": None if price is None
            else self.usage.cached_tokens * price / 1e6,
            "usd_per_million_tokens": price,
            "price_date": PRICE_DATE,
            "token_counter": self.counter.name,
            "cache": str(self.cache.path) if self.cache is not None else None,
            "limits": {"max_inputs_per_request": self.max_inputs,
                       "max_tokens_per_request": self.max_request_tokens,
                       "max_tokens_per_input": self.max_input_tokens,
                       "requests_per_minute": self.limiter.rpm,
                       "tokens_per_minute": self.limiter.tpm,
                       "concurrency": self.concurrency},
        }}

    def close(self) -> None:
        self.client.close()
        if self.cache is not None:
            self.cache.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
