"""Label fields of passages (``"labels": {"domain": ..., "class": ...}`` in corpus.jsonl), read
apart from the corpus itself: the loader keeps only id, title and text, and the probes and
same-label batches need only the labels (``tapt data synth`` writes domain and class)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from tapt.data.beir import DataError, iter_jsonl


def read_labels(folder: str | os.PathLike, fields: Sequence[str]) -> dict[str, dict[str, str]]:
    """``{field: {doc id: label}}`` from a local ``corpus.jsonl`` (in ``folder``).

    A passage without a label for a field is left out of that field; a field no passage
    has is an error naming the fields that exist.
    """
    path = Path(folder)
    path = path / "corpus.jsonl" if path.is_dir() else path
    if not path.is_file():
        raise DataError(path, "labels are read from a local corpus.jsonl; file not found")
    labels: dict[str, dict[str, str]] = {f: {} for f in fields}
    seen: set[str] = set()
    for line, record in iter_jsonl(path):
        nested = record.get("labels")
        if nested is not None and not isinstance(nested, dict):
            raise DataError(path, "expected an object of label fields", line, "labels")
        nested = nested or {}
        seen.update(nested)
        for name in fields:
            value = nested.get(name, record.get(name) if name not in ("_id", "text", "title")
                               else None)
            if value is not None and value != "":
                labels[name][str(record.get("_id"))] = str(value)
    empty = [name for name, found in labels.items() if not found]
    if empty:
        raise DataError(path, f"no passage has label field(s) {', '.join(empty)}; fields "
                              f"found under 'labels': {', '.join(sorted(seen)) or 'none'} "
                              "(tapt data synth writes domain and class)")
    return labels


def read_query_labels(folder: str | os.PathLike, field: str) -> dict[str, str]:
    """``{query id: label}`` of one field of ``"labels"`` in a local ``queries.jsonl`` (in
    ``folder``), for ``tapt eval --by FIELD``.

    A query without the field (or with null / "") is left out; a list or object value is
    an error naming the file, line and field; a field no query has is an error naming the
    fields that exist.
    """
    path = Path(folder)
    path = path / "queries.jsonl" if path.is_dir() else path
    if not path.is_file():
        raise DataError(path, "--by reads query labels from a local queries.jsonl; "
                              "file not found")
    labels: dict[str, str] = {}
    seen: set[str] = set()
    for line, record in iter_jsonl(path):
        nested = record.get("labels")
        if nested is None:
            continue
        if not isinstance(nested, dict):
            raise DataError(path, "expected an object of label fields", line, "labels")
        seen.update(nested)
        value = nested.get(field)
        if isinstance(value, list | dict):
            raise DataError(path, f"expected one label value, got a {type(value).__name__}",
                            line, f"labels.{field}")
        if value is not None and value != "":
            labels[str(record.get("_id"))] = str(value)
    if not labels:
        raise DataError(path, f"no query has label field '{field}' (--by); fields found "
                              f"under 'labels': {', '.join(sorted(seen)) or 'none'}")
    return labels
