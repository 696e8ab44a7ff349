"""The run folder: resume never mixes two datasets or two models, one training
at a time per folder, ``--overwrite`` moves only tapt runs, a failed start never blocks the
corrected rerun, and Ctrl-C says where to resume."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from transformers import TrainerCallback

from tapt.data.synth import synthesize
from tapt.recipe import RecipeError, load_recipe
from tapt.run_folder import input_fingerprint as fingerprint
from tapt.run_folder.layout import RunDir, mark_complete, write_recipe
from tapt.run_folder.start import prepare_run_dir
from tapt.training.contrastive import train
from tapt.training.dapt import dapt

AREA = "run folder"
STEPS = {"max_steps": 4, "eval_steps": 2}
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1",
       "TOKENIZERS_PARALLELISM": "false"}


class StopAfter(TrainerCallback):
    """A crash (KeyboardInterrupt) right after optimizer step ``step``."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            raise KeyboardInterrupt("simulated crash")


def synth(folder: Path, seed: int) -> Path:
    if folder.exists():
        shutil.rmtree(folder)
    synthesize(folder, queries=48, distractors=30, variant="structured", seed=seed)
    return folder


def listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def message_of(capsys) -> str:
    return " ".join(capsys.readouterr().out.split())


# --------------------------------------------------------------- 2. resume mixes two datasets

@pytest.mark.reliability(
    area=AREA, reader="resume (input fingerprint)",
    fault="train, crash after checkpoint-2, regenerate the data at the same path with another "
          "seed, run the same command",
    behaviour="refused, naming the changed input (data: qrels/dev.tsv changed (size a -> b)); "
              "the same bytes rewritten (new mtimes) still resume")
def test_resume_refuses_data_regenerated_behind_the_same_path(make_recipe, tmp_path):
    data = synth(tmp_path / "data", seed=3)
    recipe_file, output = make_recipe("mixed", data_path=data, training=STEPS)
    with pytest.raises(KeyboardInterrupt):
        train(load_recipe(recipe_file), callbacks=[StopAfter(3)])
    assert (output / "checkpoints" / "checkpoint-2").is_dir()
    saved = yaml.safe_load((output / "recipe.yaml").read_text())
    assert set(saved["fingerprint"]) == {"data", "model"}
    assert {"corpus.jsonl", "queries.jsonl", "qrels/train.tsv", "qrels/dev.tsv",
            "qrels/test.tsv"} <= set(saved["fingerprint"]["data"])
    assert "model.safetensors" in saved["fingerprint"]["model"]
    assert load_recipe(output / "recipe.yaml") == load_recipe(recipe_file)  # still a recipe

    synth(data, seed=4)  # another dataset behind the same path
    before = listing(output)
    with pytest.raises(RecipeError, match=r"(?s)different run.*data: \S+ changed \(") as err:
        train(load_recipe(recipe_file))
    assert "fingerprint" not in str(err.value)
    assert listing(output) == before  # nothing written, checkpoint-4 not trained on new data

    synth(data, seed=3)  # the original bytes again, every mtime new: not a change
    result = train(load_recipe(recipe_file))
    assert result.final_dir is not None
    steps = [json.loads(line)["step"] for line in (output / "metrics.jsonl").read_text()
             .splitlines()]
    assert sorted(set(steps)) == [0, 2, 4]


@pytest.mark.reliability(
    area=AREA, reader="resume (input fingerprint)",
    fault="model weights replaced behind the same model path between crash and resume",
    behaviour="refused, naming the weight file (model: model.safetensors changed)")
def test_resume_refuses_model_weights_changed_behind_the_same_path(model_copy, make_recipe):
    model = model_copy
    recipe = load_recipe(make_recipe("weights", model_path=model)[0])
    run = RunDir(Path(recipe.output_dir))
    write_recipe(run, recipe, fingerprint.input_fingerprint(recipe))
    complete_checkpoint(run, 2)
    assert prepare_run_dir(recipe, fingerprint.input_fingerprint(recipe)).resume_from

    weights = model / "model.safetensors"
    raw = bytearray(weights.read_bytes())
    raw[-1] ^= 0xFF  # one byte of a tensor: same size, other content
    weights.write_bytes(bytes(raw))
    with pytest.raises(RecipeError, match=r"model: model.safetensors changed \(same size"):
        prepare_run_dir(recipe, fingerprint.input_fingerprint(recipe))


@pytest.mark.reliability(
    area=AREA, reader="resume (input fingerprint)",
    fault="recipe.yaml's fingerprint block edited: a file's sha256 removed, its size removed, "
          "its size a string, a group a list, the Hub commit a number",
    behaviour="refused before resuming, naming recipe.yaml and the field "
              "(fingerprint.GROUP.FILE.KEY); no KeyError, no change passed as unchanged")
