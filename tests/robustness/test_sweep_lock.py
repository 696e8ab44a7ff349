"""Two sweeps on one folder: a sweep folder is locked like a run folder
(:mod:`tapt.run_folder.lock`). A second ``tapt sweep`` on it is refused at once, naming
the holder's pid, and writes nothing (it used to record the first sweep's running trials as
failed and, writing last, name the worse trial the winner); a lock a killed sweep left is
taken over with a warning naming the dead pid."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tapt.run_folder.layout import RunDir
from tapt.training import contrastive

AREA = "concurrency"
METRIC = "binary_ndcg@10"
DEV = {"1e-4": 0.7, "5e-3": 0.4}
"""The dev metric each learning rate's fake run reports: 1e-4 is the better trial."""


def finished_run(recipe, dev: float) -> None:
    """What a finished trial leaves: final/ and a results.json with its best dev metric."""
    run = RunDir(Path(recipe.output_dir))
    run.final.mkdir(parents=True)
    metrics = {key: dev for key in ("binary_ndcg@10", "graded_ndcg@10", "mrr@10",
                                    "recall@100")}
    run.results_file.write_text(json.dumps({
        "status": "finished", "best_step": 2, "summary": {"best dev (step 2)": metrics}}),
        encoding="utf-8")


def rate(recipe) -> str:
    return f"{recipe.training.learning_rate:.0e}".replace("e-0", "e-")


@pytest.mark.reliability(
    area=AREA, reader="tapt sweep --output",
    fault="a second tapt sweep on the same --output while the first one trains its first "
          "trial",
    behaviour="the second is refused at once (exit 2) naming the holder's pid; it writes "
              "nothing: the first sweep's sweep.json records its own trials, finished, and "
              "names the better one the winner; no lock file is left")
def test_a_second_sweep_on_a_running_sweeps_folder_is_refused(make_recipe, monkeypatch,
                                                             quiet_cli, capsys):
    recipe_file, output = make_recipe("grid")
    folder = output.with_name("grid-sweep")
    command = ["sweep", str(recipe_file), "training.learning_rate=1e-4,5e-3"]
    second: list[tuple[int, str, dict, dict]] = []
    started: list[str] = []

    def train(recipe, **kwargs):
        started.append(recipe.output_dir)
        if len(started) == 1:  # the first trial is running: another sweep starts on the folder
            state = json.loads((folder / "sweep.json").read_text(encoding="utf-8"))
            code = quiet_cli.main(command)
            after = json.loads((folder / "sweep.json").read_text(encoding="utf-8"))
            second.append((code, " ".join(capsys.readouterr().out.split()), state, after))
        if Path(recipe.output_dir).exists():  # the other sweep ran this trial already
            raise RuntimeError(f"{recipe.output_dir} is in use")
        finished_run(recipe, DEV[rate(recipe)])

    monkeypatch.setattr(contrastive, "train", train)
    assert quiet_cli.main(command) == 0
    code, printed, state, after = second[0]
    assert code == 2 and after == state  # the second sweep wrote nothing
    assert len(started) == 2  # and trained nothing
    assert f"--output {folder} is in use by another tapt sweep or training (pid {os.getpid()}" \
        in printed and "tapt" in printed
    state = json.loads((folder / "sweep.json").read_text(encoding="utf-8"))
    assert [t["status"] for t in state["trials"]] == ["finished", "finished"]
    assert state["winner"] == "training.learning_rate=1e-4"
    assert not (folder / "tapt.lock").exists()


@pytest.mark.reliability(
    area=AREA, reader="tapt sweep --output",
    fault="tapt sweep on a folder a tapt train holds (the run lock of that folder is taken)",
    behaviour="refused at once (exit 2) naming the holder's pid; nothing written")
def test_a_sweep_on_a_folder_a_training_holds_is_refused(make_recipe, tmp_path, monkeypatch,
                                                        quiet_cli, capsys):
    from tapt.run_folder.lock import RunLock

    recipe_file, _ = make_recipe("grid")
    folder = tmp_path / "busy"
    monkeypatch.setattr(contrastive, "train", lambda *a, **k: pytest.fail("a trial ran"))
    with RunLock(folder):
        before = sorted(os.listdir(folder))
        assert quiet_cli.main(["sweep", str(recipe_file), "--seeds", "0,1", "--output",
                               str(folder)]) == 2
        printed = " ".join(capsys.readouterr().out.split())
        assert f"pid {os.getpid()}" in printed and "is in use" in printed
        assert sorted(os.listdir(folder)) == before


@pytest.mark.reliability(
    area=AREA, reader="tapt sweep --output",
    fault="a sweep folder whose tapt.lock a killed sweep left (its pid is gone, nobody holds "
          "the lock)",
    behaviour="taken over with a warning naming the dead pid; the sweep runs and removes the "
              "lock at the end")
def test_a_lock_a_killed_sweep_left_is_taken_over(make_recipe, monkeypatch, quiet_cli, capsys,
                                                  caplog):
    import socket

    recipe_file, output = make_recipe("grid")
    folder = output.with_name("grid-sweep")
    folder.mkdir()
    (folder / "tapt-sweep.json").write_text(json.dumps({"tapt": "sweep"}), encoding="utf-8")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (folder / "tapt.lock").write_text(json.dumps({
        "pid": dead.pid, "host": socket.gethostname(), "started": "2024-01-01 00:00:00",
        "command": "tapt sweep grid.yaml"}) + "\n", encoding="utf-8")
    monkeypatch.setattr(contrastive, "train",
                        lambda recipe, **kwargs: finished_run(recipe, DEV[rate(recipe)]))
    with caplog.at_level(logging.WARNING):
        assert quiet_cli.main(["sweep", str(recipe_file),
                               "training.learning_rate=1e-4,5e-3"]) == 0
    assert f"took over the lock left by pid {dead.pid}" in caplog.text
    assert not (folder / "tapt.lock").exists()
    state = json.loads((folder / "sweep.json").read_text(encoding="utf-8"))
    assert state["winner"] == "training.learning_rate=1e-4"


@pytest.mark.parametrize("pid", [10**30, "123", True, 0, -5, None, 2.5])
def test_a_lock_holder_pid_that_is_no_process_id_is_not_alive(pid):
    """A lock's recorded ``pid`` feeds only the "is in use" message; one that is no process
    id (hand-edited, or another tool's file) reads as gone, never as an OverflowError."""
    import os
    import socket

    from tapt.run_folder.lock import locked_message, pid_alive

    assert pid_alive(os.getpid())
    assert not pid_alive(pid)
    holder = {"pid": pid, "host": socket.gethostname(), "started": "then"}
    assert "is gone" in locked_message(Path("/runs/x"), holder)
