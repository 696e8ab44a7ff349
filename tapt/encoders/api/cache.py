"""An on-disk cache of API embeddings, so an interrupted or repeated run pays once.

One SQLite file, ``embeddings.sqlite3``, under the cache folder (``--cache-dir``, else
``$TAPT_CACHE_DIR/embeddings``, else ``$XDG_CACHE_HOME/tapt/embeddings``, else
``~/.cache/tapt/embeddings``). A row is one embedding::

    key         BLOB  sha256 of (provider, model, input type, dimensions, text)
    provider    TEXT  "openai" / "voyage"
    model       TEXT
    input_type  TEXT  "query" / "document" (kept for OpenAI too, which has no input type)
    dimensions  INT
    tokens      INT   the tokens the provider billed for this text (a request's ``usage``
                      shared out over its texts in proportion to their client-side counts)
    vector      BLOB  float32, little-endian, ``dimensions`` values
    created     REAL  Unix time

Texts themselves are not stored (only their hash), nor anything about the request (URL,
headers, key). Rows are committed after every answer, in WAL mode, so a run killed at
any point keeps everything it was sent and several runs may share the file. Delete the
file, or rows by provider/model, to forget.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

logger = logging.getLogger(__name__)

FILENAME = "embeddings.sqlite3"
LOOKUP_CHUNK = 500
"""Keys per SELECT (SQLite allows 999 parameters in old builds)."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS embeddings (
    key BLOB PRIMARY KEY,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    input_type TEXT NOT NULL,
    dimensions INTEGER NOT NULL,
    tokens INTEGER,
    vector BLOB NOT NULL,
    created REAL NOT NULL
) WITHOUT ROWID
"""


def default_cache_dir() -> Path:
    if os.environ.get("TAPT_CACHE_DIR"):
        return Path(os.environ["TAPT_CACHE_DIR"]) / "embeddings"
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "tapt" / "embeddings"


def cache_key(provider: str, model: str, input_type: str, dimensions: int, text: str) -> bytes:
    """sha256 over an unambiguous encoding of the five fields."""
    fields = json.dumps([provider, model, input_type, dimensions, text], ensure_ascii=False)
    return hashlib.sha256(fields.encode("utf-8")).digest()


def stored_vector(blob, tokens, dimensions: int) -> np.ndarray | None:
    """A stored row's vector if the row is whole (``dimensions`` finite little-endian
    floats, ``tokens`` a count >= 0 or NULL), else None (the key holds the width, so a
    row of another width is damage too)."""
    if not isinstance(blob, bytes) or len(blob) != 4 * dimensions:
        return None
    if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int)
                               or tokens < 0):
        return None
    vector = np.frombuffer(blob, dtype="<f4").astype(np.float32)
    return vector if np.isfinite(vector).all() else None


class EmbeddingCache:
    """Read and write cached embeddings (one connection, serialised by a lock)."""

    def __init__(self, folder: str | os.PathLike | None = None) -> None:
        self.folder = Path(folder) if folder is not None else default_cache_dir()
        self.folder.mkdir(parents=True, exist_ok=True)
        self.path = self.folder / FILENAME
        self.lock = threading.Lock()
        self.connection = sqlite3.connect(self.path, timeout=60, check_same_thread=False)
        self.connection.execute("PRAGMA journal_mode=WAL")
        self.connection.execute("PRAGMA synchronous=NORMAL")
        self.connection.execute(SCHEMA)
        self.connection.commit()

    def get_many(self, keys: Sequence[bytes], dimensions: int
                 ) -> dict[bytes, tuple[np.ndarray, int | None]]:
        """``key -> (vector, tokens)`` for the keys present with the right width."""
        found: dict[bytes, tuple[np.ndarray, int | None]] = {}
        for start in range(0, len(keys), LOOKUP_CHUNK):
            chunk = list(keys[start:start + LOOKUP_CHUNK])
            marks = ",".join("?" * len(chunk))
            with self.lock:
                rows = self.connection.execute(
                    f"SELECT key, tokens, vector FROM embeddings WHERE key IN ({marks})",
                    chunk).fetchall()
            damaged = []
            for key, tokens, blob in rows:
                vector = stored_vector(blob, tokens, dimensions)
                if vector is None:
                    damaged.append(key)
                else:
                    found[bytes(key)] = (vector, tokens)
            if damaged:  # a miss: encoded again and stored over it
                logger.warning("%s: %d cached embedding(s) damaged (not %d finite floats, or "
                               "a token count that is no count): removed, to be encoded "
                               "again", self.path, len(damaged), dimensions)
                with self.lock:
                    self.connection.executemany("DELETE FROM embeddings WHERE key = ?",
                                                [(key,) for key in damaged])
                    self.connection.commit()
        return found

    def put_many(self, rows: Iterable[tuple[bytes, np.ndarray, int | None]], *, provider: str,
                 model: str, input_type: str, dimensions: int) -> None:
        """Store ``(key, vector, tokens)`` rows and commit."""
        now = time.time()
        values = [(key, provider, model, input_type, dimensions, tokens,
                   np.ascontiguousarray(vector, dtype="<f4").tobytes(), now)
                  for key, vector, tokens in rows]
        with self.lock:
            self.connection.executemany(
                "INSERT OR REPLACE INTO embeddings VALUES (?, ?, ?, ?, ?, ?, ?, ?)", values)
            self.connection.commit()

    def count(self) -> int:
        with self.lock:
            return int(self.connection.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0])

    def close(self) -> None:
        with self.lock:
            self.connection.close()
