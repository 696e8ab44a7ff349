"""A BEIR corpus held in a memory-mapped Arrow file instead of Python objects.

A ~1M-passage FormBench corpus is ~6 GB of text; as a ``dict[str, Passage]`` it takes
over twice that in Python objects, and ``tapt eval`` used to copy every text once more.
:func:`open_arrow_corpus` instead streams ``corpus.jsonl`` once through the same
validation as :func:`tapt.data.beir.parse_corpus` (ids by :mod:`tapt.util.ids`, required
fields, duplicate ids: a :class:`~tapt.data.beir.DataError` naming file, line and field),
writing record batches to an Arrow IPC file, then memory-maps it. What stays in Python is
the id -> row map (~150 bytes a passage); the texts are file-backed pages the kernel
can drop. As the encoder streams through the texts, :class:`~tapt.util.mapped_file.MappedFile`
drops the pages it has read from this process's resident set (``madvise(MADV_DONTNEED)``)
every 256 MiB, so peak RSS does not grow by the whole ~6 GB file over a full encode (the
kernel's page cache still serves a re-read). :class:`ArrowCorpus` is a read-only
``Mapping[str, Passage]`` (a passage is built on demand), so code written for the dict
works unchanged; :func:`corpus_texts` gives the lazy ``Sequence[str]`` the encoders read
in chunks.

The Arrow file is cached under ``cache_dir`` (default ``$TAPT_CACHE_DIR/corpus`` or
``~/.cache/tapt/corpus``), keyed by the file's path, a SHA-256 of its content (one streamed
pass, :mod:`tapt.util.digests`: an edit that keeps the size and mtime is a new version) and the
validation options, and reused while the content is unchanged (it was validated when
written); a new version of the file replaces the old one's Arrow file (a 1M-passage corpus
takes ~6 GB). The Arrow file's own digest is written beside it (``NAME.arrow.digest.json``)
and checked before it is mapped: a truncated, garbled or unrecorded file is a miss, deleted
and rebuilt with a warning naming it. A cache that cannot be written (read-only, disk full)
warns and the corpus is held in memory as an Arrow table for the run.
pyarrow is used directly (``datasets`` would add its own cache and fingerprints for
nothing here); it is imported when an Arrow corpus is opened.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Literal

import numpy as np

from tapt.data.beir import Passage, checked_passages, read_corpus
from tapt.data.lines import iter_jsonl
from tapt.util.cache_entries import CacheEntry
from tapt.util.digests import check_sidecar, file_digest, file_record, sidecar_path, write_sidecar
from tapt.util.mapped_file import MappedFile

logger = logging.getLogger(__name__)

CorpusStore = Literal["memory", "arrow", "auto"]
CORPUS_STORES = ("memory", "arrow", "auto")
AUTO_ARROW_BYTES = 256 * 2**20
"""``auto``: a ``corpus.jsonl`` of at least this many bytes (~40k FormBench passages)
is read into Arrow, a smaller one into a dict."""
BATCH_ROWS = 4096
"""Passages per Arrow record batch written."""
FORMAT = 2
"""Bumped when the cached file's layout changes (2: keyed by content, with a digest)."""
CACHED_NAME = re.compile(r"[0-9a-f]{16}-[0-9a-f]{16}\.arrow")
"""The names :func:`cached_arrow_corpus` gives its files (``tapt cache`` touches no other)."""
SOURCE_KEY = "tapt.source"
"""Schema metadata: the corpus file an Arrow file was read from (for ``tapt cache ls``)."""


def default_corpus_cache() -> Path:
    """``$TAPT_CACHE_DIR/corpus``, else ``$XDG_CACHE_HOME/tapt/corpus`` or ``~/.cache``."""
    if os.environ.get("TAPT_CACHE_DIR"):
        return Path(os.environ["TAPT_CACHE_DIR"]) / "corpus"
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "tapt" / "corpus"


def choose_store(store: str, path: str | os.PathLike) -> Literal["memory", "arrow"]:
    """``memory`` or ``arrow`` for ``store`` (``auto``: by the size of ``path``)."""
    size = 0
    if store == "auto":
        try:
            size = Path(path).stat().st_size
        except OSError:
            return "memory"  # the dict reader reports the problem
    return store_for_bytes(store, size)


