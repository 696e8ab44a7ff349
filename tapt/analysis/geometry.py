"""Embedding geometry (FormBench §6.1, Figure 4): how far apart a model puts the tiers.

For the queries of a split, cosine similarities (on L2-normalised embeddings, whatever the
model's scoring) to four tiers of passages:

- ``anchor`` (qrels grade 3), ``hard_negative`` (grade 2), ``soft_negative`` (grade 1):
  every judged (query, passage) pair of that grade;
- ``random``: up to ``random_per_query`` distractors per query, sampled with ``seed`` from
  the unjudged passages of the evaluation corpus.

The figures:

- ``delta`` = mean cos(q, anchor) - mean cos(q, hard negative), each mean over all judged
  pairs of its tier (the paper's Delta: 0.096 for OpenAI-3-large, 0.177-0.206 for TAPT);
- ``anchor_rank1_rate``: share of the queries with an anchor whose top-1 passage, by
  exact search (:class:`~tapt.retrieval.search.ExactIndex`, the model's own scoring) over
  the evaluation corpus (every judged passage of the split plus the sampled distractors),
  is an anchor; ties are broken as trec_eval breaks them;
- ``anchor_above_hard_rate``: share of (anchor, hard negative) pairs of a query where the
  anchor is the more similar;
- ``band``: the 5th and 95th percentiles of all four tiers' similarities pooled, and
  ``width`` = p95 - p5: a narrow band with a small Delta is the "geometric collapse" the
  paper sees in API models;
- ``anisotropy``: the mean cosine of random pairs of distinct passages of the evaluation
  corpus (``pairs`` pairs, seeded; every pair when there are fewer). Near 0 the
  embeddings fill the space; near 1 they crowd into a narrow cone.

Example::

    geometry = analyze_geometry(encoder, dataset, "test", distractors=1000)
    geometry.delta, geometry.anchor_rank1_rate, geometry.anisotropy
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from tapt.analysis import plots
from tapt.analysis.embed import embed, unit_rows
from tapt.data.arrow_corpus import corpus_texts as passage_texts
from tapt.data.beir import ANCHOR, HARD_NEGATIVE, SOFT_NEGATIVE, BeirDataset, Qrels
from tapt.data.subcorpus import subcorpus_ids
from tapt.encoders.base import Encoder
from tapt.retrieval.dense import EncodingTally, rank
from tapt.retrieval.evaluate import split_queries
from tapt.retrieval.metrics import trec_ranking
from tapt.retrieval.search import ExactIndex
from tapt.util.bounds import POSITIVE_INT, SEED

# rich is imported by the table printer only (importing tapt.analysis stays light).

TIERS = ("anchor", "hard_negative", "soft_negative", "random")
GRADE_OF_TIER = {"anchor": ANCHOR, "hard_negative": HARD_NEGATIVE, "soft_negative": SOFT_NEGATIVE}


@dataclass
class Geometry:
    model: str
    delta: float
    anchor_rank1_rate: float
    anchor_above_hard_rate: float
    anisotropy: float
    tier_means: dict[str, float]
    tier_stats: dict[str, dict[str, float]]
    band: dict[str, float]
    num_queries: int
    corpus_size: int
    pairs: int
    info: dict = field(default_factory=dict)
    similarities: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict:
        data = asdict(self)
        data.pop("similarities")
        return data


def tier_similarities(query_ids: Sequence[str], queries: np.ndarray,
                      passage_ids: Sequence[str], passages: np.ndarray, qrels: Qrels, *,
                      random_per_query: int = 100, seed: int = 0
                      ) -> tuple[dict[str, np.ndarray], list[tuple[float, float]]]:
    """Cosines per tier, and per query every (anchor cos, hard negative cos) pair.

    ``queries`` / ``passages`` must be unit rows (:func:`~tapt.analysis.embed.unit_rows`).
    """
    row_of = {doc_id: row for row, doc_id in enumerate(passage_ids)}
    judged = {doc for docs in qrels.values() for doc in docs}
    distractors = np.array([row for doc_id, row in row_of.items() if doc_id not in judged],
                           dtype=np.int64)
    rng = np.random.default_rng(seed)
    tiers: dict[str, list[float]] = {tier: [] for tier in TIERS}
    anchor_hard_pairs = []
    for qi, query_id in enumerate(query_ids):
        q = queries[qi]
        docs = qrels.get(query_id, {})
        by_tier = {}
        for tier, grade in GRADE_OF_TIER.items():
            rows = [row_of[d] for d, g in docs.items() if d in row_of and
                    (g >= grade if grade == ANCHOR else g == grade)]
            by_tier[tier] = (passages[rows] @ q).tolist() if rows else []
            tiers[tier] += by_tier[tier]
        anchor_hard_pairs += [(a, h) for a in by_tier["anchor"] for h in by_tier["hard_negative"]]
        if len(distractors) and random_per_query > 0:
            take = distractors if len(distractors) <= random_per_query else rng.choice(
                distractors, random_per_query, replace=False)
            tiers["random"] += (passages[take] @ q).tolist()
    return {t: np.asarray(v, dtype=np.float64) for t, v in tiers.items()}, anchor_hard_pairs


def anisotropy(passages: np.ndarray, pairs: int = 2000, seed: int = 0) -> tuple[float, int]:
    """Mean cosine of random pairs of distinct rows (unit rows); every pair when
    ``n(n-1)/2 <= pairs``. Returns the mean and the number of pairs."""
    pairs, seed = POSITIVE_INT.check(pairs, "pairs"), SEED.check(seed, "seed")
    n = len(passages)
    if n < 2:
        return float("nan"), 0
    if n * (n - 1) // 2 <= pairs:
        left, right = np.triu_indices(n, k=1)
    else:
        rng = np.random.default_rng(seed)
        left = rng.integers(0, n, size=pairs)
        right = (left + rng.integers(1, n, size=pairs)) % n  # never the same row
    cosines = np.einsum("ij,ij->i", passages[left], passages[right])
    return float(cosines.mean()), len(left)


def anchor_rank1(query_ids: Sequence[str], queries: np.ndarray, passage_ids: Sequence[str],
                 passages: np.ndarray, qrels: Qrels, *, normalize: bool = True) -> float:
    """Share of queries with an anchor whose top-1 (exact search, trec_eval tie order) is
    an anchor."""
    index = ExactIndex(passages.shape[1], normalize=normalize)
    index.add(passages)
    run, _ = rank(index, list(passage_ids), list(query_ids), queries, top_k=10)
    hits, counted = 0, 0
    for query_id in query_ids:
        docs = qrels.get(query_id, {})
        if not any(g >= ANCHOR for g in docs.values()):
            continue
        counted += 1
        ranked = trec_ranking(run.get(query_id, {}))
        hits += bool(ranked) and docs.get(ranked[0][0], 0) >= ANCHOR
    return hits / counted if counted else float("nan")


def _stats(values: np.ndarray) -> dict[str, float]:
    if not len(values):
        return {"count": 0, "mean": float("nan"), "std": float("nan")}
    return {"count": len(values), "mean": float(values.mean()), "std": float(values.std()),
            "p5": float(np.percentile(values, 5)), "p95": float(np.percentile(values, 95))}


def geometry_from_embeddings(query_ids: Sequence[str], queries: np.ndarray,
                             passage_ids: Sequence[str], passages: np.ndarray, qrels: Qrels,
                             *, model: str = "model", normalize: bool = True,
                             random_per_query: int = 100, pairs: int = 2000, seed: int = 0,
                             info: Mapping | None = None) -> Geometry:
    """Every figure of the module docstring from raw embeddings (rows in id order)."""
    unit_q, unit_p = unit_rows(queries), unit_rows(passages)
    sims, anchor_hard = tier_similarities(query_ids, unit_q, passage_ids, unit_p, qrels,
                                          random_per_query=random_per_query, seed=seed)
    means = {tier: float(values.mean()) if len(values) else float("nan")
             for tier, values in sims.items()}
    pooled = np.concatenate([v for v in sims.values() if len(v)]) if any(
        len(v) for v in sims.values()) else np.zeros(0)
    band = ({"p5": float(np.percentile(pooled, 5)), "p95": float(np.percentile(pooled, 95))}
            if len(pooled) else {"p5": float("nan"), "p95": float("nan")})
    band["width"] = band["p95"] - band["p5"]
    mean_cos, pair_count = anisotropy(unit_p, pairs, seed)
    above = (float(np.mean([a > h for a, h in anchor_hard])) if anchor_hard
             else float("nan"))
    return Geometry(
        model=model, delta=means["anchor"] - means["hard_negative"],
        anchor_rank1_rate=anchor_rank1(query_ids, queries, passage_ids, passages, qrels,
                                       normalize=normalize),
        anchor_above_hard_rate=above, anisotropy=mean_cos, tier_means=means,
        tier_stats={tier: _stats(values) for tier, values in sims.items()}, band=band,
        num_queries=len(query_ids), corpus_size=len(passage_ids), pairs=pair_count,
        info=dict(info or {}), similarities=sims)


def analyze_geometry(encoder: Encoder, dataset: BeirDataset, split: str, *,
                     distractors: int | None = 1000, fraction: float | None = None,
                     seed: int = 0, random_per_query: int = 100, pairs: int = 2000,
                     batch_size: int = 32, with_title: bool = True,
                     name: str | None = None, cache_dir: str | None = None) -> Geometry:
    """Encode the split's queries and its evaluation corpus (every judged passage plus
    ``distractors`` or ``fraction`` of the others, seeded; both None: the whole corpus)
    once, then :func:`geometry_from_embeddings`. ``name`` labels the result (default: the
    encoder's name); ``cache_dir``: the passages go through the embedding cache there, as
    ``tapt eval``'s do (``info["corpus_from_cache"]`` counts the hits)."""
    POSITIVE_INT.check(random_per_query, "random_per_query")
    POSITIVE_INT.check(pairs, "pairs")
    POSITIVE_INT.check(batch_size, "batch_size")
    SEED.check(seed, "seed")
    if distractors is not None and fraction is not None:
        distractors = None  # an explicit fraction wins over the default count
    query_ids, query_texts = split_queries(dataset, split)
    passage_ids = subcorpus_ids(dataset, split, distractors=distractors, fraction=fraction,
                                seed=seed)
    queries = embed(encoder, query_texts, "query", ids=query_ids, batch_size=batch_size)
    tally = EncodingTally()
    passages = embed(encoder, passage_texts(dataset.corpus, passage_ids, with_title),
                     "document", ids=passage_ids, batch_size=batch_size, cache_dir=cache_dir,
                     tally=tally)
    info = {"data": dataset.source, "split": split, "distractors": distractors,
            "fraction": fraction, "seed": seed, "with_title": with_title,
            "random_per_query": random_per_query, "corpus_from_cache": tally.from_cache}
    return geometry_from_embeddings(query_ids, queries, passage_ids, passages,
                                    dataset.split(split), model=name or encoder.name,
                                    normalize=encoder.normalize,
                                    random_per_query=random_per_query, pairs=pairs, seed=seed,
                                    info=info)


def geometry_table(geometry: Geometry):
    """A rich table of the figures and the per-tier similarity statistics."""
    from rich.table import Table

    table = Table(title=f"Embedding geometry: {geometry.model} ({geometry.num_queries:,} "
                        f"queries, {geometry.corpus_size:,} passages)")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for label, value in (("Delta = mean cos(anchor) - mean cos(hard negative)", geometry.delta),
                         ("anchor rank-1 rate", geometry.anchor_rank1_rate),
                         ("anchor above its hard negative", geometry.anchor_above_hard_rate),
                         ("similarity band p5 .. p95",
                          f"{geometry.band['p5']:.4f} .. {geometry.band['p95']:.4f}"),
                         ("band width (p95 - p5)", geometry.band["width"]),
                         (f"anisotropy (mean cos of {geometry.pairs:,} passage pairs)",
                          geometry.anisotropy)):
        table.add_row(label, value if isinstance(value, str) else f"{value:.4f}")
    for tier in TIERS:
        stats = geometry.tier_stats[tier]
        table.add_row(f"cos(q, {tier.replace('_', ' ')}): mean +- std (n)",
                      f"{stats['mean']:.4f} +- {stats['std']:.4f} ({stats['count']:,})")
    return table


def geometry_figure(geometry: Geometry):
    return plots.similarity_histogram(
        geometry.similarities, geometry.tier_means,
        title=f"{geometry.model}: Delta {geometry.delta:.3f}, anisotropy "
              f"{geometry.anisotropy:.3f}")