@pytest.mark.parametrize(("edit", "field"), [
    (lambda fp: fp["data"]["corpus.jsonl"].pop("sha256"), "fingerprint.data.corpus.jsonl.sha256"),
    (lambda fp: fp["data"]["corpus.jsonl"].pop("size"), "fingerprint.data.corpus.jsonl.size"),
    (lambda fp: fp["data"]["corpus.jsonl"].update(size="812"),
     "fingerprint.data.corpus.jsonl.size"),
    (lambda fp: fp.update(model=[1]), "fingerprint.model"),
    (lambda fp: fp.update(extra={"(hub)": {"id": "a/b", "commit": 7}}),
     "fingerprint.extra.(hub).commit"),
])
def test_resume_refuses_a_damaged_fingerprint_record(make_recipe, edit, field):
    import yaml

    recipe = load_recipe(make_recipe("damaged")[0])
    run = RunDir(Path(recipe.output_dir))
    write_recipe(run, recipe, fingerprint.input_fingerprint(recipe))
    complete_checkpoint(run, 2)
    saved = yaml.safe_load(run.recipe_file.read_text(encoding="utf-8"))
    edit(saved["fingerprint"])
    run.recipe_file.write_text(yaml.safe_dump(saved), encoding="utf-8")
    with pytest.raises(RecipeError) as caught:
        prepare_run_dir(recipe, fingerprint.input_fingerprint(recipe))
    assert f"{run.recipe_file}: field '{field}" in str(caught.value)


def complete_checkpoint(run: RunDir, step: int) -> Path:
    folder = run.checkpoints / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    (folder / "trainer_state.json").write_text("{}")
    mark_complete(folder, step)
    return folder


@pytest.mark.reliability(
    area=AREA, reader="fingerprint rule",
    fault="touch (mtime only); a same-size edit in the middle of a big file; a run folder "
          "whose recipe.yaml records no fingerprint",
    behaviour="touch is no change; the same-size edit is a change (files are hashed whole); "
              "the run without a fingerprint is refused, naming recipe.yaml and the field "
              "fingerprint; nothing written")
def test_fingerprint_rule_and_a_run_without_a_fingerprint(make_recipe, tmp_path):
    small, big = tmp_path / "small.tsv", tmp_path / "big.jsonl"
    small.write_bytes(b"q1\td1\t3\n" * 10)
    big.write_bytes(b"x" * 5000)

    def entries() -> dict:
        return {"data": {small.name: fingerprint.file_entry(small),
                         big.name: fingerprint.file_entry(big)}}
    old = entries()
    assert set(old["data"]["big.jsonl"]) == {"size", "sha256"}
    later = time.time() + 100
    for path in (small, big):
        os.utime(path, (later, later))
    assert fingerprint.compare(old, entries()) == []
    raw = bytearray(big.read_bytes())
    raw[2500] = ord("y")  # the middle of the big file, same size
    big.write_bytes(bytes(raw))
    assert fingerprint.compare(old, entries()) == [
        "data: big.jsonl changed (same size 5000, other content)"]
    small.write_bytes(b"q1\td2\t3\n" * 10)  # same size, other content
    assert "data: small.tsv changed (same size 80, other content)" in \
        fingerprint.compare(old, entries())

    # A run folder whose recipe.yaml records no fingerprint: not resumed blind.
    recipe = load_recipe(make_recipe("no-fingerprint")[0])
    run = RunDir(Path(recipe.output_dir))
    write_recipe(run, recipe, fingerprint.input_fingerprint(recipe))
    saved = yaml.safe_load(run.recipe_file.read_text(encoding="utf-8"))
    del saved["fingerprint"]
    run.recipe_file.write_text(yaml.safe_dump(saved), encoding="utf-8")
    complete_checkpoint(run, 2)
    before = listing(run.root)
    with pytest.raises(RecipeError) as caught:
        prepare_run_dir(recipe, fingerprint.input_fingerprint(recipe))
    assert f"{run.recipe_file}: field 'fingerprint: missing'" in str(caught.value)
    assert listing(run.root) == before
    # --overwrite moves such a folder aside, as it does any tapt run (nothing written yet).
    start = prepare_run_dir(recipe, fingerprint.input_fingerprint(recipe), overwrite=True)
    assert start.move_aside and start.resume_from is None
    assert listing(run.root) == before


# --------------------------------------------------------------- 3. two trainings, one folder

