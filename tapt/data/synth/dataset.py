"""The dataset: :func:`build` in memory from one ``random.Random(seed)``, then
:func:`write_dataset` as a BEIR folder; :func:`synthesize` does both.

Everything is built before anything is written: the same seed gives byte-identical files.
"""

from __future__ import annotations

import json
import math
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tapt.data.beir import ANCHOR, HARD_NEGATIVE, SOFT_NEGATIVE, SPLITS, Passage, Qrels, write_beir
from tapt.data.synth.entities import Formulation, KeyIndex, jaccard, role_swaps
from tapt.data.synth.passage_prose import render
from tapt.data.synth.patents import (
    VARIANTS,
    Chunk,
    Kind,
    Patent,
    Variant,
    add_anchor_patent,
    add_distractors,
    assign_splits,
    complete_anchor_patent,
)
from tapt.data.synth.queries import Key, query_text
from tapt.data.synth.vocabulary import MODES, Mode
from tapt.util.bounds import SYNTH_DISTRACTORS, SYNTH_QUERIES

_QUERIES_PER_PATENT = (1, 1, 1, 2, 2, 3)


@dataclass(frozen=True)
class SynthDoc:
    """One corpus passage with the entity set and provenance it was generated from."""

    doc_id: str
    patent: str
    domain: str
    kind: Kind
    formulation: Formulation
    passage: Passage

    @property
    def labels(self) -> dict[str, str]:
        """Class labels for probes (FormBench's CPC classes stand-in): ``domain``, the
        macro-domain, and ``class``, the application (48 over the seven domains; one per
        patent)."""
        return {"domain": self.domain, "class": self.formulation.application.text}


@dataclass(frozen=True)
class SynthQuery:
    """One query, its triplet and the key items (all in the anchor) it asks about."""

    query_id: str
    text: str
    mode: Mode
    domain: str
    split: str
    anchor: str
    hard: str
    soft: str
    key: frozenset[str]

    @property
    def labels(self) -> dict[str, str]:
        """Group labels for ``tapt eval --by``: ``mode``, the query template kind the key was
        drawn for (composition, process, performance, application), and ``domain``, the
        anchor's macro-domain."""
        return {"mode": self.mode, "domain": self.domain}


@dataclass(frozen=True)
class SynthSummary:
    """What :func:`synthesize` wrote (printed by ``tapt data synth``)."""

    variant: str
    seed: int
    queries_per_split: dict[str, int]
    queries_per_mode: dict[str, int]
    queries_per_domain: dict[str, int]
    passages_per_kind: dict[str, int]
    corpus_size: int
    mean_hard_jaccard: float
    mean_soft_jaccard: float
    role_swap_share: float
    """Share of hard negatives that hold an anchor chemical in another role."""


@dataclass(frozen=True)
class SynthDataset:
    """The in-memory dataset; ``docs`` in corpus order, ``queries`` in id order."""

    variant: Variant
    seed: int
    docs: dict[str, SynthDoc]
    queries: dict[str, SynthQuery]

    def corpus(self) -> dict[str, Passage]:
        return {doc_id: doc.passage for doc_id, doc in self.docs.items()}

    def query_texts(self) -> dict[str, str]:
        return {query_id: query.text for query_id, query in self.queries.items()}

    def qrels(self) -> dict[str, Qrels]:
        """Per split: anchor = 3, hard negative = 2, soft negative = 1."""
        qrels: dict[str, Qrels] = {split: {} for split in SPLITS}
        for query in self.queries.values():
            qrels[query.split][query.query_id] = {query.anchor: ANCHOR, query.hard: HARD_NEGATIVE,
                                                  query.soft: SOFT_NEGATIVE}
        return qrels

    def summary(self) -> SynthSummary:
        queries = list(self.queries.values())
        triplets = [(self.docs[q.anchor].formulation, self.docs[q.hard].formulation,
                     self.docs[q.soft].formulation) for q in queries]
        return SynthSummary(
            variant=self.variant, seed=self.seed,
            queries_per_split={s: sum(q.split == s for q in queries) for s in SPLITS},
            queries_per_mode={m: sum(q.mode == m for q in queries) for m in MODES},
            queries_per_domain=dict(sorted(Counter(q.domain for q in queries).items())),
            passages_per_kind={k: sum(d.kind == k for d in self.docs.values())
                               for k in ("anchor", "hard", "soft", "sibling", "distractor")},
            corpus_size=len(self.docs),
            mean_hard_jaccard=round(_mean([jaccard(a.entities, h.entities)
                                           for a, h, _ in triplets]), 4),
            mean_soft_jaccard=round(_mean([jaccard(a.entities, s.entities)
                                           for a, _, s in triplets]), 4),
            role_swap_share=round(_mean([bool(role_swaps(a, h)) for a, h, _ in triplets]), 4),
        )


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if values else 0.0


