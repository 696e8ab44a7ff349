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
from tapt.util.ids import label

MIN_SCORED_QUERIES = 2
"""A query set is compared with the split's own queries by a paired test: two or more."""


def read_query_set(path: str | os.PathLike, qrels: Qrels, split_file: str,
                   rule=None) -> dict[str, str]:
    """``{query id: text}`` of a query file, validated as ``queries.jsonl`` and against the
    judged ids of ``qrels`` (``split_file`` names that split's qrels file in the error);
    with the relevance ``rule``, at least :data:`MIN_SCORED_QUERIES` of its queries must
    have a relevant passage (a query without one scores nothing: under ``--lenient`` a set
    can hold only such queries), checked here, before any encoding."""
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
    if rule is not None:
        scored = [query_id for query_id in queries
                  if any(rule.is_relevant(grade) for grade in qrels[query_id].values())]
        if len(scored) < MIN_SCORED_QUERIES:
            raise DataError(path, f"{len(queries)} quer{'y' if len(queries) == 1 else 'ies'}, "
                                  f"{len(scored)} with a relevant passage in {split_file}: "
                                  "the paired test against the split's own queries needs "
                                  f"at least {MIN_SCORED_QUERIES}")
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
        label(name, "--queries")
        sets[name] = Path(file)
    return sets


def read_query_sets(files: Mapping[str, Path], qrels: Qrels, split_file: str,
                    rule=None) -> dict[str, dict[str, str]]:
    """Every query file of ``files`` through :func:`read_query_set`, in order."""
    return {name: read_query_set(path, qrels, split_file, rule)
            for name, path in files.items()}
