"""``tapt sweep``: a grid of recipe overrides x seeds, each trial a run folder, resumable,
the winner by mean dev (tapt.selection.sweep)."""

from __future__ import annotations

import json
import statistics

import pytest
import yaml

from tapt.cli import main
from tapt.recipe import RecipeError
from tapt.selection.sweep import plan_sweep, split_values
from tapt.training import contrastive


def no_training(*args, **kwargs):
    raise AssertionError("a trial was trained")


def test_a_2x2_sweep_runs_four_trials_picks_the_best_mean_dev_and_resumes(make_recipe,
                                                                          monkeypatch):
    recipe_file, output = make_recipe("grid", training={"max_steps": 2})
    command = ["sweep", str(recipe_file), "training.learning_rate=1e-4,5e-3", "--seeds", "0,1",
               "training.warmup_ratio=0.0"]  # a key=value after an option still counts
    assert main(command) == 0

    folder = output.with_name("grid-sweep")
    state = json.loads((folder / "sweep.json").read_text())
    trials = state["trials"]
    assert len(trials) == 4 and all(t["status"] == "finished" for t in trials)
    assert {t["seed"] for t in trials} == {"0", "1"}
    metric = state["metric"]
    runs = sorted(path for path in folder.iterdir() if path.is_dir())
    assert [path.name for path in runs] == sorted(t["name"] for t in trials)
    for run in runs:
        assert (run / "final").is_dir() and (run / "results.json").is_file()
        assert yaml.safe_load((run / "recipe.yaml").read_text())["output_dir"] == str(run)
    by_setting: dict[str, list[float]] = {}
    for trial in trials:
        assert 0.0 <= trial["dev"][metric] <= 1.0
        by_setting.setdefault(trial["setting"], []).append(trial["dev"][metric])
    assert sorted(by_setting) == ["training.learning_rate=1e-4", "training.learning_rate=5e-3"]
    means = {setting: statistics.fmean(values) for setting, values in by_setting.items()}
    assert state["winner"] == max(means, key=means.get)
    assert state["settings"][0]["setting"] == state["winner"]
    assert state["settings"][0]["dev_mean"] == pytest.approx(max(means.values()))
    assert "| setting |" in (folder / "sweep.md").read_text()

    # The same command again trains nothing and writes no run file.
    stamps = {path: path.stat().st_mtime_ns for run in runs for path in run.rglob("*")}
    monkeypatch.setattr(contrastive, "train", no_training)
    assert main(command) == 0
    assert {path: path.stat().st_mtime_ns for run in runs for path in run.rglob("*")} == stamps
    assert json.loads((folder / "sweep.json").read_text())["winner"] == state["winner"]

    # The recipe changed under finished trials: refused before anything runs, naming it.
    changed = yaml.safe_load(recipe_file.read_text())
    changed["eval"]["batch_size"] = 4
    recipe_file.write_text(yaml.safe_dump(changed))
    with pytest.raises(RecipeError, match=r"(?s)finished run that differs.*eval.batch_size"):
        plan_sweep(recipe_file, command[2:3] + command[5:], seeds=[0, 1])


def test_a_bad_value_in_one_trial_is_refused_before_any_trial_runs(make_recipe, monkeypatch):
    recipe_file, output = make_recipe("bad")
    monkeypatch.setattr(contrastive, "train", no_training)
    with pytest.raises(RecipeError) as refused:
        plan_sweep(recipe_file, ["training.learning_rate=1e-3,-1", "training.max_steps=2,0"])
    message = str(refused.value)
    assert "no trial was run" in message and "3 problem(s)" in message
    assert "training.learning_rate=-1 training.max_steps=2" in message
    assert "training.learning_rate: Value error, must be in (0, 1]" in message
    assert "training.max_steps: Value error, must be -1" in message
    assert main(["sweep", str(recipe_file), "training.learning_rate=1e-3,-1"]) == 2
    assert not output.with_name("bad-sweep").exists()


def test_values_split_on_top_level_commas_only(make_recipe):
    assert split_values("[32,16],[16,8]") == ["[32,16]", "[16,8]"]
    assert split_values("'a,b', {x: [1,2]},it's") == ["'a,b'", "{x: [1,2]}", "it's"]
    with pytest.raises(RecipeError, match="unclosed"):
        split_values("[32,16")
    recipe_file, output = make_recipe("lists")
    plan = plan_sweep(recipe_file, ["loss.name=matryoshka", "loss.matryoshka_dims=[32,16],[16,8]"],
                      output=output.with_name("lists-grid"))
    assert [trial.recipe.loss.matryoshka_dims for trial in plan.trials] == [[32, 16], [16, 8]]
    assert [trial.setting for trial in plan.trials] == ["loss.matryoshka_dims=[32,16]",
                                                        "loss.matryoshka_dims=[16,8]"]
    names = [trial.name for trial in plan.trials]
    assert names[0].startswith("matryoshka_dims=32-16-")
    assert len(set(names)) == 2 and all(trial.folder.parent == output.with_name("lists-grid")
                                        for trial in plan.trials)
    with pytest.raises(RecipeError, match="nothing to sweep"):
        plan_sweep(recipe_file, ["training.learning_rate=1e-3"])
    with pytest.raises(RecipeError, match="output_dir"):
        plan_sweep(recipe_file, ["output_dir=a,b"])


def test_a_failed_trial_is_recorded_and_the_next_one_runs(make_recipe, monkeypatch):
    recipe_file, output = make_recipe("fails")
    calls = []

    def out_of_memory(recipe, **kwargs):
        calls.append(recipe.output_dir)
        raise RuntimeError("CUDA out of memory")

    monkeypatch.setattr(contrastive, "train", out_of_memory)
    assert main(["sweep", str(recipe_file), "--seeds", "0,1"]) == 1
    state = json.loads((output.with_name("fails-sweep") / "sweep.json").read_text())
    assert len(calls) == 2 and state["winner"] is None
    assert [t["status"] for t in state["trials"]] == ["failed", "failed"]
    assert state["trials"][0]["error"] == "RuntimeError: CUDA out of memory"


def test_a_crashed_trial_resumes_from_its_checkpoint(make_recipe, monkeypatch):
    from faults import CrashAt

    recipe_file, output = make_recipe("crash", training={"max_steps": 4, "eval_steps": 2})
    real_train = contrastive.train

    def crashing(recipe, **kwargs):
        return real_train(recipe, callbacks=[CrashAt(3)], **kwargs)

    monkeypatch.setattr(contrastive, "train", crashing)
    command = ["sweep", str(recipe_file), "--seeds", "0,1"]
    assert main(command) == 130  # Ctrl-C stops the sweep
    folder = output.with_name("crash-sweep")
    state = json.loads((folder / "sweep.json").read_text())
    assert [t["status"] for t in state["trials"]] == ["interrupted", "pending"]
    crashed = folder / state["trials"][0]["name"]
    before = (crashed / "metrics.jsonl").read_text()
    assert (crashed / "checkpoints" / "checkpoint-2").is_dir() and not (crashed / "final").exists()

    monkeypatch.setattr(contrastive, "train", real_train)
    assert main(command) == 0
    state = json.loads((folder / "sweep.json").read_text())
    assert [t["status"] for t in state["trials"]] == ["finished", "finished"]
    after = (crashed / "metrics.jsonl").read_text()
    assert after.startswith(before) and json.loads(after.splitlines()[-1])["step"] == 4
