"""What a run folder records of its run, written whole and read back checked:
``results.json`` (:class:`RunResults`, which every TAPT and DAPT writer fills, and the one
builder of its content, :func:`results_content`, written by :func:`write_results`; its
fields' checks: :func:`best_step_problem`, :func:`metrics_row_problem`) and
``metrics.jsonl``, the dev evaluation history (:func:`read_history`, each line checked by
:func:`history_problem`)."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

from tapt.data.lines import DataError
from tapt.retrieval.metrics import METRIC_KEYS
from tapt.run_folder.layout import RunDir
from tapt.util.files import atomic_write_json
from tapt.util.finite import metric_value
from tapt.util.provenance import provenance

logger = logging.getLogger(__name__)


GATE_KEY = "zero_shot_gate"
"""``results.json``'s field of the zero-shot gate (:mod:`tapt.training.zero_shot_gate`)."""


FINISHED = "finished"
STOPPED_NONFINITE = "stopped: non-finite"


@dataclass(frozen=True)
class DevOutcome:
    """A TAPT run's dev outcome: the summary rows and the best checkpoint's step."""

    summary: dict[str, dict[str, float]]
    """``zero-shot dev``, ``best dev`` (guard, averaged, test rows), as the card shows them."""
    best_step: int | None


@dataclass(frozen=True)
class ExportOutcome:
    """What a finished TAPT run exported and how its dev evaluations ran."""

    export: dict
    """What the exported weights are (``{"kind": "best", ...}`` or the average's record)."""
    eval_dtype: str | None
    """The dtype of the last dev evaluation (None: none ran)."""
    refused_evaluations: int
    """Dev evaluations refused for non-finite embeddings."""


@dataclass(frozen=True)
class DaptFacts:
    """What a DAPT run trained on."""

    objective: str
    sequence_length: int
    training_passages: int
    held_out_passages: int


@dataclass(frozen=True)
class NonFiniteRecord:
    """The non-finite guard's record of a finished run: the skipped steps and its events."""

    skipped_steps: int
    events: list


@dataclass(frozen=True)
class NonFiniteStop:
    """A run the non-finite guard stopped: its events and the last complete checkpoint
    (None when none was kept)."""

    events: list
    last_checkpoint: str | None


@dataclass(frozen=True)
class RunResults:
    """``results.json``'s content, typed: a TAPT or DAPT run finished, stopped on a
    non-finite value, or refused by the zero-shot gate. Each writer fills the parts it has;
    :func:`results_content` is the one place that turns it into the file's fields."""

    status: str
    history: list[dict]
    error: str | None = None
    dapt: DaptFacts | None = None
    dev: DevOutcome | None = None
    exported: ExportOutcome | None = None
    training_bf16: bool | None = None
    nonfinite: NonFiniteRecord | None = None
    stop: NonFiniteStop | None = None
    data: dict[str, Any] = field(default_factory=dict)
    """What the run recorded of its data: ``relevance``, ``dev_carve``, ``decontaminated``,
    ``pseudo_queries``, ``weak_pairs`` (those made)."""
    zero_shot_gate: dict | None = None


def results_content(results: RunResults) -> dict:
    """``results.json``'s fields (before provenance), in the order tapt has always written
    them: status and error, what was trained, the outcome, precision, non-finite records,
    the data records, the gate, the history. The only builder of that content."""
    content: dict[str, Any] = {"status": results.status}
    if results.error is not None:
        content["error"] = results.error
    if results.dapt is not None:
        facts = results.dapt
        content.update(objective=facts.objective, sequence_length=facts.sequence_length,
                       training_passages=facts.training_passages,
                       held_out_passages=facts.held_out_passages)
    if results.dev is not None:
        content.update(summary=results.dev.summary, best_step=results.dev.best_step)
    if results.exported is not None:
        content["export"] = results.exported.export
    if results.training_bf16 is not None:
        content["training_bf16"] = results.training_bf16
    if results.exported is not None:
        content["eval_dtype"] = results.exported.eval_dtype
    if results.nonfinite is not None:
        content.update(nonfinite_steps=results.nonfinite.skipped_steps,
                       nonfinite_events=results.nonfinite.events)
    if results.stop is not None:
        content["nonfinite_events"] = results.stop.events
    if results.exported is not None:
        content["refused_evaluations"] = results.exported.refused_evaluations
    if results.stop is not None:
        content["last_checkpoint"] = results.stop.last_checkpoint
    content.update(results.data)
    if results.zero_shot_gate is not None:
        content[GATE_KEY] = results.zero_shot_gate
    content["history"] = results.history
    return content


