"""``training.average_last``: the export is the exact mean of the last N checkpoints."""

from __future__ import annotations

import json

import pytest
import torch
from faults import CrashAt
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from transformers import TrainerCallback

from tapt.recipe import RecipeError, load_recipe
from tapt.run_folder.layout import RunDir, mark_complete
from tapt.training.best_weights import averaged_metrics
from tapt.training.contrastive import train
from tapt.training.errors import NonFiniteTrainingError

STEPS = {"max_steps": 8, "eval_steps": 2, "save_total_limit": 4, "average_last": 3}


def assert_mean_of(final, checkpoints) -> None:
    """Every tensor of ``final`` is the mean of the checkpoints' tensors (computed here)."""
    exported = load_file(final / "model.safetensors")
    sources = [load_file(folder / "model.safetensors") for folder in checkpoints]
    assert exported.keys() == sources[0].keys()
    for key, tensor in exported.items():
        if not tensor.is_floating_point():
            assert all(torch.equal(tensor, source[key]) for source in sources), key
            continue
        mean = torch.stack([source[key].double() for source in sources]).mean(0)
        assert torch.allclose(tensor.double(), mean, rtol=0, atol=1e-7), key
    # the average is not any single checkpoint (training moved the weights)
    assert any(not torch.equal(exported[key], sources[-1][key]) for key in exported)


def test_export_is_the_mean_of_the_last_checkpoints(make_recipe):
    recipe_file, output = make_recipe("avg", training=STEPS)
    result = train(load_recipe(recipe_file))
    folders = [output / "checkpoints" / f"checkpoint-{step}" for step in (4, 6, 8)]
    assert (output / "checkpoints" / "checkpoint-2").is_dir()  # kept, but not averaged
    assert_mean_of(result.final_dir, folders)

    results = json.loads((output / "results.json").read_text())
    assert results["export"]["kind"] == "average_last"
    assert results["export"]["steps"] == [4, 6, 8]
    assert results["export"]["weights"] == pytest.approx([1 / 3] * 3)
    assert set(results["summary"]) >= {"best dev", "averaged dev"}
    preset = json.loads((result.final_dir / "tapt_preset.json").read_text())
    assert preset["averaged"]["checkpoints"] == ["checkpoint-4", "checkpoint-6", "checkpoint-8"]
    card = (result.final_dir / "README.md").read_text()
    assert "mean of the last 3 checkpoints (steps 4, 6, 8" in card


def test_a_resumed_run_averages_its_last_checkpoints(make_recipe):
    recipe_file, output = make_recipe("avg-resumed", training=STEPS)
    with pytest.raises(KeyboardInterrupt):
        train(load_recipe(recipe_file), callbacks=[CrashAt(5)])
    assert not (output / "final").exists()
    result = train(load_recipe(recipe_file))
    assert_mean_of(result.final_dir,
                   [output / "checkpoints" / f"checkpoint-{step}" for step in (4, 6, 8)])


@pytest.mark.parametrize(("training", "message"), [
    ({"average_last": 1}, r"training.average_last.*in \[2, 1000\]"),
    ({"average_last": 3, "save_total_limit": 3},
     r"training.average_last \(3\) needs training.save_total_limit >= 4"),
    ({"average_last": 3, "save_total_limit": 4, "max_steps": 4},
     r"training.average_last \(3\) is more than the 2 checkpoints"),
])
def test_bad_values_fail_at_load_naming_the_key(make_recipe, training, message):
    recipe_file, _ = make_recipe("bad", training=training)
    with pytest.raises(RecipeError, match=message):
        load_recipe(recipe_file)


def test_lora_is_refused(make_recipe):
    recipe_file, _ = make_recipe("lora", model={"lora": {"enabled": True}},
                                 training={"average_last": 2, "save_total_limit": 3})
    with pytest.raises(RecipeError, match="training.average_last does not work with LoRA"
                                          "|model.lora.enabled"):
        load_recipe(recipe_file)


