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

Crash safety and trust: a shard is its rows file, its digests file and a manifest written
last (atomic renames) that records both files' content digests (:mod:`tapt.util.digests`); a shard
without a manifest is a partial write and is deleted; a shard whose files differ from their
manifest (size, dtype, content: a truncated, garbled or reordered file) or whose manifest
records no digests is deleted (with a warning) and re-encoded, never used.
The digests file is checked when the shard is opened, the rows file the first time a lookup
hits it (one pass over it; its cost: ``benchmarks/bench_digests.py``). A row that is not
finite is never stored (nor one that overflows ``float16`` storage), and
:func:`tapt.retrieval.dense.passage_stream` checks cached rows as it checks fresh ones.

Failures and concurrency: a cache that cannot be written (read-only, disk full, its folder
deleted) warns and the work goes on uncached; a process holds its model key's
:class:`~tapt.util.cache_entries.InUse` lock while it uses it, so ``tapt cache prune`` never
deletes a folder whose shards are being written or read. A key folder that holds no shard
when its process lets go of it (a Ctrl-C before the first shard was stored) is removed then,
unless another process uses it: ``tapt cache ls`` lists no empty key an interrupt left.
Listing and pruning the keys: :mod:`tapt.retrieval.embedding_cache_entries`.

sentence-transformers has no embedding cache and the API encoders' SQLite cache
(``tapt.encoders.api.cache``) holds one row per request text, which would not memory-map a
million vectors: hence this module.

Memory: shard rows are read through :func:`tapt.util.mapped_file.map_npy`, whose pages are
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

