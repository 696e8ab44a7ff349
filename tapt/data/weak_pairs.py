"""Weak (query, passage) pairs from unlabelled passages: the corpus as training signal.

Most of every corpus is judged by no training query (SciFact: 4,600 of 5,183 abstracts;
FormBench: all but the anchors). Pairs built from the passages alone adapt the model to the
domain's text, as GPL (Wang et al., 2022) and inverse-cloze pre-training (Lee et al., 2019)
do, and are mixed into TAPT as their own dataset (``data.weak_pairs``):

- ``title``: the passage's title as the query, its text (without the title) as the
  positive. Scientific titles are short claims about the passage, much like the queries.
- ``ict``: inverse cloze: one sentence of the text as the query, the passage without it
  (title + the other sentences) as the positive; in 10 % of the pairs the sentence stays
  in (Lee et al.'s rate), so the model also learns that a passage matches its own words.

Only passages are read: no query and no qrels line of any split, so a test passage is
as unlabelled here as in GPL's use of the target corpus. That is domain adaptation on the
evaluation corpus, which docs/training.md states next to every figure that uses it. A
decontaminated training (``data.decontaminate``) promises that training never sees the
held-out splits' relevant passages: those are left out of the weak pairs too, and so are
the relevant passages of a dev split carved from train.

At FormBench's size (a million passages of ~5 KB) the pairs are a corpus again: held as
Python lists and copied into an in-memory Arrow table they would take ~10 GB.
:func:`weak_pairs_dataset` therefore streams them into Arrow files with datasets' own
writer (``Dataset.from_generator``, a batch at a time) in a scratch folder that training
removes at its end (:mod:`tapt.run_folder.scratch`), and training reads them memory-mapped.
Before writing, the pairs' size is estimated from a seeded sample of passages and checked
against the folder's free space (times the processes of this host, each building its
own), so a full disk stops the run before training, naming the folder;
nothing is read back from an earlier run (each build gets a fresh fingerprint, which also
keeps datasets from hashing the generator, and with it the whole corpus).

The sentence split is a small rule (a ``.``, ``!`` or ``?`` followed by white space and an
upper-case letter or a digit), hand-written because the dependencies have no sentence
splitter (nltk and spaCy are not among them) and the pairs need no linguistic precision.
"""

from __future__ import annotations

import itertools
import logging
import os
import random
import re
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Literal

from tapt.data.beir import Passage
from tapt.data.splits import dev_passages
from tapt.util.files import ensure_free_space

logger = logging.getLogger(__name__)

WeakKind = Literal["title", "ict"]
KEEP_SENTENCE = 0.1
"""ICT: the share of pairs whose positive keeps the query sentence (Lee et al., 2019)."""
MIN_SENTENCES = 3
"""ICT: passages with fewer sentences give no pair (the rest would be one sentence)."""
NO_PAIR = ("data.weak_pairs: no passage gives a weak pair (titles missing, or passages of "
           f"fewer than {MIN_SENTENCES} sentences for ict)")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9])")
SIZE_SAMPLE = 1000
"""Passages read to estimate the pairs' size on disk (:func:`weak_pairs_bytes`)."""
ROW_OVERHEAD = 16
"""Bytes per pair beyond its text in an Arrow file: two 32-bit string offsets (8 B) and
as much again for validity bitmaps and batch framing, so the estimate errs high."""


def sentences(text: str) -> list[str]:
    """``text`` cut after ``.``, ``!`` or ``?`` followed by white space and an upper-case
    letter or a digit (so ``e.g. the`` and ``3.5 mg`` stay whole)."""
    return [part.strip() for part in _SENTENCE_END.split(text.strip()) if part.strip()]


def title_pair(passage: Passage) -> tuple[str, str] | None:
    """(title, text), or None for a passage without both."""
    title, text = passage.title.strip(), passage.text.strip()
    if not title or not text or title == text:
        return None
    return title, text


def ict_pair(passage: Passage, rng: random.Random) -> tuple[str, str] | None:
    """(a sentence, the passage without it), or None for a passage of too few sentences."""
    parts = sentences(passage.text)
    if len(parts) < MIN_SENTENCES:
        return None
    index = rng.randrange(len(parts))
    keep = rng.random() < KEEP_SENTENCE
    rest = parts if keep else parts[:index] + parts[index + 1:]
    body = " ".join(rest)
    return parts[index], f"{passage.title.strip()} {body}".strip() if passage.title else body