def store_for_bytes(store: str, size: int) -> Literal["memory", "arrow"]:
    """``memory`` or ``arrow`` for ``store`` given a corpus of ``size`` bytes."""
    if store not in CORPUS_STORES:
        raise ValueError(f"corpus_store must be one of {', '.join(CORPUS_STORES)}, "
                         f"got {store!r}")
    if store != "auto":
        return store
    return "arrow" if size >= AUTO_ARROW_BYTES else "memory"


class PassageTexts(Sequence[str]):
    """Read-only view of passage texts (``Passage.as_text``) of some rows of an Arrow
    table; a slice or an iteration decodes a chunk at a time, never the whole column.
    ``mapped``: the file the table is mapped from, told how much each decode read."""

    def __init__(self, table, rows: np.ndarray | None, with_title: bool,
                 mapped: MappedFile | None = None) -> None:
        self.table = table
        self.rows = rows
        self.with_title = with_title
        self.mapped = mapped

    def __len__(self) -> int:
        return self.table.num_rows if self.rows is None else len(self.rows)

    def _decode(self, part) -> list[str]:
        texts = part.column("text").to_pylist()
        if self.mapped is not None:
            self.mapped.read(part.nbytes)
        if not self.with_title:
            return texts
        titles = part.column("title").to_pylist()
        return [f"{title} {text}" if title else text for title, text in zip(titles, texts)]

    def __getitem__(self, item):
        if isinstance(item, slice):
            start, stop, step = item.indices(len(self))
            if step == 1 and self.rows is None:
                return self._decode(self.table.slice(start, max(stop - start, 0)))
            rows = (np.arange(start, stop, step) if self.rows is None
                    else self.rows[start:stop:step])
            return self._decode(self.table.take(rows))
        index = int(item)
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"passage {item} out of range ({len(self)} passages)")
        row = index if self.rows is None else int(self.rows[index])
        return self._decode(self.table.slice(row, 1))[0]

    def __iter__(self) -> Iterator[str]:
        for start in range(0, len(self), BATCH_ROWS):
            yield from self[start:start + BATCH_ROWS]


class ArrowCorpus(Mapping[str, Passage]):
    """``corpus id -> Passage`` over a memory-mapped Arrow table (ids in file order).

    ``path``: the Arrow file (None: a table held in memory, the cache could not be
    written); ``source``: the corpus file it was read from (messages); ``mapped``: the
    mapping of ``path`` the table reads from, if any; ``source_digest``: the SHA-256 of the
    corpus file it was read from, when it is a local file (its cache key)."""

    def __init__(self, table, ids: dict[str, int], path: Path | None, source: str,
                 mapped: MappedFile | None = None) -> None:
        self.table = table
        self.rows = ids
        self.path = path
        self.source = source
        self.mapped = mapped
        self.source_digest: str | None = None

    def __getitem__(self, doc_id: str) -> Passage:
        row = self.rows[doc_id]
        part = self.table.slice(row, 1)
        return Passage(text=part.column("text")[0].as_py(),
                       title=part.column("title")[0].as_py())

    def __contains__(self, doc_id) -> bool:
        return doc_id in self.rows

    def __iter__(self) -> Iterator[str]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def text_bytes(self) -> int:
        """Bytes of the mapped titles and texts (what the page cache may hold)."""
        return int(self.table.nbytes)

    def texts(self, ids: Sequence[str] | None = None, with_title: bool = True) -> PassageTexts:
        """The texts of ``ids`` (default: every passage, in file order) as a lazy view."""
        if ids is None:
            return PassageTexts(self.table, None, with_title, self.mapped)
        rows = np.fromiter((self.rows[doc_id] for doc_id in ids), dtype=np.int64,
                           count=len(ids))
        whole = len(rows) == self.table.num_rows and bool(
            (rows == np.arange(len(rows))).all())
        return PassageTexts(self.table, None if whole else rows, with_title, self.mapped)


def corpus_texts(corpus: Mapping[str, Passage], ids: Sequence[str],
                 with_title: bool = True) -> Sequence[str]:
    """The texts of ``ids``: a lazy view for an :class:`ArrowCorpus`, else a list."""
    if isinstance(corpus, ArrowCorpus):
        return corpus.texts(ids, with_title)
    return [corpus[doc_id].as_text(with_title) for doc_id in ids]


def subset_texts(texts: Sequence[str], positions: np.ndarray) -> Sequence[str]:
    """``texts[i] for i in positions``: ``texts`` itself when that is all of them in
    order, a lazy view of a :class:`PassageTexts`, else a list."""
    positions = np.asarray(positions, dtype=np.int64)
    if len(positions) == len(texts) and bool((positions == np.arange(len(texts))).all()):
        return texts
    if isinstance(texts, PassageTexts):
        rows = positions if texts.rows is None else texts.rows[positions]
        return PassageTexts(texts.table, rows, texts.with_title, texts.mapped)
    return [texts[i] for i in positions]


