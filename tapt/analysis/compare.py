"""Compare result files of ``tapt eval`` / ``tapt bm25``: systems x corpora x metrics.

Each result file (``--output`` of ``tapt eval`` or ``tapt bm25``) holds the four metrics,
``timings`` and an ``evaluated`` block saying which model ran on which data. Results of the
same system on FormBench-Random (C0) and FormBench-Structured (C1) share a row; the
C1/C0 retention (score on C1 divided by score on C0, FormBench §5.4) says how much of a
model's signal survives when random distractors are replaced by in-domain near-misses.

The corpus of a result comes from its ``evaluated`` block: a ``config`` or a data path
naming ``structured`` / ``c1`` is C1, ``random`` / ``c0`` is C0, anything else is labelled
by the data folder's name (``corpus_labels`` maps a data value to a label of your own).

The kind of a system (how the frontier plot marks it) is inferred: a ``hybrid`` or
``fusion`` block in the file is a hybrid; a model named ``openai:...`` / ``voyage:...`` (or
an ``api`` block) an API encoder; ``bm25`` the lexical baseline; a local folder holding a
tapt export (``tapt_preset.json``, stage ``tapt`` or ``dapt``) a TAPT or DAPT model;
anything else a base model. ``kinds`` overrides it by system name.

Example::

    table = compare_results(["runs/bm25-c1.json", "TAPT=runs/tapt-c1.json"])
    table.rows[0].retention["binary_ndcg@10"]
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tapt.analysis.plots import finite_number
from tapt.retrieval.metrics import METRIC_KEYS

KINDS = ("bm25", "base", "dapt", "tapt", "hybrid", "api")
API_PREFIXES = ("openai:", "voyage:")
LATENCIES = {"search": ("search_ms_per_query",),
             "query": ("query_encode_ms_per_query", "search_ms_per_query")}
"""``search``: FAISS search per query (the paper's frontier); ``query``: encoding the query
plus the search (what a user waits for; includes the API round trip for API encoders).
A hybrid adds its parts and the fusion."""
PRIMARY = "binary_ndcg@10"


@dataclass
class Cell:
    """One system on one corpus."""

    metrics: dict[str, float]
    latency_ms: float
    source: str


@dataclass
class SystemRow:
    """One system: its results per corpus and, with C0 and C1, retention and gap."""

    name: str
    kind: str
    model: str
    cells: dict[str, Cell] = field(default_factory=dict)

    @property
    def retention(self) -> dict[str, float]:
        """``C1 / C0`` per metric (NaN where C0 is 0); empty without both corpora."""
        if "C0" not in self.cells or "C1" not in self.cells:
            return {}
        c0, c1 = self.cells["C0"].metrics, self.cells["C1"].metrics
        return {k: c1[k] / c0[k] if c0[k] else math.nan for k in c0 if k in c1}

    @property
    def gap(self) -> dict[str, float]:
        """``C0 - C1`` per metric; empty without both corpora."""
        if "C0" not in self.cells or "C1" not in self.cells:
            return {}
        c0, c1 = self.cells["C0"].metrics, self.cells["C1"].metrics
        return {k: c0[k] - c1[k] for k in c0 if k in c1}


@dataclass
class Comparison:
    rows: list[SystemRow]
    corpora: list[str]
    metrics: list[str]
    latency: str

    def points(self, metric: str = PRIMARY) -> list[dict]:
        """Frontier points: ``name``, ``kind``, ``corpus``, ``latency_ms``, ``value``."""
        return [{"name": row.name, "kind": row.kind, "corpus": corpus,
                 "latency_ms": cell.latency_ms, "value": cell.metrics.get(metric, math.nan)}
                for row in self.rows for corpus, cell in row.cells.items()]

    def to_dict(self, metric: str = PRIMARY) -> dict:
        from tapt.analysis.plots import pareto_front

        fronts = {}
        for corpus in self.corpora:
            here = [(p["name"], p["latency_ms"], p["value"]) for p in self.points(metric)
                    if p["corpus"] == corpus and finite_number(p["latency_ms"])
                    and finite_number(p["value"])]
            fronts[corpus] = pareto_front(here)
        return {
            "metrics": self.metrics, "corpora": self.corpora, "latency": self.latency,
            "systems": [{"name": row.name, "kind": row.kind, "model": row.model,
                         "results": {corpus: {**cell.metrics, "latency_ms": cell.latency_ms,
                                              "source": cell.source}
                                     for corpus, cell in row.cells.items()},
                         "retention_c1_c0": row.retention, "gap_c0_c1": row.gap}
                        for row in self.rows],
            "pareto_front": {"metric": metric, **fronts},
        }


def parse_assignments(values: Iterable[str], option: str) -> dict[str, str]:
    """``NAME=VALUE`` strings -> dict; a value without ``=`` is an error naming ``option``."""
    out = {}
    for value in values:
        name, sep, rest = value.partition("=")
        if not sep or not name or not rest:
            raise ValueError(f"{option} expects NAME=VALUE, got {value!r}")
        out[name] = rest
    return out


def split_spec(spec: str) -> tuple[str | None, str]:
    """``NAME=VALUE`` -> (NAME, VALUE); a plain value, or an existing path holding ``=``,
    -> (None, spec). Used for ``tapt compare`` results and analysis ``--model`` labels."""
    if "=" in spec and not Path(spec).exists():
        name, _, value = spec.partition("=")
        if name and value:
            return name, value
    return None, spec


def read_result(path: str | os.PathLike) -> dict:
    """A result file, checked for the metrics and the ``evaluated`` block."""
    path = Path(path)
    if path.exists() and not path.is_file():  # a folder, or a FIFO that would block
        raise ValueError(f"{path}: not a regular file")
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))  # a UTF-8 BOM is fine
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such result file") from None
    except OSError as err:  # a symlink loop, no permission
        raise ValueError(f"{path}: cannot read ({err.strerror or err})") from None
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not JSON ({err.msg} at line {err.lineno})") from None
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: not valid UTF-8 (byte {err.start + 1})") from None
    except (RecursionError, ValueError):  # nested too deeply; a 5,000-digit number
        raise ValueError(f"{path}: not JSON (nested too deeply or a number too long)") \
            from None
    if not isinstance(data, dict) or not isinstance(data.get("evaluated"), dict):
        problem = (f"{path}: not a tapt result file (no 'evaluated' block; write one with "
                   "tapt eval/bm25 --output)")
        raise ValueError(problem)  # noqa: TRY004 (a malformed file, not a wrong argument)
    missing = [key for key in METRIC_KEYS if not isinstance(data.get(key), (int, float))
               or isinstance(data[key], bool)]
    if missing:
        raise ValueError(f"{path}: missing metric(s) {', '.join(missing)}")
    for key in METRIC_KEYS:  # NaN fails both comparisons
        if not 0 <= data[key] <= 1:
            raise ValueError(f"{path}: field '{key}': expected a value in [0, 1], got "
                             f"{data[key]!r}")
    if not isinstance(data.get("timings", {}), dict):
        raise ValueError(f"{path}: field 'timings': expected an object")  # noqa: TRY004
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
    from tapt.encoders.preset_record import read_preset_record

    try:
        record = read_preset_record(model) if model else None
    except (OSError, ValueError):
        record = None
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


def compare_results(specs: Sequence[str], *, kinds: Mapping[str, str] | None = None,
                    corpus_labels: Mapping[str, str] | None = None,
                    metrics: Sequence[str] = METRIC_KEYS, latency: str = "search"
                    ) -> Comparison:
    """Read ``specs`` (``path.json`` or ``NAME=path.json``) into one comparison.

    Rows keep the order in which systems first appear; a system is named by its ``NAME=``
    label or else by the model in its ``evaluated`` block. Two files for the same system
    and corpus are an error.
    """
    if latency not in LATENCIES:
        raise ValueError(f"latency must be one of {sorted(LATENCIES)}, got {latency!r}")
    unknown = [m for m in metrics if m not in METRIC_KEYS]
    if unknown:
        raise ValueError(f"unknown metric(s) {unknown}; choose from {list(METRIC_KEYS)}")
    for name, kind in (kinds or {}).items():
        if kind not in KINDS:
            raise ValueError(f"--kind {name}={kind}: kind must be one of {', '.join(KINDS)}")
    rows: dict[str, SystemRow] = {}
    corpora: list[str] = []
    for spec in specs:
        label, value = split_spec(spec)
        path = Path(value)
        result = read_result(path)
        evaluated = result["evaluated"]
        model = str(evaluated.get("model", path.stem))
        name = label or model
        corpus = corpus_label(evaluated, corpus_labels)
        row = rows.get(name)
        if row is None:
            kind = (kinds or {}).get(name) or infer_kind(result)
            row = rows[name] = SystemRow(name=name, kind=kind, model=model)
        if corpus in row.cells:
            raise ValueError(f"two results for {name} on {corpus}: {row.cells[corpus].source} "
                             f"and {path}; label one with NAME=path.json")
        row.cells[corpus] = Cell(metrics={k: float(result[k]) for k in metrics},
                                 latency_ms=latency_ms(result.get("timings", {}), latency),
                                 source=str(path))
        if corpus not in corpora:
            corpora.append(corpus)
    if not rows:
        raise ValueError("no result files given")
    corpora.sort(key=lambda c: (c not in ("C0", "C1"), c))
    return Comparison(rows=list(rows.values()), corpora=corpora, metrics=list(metrics),
                      latency=latency)


SHORT = {"binary_ndcg@10": "bin nDCG@10", "graded_ndcg@10": "grd nDCG@10",
         "mrr@10": "MRR@10", "recall@100": "R@100"}


def comparison_table(comparison: Comparison, metric: str = PRIMARY,
                     title: str = "Systems x corpora"):
    """A rich table: system, kind, each corpus's metrics, C1/C0 retention of ``metric`` and
    the latency on C1 (or the first corpus)."""
    from rich.table import Table

    table = Table(title=title)
    table.add_column("system")
    table.add_column("kind")
    for corpus in comparison.corpora:
        for key in comparison.metrics:
            table.add_column(f"{corpus} {SHORT.get(key, key)}", justify="right")
    with_retention = any(row.retention for row in comparison.rows)
    if with_retention:
        table.add_column(f"C1/C0 {SHORT.get(metric, metric)}", justify="right")
    latency_corpus = "C1" if "C1" in comparison.corpora else comparison.corpora[0]
    table.add_column(f"{latency_corpus} ms/query ({comparison.latency})", justify="right")
    for row in comparison.rows:
        cells = _metric_cells(row, comparison, metric, with_retention)
        cell = row.cells.get(latency_corpus)
        cells.append(f"{cell.latency_ms:.3f}" if cell and finite_number(cell.latency_ms) else "-")
        table.add_row(*cells)
    return table


def _metric_cells(row: SystemRow, comparison: Comparison, metric: str,
                  with_retention: bool) -> list[str]:
    """Name, kind, each corpus's metrics and (if asked) the C1/C0 retention, as text."""
    cells = [row.name, row.kind]
    for corpus in comparison.corpora:
        cell = row.cells.get(corpus)
        cells += [f"{cell.metrics[k]:.4f}" if cell else "-" for k in comparison.metrics]
    if with_retention:
        value = row.retention.get(metric)
        cells.append(f"{value:.1%}" if value is not None and finite_number(value) else "-")
    return cells


def markdown_table(comparison: Comparison, metric: str = PRIMARY) -> str:
    """The same table in Markdown (for READMEs and reports)."""
    header = ["system", "kind"] + [f"{c} {SHORT.get(k, k)}" for c in comparison.corpora
                                   for k in comparison.metrics]
    with_retention = any(row.retention for row in comparison.rows)
    if with_retention:
        header.append(f"C1/C0 {SHORT.get(metric, metric)}")
    lines = ["| " + " | ".join(header) + " |", "|---|---|" + "---:|" * (len(header) - 2)]
    for row in comparison.rows:
        cells = _metric_cells(row, comparison, metric, with_retention)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def frontier_figure(comparison: Comparison, metric: str = PRIMARY):
    from tapt.analysis import plots

    label = {"search": "search latency (ms / query)",
             "query": "query encoding + search latency (ms / query)"}[comparison.latency]
    return plots.frontier(comparison.points(metric), comparison.corpora, metric, label)

