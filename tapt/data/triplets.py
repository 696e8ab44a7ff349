"""Training rows from graded qrels: (query, anchor, hard negative[, soft negative]).

The anchor (grade 3) is the positive; the hard negative (grade 2) is the explicit
negative that MultipleNegativesRankingLoss adds to the in-batch negatives. Rows are
returned as a ``datasets.Dataset`` (columns ``query``, ``positive``, ``negative``,
optionally ``soft_negative``), the input sentence-transformers' trainer expects.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

from tapt.data.beir import ANCHOR, HARD_NEGATIVE, SOFT_NEGATIVE, BeirDataset

logger = logging.getLogger(__name__)

MissingPolicy = Literal["drop", "pair"]


@dataclass
class TripletStats:
    """What :func:`build_triplets` made and dropped."""

    queries: int = 0
    rows: int = 0
    pairs: int = 0
    dropped: int = 0


def _graded(judged: dict[str, int], grade: int) -> list[str]:
    return sorted(doc_id for doc_id, score in judged.items() if score == grade)


def build_rows(dataset: BeirDataset, split: str = "train", *, soft_negative: bool = False,
               missing: MissingPolicy = "drop", with_title: bool = True,
               ) -> tuple[list[dict[str, str]], TripletStats]:
    """One row per (query, anchor); negatives cycle when a query has several anchors.

    A query without a hard negative (or without a soft one when ``soft_negative``) is
    dropped with ``missing="drop"`` or kept as a shorter row with ``missing="pair"``.
    """
    if missing not in ("drop", "pair"):
        raise ValueError(f"missing must be 'drop' or 'pair', got {missing!r}")
    stats = TripletStats()
    rows: list[dict[str, str]] = []
    for query_id, judged in dataset.split(split).items():
        anchors = [d for d, s in judged.items() if s >= ANCHOR]
        hard = _graded(judged, HARD_NEGATIVE)
        soft = _graded(judged, SOFT_NEGATIVE)
        complete = bool(hard) and (bool(soft) or not soft_negative)
        if not complete and missing == "drop":
            stats.dropped += 1
            continue
        stats.queries += 1
        for position, anchor in enumerate(sorted(anchors)):
            row = {"query": dataset.queries[query_id],
                   "positive": dataset.corpus[anchor].as_text(with_title)}
            if hard:
                row["negative"] = dataset.corpus[hard[position % len(hard)]].as_text(with_title)
                if soft_negative and soft:
                    row["soft_negative"] = dataset.corpus[soft[position % len(soft)]].as_text(
                        with_title)
            rows.append(row)
            stats.rows += 1
            stats.pairs += "negative" not in row
    if not rows:
        raise ValueError(f"split '{split}' of {dataset.source} gives no training rows "
                         f"({stats.dropped} queries dropped for lacking a negative)")
    return rows, stats


def build_triplets(dataset: BeirDataset, split: str = "train", *, soft_negative: bool = False,
                   missing: MissingPolicy = "drop", with_title: bool = True):
    """Rows as a ``datasets.Dataset``, or a ``DatasetDict`` keyed by column layout
    (``triplets``, ``pairs``, ...) when ``missing="pair"`` leaves rows of several shapes;
    the sentence-transformers trainer accepts both with one loss."""
    from datasets import Dataset, DatasetDict

    rows, stats = build_rows(dataset, split, soft_negative=soft_negative, missing=missing,
                             with_title=with_title)
    logger.info("%s: %d rows from %d queries (%d pairs, %d queries dropped)", split,
                stats.rows, stats.queries, stats.pairs, stats.dropped)
    groups: dict[tuple[str, ...], list[dict[str, str]]] = {}
    for row in rows:
        groups.setdefault(tuple(row), []).append(row)
    if len(groups) == 1:
        return Dataset.from_list(rows)
    names = {2: "pairs", 3: "triplets", 4: "quadruplets"}
    return DatasetDict({names[len(columns)]: Dataset.from_list(group)
                        for columns, group in groups.items()})
