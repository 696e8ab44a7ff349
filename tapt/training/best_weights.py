"""The select phase of a TAPT run, after training: which weights are exported.

The trainer has loaded the best checkpoint on dev (``load_best_model_at_end``); with
``training.average_last`` the mean of the last checkpoints replaces it
(:mod:`tapt.training.average`) and is evaluated on dev again. Weights that are not finite,
or a run none of whose checkpoints had a finite dev evaluation, export nothing. The
zero-shot gate (:mod:`tapt.training.zero_shot_gate`) compares what is exported with the
untrained model's dev score, and with ``eval.require_beats_zero_shot`` stops the run here,
``results.json`` written.
"""

from __future__ import annotations

from dataclasses import dataclass

from tapt.recipe import EvalSettings
from tapt.retrieval.metrics import METRIC_KEYS
from tapt.run_folder.layout import RunDir, checkpoint_step
from tapt.run_folder.records import DevOutcome, read_history
from tapt.training.assembly import RunParts
from tapt.training.average import average_last
from tapt.training.errors import NonFiniteTrainingError
from tapt.training.nonfinite import check_exportable
from tapt.training.zero_shot_gate import enforce, zero_shot_gate


@dataclass
class ChosenWeights:
    """The weights chosen for export and the dev record of the run."""

    best_step: int | None
    history: list[dict]
    summary: dict[str, dict[str, float]]
    """``zero-shot dev``, ``best dev`` (and guard, averaged rows), as results.json has them."""
    averaged: dict | None = None
    """:func:`~tapt.training.average.average_last`'s record, None when the best is exported."""
    gate: dict | None = None

    @property
    def export_record(self) -> dict:
        """results.json's ``export``: what the exported weights are."""
        return self.averaged or {"kind": "best", "steps": [self.best_step]}

    @property
    def dev(self) -> DevOutcome:
        """results.json's ``summary`` and ``best_step``."""
        return DevOutcome(summary=self.summary, best_step=self.best_step)


def select_weights(trainer, run: RunDir, parts: RunParts, records: dict, *,
                   settings: EvalSettings, average_last_n: int | None,
                   zero_shot_test: dict[str, float] | None = None) -> ChosenWeights:
    """Choose, check and (with ``average_last_n``, the recipe's ``training.average_last``)
    average the weights to export; ``settings``: the recipe's ``eval`` section (its metric
    and zero-shot gate); call on every rank. ``records``: the data records results.json
    keeps (written with a failed gate); ``zero_shot_test``: the untrained model's test
    metrics, a summary row when given."""
    best_step = checkpoint_step(trainer.state.best_model_checkpoint)
    history = read_history(run, require_metrics=True)
    check_exportable(parts.model, parts.evaluator, best_step)
    averaged, averaged_rows = None, {}
    if average_last_n:  # replaces the best checkpoint
        averaged = average_last(trainer, run, average_last_n)
        what = ("the averaged weights (training.average_last: steps "
                + ", ".join(map(str, averaged["steps"])) + ")")
        check_exportable(parts.model, None, None, weights=what)
        averaged_rows = averaged_metrics(parts.model, parts.evaluator, what)
    summary = {**summarize(history, best_step), **averaged_rows}
    if zero_shot_test is not None:
        summary["zero-shot test"] = zero_shot_test
    gate = zero_shot_gate(history, best_step, settings.metric,
                          averaged_rows.get("averaged dev")) if settings.zero_shot else None
    enforce(gate, settings.require_beats_zero_shot, run,  # recorded, then nothing exported
            dev=DevOutcome(summary=summary, best_step=best_step), data=records, history=history)
    return ChosenWeights(best_step=best_step, history=history, summary=summary,
                         averaged=averaged, gate=gate)


def summarize(history: list[dict], best_step: int | None) -> dict[str, dict[str, float]]:
    """Zero-shot and best-checkpoint dev metrics from the evaluation history."""
    summary: dict[str, dict[str, float]] = {}
    by_step = {entry["step"]: entry for entry in history if not entry.get("error")}
    if 0 in by_step:
        summary["zero-shot dev"] = {key: by_step[0][key] for key in METRIC_KEYS}
    if best_step is not None and best_step in by_step:
        # a stable key (the step is results.json's best_step; the card shows it)
        summary["best dev"] = {key: by_step[best_step][key] for key in METRIC_KEYS}
    for row, step in (("zero-shot guard", 0), ("best guard", best_step)):  # eval.guard_data
        entry = by_step.get(step, {})
        if all(isinstance(entry.get(f"guard_{key}"), float) for key in METRIC_KEYS):
            summary[row] = {key: entry[f"guard_{key}"] for key in METRIC_KEYS}
    return summary


def averaged_metrics(model, evaluator, what: str) -> dict[str, dict[str, float]]:
    """The averaged weights' ``averaged dev`` (and ``averaged guard``) summary rows; call on
    every rank. A refused (non-finite) evaluation refuses the export:
    :class:`~tapt.training.errors.NonFiniteTrainingError` naming ``what`` (the same on every
    rank: the outcome is rank 0's)."""
    rows = {}
    for row, measured in (("averaged dev", evaluator),
                          ("averaged guard", evaluator.guard_evaluator)):
        if measured is not None:
            outcome, _ = measured.measure(model)
            if outcome["error"]:
                raise NonFiniteTrainingError(
                    f"{what}: the {measured.name} evaluation was refused ({outcome['error']}); "
                    "nothing is exported (the checkpoints are kept)", [])
            rows[row] = {key: float(outcome["metrics"][key]) for key in METRIC_KEYS}
    return rows
