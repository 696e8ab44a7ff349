"""An on-disk cache of passage embeddings for local models, keyed per passage text.

One corpus encode of FormBench is ~1.3B tokens; every evaluation, ablation fraction, analysis
and mining pass of the same model would repeat it. The cache keeps embeddings as
memory-mapped ``.npy`` shards under ``ROOT/<model key>/``: the model key is a digest of
everything that changes an embedding except the text (weights, tokenizer, prompt, pooling,
maximum length, dtype, normalisation, ``truncate_dim`` and, under ``chunk-mean``, the
long-passage mode, chunk tokens and stride: ``Encoder.cache_key``, built by
:func:`tapt.encoders.model_digest.model_key`), and each row is found by a 128-bit BLAKE2b
digest of the exact text encoded. So C0 and C1 share the passages they have
in common, and a changed passage misses alone.

Crash safety: a shard is its rows file, its digests file and a manifest written last (atomic
renames); a shard without a manifest is a partial write and is deleted; a manifest whose files
have the wrong size or dtype is stale and the shard is deleted (with a warning) and re-encoded,
never used. sentence-transformers has no embedding cache and the API encoders' SQLite cache
(``tapt.encoders.api.cache``) holds one row per request text, which would not memory-map a
million vectors: hence this module.

Memory: shard rows are read through :func:`tapt.mapped_file.map_npy`, whose pages are
dropped from the process as they are read, and :meth:`EmbeddingCache.lookup` only says
where each text's row lies; :meth:`CacheHits.rows` reads a part at a time, so a warm
1M x 1024 corpus is not gathered into one 4 GB array beside the index.

Example::

    cache = EmbeddingCache(root, encoder.cache_key("document"))  # or model_key(model, ...)
    hits = cache.lookup(texts)                   # hits.found[i]: text i is cached
    rows = hits.rows(np.flatnonzero(hits.found)[:8192])  # a part of the cached rows
    cache.put([t for t, f in zip(texts, hits.found) if not f], new_rows)
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tapt.cache_entries import CacheEntry, prune_entries
from tapt.mapped_file import MappedFile, map_npy

# torch is imported only to read a model's weights for the cache key: importing tapt
# must not import it.

logger = logging.getLogger(__name__)

DIGEST_BYTES = 16
KEY_FILE = "key.json"
STORAGE_DTYPES = ("float16", "float32")
ORPHAN_AGE_S = 3600.0
"""A shard file without a manifest older than this is a dead write and is deleted."""
ENABLE_ENV = "TAPT_EMBEDDING_CACHE"
"""Set to 0 to turn the default cache off (an explicit folder still counts)."""


def local_cache_root(cache_dir: str | os.PathLike | None = None) -> Path | None:
    """The local-model cache folder: ``CACHE_DIR/local``, with ``cache_dir`` None the default
    embeddings folder (``$TAPT_CACHE_DIR/embeddings``, else ``~/.cache/tapt/embeddings``);
    None when no folder is given and ``TAPT_EMBEDDING_CACHE=0``."""
    from tapt.encoders.api.cache import default_cache_dir

    if cache_dir is None and os.environ.get(ENABLE_ENV, "1") == "0":
        return None
    return Path(cache_dir if cache_dir is not None else default_cache_dir()) / "local"


def text_digests(texts: Sequence[str]) -> np.ndarray:
    """``(n,)`` array of 16-byte BLAKE2b digests of the texts (numpy ``V16``)."""
    out = np.empty(len(texts), dtype=f"V{DIGEST_BYTES}")
    for i, text in enumerate(texts):
        out[i] = hashlib.blake2b(text.encode("utf-8", "surrogatepass"),
                                 digest_size=DIGEST_BYTES).digest()
    return out


def key_digest(key: Mapping) -> str:
    return hashlib.blake2b(json.dumps(key, sort_keys=True, default=str).encode(),
                           digest_size=DIGEST_BYTES).hexdigest()


@dataclass
class _Shard:
    name: str
    digests: np.ndarray  # (n,) V16
    rows: np.ndarray  # (n, dim) memory-mapped from ``mapped``
    mapped: MappedFile


@dataclass
class CacheHits:
    """Where the cached rows of some texts lie (``found``; ``shard`` and ``row``, -1 where
    not found) and the texts' digests; :meth:`rows` reads the rows of some of them."""

    found: np.ndarray  # (n,) bool
    shard: np.ndarray  # (n,) int64
    row: np.ndarray  # (n,) int64
    shards: list[_Shard]
    digests: np.ndarray  # (n,) V16: the texts' digests, for writing the misses back

    def rows(self, positions: np.ndarray) -> np.ndarray:
        """float32 ``(len(positions), dim)`` rows of the texts at ``positions`` (all found)."""
        positions = np.asarray(positions, dtype=np.int64)
        if not self.found[positions].all():
            raise KeyError(f"{int((~self.found[positions]).sum())} of the positions asked "
                           f"for are not cached")
        dim = self.shards[0].rows.shape[1] if self.shards else 0
        out = np.empty((len(positions), dim), dtype=np.float32)
        shard_of = self.shard[positions]
        for number in np.unique(shard_of):
            pick = np.flatnonzero(shard_of == number)
            shard = self.shards[int(number)]
            out[pick] = shard.rows[self.row[positions[pick]]]
            shard.mapped.read(len(pick) * dim * shard.rows.itemsize)
        return out


