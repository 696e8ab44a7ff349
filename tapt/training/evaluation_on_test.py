"""The test phase of a TAPT run (``tapt train --test``): the test split on the full corpus,
evaluated as ``tapt eval`` evaluates it, for the zero-shot model before training and for
the exported weights after. Call both on every rank."""

from __future__ import annotations

import logging

from tapt.recipe import DataSettings, EvalSettings
from tapt.retrieval.embedding_cache import local_cache_root
from tapt.retrieval.evaluate import evaluate
from tapt.util.files import unwritable_reason

logger = logging.getLogger(__name__)

TEST_RESULTS = "test.json"
"""``tapt train --test``'s test metrics in the run folder, in ``tapt eval --output``'s
format (per-query values, timings, ``evaluated``, ``provenance``)."""


def zero_shot_test_metrics(model, dataset, settings: EvalSettings, data: DataSettings, *,
                           name: str) -> dict[str, float] | None:
    """Zero-shot test metrics on the full corpus (:func:`report_on_test`'s, through the
    embedding cache) of the base model ``name``; call it on every rank."""
    report = report_on_test(model, dataset, settings, data, name=name, cached=True)
    return report.metrics if report is not None else None


def report_on_test(model, dataset, settings: EvalSettings, data: DataSettings, *, name: str,
                   cached: bool = False):
    """The test split's :class:`~tapt.retrieval.evaluate.EvalReport` on the full corpus, as
    ``tapt eval`` reports it, the model named ``name``; ``settings`` and ``data``: the
    recipe's ``eval`` and ``data`` sections. Call it on every rank.

    ``cached``: the passages go through the default embedding cache
    (:func:`~tapt.retrieval.embedding_cache.local_cache_root`; ``TAPT_EMBEDDING_CACHE=0``
    turns it off). The zero-shot test asks for it: every run of the same base model with the
    same ``eval`` settings encodes the same ~1M passages with the same weights, so all but
    the first hit, for the ~2 s of hashing the weights. The trained model's test does not:
    its weights are new, so nothing can hit, and what it would write serves only a later
    ``tapt eval`` whose key is the same, i.e. float32 weights computing in float32 (on a GPU
    ``tapt eval`` loads the export in bf16 and training evaluates float32 weights under bf16
    autocast, a LoRA run's weights are merged on export: other keys), while it costs a
    float32 copy of the test corpus's embeddings (4 GB at 1M x 1024) per run.

    Under DDP every rank encodes a share of the ~1M-passage test corpus and rank 0 scores
    (no cache); rank 0 gets the report, the others None. Non-finite embeddings raise
    :class:`~tapt.util.finite.NonFiniteEmbeddingsError` on every rank.
    """
    from tapt.retrieval.in_loop import model_retriever

    root = local_cache_root() if cached else None
    reason = None if root is None else unwritable_reason(root)
    if reason is not None:  # a cache that cannot be written must not stop the run
        logger.warning("embedding cache %s cannot be written (%s); the zero-shot test "
                       "encodes without it", root, reason)
        root = None
    retriever = model_retriever(model, name=name, batch_size=settings.batch_size,
                                top_k=settings.top_k, dtype=settings.dtype,
                                max_tokens_per_batch=settings.max_tokens_per_batch,
                                cache_dir=None if root is None else str(root))
    return evaluate(retriever, dataset, data.test_split, with_title=data.with_title,
                    train_split=data.train_split,
                    info={"distractors": None, "fraction": None, "seed": None,
                          "top_k": settings.top_k})  # the whole corpus, as tapt eval's