HOLD = """
import sys, time
from pathlib import Path
from tapt.run_folder.lock import RunLock
lock = RunLock(Path(sys.argv[1])).acquire()
print("locked", flush=True)
time.sleep(600)
"""


@pytest.mark.reliability(
    area=AREA, reader="run lock",
    fault="a second tapt train / tapt dapt on an output folder another process is training in",
    behaviour="refused at once (exit 2), naming the holder's pid and host; nothing written; a "
              "lock a SIGKILLed run left is taken over with a warning")
def test_a_second_training_in_the_same_folder_is_refused_at_once(make_recipe, tmp_path,
                                                                  quiet_cli, capsys, caplog):
    recipe_file, output = make_recipe("busy", training={"max_steps": 2, "eval_steps": 2})
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(output)], env=ENV,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        started = time.monotonic()
        assert quiet_cli.main(["train", str(recipe_file)]) == 2
        assert time.monotonic() - started < 30  # at once: before data and model load
        message = message_of(capsys)
        assert f"is in use by another training (pid {holder.pid} on {socket.gethostname()}" \
            in message
        assert listing(output) == ["tapt.lock"]
        dapt_recipe = tmp_path / "dapt.yaml"
        settings = yaml.safe_load(recipe_file.read_text())
        settings["objective"] = {"name": "mlm"}
        settings["data"] = {"path": settings["data"]["path"]}
        settings.pop("loss")
        dapt_recipe.write_text(yaml.safe_dump(settings))
        with pytest.raises(RecipeError, match=f"pid {holder.pid}"):
            dapt(load_recipe(dapt_recipe, kind="dapt"))
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert (output / "tapt.lock").is_file()  # a killed holder leaves its file behind

    with caplog.at_level(logging.WARNING, logger="tapt"):
        assert train(load_recipe(recipe_file)).final_dir is not None
    assert f"took over the lock left by pid {holder.pid}" in caplog.text
    assert not (output / "tapt.lock").exists()  # released at the end


# --------------------------------------------------- 4. --overwrite and folders that are no run

@pytest.mark.reliability(
    area=AREA, reader="output_dir check and --overwrite",
    fault="output_dir = the data folder (with --overwrite), inside the data folder, the model "
          "folder, '.', a non-empty folder of the user's, a run folder holding a user's file",
    behaviour="refused (exit 2) with the reason before anything is written; nothing is moved; "
              "--overwrite moves only tapt run folders")
def test_overwrite_moves_only_tapt_runs_and_never_inputs(make_recipe, tmp_path, synth_path,
                                                         tiny_bert_path, quiet_cli, capsys,
                                                         monkeypatch):
    data = tmp_path / "data"
    shutil.copytree(synth_path, data)
    recipe_file, _ = make_recipe("r", data_path=data)
    before = listing(data)

    def refused(*overrides: str, overwrite: bool = True) -> str:
        argv = ["train", str(recipe_file), *overrides] + (["--overwrite"] if overwrite else [])
        assert quiet_cli.main(argv) == 2
        return message_of(capsys)

    assert f"is the data.path input ({data})" in refused(f"output_dir={data}")
    assert "holds the data.path input" in refused(f"output_dir={tmp_path}")
    assert "is inside the data.path input" in refused(f"output_dir={data / 'runs' / 'x'}",
                                                      overwrite=False)
    assert "is the model.name input" in refused(f"output_dir={tiny_bert_path}")
    assert listing(data) == before and not list(tmp_path.glob("data.old-*"))
    assert not (data / "runs").exists()

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    assert "holds no tapt run (no recipe.yaml); --overwrite moves only tapt run folders" in \
        refused(f"output_dir={mine}")
    monkeypatch.chdir(mine)
    message = refused("output_dir=.")
    assert "empty name" not in message and "holds no tapt run" in message
    assert listing(mine) == ["notes.txt"] and not list(tmp_path.glob("mine.old-*"))

    # A finished tapt run that also holds a user's file is not moved aside either.
    finished = tmp_path / "finished"
    recipe = load_recipe(recipe_file, [f"output_dir={finished}"])
    write_recipe(RunDir(finished), recipe, fingerprint.input_fingerprint(recipe))
    (finished / "final").mkdir()
    (finished / "thesis.tex").write_text("mine")
    assert "no part of a tapt run (thesis.tex)" in refused(f"output_dir={finished}")
    assert (finished / "thesis.tex").is_file() and not list(tmp_path.glob("finished.old-*"))


# ------------------------------------------- 10. a failed start never blocks the corrected rerun

