"""``tapt sweep`` ranks its trials on one dev set: an axis that changes which dev queries,
passages or grades are scored is refused when the sweep is planned, before any trial
trains (tapt.selection.sweep); seeds and training settings are not."""

from __future__ import annotations

import pytest

from tapt.cli import main
from tapt.recipe import RecipeError
from tapt.selection.sweep import plan_sweep
from tapt.training import contrastive


def no_training(*args, **kwargs):
    raise AssertionError("a trial was trained")


CARVE = "data.dev_from_train=2"
DEV_AXES = [("data.dev_seed=0,1",), ("data.dev_distractors=5,10",),
            ("data.dev_from_train=2,3",), ("data.relevant_from=auto,3",),
            ("data.dev_split=dev,validation",), ("data.lenient=false,true",),
            # these decide a carved dev split (from what is left of train)
            ("data.dev_carve=group,query", CARVE), ("data.decontaminate=[],[test]", CARVE)]


@pytest.mark.parametrize("axes", DEV_AXES, ids=lambda axes: axes[0])
def test_an_axis_that_changes_the_dev_set_is_refused_before_any_trial(make_recipe,
                                                                      monkeypatch, axes):
    recipe_file, output = make_recipe("dev-axis")
    monkeypatch.setattr(contrastive, "train", no_training)
    key = axes[0].partition("=")[0]
    with pytest.raises(RecipeError) as refused:
        plan_sweep(recipe_file, [*axes, "training.learning_rate=1e-3"], seeds=[0, 1])
    message = str(refused.value)
    assert "no trial was run" in message
    assert f"sweep axis {key} changes the dev set" in message
    assert "one dev set" in message
    assert main(["sweep", str(recipe_file), *axes, "--seeds", "0,1"]) == 2
    assert not output.with_name("dev-axis-sweep").exists()


def test_an_axis_over_the_data_path_is_refused(make_recipe, tiny_beir_path, synth_path,
                                               monkeypatch):
    recipe_file, _ = make_recipe("paths")
    monkeypatch.setattr(contrastive, "train", no_training)
    with pytest.raises(RecipeError, match="sweep axis data.path changes the dev set"):
        plan_sweep(recipe_file, [f"data.path={synth_path},{tiny_beir_path}"])


def test_seeds_and_training_settings_keep_one_dev_set(make_recipe):
    recipe_file, _ = make_recipe("fine")
    plan = plan_sweep(recipe_file, ["training.learning_rate=1e-3,2e-3", "data.dev_seed=4"],
                      seeds=[0, 1])
    assert len(plan.trials) == 4
    assert {trial.recipe.data.dev_seed for trial in plan.trials} == {4}
    plan = plan_sweep(recipe_file, ["training.seed=0,1,2"])
    assert len(plan.trials) == 3


def test_decontamination_may_vary_when_dev_is_read_from_the_data(make_recipe):
    """Decontamination drops train judgments only: a dev split read from the data is the
    same in every trial (carved from train, it would not be)."""
    recipe_file, _ = make_recipe("decontaminated")
    plan = plan_sweep(recipe_file, ["data.decontaminate=[],[test]"])
    assert [trial.recipe.data.decontaminate for trial in plan.trials] == [[], ["test"]]


def test_with_soup_an_axis_the_soup_would_refuse_is_refused_before_any_trial(make_recipe,
                                                                             monkeypatch):
    """--soup needs ingredients that encode dev alike: a sweep over data.with_title or
    model.max_seq_length is refused when planned, not after every trial trained."""
    recipe_file, output = make_recipe("soup-axis")
    monkeypatch.setattr(contrastive, "train", no_training)
    for axis in ("data.with_title=true,false", "model.max_seq_length=32,64"):
        plan_sweep(recipe_file, [axis])  # without --soup: one dev set, fine
        with pytest.raises(RecipeError, match=rf"--soup: {axis.partition('=')[0]} differs"):
            plan_sweep(recipe_file, [axis], soup=True)
        assert main(["sweep", str(recipe_file), axis, "--soup", "2"]) == 2
    assert not output.with_name("soup-axis-sweep").exists()


def test_the_soup_accepts_trials_that_differ_only_in_train_decontamination(make_recipe):
    """The soup's own check agrees with the sweep's: decontamination changes train only, so
    ingredients with a dev split read from the data share one dev set."""
    from types import SimpleNamespace

    from tapt.selection.soup import check_same_dev

    recipe_file, _ = make_recipe("decontaminated-soup")
    plan = plan_sweep(recipe_file, ["data.decontaminate=[],[test]"], soup=True)
    check_same_dev([SimpleNamespace(recipe=t.recipe, run=t.name, carve=None)
                    for t in plan.trials])
    carved = plan.trials[0].recipe
    other = carved.model_copy(update={"data": carved.data.model_copy(update={
        "dev_from_train": 2, "decontaminate": ["test"]})})
    first = carved.model_copy(update={"data": carved.data.model_copy(update={
        "dev_from_train": 2})})
    from tapt.selection.merge import MergeError

    with pytest.raises(MergeError, match="data.decontaminate differs"):
        check_same_dev([SimpleNamespace(recipe=first, run="a", carve=None),
                        SimpleNamespace(recipe=other, run="b", carve=None)])
