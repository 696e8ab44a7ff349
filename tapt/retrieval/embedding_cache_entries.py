"""The embedding cache's model keys as ``tapt cache ls | prune`` see them: each key folder
that :class:`~tapt.retrieval.embedding_cache.EmbeddingCache` wrote (its ``key.json`` names
its digest) with its rows, size and last use (:class:`~tapt.util.cache_entries.CacheEntry`),
and the deletion of the unused ones (:func:`~tapt.util.cache_entries.prune_entries`, which
keeps off a key a process holds). A folder whose record is damaged is neither listed nor
pruned."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from tapt.retrieval.embedding_cache import KEY_FILE, key_digest
from tapt.util.cache_entries import (
    IN_USE_LOCK,
    CacheEntry,
    prune_entries,
    remove_abandoned_deletions,
    remove_unstarted,
)

logger = logging.getLogger(__name__)


def recorded_key(folder: Path) -> dict | None:
    """The key ``folder/key.json`` records, if it is a JSON object whose digest is the
    folder's name (what :class:`EmbeddingCache` writes); else None. Only such a folder is
    tapt's to list and to prune: a damaged record must not make it look unused."""
    try:
        key = json.loads((folder / KEY_FILE).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, RecursionError, ValueError):
        return None
    return key if isinstance(key, dict) and key_digest(key) == folder.name else None


def list_entries(root: str | os.PathLike) -> list[CacheEntry]:
    """Every model key under ``root``, most recently used first."""
    entries = []
    root = Path(root)
    if not root.is_dir():
        return entries
    for folder in root.iterdir():
        key_file = folder / KEY_FILE
        if folder.name.startswith(".") or not key_file.is_file():
            continue  # not a model key (or one being deleted)
        key = recorded_key(folder)
        if key is None:
            logger.warning("%s: its %s is unreadable or names another key; not listed and "
                           "never pruned (remove the folder by hand if it is no longer "
                           "wanted)", folder, KEY_FILE)
            continue
        try:
            used = key_file.stat().st_mtime  # touched at every use
        except OSError:
            continue  # deleted meanwhile
        rows, size, unfinished = 0, 0, 0
        manifests = {p.name[:-len(".json")] for p in folder.glob("shard-*.json")}
        for path in folder.iterdir():
            try:  # a process writing the key renames and deletes files meanwhile
                bytes_ = path.stat().st_size
                size += bytes_
                if path.name.startswith("shard-") and \
                        path.name.split(".")[0] not in manifests:
                    unfinished += bytes_
                if path.name.endswith(".json") and path.name.startswith("shard-"):
                    rows += int(json.loads(path.read_text())["rows"])
            except (OSError, ValueError, KeyError, TypeError, json.JSONDecodeError):
                pass
        entries.append(CacheEntry(folder, key, rows, size, used, lock=folder / IN_USE_LOCK,
                                  unfinished_bytes=unfinished))
    return sorted(entries, key=lambda e: -e.last_used)


UNSTARTED = frozenset({IN_USE_LOCK, f"{KEY_FILE}.partial"})
"""All a key folder holds when its process stopped before recording the key: removed by
``prune`` (:func:`~tapt.util.cache_entries.remove_unstarted`), as no listing shows it."""


def prune(root: str | os.PathLike, *, older_than_days: float | None = None,
          keep_bytes: int | None = None) -> list[CacheEntry]:
    """Delete model keys unused for ``older_than_days``, then the least recently used until
    the cache holds at most ``keep_bytes``; returns what was deleted. What no listing shows
    goes too: a killed prune's folders, and those holding only :data:`UNSTARTED`."""
    remove_abandoned_deletions(root)
    remove_unstarted(root, UNSTARTED)
    return prune_entries(list_entries(root), older_than_days=older_than_days,
                         keep_bytes=keep_bytes)
