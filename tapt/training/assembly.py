"""The setup phase of a TAPT run after its inputs: the model, the loss, the dev (and guard)
evaluator and the non-finite guard (:func:`build_parts`, nothing written yet), then the
trainer with its arguments (:func:`build_trainer`, once the run folder is begun).

The trainer is sentence-transformers' (through :class:`~tapt.training.trainer.TaptTrainer`):
best checkpoint on the dev metric, ``NO_DUPLICATES`` batches or batches from one group
(:mod:`tapt.training.grouped_batches`), and the model's prompts on each text column.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformers import set_seed

from tapt.cards.run_card import set_card_metadata
from tapt.encoders.loading import ModelSpec, load_sentence_transformer
from tapt.recipe import Recipe
from tapt.run_folder.layout import RunDir
from tapt.training.arguments import common_arguments
from tapt.training.guard_data import GUARD_NAME, GuardSet
from tapt.training.inputs import TrainingInputs
from tapt.training.lora import add_lora
from tapt.training.nonfinite import NonFiniteGuard, QueryIdsCollator
from tapt.util.process_group import is_main_process

EVAL_NAME = "dev"
"""The dev evaluator's name: its metrics are ``eval_dev_<metric>`` in the trainer's logs."""


@dataclass
class RunParts:
    """What :func:`build_parts` made: the model and what trains and watches it."""

    model: Any
    """The ``SentenceTransformer`` being trained (LoRA adapters added when the recipe asks)."""
    loss: Any
    evaluator: Any
    """The dev :class:`~tapt.retrieval.in_loop.RetrievalEvaluator` (with the guard set's)."""
    nonfinite_guard: NonFiniteGuard
    """The non-finite guard (:mod:`tapt.training.nonfinite`): loss, gradients, evaluations."""


def build_parts(recipe: Recipe, inputs: TrainingInputs, metrics_file: Path) -> RunParts:
    """Seed, then load the model (LoRA and heads initialise randomly), its loss (which checks
    ``loss.matryoshka_dims`` against it) and the evaluators; ``metrics_file``: where the dev
    evaluations are appended (rank 0)."""
    from tapt.training.losses import build_loss

    set_seed(recipe.training.seed)
    model = load_sentence_transformer(ModelSpec.from_settings(recipe.model))
    if recipe.model.lora.enabled:
        add_lora(model, recipe.model.lora)
    set_card_metadata(model, recipe)
    loss = build_loss(model, recipe.loss)
    evaluator = dev_evaluator(recipe, inputs, metrics_file if is_main_process() else None)
    nonfinite_guard = NonFiniteGuard(recipe.training.on_nonfinite,
                                     recipe.training.max_nonfinite_steps, evaluator=evaluator)
    return RunParts(model=model, loss=loss, evaluator=evaluator, nonfinite_guard=nonfinite_guard)


def dev_evaluator(recipe: Recipe, inputs: TrainingInputs, metrics_file: Path | None):
    """The in-loop evaluator of dev on its sub-corpus, and of the guard set beside it."""
    from tapt.retrieval.in_loop import RetrievalEvaluator

    settings = recipe.eval
    common = {"metric": settings.metric, "batch_size": settings.batch_size,
              "top_k": settings.top_k, "with_title": recipe.data.with_title,
              "dtype": settings.dtype, "max_tokens_per_batch": settings.max_tokens_per_batch,
              "on_nonfinite": "record"}
    guard_set: GuardSet | None = inputs.guard_set
    guard_evaluator = None if guard_set is None else RetrievalEvaluator(
        guard_set.dataset, guard_set.split, guard_set.corpus_ids, name=GUARD_NAME, **common)
    return RetrievalEvaluator(inputs.dataset, recipe.data.dev_split, inputs.dev_ids,
                              name=EVAL_NAME, metrics_file=None if metrics_file is None
                              else str(metrics_file), guard_evaluator=guard_evaluator, **common)


def build_trainer(recipe: Recipe, inputs: TrainingInputs, parts: RunParts, run: RunDir,
                  resume_from: str | None, callbacks: list | None = None):
    """The trainer over the inputs' rows, with the run folder's checkpoints."""
    from tapt.training.trainer import TaptTrainer

    args = training_arguments(recipe, run, resuming=resume_from is not None,
                              prompts=column_prompts(parts.model, inputs.columns),
                              groups=inputs.groups)
    trainer = TaptTrainer(model=parts.model, args=args, train_dataset=inputs.train_rows,
                          loss=parts.loss, evaluator=parts.evaluator, callbacks=callbacks,
                          nonfinite_guard=parts.nonfinite_guard)
    trainer.data_collator = QueryIdsCollator(trainer.data_collator, inputs.query_ids)
    return trainer


def column_prompts(model, columns: list[str] | None = None) -> dict[str, str]:
    """The model's query/document prompts per training column, as the data collator wants:
    the query prompt on ``query``, the document prompt on every other column.

    sentence-transformers' trainer ignores ``model.prompts``: without this, Qwen3 would
    train on bare queries but be evaluated (and used) with its instruction.
    """
    query, document = model.prompts.get("query", ""), model.prompts.get("document", "")
    columns = columns or ["query", "positive", "negative", "soft_negative"]
    prompts = {column: query if column == "query" else document for column in columns
               if column != "label"}  # distillation targets are not texts
    return {column: prompt for column, prompt in prompts.items() if prompt}


def training_arguments(recipe: Recipe, run: RunDir, resuming: bool,
                       prompts: dict[str, str] | None = None,
                       groups: list[str] | None = None):
    """sentence-transformers' arguments: the shared ones, best checkpoint on the dev metric,
    NO_DUPLICATES batches (or, with ``groups``, batches from one group:
    :mod:`tapt.training.grouped_batches`), per-column prompts."""
    from sentence_transformers import SentenceTransformerTrainingArguments
    from sentence_transformers.base.sampler import BatchSamplers

    from tapt.training.grouped_batches import grouped_batch_sampler

    return SentenceTransformerTrainingArguments(
        **common_arguments(recipe, run.checkpoints, resuming),
        load_best_model_at_end=True,
        metric_for_best_model=f"eval_{EVAL_NAME}_{recipe.eval.metric}",
        greater_is_better=True,
        batch_sampler=(grouped_batch_sampler(groups) if groups is not None
                       else BatchSamplers.NO_DUPLICATES),
        prompts=prompts or None,
    )
