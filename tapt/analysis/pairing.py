"""Which result files ``tapt compare`` may set side by side: the data and settings each one
evaluated, and the check that refuses to pair results that differ in them.

A result file (``tapt eval`` / ``tapt bm25 --output``, a run's ``test.json``) records in its
``evaluated`` block what it measured on; these are its **data fields**:

- ``corpus``: the digest of the corpus file (``data_fingerprint.corpus``);
- ``sub-corpus``: the digest of the evaluated passage ids (``data_fingerprint.sub_corpus``;
  null: the whole corpus);
- ``queries``, ``qrels``: the digests of the queries file and of the split's qrels file;
- ``split``, ``relevance`` (the relevance rule), ``top-k``.

Results in one column of a comparison (one corpus label) are paired: per query by
``--baseline`` and over seeds, and read as "the same benchmark" by the table. They must
agree in every data field. A system's C0 and C1 results (its C1/C0 retention) are different
corpora by design; they must agree in ``split``, ``relevance`` and ``top-k``.
``allow_different`` (``tapt compare --allow-different``) lifts the check for
:data:`ALLOWABLE` fields only: ``corpus`` (with its sub-corpus) pairs results on the same
queries and qrels over different corpora, e.g. C0 against C1 per query (``--corpus`` giving
both one label); ``sub-corpus`` other distractor samples; ``top-k`` other ranking depths.
Queries, qrels, split and relevance rule can never differ: pairing per-query values of
different queries or judgments measures nothing.

Files without a ``data_fingerprint`` (not written by ``tapt eval`` / ``tapt bm25``), and
files whose fingerprint holds no digest (all null: a dataset built in memory, or an edited
file), are compared with a warning naming them (:func:`unfingerprinted_note`): their split,
relevance rule and top-k are still checked (and the sub-corpus where a fingerprint records
it), their corpus, queries and qrels cannot be; re-run them to check those too.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass

FIELDS = ("corpus", "sub-corpus", "queries", "qrels", "split", "relevance", "top-k")
DIGESTS = ("corpus", "queries", "qrels")
"""The file digests of ``data_fingerprint``: a fingerprint that records none of them (all
null: a dataset built in memory, or an edited file) is no fingerprint."""
ALLOWABLE = ("corpus", "sub-corpus", "top-k")
"""The data fields ``--allow-different`` may lift (``corpus`` lifts ``sub-corpus`` too)."""
SETTINGS = ("split", "relevance", "top-k")
"""The fields a system's results on different corpora (C0, C1) must share."""
UNKNOWN = None
WHOLE = "the whole corpus"


@dataclass(frozen=True)
class DataKey:
    """A result's data fields (``None``: not recorded) and its file."""

    source: str
    values: dict[str, object]
    fingerprinted: bool


def data_key(result: Mapping, source: str) -> DataKey:
    """The data fields of a result file read by :func:`tapt.analysis.result_files.read_result`."""
    evaluated = result.get("evaluated", {})
    fingerprint = evaluated.get("data_fingerprint")
    recorded = isinstance(fingerprint, dict)
    fingerprint = fingerprint if recorded else {}
    fingerprinted = any(fingerprint.get(name) for name in DIGESTS)
    if fingerprint.get("sub_corpus"):
        sub_corpus = f"ids sha256 {fingerprint['sub_corpus']}"
    else:
        sub_corpus = WHOLE if recorded else UNKNOWN
    values = {"corpus": fingerprint.get("corpus"), "sub-corpus": sub_corpus,
              "queries": fingerprint.get("queries"), "qrels": fingerprint.get("qrels"),
              "split": evaluated.get("split"), "relevance": evaluated.get("relevance"),
              "top-k": evaluated.get("top_k")}
    return DataKey(source=source, values=values, fingerprinted=fingerprinted)


def lifted(allow_different: Collection[str]) -> set[str]:
    """The fields ``allow_different`` lifts; a field outside :data:`ALLOWABLE` is an error."""
    wrong = [name for name in allow_different if name not in ALLOWABLE]
    if wrong:
        raise ValueError(f"--allow-different {wrong[0]}: only {', '.join(ALLOWABLE)} may "
                         "differ between paired results (queries, qrels, split and relevance "
                         "rule never: per-query values of different queries or judgments "
                         "cannot be paired)")
    fields = set(allow_different)
    if "corpus" in fields:
        fields.add("sub-corpus")
    return fields


def check_pair(first: DataKey, other: DataKey, *, fields: Collection[str],
               allowed: Collection[str], where: str, liftable: bool = True,
               remedy: str | None = None) -> None:
    """A ``ValueError`` naming the first of ``fields`` (not ``allowed``) in which the two
    results differ, both values and both files; fields either one does not record pass.
    ``liftable``: the message names ``--allow-different`` for an :data:`ALLOWABLE` field.
    ``remedy``: how to make a result that pairs (ends the message)."""
    for name in fields:
        if name in allowed:
            continue
        mine, theirs = first.values.get(name), other.values.get(name)
        if not _comparable(mine, theirs) or mine == theirs:
            continue
        hint = (f"; pass --allow-different {name} if that is what you mean"
                if name in ALLOWABLE and liftable else "")
        if remedy:
            hint += f"; {remedy}"
        raise ValueError(f"{where}: {first.source} and {other.source} differ in {name} "
                         f"({_shown(name, mine)} vs {_shown(name, theirs)}): their numbers "
                         f"measure different things and are not paired; evaluate both on the "
                         f"same data and settings{hint}")


def _comparable(mine: object, theirs: object) -> bool:
    """Both recorded."""
    return mine is not UNKNOWN and theirs is not UNKNOWN


def _shown(name: str, value: object) -> str:
    """A field's value in a message: digests shortened to 12 hex digits."""
    if isinstance(value, dict) and "relevant_from" in value:  # a relevance rule
        return f"{value.get('name')}, relevant from grade {value['relevant_from']}"
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    text = str(value)
    if name in ("corpus", "queries", "qrels"):
        return f"sha256 {text[:12]}"
    if text.startswith("ids sha256 "):
        return f"passage ids sha256 {text[len('ids sha256 '):][:12]}"
    return text


def unfingerprinted_note(keys: Collection[DataKey]) -> str | None:
    """The warning for result files without a data fingerprint, or None."""
    unchecked = [key.source for key in keys if not key.fingerprinted]
    if not unchecked:
        return None
    return (f"{', '.join(unchecked)}: no data fingerprint (evaluated.data_fingerprint is "
            "missing or records no digest): their corpus, queries and qrels cannot be checked "
            "(split, relevance rule and top-k are); re-run tapt eval / tapt bm25 on the data's "
            "files to record it")
