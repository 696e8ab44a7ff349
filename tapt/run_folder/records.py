"""What a run folder records of its run, written whole and read back checked:
``results.json`` (:func:`write_results`; its fields' checks: :func:`best_step_problem`,
:func:`metrics_row_problem`) and ``metrics.jsonl``, the dev evaluation history
(:func:`read_history`, each line checked by :func:`history_problem`)."""

from __future__ import annotations

import json
import logging

from tapt.data.lines import DataError
from tapt.retrieval.metrics import METRIC_KEYS
from tapt.run_folder.layout import RunDir
from tapt.util.files import atomic_write_json
from tapt.util.finite import metric_value
from tapt.util.provenance import provenance

logger = logging.getLogger(__name__)


def write_results(run: RunDir, results: dict) -> None:
    """``results.json``, written whole or not at all, secrets redacted, with its
    :func:`~tapt.util.provenance.provenance` (versions, date, command)."""
    atomic_write_json(run.results_file, {**results, "provenance": provenance()})


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