def test_an_epoch_run_with_too_few_saves_stops_before_the_zero_shot_test(make_recipe,
                                                                          monkeypatch):
    """The steps of an epoch run are known only from the data; still, the refusal comes
    before the zero-shot test (maybe a 1M-passage encode) and the first step."""
    from tapt.training import contrastive

    tested = []
    monkeypatch.setattr(contrastive, "zero_shot_test_metrics", lambda *args, **_: tested.append(args))
    recipe_file, output = make_recipe("few", training={
        "max_steps": -1, "epochs": 1, "eval_steps": 2, "average_last": 9,
        "save_total_limit": 10}, eval={"zero_shot": True})
    with pytest.raises(RecipeError, match=r"training.average_last \(9\) is more than the \d+ "
                                          r"checkpoints this run saves"):
        train(load_recipe(recipe_file), run_test=True)
    assert tested == []  # no zero-shot test
    assert not (output / "metrics.jsonl").exists()  # no step-0 dev evaluation either
    assert not list((output / "checkpoints").glob("checkpoint-*"))


class PoisonCheckpoint(TrainerCallback):
    """At the end of training (the best checkpoint already loaded), write NaN into one
    tensor of ``checkpoint-<step>``'s weights file and mark it complete again: weights that
    were NaN when saved (a changed file that is not re-marked fails its digest and is not
    averaged at all)."""

    def __init__(self, folder) -> None:
        self.folder = folder

    def on_train_end(self, args, state, control, **kwargs):
        path = self.folder / "model.safetensors"
        size = path.stat().st_size
        with safe_open(str(path), "pt") as handle:
            metadata = handle.metadata()
        tensors = load_file(path)
        key = next(k for k, v in tensors.items() if v.is_floating_point() and v.dim() == 2)
        tensors[key] = torch.full_like(tensors[key], float("nan"))
        save_file(tensors, path, metadata=metadata)
        assert path.stat().st_size == size
        mark_complete(self.folder, int(self.folder.name.rsplit("-", 1)[1]))


def test_a_non_finite_average_is_not_exported(make_recipe):
    recipe_file, output = make_recipe("avg-nan", training=STEPS)
    poison = PoisonCheckpoint(output / "checkpoints" / "checkpoint-6")
    with pytest.raises(NonFiniteTrainingError,
                       match=r"the averaged weights \(training.average_last: steps 4, 6, 8\) "
                             r"hold NaN/inf"):
        train(load_recipe(recipe_file), callbacks=[poison])
    assert not (output / "final").exists() and not (output / "final.partial").exists()
    assert (output / "checkpoints" / "checkpoint-8").is_dir()  # kept


def test_a_refused_evaluation_of_the_average_refuses_the_export():
    """A non-finite dev (or guard) evaluation of the averaged weights is not dropped from
    the summary and exported anyway: it stops the export, naming the averaged steps."""

    class Refusing:
        name, guard_evaluator = "dev", None

        def measure(self, model):
            return {"metrics": None, "error": "2 non-finite passage embeddings"}, "float32"

    with pytest.raises(NonFiniteTrainingError, match=r"steps 4, 6: the dev evaluation was "
                                                     r"refused \(2 non-finite"):
        averaged_metrics(None, Refusing(), "steps 4, 6")


def test_a_checkpoint_changed_since_it_was_saved_is_not_averaged(tmp_path):
    from tapt.training.average import last_checkpoints

    run = RunDir(tmp_path)
    folders = []
    for step in (2, 4, 6):
        folder = run.checkpoints / f"checkpoint-{step}"
        folder.mkdir(parents=True)
        (folder / "trainer_state.json").write_text("{}")
        (folder / "model.safetensors").write_bytes(bytes([step]) * 64)
        mark_complete(folder, step)
        folders.append(folder)
    (folders[1] / "model.safetensors").write_bytes(b"\x00" * 64)  # same size
    assert last_checkpoints(run, 2) == [folders[0], folders[2]]
    with pytest.raises(RecipeError, match="only 2 complete checkpoints"):
        last_checkpoints(run, 3)