@pytest.mark.reliability(
    area=AREA, reader="train() order and takeover",
    fault="loss.matryoshka_dims=[1000] (wider than the model), model.name=/nonexistent; a run "
          "that crashed before its first checkpoint, rerun with a changed recipe",
    behaviour="model checks fail (exit 2, naming the key) before the run folder exists; a run "
              "with no checkpoint is taken over with a warning naming the change, its files "
              "kept in OUTPUT/incomplete/")
def test_a_failed_start_never_blocks_the_corrected_rerun(make_recipe, quiet_cli, capsys,
                                                         caplog):
    recipe_file, output = make_recipe("start", training=STEPS)
    assert quiet_cli.main(["train", str(recipe_file), "loss.name=matryoshka",
                           "loss.matryoshka_dims=[1000]"]) == 2
    assert "loss.matryoshka_dims" in message_of(capsys)
    assert not output.exists()
    nested = output.parent / "new" / "deeper"
    assert quiet_cli.main(["train", str(recipe_file), "model.name=/nonexistent",
                           f"output_dir={nested}"]) == 2
    assert "/nonexistent" in message_of(capsys)
    assert not (output.parent / "new").exists()  # the folders the lock made are gone again

    # Crashed after the zero-shot evaluation, before checkpoint-2: recipe.yaml, no checkpoint.
    with pytest.raises(KeyboardInterrupt):
        train(load_recipe(recipe_file, ["training.learning_rate=0.5"]), callbacks=[StopAfter(1)])
    assert (output / "recipe.yaml").is_file() and not (output / "checkpoints" /
                                                         "checkpoint-2").exists()
    with caplog.at_level(logging.WARNING, logger="tapt"):
        result = train(load_recipe(recipe_file))
    assert result.final_dir is not None
    assert "never completed a checkpoint" in caplog.text
    assert "training.learning_rate: 0.5 -> 0.001" in caplog.text
    [kept] = (output / "incomplete").glob("superseded-*")
    assert load_recipe(kept / "recipe.yaml").training.learning_rate == 0.5
    assert load_recipe(output / "recipe.yaml").training.learning_rate == 0.001
    steps = [json.loads(line)["step"] for line in (output / "metrics.jsonl").read_text()
             .splitlines()]
    assert steps == [0, 2, 4]  # the superseded run's step-0 line went with it


# ------------------------------------------------------------------------------------ Ctrl-C

@pytest.mark.reliability(
    area=AREA, reader="tapt train (Ctrl-C)",
    fault="SIGINT to a tapt train process after its first checkpoint",
    behaviour="one line naming the last checkpoint and the same command to resume; no "
              "traceback; exit 130; the folder is unlocked")
def test_ctrl_c_says_where_to_resume_and_exits_130(make_recipe):
    recipe_file, output = make_recipe("ctrl-c", training={"max_steps": 10_000, "eval_steps": 2,
                                                          "save_total_limit": 2})
    # Ctrl-C in a terminal reaches a process whose SIGINT has its default action; a test
    # suite started in the background of a non-interactive shell (nohup ... &) hands its
    # children SIGINT ignored, and Python then installs no KeyboardInterrupt handler.
    # Output goes to files, not pipes: a fast CPU logs past a pipe's 64 KiB before the first
    # checkpoint, and a child writing to a full pipe nobody reads blocks.
    stdout, stderr = (recipe_file.with_name(name) for name in ("ctrl-c.out", "ctrl-c.err"))
    with stdout.open("w") as out_file, stderr.open("w") as err_file:
        process = subprocess.Popen([sys.executable, "-m", "tapt", "train", str(recipe_file)],
                                   env={**ENV, "COLUMNS": "10000"}, stdout=out_file,
                                   stderr=err_file, text=True,
                                   preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # noqa: PLW1509
    # any complete checkpoint: on a fast CPU checkpoint-2 is rotated away (save_total_limit)
    # before a poll would see it
    checkpoints = output / "checkpoints"
    deadline = time.monotonic() + 300
    while not any(checkpoints.glob("checkpoint-*/tapt-complete.json")) and \
            process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert any(checkpoints.glob("checkpoint-*/tapt-complete.json")), "no complete checkpoint"
    process.send_signal(signal.SIGINT)
    process.wait(timeout=120)
    out, err = stdout.read_text(), stderr.read_text()
    assert process.returncode == 130, err[-3000:]
    assert "Traceback" not in err and "Traceback" not in out
    line = " ".join(out.split())
    assert "interrupted: the last complete checkpoint is " in line
    assert str(output / "checkpoints" / "checkpoint-") in line
    assert f"resume with: tapt train {recipe_file}" in line
    assert not (output / "tapt.lock").exists()
