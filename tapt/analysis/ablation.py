"""The corpus-size ablation (FormBench §5.5, Figure 3): metrics as distractors are added.

At each distractor fraction the corpus is every passage judged in the split plus that
fraction of the unjudged passages, sampled with ``seed`` by
:func:`tapt.data.subcorpus.subcorpus_ids` (so a fraction here is exactly ``tapt eval
--fraction F --seed S``). A dense model encodes its queries once and the union of all
fractions' passages once; each fraction then fills its own exact index from those rows,
searches it (:func:`tapt.retrieval.dense.rank`) and is scored by
:func:`tapt.retrieval.metrics.score_run`. With ``cache_dir`` the union's passages go through
the embedding cache as ``tapt eval``'s do (a later ablation or eval of the model hits).
BM25's statistics depend on the corpus, so ``bm25`` is re-indexed per fraction through
:func:`tapt.retrieval.evaluate.evaluate`.

Example::

    result = corpus_size_ablation([encoder, BM25Retriever()], dataset, "test")
    result.models[encoder.name][0]["binary_ndcg@10"]   # at the smallest fraction
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from tapt.analysis import plots
from tapt.analysis.embed import embed, materialized
from tapt.data.arrow_corpus import corpus_texts as passage_texts
from tapt.data.beir import BeirDataset
from tapt.data.subcorpus import subcorpus_ids
from tapt.encoders.base import Encoder
from tapt.retrieval.dense import EncodingTally, rank
from tapt.retrieval.evaluate import evaluate, split_queries
from tapt.retrieval.metrics import METRIC_KEYS, score_run
from tapt.retrieval.search import ExactIndex
from tapt.util.bounds import FRACTION, POSITIVE_INT, SEED

# rich is imported by the table printer only (importing tapt.analysis stays light).

DEFAULT_FRACTIONS = (0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0)
PRIMARY = "binary_ndcg@10"


@dataclass
class AblationResult:
    """Per model, one record per fraction: ``fraction``, ``corpus_size``, the four metrics
    and ``search_ms_per_query``."""

    data: str
    split: str
    seed: int
    fractions: list[float]
    models: dict[str, list[dict]] = field(default_factory=dict)
    encoding: dict[str, dict[str, float]] = field(default_factory=dict)
    """Per dense model: passages embedded (once), the seconds it took and
    ``corpus_from_cache``: how many of them came from the embedding cache."""

    def drops(self, metric: str = PRIMARY) -> dict[str, list[float]]:
        """Per model, the percentage drop of ``metric`` from the smallest fraction."""
        out = {}
        for name, records in self.models.items():
            first = records[0][metric]
            out[name] = [100.0 * (first - r[metric]) / first if first else float("nan")
                         for r in records]
        return out

    def to_dict(self) -> dict:
        return {"data": self.data, "split": self.split, "seed": self.seed,
                "fractions": self.fractions, "models": self.models,
                "drop_pct_from_smallest": {m: self.drops(m) for m in METRIC_KEYS},
                "encoding": self.encoding}


def fraction_corpora(dataset: BeirDataset, split: str, fractions: Sequence[float],
                     seed: int) -> dict[float, list[str]]:
    """Corpus ids per fraction (sorted by fraction), each holding every judged passage."""
    if not fractions:
        raise ValueError("give at least one fraction")
    fractions = [FRACTION.check(fraction, "fractions") for fraction in fractions]
    return {f: subcorpus_ids(dataset, split, fraction=f, seed=seed)
            for f in sorted(set(fractions))}


def _record(fraction: float, ids: Sequence[str], metrics: Mapping[str, float],
            search_seconds: float, queries: int) -> dict:
    return {"fraction": fraction, "corpus_size": len(ids),
            **{k: float(metrics[k]) for k in METRIC_KEYS},
            "search_ms_per_query": 1000 * search_seconds / max(queries, 1)}


def ablate_encoder(encoder: Encoder, dataset: BeirDataset, split: str,
                   corpora: Mapping[float, Sequence[str]], *, batch_size: int = 32,
                   top_k: int = 100, with_title: bool = True, cache_dir: str | None = None
                   ) -> tuple[list[dict], dict[str, float]]:
    """Encode once (through the cache in ``cache_dir``, if given), search a sub-index per
    fraction; returns the records and the encoding figures."""
    query_ids, query_texts = split_queries(dataset, split)
    needed = set().union(*map(set, corpora.values()))
    union = [doc_id for doc_id in dataset.corpus if doc_id in needed]
    queries = embed(encoder, query_texts, "query", ids=query_ids, batch_size=batch_size)
    start = time.perf_counter()
    tally = EncodingTally()
    passages = embed(encoder, passage_texts(dataset.corpus, union, with_title),
                     "document", ids=union, batch_size=batch_size, cache_dir=cache_dir,
                     tally=tally)
    seconds = time.perf_counter() - start
    row_of = {doc_id: row for row, doc_id in enumerate(union)}
    qrels = dataset.split(split)
    records = []
    for fraction, ids in corpora.items():
        index = ExactIndex(encoder.embedding_dim, normalize=encoder.normalize)
        index.add(passages[np.fromiter((row_of[d] for d in ids), dtype=np.int64,
                                       count=len(ids))])
        run, search_seconds = rank(index, list(ids), query_ids, queries, top_k)
        records.append(_record(fraction, ids, score_run(qrels, run).mean, search_seconds,
                               len(query_ids)))
    return records, {"passages_encoded": float(len(union)), "corpus_encode_s": seconds,
                     "corpus_from_cache": float(tally.from_cache)}


def ablate_retriever(retriever, dataset: BeirDataset, split: str,
                     corpora: Mapping[float, Sequence[str]], *, with_title: bool = True
                     ) -> list[dict]:
    """Any retriever (BM25), evaluated from scratch on each fraction's corpus."""
    records = []
    for fraction, ids in corpora.items():
        report = evaluate(retriever, dataset, split, corpus_ids=ids, with_title=with_title)
        if report is None:  # a rank other than 0 under a process group (BM25: rank 0 only)
            continue
        queries = report.info["num_queries"]
        records.append(_record(fraction, ids, report.metrics,
                               report.timings.get("search_s", float("nan")), queries))
    return records


