"""The records of a ``tapt train`` run folder that ``tapt report`` states beside the dev
curve: how dev was carved and what train was decontaminated against (``results.json``'s
``dev_carve`` and ``decontaminated``), the test result's seen and novel queries
(``test.json``'s ``train_overlap``) and the zero-shot gate (``results.json``'s
``zero_shot_gate``, else worked out from the dev history). Each is checked as it is read: a
malformed one is an error naming the file and the field; an absent one (nothing carved or
decontaminated, no train split, no test) is left out. The rendering is :mod:`tapt.run_folder.split_records`' and
:mod:`tapt.training.zero_shot_gate`'s, shared with the model card.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from tapt.data.overlap import NOVEL, SEEN
from tapt.retrieval.metrics import METRIC_KEYS
from tapt.run_folder.split_records import record_problem
from tapt.run_folder.records import FINISHED
from tapt.training.zero_shot_gate import GATE_KEY, gate_problem, zero_shot_gate
from tapt.util.json_file import read_json

TEST_FILE = "test.json"


def split_records(results: Mapping, results_file: Path, test_file: Path) -> dict[str, dict]:
    """``dev_carve`` and ``decontaminated`` of ``results`` (read from ``results_file``) and
    ``train_overlap`` of ``test_file`` (when there is one), each checked."""
    found = {key: results[key] for key in ("dev_carve", "decontaminated")
             if results.get(key) is not None}
    checked = {key: (record, results_file) for key, record in found.items()}
    if test_file.is_file():
        test = _read(test_file)
        if test.get("train_overlap") is not None:
            checked["train_overlap"] = (test["train_overlap"], test_file)
    for key, (record, path) in checked.items():
        problem = record_problem(key, record)
        if problem is not None:
            raise ValueError(f"{path}: field '{problem[0]}': {problem[1]}")
    return {key: record for key, (record, _) in checked.items()}


def _read(path: Path) -> dict:
    try:
        data = read_json(path, encoding="utf-8-sig")
    except (OSError, ValueError, RecursionError) as err:
        raise ValueError(f"{path}: cannot read ({type(err).__name__}: {err})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object")  # noqa: TRY004 (a malformed file)
    return data


def run_gate(results: Mapping, results_file: Path, history: Sequence[Mapping],
             best_step: int | None, metric: str,
             summary: Mapping[str, Mapping[str, float]]) -> dict | None:
    """The run's ``zero_shot_gate`` record, checked; a run that recorded none (one still
    training, or stopped) gets it worked out from its dev history (None without a zero-shot
    evaluation), with ``exported: None`` unless the run finished: nothing is in ``final/``
    yet."""
    if results.get(GATE_KEY) is not None:
        problem = gate_problem(results[GATE_KEY])
        if problem is not None:
            field = f"{GATE_KEY}.{problem[0]}" if problem[0] else GATE_KEY
            raise ValueError(f"{results_file}: field '{field}': {problem[1]}")
        return dict(results[GATE_KEY])
    if not any(entry["step"] == 0 for entry in history):
        return None
    gate = zero_shot_gate(history, best_step, metric, summary.get("averaged dev"))
    if results.get("status") != FINISHED:
        gate["exported"] = None
    return gate


def overlap_rows(section: Mapping | None, label: str = "test"
                 ) -> dict[str, dict[str, float | None]]:
    """``{"test, seen (196 queries)": metrics, ...}`` for a table of the four metrics (a
    metric a part lacks is None)."""
    if not section:
        return {}
    metrics = section.get("metrics", {})
    return {f"{label}, {part} ({section[part]:,} queries)":
            {key: metrics[part].get(key) for key in METRIC_KEYS}
            for part in (SEEN, NOVEL) if part in metrics}
