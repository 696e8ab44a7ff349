"""Training rows from graded qrels: (query, anchor, hard negative[, soft negative][, mined...]).

The dataset's :class:`~tapt.data.relevance.RelevanceRule` says which grades are which.
FormBench's: the anchor (grade 3) is the positive; the hard negative (grade 2) is the
explicit negative that MultipleNegativesRankingLoss adds to the in-batch negatives; the soft
negative (grade 1) and negatives mined from the corpus (``tapt mine``) follow as more
columns. BEIR's (grade >= 1 relevant, no graded negatives): one (query, relevant passage)
pair per relevant passage, as sentence-transformers users train on BEIR, with in-batch
negatives plus the mined ones when given. Rows are returned as a ``datasets.Dataset``
(columns ``query``, ``positive``, ``negative``, optionally ``soft_negative`` and
``mined_1`` ... ``mined_K``), the input sentence-transformers' trainer expects.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from tapt.data.beir import BeirDataset

# datasets is imported when training rows are built, not with tapt.data.

logger = logging.getLogger(__name__)

MissingPolicy = Literal["drop", "pair"]


@dataclass
class TripletStats:
    """What :func:`build_training_rows` made and dropped."""

    queries: int = 0
    rows: int = 0
    pairs: int = 0
    """Rows of a query and its anchor only (no graded or mined negative)."""
    dropped: int = 0
    short_mined: int = 0
    """Rows with fewer mined negatives than asked (their query had fewer)."""
    groups: list[str] = field(default_factory=list)
    """With ``group_of``: each row's group key, in row order (for batches from one group)."""
    ids: list[dict[str, str]] = field(default_factory=list, compare=False)
    """Each row's ids, in row order: column -> passage id, and ``query`` -> the query id
    (for labels per passage: :mod:`tapt.training.distill`)."""


def build_rows(dataset: BeirDataset, split: str = "train", *, soft_negative: bool = False,
               missing: MissingPolicy = "drop", with_title: bool = True,
               mined: dict[str, list[str]] | None = None, mined_per_row: int = 0,
               group_of: Callable[[str], str] | None = None,
               ) -> tuple[list[dict[str, str]], TripletStats]:
    """One row per (query, anchor); negatives cycle when a query has several anchors.

    Anchors and graded negatives follow ``dataset.rule``. Under a rule with a hard-negative
    grade, a query without a hard negative (or without a soft one when ``soft_negative``) is
    dropped with ``missing="drop"`` or kept as a shorter row with ``missing="pair"``; under
    one without (BEIR's), every row is a (query, anchor) pair and ``missing`` does not apply
    unless negatives are mined. ``mined`` (query id -> negative ids, e.g.
    :func:`tapt.data.mined.read_mined`) adds ``mined_per_row`` columns after the graded
    ones; a query with fewer mined negatives keeps a row with fewer columns, and under a
    rule without a hard-negative grade (where mined negatives are the only ones) a query
    with none is dropped with ``missing="drop"`` and kept as a pair with ``"pair"``. ``group_of`` (anchor passage id -> group key, e.g. its
    patent) fills ``stats.groups``.
    """
    if missing not in ("drop", "pair"):
        raise ValueError(f"missing must be 'drop' or 'pair', got {missing!r}")
    rule = dataset.rule
    if soft_negative and rule.soft_negative is None:
        raise ValueError(f"soft_negative (data.soft_negative) asks for a soft-negative column, "
                         f"but the relevance rule {rule.describe()} has no soft-negative grade "
                         "(data.relevant_from: 3 or more has one)")
    graded_negatives = rule.hard_negative is not None
    # without a hard-negative grade, mined negatives are a row's only negatives
    mined_only = not graded_negatives and bool(mined_per_row) and mined is not None
    stats = TripletStats()
    rows: list[dict[str, str]] = []
    for query_id, judged in dataset.split(split).items():
        anchors = rule.relevant_ids(judged)
        hard = rule.graded_ids(judged, rule.hard_negative)
        soft = rule.graded_ids(judged, rule.soft_negative)
        complete = bool(anchors) and (not graded_negatives or bool(hard)) and (
            bool(soft) or not soft_negative) and (not mined_only or bool(mined.get(query_id)))
        if not complete and (missing == "drop" or not anchors):
            stats.dropped += 1
            continue
        stats.queries += 1
        for position, anchor in enumerate(anchors):
            ids = {"query": query_id, "positive": anchor}
            if hard:
                ids["negative"] = hard[position % len(hard)]
                if soft_negative and soft:
                    ids["soft_negative"] = soft[position % len(soft)]
            if mined_per_row and mined is not None:
                chosen = rotated(mined.get(query_id, []), position * mined_per_row,
                                 mined_per_row)
                stats.short_mined += len(chosen) < mined_per_row
                for number, doc_id in enumerate(chosen, start=1):
                    ids[f"mined_{number}"] = doc_id
            row = {column: dataset.queries[doc_id] if column == "query"
                   else dataset.corpus[doc_id].as_text(with_title)
                   for column, doc_id in ids.items()}
            rows.append(row)
            stats.ids.append(ids)
            if group_of is not None:
                stats.groups.append(group_of(anchor))
            stats.rows += 1
            stats.pairs += len(ids) == 2  # (query, anchor): no negative of any kind
    if not rows:
        raise ValueError(f"split '{split}' of {dataset.source} gives no training rows under "
                         f"the relevance rule {rule.describe()} ({stats.dropped} queries "
                         "dropped for lacking an anchor or a negative)")
    return rows, stats


