"""What a run's model card and ``tapt report`` say about its splits, from the records the
run keeps:

- ``dev_carve`` (``results.json``): how the dev split was carved from train
  (:mod:`tapt.data.splits`): by whole groups of queries sharing relevant passages, or by
  single query (``by``), and how many dev queries still have a relevant passage that is a
  training positive (``overlap``);
- ``decontaminated`` (``results.json``): the splits train was decontaminated against and the
  train queries and judgments before and after (:func:`tapt.data.overlap.decontaminate`);
- ``train_overlap`` (``test.json``, as every ``tapt eval`` result): the test queries that are
  seen (a relevant passage was a training positive) and novel, with the metrics on each part
  (:func:`tapt.data.overlap.overlap_section`).

Each record is checked (:func:`record_problem`: the field and what is wrong) and rendered as
Markdown lines; an absent record (nothing carved or decontaminated, no test) renders
nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

from tapt.data.overlap import NOVEL, SEEN
from tapt.retrieval.metrics import METRIC_KEYS
from tapt.util.finite import metric_value

RECORDS = ("dev_carve", "decontaminated", "train_overlap")
"""The records, by the key that holds them (``train_overlap``: in the test result)."""


def data_records(dataset) -> dict[str, dict]:
    """``dev_carve`` and ``decontaminated`` of a loaded
    :class:`~tapt.data.beir.BeirDataset`, those it has."""
    records = {"dev_carve": dataset.carved,
               "decontaminated": getattr(dataset, "decontaminated", None)}
    return {key: dict(value) for key, value in records.items() if value}


def test_records(records: Mapping[str, dict], report=None) -> dict[str, dict]:
    """``records`` (:func:`data_records`) plus the ``train_overlap`` of a test
    :class:`~tapt.retrieval.evaluate.EvalReport` (``report``; None: no test run)."""
    records = dict(records)
    overlap = report.to_dict(with_per_query=False).get("train_overlap") if report else None
    return {**records, "train_overlap": overlap} if overlap else records


def _count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _names(value) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _pair(value) -> bool:
    return isinstance(value, list) and len(value) == 2 and all(map(_count, value))


def carve_problem(carve) -> tuple[str, str] | None:
    """``(field, what is wrong)`` with a ``dev_carve`` record, or None."""
    if not isinstance(carve, dict):
        return "", "expected an object"
    for key in ("carved_from", "split"):
        if not isinstance(carve.get(key), str):
            return key, f"expected a split name, got {carve.get(key)!r}"
    for key in ("queries", "remaining_train_queries", "seed"):
        if not _count(carve.get(key)):
            return key, f"expected a whole number >= 0, got {carve.get(key)!r}"
    if carve.get("by") not in ("group", "query"):
        return "by", f"expected 'group' or 'query', got {carve.get('by')!r}"
    for key in ("groups", "overlap"):
        if not _count(carve.get(key)):
            return key, f"expected a whole number >= 0, got {carve.get(key)!r}"
    return None


def decontamination_problem(record) -> tuple[str, str] | None:
    """``(field, what is wrong)`` with a ``decontaminated`` record, or None."""
    if not isinstance(record, dict):
        return "", "expected an object"
    if not _names(record.get("against")) or not record["against"]:
        return "against", f"expected a list of split names, got {record.get('against')!r}"
    for key in ("train_queries", "judgments"):
        if not _pair(record.get(key)):
            return key, f"expected [before, after] counts, got {record.get(key)!r}"
    return None


def overlap_problem(section) -> tuple[str, str] | None:
    """``(field, what is wrong)`` with a result's ``train_overlap`` section, or None."""
    if not isinstance(section, dict):
        return "", "expected an object"
    for key in ("split", "train_split"):
        if not isinstance(section.get(key), str):
            return key, f"expected a split name, got {section.get(key)!r}"
    if not _names(section.get("decontaminated", [])):
        return "decontaminated", "expected a list of split names"
    for key in (SEEN, NOVEL):
        if not _count(section.get(key)):
            return key, f"expected a query count, got {section.get(key)!r}"
    ids = section.get("seen_query_ids")
    if not _names(ids) or len(set(ids)) != section[SEEN]:
        return "seen_query_ids", f"expected the {section[SEEN]} distinct seen query ids"
    for block in ("metrics", "counts"):
        parts = section.get(block)
        if not isinstance(parts, dict) or not set(parts) <= {SEEN, NOVEL}:
            return block, "expected an object of seen / novel parts"
        for part, values in parts.items():
            if not isinstance(values, dict) or not set(values) <= set(METRIC_KEYS):
                return f"{block}.{part}", "expected an object of metric -> value"
            check, kind = ((metric_value, "a number in [0, 1]") if block == "metrics"
                           else (_count, "a query count"))
            for key, value in values.items():
                if not check(value):
                    return f"{block}.{part}.{key}", f"expected {kind}, got {value!r}"
    return None


