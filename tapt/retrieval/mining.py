"""Hard-negative mining from the corpus with a teacher retriever (BM25 or any encoder).

The settings follow sentence-transformers' ``util.mine_hard_negatives`` (``--skip-top`` is
its ``range_min``, ``--depth`` its ``range_max``, ``--margin`` its ``relative_margin``: a
candidate scoring above ``(1 - margin) x`` the positive's score is dropped, NV-Retriever's
positive-aware filter), so settings carry over. That function is not called because it
takes a SentenceTransformer only and encodes (query, positive) pairs itself. What tapt adds:

- any teacher: BM25 (bm25s) or any :class:`~tapt.encoders.base.Encoder` (a trained tapt
  export for re-mining, an API model), through tapt's own exact retrieval, each passage
  encoded once;
- graded qrels: a passage judged for the query (anchor, hard or soft negative) is never
  mined (anchors would be false negatives; the graded negatives are already in the rows);
  anchors are every passage the dataset's relevance rule calls relevant, whatever its grade;
- no copies of anchors: a passage whose text, as the retriever sees it (with its title
  unless ``with_title=False``), is identical to one of the query's anchors' is never mined
  either (the same passage under another id would be a false negative);
- the margin is relative to the query's *weakest* anchor, scored exactly even when it ranks
  below ``depth``. sentence-transformers compares a candidate with the positive of its own
  (query, positive) pair; here a query's negatives are shared by all its rows (one row per
  anchor, :func:`tapt.data.triplets.build_rows`), so a negative may sit beside any anchor,
  and it must score below ``(1 - margin) x`` each of them: the weakest one's score. A query
  whose weakest anchor the teacher scores low keeps fewer negatives (counted);
- ``exclude``: passages never mined for any query (e.g. the relevant passages of a split
  training is decontaminated against);
- queries left with fewer than K candidates are kept with what they have, never dropped;
- a provenance file: one JSON line per query with the negatives' ids, ranks and scores,
  the weakest anchor's score (``anchor_score``, what the margin is relative to), the
  settings and the retriever, and a digest record beside it (the data it was mined from,
  checked when the file is read for training); and a summary of what each filter removed.

:func:`tapt.data.mined.read_mined` applies the same rule to a file it reads: an anchor of
the query, or a copy of one's text, listed as a negative is refused.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

from tapt.data.arrow_corpus import corpus_texts as passage_texts
from tapt.data.beir import BeirDataset
from tapt.data.mined import anchor_texts
from tapt.retrieval.evaluate import Retriever, split_queries
from tapt.retrieval.metrics import trec_ranking
from tapt.util.bounds import MARGIN, SEED, SKIP_TOP, TOP_K, check_optional
from tapt.util.digests import remove_sidecar, write_sidecar
from tapt.util.files import atomic_write_json

# rich is imported by the table printer only.


@dataclass(frozen=True)
class MiningSettings:
    """How candidates are chosen (see the module docstring)."""

    per_query: int = 3
    depth: int = 100
    skip_top: int = 0
    margin: float | None = 0.05
    sampling: Literal["random", "top"] = "random"
    seed: int = 0

    def check(self) -> None:
        """``ValueError`` naming the first setting out of its range."""
        TOP_K.check(self.per_query, "per_query")
        TOP_K.check(self.depth, "depth")
        SKIP_TOP.check(self.skip_top, "skip_top")
        SEED.check(self.seed, "seed")
        if self.skip_top >= self.depth:
            raise ValueError(f"skip_top ({self.skip_top}) must be below depth ({self.depth})")
        check_optional(MARGIN, self.margin, "margin")


@dataclass
class MiningSummary:
    """How many candidates each filter removed, over all queries."""

    queries: int = 0
    considered: int = 0
    anchors: int = 0
    judged: int = 0
    duplicates: int = 0
    """Candidates whose text is identical to one of the query's anchors' (another id)."""
    excluded: int = 0
    """Candidates in ``exclude`` (never mined for any query)."""
    skipped_top: int = 0
    above_margin: int = 0
    kept: int = 0
    mined: int = 0
    short_queries: int = 0
    """Queries that got fewer than ``per_query`` negatives (kept with what they have)."""
    no_negative: list[str] = field(default_factory=list)


def threshold(anchor_score: float, margin: float) -> float:
    """The highest score a candidate may have: ``(1 - margin)`` of the anchor's score
    (for a negative anchor score, ``margin`` of its magnitude below it)."""
    return anchor_score - margin * abs(anchor_score)


def mine(retriever: Retriever, dataset: BeirDataset, split: str, settings: MiningSettings, *,
         with_title: bool = True, exclude: frozenset[str] = frozenset()
         ) -> tuple[list[dict], MiningSummary]:
    """Mine negatives for every query of ``split``; returns the records and a summary.
    ``exclude``: passages never mined for any query (e.g. those relevant to a split
    training is decontaminated against)."""
    settings.check()
    exclude = frozenset(exclude)
    corpus_ids = list(dataset.corpus)
    texts = passage_texts(dataset.corpus, corpus_ids, with_title)  # lazy for Arrow
    query_ids, query_texts = split_queries(dataset, split)
    qrels = dataset.split(split)
    anchors = {q: dataset.rule.relevant_ids(qrels[q]) for q in query_ids}  # relevance rule
    retriever.top_k = settings.depth  # anchors below it are scored through also_score
    retrieval = retriever.retrieve(corpus_ids, texts, query_ids, query_texts,
                                   also_score=anchors)
    summary = MiningSummary(queries=len(query_ids))
    if retrieval.run is None:  # a rank other than 0 under a process group: rank 0 mines
        return [], summary
    records = []
    for query_id in sorted(query_ids):
        scores = retrieval.run.get(query_id, {})
        records.append(mine_query(query_id, scores, qrels[query_id], anchors[query_id],
                                  settings, summary,
                                  is_copy=copy_test(dataset, anchors[query_id], with_title),
                                  exclude=exclude))
    return records, summary


def copy_test(dataset: BeirDataset, anchors: Sequence[str], with_title: bool
              ) -> Callable[[str], bool]:
    """Whether a passage's text (as encoded: with its title unless ``with_title`` is
    False) is identical to one of ``anchors``' texts."""
    texts = anchor_texts(dataset.corpus, anchors, with_title)
    return lambda doc_id: dataset.corpus[doc_id].as_text(with_title) in texts


