"""The export phase of a TAPT run: ``final/`` is written into a staging folder
(:func:`stage_export`: the weights, merged LoRA, the preset record), completed with the
model card once the test is measured, and renamed into place only whole, after
``results.json`` (:func:`write_outputs`); then ``test.json``, the W&B summary and the Hub
push. The main process writes all of it."""

from __future__ import annotations

import logging
from pathlib import Path

from tapt.encoders.preset_record import write_preset_record
from tapt.recipe import Recipe
from tapt.run_folder.layout import RunDir
from tapt.run_folder.records import write_results
from tapt.run_folder.split_records import test_records
from tapt.training.arguments import training_bf16
from tapt.training.best_weights import Selection
from tapt.training.evaluation_on_test import TEST_RESULTS
from tapt.training.export import save_model, write_card
from tapt.training.inputs import TrainingInputs
from tapt.training.run import export_staging, finish_wandb, model_spec, push_to_hub
from tapt.training.zero_shot_gate import GATE_KEY, gate_message
from tapt.util.files import publish

logger = logging.getLogger(__name__)


def stage_export(model, run: RunDir, recipe: Recipe, selection: Selection) -> Path:
    """The exported weights in ``final/``'s staging folder, with their preset record."""
    staging = export_staging(model, run, recipe)
    save_model(model, staging, recipe)
    write_preset_record(staging, model, model_spec(recipe), stage="tapt", loss=recipe.loss.name,
                        **({"averaged": selection.averaged} if selection.averaged else {}))
    return staging


def write_outputs(staging: Path, run: RunDir, recipe: Recipe, inputs: TrainingInputs,
                  selection: Selection, parts, test_report=None) -> Path:
    """The card, ``results.json``, ``final/`` published, ``test.json``, W&B and the Hub push;
    returns ``final/``. ``parts``: the run's :class:`~tapt.training.assembly.RunParts`;
    ``test_report``: the exported weights' test report (None without ``--test``)."""
    summary, evaluator, guard = selection.summary, parts.evaluator, parts.guard
    write_card(staging, recipe, history=selection.history, summary=summary,
               best_step=selection.best_step, averaged=selection.averaged, gate=selection.gate,
               splits=test_records(inputs.records, test_report), weak_pairs=inputs.weak_pairs,
               pseudo_queries=inputs.pseudo_queries)
    write_results(run, {"status": "finished", "summary": summary,
                        "best_step": selection.best_step, "export": selection.export_record,
                        "training_bf16": training_bf16(recipe.training.bf16)[0],
                        "eval_dtype": evaluator.history[-1]["dtype"] if evaluator.history
                        else None,
                        "nonfinite_steps": guard.skipped, "nonfinite_events": guard.records(),
                        "refused_evaluations": len(evaluator.refusals),
                        **inputs.result_records,
                        **({"weak_pairs": inputs.weak_pairs} if inputs.weak_pairs else {}),
                        **({GATE_KEY: selection.gate} if selection.gate else {}),
                        "history": selection.history})
    final = publish(staging, run.final)
    if test_report is not None:
        test_report.write_json(run.root / TEST_RESULTS)
    if recipe.tracking.backend == "wandb":
        finish_wandb(summary)
    push_to_hub(recipe, run.final)
    if warning := gate_message(selection.gate):
        logger.warning("%s", warning)
    return final