PROBLEMS = {"dev_carve": carve_problem, "decontaminated": decontamination_problem,
            "train_overlap": overlap_problem}


def record_problem(key: str, record) -> tuple[str, str] | None:
    """``(field, what is wrong)`` with the record under ``key`` (one of :data:`RECORDS`);
    the field is ``key`` or ``key.FIELD``."""
    problem = PROBLEMS[key](record)
    if problem is None:
        return None
    field, message = problem
    return (f"{key}.{field}" if field else key), message


def _queries(count: int) -> str:
    return f"{count:,} quer{'y' if count == 1 else 'ies'}"


def carve_lines(carve: Mapping | None) -> list[str]:
    """How dev was carved, as one Markdown paragraph (none without a record)."""
    if not carve:
        return []
    how = (f"in {carve['groups']} whole groups of queries that share relevant passages"
           if carve["by"] == "group" else "by single query")
    text = (f"Dev split `{carve['split']}`: {_queries(carve['queries'])} carved from "
            f"`{carve['carved_from']}` {how} (seed {carve['seed']}); "
            f"{_queries(carve['remaining_train_queries'])} left to train on.")
    overlap = carve["overlap"]
    if overlap:
        text += (f" {overlap} of the dev queries have a relevant passage that is a training "
                 "positive: dev partly rewards memorising training passages.")
    else:
        text += " No dev query has a relevant passage that is a training positive."
    return [text, ""]


def decontamination_lines(record: Mapping | None) -> list[str]:
    """What train was decontaminated against, as one Markdown paragraph (none without)."""
    if not record:
        return []
    against = ", ".join(f"`{split}`" for split in record["against"])
    (q0, q1), (j0, j1) = record["train_queries"], record["judgments"]
    return [(f"Train decontaminated against {against}: every judgment of a passage relevant "
             f"there dropped ({j0:,} -> {j1:,} judgments, {q0:,} -> {q1:,} train queries), "
             "so training never saw those passages."), ""]


def overlap_lines(section: Mapping | None, metric: str, label: str = "test") -> list[str]:
    """The ``label`` result's seen and novel queries: a sentence with ``metric`` on each
    part, then a Markdown table of every metric per part (none without a section)."""
    if not section:
        return []
    seen, novel, metrics = section[SEEN], section[NOVEL], section.get("metrics", {})
    decontaminated = section.get("decontaminated") or []
    text = (f"Of the {_queries(seen + novel)} of the {label} result (`{section['split']}` "
            f"split), {seen:,} are **seen** (a relevant passage is a `{section['train_split']}`"
            f" positive) and {novel:,} **novel**"
            + (f" (train decontaminated against {', '.join(decontaminated)})"
               if decontaminated else "") + ".")
    parts = [f"{metric} {metrics[part][metric]:.4f} on {part} queries" for part in (SEEN, NOVEL)
             if metric in metrics.get(part, {})]
    if parts:
        text += (" " + ", ".join(parts) + " (the novel figure measures passages the model "
                 "never trained on as positives).")
    lines = [text, "", "| queries | count | " + " | ".join(METRIC_KEYS) + " |",
             "|---|---:|" + "---:|" * len(METRIC_KEYS)]
    for part, count in ((SEEN, seen), (NOVEL, novel)):
        values = metrics.get(part, {})
        lines.append(f"| {label}, {part} | {count:,} | " + " | ".join(
            f"{values[key]:.4f}" if key in values else "-" for key in METRIC_KEYS) + " |")
    return [*lines, ""]


def split_lines(records: Mapping[str, Mapping | None], metric: str) -> list[str]:
    """Every split record of ``records`` (keys of :data:`RECORDS`) as Markdown lines."""
    return (carve_lines(records.get("dev_carve"))
            + decontamination_lines(records.get("decontaminated"))
            + overlap_lines(records.get("train_overlap"), metric))
