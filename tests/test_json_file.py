"""tapt.util.json_file.read_json: every way a stored JSON file can be unreadable is one
line of the caller's error type naming the file; a missing file stays FileNotFoundError."""

from __future__ import annotations

import os

import pytest

from tapt.util.json_file import read_json


class RecordError(ValueError):
    pass


def write(path, data: bytes):
    path.write_bytes(data)
    return path


CASES = [
    ("a folder", lambda p: (p.mkdir(), p)[1], "not a regular file"),
    ("cut short", lambda p: write(p, b'{"a": 1'), "not JSON ("),
    ("Latin-1 bytes", lambda p: write(p, b'{"a": "caf\xe9"}'), "not valid UTF-8 (byte 11)"),
    ("nested 100,000 deep", lambda p: write(p, b"[" * 100_000 + b"]" * 100_000),
     "nested too deeply or a number too long"),
    ("a 5,000-digit number", lambda p: write(p, b"1" * 5000),
     "nested too deeply or a number too long"),
]


@pytest.mark.parametrize("error", [RecordError, ValueError])
@pytest.mark.parametrize(("name", "make", "says"), CASES, ids=[c[0] for c in CASES])
def test_an_unreadable_file_is_one_line_of_the_callers_error(name, make, says, error,
                                                             tmp_path):
    """Also with ValueError itself, the type json's own errors share."""
    path = make(tmp_path / "record.json")
    with pytest.raises(error) as caught:
        read_json(path, error=error)
    message = str(caught.value)
    assert message.startswith(f"{path}: ") and says in message
    assert "\n" not in message


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_a_file_without_read_permission_says_it_cannot_be_read(tmp_path):
    path = write(tmp_path / "record.json", b"{}")
    path.chmod(0)
    with pytest.raises(RecordError, match=r"record\.json: cannot read \("):
        read_json(path, error=RecordError)


def test_a_missing_file_is_the_callers_to_word(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_json(tmp_path / "absent.json", error=RecordError)


def test_a_bom_is_read_only_when_asked(tmp_path):
    path = write(tmp_path / "bom.json", b'\xef\xbb\xbf{"a": 1}')
    assert read_json(path, encoding="utf-8-sig") == {"a": 1}
    with pytest.raises(ValueError, match="not JSON"):
        read_json(path)
