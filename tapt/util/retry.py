"""Backoff for HTTP calls (Hub uploads, embedding APIs): one policy, one ``Retry-After`` parser.

Hand-written because neither huggingface_hub nor httpx exposes a reusable policy that
honours ``Retry-After`` both as a delay and as an HTTP date, and tapt needs the computed
waits (tests assert them; logs print them).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime


@dataclass(frozen=True)
class RetryPolicy:
    """``attempts`` tries in all; waits ``base_wait`` seconds, doubling each time up to
    ``max_wait``; a server's ``Retry-After`` wins when longer, up to ``max_retry_after``
    (``None``: up to ``max_wait``)."""

    attempts: int = 5
    base_wait: float = 2.0
    max_wait: float = 60.0
    max_retry_after: float | None = None

    def wait(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        wait = min(self.max_wait, self.base_wait * 2 ** (attempt - 1))
        if retry_after is not None:
            cap = self.max_wait if self.max_retry_after is None else self.max_retry_after
            wait = max(wait, min(retry_after, cap))
        return wait


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` value (a delay or an HTTP date); None if absent or bad."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError):
            return None
