"""In-loop dev evaluation for sentence-transformers' trainer: exact FAISS retrieval with graded
metrics on a fixed, seeded sub-corpus.

sentence-transformers' ``InformationRetrievalEvaluator`` has binary relevance only and
re-ranks with torch top-k; this evaluator reuses tapt's own retrieval and pytrec_eval
scoring, so in-loop numbers equal ``tapt eval`` of the same checkpoint. Under DDP the
trainer runs the evaluator on rank 0 while the other ranks serve its ``encode`` calls
(sentence-transformers' distributed evaluation); each call hands every rank exactly one
batch of the length-sorted corpus, so batches (and embeddings) match a single-process run.
Metrics are broadcast by the trainer, so every rank logs the same numbers.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Sequence

from sentence_transformers.base.evaluation import BaseEvaluator
from sentence_transformers.util.distributed import get_world_size

from tapt.data.beir import BeirDataset
from tapt.encoders.base import TruncatedEncoder
from tapt.encoders.sentence import SentenceTransformerEncoder
from tapt.retrieval.dense import DenseRetriever
from tapt.retrieval.evaluate import evaluate
from tapt.retrieval.metrics import METRIC_KEYS

logger = logging.getLogger(__name__)


def model_retriever(model, *, name: str, batch_size: int, top_k: int,
                    truncate_dim: int | None = None, progress: bool = True) -> DenseRetriever:
    """Exact retrieval with a SentenceTransformer that also works under sentence-transformers'
    distributed evaluation: each encode call holds one batch per rank, so every rank encodes
    exactly the batches a single process would."""
    encoder = SentenceTransformerEncoder(model, name=name)
    if truncate_dim:
        encoder = TruncatedEncoder(encoder, truncate_dim)
    return DenseRetriever(encoder, batch_size=batch_size, top_k=top_k, progress=progress,
                          chunk_size=batch_size * get_world_size())


class RetrievalEvaluator(BaseEvaluator):
    """Evaluate a SentenceTransformer on one split of a BEIR dataset.

    Args:
        dataset: The loaded dataset (with the split's qrels).
        split: Which split's queries and judgments to use (``dev`` in training).
        corpus_ids: The passages to rank (e.g. :func:`tapt.data.subcorpus.subcorpus_ids`).
        metric: The primary metric, used to pick the best checkpoint.
        metrics_file: If given, every evaluation appends a JSON line here (give it on one
            rank only; the trainer runs the evaluator on rank 0 under DDP).
        truncate_dim: Evaluate embeddings truncated to this width (Matryoshka).

    Attributes:
        history: The records of every evaluation this object ran (step, epoch, metrics).

    Example::

        evaluator = RetrievalEvaluator(dataset, "dev", subcorpus_ids(dataset, "dev",
                                       distractors=1000), name="dev")
        evaluator(model)  # {"dev_binary_ndcg@10": ..., ...}
    """

    def __init__(self, dataset: BeirDataset, split: str, corpus_ids: Sequence[str], *,
                 name: str = "dev", metric: str = "binary_ndcg@10", batch_size: int = 64,
                 top_k: int = 100, with_title: bool = True, metrics_file: str | None = None,
                 truncate_dim: int | None = None) -> None:
        super().__init__()
        if metric not in METRIC_KEYS:
            raise ValueError(f"metric must be one of {METRIC_KEYS}, got {metric!r}")
        self.dataset = dataset
        self.split = split
        self.corpus_ids = list(corpus_ids)
        self.name = name
        self.batch_size = batch_size
        self.top_k = top_k
        self.with_title = with_title
        self.metrics_file = metrics_file
        self.truncate_dim = truncate_dim
        self.primary_metric = metric
        self.greater_is_better = True
        self.history: list[dict] = []

    def __call__(self, model, output_path: str | None = None, epoch: float = -1,
                 steps: int = -1) -> dict[str, float]:
        start = time.perf_counter()
        retriever = model_retriever(model, name=self.name, batch_size=self.batch_size,
                                    top_k=self.top_k, truncate_dim=self.truncate_dim,
                                    progress=False)
        report = evaluate(retriever, self.dataset, self.split, corpus_ids=self.corpus_ids,
                          with_title=self.with_title)
        seconds = time.perf_counter() - start
        logger.info("%s step %s: %s (%.1fs)", self.name, steps,
                    ", ".join(f"{k} {v:.4f}" for k, v in report.metrics.items()), seconds)
        metrics = self.prefix_name_to_metrics(dict(report.metrics), self.name)
        record = {"step": steps, "epoch": epoch, "seconds": seconds, **report.metrics}
        self.history.append(record)
        if self.metrics_file:
            os.makedirs(os.path.dirname(os.path.abspath(self.metrics_file)), exist_ok=True)
            with open(self.metrics_file, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(record) + "\n")
        self.store_metrics_in_model_card_data(model, metrics, epoch, steps)
        return metrics

    @property
    def description(self) -> str:
        return "Information Retrieval"

    def get_config_dict(self) -> dict:
        config = {"split": self.split, "corpus_size": len(self.corpus_ids), "top_k": self.top_k}
        if self.truncate_dim:
            config["truncate_dim"] = self.truncate_dim
        return config