def open_arrow_corpus(path: str | os.PathLike, *, allow_empty: bool = False,
                      cache_dir: str | os.PathLike | None = None) -> ArrowCorpus:
    """The validated corpus of ``corpus.jsonl`` at ``path`` as an :class:`ArrowCorpus`,
    from the cache when the file's content is unchanged, else written there by one
    streamed pass."""
    path = Path(path)
    if not path.is_file():
        read_corpus(path)  # the dict reader's message for a missing or odd file
    content = file_digest(path)  # the key: what the file holds, not its size and mtime
    corpus = cached_arrow_corpus(lambda: iter_jsonl(path), str(path), str(path.resolve()),
                                 [content], allow_empty=allow_empty, cache_dir=cache_dir)
    corpus.source_digest = content
    return corpus


def cached_arrow_corpus(records: Callable[[], Iterable[tuple[int, dict]]], label: str,
                        origin: str, version: list, *, allow_empty: bool = False,
                        cache_dir: str | os.PathLike | None = None) -> ArrowCorpus:
    """The :class:`ArrowCorpus` of the ``(line, record)`` pairs ``records()`` gives: the
    cached file of ``origin`` (what the corpus is: a resolved path, a Hub dataset) at
    ``version`` (what changes with its content), when its digest checks, else written by
    validating them once (errors name ``label``), replacing the file of an earlier
    version. A cache that cannot be written gives a table in memory, with a warning."""
    key = json.dumps([FORMAT, *version, bool(allow_empty)])
    folder = Path(cache_dir) if cache_dir is not None else default_corpus_cache()
    prefix = _digest(origin)
    target = folder / f"{prefix}-{_digest(key)}.arrow"
    if target.is_file():
        corpus = open_cached(target, label)
        if corpus is not None:
            with contextlib.suppress(OSError):  # a read-only (shared) cache: used as it is
                os.utime(target)  # its mtime is its last use (for `tapt cache prune`)
            return corpus
    try:
        corpus = write_arrow_corpus(records(), label, target, allow_empty=allow_empty,
                                    origin=origin)
    except OSError as err:
        logger.warning("corpus cache %s cannot be written (%s); the corpus is held in "
                       "memory for this run", target, err.strerror or err)
        return memory_arrow_corpus(records(), label, allow_empty=allow_empty, origin=origin)
    for stale in folder.glob(f"{prefix}-*.arrow"):  # earlier versions of this corpus
        if stale != target:
            _remove_cached(stale)  # a process mapping it keeps its pages
    return corpus


def open_cached(target: Path, label: str) -> ArrowCorpus | None:
    """The cached file ``target`` mapped, once its content matches its digest record;
    None (it is deleted, with a warning naming it) when it does not or cannot be read."""
    import pyarrow as pa

    problem = check_sidecar(target)
    if problem is None:
        try:
            return map_arrow_corpus(target, label)
        except (OSError, ValueError, KeyError, pa.ArrowException) as err:
            problem = f"unreadable ({type(err).__name__}: {err})"
    logger.warning("corpus cache %s: %s; it is rebuilt from %s", target, problem, label)
    _remove_cached(target)
    return None


def _remove_cached(path: Path) -> None:
    for name in (path, sidecar_path(path)):
        with contextlib.suppress(OSError):
            name.unlink(missing_ok=True)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _schema(origin: str):
    import pyarrow as pa

    return pa.schema([("_id", pa.string()), ("title", pa.string()), ("text", pa.string())],
                     metadata={SOURCE_KEY: origin})


def record_batches(records: Iterable[tuple[int, dict]], source: str | os.PathLike, schema, *,
                   allow_empty: bool = False) -> Iterator:
    """Validated ``(line, record)`` pairs (:func:`~tapt.data.beir.checked_passages`:
    errors name ``source``) as Arrow record batches of :data:`BATCH_ROWS` passages."""
    import pyarrow as pa

    columns: tuple[list, list, list] = ([], [], [])
    for doc_id, passage in checked_passages(records, source, allow_empty=allow_empty):
        for column, value in zip(columns, (doc_id, passage.title, passage.text)):
            column.append(value)
        if len(columns[0]) >= BATCH_ROWS:
            yield pa.record_batch(list(columns), schema=schema)
            columns = ([], [], [])
    if columns[0]:
        yield pa.record_batch(list(columns), schema=schema)


