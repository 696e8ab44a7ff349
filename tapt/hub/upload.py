"""The upload itself: huggingface_hub's ``HfApi`` plus retries where it has none.

What huggingface_hub does (2.4): ``create_repo`` and ``create_branch`` are one request each;
``create_commit`` asks the Hub how to send each file (``preupload``: ``regular`` files travel
base64-encoded inside the commit, ``lfs`` ones, such as safetensors weights, are uploaded
first: through Xet when ``hf_xet`` is installed and ``HF_HUB_DISABLE_XET`` is not set, else
through the LFS batch API), validates the card's YAML (``validate-yaml``) and posts the
commit. It retries ``preupload`` and the LFS requests itself (``http_backoff``: 408, 429, 5xx
and connection errors, 5 retries) and ``hf_xet`` retries its own transfers; it does not retry
repository or branch creation, ``validate-yaml``, repo info or the commit.

What tapt adds: exactly those un-retried calls are retried here, with exponential backoff, on
the same transient errors; a failure of a call huggingface_hub already retried is final at
once (no doubled retries). A whole ``create_commit`` is safe to repeat: files the Hub already
has with the same content are dropped from the new attempt (``preupload`` returns their oid),
so a commit whose response was lost is not made twice.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from typing import TypeVar

from tapt.util.retry import RetryPolicy, parse_retry_after

# huggingface_hub is imported when a retry policy first asks which errors it retries.

logger = logging.getLogger(__name__)

T = TypeVar("T")

TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})
"""The status codes huggingface_hub's own ``http_backoff`` retries."""
NOT_RETRIED_BY_HUB = re.compile(
    r"/api/(repos/create|validate-yaml"
    r"|[a-z]+s/[^/]+/[^/]+/(branch|commit)/.+"
    r"|[a-z]+s/[^/]+/[^/]+(/revision/.+)?)$")
"""Request paths huggingface_hub sends once (create repo, branch, validate-yaml, commit,
repo info); preupload, LFS batch/transfer and Xet requests are retried inside it."""


def _network_errors() -> tuple[type[BaseException], ...]:
    try:  # what huggingface_hub's http_backoff treats as a transient network failure
        from huggingface_hub.utils._http import _DEFAULT_RETRY_ON_EXCEPTIONS
        return tuple(_DEFAULT_RETRY_ON_EXCEPTIONS) + (ConnectionError, TimeoutError)
    except ImportError:
        return (ConnectionError, TimeoutError)


def exception_chain(err: BaseException) -> list[BaseException]:
    chain, seen = [], set()
    while err is not None and id(err) not in seen:
        chain.append(err)
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return chain


def failed_request(err: BaseException) -> tuple[str | None, int | None, object | None]:
    """(URL path, HTTP status, response) of the request behind ``err``, as far as known."""
    for exc in exception_chain(err):
        response = getattr(exc, "response", None)
        if response is not None and hasattr(response, "status_code"):
            try:
                return response.request.url.path, response.status_code, response
            except (AttributeError, RuntimeError):
                return None, response.status_code, response
        try:
            request = getattr(exc, "request", None)
        except RuntimeError:  # httpx: "The .request property has not been set."
            request = None
        if request is not None and hasattr(request, "url"):
            return request.url.path, None, None
    return None, None, None


def is_transient(err: BaseException) -> bool:
    """A 408/429/5xx answer or a connection-level failure."""
    _, status, _ = failed_request(err)
    if status is not None:
        return status in TRANSIENT_STATUS
    network = _network_errors()
    return any(isinstance(exc, network) for exc in exception_chain(err))


def should_retry(err: BaseException) -> bool:
    """Transient, and from a request huggingface_hub does not retry itself."""
    path, _, _ = failed_request(err)
    return is_transient(err) and path is not None and bool(NOT_RETRIED_BY_HUB.search(path))


def retry_after(err: BaseException) -> float | None:
    """Seconds from the failed answer's ``Retry-After`` header, if it had one."""
    _, _, response = failed_request(err)
    headers = getattr(response, "headers", {}) if response is not None else {}
    return parse_retry_after(headers.get("Retry-After"))


def describe(err: BaseException) -> str:
    """One line: the status or exception type, then the first line of the message."""
    _, status, _ = failed_request(err)
    text = str(err).strip().splitlines()[0] if str(err).strip() else ""
    prefix = f"HTTP {status}" if status is not None else type(err).__name__
    return f"{prefix}: {text}" if text else prefix


class StepFailed(Exception):
    """One upload step failed for good: ``what`` it was, after how many ``attempts``; the
    Hub's error is the ``__cause__``."""

    def __init__(self, what: str, attempts: int, cause: BaseException) -> None:
        super().__init__(f"{what} failed after {attempts} attempt(s): {describe(cause)}")
        self.what = what
        self.attempts = attempts
        self.cause = cause


def with_retries(what: str, call: Callable[[], T], policy: RetryPolicy, *,
                 clean: Callable[[str], str] = str,
                 sleep: Callable[[float], None] | None = None) -> T:
    """``call()``, retried under ``policy`` when :func:`should_retry` says so; the final
    failure raises :class:`StepFailed`. ``clean`` redacts what is logged."""
    attempt = 1
    while True:
        try:
            return call()
        except Exception as err:
            if attempt >= policy.attempts or not should_retry(err):
                raise StepFailed(what, attempt, err) from err
            wait = policy.wait(attempt, retry_after(err))
            logger.warning("%s failed (%s); retrying in %.1f s (attempt %d of %d)", what,
                           clean(describe(err)), wait, attempt + 1, policy.attempts)
            (sleep or time.sleep)(wait)
            attempt += 1
