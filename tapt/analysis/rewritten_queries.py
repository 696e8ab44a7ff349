"""Query sets side by side (FormBench §6.3, Table 4): how much of a system's score survives
when its queries are rewritten, and whether the change is more than noise.

For every alternative query set and every metric, on the queries the set holds:

- ``original``: the mean over those queries of the split's own queries' values;
- ``value``: the mean of the set's values;
- ``retention``: ``value / original`` (None when the original mean is 0);
- the paired test of the set against the original on the per-query values
  (:func:`tapt.analysis.significance.against_baseline`: mean difference, 95 % percentile
  bootstrap interval, paired randomization test), Holm-corrected across the sets for that
  metric.

Example::

    comparison = compare_query_sets(results.original.per_query,
                                    {name: m.per_query for name, m in results.sets.items()},
                                    sources={"original": "queries.jsonl", "v2": "v2.jsonl"})
    comparison.rows["v2"]["binary_ndcg@10"].retention
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tapt.analysis.significance import METHOD, N_RESAMPLES, SEED, Versus, against_baseline
from tapt.retrieval.metrics import METRIC_KEYS

# rich is imported by the table printer only.

ORIGINAL = "original"
"""The name of the split's own queries in tables and JSON."""

PerQuery = Mapping[str, Mapping[str, float]]


@dataclass(frozen=True)
class QuerySetRow:
    """One metric of one query set against the original queries."""

    original: float
    value: float
    retention: float | None
    versus: Versus

    def to_dict(self) -> dict:
        return {"original": self.original, "value": self.value, "retention": self.retention,
                **self.versus.to_dict()}


@dataclass
class QuerySetComparison:
    """``rows[set][metric]``; ``queries[set]``: the queries each set holds."""

    rows: dict[str, dict[str, QuerySetRow]]
    queries: dict[str, int]
    original_queries: int
    sources: dict[str, str]
    n_resamples: int = N_RESAMPLES
    seed: int = SEED

    def to_dict(self) -> dict:
        return {"original_queries": self.original_queries, "method": METHOD,
                "n_resamples": self.n_resamples, "seed": self.seed,
                "sets": {name: {"file": self.sources[name], "queries": self.queries[name],
                                "metrics": {key: row.to_dict() for key, row in rows.items()}}
                         for name, rows in self.rows.items()}}


def metric_values(per_query: PerQuery, metric: str) -> dict[str, float]:
    """``{query id: value}`` of the queries that have ``metric`` (binary metrics exist only
    for queries with a relevant passage)."""
    return {query_id: row[metric] for query_id, row in per_query.items() if metric in row}


def compare_query_sets(original: PerQuery, sets: Mapping[str, PerQuery], *,
                       sources: Mapping[str, str], n_resamples: int = N_RESAMPLES,
                       seed: int = SEED) -> QuerySetComparison:
    """Retention and paired tests of every set in ``sets`` against ``original`` (per-query
    metric values, as :func:`tapt.retrieval.metrics.score_run` gives them); ``sources``
    names each set's file (and ``original``'s) in messages."""
    rows: dict[str, dict[str, QuerySetRow]] = {name: {} for name in sets}
    for metric in METRIC_KEYS:
        base = metric_values(original, metric)
        values = {name: metric_values(per_query, metric) for name, per_query in sets.items()}
        if not base or not any(values.values()):
            continue
        tests = against_baseline({ORIGINAL: base, **values}, ORIGINAL, sources=dict(sources),
                                 n_resamples=n_resamples, seed=seed)
        for name, own in values.items():
            shared = sorted(own.keys() & base.keys())
            before = sum(base[q] for q in shared) / len(shared)
            after = sum(own[q] for q in shared) / len(shared)
            rows[name][metric] = QuerySetRow(original=before, value=after,
                                             retention=after / before if before else None,
                                             versus=tests[name])
    return QuerySetComparison(rows=rows, queries={name: len(s) for name, s in sets.items()},
                              original_queries=len(original),
                              sources={name: sources[name] for name in sets},
                              n_resamples=n_resamples, seed=seed)


def query_set_table(comparison: QuerySetComparison, name: str, title: str):
    """A rich table of one query set: per metric the original and the set's mean,
    retention, the mean difference with its 95 % interval, p and Holm-corrected p."""
    from rich.table import Table

    table = Table(title=title)
    for column in ("metric", ORIGINAL, name, "retention", "delta", "95% CI", "p", "p (Holm)"):
        table.add_column(column, justify="left" if column == "metric" else "right")
    for metric, row in comparison.rows[name].items():
        test = row.versus.test
        retention = "-" if row.retention is None else f"{row.retention:.1%}"
        table.add_row(metric, f"{row.original:.4f}", f"{row.value:.4f}", retention,
                      f"{test.delta:+.4f}", f"[{test.ci_low:+.4f}, {test.ci_high:+.4f}]",
                      f"{test.p_value:.4f}",
                      f"{row.versus.p_holm:.4f}" + (" *" if row.versus.significant else ""))
    return table
