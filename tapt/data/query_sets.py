"""Alternative query files for one qrels split (``tapt eval --queries NAME=FILE``): the same
query ids as the split, other texts (e.g. FormBench §6.3's progressively rewritten queries).

A query file is read exactly as ``queries.jsonl`` is (:func:`tapt.data.beir.parse_queries`:
``_id`` and ``text`` per line, ids unique, every line checked), and every id must be judged
in the split: an id the qrels do not hold could not be scored, and is an error naming the
file, the line and the field before anything is encoded.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from tapt.data.beir import DataError, Qrels, _require_file, parse_queries
from tapt.data.lines import iter_jsonl


def read_query_set(path: str | os.PathLike, qrels: Qrels, split_file: str) -> dict[str, str]:
    """``{query id: text}`` of a query file, validated as ``queries.jsonl`` and against the
    judged ids of ``qrels`` (``split_file`` names that split's qrels file in the error)."""
    path = Path(path)
    _require_file(path)
    records = list(iter_jsonl(path))
    queries = parse_queries(records, path)
    for line, record in records:
        query_id = str(record["_id"])  # parse_queries checked it (an int id reads as text)
        if query_id not in qrels:
            raise DataError(path, f"query id '{query_id}' is not judged in {split_file}; a "
                                  "query set holds rewrites of the split's own queries (the "
                                  "same ids)", line, "_id")
    return queries


def parse_query_set_specs(specs: list[str], reserved: str = "original"
                          ) -> dict[str, Path]:
    """``NAME=FILE`` values of ``--queries`` as ``{name: path}``; names must be unique, not
    empty, and not ``reserved`` (the dataset's own queries)."""
    sets: dict[str, Path] = {}
    for spec in specs:
        name, sep, file = spec.partition("=")
        name = name.strip()
        if not sep or not name or not file:
            raise ValueError(f"--queries {spec!r}: expected NAME=FILE (e.g. "
                             "rewritten=queries_v2.jsonl)")
        if name == reserved:
            raise ValueError(f"--queries {spec!r}: the name {reserved!r} is the dataset's own "
                             "queries; choose another")
        if name in sets:
            raise ValueError(f"--queries: the name {name!r} is given twice")
        sets[name] = Path(file)
    return sets


def read_query_sets(files: Mapping[str, Path], qrels: Qrels,
                    split_file: str) -> dict[str, dict[str, str]]:
    """Every query file of ``files`` through :func:`read_query_set`, in order."""
    return {name: read_query_set(path, qrels, split_file) for name, path in files.items()}
