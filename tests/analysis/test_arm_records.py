"""benchmarks/arm_records.py: the comparison's stored records are read back checked.

The fixtures are the committed SciFact records (``benchmarks/results/levers-scifact``),
copied and then damaged the ways a hand edit, a truncated copy or a swapped file would.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
spec = importlib.util.spec_from_file_location("arm_records", BENCHMARKS / "arm_records.py")
arm_records = importlib.util.module_from_spec(spec)
spec.loader.exec_module(arm_records)
StoredFileError = arm_records.StoredFileError

COMMITTED = BENCHMARKS / "results" / "levers-scifact"


@pytest.fixture
def arm(tmp_path) -> Path:
    """A copy of the committed MNRL seed-0 folder: arm.json and its per-query test file."""
    folder = tmp_path / "mnrl" / "seed0"
    shutil.copytree(COMMITTED / "mnrl" / "seed0", folder)
    return folder / "arm.json"


def _edit(path: Path, **changes) -> None:
    row = json.loads(path.read_text())
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        target = row
        for part in parents:
            target = target[part]
        target[last] = value
    path.write_text(json.dumps(row))


def test_every_committed_record_passes_the_checks():
    records = sorted(COMMITTED.glob("*/*/arm.json"))
    assert len(records) >= 20
    for path in records:
        row = arm_records.read_arm(path)
        assert 0 < row["test"]["binary_ndcg@10"] < 1


def test_a_test_figure_that_disagrees_with_its_per_query_file_is_refused(arm):
    row = json.loads(arm.read_text())
    row["test"]["binary_ndcg@10"] += 0.01  # the table would show a gain the test never saw
    arm.write_text(json.dumps(row))
    with pytest.raises(StoredFileError) as err:
        arm_records.read_arm(arm)
    message = str(err.value)
    assert str(arm) in message and "'test.binary_ndcg@10'" in message
    assert "test-float32.json" in message and f"remove {arm.parent}" in message


def test_a_swapped_per_query_file_is_refused(arm):
    shutil.copyfile(COMMITTED / "lr-2e-4" / "seed0" / "test-float32.json",
                    arm.with_name("test-float32.json"))
    with pytest.raises(StoredFileError, match="'test.binary_ndcg@10' is 0.673115 but"):
        arm_records.read_arm(arm)


@pytest.mark.parametrize(("field", "value", "named"), [
    ("dev__binary_ndcg@10", 1.5, "field 'binary_ndcg@10': expected a number in [0, 1]"),
    ("dev__mrr@10", "0.7", "field 'mrr@10': expected a number in [0, 1], got '0.7'"),
    ("dev", [0.7], "field 'dev': expected an object of metrics, got list"),
    ("seconds", -3, "field 'seconds': expected a number >= 0"),
    ("load_average", True, "field 'load_average': expected a number >= 0, got True"),
    ("model", None, "field 'model': expected the model's path"),
])
def test_a_damaged_field_is_named(arm, field, value, named):
    _edit(arm, **{field: value})
    with pytest.raises(StoredFileError) as err:
        arm_records.read_arm(arm)
    assert str(arm) in str(err.value) and named in str(err.value)


def test_a_nan_metric_is_refused(arm):
    arm.write_text(arm.read_text().replace('"recall@100": 1.0', '"recall@100": NaN', 1))
    with pytest.raises(StoredFileError, match=r"field 'recall@100'.*got nan"):
        arm_records.read_arm(arm)


def test_a_truncated_record_names_the_file_and_line(arm):
    arm.write_text(arm.read_text()[:200])
    with pytest.raises(StoredFileError,
                       match=rf"{arm}: not JSON \(.* at line \d+\); an arm record"):
        arm_records.read_arm(arm)


def test_a_damaged_per_query_file_is_named_with_what_to_do(arm):
    per_query = arm.with_name("test-float32.json")
    per_query.write_text('{"binary_ndcg@10": 0.6}')
    with pytest.raises(StoredFileError) as err:
        arm_records.read_arm(arm)
    assert str(per_query) in str(err.value) and f"remove {arm.parent}" in str(err.value)


def test_gnu_time_reads_the_last_line_and_refuses_other_text(tmp_path):
    timed = tmp_path / "seed0.time.txt"
    timed.write_text("Command exited with non-zero status 1\n623.90 5486052\n")
    assert arm_records.read_gnu_time(timed) == (623.90, 5486052)
    timed.write_text("")  # GNU time was killed before it wrote
    with pytest.raises(StoredFileError, match="SECONDS PEAK_KIB"):
        arm_records.read_gnu_time(timed)


def test_an_unfinished_run_is_none_and_a_finished_one_needs_its_summary(tmp_path):
    results = tmp_path / "results.json"
    assert arm_records.read_run_summary(results) is None  # not trained yet
    results.write_text(json.dumps({"status": "stopped", "summary": {}}))
    assert arm_records.read_run_summary(results) is None  # tapt train resumes it
    results.write_text(json.dumps({"status": "finished", "summary": "best dev 0.8"}))
    with pytest.raises(StoredFileError, match="field 'summary'"):
        arm_records.read_run_summary(results)
    results.write_text(json.dumps({"status": "finished", "summary": {"best dev": {}}}))
    assert arm_records.read_run_summary(results) == {"best dev": {}}


def test_a_merge_record_without_its_list_is_refused(tmp_path):
    merge = tmp_path / "soup" / "merge.json"
    merge.parent.mkdir()
    merge.write_text(json.dumps({"soup": {"ingredients": ["/runs/mnrl/seed0"]},
                                 "weights": [1.0, 0.0]}))
    assert arm_records.read_merge(merge, "soup.ingredients") == ["/runs/mnrl/seed0"]
    assert arm_records.read_merge(merge, "weights") == [1.0, 0.0]
    merge.write_text(json.dumps({"soup": {"ingredients": []}}))
    with pytest.raises(StoredFileError, match="'soup.ingredients': expected a non-empty"):
        arm_records.read_merge(merge, "soup.ingredients")


def test_a_zero_shot_record_of_compare_negatives_is_checked(tmp_path):
    cached = tmp_path / "zero-shot.json"
    metrics = {"binary_ndcg@10": 0.3, "graded_ndcg@10": 0.2, "mrr@10": 0.4,
               "recall@100": 0.9}
    cached.write_text(json.dumps({"setting": "zero-shot", "dev": metrics, "test": metrics}))
    assert arm_records.read_measured(cached, "zero-shot")["test"] == metrics
    cached.write_text(json.dumps({"setting": "zero-shot", "dev": metrics,
                                  "test": {**metrics, "mrr@10": -0.1}}))
    with pytest.raises(StoredFileError, match=rf"{cached}: field 'mrr@10'"):
        arm_records.read_measured(cached, "zero-shot")


def test_training_runs_only_for_an_unfinished_run_and_must_finish_it(tmp_path):
    results = tmp_path / "results.json"
    finished = {"status": "finished", "summary": {"best dev": {"binary_ndcg@10": 0.8}}}
    calls = []

    def train():
        calls.append(1)
        results.write_text(json.dumps(finished))

    assert arm_records.trained_summary(results, train) == finished["summary"]
    assert arm_records.trained_summary(results, train) == finished["summary"]
    assert len(calls) == 1  # the second call found the finished run
    results.write_text(json.dumps({"status": "stopped"}))
    with pytest.raises(SystemExit, match="exited 0 but its run is not finished"):
        arm_records.trained_summary(results, lambda: None)
