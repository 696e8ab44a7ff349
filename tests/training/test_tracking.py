"""Tracking: dev metrics reach Weights & Biases (offline mode) and TensorBoard."""

from __future__ import annotations

import json

import pytest

from tapt.recipe import load_recipe
from tapt.training.contrastive import train


def test_wandb_offline_run_logs_the_dev_metrics(make_recipe, tmp_path, monkeypatch):
    wandb = pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wb"))
    monkeypatch.setenv("WANDB_API_KEY", "wandbSECRET0987654321abcdefabcdefabcdef00")
    monkeypatch.setenv("WANDB_SILENT", "true")
    logged: list[dict] = []
    original_log = wandb.sdk.wandb_run.Run.log

    def spy(self, data, *args, **kwargs):
        logged.append(dict(data))
        return original_log(self, data, *args, **kwargs)

    monkeypatch.setattr(wandb.sdk.wandb_run.Run, "log", spy)
    recipe_file, output = make_recipe("tracked", training={"max_steps": 2, "eval_steps": 2},
                                      tracking={"backend": "wandb", "project": "tapt-tests",
                                                "run_name": "tiny"})
    train(load_recipe(recipe_file))

    in_loop = [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]
    dev_logs = [entry for entry in logged if "eval/dev_binary_ndcg@10" in entry]
    assert len(dev_logs) == len(in_loop) == 2  # zero-shot and step 2
    for wandb_entry, ours in zip(dev_logs, in_loop):
        for key in ("binary_ndcg@10", "graded_ndcg@10", "mrr@10", "recall@100"):
            assert wandb_entry[f"eval/dev_{key}"] == pytest.approx(ours[key])

    runs = sorted((tmp_path / "wb" / "wandb").glob("offline-run-*"))
    assert len(runs) == 1
    record = next(runs[0].glob("*.wandb")).read_bytes()
    assert b"eval/dev_binary_ndcg@10" in record or b"dev_binary_ndcg@10" in record
    for path in runs[0].rglob("*"):
        if path.is_file():
            assert b"wandbSECRET0987654321" not in path.read_bytes(), path


def test_tensorboard_logs_the_dev_metrics(make_recipe):
    event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    recipe_file, output = make_recipe("tb", training={"max_steps": 2, "eval_steps": 2},
                                      tracking={"backend": "tensorboard"})
    train(load_recipe(recipe_file))
    events = list((output / "checkpoints").rglob("events.out.tfevents*"))
    assert events
    tags = set()
    for event_file in events:
        accumulator = event_accumulator.EventAccumulator(str(event_file))
        accumulator.Reload()
        tags |= set(accumulator.Tags()["scalars"])
    assert "eval/dev_binary_ndcg@10" in tags
