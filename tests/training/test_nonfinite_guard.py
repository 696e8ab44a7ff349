"""Non-finite values injected into training: the loss at chosen steps, the weights before a
dev evaluation. Each behaviour of ``training.on_nonfinite`` is checked end to end."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from faults import poisoning
from safetensors.torch import load_file
from transformers import TrainerCallback

import tapt.training.losses as losses_module
from tapt.cli import main
from tapt.recipe import load_recipe
from tapt.training.contrastive import train
from tapt.training.errors import NonFiniteTrainingError

STEPS = {"max_steps": 6, "eval_steps": 2, "save_total_limit": 10}


@pytest.fixture
def nan_loss_at(monkeypatch):
    """``nan_loss_at({3, 5})``: the training loss is NaN at those optimizer steps."""
    def install(steps: set[int]) -> None:
        monkeypatch.setattr(losses_module, "build_loss",
                            poisoning(losses_module.build_loss, steps))
    return install


class WeightLog(TrainerCallback):
    """A copy of one weight after every optimizer step."""

    def __init__(self) -> None:
        self.after_step: dict[int, torch.Tensor] = {}

    def on_step_end(self, args, state, control, model=None, **kwargs):
        weight = next(p for p in model.parameters() if p.requires_grad)
        self.after_step[state.global_step] = weight.detach().clone()


def test_stop_names_the_step_keeps_checkpoints_and_exports_nothing(make_recipe, nan_loss_at,
                                                                   capsys):
    recipe_file, output = make_recipe("stop", training=STEPS)
    nan_loss_at({3})
    assert main(["train", str(recipe_file)]) == 3
    message = " ".join(capsys.readouterr().out.split())
    assert "optimizer step 3" in message and "non-finite loss" in message
    assert "the batch held queries" in message
    assert not (output / "final").exists()
    checkpoints = sorted(p.name for p in (output / "checkpoints").glob("checkpoint-*"))
    assert checkpoints == ["checkpoint-2"]
    weights = load_file(output / "checkpoints" / "checkpoint-2" / "model.safetensors")
    assert all(torch.isfinite(t).all() for t in weights.values())

    results = json.loads((output / "results.json").read_text())
    assert results["status"] == "stopped: non-finite"
    [event] = results["nonfinite_events"]
    assert event["step"] == 3 and not event["loss_finite"] and not event["gradients_finite"]
    # The named queries are train queries of the data.
    qrels = Path(load_recipe(recipe_file).data.path) / "qrels" / "train.tsv"
    train_ids = {line.split("\t")[0] for line in qrels.read_text().splitlines()[1:]}
    assert event["query_ids"] and set(event["query_ids"]) <= train_ids


def test_skip_drops_the_update_counts_it_and_finishes(make_recipe, nan_loss_at):
    recipe_file, output = make_recipe("skip", training={**STEPS, "on_nonfinite": "skip"})
    nan_loss_at({3, 5})
    weights = WeightLog()
    result = train(load_recipe(recipe_file), callbacks=[weights])
    assert result.final_dir is not None
    torch.testing.assert_close(weights.after_step[3], weights.after_step[2], rtol=0, atol=0)
    torch.testing.assert_close(weights.after_step[5], weights.after_step[4], rtol=0, atol=0)
    assert not torch.equal(weights.after_step[4], weights.after_step[3])  # others do update
    results = json.loads((output / "results.json").read_text())
    assert results["nonfinite_steps"] == 2
    assert [e["step"] for e in results["nonfinite_events"]] == [3, 5]
    final = load_file(output / "final" / "model.safetensors")
    assert all(torch.isfinite(t).all() for t in final.values())


def test_skip_stops_after_max_nonfinite_steps(make_recipe, nan_loss_at):
    recipe_file, output = make_recipe(
        "skip-max", training={**STEPS, "on_nonfinite": "skip", "max_nonfinite_steps": 2})
    nan_loss_at({2, 3, 4, 5, 6})
    with pytest.raises(NonFiniteTrainingError, match="3 non-finite steps, more than"):
        train(load_recipe(recipe_file))
    assert not (output / "final").exists()
    results = json.loads((output / "results.json").read_text())
    assert [e["step"] for e in results["nonfinite_events"]] == [2, 3, 4]


class NanWeightsDuringEval(TrainerCallback):
    """Put NaN in a weight before the dev evaluation at ``step``; restore it afterwards
    (``restore=False`` leaves it there)."""

    def __init__(self, step: int, restore: bool = True) -> None:
        self.step, self.restore, self.saved = step, restore, None

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if state.global_step == self.step:  # a norm weight reaches every token
            weight = next(p for name, p in model.named_parameters() if "LayerNorm" in name)
            self.saved = (weight, weight.detach().clone())
            with torch.no_grad():
                weight.view(-1)[0] = float("nan")

    def on_evaluate(self, args, state, control, **kwargs):
        if self.saved and self.restore:
            weight, value = self.saved
            with torch.no_grad():
                weight.copy_(value)
            self.saved = None


def test_a_refused_dev_evaluation_is_never_the_best_checkpoint(make_recipe):
    # lr 0 keeps every checkpoint equal, so without the refusal step 2 would be the best
    # (ties keep the first); with it, step 2's evaluation is NaN and step 4 wins.
    recipe_file, output = make_recipe("refused", training={
        **STEPS, "on_nonfinite": "skip", "learning_rate": 1e-12, "max_steps": 4})
    evaluate_nan = NanWeightsDuringEval(2)
    result = train(load_recipe(recipe_file), callbacks=[evaluate_nan])
    history = {e["step"]: e for e in map(json.loads,
                                          (output / "metrics.jsonl").read_text().splitlines())}
    assert "non-finite embeddings" in history[2]["error"] and history[2]["nonfinite"] > 0
    assert history[2]["binary_ndcg@10"] is None
    assert history[4]["binary_ndcg@10"] is not None and history[4].get("error") is None
    assert result.best_step == 4
    results = json.loads((output / "results.json").read_text())
    assert results["refused_evaluations"] == 1


def test_stop_on_a_refused_dev_evaluation(make_recipe):
    recipe_file, output = make_recipe("refused-stop", training=STEPS)
    with pytest.raises(NonFiniteTrainingError, match="dev evaluation at step 2 refused"):
        train(load_recipe(recipe_file), callbacks=[NanWeightsDuringEval(2, restore=False)])
    assert not (output / "final").exists()
    assert not (output / "checkpoints" / "checkpoint-2").exists()


def test_nan_weights_never_reach_an_export(make_recipe):
    """NaN weights after the last evaluation: the export refuses them."""
    recipe_file, output = make_recipe("late-nan", training={"max_steps": 2, "eval_steps": 2,
                                                            "on_nonfinite": "skip"})

    class Poison(TrainerCallback):
        def on_train_end(self, args, state, control, model=None, **kwargs):
            with torch.no_grad():
                next(model.parameters()).view(-1)[0] = math.inf

    with pytest.raises(NonFiniteTrainingError, match="trained weights hold NaN/inf"):
        train(load_recipe(recipe_file), callbacks=[Poison()])
    assert not (output / "final").exists()
