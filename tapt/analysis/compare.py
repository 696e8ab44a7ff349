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

Several files with the same ``NAME=`` label on one corpus are seeds of one system
(``MNRL=run-s0.json MNRL=run-s1.json``): its cell holds the mean and the sample standard
deviation (ddof 1) across them, shown as ``mean ± std``.

With ``baseline``, every other system is tested against it on one metric, per corpus, on
the ``per_query`` values of the result files (:mod:`tapt.analysis.significance`: mean
difference, 95 % bootstrap interval, paired randomization test, Holm-corrected across
systems). Systems are paired on the query ids they share; a system with seeds is tested on
its per-query values averaged over the seeds first (the queries all seeds hold), so the
test asks whether the system, not one lucky seed, differs from the baseline. Where the files
record ``train_overlap``, each test is repeated on the novel queries, and a gain that holds
only on seen ones is said (:mod:`tapt.analysis.novel_queries`).

Results are paired only when they were evaluated on the same data (:mod:`tapt.analysis.pairing`):
the results in one corpus column must share the data fingerprint (corpus, queries, qrels of
the split, sub-corpus), the split, the relevance rule and the top-k; a system's C0 and C1
results its split, relevance rule and top-k. Else the comparison is refused, naming the
field and both files; ``allow_different`` (``--allow-different corpus|sub-corpus|top-k``)
lifts a field. Files without a fingerprint are compared with a warning.

The comparison is shown (rich and Markdown tables, the frontier figure) by
:mod:`tapt.analysis.compare_render`.

Example::

    table = compare_results(["runs/bm25-c1.json", "TAPT=runs/tapt-c1.json"])
    table.rows[0].retention["binary_ndcg@10"]
    tested = compare_results(["BM25=runs/bm25-c1.json", "TAPT=runs/tapt-s0.json",
                              "TAPT=runs/tapt-s1.json"], baseline="BM25")
    tested.tests.results["C1"]["TAPT"].p_holm
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tapt.analysis.novel_queries import (
    NovelTests,
    novel_tests,
    seen_only_notes,
)
from tapt.analysis.pairing import (
    FIELDS,
    SETTINGS,
    check_pair,
    data_key,
    lifted,
    unfingerprinted_note,
)
from tapt.analysis.plots import pareto_front
from tapt.analysis.result_files import (  # noqa: F401 (importable from here, as before)
    API_PREFIXES,
    KINDS,
    LATENCIES,
    corpus_label,
    infer_kind,
    latency_ms,
    parse_assignments,
    read_result,
    split_spec,
)
from tapt.analysis.significance import (
    ALPHA,
    CONFIDENCE,
    METHOD,
    N_RESAMPLES,
    POWER,
    SEED,
    Versus,
    against_baseline,
    mean_std,
    per_query_values,  # noqa: F401 (importable from here, as before)
    seed_average,
)
from tapt.retrieval.metrics import METRIC_KEYS
from tapt.util.finite import finite_number

# scipy (significance) is imported where it is used.

logger = logging.getLogger(__name__)

PRIMARY = "binary_ndcg@10"


