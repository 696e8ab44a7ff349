"""Which evaluation queries a training split has already seen the answer to, and the means to
keep training away from them.

A query of an evaluation split is **seen** when one of its relevant passages is also a
relevant passage (a positive) of some query of the training split, and **novel** otherwise.
A model can score well on seen queries by memorising the passages it trained on, without
retrieving new documents any better; FormBench splits by patent, and users retrieve
documents that arrive after training, so the figure that counts is the one on novel
queries (BEIR SciFact: 196 of its 300 test claims are seen, 104 novel).

Three tools:

- :func:`split_overlap` counts seen and novel queries of a split (an evaluation result
  records them with every metric on each part under ``train_overlap``:
  :func:`tapt.retrieval.by_group.overlap_section`);
- :func:`relevance_groups` joins the queries of a split that share a relevant passage
  (union-find over query-passage edges): the unit a dev carve must take whole so that dev
  measures unseen passages (:func:`tapt.data.splits.carve_dev`);
- :func:`decontaminate` drops from the training split every judgment of a passage that is
  relevant in another split (e.g. test), and the training queries left without a relevant
  passage.

The relevance rule is the dataset's (:mod:`tapt.data.relevance`): under FormBench's, a
positive is an anchor (grade 3); a hard negative of a training query that is relevant to a
test query is not a positive, but :func:`decontaminate` drops it too (training on a
passage as a negative still trains on its text).

Example::

    from tapt.data.sources import load_data
    from tapt.data.overlap import decontaminate, split_overlap

    data = load_data("../shared/data/scifact", splits=["train", "test"])
    split_overlap(data, "test").counts()                  # {'seen': 196, 'novel': 104}
    clean = decontaminate(data, ["test"])
    clean.decontaminated["train_queries"]                 # [809, 550]
    split_overlap(clean, "test").counts()                 # {'seen': 0, 'novel': 300}
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from tapt.data.beir import BeirDataset, DataError, Qrels
from tapt.data.relevance import RelevanceRule

logger = logging.getLogger(__name__)

SEEN, NOVEL = "seen", "novel"
"""The two parts of an evaluation split."""
TRAIN_OVERLAP = "train_overlap"
"""The key of an evaluation result's seen/novel section."""


def positives(qrels: Qrels, rule: RelevanceRule) -> set[str]:
    """Every passage relevant to some query of ``qrels`` under ``rule``."""
    return {doc for docs in qrels.values() for doc, grade in docs.items()
            if rule.is_relevant(grade)}


@dataclass(frozen=True)
class SplitOverlap:
    """The seen and novel queries of ``split`` against the positives of ``train_split``
    (after the decontamination named in ``decontaminated``, when there was one)."""

    split: str
    train_split: str
    seen: frozenset[str]
    novel: frozenset[str]
    decontaminated: tuple[str, ...] = ()

    def counts(self) -> dict[str, int]:
        return {SEEN: len(self.seen), NOVEL: len(self.novel)}

    def labels(self) -> dict[str, str]:
        """``{query id: "seen" | "novel"}``."""
        return {**{q: SEEN for q in self.seen}, **{q: NOVEL for q in self.novel}}


def split_overlap(dataset: BeirDataset, split: str, train_split: str = "train",
                  train_qrels: Qrels | None = None) -> SplitOverlap:
    """Seen and novel queries of ``split``. Only queries with a relevant passage are
    counted (one without scores nothing and is neither). ``train_qrels``: the training
    judgments to compare with (default: the dataset's ``train_split``)."""
    train = dataset.split(train_split) if train_qrels is None else train_qrels
    trained = positives(train, dataset.rule)
    seen, novel = set(), set()
    for query_id, docs in dataset.split(split).items():
        relevant = [doc for doc, grade in docs.items() if dataset.rule.is_relevant(grade)]
        if relevant:
            (seen if any(doc in trained for doc in relevant) else novel).add(query_id)
    against = tuple((dataset.decontaminated or {}).get("against", ()))
    return SplitOverlap(split, train_split, frozenset(seen), frozenset(novel), against)


