"""What ``tapt cache ls | prune`` lists and deletes: embedding-cache model keys and
cached Arrow corpora, each with its size and last use."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path


@dataclass
class CacheEntry:
    """One deletable cache item: an embedding-cache model key's folder or an Arrow corpus
    file; ``key`` describes it, ``rows`` counts passages, ``last_used`` is a timestamp."""

    path: Path
    key: dict
    rows: int
    bytes: int
    last_used: float

    @property
    def folder(self) -> Path:
        """The entry's path (a model key's folder)."""
        return self.path

    def delete(self) -> None:
        if self.path.is_dir():
            shutil.rmtree(self.path, ignore_errors=True)
        else:
            self.path.unlink(missing_ok=True)


def prune_entries(entries: Iterable[CacheEntry], *, older_than_days: float | None = None,
                  keep_bytes: int | None = None) -> list[CacheEntry]:
    """Delete the entries unused for ``older_than_days``, then the least recently used
    until the rest hold at most ``keep_bytes``; returns what was deleted."""
    if older_than_days is not None and older_than_days < 0:
        raise ValueError(f"older_than_days must be >= 0, got {older_than_days}")
    if keep_bytes is not None and keep_bytes < 0:
        raise ValueError(f"keep_bytes must be >= 0, got {keep_bytes}")
    entries = sorted(entries, key=lambda e: e.last_used)  # least recently used first
    total = sum(e.bytes for e in entries)
    now = time.time()
    deleted = []
    for entry in entries:
        stale = older_than_days is not None and now - entry.last_used > older_than_days * 86400
        too_big = keep_bytes is not None and total > keep_bytes
        if stale or too_big:
            entry.delete()
            total -= entry.bytes
            deleted.append(entry)
    return deleted


__all__ = ["CacheEntry", "prune_entries"]
