"""JSON over HTTPS with retries, a rate limit, and a key that never leaves the header.

Plain ``httpx`` (already a dependency of huggingface_hub) rather than the ``openai`` and
``voyageai`` SDKs: both providers' embedding endpoints are one POST each, so one small
client serves both and its proxies; the SDKs retry on their own (doubling retries and
hiding ``Retry-After`` from tapt's rate limiter), bring dependencies tapt does not need,
and would each need their own batching, caching and test doubles.

Retried: HTTP 408, 429 and 5xx, and transport failures (connection refused or reset,
timeouts), with exponential backoff (``RetryPolicy``); a ``Retry-After`` (seconds or an
HTTP date) or ``retry-after-ms`` header is honoured, and a 429 pauses every thread of the
client, not only the one that got it. Any other status fails at once with the provider's
message. Every message tapt builds passes through :meth:`JSONClient.redact`, which
replaces the key with ``***`` (some providers echo a rejected key back).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from tapt.encoders.api.ratelimit import RateLimiter
from tapt.util.redaction import redact
from tapt.util.retry import RetryPolicy, parse_retry_after

logger = logging.getLogger(__name__)

SNIPPET = 300
"""Characters of an unexpected body quoted in an error."""


class APIError(RuntimeError):
    """The provider refused a request, answered something unusable, or could not be
    reached. The message names the provider and model and never contains the key."""


class MalformedResponse(APIError):
    """An answer that is not the provider's documented JSON."""


API_RETRY = RetryPolicy(attempts=6, base_wait=1.0, max_wait=60.0, max_retry_after=600.0)
"""Providers ask for long pauses on 429 (minutes); they are honoured up to 10 minutes."""


def retryable(status: int) -> bool:
    return status in (408, 429) or status >= 500


def retry_after_seconds(headers: httpx.Headers) -> float | None:
    """Seconds from ``retry-after-ms`` or ``Retry-After`` (a delay or an HTTP date)."""
    value = headers.get("retry-after-ms")
    if value:
        try:
            return max(0.0, float(value) / 1000)
        except ValueError:
            pass
    return parse_retry_after(headers.get("retry-after"))


@dataclass
class Reply:
    """A decoded JSON answer and what getting it took."""

    data: object
    attempts: int
    backoff_s: float


class JSONClient:
    """POSTs JSON to one provider. ``label`` ("OpenAI text-embedding-3-large") starts every
    error message."""

    def __init__(self, label: str, base_url: str, api_key: str, *, timeout: float = 60.0,
                 retry: RetryPolicy | None = None, limiter: RateLimiter | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.label = label
        self.base_url = base_url.rstrip("/")
        self._secret = api_key
        self.retry = retry or API_RETRY
        self.limiter = limiter or RateLimiter(None, None)
        self.sleep = sleep
        self.http = httpx.Client(base_url=self.base_url, timeout=httpx.Timeout(timeout),
                                 headers={"Authorization": f"Bearer {api_key}",
                                          "Content-Type": "application/json"})

    def __repr__(self) -> str:
        return f"JSONClient({self.label!r}, {self.base_url!r})"

    def redact(self, text: str) -> str:
        return redact(text, extra=[self._secret])

    def error(self, message: str, kind: type[APIError] = APIError) -> APIError:
        return kind(self.redact(f"{self.label}: {message}"))

    def post(self, path: str, payload: dict, *, tokens: int = 0,
             cancelled: threading.Event | None = None) -> Reply:
        """POST ``payload``; retry transient failures; return the decoded JSON body.

        ``tokens`` is the client's estimate of the request's tokens, for the rate limit;
        once ``cancelled`` is set (the caller gave up), no further attempt is made.
        """
        url = f"{self.base_url}{path}"
        backoff = 0.0
        for attempt in range(1, self.retry.attempts + 1):
            if cancelled is not None and cancelled.is_set():
                raise self.error("request cancelled")
            self.limiter.acquire(tokens)
            problem, retry_after = None, None
            try:
                response = self.http.post(path, content=json.dumps(payload))
            except httpx.TransportError as err:
                problem = f"{type(err).__name__}: {err}"
            else:
                if response.status_code == 200:
                    return Reply(self._decode(response), attempt, backoff)
                if not retryable(response.status_code):
                    raise self.error(f"HTTP {response.status_code} from {url}: "
                                     f"{self._message(response)}")
                retry_after = retry_after_seconds(response.headers)
                problem = f"HTTP {response.status_code}: {self._message(response)}"
                if response.status_code == 429 and retry_after is not None:
                    self.limiter.pause(retry_after)
            if attempt == self.retry.attempts:
                break
            wait = self.retry.wait(attempt, retry_after)
            logger.warning("%s", self.redact(f"{self.label}: {problem}; retry {attempt} of "
                                             f"{self.retry.attempts - 1} in {wait:.1f} s"))
            self.sleep(wait)
            backoff += wait
        raise self.error(f"no usable answer from {url} after {self.retry.attempts} attempts; "
                         f"last: {problem}")

    def _decode(self, response: httpx.Response) -> object:
        try:
            return response.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            kind = response.headers.get("content-type", "no content type")
            raise self.error(f"malformed response (HTTP 200, {kind}): the body is not JSON: "
                             f"{response.text[:SNIPPET]!r}", MalformedResponse) from None

    @staticmethod
    def _message(response: httpx.Response) -> str:
        """The provider's own error message (OpenAI: ``error.message``; Voyage: ``detail``)."""
        try:
            body = response.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return response.text[:SNIPPET] or "(empty body)"
        if isinstance(body, dict):
            error = body.get("error")
            if isinstance(error, dict) and error.get("message"):
                return str(error["message"])[:SNIPPET]
            for key in ("detail", "message", "error"):
                if isinstance(body.get(key), str):
                    return body[key][:SNIPPET]
        return json.dumps(body)[:SNIPPET]

    def close(self) -> None:
        self.http.close()
