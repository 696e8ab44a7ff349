"""A client-side limit on requests and tokens per minute, shared by a client's threads."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class RateLimiter:
    """Two token buckets, requests and tokens, each refilled at its per-minute rate.

    A bucket holds at most one minute's allowance, so bursts never exceed what the
    provider allows in a minute. :meth:`acquire` blocks until both buckets hold enough;
    a request larger than a whole minute's token allowance waits for a full bucket.
    Tokens are charged with the client's estimate before a request and corrected with the
    provider's count afterwards (:meth:`settle`). :meth:`pause` (after a 429) holds every
    thread back until the given time. ``None`` or 0 for a rate means no limit on it.
    """

    def __init__(self, requests_per_minute: float | None, tokens_per_minute: float | None, *,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.rpm = requests_per_minute or None
        self.tpm = tokens_per_minute or None
        self.clock = clock
        self.sleep = sleep
        self.lock = threading.Lock()
        now = clock()
        self._requests = float(self.rpm or 0)
        self._tokens = float(self.tpm or 0)
        self._updated = now
        self._paused_until = now
        self.waited_s = 0.0
        """Seconds callers spent blocked here, summed over threads."""

    def _refill(self, now: float) -> None:
        elapsed = max(0.0, now - self._updated)
        self._updated = now
        if self.rpm:
            self._requests = min(self.rpm, self._requests + elapsed * self.rpm / 60)
        if self.tpm:
            self._tokens = min(self.tpm, self._tokens + elapsed * self.tpm / 60)

    def _wait_needed(self, now: float, tokens: float) -> float:
        wait = max(0.0, self._paused_until - now)
        if self.rpm and self._requests < 1:
            wait = max(wait, (1 - self._requests) * 60 / self.rpm)
        if self.tpm:
            need = min(tokens, self.tpm)
            if self._tokens < need:
                wait = max(wait, (need - self._tokens) * 60 / self.tpm)
        return wait

    def acquire(self, tokens: int = 0) -> float:
        """Block until one request of ``tokens`` (estimated) may go; returns seconds waited."""
        waited = 0.0
        while True:
            with self.lock:
                now = self.clock()
                self._refill(now)
                wait = self._wait_needed(now, tokens)
                if wait <= 0:
                    if self.rpm:
                        self._requests -= 1
                    if self.tpm:
                        self._tokens -= min(tokens, self.tpm)
                    self.waited_s += waited
                    return waited
            self.sleep(wait)
            waited += wait

    def settle(self, estimated: int, actual: int | None) -> None:
        """Correct the token bucket once the provider has said what a request cost."""
        if not self.tpm or actual is None:
            return
        with self.lock:
            self._tokens = min(self.tpm, self._tokens + min(estimated, self.tpm) - actual)

    def pause(self, seconds: float) -> None:
        """Hold every caller back for ``seconds`` (a 429's ``Retry-After``)."""
        with self.lock:
            self._paused_until = max(self._paused_until, self.clock() + seconds)
