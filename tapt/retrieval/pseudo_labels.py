"""Pseudo-queries labelled by a teacher: the training rows of ``tapt pseudo``.

Each pseudo-query (:mod:`tapt.data.pseudo_queries`) is run against the whole corpus by a
teacher retriever: BM25 (SPAR's teacher), any encoder, or an encoder fused with BM25 (the
untrained hybrid, either fusion). Its labels come from the teacher's ranking alone:

- positives: the teacher's top ``positives`` ranks (the first is the row's positive);
- hard negatives: ``negatives`` passages drawn (seeded per query) from the rank window
  ``negative_ranks`` (SPAR takes them from the bottom of BM25's top 50), kept in rank order;
- the teacher's score of every listed passage, for ``margin_mse`` / ``distill_kl``.

``source: drop`` takes the passage a query was sampled from out of its ranking (the query
is then labelled with *other* passages the teacher finds for it; by default the source
stays, and a sentence's own passage is usually its teacher's first rank). A query the
teacher ranks nothing for (BM25: no query word in the corpus) is dropped and counted; one
with fewer negatives than asked is kept with what it has (counted).

Queries are labelled ``chunk`` at a time, so memory holds one chunk's rankings (``chunk x
depth`` scores) and the corpus index, never all rankings: the rows are written as they are
made (:func:`tapt.util.files.atomic_write_lines`). BM25 indexes the corpus once for all
chunks; a model teacher reads its passage embeddings back from the embedding cache after
the first chunk.

The file is JSONL, one row per query::

    {"query_id": "pseudo-1", "query": "...", "source": "4983",
     "positives": [{"id": "4983", "rank": 1, "score": 31.2}],
     "negatives": [{"id": "1021", "rank": 33, "score": 12.9}, ...], "teacher": "bm25"}

with a digest record beside it (``NAME.digest.json``: the file's digest, the corpus's
digest, the teacher and every setting), which :mod:`tapt.data.pseudo_rows` checks before a
training reads it.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from itertools import islice
from pathlib import Path
from typing import Literal

from tapt.data.arrow_corpus import corpus_texts as passage_texts
from tapt.data.beir import BeirDataset
from tapt.data.content import corpus_digest
from tapt.data.pseudo_queries import PseudoQuery
from tapt.retrieval.metrics import trec_ranking
from tapt.util.bounds import SEED, TOP_K
from tapt.util.digests import remove_sidecar, write_sidecar
from tapt.util.files import atomic_write_lines

KIND = "pseudo queries"
"""The digest record's ``kind``."""


@dataclass(frozen=True)
class LabelSettings:
    """How a teacher's ranking becomes a row (module docstring)."""

    depth: int = 50
    positives: int = 1
    negative_ranks: tuple[int, int] = (30, 50)
    negatives: int = 3
    source: Literal["keep", "drop"] = "keep"
    seed: int = 0

    def check(self) -> None:
        """``ValueError`` naming the first setting out of its range."""
        TOP_K.check(self.depth, "depth")
        TOP_K.check(self.positives, "positives")
        SEED.check(self.seed, "seed")
        low, high = self.negative_ranks
        if self.negatives < 0:
            raise ValueError(f"negatives must be at least 0, got {self.negatives}")
        if self.positives > self.depth:
            raise ValueError(f"positives ({self.positives}) must be at most depth "
                             f"({self.depth})")
        if self.negatives and not self.positives < low <= high <= self.depth:
            raise ValueError(f"negative ranks {low}-{high} must lie below the positives "
                             f"(ranks 1-{self.positives}) and within depth {self.depth}")
        if self.source not in ("keep", "drop"):
            raise ValueError(f"source must be keep or drop, got {self.source!r}")


@dataclass
class LabelCounts:
    """What labelling made and dropped."""

    queries: int = 0
    rows: int = 0
    no_positive: int = 0
    """Queries the teacher ranked nothing for (dropped)."""
    source_first: int = 0
    """Rows whose first positive is the passage the query came from."""
    short_negatives: int = 0
    """Rows with fewer negatives than asked (kept)."""
    no_negative: int = 0


