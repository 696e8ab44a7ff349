"""benchmarks/compare_recipes.py: arms made from other arms' runs.

A sweep's row is its picked run's (not measured again); an arm whose source model is gone
(only its row kept in ``--summary``, as after a session ends) trains that source again,
checks the new run's dev against the kept row, and uses the new model. ``tapt`` is replaced
by a fake that writes a finished run, so nothing trains here.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

REPO = Path(__file__).resolve().parents[2]
METRIC = "binary_ndcg@10"


@pytest.fixture
def compare_recipes(benchmark_module):
    return benchmark_module("compare_recipes")


def write_arm(folder: Path, dev: float, per_query: dict[str, float], seconds: float) -> dict:
    """An arm's ``arm.json`` and its per-query test file, as compare_recipes writes them."""
    from tapt.retrieval.metrics import METRIC_KEYS

    folder.mkdir(parents=True)
    mean = sum(per_query.values()) / len(per_query)
    (folder / "test-float32.json").write_text(json.dumps(
        {**dict.fromkeys(METRIC_KEYS, mean), "evaluated": {"model": "m", "data": "d"},
         "per_query": {q: dict.fromkeys(METRIC_KEYS, v) for q, v in per_query.items()}}))
    row = {"model": str(folder / "final"), "dev": dict.fromkeys(METRIC_KEYS, dev),
           "test": dict.fromkeys(METRIC_KEYS, mean), "seconds": seconds,
           "load_average": 1.0, "in_loop_dev": dict.fromkeys(METRIC_KEYS, dev)}
    (folder / "arm.json").write_text(json.dumps(row))
    return row


@pytest.fixture
def comparison(compare_recipes, tmp_path, monkeypatch):
    """A comparison under ``tmp_path/runs`` whose ``tapt`` calls are recorded; ``train``
    writes a finished run whose best dev is ``remade_dev[0]``."""
    (tmp_path / "d").mkdir()
    args = argparse.Namespace(out=tmp_path / "runs", summary=tmp_path / "summary", seeds=[0],
                              recipe=REPO / "recipes" / "scifact.yaml", data=tmp_path / "d",
                              set=[], model="base-model", metric=METRIC, best_of=None)
    made = compare_recipes.Comparison(args)
    made.calls = []
    made.remade_dev = [0.7]
    monkeypatch.setattr(made, "dev_settings", lambda: SimpleNamespace(metric=METRIC))

    def measured(*_args, **_kwargs):
        raise AssertionError("measured again")

    monkeypatch.setattr(made, "dev", measured)
    monkeypatch.setattr(made, "test", measured)

    def fake_tapt(*command: str, timed=None) -> None:
        made.calls.append(command)
        if command[0] == "train":
            run = Path(next(a.split("=", 1)[1] for a in command
                            if a.startswith("output_dir=")))
            (run / "final").mkdir(parents=True)
            (run / "recipe.yaml").write_text("{}")
            (run / "results.json").write_text(json.dumps(
                {"status": "finished",
                 "summary": {"best dev": {METRIC: made.remade_dev[0]}}}))
        elif command[0] == "mine":
            Path(command[command.index("--output") + 1]).write_text("")
        elif command[0] == "dapt":
            run = Path(next(a.split("=", 1)[1] for a in command
                            if a.startswith("output_dir=")))
            (run / "final").mkdir(parents=True)

    monkeypatch.setattr(compare_recipes, "tapt", fake_tapt)
    return made


def test_a_sweep_row_is_its_dev_pick_not_measured_again(compare_recipes, comparison):
    runs = comparison.args.out
    write_arm(runs / "mnrl" / "seed0", 0.5, {"q1": 0.2, "q2": 0.4}, 60)
    picked = write_arm(runs / "lr-5e-5" / "seed0", 0.7, {"q1": 0.9, "q2": 0.5}, 120)
    write_arm(runs / "lr-1e-4" / "seed0", 0.6, {"q1": 0.1, "q2": 0.3}, 180)
    row = comparison.run("sweep-lr", 0)
    assert row["picked"] == "lr-5e-5"
    assert row["dev"] == picked["dev"] and row["test"] == picked["test"]
    assert row["seconds"] == 0 and comparison.calls == []
    sweep = runs / "sweep-lr" / "seed0"
    assert (sweep / "test-float32.json").read_bytes() == \
        (runs / "lr-5e-5" / "seed0" / "test-float32.json").read_bytes()
    assert (comparison.args.summary / "sweep-lr" / "seed0" / "arm.json").is_file()
    # the table's minutes: nothing of its own, plus its three runs (60 + 120 + 180 s)
    assert compare_recipes.runs_minutes(comparison, "sweep-lr", 1) == pytest.approx(6.0)
    assert compare_recipes.runs_minutes(comparison, "lr-5e-5", 1) is None


def test_a_gone_source_is_trained_again_and_checked(comparison, capsys):
    kept = write_arm(comparison.args.summary / "mnrl" / "seed0", 0.7, {"q1": 0.5}, 60)
    row = comparison.trained("mnrl", 0)
    folder = comparison.args.out / "mnrl" / "seed0"
    assert row["dev"] == kept["dev"]
    assert (folder / "final").is_dir() and (folder / "arm.json").is_file()
    assert not folder.with_name("seed0.remade").exists()
    (train,) = comparison.calls
    assert train[0] == "train" and f"output_dir={folder}.remade" in train
    assert "training.seed=0" in train
    assert json.loads((folder / "remade.json").read_text()) == {
        "metric": METRIC, "recorded_dev": 0.7, "remade_dev": 0.7}
    kept_copy = comparison.args.summary / "mnrl" / "seed0" / "remade.json"
    assert kept_copy.read_bytes() == (folder / "remade.json").read_bytes()
    assert "equal to the recorded" in capsys.readouterr().out
    comparison.trained("mnrl", 0)  # now on disk: not trained a third time
    assert len(comparison.calls) == 1


