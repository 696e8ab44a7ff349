"""tapt.util.digests: the one record of a stored file's content, and the check when it is read."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from tapt.util import digests
from tapt.util.digests import (
    check_sidecar,
    file_digest,
    file_record,
    mismatch,
    read_sidecar,
    remove_sidecar,
    sidecar_path,
    write_sidecar,
)


def test_the_streamed_digest_is_sha256_of_the_whole_file_across_blocks(tmp_path, monkeypatch):
    monkeypatch.setattr(digests, "BLOCK_BYTES", 7)  # many blocks, a short last one
    data = bytes(range(256)) * 3 + b"tail"
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    assert file_digest(path) == hashlib.sha256(data).hexdigest()
    assert file_record(path) == {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    path.write_bytes(b"")
    assert file_digest(path) == hashlib.sha256(b"").hexdigest()


def test_mismatch_says_why(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"0123456789")
    record = file_record(path)
    assert mismatch(path, record) is None
    path.write_bytes(b"0123456780")  # same size
    assert "same size, other content" in mismatch(path, record)
    path.write_bytes(b"01234")
    assert "5 bytes where 10 were written" in mismatch(path, record)
    path.unlink()
    assert "missing" in mismatch(path, record)
    for unusable in (None, {}, {"bytes": 10}, {"bytes": "10", "sha256": "x"}, 5):
        assert mismatch(path, unusable) == "no usable content digest recorded for it"


def test_sidecar_round_trip_with_extra_fields_and_its_damage(tmp_path):
    path = tmp_path / "scores.jsonl"
    path.write_text("{}\n")
    sidecar = write_sidecar(path, kind="teacher scores", split="train")
    assert sidecar == sidecar_path(path) == tmp_path / "scores.jsonl.digest.json"
    body = read_sidecar(path)
    assert body["file"] == "scores.jsonl" and body["kind"] == "teacher scores"
    assert body["sha256"] == file_digest(path) and check_sidecar(path) is None
    path.write_text("[]\n")
    assert "other content" in check_sidecar(path)
    sidecar.write_text("[1, 2]")
    assert "not a digest record" in check_sidecar(path)
    with pytest.raises(digests.DigestMismatch, match="scores.jsonl.digest.json"):
        read_sidecar(path)
    remove_sidecar(path)
    assert read_sidecar(path) is None and "no digest record beside it" in check_sidecar(path)
    remove_sidecar(path)  # none left: no error
    assert json.loads(write_sidecar(path, {"bytes": 3, "sha256": "x"}).read_text())["bytes"] == 3


def test_a_settled_file_is_hashed_once_per_process_and_again_when_it_changes(tmp_path,
                                                                              monkeypatch):
    """The fingerprint at a run's start and its test results read the same corpus: a file
    unchanged since it was hashed is not read again; any write makes it read again, and a
    file written moments ago is always read (file times tick coarsely)."""
    from tapt.util import digests

    reads = []
    stream = digests._stream_digest
    monkeypatch.setattr(digests, "_stream_digest", lambda path: reads.append(path) or
                        stream(path))
    monkeypatch.setattr(digests, "_DIGESTS", {})
    path = tmp_path / "corpus.jsonl"
    path.write_bytes(b'{"_id": "d1", "text": "an epoxy primer"}\n')
    first = digests.file_digest(path)
    assert digests.file_digest(path) == first and len(reads) == 2  # fresh: read each time
    monkeypatch.setattr(digests, "SETTLED_NS", -1)  # as if written long ago
    digests.file_digest(path)
    assert digests.file_digest(path) == first and len(reads) == 3  # remembered
    before = path.stat().st_mtime_ns
    path.write_bytes(b'{"_id": "d1", "text": "an epoxy sealer"}\n')  # same size
    os.utime(path, ns=(before + 5 * 10**9, before + 5 * 10**9))  # a later tick of the clock
    changed = digests.file_digest(path)
    assert len(reads) == 4 and changed != first
    assert changed == hashlib.sha256(path.read_bytes()).hexdigest()
