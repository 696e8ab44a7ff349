"""What each line-based reader must do with each variant of ``hostile.line_variants``.

``(expected, line, field)``: ``expected`` is ``accepted`` or ``refused``; a refusal must be
tapt's own error naming the file and, when given, the line and the field.
"""

from __future__ import annotations

from robustness.hostile import ACCEPTED_FRAMING

Expectation = tuple[str, "int | None", "str | None"]

ACCEPT: Expectation = ("accepted", None, None)


def refuse(line: int | None = None, field: str | None = None) -> Expectation:
    return ("refused", line, field)


def line_expectations(kind: str, lines: int) -> dict[str, Expectation]:
    """``kind``: ``ids`` (corpus/queries JSONL: ids must be unique), ``qrels`` (TSV with a
    header), ``mined`` (mined negatives JSONL), ``passages`` (DAPT ``.jsonl``) or ``txt``
    (DAPT ``.txt``); ``lines``: lines of the valid file."""
    table: dict[str, Expectation] = {name: ACCEPT for name in ACCEPTED_FRAMING}
    empty = refuse(1) if kind == "qrels" else refuse()
    table.update({
        "empty file (0 bytes)": empty,
        "only blank lines": empty,
        "truncated inside the last line": refuse(lines),
        "truncated inside a multi-byte UTF-8 character": refuse(lines),
        "Latin-1 byte (0xE9) on line 2": refuse(2),
        "UTF-16 LE with BOM": refuse(1),
        "UTF-16 BE with BOM": refuse(1),
        "UTF-16 LE without BOM": refuse(1),
        "UTF-32 LE with BOM": refuse(1),
        "NUL byte on line 2": refuse(2),
        "UTF-8 BOM at the start of line 2 (concatenated files)": refuse(2),
        "CR-only line ends (classic Mac)": refuse(1),
        "lone CR inside line 2": refuse(2),
        "line 2 repeated": refuse(3, {"ids": "_id", "qrels": "corpus-id",
                                      "mined": "query_id"}.get(kind)),
        "lines 2 and 3 joined (newline lost)": refuse(2),
        "4 KiB of random binary": refuse(1),
        "gzip-compressed copy": refuse(1),
        "line 2 over the line-length limit": refuse(2),
    })
    if kind in ("passages", "txt"):  # DAPT passages: repeats are allowed
        table["line 2 repeated"] = ACCEPT
    if kind == "txt":  # plain text cannot tell a cut or joined line from a short one
        table["truncated inside the last line"] = ACCEPT
        table["lines 2 and 3 joined (newline lost)"] = ACCEPT
    return table