def test_a_remade_source_that_differs_is_said_and_kept(comparison, capsys):
    write_arm(comparison.args.summary / "mnrl" / "seed0", 0.7, {"q1": 0.5}, 60)
    comparison.remade_dev[0] = 0.69
    comparison.trained("mnrl", 0)
    remade = json.loads((comparison.args.out / "mnrl" / "seed0" / "remade.json").read_text())
    assert remade == {"metric": METRIC, "recorded_dev": 0.7, "remade_dev": 0.69}
    assert "warning: mnrl seed 0 trained again" in capsys.readouterr().out


def test_a_second_round_mines_with_the_remade_first_model(comparison):
    write_arm(comparison.args.summary / "mnrl" / "seed0", 0.7, {"q1": 0.5}, 60)
    overrides = comparison.mined("mined-round2", 0)
    train, mine = comparison.calls
    teacher = comparison.args.out / "mnrl" / "seed0" / "final"
    assert train[0] == "train" and mine[0] == "mine"
    assert mine[mine.index("--retriever") + 1] == str(teacher)
    assert teacher.is_dir()
    mined = comparison.args.out / "mined" / "mined-round2-mnrl-seed0.jsonl"
    assert overrides == [f"data.mined_negatives={mined}", "data.negatives_per_query=3"]


def test_a_remake_never_overwrites_what_the_folder_holds(comparison):
    write_arm(comparison.args.summary / "mnrl" / "seed0", 0.7, {"q1": 0.5}, 60)
    folder = comparison.args.out / "mnrl" / "seed0"
    comparison.done("mnrl", 0)  # copies the kept row into the folder
    (folder / "recipe.yaml").write_text("the user's")
    with pytest.raises(SystemExit, match="already holds recipe.yaml"):
        comparison.trained("mnrl", 0)
    assert (folder / "recipe.yaml").read_text() == "the user's"


def test_the_table_names_every_remade_model(compare_recipes, comparison):
    summary = comparison.args.summary
    comparison.args.seeds = [0, 1]
    rows = {"mnrl": [write_arm(summary / "mnrl" / f"seed{seed}", 0.7, {"q1": 0.5}, 60)
                     for seed in (0, 1)]}
    assert compare_recipes.remade_note(comparison, rows) == ""
    (summary / "mnrl" / "seed1" / "remade.json").write_text(json.dumps(
        {"metric": METRIC, "recorded_dev": 0.77110, "remade_dev": 0.77163}))
    note = compare_recipes.remade_note(comparison, rows)
    assert "mnrl seed 1 (dev 0.7711 recorded, 0.7716 remade)" in note
    assert "seed 0" not in note


def test_a_damaged_remade_record_is_refused(compare_recipes, comparison):
    from arm_records import StoredFileError

    summary = comparison.args.summary
    rows = {"mnrl": [write_arm(summary / "mnrl" / "seed0", 0.7, {"q1": 0.5}, 60)]}
    (summary / "mnrl" / "seed0" / "remade.json").write_text(json.dumps(
        {"metric": METRIC, "recorded_dev": 0.7, "remade_dev": 7.1}))
    with pytest.raises(StoredFileError, match="remade.json: field 'remade_dev'"):
        compare_recipes.remade_note(comparison, rows)


def test_a_dapt_arm_trains_from_its_seeds_dapt_model_made_once(compare_recipes, comparison):
    """``dapt-mlm-1k``: ``tapt dapt`` on --data's corpus with the arm's overrides, the
    seed and --set's precision, then ``tapt train`` of scifact-from-dapt.yaml from its
    ``final/``; a second seed gets its own DAPT run, the same seed reuses it."""
    comparison.args.set = ["data.decontaminate=[test]", "training.bf16=false"]
    first = comparison.train_overrides("dapt-mlm-1k", 0)
    again = comparison.train_overrides("dapt-mlm-1k", 0)
    other = comparison.train_overrides("dapt-mlm-1k", 1)
    dapt_calls = [call for call in comparison.calls if call[0] == "dapt"]
    assert len(dapt_calls) == 2
    call = dapt_calls[0]
    folder = comparison.args.out / "dapt" / "dapt-mlm-1k-seed0"
    assert call[1] == compare_recipes.DAPT_RECIPE
    assert f"data.path={comparison.args.data}" in call and f"output_dir={folder}" in call
    assert {"training.seed=0", "data.seed=0", "training.bf16=false",
            "data.max_passages=1000"} <= set(call)
    assert not any(item.startswith("data.decontaminate") for item in call)  # a TAPT key
    assert f"model.name={folder / 'final'}" in first and first == again
    assert f"model.name={comparison.args.out / 'dapt' / 'dapt-mlm-1k-seed1' / 'final'}" \
        in other
    assert compare_recipes.ARMS["dapt-mlm-1k"].recipe == "recipes/scifact-from-dapt.yaml"
    assert comparison.train_overrides("mnrl", 0) == ["training.seed=0"]
