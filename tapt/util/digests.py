"""Content digests of the files tapt stores and reads back: written with a file, checked when
it is read.

A digest record is ``{"bytes": size, "sha256": hex}`` of the whole file, read in 1 MiB
blocks (:func:`file_record`). SHA-256 because CPUs have instructions for it (SHA-NI on x86,
the ARMv8 crypto extensions): about 1-2 GB/s a core, faster than BLAKE2b without them, so
one pass over FormBench's ~6 GB Arrow corpus or ~4 GB of embedding shards costs seconds,
against the hour its encoding takes (``benchmarks/bench_digests.py`` measures it). This is
hashlib streamed by hand: ``hashlib.file_digest`` needs Python 3.11 and reads 256 KiB
blocks.

Where a record is kept:

- in the manifest that already names the file: an embedding shard's ``shard-*.json``, a
  checkpoint's ``tapt-complete.json``;
- else beside the file, in a sidecar ``NAME.digest.json`` (:func:`write_sidecar`): cached
  Arrow corpora, ``tapt score`` and ``tapt mine`` outputs. A sidecar may carry more
  (provenance: the digests of the data a file was made from).

What a digest finds and what it does not: a file changed, truncated, reordered or damaged
after tapt wrote it (an edit, a copy that kept its size and mtime, a disk fault). It is no
signature: whoever rewrites a file and its record together is not detected.

Example::

    write_sidecar(path)              # after writing path
    problem = check_sidecar(path)    # None, or why path is not what was written
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

from tapt.util.files import atomic_write_text
from tapt.util.redaction import redact_data

ALGORITHM = "sha256"
BLOCK_BYTES = 2**20
"""Bytes read at a time (one buffer, reused)."""
SIDECAR_SUFFIX = ".digest.json"


class DigestMismatch(ValueError):
    """A stored file is not what its digest record says (``path``, ``reason``)."""

    def __init__(self, path: str | os.PathLike, reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{path}: {reason}")


_DIGESTS: dict[tuple, str] = {}
"""This process's digests by the file's identity and state (:func:`file_state`)."""
REMEMBERED = 1024
"""Digests remembered at most (the oldest is forgotten first)."""
SETTLED_NS = 2 * 10**9
"""Only a file last written this long before it is hashed is remembered: file times tick
in coarse steps (a few ms), so a write right after a fresh one could keep its state."""


def file_state(info: os.stat_result) -> tuple:
    """What identifies a file and its content without reading it, from its ``fstat``:
    device, inode, size, modification and status-change times in ns (any write moves the
    status-change time, which no user call can set back)."""
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns


def file_digest(path: str | os.PathLike) -> str:
    """Hex SHA-256 of the file's bytes, streamed in :data:`BLOCK_BYTES` blocks.

    A run reads one file in several steps (the inputs' fingerprint at its start, the data
    fingerprint of its test results, the check of a stored file), so the digest is taken
    once per process: a settled file (:data:`SETTLED_NS`) whose :func:`file_state` is
    unchanged since it was hashed is not read again. The state is taken from the opened
    file (opening makes a network file system revalidate its cached attributes)."""
    with open(path, "rb", buffering=0) as handle:
        state = file_state(os.fstat(handle.fileno()))
        if (known := _DIGESTS.get(state)) is not None:
            return known
        settled = time.time_ns() - max(state[3], state[4]) > SETTLED_NS
        value = _stream_digest(handle)
        if settled and file_state(os.fstat(handle.fileno())) == state:  # not written meanwhile
            if len(_DIGESTS) >= REMEMBERED:
                _DIGESTS.pop(next(iter(_DIGESTS)))
            _DIGESTS[state] = value
    return value


def _stream_digest(handle) -> str:
    digest = hashlib.new(ALGORITHM)
    buffer = bytearray(BLOCK_BYTES)
    view = memoryview(buffer)
    while True:
        count = handle.readinto(buffer)
        if not count:
            break
        digest.update(view[:count])
    return digest.hexdigest()


def bytes_digest(data: bytes) -> str:
    """Hex SHA-256 of ``data`` (what :func:`file_digest` gives for a file holding it)."""
    return hashlib.new(ALGORITHM, data).hexdigest()


def file_record(path: str | os.PathLike) -> dict:
    """``{"bytes": size, "sha256": hex}`` of the file at ``path``."""
    size = os.stat(path).st_size
    return {"bytes": size, ALGORITHM: file_digest(path)}


def mismatch(path: str | os.PathLike, record: object) -> str | None:
    """Why the file at ``path`` is not the one ``record`` describes, or None: missing,
    another size, other content, or no usable record. Reads the file only when the size
    matches."""
    if not isinstance(record, dict) or not isinstance(record.get("bytes"), int) or \
            not isinstance(record.get(ALGORITHM), str):
        return "no usable content digest recorded for it"
    try:
        size = os.stat(path).st_size
    except FileNotFoundError:
        return "the file is missing"
    if size != record["bytes"]:
        return f"{size} bytes where {record['bytes']} were written (truncated or changed)"
    try:
        found = file_digest(path)
    except OSError as err:
        return f"cannot be read ({err.strerror or err})"
    if found != record[ALGORITHM]:
        return "same size, other content than was written (changed or damaged)"
    return None


def sidecar_path(path: str | os.PathLike) -> Path:
    """``NAME.digest.json`` beside ``path``."""
    path = Path(path)
    return path.with_name(path.name + SIDECAR_SUFFIX)


def write_sidecar(path: str | os.PathLike, record: dict | None = None, **extra) -> Path:
    """Write ``path``'s digest record (computed when not given) and ``extra`` fields to its
    sidecar, atomically; returns the sidecar's path."""
    record = file_record(path) if record is None else record
    sidecar = sidecar_path(path)
    body = redact_data({"file": Path(path).name, **record, **extra}, where=str(sidecar))
    atomic_write_text(sidecar, json.dumps(body, indent=1, sort_keys=True) + "\n",
                      secrets=False)
    return sidecar


def remove_sidecar(path: str | os.PathLike) -> None:
    """Delete ``path``'s sidecar, if any (before the file is rewritten)."""
    sidecar_path(path).unlink(missing_ok=True)


def read_sidecar(path: str | os.PathLike) -> dict | None:
    """``path``'s sidecar as a dict; None when there is none. A sidecar that is no JSON
    object raises :class:`DigestMismatch` naming it."""
    sidecar = sidecar_path(path)
    try:
        text = sidecar.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as err:
        raise DigestMismatch(sidecar, f"unreadable digest record ({err})") from None
    try:
        body = json.loads(text)
    except json.JSONDecodeError:
        body = None
    if not isinstance(body, dict):
        raise DigestMismatch(sidecar, "not a digest record (no JSON object)")
    return body


def check_sidecar(path: str | os.PathLike) -> str | None:
    """Why ``path`` does not match its sidecar (a missing or damaged sidecar included), or
    None when it does."""
    try:
        body = read_sidecar(path)
    except DigestMismatch as err:
        return err.reason
    if body is None:
        return f"no digest record beside it ({sidecar_path(path).name})"
    return mismatch(path, body)


__all__ = ["ALGORITHM", "BLOCK_BYTES", "SIDECAR_SUFFIX", "DigestMismatch", "bytes_digest",
           "check_sidecar", "file_digest", "file_record", "mismatch", "read_sidecar",
           "remove_sidecar", "sidecar_path", "write_sidecar"]
