"""Label fields of passages (``"labels": {"domain": ..., "class": ...}`` in corpus.jsonl), read
apart from the corpus itself: the loader keeps only id, title and text, and the probes and
same-label batches need only the labels (``tapt data synth`` writes domain and class)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from tapt.data.lines import DataError, iter_jsonl

NO_LABEL = "(none)"
"""The group of the queries without a label (``tapt eval --by``); no query label may be it."""


class LabelValues:
    """Turns a field's JSON label values into the text that names their group, one kind of
    value per field: text, a number or true/false. A number is written as JSON writes it
    (``5`` and ``5.0`` are one group, ``"5"`` would be another kind: refused, as are a
    list or an object), so no two different values share a group silently."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.kinds: dict[str, tuple[str, int]] = {}

    def text(self, value, line: int, field: str) -> str | None:
        """The group name of ``value`` (None for a missing, null or empty label)."""
        if value is None or value == "":
            return None
        if isinstance(value, list | dict):
            raise DataError(self.path, f"expected one label value, got a "
                                       f"{type(value).__name__}", line, field)
        kind = ("true/false" if isinstance(value, bool) else
                "a number" if isinstance(value, int | float) else "text")
        first_kind, first_line = self.kinds.setdefault(field, (kind, line))
        if kind != first_kind:
            raise DataError(self.path, f"{value!r} is {kind}, but line {first_line} gives "
                                       f"this field {first_kind}: one label field holds one "
                                       "kind of value (5 and \"5\" would be one group)",
                            line, field)
        if kind == "true/false":
            return "true" if value else "false"
        if kind == "a number":
            return str(int(value)) if float(value).is_integer() else repr(float(value))
        return value


def read_labels(folder: str | os.PathLike, fields: Sequence[str]) -> dict[str, dict[str, str]]:
    """``{field: {doc id: label}}`` from a local ``corpus.jsonl`` (in ``folder``).

    A passage without a label for a field is left out of that field; a field no passage
    has is an error naming the fields that exist. Values become text through
    :class:`LabelValues` (one kind of value per field).
    """
    path = Path(folder)
    path = path / "corpus.jsonl" if path.is_dir() else path
    if not path.is_file():
        raise DataError(path, "labels are read from a local corpus.jsonl; file not found")
    labels: dict[str, dict[str, str]] = {f: {} for f in fields}
    values = LabelValues(path)
    seen: set[str] = set()
    for line, record in iter_jsonl(path):
        nested = record.get("labels")
        if nested is not None and not isinstance(nested, dict):
            raise DataError(path, "expected an object of label fields", line, "labels")
        nested = nested or {}
        seen.update(nested)
        for name in fields:
            where = f"labels.{name}" if name in nested else name
            value = nested.get(name, record.get(name) if name not in ("_id", "text", "title")
                               else None)
            text = values.text(value, line, where)
            if text is not None:
                labels[name][str(record.get("_id"))] = text
    empty = [name for name, found in labels.items() if not found]
    if empty:
        raise DataError(path, f"no passage has label field(s) {', '.join(empty)}; fields "
                              f"found under 'labels': {', '.join(sorted(seen)) or 'none'} "
                              "(tapt data synth writes domain and class)")
    return labels


def read_query_labels(folder: str | os.PathLike, field: str) -> dict[str, str]:
    """``{query id: label}`` of one field of ``"labels"`` in a local ``queries.jsonl`` (in
    ``folder``), for ``tapt eval --by FIELD``.

    A query without the field (or with null / "") is left out (the group
    :data:`NO_LABEL`); a list or object value, values of two kinds (:class:`LabelValues`)
    and a label spelt :data:`NO_LABEL` are errors naming the file, line and field; a field
    no query has is an error naming the fields that exist.
    """
    path = Path(folder)
    path = path / "queries.jsonl" if path.is_dir() else path
    if not path.is_file():
        raise DataError(path, "--by reads query labels from a local queries.jsonl; "
                              "file not found")
    labels: dict[str, str] = {}
    values = LabelValues(path)
    seen: set[str] = set()
    for line, record in iter_jsonl(path):
        nested = record.get("labels")
        if nested is None:
            continue
        if not isinstance(nested, dict):
            raise DataError(path, "expected an object of label fields", line, "labels")
        seen.update(nested)
        text = values.text(nested.get(field), line, f"labels.{field}")
        if text == NO_LABEL:
            raise DataError(path, f"{NO_LABEL!r} names the group of the queries without "
                                  "this label (--by); give the label another name", line,
                            f"labels.{field}")
        if text is not None:
            labels[str(record.get("_id"))] = text
    if not labels:
        raise DataError(path, f"no query has label field '{field}' (--by); fields found "
                              f"under 'labels': {', '.join(sorted(seen)) or 'none'}")
    return labels
