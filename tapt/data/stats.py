"""Dataset statistics: judgments per split and tier, passage lengths in tokens."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np

from tapt.data.beir import BeirDataset
from tapt.data.relevance import FORMBENCH, RelevanceRule

TIER_NAMES = {3: "anchor", 2: "hard negative", 1: "soft negative", 0: "not relevant"}
"""FormBench's tiers (the ``formbench`` relevance rule)."""
PERCENTILES = (50, 90, 95, 99, 99.87, 100)


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


def length_percentiles(texts: Sequence[str], count_tokens: Callable[[list[str]], list[int]],
                       percentiles: Sequence[float] = PERCENTILES, batch_size: int = 1024,
                       ) -> dict[str, float]:
    """Percentiles of per-passage token counts (``count_tokens`` maps texts to counts)."""
    lengths: list[int] = []
    for start in range(0, len(texts), batch_size):
        lengths.extend(count_tokens(list(texts[start:start + batch_size])))
    values = np.percentile(np.asarray(lengths), percentiles)
    return {f"p{p:g}": float(v) for p, v in zip(percentiles, values)}


def whitespace_counter(texts: list[str]) -> list[int]:
    return [len(text.split()) for text in texts]


def tokenizer_counter(tokenizer) -> Callable[[list[str]], list[int]]:
    """Counts with a HuggingFace tokenizer, special tokens included, no truncation."""
    def count(texts: list[str]) -> list[int]:
        return [len(ids) for ids in tokenizer(texts, truncation=False)["input_ids"]]
    return count