def mine_query(query_id: str, scores: dict[str, float], judged: dict[str, int],
               anchors: Sequence[str], settings: MiningSettings,
               summary: MiningSummary, *, is_copy: Callable[[str], bool] | None = None,
               exclude: frozenset[str] = frozenset()) -> dict:
    """Filter one query's ranking and sample its negatives (updates ``summary``).
    Removed, each counted under the first reason that applies: the query's anchors, its
    other judged passages, copies of an anchor's text (``is_copy``), ``exclude``, the
    ``skip_top`` first ranks, and candidates above the margin of the weakest anchor."""
    ranking = trec_ranking(scores)
    weakest = min((scores[a] for a in anchors if a in scores), default=None)
    limit = (threshold(weakest, settings.margin)
             if settings.margin is not None and weakest is not None else None)
    candidates = []
    for rank, (doc_id, score) in enumerate(ranking[:settings.depth], start=1):
        summary.considered += 1
        if doc_id in anchors:
            summary.anchors += 1
        elif doc_id in judged:
            summary.judged += 1
        elif is_copy is not None and is_copy(doc_id):
            summary.duplicates += 1
        elif doc_id in exclude:
            summary.excluded += 1
        elif rank <= settings.skip_top:
            summary.skipped_top += 1
        elif limit is not None and score > limit:
            summary.above_margin += 1
        else:
            candidates.append({"id": doc_id, "rank": rank, "score": round(score, 6)})
    summary.kept += len(candidates)
    if settings.sampling == "top":
        chosen = candidates[:settings.per_query]
    else:
        rng = random.Random(f"{settings.seed}:{query_id}")  # independent of query order
        chosen = sorted(rng.sample(candidates, min(settings.per_query, len(candidates))),
                        key=lambda c: c["rank"])
    summary.mined += len(chosen)
    if len(chosen) < settings.per_query:
        summary.short_queries += 1
        if not chosen:
            summary.no_negative.append(query_id)
    return {"query_id": query_id, "negatives": chosen, "candidates": len(candidates),
            "anchor_score": None if weakest is None else round(weakest, 6)}


def write_mined(path: str | Path, records: list[dict], *, retriever: str,
                settings: MiningSettings, data: str, split: str,
                made_from: dict | None = None) -> None:
    """One JSON line per query, each with the settings and retriever (provenance); written
    to a temporary name and renamed, so a crash never leaves half a file; then its digest
    record beside it (``NAME.digest.json``: the file's digest and ``made_from``,
    :func:`tapt.data.content.made_from` of the data mined), which
    :func:`tapt.data.mined.read_mined` checks. The exact values of known secrets are
    redacted; ids that look like tokens are kept."""
    provenance = {"retriever": retriever, "data": data, "split": split,
                  "settings": asdict(settings)}
    remove_sidecar(path)  # an older record never describes the new file
    written = atomic_write_json(path, [{**record, **provenance} for record in records],
                                lines=True)
    try:
        write_sidecar(written, kind="mined negatives", retriever=retriever,
                      **(made_from or {"split": split}))
    except OSError:
        written.unlink(missing_ok=True)  # no file without its record
        raise


def summary_table(summary: MiningSummary, settings: MiningSettings, title: str):
    from rich.table import Table

    table = Table(title=title)
    table.add_column("step")
    table.add_column("candidates", justify="right")
    for label, value in (
            (f"ranked (top {settings.depth} per query, {summary.queries:,} queries)",
             summary.considered),
            ("removed: anchors of the query", summary.anchors),
            ("removed: other passages judged for the query", summary.judged),
            ("removed: copies of an anchor's text (under another id)", summary.duplicates),
            ("removed: excluded passages (never mined for any query)", summary.excluded),
            (f"removed: ranks 1-{settings.skip_top} (--skip-top)" if settings.skip_top
             else "skip-top: off", summary.skipped_top),
            (f"removed: above {1 - (settings.margin or 0):.0%} of the weakest anchor's score "
             "(--margin)" if settings.margin is not None else "margin filter: off",
             summary.above_margin),
            ("left", summary.kept),
            (f"mined ({settings.sampling}, {settings.per_query} per query)", summary.mined),
            (f"queries with fewer than {settings.per_query} (kept)", summary.short_queries),
            ("queries with none", len(summary.no_negative))):
        table.add_row(label, f"{value:,}")
    return table