@dataclass
class Cell:
    """One system on one corpus: one result file, or the mean over seeds (``std`` across
    them, empty for one file); ``per_query`` holds each file's raw ``per_query`` block."""

    metrics: dict[str, float]
    latency_ms: float
    source: str
    std: dict[str, float] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)
    per_query: list[object] = field(default_factory=list)
    overlaps: list[object] = field(default_factory=list)
    """Each file's ``train_overlap`` section (None where it has none)."""


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
class BaselineTests:
    """Every system against ``baseline`` on ``metric``: ``results[corpus][system]``."""

    baseline: str
    metric: str
    n_resamples: int
    seed: int
    results: dict[str, dict[str, Versus]]
    novel: NovelTests | None = None
    """The same tests on the novel queries (:mod:`tapt.analysis.novel_queries`)."""

    def notes(self) -> list[str]:
        """What a reader must not miss: nothing tested, nothing significant, a gain that
        does not hold on novel queries (:func:`seen_only_notes`)."""
        novel = seen_only_notes(self.results, self.novel, self.baseline) if self.novel else []
        return self._tested_notes() + novel

    def _tested_notes(self) -> list[str]:
        """Nothing tested, or nothing significant."""
        by_corpus = {c: by for c, by in self.results.items() if by}
        if not by_corpus:
            return [f"no other system shares a corpus with {self.baseline}: nothing tested"]
        if not any(v.significant for by in by_corpus.values() for v in by.values()):
            every = [v for by in by_corpus.values() for v in by.values()]
            return [(f"no system differs significantly from {self.baseline} (p (Holm) < "
                    f"{ALPHA}); {detectable_range(every)}")]
        return [f"{corpus}: no system differs significantly from {self.baseline}; "
                f"{detectable_range(list(by.values()))}"
                for corpus, by in by_corpus.items() if not any(v.significant
                                                               for v in by.values())]

    def to_dict(self) -> dict:
        return {"name": self.baseline, "metric": self.metric, **METHOD,
                "confidence": CONFIDENCE, "alpha": ALPHA, "n_resamples": self.n_resamples,
                "seed": self.seed, "notes": self.notes()}


def detectable_range(tested: list[Versus]) -> str:
    """"the queries could detect ..." for a note: whether "not significant" means no gain
    or too few queries."""
    values = sorted(v.test.detectable for v in tested if finite_number(v.test.detectable))
    if not values:
        return "no detectable difference could be computed"
    span = f"{values[0]:.4f}" if values[0] == values[-1] else f"{values[0]:.4f} to {values[-1]:.4f}"
    return (f"with {POWER:.0%} power these queries detect a difference of {span} or more "
            "(smaller true gains can hide behind 'not significant')")


@dataclass
class Comparison:
    rows: list[SystemRow]
    corpora: list[str]
    metrics: list[str]
    latency: str
    tests: BaselineTests | None = None
    warnings: list[str] = field(default_factory=list)
    """What the pairing check could not check (result files without a data fingerprint)."""

    def notes(self) -> list[str]:
        """Lines under the table: seeds behind a ``mean ± std`` and the tests' notes."""
        seeded = [f"{row.name}: {len(cell.sources)} on {corpus}" for row in self.rows
                  for corpus, cell in row.cells.items() if len(cell.sources) > 1]
        notes = [f"mean ± std over seeds ({', '.join(seeded)})"] if seeded else []
        return notes + (self.tests.notes() if self.tests else [])

    def points(self, metric: str = PRIMARY) -> list[dict]:
        """Frontier points: ``name``, ``kind``, ``corpus``, ``latency_ms``, ``value``."""
        return [{"name": row.name, "kind": row.kind, "corpus": corpus,
                 "latency_ms": cell.latency_ms, "value": cell.metrics.get(metric, math.nan)}
                for row in self.rows for corpus, cell in row.cells.items()]

    def to_dict(self, metric: str = PRIMARY) -> dict:
        fronts = {}
        for corpus in self.corpora:
            here = [(p["name"], p["latency_ms"], p["value"]) for p in self.points(metric)
                    if p["corpus"] == corpus and finite_number(p["latency_ms"])
                    and finite_number(p["value"])]
            fronts[corpus] = pareto_front(here)
        data = {
            "metrics": self.metrics, "corpora": self.corpora, "latency": self.latency,
            "systems": [{"name": row.name, "kind": row.kind, "model": row.model,
                         "results": {corpus: _cell_dict(cell)
                                     for corpus, cell in row.cells.items()},
                         "retention_c1_c0": row.retention, "gap_c0_c1": row.gap,
                         **self._versus(row.name)}
                        for row in self.rows],
            "pareto_front": {"metric": metric, **fronts},
        }
        if self.tests is not None:
            data["baseline"] = self.tests.to_dict()
        if self.warnings:
            data["warnings"] = self.warnings
        return data

    def _versus(self, name: str) -> dict:
        """``{"vs_baseline": {corpus: test}}`` for a tested system, else nothing."""
        if self.tests is None:
            return {}
        novel = self.tests.novel or NovelTests()
        tested = {corpus: {**by[name].to_dict(), **novel.to_dict(corpus, name)}
                  for corpus, by in self.tests.results.items() if name in by}
        return {"vs_baseline": tested} if tested else {}


