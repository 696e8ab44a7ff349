"""Pseudo-queries sampled from the corpus passages alone: the text a teacher then labels.

GPL (Wang et al., 2022) and SPAR (Chen et al., 2022) adapt a retriever to a corpus without
a single labelled query: queries are made from the passages, a teacher (a cross-encoder in
GPL, BM25 in SPAR) ranks the corpus for each, and the student learns the teacher's
ranking. SPAR's queries are sentences of the passages; that is what this module samples
(scientific claims, as SciFact's, read like an abstract's sentences), or a passage's title.

Only passages are read (:func:`tapt.data.sources.load_corpus`): no query and no judgment of
any split. Passages are walked in a seeded order and each gives ``per_passage`` queries
(its usable sentences drawn without replacement), so ``count`` queries touch about
``count / per_passage`` passages and only the ids are held in memory. A sentence is usable
when it has at least ``min_words`` words (short fragments such as "Methods." say nothing a
teacher can rank on). ``early`` favours a passage's first sentences (weight ``1 / (i +
1)`` for the ``i``-th), where an abstract states its subject; ``uniform`` weighs all alike.

The sentence split is :func:`tapt.data.weak_pairs.sentences` (the same rule ICT pairs use).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

from tapt.data.beir import Passage
from tapt.data.weak_pairs import sentences

Span = Literal["sentence", "title"]
Choice = Literal["early", "uniform"]


@dataclass(frozen=True)
class PseudoQuery:
    """One sampled query: its id, its text and the passage it came from."""

    query_id: str
    text: str
    source: str


@dataclass
class SamplingCounts:
    """What the sampler walked and what it made (the command prints them)."""

    passages: int = 0
    """Passages walked."""
    no_span: int = 0
    """Passages that gave no query (no title, or no sentence of ``min_words`` words)."""
    queries: int = 0


def usable_spans(passage: Passage, span: Span, min_words: int) -> list[str]:
    """The passage's candidate queries: its sentences of at least ``min_words`` words, or
    its title (when it has one of that many words)."""
    if span == "title":
        title = passage.title.strip()
        return [title] if len(title.split()) >= min_words else []
    return [part for part in sentences(passage.text) if len(part.split()) >= min_words]


def draw_spans(spans: list[str], k: int, choice: Choice, rng: random.Random) -> list[str]:
    """``k`` of ``spans`` without replacement (all when fewer), in passage order; ``early``
    draws the ``i``-th with weight ``1 / (i + 1)`` (Efraimidis-Spirakis keys)."""
    if len(spans) <= k:
        return list(spans)
    if choice == "uniform":
        picked = rng.sample(range(len(spans)), k)
    else:
        keys = [rng.random() ** (i + 1) for i in range(len(spans))]  # u^(1/w), w = 1/(i+1)
        picked = sorted(range(len(spans)), key=lambda i: keys[i], reverse=True)[:k]
    return [spans[i] for i in sorted(picked)]


def iter_pseudo_queries(corpus: Mapping[str, Passage], *, count: int | None = None,
                        per_passage: int = 1, span: Span = "sentence",
                        choice: Choice = "early", min_words: int = 5, seed: int = 0,
                        counts: SamplingCounts | None = None) -> Iterator[PseudoQuery]:
    """Pseudo-queries of ``corpus`` (module docstring): at most ``count`` (None: every
    passage's ``per_passage``), ids ``pseudo-1``, ``pseudo-2``, ... in the order made. The
    same corpus and settings give the same queries; ``counts`` is updated as it goes."""
    if per_passage < 1:
        raise ValueError(f"per_passage must be at least 1, got {per_passage}")
    if count is not None and count < 1:
        raise ValueError(f"count must be at least 1, got {count}")
    counts = counts if counts is not None else SamplingCounts()
    rng = random.Random(seed)
    ids = list(corpus)
    rng.shuffle(ids)  # a seeded order: a count-limited sample spreads over the corpus
    for doc_id in ids:
        counts.passages += 1
        spans = usable_spans(corpus[doc_id], span, min_words)
        if not spans:
            counts.no_span += 1
            continue
        for text in draw_spans(spans, per_passage, choice, rng):
            counts.queries += 1
            yield PseudoQuery(f"pseudo-{counts.queries}", text, doc_id)
            if count is not None and counts.queries == count:
                return