class EmbeddingCache:
    """Cached rows of one model key under ``root``; ``get`` and ``put`` by text."""

    def __init__(self, root: str | os.PathLike, key: Mapping, *,
                 storage_dtype: str = "float32") -> None:
        if storage_dtype not in STORAGE_DTYPES:
            raise ValueError(f"storage_dtype must be one of {STORAGE_DTYPES}, got "
                             f"{storage_dtype!r}")
        self.key = dict(key)
        self.storage_dtype = storage_dtype
        self.folder = Path(root) / key_digest({**self.key, "storage": storage_dtype})
        self.folder.mkdir(parents=True, exist_ok=True)
        key_file = self.folder / KEY_FILE
        if not key_file.exists():
            _atomic_write(key_file, json.dumps({**self.key, "storage": storage_dtype},
                                               indent=2, sort_keys=True, default=str))
        else:
            os.utime(key_file)  # its mtime is the key's last use (for `tapt cache prune`)
        self.shards = self._load_shards()
        self.hits = 0
        self.misses = 0

    def _load_shards(self) -> list[_Shard]:
        shards = []
        manifests = {p.name[:-len(".json")] for p in self.folder.glob("shard-*.json")}
        for leftover in self.folder.glob("shard-*"):
            stem = leftover.name.split(".")[0]
            # no manifest: a write that did not finish (or one another process is making)
            if stem not in manifests and _age_s(leftover) > ORPHAN_AGE_S:
                leftover.unlink(missing_ok=True)
        for stem in sorted(manifests):
            shard = self._open(stem)
            if shard is not None:
                shards.append(shard)
        return shards

    def _open(self, stem: str) -> _Shard | None:
        manifest_path = self.folder / f"{stem}.json"
        try:
            manifest = json.loads(manifest_path.read_text())
            mapped, rows = map_npy(self.folder / f"{stem}.rows.npy")
            digests = np.load(self.folder / f"{stem}.digests.npy")
            expected = (manifest["rows"], manifest["dim"])
            if rows.shape != expected or str(rows.dtype) != manifest["dtype"] or \
                    digests.shape != (manifest["rows"],) or \
                    digests.dtype != np.dtype(f"V{DIGEST_BYTES}"):
                raise ValueError(f"shape {rows.shape}/{digests.shape} or dtype {rows.dtype} "
                                 f"differs from the manifest {manifest}")
        except (OSError, ValueError, KeyError, json.JSONDecodeError) as err:
            logger.warning("embedding cache: shard %s in %s is damaged (%s); deleting it, "
                           "its passages will be encoded again", stem, self.folder, err)
            for path in self.folder.glob(f"{stem}.*"):
                path.unlink(missing_ok=True)
            return None
        return _Shard(stem, digests, rows, mapped)

    @property
    def size(self) -> int:
        return sum(len(s.digests) for s in self.shards)

    def lookup(self, texts: Sequence[str]) -> CacheHits:
        """Where each of ``texts`` is cached (reads no rows: :meth:`CacheHits.rows` does)."""
        digests = text_digests(texts)
        found = np.zeros(len(texts), dtype=bool)
        shard_of = np.full(len(texts), -1, dtype=np.int64)
        row_of = np.full(len(texts), -1, dtype=np.int64)
        for number, shard in enumerate(self.shards):
            order = np.argsort(shard.digests)
            ordered = shard.digests[order]
            spots = np.minimum(np.searchsorted(ordered, digests), len(ordered) - 1)
            match = (ordered[spots] == digests) & ~found
            shard_of[match] = number
            row_of[match] = order[spots[match]]
            found |= match
        self.hits += int(found.sum())
        self.misses += int((~found).sum())
        return CacheHits(found, shard_of, row_of, list(self.shards), digests)

    def get(self, texts: Sequence[str]) -> tuple[np.ndarray | None, np.ndarray]:
        """``(rows, found)``: ``found[i]`` says whether text ``i`` is cached; ``rows`` is a
        float32 ``(n, dim)`` array filled where found (None when nothing is cached). For a
        large corpus, :meth:`lookup` reads the rows a part at a time instead."""
        hits = self.lookup(texts)
        if not self.shards:
            return None, hits.found
        out = np.zeros((len(texts), self.shards[0].rows.shape[1]), dtype=np.float32)
        out[hits.found] = hits.rows(np.flatnonzero(hits.found))
        return out, hits.found

    def put(self, texts: Sequence[str], rows: np.ndarray) -> None:
        """Store the rows of ``texts`` as a new shard (atomic: manifest written last)."""
        self.put_digests(text_digests(texts), rows)

    def put_digests(self, digests: np.ndarray, rows: np.ndarray) -> None:
        """:meth:`put` for texts whose :func:`text_digests` are known (a :class:`CacheHits`
        has them: the texts need not be read again)."""
        rows = np.asarray(rows)
        if rows.ndim != 2 or len(rows) != len(digests):
            raise ValueError(f"expected {len(digests)} rows, got an array of shape "
                             f"{rows.shape}")
        if not len(digests):
            return
        if self.shards and rows.shape[1] != self.shards[0].rows.shape[1]:
            raise ValueError(f"rows of dimension {rows.shape[1]} do not match the cached "
                             f"{self.shards[0].rows.shape[1]}")
        stem = f"shard-{time.time_ns():020d}-{os.getpid()}"
        stored = rows.astype(self.storage_dtype, copy=False)
        for suffix, array in (("rows", stored), ("digests", digests)):
            final = self.folder / f"{stem}.{suffix}.npy"
            partial = final.with_name(final.name + ".partial")
            with open(partial, "wb") as handle:
                np.save(handle, array)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(partial, final)
        _atomic_write(self.folder / f"{stem}.json", json.dumps(
            {"rows": len(digests), "dim": int(rows.shape[1]), "dtype": self.storage_dtype}))
        shard = self._open(stem)
        if shard is not None:
            self.shards.append(shard)