import contextlib
import hashlib
import json
import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tapt.util.cache_entries import InUse
from tapt.util.digests import file_record, mismatch
from tapt.util.finite import nonfinite_rows
from tapt.util.mapped_file import MappedFile, map_npy

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
    rows_record: dict  # the rows file's content digest, from the manifest
    verified: bool = False  # the rows file was checked against ``rows_record``


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

    def finite_rows(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`rows` with the check fresh rows get: ``(rows of the finite ones, in
        order; the positions whose cached row holds a NaN or an infinity)``. Those are
        misses to encode again, with a warning."""
        positions = np.asarray(positions, dtype=np.int64)
        rows = self.rows(positions)
        broken = nonfinite_rows(rows)
        if not len(broken):
            return rows, positions[:0]
        logger.warning("embedding cache: %d cached rows are not finite (NaN or infinite); "
                       "they are encoded again", len(broken))
        keep = np.ones(len(positions), dtype=bool)
        keep[broken] = False
        return rows[keep], positions[broken]


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
        self.hits = 0
        self.misses = 0
        self.unstored = 0
        """Rows a failed write could not store (see :meth:`put_digests`)."""
        self.in_use = InUse(self.folder).acquire()  # creates the folder; prune keeps off
        try:
            self._record_use()
            self.shards = self._load_shards()
        except BaseException:  # Ctrl-C while the key is recorded: no lone lock is left
            self.close()
            raise

    def _record_use(self) -> None:
        """Write ``key.json`` (a new key) or touch it: its mtime is the key's last use."""
        key_file = self.folder / KEY_FILE
        try:
            if not key_file.exists():
                _atomic_write(key_file, json.dumps({**self.key, "storage": self.storage_dtype},
                                                   indent=2, sort_keys=True, default=str))
            else:
                os.utime(key_file)  # for `tapt cache prune`
        except OSError as err:
            logger.warning("embedding cache %s: cannot record its use (%s); it is read as "
                           "it is", self.folder, err.strerror or err)

    def close(self) -> None:
        """Release the folder's lock (``tapt cache prune`` may delete it again); a folder
        that holds no shard (manifest) is removed, unless another process uses it."""
        self.in_use.release(remove_unless=lambda folder: any(folder.glob("shard-*.json")))

    def __enter__(self) -> EmbeddingCache:  # noqa: PYI034
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "in_use", None) is not None:
            with contextlib.suppress(Exception):  # at interpreter exit modules may be gone
                self.close()

    def _load_shards(self) -> list[_Shard]:
        shards = []
        manifests = {p.name[:-len(".json")] for p in self.folder.glob("shard-*.json")}
        for leftover in self.folder.glob("shard-*"):
            stem = leftover.name.split(".")[0]
            # no manifest: a write that did not finish (or one another process is making)
            if stem not in manifests and (not writer_alive(stem)
                                          or _age_s(leftover) > ORPHAN_AGE_S):
                _unlink(leftover)
        for stem in sorted(manifests):
            shard = self._open(stem)
            if shard is not None:
                shards.append(shard)
        return shards

    def _open(self, stem: str) -> _Shard | None:
        manifest_path = self.folder / f"{stem}.json"
        rows_path = self.folder / f"{stem}.rows.npy"
        digests_path = self.folder / f"{stem}.digests.npy"
        try:
            manifest = json.loads(manifest_path.read_text())
            files = manifest.get("files") if isinstance(manifest, dict) else None
            if not isinstance(files, dict):
                raise TypeError("its manifest records no content digests (field 'files')")
            problem = mismatch(digests_path, files.get("digests.npy"))
            if problem is None and _size_differs(rows_path, files.get("rows.npy")):
                problem = mismatch(rows_path, files.get("rows.npy"))  # the size says it
            if problem is not None:
                raise ValueError(problem)
            mapped, rows = map_npy(rows_path)
            digests = np.load(digests_path)
            expected = (manifest["rows"], manifest["dim"])
            if rows.shape != expected or str(rows.dtype) != manifest["dtype"] or \
                    digests.shape != (manifest["rows"],) or \
                    digests.dtype != np.dtype(f"V{DIGEST_BYTES}"):
                raise ValueError(f"shape {rows.shape}/{digests.shape} or dtype {rows.dtype} "
                                 f"differs from the manifest {manifest}")
        except (OSError, ValueError, KeyError, TypeError, json.JSONDecodeError) as err:
            self._delete(stem, str(err))
            return None
        return _Shard(stem, digests, rows, mapped, files["rows.npy"])

    def _delete(self, stem: str, reason: str) -> None:
        logger.warning("embedding cache: shard %s in %s is damaged (%s); deleting it, "
                       "its passages will be encoded again", stem, self.folder, reason)
        for path in self.folder.glob(f"{stem}.*"):
            _unlink(path)

    def _usable(self, shard: _Shard) -> bool:
        """Check the shard's rows file against its manifest once (the first hit); a
        mismatch deletes the shard."""
        if not shard.verified:
            problem = mismatch(self.folder / f"{shard.name}.rows.npy", shard.rows_record)
            if problem is not None:
                self._delete(shard.name, f"{shard.name}.rows.npy: {problem}")
                self.shards = [s for s in self.shards if s is not shard]
                return False
            shard.verified = True
        return True

    @property
    def size(self) -> int:
        return sum(len(s.digests) for s in self.shards)

    def lookup(self, texts: Sequence[str]) -> CacheHits:
        """Where each of ``texts`` is cached (reads no rows: :meth:`CacheHits.rows` does,
        but a shard hit for the first time is checked against its digest first)."""
        digests = text_digests(texts)
        found = np.zeros(len(texts), dtype=bool)
        shard_of = np.full(len(texts), -1, dtype=np.int64)
        row_of = np.full(len(texts), -1, dtype=np.int64)
        used: list[_Shard] = []
        for shard in list(self.shards):
            order = np.argsort(shard.digests)
            ordered = shard.digests[order]
            spots = np.minimum(np.searchsorted(ordered, digests), len(ordered) - 1)
            match = (ordered[spots] == digests) & ~found
            if not match.any() or not self._usable(shard):
                continue
            shard_of[match] = len(used)
            row_of[match] = order[spots[match]]
            found |= match
            used.append(shard)
        self.hits += int(found.sum())
        self.misses += int((~found).sum())
        return CacheHits(found, shard_of, row_of, used, digests)

    def get(self, texts: Sequence[str]) -> tuple[np.ndarray | None, np.ndarray]:
        """``(rows, found)``: ``found[i]`` says whether text ``i`` is cached; ``rows`` is a
        float32 ``(n, dim)`` array filled where found (None when nothing is cached). For a
        large corpus, :meth:`lookup` reads the rows a part at a time instead."""
        hits = self.lookup(texts)
        if not self.shards:
            return None, hits.found
        out = np.zeros((len(texts), self.shards[0].rows.shape[1]), dtype=np.float32)
        positions = np.flatnonzero(hits.found)
        rows, broken = hits.finite_rows(positions)
        hits.found[broken] = False
        out[np.setdiff1d(positions, broken)] = rows
        return out, hits.found

    def put(self, texts: Sequence[str], rows: np.ndarray) -> None:
        """Store the rows of ``texts`` as a new shard (atomic: manifest written last)."""
        self.put_digests(text_digests(texts), rows)

    def put_digests(self, digests: np.ndarray, rows: np.ndarray) -> None:
        """:meth:`put` for texts whose :func:`text_digests` are known (a :class:`CacheHits`
        has them: the texts need not be read again). Rows that are not finite once stored
        (``float16`` overflows past 65504) are left out. A write that fails (disk full,
        read-only, the folder deleted) is a warning: the rows stay uncached, nothing is
        raised."""
        rows = np.asarray(rows)
        if rows.ndim != 2 or len(rows) != len(digests):
            raise ValueError(f"expected {len(digests)} rows, got an array of shape "
                             f"{rows.shape}")
        if not len(digests):
            return
        if self.shards and rows.shape[1] != self.shards[0].rows.shape[1]:
            raise ValueError(f"rows of dimension {rows.shape[1]} do not match the cached "
                             f"{self.shards[0].rows.shape[1]}")
        with np.errstate(over="ignore"):  # an overflow is found just below
            stored = rows.astype(self.storage_dtype, copy=False)
        broken = nonfinite_rows(stored)
        if len(broken):
            logger.warning("embedding cache: %d of %d rows are not finite in %s storage; "
                           "they are not cached", len(broken), len(stored), self.storage_dtype)
            keep = np.ones(len(stored), dtype=bool)
            keep[broken] = False
            stored, digests = stored[keep], digests[keep]
            if not len(digests):
                return
        stem = f"shard-{time.time_ns():020d}-{os.getpid()}"
        try:
            shard = self._write(stem, stored, digests)
        except OSError as err:
            for path in self.folder.glob(f"{stem}.*"):
                _unlink(path)
            if not self.unstored:
                logger.warning("embedding cache %s: cannot store %d rows (%s); they are not "
                               "cached and the work goes on", self.folder, len(digests),
                               err.strerror or err)
            self.unstored += len(digests)
            return
        self.shards.append(shard)

    def _write(self, stem: str, stored: np.ndarray, digests: np.ndarray) -> _Shard:
        """Write one shard (rows, digests, then the manifest with their digests) and open
        it; raises OSError when the disk refuses."""
        files = {}
        for suffix, array in (("rows", stored), ("digests", digests)):
            final = self.folder / f"{stem}.{suffix}.npy"
            partial = final.with_name(final.name + ".partial")
            with open(partial, "wb") as handle:
                np.save(handle, array)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(partial, final)
            files[final.name[len(stem) + 1:]] = file_record(final)  # read back from disk
        _atomic_write(self.folder / f"{stem}.json", json.dumps(
            {"rows": len(digests), "dim": int(stored.shape[1]), "dtype": self.storage_dtype,
             "files": files}))
        shard = self._open(stem)
        if shard is None:
            raise OSError(f"shard {stem} did not read back")
        shard.verified = True  # its record was just read from the file
        return shard


def writer_alive(stem: str) -> bool:
    """Whether the process that writes shard ``stem`` (``shard-<ns>-<pid>``) may still be
    writing it: its pid runs on this host (True when the pid cannot be told: then only
    :data:`ORPHAN_AGE_S` removes the files). An interrupted encode's files go at once."""
    try:
        pid = int(stem.rsplit("-", 1)[1])
    except (IndexError, ValueError):
        return True
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True


def _size_differs(path: Path, record: object) -> bool:
    """True when ``path``'s size differs from ``record``'s (cheap: no read)."""
    try:
        return not isinstance(record, dict) or os.stat(path).st_size != record.get("bytes")
    except OSError:
        return True


def _unlink(path: Path) -> None:
    """Delete ``path`` if it can be (a read-only cache keeps it)."""
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass


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