def label_query(query: PseudoQuery, scores: dict[str, float], settings: LabelSettings,
                counts: LabelCounts) -> dict | None:
    """One query's row from the teacher's ``scores`` (its top passages), or None when no
    passage is left to be its positive; ``counts`` updated."""
    counts.queries += 1
    ranking = [(doc_id, score) for doc_id, score in trec_ranking(scores)
               if not (settings.source == "drop" and doc_id == query.source)]
    ranking = ranking[:settings.depth]
    if not ranking:
        counts.no_positive += 1
        return None

    def entry(position: int) -> dict:
        doc_id, score = ranking[position]
        return {"id": doc_id, "rank": position + 1, "score": round(float(score), 6)}

    positives = [entry(i) for i in range(min(settings.positives, len(ranking)))]
    low, high = settings.negative_ranks
    window = list(range(low - 1, min(high, len(ranking))))
    rng = random.Random(f"{settings.seed}:{query.query_id}")  # independent of chunking
    chosen = sorted(rng.sample(window, min(settings.negatives, len(window))))
    negatives = [entry(i) for i in chosen]
    counts.rows += 1
    counts.source_first += positives[0]["id"] == query.source
    if len(negatives) < settings.negatives:
        counts.short_negatives += 1
        counts.no_negative += not negatives
    return {"query_id": query.query_id, "query": query.text, "source": query.source,
            "positives": positives, "negatives": negatives}


def label_pseudo_queries(retriever, dataset: BeirDataset, queries: Iterable[PseudoQuery],
                         settings: LabelSettings, counts: LabelCounts, *,
                         with_title: bool = True, chunk: int = 100_000,
                         done: Callable[[int], None] | None = None) -> Iterator[dict]:
    """The rows of ``queries`` as ``retriever`` ranks ``dataset``'s whole corpus for them,
    ``chunk`` queries at a time (module docstring); ``done(n)`` is told of every chunk's
    ``n`` queries (a progress bar). Rows carry the retriever's name as ``teacher``."""
    settings.check()
    corpus_ids = list(dataset.corpus)
    texts = passage_texts(dataset.corpus, corpus_ids, with_title)  # lazy for Arrow
    retriever.top_k = min(settings.depth + (settings.source == "drop"), len(corpus_ids))
    stream = iter(queries)
    while batch := list(islice(stream, chunk)):
        retrieval = retriever.retrieve(corpus_ids, texts, [q.query_id for q in batch],
                                       [q.text for q in batch])
        run = retrieval.run or {}
        for query in batch:
            row = label_query(query, run.get(query.query_id, {}), settings, counts)
            if row is not None:
                yield {**row, "teacher": retriever.name}
        if done is not None:
            done(len(batch))


def write_pseudo_queries(path: str | Path, rows: Iterable[dict], *, dataset: BeirDataset,
                         teacher: str, settings: LabelSettings, sampling: dict) -> int:
    """Stream ``rows`` to ``path`` (atomic), then its digest record: the corpus digest and
    source, the teacher, the labelling and sampling settings. Returns the rows written."""
    remove_sidecar(path)  # an older record never describes the new file
    written = atomic_write_lines(path, rows)
    try:
        write_sidecar(path, kind=KIND, teacher=teacher, corpus=corpus_digest(dataset),
                      source=dataset.source, labels=asdict(settings), sampling=sampling,
                      rows=written)
    except OSError:
        Path(path).unlink(missing_ok=True)  # no file without its record
        raise
    return written


def summary_table(sampled, counts: LabelCounts, settings: LabelSettings, teacher: str):
    """A rich table of what sampling and labelling made and dropped."""
    from rich.table import Table

    table = Table(title=f"pseudo-queries labelled by {teacher}")
    table.add_column("step")
    table.add_column("count", justify="right")
    low, high = settings.negative_ranks
    for label, value in (
            ("passages walked", sampled.passages),
            ("passages without a usable span (skipped)", sampled.no_span),
            ("pseudo-queries sampled", sampled.queries),
            ("dropped: the teacher ranked no passage", counts.no_positive),
            ("rows written", counts.rows),
            ("rows whose positive is the query's own passage", counts.source_first),
            ((f"rows with fewer than {settings.negatives} negatives from ranks {low}-{high} "
              "(kept)"), counts.short_negatives),
            ("rows with no negative (kept as pairs)", counts.no_negative)):
        table.add_row(label, f"{value:,}")
    return table