def write_arrow_corpus(records: Iterable[tuple[int, dict]], source: str | os.PathLike,
                       target: Path, *, allow_empty: bool = False,
                       origin: str | None = None) -> ArrowCorpus:
    """Validate ``(line, record)`` pairs (errors name ``source``), write them to the Arrow
    IPC file ``target`` with its digest record beside it (atomically: a partial file never
    stays), and return it mapped (mapped before it is renamed into place, so a ``tapt cache
    prune`` meanwhile cannot take it away). ``origin`` (default ``source``) is recorded for
    ``tapt cache ls``. A full or read-only disk raises ``OSError``."""
    import pyarrow as pa

    schema = _schema(str(origin if origin is not None else source))
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    try:
        with pa.OSFile(str(partial), "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
            for batch in record_batches(records, source, schema, allow_empty=allow_empty):
                writer.write_batch(batch)
        corpus = map_arrow_corpus(partial, str(source))
        write_sidecar(target, file_record(partial))
        try:
            os.replace(partial, target)
        except OSError:
            sidecar_path(target).unlink(missing_ok=True)
            raise
        corpus.path = target
        return corpus
    finally:
        partial.unlink(missing_ok=True)


def memory_arrow_corpus(records: Iterable[tuple[int, dict]], source: str | os.PathLike, *,
                        allow_empty: bool = False, origin: str | None = None) -> ArrowCorpus:
    """:func:`write_arrow_corpus` without a file: the validated table held in memory."""
    import pyarrow as pa

    schema = _schema(str(origin if origin is not None else source))
    table = pa.Table.from_batches(list(record_batches(records, source, schema,
                                                      allow_empty=allow_empty)), schema=schema)
    return ArrowCorpus(table, _id_rows(table), None, str(source))


def map_arrow_corpus(target: Path, source: str) -> ArrowCorpus:
    """Memory-map a file :func:`write_arrow_corpus` wrote (zero-copy: the texts stay in
    the page cache) and index its ids."""
    import pyarrow as pa

    mapped = MappedFile(target)
    table = pa.ipc.open_file(pa.BufferReader(mapped.buffer())).read_all()
    mapped.data_bytes = max(int(table.nbytes), 1)
    rows = _id_rows(table)
    mapped.release()  # the id column's pages: read once, not needed again
    return ArrowCorpus(table, rows, target, source, mapped)


def _id_rows(table) -> dict[str, int]:
    rows: dict[str, int] = {}
    for chunk in table.column("_id").chunks:
        for doc_id in chunk.to_pylist():
            rows[doc_id] = len(rows)
    return rows


def list_corpus_files(folder: str | os.PathLike | None = None) -> list[CacheEntry]:
    """The cached Arrow corpora in ``folder`` (default :func:`default_corpus_cache`), most
    recently used first; ``key`` names the corpus file each was read from."""
    import pyarrow as pa

    folder = Path(folder) if folder is not None else default_corpus_cache()
    entries = []
    for path in folder.glob("*.arrow") if folder.is_dir() else ():
        if not CACHED_NAME.fullmatch(path.name):
            continue  # not a file tapt wrote: never listed, never pruned
        try:
            stat = path.stat()
        except OSError:
            continue  # deleted meanwhile
        try:
            with pa.memory_map(str(path), "r") as source:
                reader = pa.ipc.open_file(source)
                rows = sum(reader.get_record_batch(i).num_rows
                           for i in range(reader.num_record_batches))
                metadata = reader.schema.metadata or {}
        except (OSError, pa.ArrowInvalid):
            rows, metadata = 0, {}  # a damaged file: listed, and pruned like any other
        corpus = metadata.get(SOURCE_KEY.encode(), b"?").decode("utf-8", errors="replace")
        record = sidecar_path(path)
        entries.append(CacheEntry(path, {"kind": "corpus", "source": corpus}, rows,
                                  stat.st_size, stat.st_mtime, also=(record,)))
    return sorted(entries, key=lambda e: -e.last_used)


__all__ = ["AUTO_ARROW_BYTES", "CORPUS_STORES", "ArrowCorpus", "CorpusStore",
           "PassageTexts", "cached_arrow_corpus", "choose_store", "corpus_texts",
           "default_corpus_cache", "list_corpus_files", "memory_arrow_corpus",
           "open_arrow_corpus", "store_for_bytes", "subset_texts", "write_arrow_corpus"]
