"""Hostile variants of a valid input file, as bytes: encodings, framing, truncation, garbage.

Shared by the robustness tests and ``benchmarks/fuzz_readers.py``. Each function takes the
valid file (as its lines, without line ends, for the line-based formats) and returns
``{variant name: bytes}``; what a reader must do with each variant (accept it, or refuse
it naming a line) is decided per reader by the tests.
"""

from __future__ import annotations

import gzip
import random

BOM = b"\xef\xbb\xbf"

# Line-based formats (JSONL, TSV, TXT): the same names for every reader.
VALID = "valid file"
ACCEPTED_FRAMING = (
    VALID,
    "UTF-8 BOM at the start",
    "CRLF line ends",
    "UTF-8 BOM and CRLF line ends",
    "no newline at the end of the file",
    "blank and whitespace-only lines between records",
)


def line_variants(lines: list[bytes], *, limit_pad: int = 0) -> dict[str, bytes]:
    """Variants of a valid line-based file (``lines`` without line ends, at least 3).

    ``limit_pad``: bytes of trailing spaces added to line 2 for the "line over the length
    limit" variant (0 leaves that variant out)."""
    assert len(lines) >= 3
    text = b"\n".join(lines) + b"\n"
    crlf = b"\r\n".join(lines) + b"\r\n"
    unicode_text = text.decode("utf-8")
    out = {
        VALID: text,
        "UTF-8 BOM at the start": BOM + text,
        "CRLF line ends": crlf,
        "UTF-8 BOM and CRLF line ends": BOM + crlf,
        "no newline at the end of the file": text[:-1],
        "blank and whitespace-only lines between records":
            b"\n".join([lines[0], b"", b"   \t ", *lines[1:2], b"", *lines[2:]]) + b"\n\n",
        "empty file (0 bytes)": b"",
        "only blank lines": b"\n  \n\t\n\n",
        "truncated inside the last line":
            b"\n".join(lines[:-1]) + b"\n" + lines[-1][: max(1, len(lines[-1]) // 2)],
        "truncated inside a multi-byte UTF-8 character":
            b"\n".join(lines[:-1]) + b"\n" + lines[-1] + b"\xc3",
        "Latin-1 byte (0xE9) on line 2": _on_line(lines, 2, lambda s: s[:3] + b"\xe9" + s[3:]),
        "UTF-16 LE with BOM": unicode_text.encode("utf-16"),
        "UTF-16 BE with BOM": b"\xfe\xff" + unicode_text.encode("utf-16-be"),
        "UTF-16 LE without BOM": unicode_text.encode("utf-16-le"),
        "UTF-32 LE with BOM": unicode_text.encode("utf-32"),
        "NUL byte on line 2": _on_line(lines, 2, lambda s: s[:2] + b"\x00" + s[2:]),
        "UTF-8 BOM at the start of line 2 (concatenated files)":
            _on_line(lines, 2, lambda s: BOM + s),
        "CR-only line ends (classic Mac)": b"\r".join(lines) + b"\r",
        "lone CR inside line 2": _on_line(lines, 2, lambda s: s[:3] + b"\r" + s[3:]),
        "line 2 repeated": b"\n".join([lines[0], lines[1], lines[1], *lines[2:]]) + b"\n",
        "lines 2 and 3 joined (newline lost)":
            b"\n".join([lines[0], lines[1] + lines[2], *lines[3:]]) + b"\n",
        "4 KiB of random binary": random.Random(0).randbytes(4096),
        "gzip-compressed copy": gzip.compress(text, mtime=0),
    }
    if limit_pad:
        out["line 2 over the line-length limit"] = _on_line(
            lines, 2, lambda s: s + b" " * limit_pad)
    return out


def _on_line(lines: list[bytes], number: int, change) -> bytes:
    changed = list(lines)
    changed[number - 1] = change(changed[number - 1])
    return b"\n".join(changed) + b"\n"


# Whole-document formats (YAML recipes, JSON result files).
def document_variants(text: bytes) -> dict[str, bytes]:
    """Variants of a valid YAML or JSON document."""
    unicode_text = text.decode("utf-8")
    return {
        VALID: text,
        "UTF-8 BOM at the start": BOM + text,
        "CRLF line ends": text.replace(b"\n", b"\r\n"),
        "empty file (0 bytes)": b"",
        "truncated in the middle": text[: len(text) // 2],
        "truncated inside a multi-byte UTF-8 character": text.rstrip() + b"\xc3",
        "UTF-16 LE with BOM": unicode_text.encode("utf-16"),
        "UTF-16 LE without BOM": unicode_text.encode("utf-16-le"),
        "Latin-1 byte (0xE9)": text[:5] + b"\xe9" + text[5:],
        "NUL byte": text[:5] + b"\x00" + text[5:],
        "4 KiB of random binary": random.Random(1).randbytes(4096),
        "gzip-compressed copy": gzip.compress(text, mtime=0),
    }


def deep_json(depth: int = 100_000) -> bytes:
    """A JSON array nested ``depth`` deep (Python's json recurses once per level)."""
    return b"[" * depth + b"]" * depth


def huge_int(digits: int = 5_000) -> bytes:
    """An integer literal longer than Python's int-from-string limit (4,300 digits)."""
    return b"9" * digits


def billion_laughs(levels: int = 9, width: int = 9) -> bytes:
    """YAML aliases that expand to ``width ** levels`` scalars (never expanded by
    ``yaml.safe_load``, but any code that walks or prints the value hangs)."""
    lines = [b"x_0: &a0 [" + b", ".join([b"lol"] * width) + b"]"]
    for level in range(1, levels):
        refs = b", ".join([b"*a%d" % (level - 1)] * width)
        lines.append(b"x_%d: &a%d [%s]" % (level, level, refs))
    return b"\n".join(lines) + b"\n"
