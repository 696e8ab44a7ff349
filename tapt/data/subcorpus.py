"""Seeded sub-corpora: every judged passage of a split plus a sample of distractors.

Used for in-loop dev evaluation (the full ~1M-passage corpus is a test-time job) and for
the paper's corpus-size ablation (distractor fractions 0.01 to 0.75).
"""

from __future__ import annotations

import random

from tapt.data.beir import BeirDataset


def subcorpus_ids(dataset: BeirDataset, split: str, *, distractors: int | None = None,
                  fraction: float | None = None, seed: int = 0) -> list[str]:
    """Corpus ids: all passages judged in ``split`` plus sampled unjudged ones.

    Every judged passage is kept whatever its grade, so the set is the same under any
    relevance rule: the relevant passages and the judged non-relevant ones (the hardest
    distractors) are always there.

    Give ``distractors`` (a count) or ``fraction`` (of the unjudged passages), not both;
    with neither, the whole corpus. The sample depends only on the ids and ``seed``.
    """
    if distractors is not None and fraction is not None:
        raise ValueError("give distractors or fraction, not both")
    if distractors is None and fraction is None:
        return list(dataset.corpus)
    judged = dataset.judged_ids(split)
    pool = sorted(doc_id for doc_id in dataset.corpus if doc_id not in judged)
    if fraction is not None:
        if not 0.0 <= fraction <= 1.0:
            raise ValueError(f"fraction must be in [0, 1], got {fraction}")
        count = round(fraction * len(pool))
    else:
        if distractors < 0:
            raise ValueError(f"distractors must be >= 0, got {distractors}")
        count = min(distractors, len(pool))
    sampled = set(random.Random(seed).sample(pool, count))
    return [doc_id for doc_id in dataset.corpus if doc_id in judged or doc_id in sampled]