def _cell_dict(cell: Cell) -> dict:
    """A cell in ``to_dict``; seeds add ``seeds``, ``std`` and ``sources``."""
    data = {**cell.metrics, "latency_ms": cell.latency_ms, "source": cell.source}
    if len(cell.sources) > 1:
        data.update(seeds=len(cell.sources), std=cell.std, sources=cell.sources)
    return data


def compare_results(specs: Sequence[str], *, kinds: Mapping[str, str] | None = None,
                    corpus_labels: Mapping[str, str] | None = None,
                    metrics: Sequence[str] = METRIC_KEYS, latency: str = "search",
                    baseline: str | None = None, test_metric: str = PRIMARY,
                    n_resamples: int = N_RESAMPLES, seed: int = SEED,
                    allow_different: Sequence[str] = ()) -> Comparison:
    """Read ``specs`` (``path.json`` or ``NAME=path.json``) into one comparison.

    Rows keep the order in which systems first appear; a system is named by its ``NAME=``
    label or else by the model in its ``evaluated`` block. Files sharing a ``NAME=`` label
    on one corpus are seeds of that system (see the module docstring); two unlabelled
    results of one model on one corpus, or one file given twice, are an error. With
    ``baseline`` (a system's name) every other system is tested against it on
    ``test_metric`` (:func:`baseline_tests`). Results evaluated on different data are
    refused (:func:`check_pairing`; ``allow_different`` lifts the fields it names).
    """
    if latency not in LATENCIES:
        raise ValueError(f"latency must be one of {sorted(LATENCIES)}, got {latency!r}")
    allowed = lifted(allow_different)
    unknown = [m for m in [*metrics, test_metric] if m not in METRIC_KEYS]
    if unknown:
        raise ValueError(f"unknown metric(s) {unknown}; choose from {list(METRIC_KEYS)}")
    for name, kind in (kinds or {}).items():
        if kind not in KINDS:
            raise ValueError(f"--kind {name}={kind}: kind must be one of {', '.join(KINDS)}")
    rows: dict[str, SystemRow] = {}
    corpora: list[str] = []
    groups: dict[tuple[str, str], list[tuple[Path, dict, bool]]] = {}
    for spec in specs:
        label, value = split_spec(spec)
        path = Path(value)
        result = read_result(path)
        evaluated = result["evaluated"]
        model = str(evaluated.get("model", path.stem))
        name = label or model
        corpus = corpus_label(evaluated, corpus_labels)
        if name not in rows:
            kind = (kinds or {}).get(name) or infer_kind(result)
            rows[name] = SystemRow(name=name, kind=kind, model=model)
        group = groups.setdefault((name, corpus), [])
        _check_seed(group, name, corpus, path, labelled=label is not None)
        group.append((path, result, label is not None))
        if corpus not in corpora:
            corpora.append(corpus)
    if not rows:
        raise ValueError("no result files given")
    warnings = check_pairing(groups, allowed)
    for (name, corpus), group in groups.items():
        rows[name].cells[corpus] = _cell(group, metrics, latency)
    corpora.sort(key=lambda c: (c not in ("C0", "C1"), c))
    comparison = Comparison(rows=list(rows.values()), corpora=corpora, metrics=list(metrics),
                            latency=latency, warnings=warnings)
    if baseline is not None:
        comparison.tests = baseline_tests(comparison, baseline, test_metric,
                                        n_resamples=n_resamples, seed=seed)
    return comparison


