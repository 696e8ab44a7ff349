"""The dataset files read line by line, every problem a :class:`DataError` naming the file,
the line and the field: UTF-8 text with LF or CRLF line ends (:func:`decoded_lines`), JSON
objects one per line (:func:`iter_jsonl`), their string fields and ids
(:func:`string_field`, :func:`check_id`). Used by every reader of :mod:`tapt.data` (BEIR
folders, passages, labels, mined negatives, query sets) and by the teacher scores.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

from tapt.util.ids import id_problem

MAX_LINE_BYTES = 32 * 2**20
"""A longer line is refused (a corpus line is one passage; this bounds the memory a
file without line ends can take)."""
UTF8_BOM = b"\xef\xbb\xbf"
_SURROGATE = re.compile(r"[\ud800-\udfff]")


class DataError(ValueError):
    """Invalid dataset input. The message names the file, the line and the field.

    A :class:`ValueError`, so ``except ValueError`` catches it too.

    Args:
        path: The file (or folder, or ``hf://`` label) that holds the problem.
        message: What is wrong.
        line: The 1-based line number, if the problem is on one line.
        field_name: The JSON field or qrels column, if one is at fault.

    Attributes:
        path: ``path`` as a string.
        line: ``line``.
        field: ``field_name``.

    Example::

        try:
            dataset = load_data("data/scifact")
        except DataError as err:
            print(err)  # data/scifact/qrels/dev.tsv: file not found (SciFact has no dev)
    """

    def __init__(self, path: str | os.PathLike, message: str, line: int | None = None,
                 field_name: str | None = None) -> None:
        self.path = str(path)
        self.line = line
        self.field = field_name
        where = self.path if line is None else f"{self.path}:{line}"
        what = f"field '{field_name}': " if field_name else ""
        super().__init__(f"{where}: {what}{message}")


def decoded_lines(path: Path) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` pairs of a UTF-8 file with LF or CRLF line ends (a UTF-8 BOM
    at its start is skipped). An error names the line for bytes that are not UTF-8 (UTF-16
    included), a NUL byte, a lone CR, a BOM further on, or a line over ``MAX_LINE_BYTES``."""
    limit = MAX_LINE_BYTES
    try:
        handle = path.open("rb")
    except OSError as err:
        raise DataError(path, f"cannot read ({err.strerror or err})") from None
    with handle:
        for number, raw in enumerate(iter(lambda: handle.readline(limit + 1), b""), start=1):
            if len(raw) > limit:
                raise DataError(path, f"line longer than {limit:,} bytes", number)
            if number == 1 and raw.startswith((b"\xff\xfe", b"\xfe\xff")):
                raise DataError(path, "UTF-16 or UTF-32 text (byte-order mark); save it as "
                                      "UTF-8", number)
            if raw.startswith(UTF8_BOM):
                if number > 1:
                    raise DataError(path, "a UTF-8 byte-order mark starts the line (files "
                                          "concatenated?)", number)
                raw = raw[len(UTF8_BOM):]
            if b"\x00" in raw:
                column = raw.index(b"\x00") + 1
                raise DataError(path, f"NUL byte at byte {column} (a binary or UTF-16 file?)",
                                number)
            if b"\r" in raw.rstrip(b"\r\n"):
                raise DataError(path, "carriage return inside the line (CR-only line ends? "
                                      "use LF or CRLF)", number)
            try:
                yield number, raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise DataError(path, f"not valid UTF-8 (byte {err.start + 1})", number) from None


def iter_jsonl(path: Path) -> Iterator[tuple[int, dict]]:
    for number, raw in decoded_lines(path):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as err:
            raise DataError(path, f"malformed JSON ({err.msg} at column {err.colno})",
                            number) from None
        except RecursionError:
            raise DataError(path, "malformed JSON (nested too deeply)", number) from None
        except ValueError as err:  # e.g. an integer over Python's 4,300-digit limit
            raise DataError(path, f"malformed JSON ({str(err).split(':')[0]})", number) from None
        if not isinstance(record, dict):
            raise DataError(path, "expected a JSON object", number)
        yield number, record


def string_field(path: str | os.PathLike, line: int, record: dict, name: str, *, required: bool = True,
                  allow_empty: bool = False) -> str:
    if name not in record or record[name] is None:
        if required:
            raise DataError(path, "missing", line, name)
        return ""
    value = record[name]
    if isinstance(value, int) and not isinstance(value, bool) and name == "_id":
        value = str(value)
    if not isinstance(value, str):
        raise DataError(path, f"expected a string, got {type(value).__name__}", line, name)
    if name == "_id":
        check_id(path, line, value, name)
    if not value.isascii() and _SURROGATE.search(value):  # isascii: the fast common case
        raise DataError(path, f"lone surrogate {_SURROGATE.search(value).group()!r}: not "
                              "encodable as UTF-8", line, name)
    if not allow_empty and not value.strip():
        raise DataError(path, "empty", line, name)
    return value


def check_id(path: str | os.PathLike, line: int | None, value: str, name: str) -> None:
    """Refuse an id that breaks :mod:`tapt.util.ids`' rule, naming the file, line and field."""
    problem = id_problem(value)
    if problem:
        raise DataError(path, problem, line, name)