def _age_s(path: Path) -> float:
    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return 0.0


def _atomic_write(path: Path, text: str) -> None:
    partial = path.with_name(path.name + ".partial")
    with open(partial, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(partial, path)


def list_entries(root: str | os.PathLike) -> list[CacheEntry]:
    """Every model key under ``root``, most recently used first."""
    entries = []
    root = Path(root)
    if not root.is_dir():
        return entries
    for folder in root.iterdir():
        key_file = folder / KEY_FILE
        if not key_file.is_file():
            continue
        try:
            key = json.loads(key_file.read_text())
        except (OSError, json.JSONDecodeError):
            key = {}
        rows, size, used = 0, 0, key_file.stat().st_mtime  # touched at every use
        for path in folder.iterdir():
            size += path.stat().st_size
            if path.name.endswith(".json") and path.name.startswith("shard-"):
                try:
                    rows += int(json.loads(path.read_text())["rows"])
                except (OSError, ValueError, KeyError, json.JSONDecodeError):
                    pass
        entries.append(CacheEntry(folder, key, rows, size, used))
    return sorted(entries, key=lambda e: -e.last_used)


def prune(root: str | os.PathLike, *, older_than_days: float | None = None,
          keep_bytes: int | None = None) -> list[CacheEntry]:
    """Delete model keys unused for ``older_than_days``, then the least recently used until
    the cache holds at most ``keep_bytes``; returns what was deleted."""
    return prune_entries(list_entries(root), older_than_days=older_than_days,
                         keep_bytes=keep_bytes)