def iter_weak_pairs(corpus: Mapping[str, Passage], kind: WeakKind, *,
                    count: int | None = None, seed: int = 0) -> Iterator[tuple[str, str, str]]:
    """``(passage id, query, positive)``: one pair per usable passage in corpus order, or,
    with ``count``, the first ``count`` usable passages of a seeded order of the corpus
    (fewer only when fewer passages give a pair: :func:`weak_pairs_record` says so). The
    same corpus, kind, count and seed give the same pairs; only the passage ids are held in
    memory."""
    rng = random.Random(seed)
    ids = list(corpus)
    if count is not None and count < len(ids):
        rng.shuffle(ids)  # a seeded order, walked until count passages gave a pair
    made = 0
    for doc_id in ids:
        pair = title_pair(corpus[doc_id]) if kind == "title" else ict_pair(corpus[doc_id], rng)
        if pair is None:
            continue
        yield doc_id, pair[0], pair[1]
        made += 1
        if count is not None and made == count:
            return


def weak_pairs(corpus: Mapping[str, Passage], kind: WeakKind, *, count: int | None = None,
               seed: int = 0) -> dict[str, list[str]]:
    """:func:`iter_weak_pairs` as ``{"query": [...], "positive": [...], "passage_id":
    [...]}`` in memory (to look at the pairs; training streams them, see
    :func:`weak_pairs_dataset`)."""
    pairs: dict[str, list[str]] = {"query": [], "positive": [], "passage_id": []}
    for doc_id, query, positive in iter_weak_pairs(corpus, kind, count=count, seed=seed):
        pairs["query"].append(query)
        pairs["positive"].append(positive)
        pairs["passage_id"].append(doc_id)
    return pairs


def weak_pairs_bytes(corpus: Mapping[str, Passage], kind: WeakKind, count: int | None = None,
                     seed: int = 0) -> int:
    """About the bytes the weak pairs take in Arrow files: the pairs of a seeded sample of
    :data:`SIZE_SAMPLE` passages are made, their UTF-8 size per pair is scaled to the pairs
    the corpus gives (the sample's share of passages that give one, capped by ``count``),
    plus :data:`ROW_OVERHEAD` per pair. 0 when no sampled passage gives a pair."""
    ids = list(corpus)
    if not ids:
        return 0
    rng = random.Random(seed)
    sample = rng.sample(ids, min(len(ids), SIZE_SAMPLE))
    made = [title_pair(corpus[i]) if kind == "title" else ict_pair(corpus[i], rng)
            for i in sample]
    sizes = [len(query.encode()) + len(positive.encode())
             for query, positive in (pair for pair in made if pair is not None)]
    if not sizes:
        return 0
    pairs = round(len(ids) * len(sizes) / len(sample))
    if count is not None:
        pairs = min(count, pairs)
    return round(sum(sizes) / len(sizes) * pairs) + ROW_OVERHEAD * pairs


def processes_on_this_host() -> int:
    """The training processes of this host (torchrun's ``LOCAL_WORLD_SIZE``, else 1)."""
    value = os.environ.get("LOCAL_WORLD_SIZE", "1")
    try:
        processes = int(value)
    except ValueError:
        return 1
    return max(processes, 1)


def weak_pairs_dataset(corpus: Mapping[str, Passage], kind: WeakKind, *, folder: Path,
                       count: int | None = None, seed: int = 0):
    """The pairs of :func:`iter_weak_pairs` as a ``Dataset`` of ``query`` and ``positive``,
    written to Arrow files under ``folder`` as they are made and memory-mapped from there
    (see the module docstring); ``folder`` must outlive training.

    Raises:
        ValueError: no passage gives a pair (no titles, or too few sentences for ``ict``).
        DiskSpaceError: ``folder``'s disk has no room for the pairs of every process of
            this host (:func:`weak_pairs_bytes`); nothing is written.
    """
    from datasets import Dataset, Features, Value

    ranks = processes_on_this_host()
    ensure_free_space(folder, weak_pairs_bytes(corpus, kind, count, seed) * ranks,
                      f"the weak pairs (data.weak_pairs: {kind}"
                      + (f", {ranks} processes on this host" if ranks > 1 else "") + ")",
                      advice="free some space or set TAPT_CACHE_DIR to a larger disk")
    pairs = iter_weak_pairs(corpus, kind, count=count, seed=seed)
    first = next(pairs, None)  # one pass over the corpus: the first pair, then the rest
    if first is None:
        raise ValueError(NO_PAIR)  # (datasets refuses an empty generator less clearly)

    def rows():
        for _, query, positive in itertools.chain([first], pairs):
            yield {"query": query, "positive": positive}

    return Dataset.from_generator(
        rows, features=Features({"query": Value("string"), "positive": Value("string")}),
        cache_dir=str(folder), fingerprint=uuid.uuid4().hex)  # never an earlier build


