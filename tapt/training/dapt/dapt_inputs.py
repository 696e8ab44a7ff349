"""What a DAPT run reads and checks before it trains (its inputs step, as TAPT's
:mod:`tapt.training.inputs`): the passages, split into training and held-out ones, the dev
retrieval data and its evaluator, the sequence length and the window overlap, and the
objective's needs of the loaded model. After it, the run reads nothing from
:mod:`tapt.data`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tapt.data import sources  # sources.load_data looked up at each call
from tapt.data.beir import strictness
from tapt.data.passages import collect_passages, split_held_out
from tapt.data.subcorpus import subcorpus_ids
from tapt.recipe import DaptRecipe, RecipeError

DEFAULT_MAX_LENGTH = 512
"""DAPT sequence length when neither the recipe nor the model says less."""


@dataclass
class DaptInputs:
    """The passages a DAPT run trains and measures its held-out loss on, and its dev data."""

    train_texts: list[str]
    held_out: list[str]
    eval_data: Any
    """The BEIR data of the zero-shot dev evaluation, None without one."""


def prepare_dapt_inputs(recipe: DaptRecipe) -> DaptInputs:
    """Read and check the passages and the dev data (every bad line an error naming the
    file, the line and the field), then split off the held-out passages (seeded)."""
    eval_data = retrieval_data(recipe)
    passages = collect_passages(recipe.data, eval_data if recipe.data.path
                                and not recipe.data.dev_data else None)
    train_texts, held_out = split_held_out(passages, recipe.data.held_out_fraction,
                                           recipe.data.held_out_max, recipe.data.seed)
    return DaptInputs(train_texts=train_texts, held_out=held_out, eval_data=eval_data)


def retrieval_data(recipe: DaptRecipe):
    """The BEIR data of the zero-shot dev evaluation (also the corpus when it is
    ``data.path``), or None when the recipe evaluates no retrieval."""
    data = recipe.data
    source = data.dev_data or data.path
    if not source:
        return None
    splits = [data.dev_split] if data.dev_split else []
    config = data.config if source == data.path else None
    revision = data.revision if source == data.path else None
    return sources.load_data(source, config, splits, revision=revision,
                             **strictness(data.lenient))


def dev_evaluator(recipe: DaptRecipe, dataset):
    """tapt's retrieval evaluator on the dev split, or None without one."""
    if dataset is None or not recipe.data.dev_split:
        return None
    from tapt.retrieval.in_loop import RetrievalEvaluator

    dev_ids = subcorpus_ids(dataset, recipe.data.dev_split,
                            distractors=recipe.data.dev_distractors, seed=recipe.data.dev_seed)
    return RetrievalEvaluator(dataset, recipe.data.dev_split, dev_ids, name="dev",
                              metric=recipe.eval.metric, batch_size=recipe.eval.batch_size,
                              top_k=recipe.eval.top_k, with_title=recipe.data.with_title,
                              dtype=recipe.eval.dtype,
                              max_tokens_per_batch=recipe.eval.max_tokens_per_batch,
                              on_nonfinite="record")


def sequence_length(recipe: DaptRecipe, model) -> int:
    """``chunking.max_length``, else the model's maximum length capped at 512."""
    if recipe.chunking.max_length:
        return recipe.chunking.max_length
    return min(model.max_seq_length or DEFAULT_MAX_LENGTH, DEFAULT_MAX_LENGTH)


def check_objective(recipe: DaptRecipe, model, max_length: int) -> None:
    """Checks that need the loaded model: ``mlm`` needs a mask token; the window overlap
    must be smaller than the sequence length."""
    if recipe.objective.name == "mlm" and model.tokenizer.mask_token_id is None:
        raise RecipeError(f"objective mlm needs a tokenizer with a mask token; "
                          f"{recipe.model.name} has none (a decoder such as Qwen3?): use "
                          "objective.name: simcse")
    window_overlap(recipe, max_length)


def window_overlap(recipe: DaptRecipe, max_length: int) -> int:
    """``chunking.overlap``, else an eighth of the sequence length."""
    overlap = recipe.chunking.overlap
    if overlap is None:
        return max_length // 8
    if overlap >= max_length:
        raise RecipeError(f"chunking.overlap ({overlap}) must be smaller than the sequence "
                          f"length ({max_length})")
    return overlap