def write_results(run: RunDir, results: RunResults) -> None:
    """``results.json`` (:func:`results_content`), written whole or not at all, secrets
    redacted, with its :func:`~tapt.util.provenance.provenance` (versions, date, command);
    anything but a :class:`RunResults` is a ``TypeError`` (no writer composes the file's
    fields itself)."""
    if not isinstance(results, RunResults):
        raise TypeError(f"results.json is written from a RunResults, got {type(results).__name__}")
    atomic_write_json(run.results_file, {**results_content(results), "provenance": provenance()})


def read_history(run: RunDir, *, require_metrics: bool = False) -> list[dict]:
    """Dev evaluations from ``metrics.jsonl``, each checked; a resumed run keeps the last
    entry per step. ``require_metrics``: every entry that is not a refused (non-finite)
    evaluation carries all of :data:`METRIC_KEYS` (a TAPT run's do)."""
    if not run.metrics_file.is_file():
        return []
    by_step: dict[int, dict] = {}
    text = run.metrics_file.read_text(encoding="utf-8")
    lines = text.splitlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as err:
            if number == len(lines) and not text.endswith("\n"):
                # a crash while appending left half a line: skip it
                logger.warning("%s:%d: incomplete last line skipped", run.metrics_file, number)
                continue
            raise DataError(run.metrics_file, f"not an evaluation record ({err})", number,
                            "step") from None
        problem = history_problem(entry, require_metrics)
        if problem is not None:
            field, message = problem
            raise DataError(run.metrics_file, message, number, field)
        by_step[entry["step"]] = entry
    return [by_step[step] for step in sorted(by_step)]


def history_problem(entry, require_metrics: bool = False) -> tuple[str, str] | None:
    """``(field, what is wrong)`` with one ``metrics.jsonl`` entry, or None: the step a
    whole number >= 0, each metric present (``guard_`` ones too) a finite number in [0, 1]
    unless the entry is a refused evaluation (``error``)."""
    if not isinstance(entry, dict):
        return "step", "not an evaluation record (not a JSON object)"
    step = entry.get("step")
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        return "step", f"expected a whole number >= 0, got {step!r}"
    if entry.get("error"):
        return None
    keys = [key for key in METRIC_KEYS if key in entry]
    missing = [key for key in METRIC_KEYS if key not in entry]
    if missing and (require_metrics or keys):
        return missing[0], "missing (every dev evaluation records all four metrics)"
    if not entry.get("guard_error"):  # a refused guard evaluation records None
        keys += [f"guard_{key}" for key in METRIC_KEYS if f"guard_{key}" in entry]
    for key in keys:
        value = entry[key]
        if not metric_value(value):
            return key, f"expected a finite number in [0, 1], got {value!r}"
    return None


def best_step_problem(value) -> str | None:
    """What is wrong with ``results.json``'s ``best_step`` (a whole number >= 0, or null
    when no checkpoint was kept), or None."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
        return None
    return f"expected a whole number >= 0 or null, got {value!r}"


def metrics_row_problem(row: str, metrics) -> tuple[str, str] | None:
    """``(field, what is wrong)`` with ``results.json``'s summary row ``row`` (each of
    :data:`METRIC_KEYS` a finite number in [0, 1]): the field is ``summary.ROW`` or
    ``summary.ROW.METRIC``; None when the row is fine."""
    if not isinstance(metrics, dict):
        return f"summary.{row}", f"expected an object of metrics, got {metrics!r}"
    for key in METRIC_KEYS:
        value = metrics.get(key)
        if not metric_value(value):
            return f"summary.{row}.{key}", f"expected a finite number in [0, 1], got {value!r}"
    return None