def with_weak_pairs(rows, pairs):
    """The labelled training ``rows`` (a ``Dataset`` or ``DatasetDict``) and the weak
    ``pairs`` (a ``Dataset``, or :func:`weak_pairs`' lists) as one ``DatasetDict``: the
    trainer's proportional multi-dataset sampler then draws each batch from one of them,
    in proportion to their sizes, so a weak pair never shares a batch (and its in-batch
    negatives) with a labelled row."""
    from datasets import Dataset

    if isinstance(pairs, dict):
        pairs = Dataset.from_dict({"query": pairs["query"], "positive": pairs["positive"]})
    if len(pairs) == 0:
        raise ValueError(NO_PAIR)
    return beside_labelled(rows, "weak_pairs", pairs)


def beside_labelled(rows, name: str, extra):
    """The training ``rows`` (a ``Dataset``, named ``labelled``, or a ``DatasetDict``) with
    the ``Dataset`` ``extra`` added as ``name``: one ``DatasetDict``, each batch from one of
    its datasets (sentence-transformers' proportional multi-dataset sampler)."""
    from datasets import DatasetDict

    named = dict(rows) if isinstance(rows, DatasetDict) else {"labelled": rows}
    named[name] = extra
    return DatasetDict(named)


def weak_pairs_for(dataset, kind: WeakKind, *, folder: Path, count: int | None = None,
                   seed: int = 0):
    """``(pairs, record)``: :func:`weak_pairs_dataset` of a
    :class:`~tapt.data.beir.BeirDataset`'s corpus (the one entry training uses, reading
    ``dataset.corpus`` and nothing else) less the passages a decontamination held out
    (``dataset.held_out``) and the relevant passages of a dev split carved from train (dev
    measures passages training never saw), and :func:`weak_pairs_record` of them."""
    corpus = dataset.corpus
    excluded = dataset.held_out | dev_passages(dataset,
                                               (dataset.carved or {}).get("carved_from", ""))
    if excluded:
        corpus = WithoutPassages(corpus, excluded)
    pairs = weak_pairs_dataset(corpus, kind, folder=folder, count=count, seed=seed)
    return pairs, weak_pairs_record(kind, count=count, seed=seed, made=len(pairs),
                                    passages=len(corpus), excluded=len(excluded))


def weak_pairs_record(kind: WeakKind, *, count: int | None, seed: int, made: int,
                      passages: int, excluded: int) -> dict:
    """What training mixed in (``results.json``'s ``weak_pairs``, the card): the kind, the
    pairs asked (``data.weak_pairs_max``; None: one per usable passage) and made, the seed,
    the passages they could come from and those left out. Fewer made than asked is logged
    as a warning with the reason (too few passages give a pair)."""
    record = {"kind": kind, "asked": count, "made": made, "seed": seed,
              "passages": passages, "excluded_passages": excluded}
    if count is not None and made < count:
        need = "a title" if kind == "title" else f"{MIN_SENTENCES} sentences or more"
        logger.warning("data.weak_pairs_max %d: %d %s pairs made, all the corpus gives: %d "
                       "of its %d passages%s have %s", count, made, kind, made, passages,
                       f" (less {excluded} held out or dev)" if excluded else "", need)
    return record


class WithoutPassages(Mapping):
    """A read-only view of a corpus without some passage ids (no copy: an Arrow corpus
    stays on disk)."""

    def __init__(self, corpus: Mapping[str, Passage], excluded: frozenset[str]) -> None:
        self._corpus, self._excluded = corpus, excluded

    def __getitem__(self, doc_id: str) -> Passage:
        if doc_id in self._excluded:
            raise KeyError(doc_id)
        return self._corpus[doc_id]

    def __iter__(self) -> Iterator[str]:
        return (doc_id for doc_id in self._corpus if doc_id not in self._excluded)

    def __len__(self) -> int:
        return len(self._corpus) - sum(1 for doc_id in self._excluded
                                       if doc_id in self._corpus)
