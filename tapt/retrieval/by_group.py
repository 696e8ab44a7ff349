"""Metrics per query group (``tapt eval --by FIELD``): the per-query values of an
:class:`~tapt.retrieval.evaluate.EvalReport` averaged within each label value.

Averaging follows :func:`tapt.retrieval.metrics.score_run` (trec_eval): a metric's mean in
a group is over the group's queries that have that metric (binary metrics need a relevant
passage, graded nDCG a positive grade), and ``counts`` says how many; so the count-weighted
mean of the group means is the overall mean. Queries without the label form the group
:data:`NO_LABEL`.

Example::

    labels = read_query_labels("data/formbench", "domain")
    groups = group_metrics(report.per_query, labels)
    groups["pharma"]["metrics"]["binary_ndcg@10"], groups["pharma"]["queries"]
"""

from __future__ import annotations

from collections.abc import Mapping

from tapt.data.labels import NO_LABEL
from tapt.data.overlap import NOVEL, SEEN, SplitOverlap
from tapt.retrieval.metrics import METRIC_KEYS


def group_metrics(per_query: Mapping[str, Mapping[str, float]],
                  labels: Mapping[str, str]) -> dict[str, dict]:
    """``{group: {"queries": n, "metrics": {key: mean}, "counts": {key: n}}}``, groups in
    name order with :data:`NO_LABEL` last; a metric no query of a group has is left out."""
    members: dict[str, list[Mapping[str, float]]] = {}
    for query_id, values in per_query.items():
        members.setdefault(labels.get(query_id, NO_LABEL), []).append(values)
    names = sorted(name for name in members if name != NO_LABEL)
    names += [NO_LABEL] if NO_LABEL in members else []
    groups: dict[str, dict] = {}
    for name in names:
        rows = members[name]
        metrics, counts = {}, {}
        for key in METRIC_KEYS:
            values = [row[key] for row in rows if key in row]
            if values:
                metrics[key] = sum(values) / len(values)
                counts[key] = len(values)
        groups[name] = {"queries": len(rows), "metrics": metrics, "counts": counts}
    return groups


def groups_section(field: str, groups: dict[str, dict]) -> dict:
    """What ``tapt eval --by FIELD --output`` records under ``by_group``."""
    return {"field": field, "none_group": NO_LABEL, "groups": groups}


def overlap_section(overlap: SplitOverlap,
                    per_query: Mapping[str, Mapping[str, float]]) -> dict:
    """What an evaluation result records under ``train_overlap``: the split, the training
    split it is compared with, the seen and novel query counts, the seen query ids (every
    other query of ``per_query`` is novel) and every metric on each part (a part without
    queries is left out), averaged as :func:`group_metrics`
    averages (trec_eval's convention, so the count-weighted mean of the parts is the
    overall mean)."""
    labels = {query_id: part for query_id, part in overlap.labels().items()
              if query_id in per_query}
    groups = group_metrics({q: v for q, v in per_query.items() if q in labels}, labels)
    return {"split": overlap.split, "train_split": overlap.train_split,
            "decontaminated": list(overlap.decontaminated),
            SEEN: sum(1 for part in labels.values() if part == SEEN),
            NOVEL: sum(1 for part in labels.values() if part == NOVEL),
            "seen_query_ids": sorted(q for q, part in labels.items() if part == SEEN),
            "metrics": {part: groups[part]["metrics"] for part in (SEEN, NOVEL)
                        if part in groups},
            "counts": {part: groups[part]["counts"] for part in (SEEN, NOVEL)
                       if part in groups}}


def groups_table(field: str, groups: dict[str, dict], title: str = "Metrics per group"):
    """A rich table: one row per group, its query count and the four metrics ("-" where no
    query of the group has the metric)."""
    from rich.table import Table

    table = Table(title=title)
    table.add_column(field)
    table.add_column("queries", justify="right")
    for key in METRIC_KEYS:
        table.add_column(key, justify="right")
    for name, group in groups.items():
        metrics = group["metrics"]
        table.add_row(name, str(group["queries"]),
                      *(f"{metrics[key]:.4f}" if key in metrics else "-" for key in METRIC_KEYS))
    return table


__all__ = ["NO_LABEL", "group_metrics", "groups_section", "groups_table", "overlap_section"]