def relevance_groups(qrels: Qrels, rule: RelevanceRule,
                     queries: Iterable[str] | None = None) -> list[list[str]]:
    """The queries of ``qrels`` (or just ``queries``) joined into groups that share a
    relevant passage, directly or through other queries: the connected components of the
    query-passage graph of relevant judgments, by union-find. Each group's ids are sorted,
    and the groups are sorted by their first id; a query without a relevant passage is a
    group of its own.

    Hand-written: a union-find of a few lines; networkx would be a new dependency for one
    call."""
    chosen = list(qrels) if queries is None else list(queries)
    parent: dict[str, str] = {q: q for q in chosen}

    def root(node: str) -> str:
        while parent[node] != node:
            parent[node] = parent[parent[node]]  # path halving
            node = parent[node]
        return node

    first_query: dict[str, str] = {}
    for query_id in chosen:
        for doc, grade in qrels[query_id].items():
            if not rule.is_relevant(grade):
                continue
            other = first_query.setdefault(doc, query_id)
            a, b = root(query_id), root(other)
            if a != b:
                parent[max(a, b)] = min(a, b)
    members: dict[str, list[str]] = {}
    for query_id in chosen:
        members.setdefault(root(query_id), []).append(query_id)
    return sorted((sorted(group) for group in members.values()), key=lambda g: g[0])


def held_out_digest(passage_ids: Iterable[str]) -> str:
    """BLAKE2b of the sorted held-out passage ids, one per line: which passages a
    decontamination kept out of training, checkably (files made from it record it)."""
    text = "".join(f"{doc}\n" for doc in sorted(passage_ids))
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


def decontamination_of(dataset: BeirDataset, split: str) -> dict | None:
    """What a file made from ``split`` records of its decontamination (``against`` and the
    held-out passages' digest), or None when ``split`` was not decontaminated."""
    record = dataset.decontaminated
    if not record or record.get("train_split") != split:
        return None
    return {"against": sorted(record["against"]), "held_out_digest": record["held_out_digest"]}


def decontaminate(dataset: BeirDataset, against: Sequence[str], *,
                  train_split: str = "train", keep: Iterable[str] | None = None
                  ) -> BeirDataset:
    """A copy of ``dataset`` whose ``train_split`` has no judgment of a passage relevant to
    a query of the ``against`` splits, and no query left without a relevant passage; its
    ``decontaminated`` holds the record (``against``, ``train_queries`` and ``judgments``
    as [before, after], ``passages``: how many passages were held out) and ``held_out`` the
    held-out passage ids (mining never takes them). The ``against`` splits must be loaded;
    those not in ``keep`` (default: all of them) are then dropped from the copy's qrels.

    Raises :class:`~tapt.data.beir.DataError` naming the train file when nothing would be
    left to train on."""
    against = list(against)
    if not against:
        return dataset
    if train_split in against:
        raise DataError(dataset.split_file(train_split),
                        "cannot decontaminate the train split against itself")
    if dataset.decontaminated:
        raise DataError(dataset.split_file(train_split),
                        f"already decontaminated against {dataset.decontaminated['against']}")
    missing = [split for split in against if split not in dataset.qrels]
    if missing:
        raise DataError(dataset.source or "dataset",
                        f"decontaminate: split(s) {missing} not loaded (available: "
                        f"{sorted(dataset.qrels)})")
    held_out: set[str] = set()
    for split in against:
        held_out |= positives(dataset.split(split), dataset.rule)
    train = dataset.split(train_split)
    kept: Qrels = {}
    for query_id, docs in train.items():
        left = {doc: grade for doc, grade in docs.items() if doc not in held_out}
        had = any(dataset.rule.is_relevant(grade) for grade in docs.values())
        if left and (not had or any(dataset.rule.is_relevant(g) for g in left.values())):
            kept[query_id] = left  # a query that never had a relevant passage is kept
    if not kept:
        raise DataError(dataset.split_file(train_split),
                        f"decontaminating against {against} leaves no train query with a "
                        "relevant passage")
    record = {"against": against, "train_split": train_split,
              "train_queries": [len(train), len(kept)],
              "judgments": [sum(map(len, train.values())), sum(map(len, kept.values()))],
              "passages": len(held_out), "held_out_digest": held_out_digest(held_out)}
    keep = set(against if keep is None else keep)
    qrels = {split: docs for split, docs in dataset.qrels.items()
             if split not in against or split in keep}
    qrels[train_split] = kept
    logger.debug("decontaminated %s against %s: %d -> %d queries, %d -> %d judgments "
                "(%d passages held out)", train_split, ", ".join(against),
                *record["train_queries"], *record["judgments"], len(held_out))
    return replace(dataset, qrels=qrels, decontaminated=record, held_out=frozenset(held_out))


__all__ = ["NOVEL", "SEEN", "TRAIN_OVERLAP", "SplitOverlap", "decontaminate", "decontamination_of",
           "held_out_digest", "positives",
           "relevance_groups", "split_overlap"]