def corpus_size_ablation(models: Sequence, dataset: BeirDataset, split: str, *,
                         fractions: Sequence[float] = DEFAULT_FRACTIONS, seed: int = 0,
                         batch_size: int = 32, top_k: int = 100, with_title: bool = True,
                         names: Sequence[str] | None = None, on_model=None,
                         cache_dir: str | None = None) -> AblationResult:
    """Evaluate each of ``models`` (an :class:`~tapt.encoders.base.Encoder`, a retriever
    such as :class:`~tapt.retrieval.bm25.BM25Retriever`, or a zero-argument loader of
    either, called when its turn comes) at every fraction.

    ``names`` label the models (default: their ``name``; required with loaders);
    ``on_model(name)`` is called before each model starts (progress messages);
    ``cache_dir``: the embedding cache of the encoders' passages (None: off).
    """
    POSITIVE_INT.check(batch_size, "batch_size")
    POSITIVE_INT.check(top_k, "top_k")
    SEED.check(seed, "seed")
    corpora = fraction_corpora(dataset, split, fractions, seed)
    result = AblationResult(data=dataset.source, split=split, seed=seed,
                            fractions=list(corpora))
    names = list(names) if names is not None else [m.name for m in models]
    if len(set(names)) != len(names):
        raise ValueError(f"model names must differ, got {names}")
    for name, model in zip(names, models, strict=True):
        if on_model is not None:
            on_model(name)
        with materialized(model) as model:  # a loaded encoder is closed after its turn
            if isinstance(model, Encoder):
                records, encoding = ablate_encoder(model, dataset, split, corpora,
                                                   batch_size=batch_size, top_k=top_k,
                                                   with_title=with_title, cache_dir=cache_dir)
                result.encoding[name] = encoding
            else:
                records = ablate_retriever(model, dataset, split, corpora,
                                           with_title=with_title)
        result.models[name] = records
    return result


def ablation_table(result: AblationResult, metric: str = PRIMARY):
    """A rich table: model, fraction, corpus size, the four metrics and the drop of
    ``metric`` from the smallest fraction."""
    from rich.table import Table

    table = Table(title=f"Corpus-size ablation ({result.split}, seed {result.seed})")
    for column in ("model", "fraction", "passages", *METRIC_KEYS, f"{metric} drop"):
        table.add_column(column, justify="left" if column == "model" else "right")
    drops = result.drops(metric)
    for name, records in result.models.items():
        for index, record in enumerate(records):
            table.add_row(name if index == 0 else "", f"{record['fraction']:g}",
                          f"{record['corpus_size']:,}",
                          *(f"{record[k]:.4f}" for k in METRIC_KEYS),
                          "-" if index == 0 else f"{drops[name][index]:.1f}%",
                          end_section=index == len(records) - 1)
    return table


def ablation_figure(result: AblationResult, metric: str = PRIMARY):
    series = {name: [(r["corpus_size"], r[metric]) for r in records]
              for name, records in result.models.items()}
    return plots.ablation(series, metric,
                          title=f"Corpus-size ablation ({result.split}, seed {result.seed})")