def _check_arguments(queries: int, distractors: int, variant: str,
                     split_fractions: tuple[float, float, float]) -> None:
    SYNTH_QUERIES.check(queries, "queries")  # built in memory: tapt.util.bounds states the limits
    SYNTH_DISTRACTORS.check(distractors, "distractors")
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    if len(split_fractions) != 3 or any(f <= 0 for f in split_fractions) \
            or not math.isclose(sum(split_fractions), 1.0, abs_tol=1e-6):
        raise ValueError("split_fractions must be three positive numbers summing to 1 "
                         f"(train, dev, test), got {split_fractions}")


def _documents(patents: list[Patent], rng: random.Random,
               ) -> tuple[dict[str, SynthDoc], dict[Chunk, str]]:
    """Rendered passages by doc id (sorted), and the doc id of each chunk.
    Patent numbers and chunk positions are shuffled, so ids say nothing of the role."""
    numbers = list(range(1, len(patents) + 1))
    rng.shuffle(numbers)
    width = max(4, len(str(len(patents))))
    doc_ids: dict[Chunk, str] = {}
    docs: list[SynthDoc] = []
    for patent, number in zip(patents, numbers, strict=True):
        name = f"p{number:0{width}d}"
        chunks = patent.chunks[:]
        rng.shuffle(chunks)
        for position, chunk in enumerate(chunks, start=1):
            doc_id = doc_ids[chunk] = f"{name}-c{position}"
            docs.append(SynthDoc(doc_id, name, patent.domain.name, chunk.kind, chunk.formulation,
                                 render(chunk.formulation, patent.domain, patent.title, rng)))
    return {doc.doc_id: doc for doc in sorted(docs, key=lambda d: d.doc_id)}, doc_ids


def build(*, queries: int = 600, distractors: int = 2000, variant: Variant = "structured",
          seed: int = 0, split_fractions: tuple[float, float, float] = (0.8, 0.1, 0.1),
          ) -> SynthDataset:
    """Build a FormBench-like dataset in memory; deterministic for a ``seed``."""
    _check_arguments(queries, distractors, variant, split_fractions)
    rng = random.Random(seed)
    keys = KeyIndex()
    patents: list[Patent] = []
    planned: list[tuple[Patent, list[tuple[Chunk, Key]]]] = []
    count = 0
    while count < queries:
        planned.append(add_anchor_patent(rng, keys, patents,
                                         min(rng.choice(_QUERIES_PER_PATENT), queries - count)))
        count += len(planned[-1][1])
    triplets = [triplet for patent, anchors in planned
                for triplet in complete_anchor_patent(rng, keys, patents, patent, anchors)]
    add_distractors(rng, keys, patents, triplets, distractors, variant)
    split_of = assign_splits(triplets, split_fractions, rng)
    docs, doc_ids = _documents(patents, rng)

    query_width = max(5, len(str(queries)))
    synth_queries: dict[str, SynthQuery] = {}
    for number, t in enumerate(triplets, start=1):
        query_id = f"q{number:0{query_width}d}"
        synth_queries[query_id] = SynthQuery(
            query_id, query_text(t.key, t.patent.domain, rng), t.key.mode, t.patent.domain.name,
            split_of[t.patent], doc_ids[t.anchor], doc_ids[t.hard], doc_ids[t.soft], t.key.items)
    return SynthDataset(variant, seed, docs, synth_queries)


def synthesize(out_dir: str | Path, *, queries: int = 600, distractors: int = 2000,
               variant: Variant = "structured", seed: int = 0,
               split_fractions: tuple[float, float, float] = (0.8, 0.1, 0.1)) -> SynthSummary:
    """Build a FormBench-like dataset and write it as a BEIR folder at ``out_dir``.

    Everything is built before anything is written; a folder that already holds a
    dataset raises ``FileExistsError`` (from :func:`write_beir`) and is left unchanged.
    """
    dataset = build(queries=queries, distractors=distractors, variant=variant, seed=seed,
                    split_fractions=split_fractions)
    write_dataset(out_dir, dataset)
    return dataset.summary()


def write_dataset(out_dir: str | Path, dataset: SynthDataset) -> Path:
    """Write ``dataset`` as a BEIR folder whose ``corpus.jsonl`` lines also carry
    ``"labels": {"domain": ..., "class": ...}`` (``tapt probe`` reads them) and whose
    ``queries.jsonl`` lines carry ``"labels": {"mode": ..., "domain": ...}`` (``tapt eval
    --by``), each after the BEIR fields; BEIR readers, tapt's too, ignore the field, and
    without it every line is the one :func:`write_beir` writes. Refuses a folder that
    already holds a dataset, as :func:`write_beir` does."""
    folder = write_beir(out_dir, dataset.corpus(), dataset.query_texts(), dataset.qrels())
    with (folder / "corpus.jsonl").open("w", encoding="utf-8") as handle:
        for doc_id, doc in dataset.docs.items():
            handle.write(json.dumps({"_id": doc_id, "title": doc.passage.title,
                                     "text": doc.passage.text, "labels": doc.labels},
                                    ensure_ascii=False) + "\n")
    with (folder / "queries.jsonl").open("w", encoding="utf-8") as handle:
        for query_id, query in dataset.queries.items():
            handle.write(json.dumps({"_id": query_id, "text": query.text,
                                     "labels": query.labels}, ensure_ascii=False) + "\n")
    return folder
