"""Faults of real runs: SIGKILL at several points, a full disk, secrets, --overwrite."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tapt.cli import main
from tapt.recipe import load_recipe
from tapt.training.contrastive import train
from tapt.util.files import DiskSpaceError, ensure_free_space

WORKER = Path(__file__).with_name("crash_worker.py")
STEPS = {"max_steps": 6, "eval_steps": 2, "save_total_limit": 3}


def run_worker(recipe_file: Path, point: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1",
           "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.run([sys.executable, str(WORKER), str(recipe_file), point], env=env,
                          capture_output=True, text=True, timeout=600, check=False)


def dev_metrics(output: Path) -> dict[int, dict]:
    entries = [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]
    return {e["step"]: {k: v for k, v in e.items() if k not in ("seconds", "epoch")}
            for e in entries}


@pytest.mark.slow
@pytest.mark.reliability(
    area="crash safety", fault="SIGKILL during a training step, during a dev evaluation and "
    "while a checkpoint is being written", behaviour="the same command resumes from the last "
    "complete checkpoint (a cut-short one is set aside in OUTPUT/incomplete/); final weights "
    "and every dev metric equal an uninterrupted run's; no final/ before the end")
def test_sigkill_anywhere_then_resume_reaches_the_same_weights_and_metrics(make_recipe):
    straight_file, straight = make_recipe("straight", training=STEPS)
    assert run_worker(straight_file, "none").returncode == 0
    reference = load_file(straight / "final" / "model.safetensors")
    reference_metrics = dev_metrics(straight)

    for point in ("step:3", "eval:4", "save:4"):
        name = point.replace(":", "-")
        recipe_file, output = make_recipe(name, training=STEPS)
        killed = run_worker(recipe_file, point)
        assert killed.returncode == -signal.SIGKILL, (point, killed.stderr[-2000:])
        assert not (output / "final").exists()
        if point == "save:4":  # checkpoint-4 was cut short: no completion marker
            assert (output / "checkpoints" / "checkpoint-4").is_dir()
            assert not (output / "checkpoints" / "checkpoint-4" / "tapt-complete.json").exists()
        resumed = run_worker(recipe_file, "none")  # the same command again
        assert resumed.returncode == 0, (point, resumed.stderr[-3000:])
        if point == "save:4":
            assert "cut short" in resumed.stderr
            assert any((output / "incomplete").glob("checkpoint-4-*"))  # kept, set aside
        weights = load_file(output / "final" / "model.safetensors")
        for key, value in reference.items():
            torch.testing.assert_close(weights[key], value, atol=1e-6, rtol=0,
                                       msg=f"{point}: {key}")
        metrics = dev_metrics(output)
        assert metrics.keys() == reference_metrics.keys(), point
        for step_number, entry in reference_metrics.items():
            for key, value in entry.items():
                assert metrics[step_number][key] == pytest.approx(value, abs=1e-6), \
                    (point, step_number, key)


@pytest.mark.reliability(
    area="crash safety", fault="metrics.jsonl whose last line a crash cut short",
    behaviour="the line is skipped with a warning; earlier evaluations are kept")
def test_a_truncated_last_metrics_line_is_skipped_on_resume(make_recipe):
    from tapt.run_folder.layout import RunDir
    from tapt.run_folder.records import read_history

    _, output = make_recipe("truncated")
    output.mkdir(parents=True)
    (output / "metrics.jsonl").write_text('{"step": 0, "x": 1}\n{"step": 2, "x"')
    assert [e["step"] for e in read_history(RunDir(output))] == [0]


@pytest.mark.reliability(
    area="crash safety", fault="metrics.jsonl whose last line a crash cut short, then a "
                               "resumed run appends its next evaluation",
    behaviour="the torn half line is cut away (warning) before the append, so the file "
              "reads back whole: the earlier and the new evaluation, nothing in between")
def test_an_append_after_a_torn_line_cuts_it_away(tmp_path, caplog):
    from tapt.run_folder.layout import RunDir
    from tapt.run_folder.records import read_history
    from tapt.util.files import append_json_line

    metrics = {"binary_ndcg@10": 0.5, "graded_ndcg@10": 0.5, "mrr@10": 0.4,
               "recall@100": 0.9}
    path = tmp_path / "metrics.jsonl"
    path.write_text(json.dumps({"step": 0, **metrics}) + '\n{"step": 2, "binary_nd',
                    encoding="utf-8")
    with caplog.at_level("WARNING"):
        append_json_line(path, {"step": 2, **metrics})
    assert "incomplete last line" in caplog.text
    assert path.read_text(encoding="utf-8").count("\n") == 2
    history = read_history(RunDir(tmp_path), require_metrics=True)
    assert [entry["step"] for entry in history] == [0, 2]
    # A last line that is whole but lost only its newline is kept: it gets the newline.
    path.write_text(path.read_text(encoding="utf-8").rstrip("\n"), encoding="utf-8")
    append_json_line(path, {"step": 4, **metrics})
    history = read_history(RunDir(tmp_path), require_metrics=True)
    assert [entry["step"] for entry in history] == [0, 2, 4]


@pytest.mark.reliability(
    area="stored artefacts", fault="metrics.jsonl entries edited: a NaN, a string or 1.7 "
                                   "as a metric, a step of 2.5 or -1, a metric missing",
    behaviour="refused as DataError naming metrics.jsonl, the line and the field (before "
              "it becomes results.json's best dev, the card or a sweep's ranking)")
@pytest.mark.parametrize(("change", "field"), [
    ({"mrr@10": float("nan")}, "mrr@10"), ({"recall@100": "0.9"}, "recall@100"),
    ({"binary_ndcg@10": 1.7}, "binary_ndcg@10"), ({"step": 2.5}, "step"),
    ({"step": -1}, "step"), ({"guard_mrr@10": -0.2}, "guard_mrr@10"),
    ({"graded_ndcg@10": None}, "graded_ndcg@10"),
])
def test_an_edited_metrics_entry_is_refused_naming_line_and_field(tmp_path, change, field):
    from tapt.data.beir import DataError
    from tapt.run_folder.layout import RunDir
    from tapt.run_folder.records import read_history

    good = {"step": 0, "binary_ndcg@10": 0.5, "graded_ndcg@10": 0.5, "mrr@10": 0.4,
            "recall@100": 0.9}
    refused = {"step": 3, "error": "non-finite", **dict.fromkeys(good.keys() - {"step"})}
    lines = [good, refused, {**good, "step": 4} | change]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines),
                                            encoding="utf-8")
    with pytest.raises(DataError) as caught:
        read_history(RunDir(tmp_path), require_metrics=True)
    assert caught.value.line == 3 and caught.value.field == field
    assert "metrics.jsonl" in str(caught.value)


def test_a_missing_metric_is_refused_only_where_metrics_are_required(tmp_path):
    from tapt.data.beir import DataError
    from tapt.run_folder.layout import RunDir
    from tapt.run_folder.records import read_history

    dapt = {"step": 5, "epoch": 1.0, "heldout_loss": 2.3}  # DAPT without retrieval
    (tmp_path / "metrics.jsonl").write_text(json.dumps(dapt) + "\n", encoding="utf-8")
    assert read_history(RunDir(tmp_path)) == [dapt]
    with pytest.raises(DataError, match="missing"):
        read_history(RunDir(tmp_path), require_metrics=True)


@pytest.mark.reliability(
    area="disk space", fault="1 kB free when the first checkpoint is due",
    behaviour="refused before writing, naming the size needed and the folder; exit 2; "
    "no checkpoint folder")
def test_too_little_disk_space_fails_before_writing_with_the_amount_and_place(
        make_recipe, monkeypatch, capsys):
    import shutil

    usage = shutil.disk_usage

    def almost_full(path):
        real = usage(path)
        return type(real)(real.total, real.total - 1000, 1000)  # 1 kB free
    monkeypatch.setattr(shutil, "disk_usage", almost_full)
    recipe_file, output = make_recipe("full-disk", training={"max_steps": 2, "eval_steps": 2})
    assert main(["train", str(recipe_file)]) == 2
    message = " ".join(capsys.readouterr().out.split())
    assert "not enough disk space for a checkpoint" in message
    assert str(output / "checkpoints") in message and "1.0 KB is free" in message
    assert not list((output / "checkpoints").glob("checkpoint-*"))
    with pytest.raises(DiskSpaceError, match="needs about 1.1 MB"):
        ensure_free_space(output, 1_000_000, "an export")


TOKENS = {"HF_TOKEN": "hf_" + "a1B2c3D4" * 5, "WANDB_API_KEY": "f" * 40,
          "OPENAI_API_KEY": "sk-" + "Z9y8X7w6" * 4}


@pytest.mark.reliability(
    area="secrets", fault="HF, W&B and OpenAI tokens in the environment and a token pasted "
    "into a recipe override (tracking.run_name)", behaviour="found in no file of the run "
    "folder (recipe, results, metrics, checkpoints, export, card) and in no output or log")
def test_planted_secrets_reach_no_file_and_no_output(make_recipe, monkeypatch, capsys,
                                                     caplog):
    for name, value in TOKENS.items():
        monkeypatch.setenv(name, value)
    override = "hf_" + "Q1w2E3r4" * 5  # a token pasted into a recipe override by mistake
    recipe_file, output = make_recipe("secrets", training={"max_steps": 2, "eval_steps": 2})
    assert main(["train", str(recipe_file), "--test", f"tracking.run_name={override}"]) == 0
    captured = capsys.readouterr()
    secrets = [*TOKENS.values(), override]
    leaks = [(str(path), secret[:6]) for path in output.rglob("*") if path.is_file()
             for secret in secrets if secret.encode() in path.read_bytes()]
    assert leaks == []
    text = captured.out + captured.err + caplog.text
    assert not [secret for secret in secrets if secret in text]
    saved = load_recipe(output / "recipe.yaml")
    assert saved.tracking.run_name == "***"


@pytest.mark.reliability(
    area="overwrite safety", fault="a finished run in output_dir",
    behaviour="refused (exit 2); with --overwrite moved to OUTPUT.old-TIMESTAMP intact and a "
    "new run started")
def test_overwrite_moves_the_old_run_aside_and_starts_anew(make_recipe, capsys):
    recipe_file, output = make_recipe("again", training={"max_steps": 2, "eval_steps": 2})
    assert main(["train", str(recipe_file)]) == 0
    before = (output / "final" / "model.safetensors").read_bytes()
    assert main(["train", str(recipe_file)]) == 2  # a finished run is never overwritten
    assert main(["train", str(recipe_file), "--overwrite", "training.learning_rate=0.01"]) == 0
    aside = [p for p in output.parent.glob(f"{output.name}.old-*")]
    assert len(aside) == 1 and (aside[0] / "final" / "model.safetensors").read_bytes() == before
    assert load_recipe(output / "recipe.yaml").training.learning_rate == 0.01


@pytest.mark.reliability(
    area="unsafe loading", fault="pickle in exports or in tapt's own loading",
    behaviour="exports are safetensors only; tapt has no pickle.load and no torch.load "
    "without weights_only=True")
def test_exports_hold_no_pickles_and_tapt_loads_none(make_recipe):
    recipe_file, output = make_recipe("formats", training={"max_steps": 2, "eval_steps": 2})
    train(load_recipe(recipe_file))
    suffixes = {path.suffix for path in (output / "final").rglob("*") if path.is_file()}
    assert ".safetensors" in suffixes and not suffixes & {".bin", ".pt", ".pth", ".pkl"}
    package = Path(__file__).resolve().parents[2] / "tapt"
    unsafe = [str(path) for path in package.rglob("*.py")
              for line in path.read_text().splitlines()
              if ("torch.load(" in line and "weights_only=True" not in line)
              or "pickle.load" in line]
    assert unsafe == []


@pytest.mark.reliability(
    area="unsafe loading", fault="trust_remote_code on, with and without a pinned revision",
    behaviour="a warning names the repository whose code will run and its revision, and "
              "asks to pin a commit unless the revision is one; off, nothing is said")
def test_remote_code_names_the_repository_and_asks_for_a_pinned_revision(tiny_bert_path,
                                                                           caplog):
    import logging

    from tapt.encoders.loading import ModelSpec, load_sentence_transformer

    def warnings_for(**spec) -> list[str]:
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="tapt.encoders.loading"):
            load_sentence_transformer(ModelSpec(str(tiny_bert_path), **spec))
        return [r.getMessage() for r in caplog.records if "trust_remote_code" in r.getMessage()]

    assert warnings_for() == []
    [unpinned] = warnings_for(trust_remote_code=True)
    assert str(tiny_bert_path) in unpinned and "latest revision" in unpinned
    assert "pin model.revision" in unpinned
    commit = "0123456789abcdef0123456789abcdef01234567"
    from tapt.encoders.loading import warn_remote_code

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tapt.encoders.loading"):
        warn_remote_code("org/model", commit)
    [pinned] = [r.getMessage() for r in caplog.records]
    assert "org/model runs Python code" in pinned and commit in pinned
    assert "pin model.revision" not in pinned
