"""Hybrid fusion tuned on a held-out split (``tapt eval --hybrid bm25 --tune-on dev``).

The right fusion weight depends on the model (fixed RRF with BM25 lifted a zero-shot
model and lowered its fine-tuned version on the same test set), so the RRF ``k`` or the
linear ``alpha`` is picked on the tuning split and only then applied to the evaluated one:

- grid: RRF ``k`` in :data:`RRF_GRID`, linear ``alpha`` in :data:`ALPHA_GRID`, plus the
  retriever's own value (the default) when it is not in the grid; fusion ``auto``: both
  grids, so the fusion itself (RRF or linear) is picked too, with its setting;
- pick: the best tuning-split :data:`TUNING_METRIC`; a tie goes to the default, else to
  the first value of the grid in order;
- cost: the two systems retrieve once per corpus; each grid point only re-fuses their
  runs. With the same corpus for both splits (no sub-corpus) one retrieval serves the
  queries of both.

Example::

    report, tuned = tune_and_evaluate(hybrid, dataset, "test", "dev")
    report.info["tuning"]["picked"], tuned.rrf_k
"""

from __future__ import annotations

from collections.abc import Sequence

from tapt.data.arrow_corpus import corpus_texts
from tapt.data.beir import BeirDataset
from tapt.retrieval.evaluate import EvalReport, check_split, score_retrieval, split_queries
from tapt.retrieval.hybrid import TUNED, HybridRetriever
from tapt.retrieval.metrics import score_run

RRF_GRID = (1.0, 10.0, 30.0, 60.0, 100.0)
ALPHA_GRID = tuple(round(step / 10, 1) for step in range(11))
TUNING_METRIC = "binary_ndcg@10"
TIE_TOLERANCE = 1e-12


def fusion_grid(hybrid: HybridRetriever) -> tuple[str, float, list[float]]:
    """``(setting name, default value, grid)`` of the retriever's fusion (rrf or linear)."""
    name, default, grid = (("rrf_k", hybrid.rrf_k, RRF_GRID) if hybrid.fusion == "rrf"
                           else ("alpha", hybrid.alpha, ALPHA_GRID))
    return name, float(default), sorted({*grid, float(default)})


def fusion_points(hybrid: HybridRetriever) -> tuple[list[tuple[str, float]], tuple[str, float]]:
    """``(points, default)``: the (fusion, value) pairs tried and the default pair; fusion
    ``auto`` tries RRF's grid, then linear's (default: RRF at the retriever's k)."""
    fusions = ("rrf", "linear") if hybrid.fusion == TUNED else (hybrid.fusion,)
    points = [(fusion, value) for fusion in fusions
              for value in fusion_grid(hybrid.with_fusion(fusion, hybrid.rrf_k if
                                                          fusion == "rrf" else hybrid.alpha))[2]]
    default = fusions[0], float(hybrid.rrf_k if fusions[0] == "rrf" else hybrid.alpha)
    return points, default


def pick(scores: Sequence[tuple], default):
    """The value of the best score among ``(value, score)`` pairs (a value: a number, or a
    (fusion, number) pair); ties: ``default`` when it is among the best, else the first
    best in order."""
    best = max(score for _, score in scores)
    tied = [value for value, score in scores if score >= best - TIE_TOLERANCE]
    return default if default in tied else tied[0]


def _texts(dataset: BeirDataset, corpus_ids: Sequence[str],
           with_title: bool) -> Sequence[str]:
    return corpus_texts(dataset.corpus, corpus_ids, with_title)  # lazy for an Arrow corpus


def tune_and_evaluate(hybrid: HybridRetriever, dataset: BeirDataset, split: str,
                      tune_split: str, *, corpus_ids: Sequence[str] | None = None,
                      tune_corpus_ids: Sequence[str] | None = None, with_title: bool = True,
                      info: dict | None = None
                      ) -> tuple[EvalReport | None, HybridRetriever]:
    """Pick the fusion on ``tune_split`` (see the module docstring), evaluate ``split``
    with it; returns the report (None on a DDP rank other than 0) and the tuned retriever.

    ``corpus_ids`` / ``tune_corpus_ids``: each split's corpus (default: the whole corpus).
    The report's ``evaluated.tuning`` records ``tuned_on``, the ``setting``, the ``grid``,
    each point's ``scores`` on the tuning split and the ``picked`` value. The two splits
    must differ (``ValueError`` naming --tune-on)."""
    if tune_split == split:
        raise ValueError(f"--tune-on {tune_split}: tune on another split than the one "
                         "evaluated (--split); tuning on the test queries overstates them")
    check_split(dataset, split)
    check_split(dataset, tune_split)
    full = list(dataset.corpus)
    corpus_ids = full if corpus_ids is None else list(corpus_ids)
    tune_corpus_ids = full if tune_corpus_ids is None else list(tune_corpus_ids)
    test_ids, test_texts = split_queries(dataset, split)
    tune_ids, tune_texts = split_queries(dataset, tune_split)
    if corpus_ids == tune_corpus_ids:  # one retrieval for the queries of both splits
        both = dict(zip(test_ids, test_texts)) | dict(zip(tune_ids, tune_texts))
        dense, sparse, timings = hybrid.retrieve_parts(
            corpus_ids, _texts(dataset, corpus_ids, with_title), list(both), list(both.values()))
        tune_parts = (dense, sparse)
    else:
        tune_parts = hybrid.retrieve_parts(tune_corpus_ids,
                                           _texts(dataset, tune_corpus_ids, with_title),
                                           tune_ids, tune_texts)[:2]
        dense, sparse, timings = hybrid.retrieve_parts(
            corpus_ids, _texts(dataset, corpus_ids, with_title), test_ids, test_texts)
    if sparse is None or tune_parts[1] is None:  # a DDP rank other than 0
        return None, hybrid
    points, default = fusion_points(hybrid)
    qrels = dataset.split(tune_split)
    scores = []
    for fusion, value in points:
        fused = hybrid.with_fusion(fusion, value).fuse_parts(tune_parts[0].run,
                                                             tune_parts[1].run, tune_ids, {})
        scored = score_run(qrels, fused.run, relevant_from=dataset.rule.relevant_from)
        scores.append(((fusion, value), scored.mean[TUNING_METRIC]))
    fusion, picked = pick(scores, default)
    tuned = hybrid.with_fusion(fusion, picked)
    retrieval = tuned.fuse_parts(dense.run, sparse.run, test_ids, timings)
    tuning = {"tuned_on": tune_split, "setting": "rrf_k" if fusion == "rrf" else "alpha",
              "metric": TUNING_METRIC, "grid": [value for _, value in points],
              "scores": [score for _, score in scores], "default": default[1],
              "picked": picked, "fusion": fusion, "tuning_queries": len(tune_ids),
              "tuning_corpus_size": len(tune_corpus_ids)}
    if hybrid.fusion == TUNED:  # which fusion each grid point was
        tuning["fusions"] = [name for name, _ in points]
    report = score_retrieval(retrieval, tuned, dataset, split, corpus_ids=corpus_ids,
                             with_title=with_title, info={**(info or {}), "tuning": tuning})
    return report, tuned


__all__ = ["ALPHA_GRID", "RRF_GRID", "TUNING_METRIC", "fusion_grid", "fusion_points", "pick",
           "tune_and_evaluate"]
