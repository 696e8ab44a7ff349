"""The export phase of a TAPT run: ``final/`` is written into a staging folder
(:func:`stage_export`: the weights, merged LoRA, the preset record), completed with the
model card once the test is measured, and renamed into place only whole, after
``results.json`` (:func:`write_outputs`); then ``test.json``, the W&B summary and the Hub
push. The main process writes all of it."""

from __future__ import annotations

import logging
from pathlib import Path

from tapt.cards.run_card import write_card
from tapt.encoders.loading import ModelSpec
from tapt.encoders.preset_record import write_preset_record
from tapt.hub.push import push_run_export
from tapt.recipe import Recipe
from tapt.run_folder.layout import RunDir
from tapt.run_folder.records import (
    FINISHED,
    ExportOutcome,
    NonFiniteRecord,
    RunResults,
    write_results,
)
from tapt.run_folder.split_records import test_records
from tapt.training.arguments import training_bf16
from tapt.training.best_weights import ChosenWeights
from tapt.training.evaluation_on_test import TEST_RESULTS
from tapt.training.export import export_staging, save_model
from tapt.training.inputs import TrainingInputs
from tapt.training.tracking import finish_wandb
from tapt.training.zero_shot_gate import gate_message
from tapt.util.files import publish

logger = logging.getLogger(__name__)


def stage_export(model, run: RunDir, recipe: Recipe, chosen: ChosenWeights) -> Path:
    """The exported weights in ``final/``'s staging folder, with their preset record."""
    staging = export_staging(model, run, recipe.export.dtype)
    save_model(model, staging, recipe)
    write_preset_record(staging, model, ModelSpec.from_settings(recipe.model), stage="tapt",
                        loss=recipe.loss.name,
                        **({"averaged": chosen.averaged} if chosen.averaged else {}))
    return staging


def write_outputs(staging: Path, run: RunDir, recipe: Recipe, inputs: TrainingInputs,
                  chosen: ChosenWeights, parts, test_report=None) -> Path:
    """The card, ``results.json``, ``final/`` published, ``test.json``, W&B and the Hub push;
    returns ``final/``. ``parts``: the run's :class:`~tapt.training.assembly.RunParts`;
    ``test_report``: the exported weights' test report (None without ``--test``)."""
    summary, evaluator, nonfinite_guard = chosen.summary, parts.evaluator, parts.nonfinite_guard
    write_card(staging, recipe, history=chosen.history, summary=summary,
               best_step=chosen.best_step, averaged=chosen.averaged,
               gate_warning=gate_message(chosen.gate),
               splits=test_records(inputs.records, test_report), weak_pairs=inputs.weak_pairs,
               pseudo_queries=inputs.pseudo_queries)
    write_results(run, RunResults(
        status=FINISHED, dev=chosen.dev,
        exported=ExportOutcome(export=chosen.export_record,
                               eval_dtype=evaluator.history[-1]["dtype"] if evaluator.history
                               else None,
                               refused_evaluations=len(evaluator.refusals)),
        training_bf16=training_bf16(recipe.training.bf16)[0],
        nonfinite=NonFiniteRecord(nonfinite_guard.skipped, nonfinite_guard.records()),
        data=inputs.result_records, zero_shot_gate=chosen.gate, history=chosen.history))
    final = publish(staging, run.final)
    if test_report is not None:
        test_report.write_json(run.root / TEST_RESULTS)
    if recipe.tracking.backend == "wandb":
        finish_wandb(summary)
    push_run_export(run.final, recipe.hub, run_name=Path(recipe.output_dir).name,
                    trust_remote_code=recipe.model.trust_remote_code)
    if warning := gate_message(chosen.gate):
        logger.warning("%s", warning)
    return final
