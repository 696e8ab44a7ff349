"""The files ``compare_recipes.py`` stores and reads back in a later session, checked.

A comparison spans sessions: it skips every arm whose ``arm.json`` exists (in ``--out``,
or in the committed ``--summary`` folder), so a damaged or hand-edited record would enter
the table silently. Each reader here raises :class:`StoredFileError` naming the file, the
field and what was expected, and what to do (remove the arm's folder: it is measured
again). An arm's ``arm.json`` must also agree with the per-query test file beside it,
which the paired test reads: the table's means and its p-values come from one model.

Hand-written because these are this script's own formats (tapt's result files are read
with :func:`tapt.analysis.result_files.read_result`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

from tapt.retrieval.metrics import METRIC_KEYS as METRICS
from tapt.util import json_file

PER_QUERY_FILE = "test-float32.json"
REMADE_FILE = "remade.json"


class StoredFileError(ValueError):
    """A stored file of the comparison that cannot be trusted; the message names it."""


def _redo(path: Path) -> str:
    return f"remove {path.parent} to measure that arm again"


def read_object(path: Path, what: str) -> dict:
    """``path`` as a JSON object, or :class:`StoredFileError` saying it is not ``what``."""
    data = read_json(path, what)
    if not isinstance(data, dict):
        raise StoredFileError(f"{path}: not a JSON object; {what} expected")
    return data


def read_json(path: Path, what: str) -> object:
    """``path`` parsed as JSON, or :class:`StoredFileError` saying it is not ``what``."""
    try:
        return json_file.read_json(path, error=StoredFileError)
    except FileNotFoundError:
        raise StoredFileError(f"{path}: missing ({what} expected)") from None
    except StoredFileError as err:
        raise StoredFileError(f"{err}; {what} expected") from None


def read_number(path: Path, data: dict, field: str, *, low: float = 0.0,
                high: float = math.inf) -> float:
    """``data[field]``, a number in [low, high], or :class:`StoredFileError` naming it."""
    value = data.get(field)
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not low <= value <= high:  # NaN fails both comparisons
        bounds = f"in [{low:g}, {high:g}]" if high < math.inf else f">= {low:g}"
        raise StoredFileError(f"{path}: field '{field}': expected a number {bounds}, got "
                              f"{value!r}")
    return float(value)


def _metrics(path: Path, data: dict, field: str) -> dict[str, float]:
    block = data.get(field)
    if not isinstance(block, dict):
        raise StoredFileError(f"{path}: field '{field}': expected an object of metrics, got "
                              f"{type(block).__name__}; {_redo(path)}")
    return {key: read_number(path, block, key, high=1.0) for key in METRICS} | {
        key: value for key, value in block.items() if key not in METRICS}


def read_measured(path: Path, what: str) -> dict:
    """A record with ``dev`` and ``test`` metric objects (each metric in [0, 1])."""
    row = read_object(path, what)
    for field in ("dev", "test"):
        row[field] = _metrics(path, row, field)
    return row


def read_arm(path: Path) -> dict:
    """An arm's ``arm.json``: ``model``, ``dev`` and ``test`` metrics in [0, 1],
    ``seconds`` and ``load_average`` >= 0; its ``test`` equal to the per-query test file
    beside it (when there is one)."""
    row = read_measured(path, "an arm record (arm.json of compare_recipes.py)")
    if not isinstance(row.get("model"), str):
        raise StoredFileError(f"{path}: field 'model': expected the model's path; "
                              f"{_redo(path)}")
    for field in ("seconds", "load_average"):
        read_number(path, row, field)
    per_query = path.with_name(PER_QUERY_FILE)
    if per_query.is_file():
        from tapt.analysis.result_files import read_result

        try:
            measured = read_result(per_query)
        except (OSError, ValueError) as err:
            raise StoredFileError(f"{err}; {_redo(path)}") from None
        for key in METRICS:
            if not math.isclose(row["test"][key], measured[key], abs_tol=1e-9):
                raise StoredFileError(
                    f"{path}: field 'test.{key}' is {row['test'][key]:.6f} but "
                    f"{per_query.name} beside it says {measured[key]:.6f}: one of the two "
                    f"was edited or replaced; {_redo(path)}")
    return row


def read_wall(path: Path) -> dict:
    """``wall.json``: the ``seconds`` making an arm's model took and the ``load_average``."""
    wall = read_object(path, "a wall-time record (wall.json)")
    read_number(path, wall, "seconds")
    read_number(path, wall, "load_average")
    return wall


def read_gnu_time(path: Path) -> tuple[float, int]:
    """GNU time's ``-f '%e %M'`` file: (wall seconds, peak RSS in KiB), from its last line
    (an earlier line may be a 'Command exited with non-zero status' note)."""
    try:
        fields = path.read_text(encoding="utf-8").split()[-2:]
        wall, rss = float(fields[0]), int(fields[1])
    except (OSError, UnicodeDecodeError, ValueError, IndexError):
        raise StoredFileError(f"{path}: expected GNU time's 'SECONDS PEAK_KIB' line "
                              f"(remove it: the next training run writes it again)") from None
    if not (math.isfinite(wall) and wall >= 0 and rss >= 0):
        raise StoredFileError(f"{path}: negative or non-finite time or memory")
    return wall, rss


def read_run_summary(path: Path) -> dict | None:
    """``tapt train``'s ``results.json``: its ``summary`` when the run finished, else None
    (no file, or a run that stopped: ``tapt train`` resumes it)."""
    if not path.is_file():
        return None
    results = read_object(path, "tapt train's results.json")
    if results.get("status") != "finished":
        return None
    summary = results.get("summary")
    if not isinstance(summary, dict):
        raise StoredFileError(f"{path}: field 'summary': expected an object in a finished "
                              "run's results")
    return summary


def trained_summary(results: Path, train: Callable[[], object]) -> dict:
    """:func:`read_run_summary` of ``results``, calling ``train()`` first when the run has
    not finished (``tapt train`` makes or resumes it); a run still unfinished after it
    stops the comparison."""
    summary = read_run_summary(results)
    if summary is None:
        train()
        summary = read_run_summary(results)
        if summary is None:
            raise SystemExit(f"{results}: tapt train exited 0 but its run is not finished")
    return summary


def read_remade(path: Path) -> dict:
    """``remade.json`` of a model trained again: ``metric`` (a name), ``recorded_dev`` in
    [0, 1] and ``remade_dev`` in [0, 1] or null (the remade run recorded no dev)."""
    data = read_object(path, "a remade-model record (remade.json of compare_recipes.py)")
    if not isinstance(data.get("metric"), str):
        raise StoredFileError(f"{path}: field 'metric': expected the dev metric's name")
    read_number(path, data, "recorded_dev", high=1.0)
    if data.get("remade_dev") is not None:
        read_number(path, data, "remade_dev", high=1.0)
    return data


def read_merge(path: Path, field: str) -> list:
    """``merge.json`` of ``tapt soup``/``tapt merge``: the list under ``field``
    (``soup.ingredients`` or ``weights``)."""
    data: object = read_object(path, "a merge record (merge.json of tapt soup/merge)")
    for part in field.split("."):
        data = data.get(part) if isinstance(data, dict) else None
    if not isinstance(data, list) or not data:
        raise StoredFileError(f"{path}: field '{field}': expected a non-empty list; remove "
                              f"{path.parent} to make it again")
    return data
