"""TAPT: contrastive fine-tuning on (query, anchor, hard negative) rows with
sentence-transformers' trainer (which runs on Accelerate: bf16, DDP, FSDP, DeepSpeed).

A run reads as its phases, one module each:

1. **check** the recipe, the Hub and W&B settings; take the run folder (locked, then started,
   resumed or refused: :mod:`tapt.run_folder.start`);
2. **inputs**: everything the run consumes, read and checked once
   (:mod:`tapt.training.inputs`); nothing after it reads :mod:`tapt.data`;
3. **setup**: model, loss, evaluators (:mod:`tapt.training.assembly`); the run's first write
   (``recipe.yaml``), then the trainer;
4. **train**, with dev evaluation, resume and the non-finite guard
   (:func:`tapt.training.trainer.run_trainer`);
5. **select** the weights to export: best checkpoint or average, zero-shot gate
   (:mod:`tapt.training.best_weights`);
6. **export** ``final/`` (staged, published whole: :mod:`tapt.training.run_outputs`), then
   **test** (:mod:`tapt.training.evaluation_on_test`): a failing test never costs the model.

Example::

    from tapt.recipe import load_recipe
    from tapt.training.contrastive import train

    result = train(load_recipe("recipes/quickstart.yaml"), run_test=True)
    result.summary["TAPT test"]["binary_ndcg@10"]
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from tapt.hub.push import check_run_push
from tapt.recipe import Recipe, check_recipe
from tapt.run_folder.scratch import scratch_folder
from tapt.run_folder.start import RunStart, open_run_dir
from tapt.training.assembly import build_parts, build_trainer
from tapt.training.average import check_saves
from tapt.training.best_weights import select_weights
from tapt.training.evaluation_on_test import report_on_test, zero_shot_test_metrics
from tapt.training.inputs import prepare_inputs
from tapt.training.run_outputs import stage_export, write_outputs
from tapt.training.tracking import check_wandb
from tapt.training.trainer import run_trainer
from tapt.util.process_group import is_main_process


@dataclass
class TrainResult:
    """Where the run is and what it measured."""

    run_dir: Path
    final_dir: Path | None
    summary: dict[str, dict[str, float]] = field(default_factory=dict)
    history: list[dict] = field(default_factory=list)
    best_step: int | None = None
    zero_shot_gate: dict | None = None
    """Whether the export beats the zero-shot dev score (:mod:`tapt.training.zero_shot_gate`)."""


def train(recipe: Recipe, *, run_test: bool = False, callbacks: list | None = None,
          overwrite: bool = False) -> TrainResult:
    """Run a recipe end to end, in the phases of the module docstring; the run folder is
    locked while it runs.

    Raises:
        RecipeError, DataError: a bad recipe or input, before anything is written.
        NonFiniteTrainingError: the loss, a gradient or a dev evaluation went non-finite
            and the recipe says stop (the last finite checkpoint is kept; no ``final/``).
        ZeroShotGateError: ``eval.require_beats_zero_shot`` and the exported weights' dev
            score is not above the zero-shot one (results.json records it; no ``final/``).
        TrainingInterrupted: Ctrl-C while training (a ``KeyboardInterrupt`` naming the
            last complete checkpoint).
    """
    # 1. check: the cheap things before anything heavy (the recipe again: one built without
    # validation, e.g. by ``model_copy``, has not been checked), credentials included.
    check_recipe(recipe)
    check_run_push(recipe.hub)
    check_wandb(recipe.tracking.backend)
    with ExitStack() as stack:
        start = stack.enter_context(open_run_dir(recipe, overwrite=overwrite))
        scratch = None
        if recipe.data.weak_pairs != "none" or recipe.data.pseudo_queries:
            # their Arrow files, removed when training ends
            scratch = stack.enter_context(scratch_folder("weak-pairs"))
        return train_in(start, recipe, run_test=run_test, callbacks=callbacks,
                        scratch=scratch)


def train_in(start: RunStart, recipe: Recipe, *, run_test: bool = False,
             callbacks: list | None = None, scratch: Path | None = None) -> TrainResult:
    """Phases 2-6 of :func:`train`, the run folder checked and locked (``scratch``: a folder
    that outlives training, for the weak pairs' Arrow files)."""
    # 2. inputs, 3. setup: whatever fails here leaves the run folder as it was.
    inputs = prepare_inputs(recipe, with_test=run_test, scratch=scratch)
    parts = build_parts(recipe, inputs, start.run.metrics_file)
    run, resume_from = start.begin(recipe)  # the run's first write
    trainer = build_trainer(recipe, inputs, parts, run, resume_from, callbacks)
    if recipe.training.average_last:  # before the zero-shot test (maybe 1M passages)
        check_saves(trainer, recipe.training.average_last)
    zero_shot_test = None
    if run_test and recipe.eval.zero_shot and resume_from is None:
        zero_shot_test = zero_shot_test_metrics(parts.model, inputs.dataset, recipe.eval,
                                                recipe.data, name=recipe.model.name)

    # 4. train (the best checkpoint is loaded at the end), 5. select.
    run_trainer(trainer, run, resume_from)
    chosen = select_weights(trainer, run, parts, inputs.result_records, settings=recipe.eval,
                            average_last_n=recipe.training.average_last,
                            zero_shot_test=zero_shot_test)
    result = TrainResult(run_dir=run.root, final_dir=None, history=chosen.history,
                         best_step=chosen.best_step, zero_shot_gate=chosen.gate)

    # 6. export first (staged; a failing test evaluation must not cost the model), then test.
    staging = stage_export(parts.model, run, recipe, chosen) if is_main_process() else None
    test_report = report_on_test(parts.model, inputs.dataset, recipe.eval, recipe.data,
                                 name=str(run.final)) if run_test else None
    if not is_main_process():
        return result
    if test_report is not None:
        chosen.summary["TAPT test"] = test_report.metrics
    result.summary = chosen.summary
    result.final_dir = write_outputs(staging, run, recipe, inputs, chosen, parts, test_report)
    return result
