"""Result files of ``tapt eval`` / ``tapt bm25`` read and classified for ``tapt compare``
and the analyses: the file checked (metrics in [0, 1], the ``evaluated`` block, the data
fingerprint), its corpus label (C0, C1 or the data folder), the kind of its system and its
per-query latency. The rules are in :mod:`tapt.analysis.compare`'s docstring.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from tapt.encoders.preset_record import read_record_hint
from tapt.retrieval.metrics import METRIC_KEYS
from tapt.util.finite import metric_value
from tapt.util.ids import label
from tapt.util.json_file import read_json

KINDS = ("bm25", "base", "dapt", "tapt", "hybrid", "api")
API_PREFIXES = ("openai:", "voyage:")
LATENCIES = {"search": ("search_ms_per_query",),
             "query": ("query_encode_ms_per_query", "search_ms_per_query")}
"""``search``: FAISS search per query (the paper's frontier); ``query``: encoding the query
plus the search (what a user waits for; includes the API round trip for API encoders).
A hybrid adds its parts and the fusion."""


def parse_assignments(values: Iterable[str], option: str) -> dict[str, str]:
    """``NAME=VALUE`` strings -> dict; a value without ``=`` is an error naming ``option``."""
    out = {}
    for value in values:
        name, sep, rest = value.partition("=")
        if not sep or not name or not rest:
            raise ValueError(f"{option} expects NAME=VALUE, got {value!r}")
        out[label(name, option)] = rest
    return out


def split_spec(spec: str) -> tuple[str | None, str]:
    """``NAME=VALUE`` -> (NAME, VALUE); a plain value, or an existing path holding ``=``,
    -> (None, spec). Used for ``tapt compare`` results and analysis ``--model`` labels; a
    label holding a secret is refused (:func:`tapt.util.ids.label`)."""
    if "=" in spec and not Path(spec).exists():
        name, _, value = spec.partition("=")
        if name and value:
            return label(name, "the label"), value
    return None, spec


def read_result(path: str | os.PathLike) -> dict:
    """A result file, checked for the metrics and the ``evaluated`` block."""
    path = Path(path)
    try:
        data = read_json(path, encoding="utf-8-sig")  # a UTF-8 BOM is fine
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such result file") from None
    if not isinstance(data, dict) or not isinstance(data.get("evaluated"), dict):
        problem = (f"{path}: not a tapt result file (no 'evaluated' block; write one with "
                   "tapt eval/bm25 --output)")
        raise ValueError(problem)  # noqa: TRY004 (a malformed file, not a wrong argument)
    missing = [key for key in METRIC_KEYS if not isinstance(data.get(key), (int, float))
               or isinstance(data[key], bool)]
    if missing:
        raise ValueError(f"{path}: missing metric(s) {', '.join(missing)}")
    for key in METRIC_KEYS:
        if not metric_value(data[key]):
            raise ValueError(f"{path}: field '{key}': expected a value in [0, 1], got "
                             f"{data[key]!r}")
    if not isinstance(data.get("timings", {}), dict):
        raise ValueError(f"{path}: field 'timings': expected an object")  # noqa: TRY004
    fingerprint = data["evaluated"].get("data_fingerprint")
    fingerprint = {} if fingerprint is None else fingerprint  # null: none recorded
    if not isinstance(fingerprint, dict):
        raise ValueError(f"{path}: field 'evaluated.data_fingerprint': expected an object")  # noqa: TRY004
    for key in ("corpus", "queries", "qrels", "sub_corpus"):
        if not isinstance(fingerprint.get(key), str | None):
            raise ValueError(f"{path}: field 'evaluated.data_fingerprint.{key}': expected a "  # noqa: TRY004
                             "hex digest or null")
    return data


def corpus_label(evaluated: Mapping, overrides: Mapping[str, str] | None = None) -> str:
    """C0, C1 or the data folder's name (see the module docstring)."""
    data = str(evaluated.get("data", ""))
    config = str(evaluated.get("config") or "")
    for key in (config, data, Path(data).name):
        if overrides and key in overrides:
            return overrides[key]
    text = f"{config} {data}".lower()
    if "structured" in text or re.search(r"(^|[^a-z0-9])c1($|[^a-z0-9])", text):
        return "C1"
    if "random" in text or re.search(r"(^|[^a-z0-9])c0($|[^a-z0-9])", text):
        return "C0"
    return Path(data.rstrip("/")).name or data or "corpus"


def infer_kind(result: Mapping) -> str:
    """bm25, api, hybrid, tapt, dapt or base (see the module docstring)."""
    evaluated = result.get("evaluated", {})
    if any(key in block for block in (result, evaluated) for key in ("hybrid", "fusion")):
        return "hybrid"
    model = str(evaluated.get("model", ""))
    lowered = model.lower()
    if lowered.startswith(API_PREFIXES) or "api" in evaluated:
        return "api"
    if lowered.startswith("bm25"):
        return "bm25"

    record = read_record_hint(model, f"{model} is labelled a base model") if model else None
    if record is not None:
        return "dapt" if record.get("stage") == "dapt" else "tapt"
    return "base"


def latency_ms(timings: Mapping, latency: str) -> float:
    """Per-query latency in ms; a hybrid's (its parts' timings prefixed, ``dense_...``,
    ``bm25_...``) is the sum over its parts plus ``fusion_ms_per_query``. NaN if unknown."""
    total, composite = 0.0, False
    for key in LATENCIES[latency]:
        if isinstance(timings.get(key), (int, float)):
            total += timings[key]
            continue
        parts = [v for k, v in timings.items() if k.endswith("_" + key)
                 and isinstance(v, (int, float))]
        if not parts:
            return math.nan
        total += sum(parts)
        composite = True
    if composite and isinstance(timings.get("fusion_ms_per_query"), (int, float)):
        total += timings["fusion_ms_per_query"]
    return float(total)
