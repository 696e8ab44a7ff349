"""In-loop dev evaluation for sentence-transformers' trainer: exact FAISS retrieval with graded
metrics on a fixed, seeded sub-corpus.

sentence-transformers' ``InformationRetrievalEvaluator`` has binary relevance only and
re-ranks with torch top-k; this evaluator reuses tapt's own retrieval and pytrec_eval
scoring, so in-loop numbers equal ``tapt eval`` of the same checkpoint (at the same
dtype). It encodes in ``dtype`` under autocast, so a bf16 run evaluates at bf16 speed while
its float32 master weights stay untouched. Under DDP tapt's trainer runs it on every rank:
each encodes a share, rank 0 scores and broadcasts (:mod:`tapt.retrieval.sharding`).
Non-finite embeddings are never scored: the evaluation raises, or, with
``on_nonfinite="record"`` (what training uses), records the refusal and returns NaN
metrics, so that checkpoint can never be chosen as best.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Literal

from sentence_transformers.base.evaluation import BaseEvaluator  # torch: only the trainer

from tapt.data.beir import BeirDataset
from tapt.encoders.factory import ModelOptions, wrap_model
from tapt.retrieval.dense import DenseRetriever
from tapt.retrieval.evaluate import evaluate
from tapt.retrieval.metrics import METRIC_KEYS
from tapt.retrieval.retriever_factory import SearchOptions, build_retriever
from tapt.retrieval.sharding import broadcast
from tapt.util.bounds import POSITIVE_INT, check_optional
from tapt.util.files import append_json_line
from tapt.util.finite import NonFiniteEmbeddingsError

logger = logging.getLogger(__name__)


def model_retriever(model, *, name: str, batch_size: int, top_k: int,
                    truncate_dim: int | None = None, progress: bool = True,
                    dtype: str | None = None, max_tokens_per_batch: int | None = None,
                    cache_dir: str | None = None) -> DenseRetriever:
    """Exact retrieval with an in-memory SentenceTransformer (trained or training), encoding
    in ``dtype`` (``auto``: bf16 where the device runs it natively) without changing its
    weights; ``cache_dir``: its passages go through the embedding cache there (keyed by a
    digest of its weights: ~2 s per 0.6B parameters, so never for the in-loop dev
    evaluation, whose weights change at every call)."""
    options = ModelOptions(dtype=dtype, max_tokens_per_batch=max_tokens_per_batch,
                           batch_size=batch_size, truncate_dim=truncate_dim)
    return build_retriever(wrap_model(model, options, name=name), batch_size=batch_size,
                           top_k=top_k, progress=progress,
                           search=SearchOptions(cache_dir=cache_dir))


def logged_values(name: str, steps: int, outcome: dict,
                  seconds: float | None = None) -> dict[str, float]:
    """The metrics of a :meth:`RetrievalEvaluator.measure` outcome (NaN for every metric of
    a refusal), logged: an error for a refusal, else one info line (with ``seconds``)."""
    if outcome["error"]:
        logger.error("%s step %s: evaluation refused: %s", name, steps, outcome["error"])
        return {key: float("nan") for key in METRIC_KEYS}
    values = dict(outcome["metrics"])
    shown = ", ".join(f"{k} {v:.4f}" for k, v in values.items())
    if seconds is None:
        logger.info("%s step %s: %s", name, steps, shown)
    else:
        logger.info("%s step %s: %s (%.1fs)", name, steps, shown, seconds)
    return values


class RetrievalEvaluator(BaseEvaluator):
    """Evaluate a SentenceTransformer on one split of a BEIR dataset.

    Args:
        dataset: The loaded dataset (with the split's qrels).
        split: Which split's queries and judgments to use (``dev`` in training).
        corpus_ids: The passages to rank (e.g. :func:`tapt.data.subcorpus.subcorpus_ids`).
        metric: The primary metric, used to pick the best checkpoint.
        metrics_file: If given, every evaluation appends a JSON line here (give it on one
            rank only: under DDP every rank runs the evaluator).
        truncate_dim: Evaluate embeddings truncated to this width (Matryoshka).
        dtype: Compute dtype (``auto``, ``float32``, ``bfloat16``, ``float16``).
        max_tokens_per_batch: Padded tokens per encoding batch (default: batch_size x
            the model's maximum length).
        on_nonfinite: ``raise`` a :class:`NonFiniteEmbeddingsError`, or ``record`` it
            (metrics file and :attr:`refusals`) and return NaN metrics.
        guard_evaluator: The guard set's evaluator (the recipe's ``eval.guard_data``), run
            after this one at every call, on every rank: its metrics are returned and recorded with a
            ``guard_`` prefix (``guard_binary_ndcg@10``; the trainer logs
            ``eval_guard_binary_ndcg@10``); they never choose the best checkpoint.

    Attributes:
        history: The records of every evaluation this object ran (step, epoch, metrics).
        refusals: The records of evaluations refused for non-finite embeddings.

    Example::

        evaluator = RetrievalEvaluator(dataset, "dev", subcorpus_ids(dataset, "dev",
                                       distractors=1000), name="dev")
        evaluator(model)  # {"dev_binary_ndcg@10": ..., ...}
    """

    def __init__(self, dataset: BeirDataset, split: str, corpus_ids: Sequence[str], *,
                 name: str = "dev", metric: str = "binary_ndcg@10", batch_size: int = 64,
                 top_k: int = 100, with_title: bool = True, metrics_file: str | None = None,
                 truncate_dim: int | None = None, dtype: str | None = "auto",
                 max_tokens_per_batch: int | None = None,
                 on_nonfinite: Literal["raise", "record"] = "raise",
                 guard_evaluator: RetrievalEvaluator | None = None) -> None:
        super().__init__()
        if metric not in METRIC_KEYS:
            raise ValueError(f"metric must be one of {METRIC_KEYS}, got {metric!r}")
        self.dataset = dataset
        self.split = split
        self.corpus_ids = list(corpus_ids)
        self.name = name
        self.batch_size = POSITIVE_INT.check(batch_size, "batch_size")
        self.top_k = POSITIVE_INT.check(top_k, "top_k")
        self.with_title = with_title
        self.metrics_file = metrics_file
        self.truncate_dim = check_optional(POSITIVE_INT, truncate_dim, "truncate_dim")
        self.primary_metric = metric
        self.greater_is_better = True
        self.dtype = dtype
        self.max_tokens_per_batch = check_optional(POSITIVE_INT, max_tokens_per_batch,
                                                   "max_tokens_per_batch")
        self.on_nonfinite = on_nonfinite
        self.guard_evaluator = guard_evaluator
        self.history: list[dict] = []
        self.refusals: list[dict] = []

    def measure(self, model) -> tuple[dict, str]:
        """``(outcome, compute dtype)``: this split evaluated once (call on every rank),
        ``outcome`` ``{"metrics": ..., "error": None}`` or the non-finite refusal, the same
        on every rank. Nothing is logged or recorded."""
        retriever = model_retriever(model, name=self.name, batch_size=self.batch_size,
                                    top_k=self.top_k, truncate_dim=self.truncate_dim,
                                    progress=False, dtype=self.dtype,
                                    max_tokens_per_batch=self.max_tokens_per_batch)
        try:
            report = evaluate(retriever, self.dataset, self.split, corpus_ids=self.corpus_ids,
                              with_title=self.with_title)
            outcome = {"metrics": report.metrics if report else None, "error": None}
        except NonFiniteEmbeddingsError as err:
            if self.on_nonfinite == "raise":
                raise
            outcome = {"metrics": None, "error": str(err), "nonfinite": err.count,
                       "nonfinite_kind": err.kind}
        return broadcast(outcome), retriever.encoder.compute_dtype

    def __call__(self, model, output_path: str | None = None, epoch: float = -1,
                 steps: int = -1) -> dict[str, float]:
        start = time.perf_counter()
        outcome, dtype = self.measure(model)
        seconds = time.perf_counter() - start
        record = {"step": steps, "epoch": epoch, "seconds": seconds, "dtype": dtype}
        values = logged_values(self.name, steps, outcome, seconds)
        if outcome["error"]:
            record.update({key: None for key in METRIC_KEYS}, error=outcome["error"],
                          nonfinite=outcome["nonfinite"],
                          nonfinite_kind=outcome["nonfinite_kind"])
            self.refusals.append(record)
        else:
            record.update(values)
        metrics = self.prefix_name_to_metrics(dict(values), self.name)
        if not outcome["error"]:  # dev only: the guard set is not this evaluator's metric
            self.store_metrics_in_model_card_data(model, metrics, epoch, steps)
        if self.guard_evaluator is not None:  # not prefix_name_to_metrics: renames the primary
            guard_values = self.guard_metrics(model, steps, record)
            metrics.update({f"{self.guard_evaluator.name}_{key}": float(value)
                            for key, value in guard_values.items()})
        self.history.append(record)
        if self.metrics_file:
            append_json_line(self.metrics_file, record)
        return metrics

    def guard_metrics(self, model, steps: int, record: dict) -> dict[str, float]:
        """Evaluate :attr:`guard_evaluator`; its metrics go into ``record`` as
        ``guard_<metric>`` and its time as ``guard_seconds`` (None, with ``guard_error``,
        when refused for non-finite embeddings: NaN returned)."""
        start = time.perf_counter()
        outcome, _ = self.guard_evaluator.measure(model)
        record["guard_seconds"] = time.perf_counter() - start
        values = logged_values(self.guard_evaluator.name, steps, outcome)
        if outcome["error"]:
            record.update({f"guard_{key}": None for key in METRIC_KEYS},
                          guard_error=outcome["error"])
        else:
            record.update({f"guard_{key}": value for key, value in values.items()})
        return values

    @property
    def description(self) -> str:
        return "Information Retrieval"

    def get_config_dict(self) -> dict:
        config = {"split": self.split, "corpus_size": len(self.corpus_ids), "top_k": self.top_k}
        if self.truncate_dim:
            config["truncate_dim"] = self.truncate_dim
        return config