def check_pairing(groups: Mapping[tuple[str, str], list[tuple[Path, dict, bool]]],
                  allowed: set[str]) -> list[str]:
    """Refuse results that would be paired but were evaluated on different data or settings
    (:mod:`tapt.analysis.pairing`): every two results of one corpus column in every data
    field, a system's C0 and C1 results in split, relevance rule and top-k; ``allowed``
    fields are not checked. Returns the warnings (files without a fingerprint), logged."""
    columns: dict[str, list] = {}
    firsts: dict[str, dict[str, object]] = {}
    for (name, corpus), group in groups.items():
        for path, result, _ in group:
            key = data_key(result, str(path))
            for earlier in columns.get(corpus, []):
                check_pair(earlier, key, fields=FIELDS, allowed=allowed,
                           where=f"results on {corpus}")
            columns.setdefault(corpus, []).append(key)
            firsts.setdefault(name, {}).setdefault(corpus, key)
    for name, cells in firsts.items():
        if "C0" in cells and "C1" in cells:
            check_pair(cells["C0"], cells["C1"], fields=SETTINGS, allowed=allowed,
                       where=f"{name}'s C1/C0 retention")
    note = unfingerprinted_note([key for keys in columns.values() for key in keys])
    if note:
        logger.warning("%s", note)
    return [note] if note else []


def _check_seed(group: list[tuple[Path, dict, bool]], name: str, corpus: str, path: Path,
                *, labelled: bool) -> None:
    """A further result for ``name`` on ``corpus`` is a seed only if every one is labelled
    and no file comes twice."""
    if not group:
        return
    if any(os.path.realpath(other) == os.path.realpath(path) for other, _, _ in group):
        raise ValueError(f"two results for {name} on {corpus} are one file, {path}; give "
                         "each seed's file once")
    if not labelled or not all(other_labelled for _, _, other_labelled in group):
        raise ValueError(f"two results for {name} on {corpus}: {group[0][0]} and {path}; "
                         "label one with NAME=path.json (one NAME on several files makes "
                         "them seeds of one system)")


def _cell(group: list[tuple[Path, dict, bool]], metrics: Sequence[str], latency: str) -> Cell:
    """One file's cell, or the mean (and std) of a system's seeds."""
    results = [result for _, result, _ in group]
    latencies = [latency_ms(result.get("timings", {}), latency) for result in results]
    stats = {k: mean_std([float(result[k]) for result in results]) for k in metrics}
    sources = [str(path) for path, _, _ in group]
    return Cell(metrics={k: mean for k, (mean, _) in stats.items()},
                latency_ms=sum(latencies) / len(latencies), source=sources[0],
                std={k: std for k, (_, std) in stats.items()} if len(group) > 1 else {},
                sources=sources, per_query=[result.get("per_query") for result in results],
                overlaps=[result.get("train_overlap") for result in results])


def baseline_tests(comparison: Comparison, baseline: str, metric: str = PRIMARY, *,
                 n_resamples: int = N_RESAMPLES, seed: int = SEED) -> BaselineTests:
    """Every system against ``baseline`` on each corpus the baseline has (per-query values
    of ``metric``; Holm across the systems of a corpus). ``baseline`` must be a system."""
    names = [row.name for row in comparison.rows]
    if baseline not in names:
        raise ValueError(f"--baseline {baseline}: not a system of this comparison; the "
                         f"systems are {', '.join(names)}")
    results: dict[str, dict[str, Versus]] = {}
    cells = {corpus: {row.name: row.cells[corpus] for row in comparison.rows
                      if corpus in row.cells} for corpus in comparison.corpora}
    for corpus, here in cells.items():
        if baseline not in here:
            continue
        values = {name: seed_average(cell, metric, name, corpus) for name, cell in here.items()}
        sources = {name: ", ".join(cell.sources) for name, cell in here.items()}
        results[corpus] = against_baseline(values, baseline, sources=sources, corpus=corpus,
                                           n_resamples=n_resamples, seed=seed)
    novel = novel_tests(cells, baseline, metric, n_resamples=n_resamples, seed=seed)
    return BaselineTests(baseline=baseline, metric=metric, n_resamples=n_resamples, seed=seed,
                         results=results, novel=novel)