def rotated(items: list[str], start: int, count: int) -> list[str]:
    """``count`` items of ``items`` from ``start`` on, wrapping around (all of them, in
    order, when there are no more than ``count``)."""
    if len(items) <= count:
        return list(items)
    return [items[(start + offset) % len(items)] for offset in range(count)]


def build_training_rows(dataset: BeirDataset, split: str = "train", *,
                        soft_negative: bool = False, missing: MissingPolicy = "drop",
                        with_title: bool = True, mined: dict[str, list[str]] | None = None,
                        mined_per_row: int = 0, group_of: Callable[[str], str] | None = None,
                        labels: Callable[[dict[str, str]], float | list[float]] | None = None):
    """Rows as a ``datasets.Dataset``, or a ``DatasetDict`` keyed by column layout
    (``triplets``, ``pairs``, ...) when rows come in several shapes (``missing="pair"``,
    queries with fewer mined negatives); the sentence-transformers trainer accepts both
    with one loss. With ``group_of`` the result is ``(rows, group keys)`` and rows must have
    one shape (a ``ValueError`` otherwise). ``labels`` (a row's ids, as in
    :attr:`TripletStats.ids` -> its label) adds a ``label`` column (distillation targets)."""
    from datasets import Dataset, DatasetDict

    rows, stats = build_rows(dataset, split, soft_negative=soft_negative, missing=missing,
                             with_title=with_title, mined=mined, mined_per_row=mined_per_row,
                             group_of=group_of)
    logger.info("%s: %d rows from %d queries (%d pairs, %d queries dropped, %d rows with "
                "fewer than %d mined negatives)", split, stats.rows, stats.queries,
                stats.pairs, stats.dropped, stats.short_mined, mined_per_row)
    if labels is not None:
        for row, ids in zip(rows, stats.ids):
            row["label"] = labels(ids)
    groups: dict[tuple[str, ...], list[dict[str, str]]] = {}
    for row in rows:
        groups.setdefault(tuple(column for column in row if column != "label"), []).append(row)
    if group_of is not None:
        if len(groups) > 1:
            raise ValueError(
                f"batches from one group (data.batch_by) need training rows of one shape, got "
                f"{len(groups)}: {', '.join(group_name(c) for c in groups)} (set "
                "data.missing_hard_negative: drop, or mine enough negatives for every query)")
        return Dataset.from_list(rows), stats.groups
    if len(groups) == 1:
        return Dataset.from_list(rows)
    named: dict[str, Dataset] = {}
    for columns, group in groups.items():
        name = group_name(columns)
        name = name if name not in named else f"{name}_{len(named)}"  # same width, other columns
        named[name] = Dataset.from_list(group)
    return DatasetDict(named)


def group_name(columns: tuple[str, ...]) -> str:
    """``pairs``, ``triplets``, ``quadruplets``, else ``tuples_N`` (N columns)."""
    return {2: "pairs", 3: "triplets", 4: "quadruplets"}.get(len(columns),
                                                             f"tuples_{len(columns)}")
