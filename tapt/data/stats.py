"""Dataset statistics: judgments per split and tier, passage lengths in tokens, and what
share of passages and tokens a model's maximum length cuts off."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np

from tapt.data.beir import BeirDataset
from tapt.data.relevance import FORMBENCH, RelevanceRule

TIER_NAMES = {3: "anchor", 2: "hard negative", 1: "soft negative", 0: "not relevant"}
"""FormBench's tiers (the ``formbench`` relevance rule)."""
PERCENTILES = (50, 90, 95, 99, 99.87, 100)
MAX_LENGTHS = (256, 512, 1024, 2048, 8192)
"""Maximum lengths :func:`truncation_shares` reports by default (MiniLM's 256/512 up to the
8,192 of GTE / Nomic)."""


def tier_name(grade: int, rule: RelevanceRule = FORMBENCH) -> str:
    """A grade's name under ``rule``: FormBench's tier names, else ``relevant (grade N)``,
    ``hard negative``, ``soft negative``, ``not relevant`` or ``grade N``."""
    if rule == FORMBENCH and grade in TIER_NAMES:
        return TIER_NAMES[grade]
    if grade == rule.hard_negative:
        return "hard negative"
    if grade == rule.soft_negative:
        return "soft negative"
    if rule.is_relevant(grade):
        return f"relevant (grade {grade})"
    return "not relevant" if grade == 0 else f"grade {grade}"


def tier_counts(dataset: BeirDataset) -> dict[str, dict[str, int]]:
    """For each split: queries, judgments and judgments per grade, named by the dataset's
    relevance rule."""
    table: dict[str, dict[str, int]] = {}
    for split, qrels in dataset.qrels.items():
        grades = Counter(score for docs in qrels.values() for score in docs.values())
        row = {"queries": len(qrels), "judgments": sum(grades.values())}
        for grade in sorted(grades, reverse=True):
            row[tier_name(grade, dataset.rule)] = grades[grade]
        table[split] = row
    return table


def token_lengths(texts: Sequence[str], count_tokens: Callable[[list[str]], list[int]],
                  batch_size: int = 1024) -> np.ndarray:
    """Per-passage counts (``count_tokens`` maps texts to counts), ``batch_size`` at a time."""
    lengths: list[int] = []
    for start in range(0, len(texts), batch_size):
        lengths.extend(count_tokens(list(texts[start:start + batch_size])))
    return np.asarray(lengths, dtype=np.int64)


def length_percentiles(texts: Sequence[str], count_tokens: Callable[[list[str]], list[int]],
                       percentiles: Sequence[float] = PERCENTILES, batch_size: int = 1024,
                       *, lengths: np.ndarray | None = None) -> dict[str, float]:
    """Percentiles of per-passage token counts (``count_tokens`` maps texts to counts;
    ``lengths``: counts already made, then ``texts`` is not read)."""
    if lengths is None:
        lengths = token_lengths(texts, count_tokens, batch_size)
    values = np.percentile(np.asarray(lengths), percentiles)
    return {f"p{p:g}": float(v) for p, v in zip(percentiles, values)}


def truncation_shares(lengths: Sequence[int], max_lengths: Sequence[int] = MAX_LENGTHS,
                      ) -> dict[int, dict[str, float]]:
    """For each maximum length N: the share of passages longer than N and the share of all
    tokens beyond the first N of their passage (what truncation at N drops).

    ``lengths`` are full token counts (truncation off, special tokens included, as
    :func:`tokenizer_counter` counts), so N is compared with what the model reads.
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    total = int(lengths.sum())
    shares: dict[int, dict[str, float]] = {}
    for limit in max_lengths:
        dropped = int(np.maximum(lengths - int(limit), 0).sum())
        shares[int(limit)] = {
            "passages_longer": float((lengths > limit).mean()) if len(lengths) else 0.0,
            "tokens_dropped": dropped / total if total else 0.0}
    return shares


def whitespace_counter(texts: list[str]) -> list[int]:
    return [len(text.split()) for text in texts]


def tokenizer_counter(tokenizer) -> Callable[[list[str]], list[int]]:
    """Counts with a HuggingFace tokenizer, special tokens included, no truncation."""
    def count(texts: list[str]) -> list[int]:
        return [len(ids) for ids in tokenizer(texts, truncation=False,
                                              verbose=False)["input_ids"]]
    return count
