"""Does the trained model beat its base model on dev? The zero-shot gate of a TAPT run.

With ``eval.zero_shot`` the dev history starts with the base model's evaluation (step 0).
At the end of training the exported weights' dev score (the best checkpoint's, or under
``training.average_last`` the average's) is compared with it on ``eval.metric``; a score
that is not strictly above says the fine-tune did not help (the trainer still exports its
best checkpoint, which may be worse than the base model it started from).

The outcome is ``results.json``'s ``zero_shot_gate`` record::

    {"metric": "binary_ndcg@10", "zero_shot": 0.61, "best": 0.60, "best_step": 40,
     "compared": "best", "exported": "best", "beats_zero_shot": false}

(``"averaged": x`` and ``"compared": "averaged"`` under ``training.average_last``;
``beats_zero_shot`` is null when a score is missing, e.g. a refused zero-shot evaluation).
``compared`` names the weights the gate scored; ``exported`` the weights in ``final/``:
the same, or null when the gate refused the export (older records lack ``compared``:
their ``exported`` named the compared weights, refused or not).
A run that does not beat says so at the end, in ``results.json`` and in the model card
(:data:`NOT_BEATEN`); with ``eval.require_beats_zero_shot`` it is an error
(:func:`enforce`): ``results.json`` is written first, and nothing is exported, as after a
non-finite stop. A gate that cannot be checked (null) fails the requirement too.

DAPT has no gate: it exports its last weights, and continued pretraining is expected to
move the dev retrieval score of the encoder as it is (TAPT follows it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tapt.cards.common import warning_lines
from tapt.retrieval.metrics import METRIC_KEYS
from tapt.run_folder.layout import RunDir
from tapt.run_folder.records import GATE_KEY, DevOutcome, RunResults, write_results
from tapt.training.errors import ZeroShotGateError
from tapt.util.finite import metric_value
from tapt.util.process_group import is_main_process

__all__ = ["GATE_KEY", "NOT_BEATEN", "REFUSED_STATUS", "compared_weights", "enforce",
           "gate_lines", "gate_message", "gate_problem", "zero_shot_gate"]

NOT_BEATEN = "does not beat its base model on dev"
REFUSED_STATUS = "refused: does not beat its base model on dev"


def zero_shot_gate(history: Sequence[Mapping], best_step: int | None, metric: str,
                   averaged: Mapping[str, float] | None = None) -> dict:
    """The gate record of a dev ``history`` (step 0: zero-shot; refused evaluations are
    skipped) and its ``best_step``; ``averaged``: the averaged weights' dev metrics, which
    are then what is exported and compared."""
    by_step = {entry["step"]: entry for entry in history if not entry.get("error")}
    zero = by_step.get(0, {}).get(metric)
    best = by_step.get(best_step, {}).get(metric) if best_step is not None else None
    record: dict = {"metric": metric, "zero_shot": zero, "best": best, "best_step": best_step,
                    "compared": "best"}
    compared = best
    if averaged is not None:
        compared = record["averaged"] = averaged.get(metric)
        record["compared"] = "averaged"
    record["exported"] = record["compared"]  # until enforce refuses the export
    record["beats_zero_shot"] = None if zero is None or compared is None else compared > zero
    return record


def compared_weights(gate: Mapping) -> str:
    """Which weights a gate record scored: ``best`` or ``averaged`` (an older record without
    ``compared`` named them in ``exported``)."""
    return gate.get("compared") or gate.get("exported") or "best"


def gate_message(gate: Mapping | None) -> str | None:
    """The warning line of a gate that did not pass (None when it passed, or there is none)."""
    if gate is None or gate.get("beats_zero_shot") is True:
        return None
    metric, zero = gate.get("metric"), gate.get("zero_shot")
    averaged = compared_weights(gate) == "averaged"
    score = gate.get("averaged") if averaged else gate.get("best")
    if gate.get("beats_zero_shot") is None:
        return (f"whether this model beats its base model on dev could not be checked (dev "
                f"{metric}: zero-shot {_shown(zero)}, exported {_shown(score)})")
    what = ("the averaged weights' dev" if averaged
            else f"the best dev (step {gate.get('best_step')})")
    return (f"this model {NOT_BEATEN}: {what} {metric} {score:.4f} is not above the "
            f"zero-shot {zero:.4f}")


def _shown(value) -> str:
    return "not recorded" if value is None or isinstance(value, bool) else f"{value:.4f}"


def enforce(gate: Mapping | None, required: bool, run: RunDir, *, dev: DevOutcome,
            data: dict, history: list[dict]) -> None:
    """With ``required`` (``eval.require_beats_zero_shot``) and a gate that did not pass:
    ``results.json`` (the ``dev`` outcome, the ``data`` records and the ``history``, with the
    status, the error and the gate, whose ``exported`` is null: nothing is; main process)
    is written, then
    :class:`~tapt.training.errors.ZeroShotGateError` is raised on every rank, before
    anything is exported. Otherwise nothing happens."""
    message = gate_message(gate)
    if not required or message is None:
        return
    error = (f"{message}; eval.require_beats_zero_shot refuses the export (results.json "
             f"records the run; the checkpoints are kept in {run.checkpoints})")
    refused = {**gate, "exported": None}
    if is_main_process():
        write_results(run, RunResults(status=REFUSED_STATUS, error=error, dev=dev, data=data,
                                      zero_shot_gate=refused, history=history))
    raise ZeroShotGateError(error, refused)


def gate_problem(gate) -> tuple[str, str] | None:
    """``(field, what is wrong)`` with a ``zero_shot_gate`` record read from a file, or None;
    the field is relative to the record (``zero_shot``, ...)."""
    if not isinstance(gate, dict):
        return "", f"expected an object, got {gate!r}"
    if gate.get("metric") not in METRIC_KEYS:
        return "metric", f"expected one of {', '.join(METRIC_KEYS)}, got {gate.get('metric')!r}"
    for key in ("zero_shot", "best", "averaged"):
        if gate.get(key) is not None and not metric_value(gate[key]):
            return key, f"expected a number in [0, 1] or null, got {gate[key]!r}"
    step = gate.get("best_step")
    if step is not None and (isinstance(step, bool) or not isinstance(step, int) or step < 0):
        return "best_step", f"expected a whole number >= 0 or null, got {step!r}"
    if gate.get("beats_zero_shot") not in (True, False, None):
        return "beats_zero_shot", f"expected true, false or null, got {gate['beats_zero_shot']!r}"
    if gate.get("compared", "best") not in ("best", "averaged"):
        return "compared", f"expected best or averaged, got {gate['compared']!r}"
    compared = compared_weights(gate)
    if "compared" not in gate and compared not in ("best", "averaged"):  # an older record
        return "exported", f"expected best or averaged, got {compared!r}"
    if "compared" in gate and gate.get("exported") not in (compared, None):
        return "exported", (f"expected {compared} (the compared weights) or null (nothing "
                            f"exported), got {gate.get('exported')!r}")
    zero, score = gate.get("zero_shot"), gate.get(compared)
    beats = None if zero is None or score is None else score > zero
    if gate.get("beats_zero_shot") != beats:
        return "beats_zero_shot", (f"says {gate.get('beats_zero_shot')!r}, but the recorded "
                                   f"scores (zero-shot {zero!r}, {compared} {score!r}) say "
                                   f"{beats!r}")
    return None


def gate_lines(gate: Mapping | None) -> list[str]:
    """A card's or report's Markdown lines on a gate that did not pass (bold, first thing a
    reader sees after the summary sentence); none when it passed."""
    return warning_lines(gate_message(gate))
