"""Recipe schema, dotted overrides, cross-field checks and the shipped recipes."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tapt.cli import main
from tapt.recipe import DaptRecipe, Recipe, RecipeError, load_recipe, parse_override
from tapt.recipe.base import is_explicit_path

REPO = Path(__file__).resolve().parents[2]
SHIPPED = sorted((REPO / "recipes").glob("*.yaml"))


def missing_data(path: Path) -> str | None:
    """The recipe's ``data.path`` when it is written as a local path (so it must exist at
    load) and this checkout lacks it: the SciFact recipes read ``../shared/data/scifact``."""
    data = (yaml.safe_load(path.read_text(encoding="utf-8")).get("data") or {}).get("path")
    if isinstance(data, str) and is_explicit_path(data) and not Path(data).expanduser().exists():
        return data
    return None


def skip_without_data(*paths: Path) -> None:
    """Skip, naming the folder, when a recipe's local data is not in this checkout."""
    for path in paths:
        if (folder := missing_data(path)) is not None:
            pytest.skip(f"{path.name} reads {folder}, which this checkout does not have")


LOADABLE = [path for path in SHIPPED if missing_data(path) is None]
"""The shipped recipes whose data this checkout has (all of them next to ../shared)."""


def test_the_paper_recipes_are_shipped():
    names = {path.name for path in SHIPPED}
    assert {"qwen3.yaml", "qwen3-matryoshka.yaml", "gte-large.yaml", "nomic.yaml",
            "quickstart.yaml"} <= names


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_every_shipped_recipe_validates_and_documents_its_launch(path):
    skip_without_data(path)
    recipe = load_recipe(path, kind="auto")  # TAPT's cross-field checks run at load
    command = "tapt dapt" if isinstance(recipe, DaptRecipe) else "tapt train"
    header = path.read_text(encoding="utf-8").split("\nmodel:")[0]
    assert f"{command} recipes/{path.name}" in header, "header must give the launch command"
    assert "Hardware" in header
    # Remote code only where the model needs it, and then said in the header.
    if recipe.model.trust_remote_code:
        assert recipe.model.family in ("gte", "nomic") or "dapt" in recipe.model.name
        assert "trust_remote_code" in header


def test_each_dapt_recipe_has_a_tapt_recipe_that_starts_from_its_export():
    recipes = {path.name: load_recipe(path, kind="auto") for path in LOADABLE}
    dapt_names = [name for name, recipe in recipes.items() if isinstance(recipe, DaptRecipe)]
    assert {"dapt-gte.yaml", "dapt-nomic.yaml", "dapt-quickstart.yaml"} <= set(dapt_names)
    for name in dapt_names:
        final = f"{recipes[name].output_dir}/final"
        followers = [other for other, recipe in recipes.items()
                     if not isinstance(recipe, DaptRecipe) and recipe.model.name == final]
        assert followers, f"no TAPT recipe starts from {final}"
        for follower in followers:
            header = (REPO / "recipes" / follower).read_text(encoding="utf-8")
            # The header gives both commands, DAPT first.
            assert header.index(f"tapt dapt recipes/{name}") < \
                header.index(f"tapt train recipes/{follower}")
            assert recipes[follower].model.family == "auto"


def test_validate_command_accepts_all_shipped_recipes(capsys):
    assert main(["validate", *map(str, LOADABLE)]) == 0
    assert capsys.readouterr().out.count("ok") == len(LOADABLE)


def test_paper_setting_in_qwen3_recipe():
    recipe = load_recipe(REPO / "recipes" / "qwen3.yaml")
    assert recipe.model.name == "Qwen/Qwen3-Embedding-0.6B"
    assert recipe.model.family == "qwen3"
    assert (recipe.loss.name, recipe.training.epochs, recipe.training.bf16) == ("mnrl", 5, True)
    assert recipe.model.max_seq_length == 2048
    assert recipe.model.trust_remote_code is False
    assert load_recipe(REPO / "recipes" / "qwen3-matryoshka.yaml").loss.name == "matryoshka"


def _levers(recipe: Recipe) -> dict:
    """The training levers benchmarks/compare_recipes.py compares (loss and batching)."""
    loss = recipe.loss
    return {"loss": loss.name, "directions": loss.directions, "partition": loss.partition_mode,
            "hardness": (loss.hardness_mode, loss.hardness_strength), "guide": loss.guide,
            "matryoshka": loss.matryoshka, "batch_by": recipe.data.batch_by,
            "mined": recipe.data.negatives_per_query, "scale": loss.scale}


def test_the_best_recipe_is_plain_mnrl_kept_off_the_test_passages(capsys):
    """quickstart-best.yaml ships what generalised on SciFact's unseen abstracts: plain MNRL
    (scifact.yaml's levers), train decontaminated against test, dev carved by groups; its
    header names the measurement and the hybrid a user should compare it with."""
    best, plain = REPO / "recipes" / "quickstart-best.yaml", REPO / "recipes" / "scifact.yaml"
    skip_without_data(best, plain)
    assert main(["validate", str(best)]) == 0
    assert capsys.readouterr().out.count("ok") == 1
    best_recipe, plain_recipe = load_recipe(best), load_recipe(plain)
    assert _levers(best_recipe) == _levers(plain_recipe)
    assert best_recipe.training.learning_rate == plain_recipe.training.learning_rate
    assert best_recipe.data.decontaminate == [best_recipe.data.test_split]
    assert best_recipe.data.dev_carve == "group" and best_recipe.data.mined_negatives is None
    header = best.read_text(encoding="utf-8").split("\nmodel:")[0]
    assert "docs/levers.md" in header and "peak" in header and "--hybrid bm25" in header

def test_the_quickstart_winner_is_the_scifact_row_it_reports():
    """quickstart-best.yaml reports the SciFact comparison's winner, so it must train what
    scifact-best.yaml (the recipe that reproduces that row) trains: equal but for output_dir."""
    skip_without_data(REPO / "recipes" / "quickstart-best.yaml",
                      REPO / "recipes" / "scifact-best.yaml")
    quick = load_recipe(REPO / "recipes" / "quickstart-best.yaml").model_dump()
    row = load_recipe(REPO / "recipes" / "scifact-best.yaml").model_dump()
    assert quick.pop("output_dir") != row.pop("output_dir")
    assert quick == row


def _write(tmp_path, data) -> Path:
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


BASE = {"model": {"name": "m"}, "data": {"path": "d"}, "output_dir": "o"}


def test_unknown_key_is_named(tmp_path):
    path = _write(tmp_path, {**BASE, "training": {"lerning_rate": 1e-5}})
    with pytest.raises(RecipeError) as err:
        load_recipe(path)
    assert str(path) in str(err.value)
    assert "training.lerning_rate: unknown key" in str(err.value)


@pytest.mark.parametrize("written", ["1.0", "1.", "1e0"])
def test_a_dev_carve_of_one_point_zero_is_refused_not_read_as_one_query(tmp_path, written,
                                                                        capsys):
    """1.0 reads as a fraction (all of train) or a count (one query): refused, in a recipe
    and on the command line; 1 and 0.1 stay what they say."""
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump({**BASE, "data": {"path": "d"}}).replace(
        "path: d", f"path: d\n  dev_from_train: {written}"), encoding="utf-8")
    with pytest.raises(RecipeError, match=r"data.dev_from_train.*1.0 is ambiguous"):
        load_recipe(path)
    assert load_recipe(_write(tmp_path, {**BASE, "data": {"path": "d", "dev_from_train": 1}})
                       ).data.dev_from_train == 1
    with pytest.raises(SystemExit) as exited:
        main(["data", "stats", str(tmp_path), "--dev-from-train", written])
    assert exited.value.code == 2
    assert "1.0 is ambiguous" in capsys.readouterr().err


def test_unknown_section_is_named(tmp_path):
    with pytest.raises(RecipeError, match=r"optimiser: unknown key"):
        load_recipe(_write(tmp_path, {**BASE, "optimiser": {"name": "adamw"}}))


@pytest.mark.parametrize("section,key,value", [
    ("training", "epochs", "five"), ("training", "per_device_batch_size", 0),
    ("loss", "name", "triplet"), ("model", "trust_remote_code", "perhaps"),
    ("eval", "metric", "ndcg@5"), ("tracking", "backend", "mlflow"),
])
def test_wrong_type_or_value_is_named(tmp_path, section, key, value):
    with pytest.raises(RecipeError) as err:
        load_recipe(_write(tmp_path, {**BASE, section: {key: value}}))
    assert f"{section}.{key}:" in str(err.value)
    assert repr(value) in str(err.value)


def test_missing_required_key_is_named(tmp_path):
    with pytest.raises(RecipeError, match=r"output_dir: Field required"):
        load_recipe(_write(tmp_path, {"model": {"name": "m"}, "data": {"path": "d"}}))


def test_overrides_keep_types_and_win(tmp_path):
    path = _write(tmp_path, BASE)
    recipe = load_recipe(path, ["training.learning_rate=1e-5", "loss.name=matryoshka",
                                "loss.matryoshka_dims=[256, 64]", "training.bf16=false",
                                "data.dev_distractors=null", "model.lora.enabled=true"])
    assert recipe.training.learning_rate == pytest.approx(1e-5)
    assert recipe.loss.matryoshka_dims == [256, 64]
    assert recipe.training.bf16 is False
    assert recipe.data.dev_distractors is None
    assert recipe.model.lora.enabled is True


def test_bad_overrides_are_errors(tmp_path):
    path = _write(tmp_path, BASE)
    with pytest.raises(RecipeError, match="expected dotted.key=value"):
        load_recipe(path, ["training.epochs"])
    with pytest.raises(RecipeError, match="training.epoch: unknown key"):
        load_recipe(path, ["training.epoch=3"])
    with pytest.raises(RecipeError, match="'output_dir' is not a section"):
        load_recipe(path, ["output_dir.x=1"])
    assert parse_override("run=a=b") == (["run"], "a=b")


def test_matryoshka_weights_must_match_dims(tmp_path):
    with pytest.raises(RecipeError, match="matryoshka_weights"):
        load_recipe(_write(tmp_path, {**BASE, "loss": {"matryoshka_dims": [64, 32],
                                                       "matryoshka_weights": [1.0]}}))


def test_save_steps_must_be_a_multiple_of_eval_steps(tmp_path):
    with pytest.raises(RecipeError, match="training.save_steps .6. must be a multiple"):
        load_recipe(_write(tmp_path, {**BASE, "training": {"eval_steps": 4, "save_steps": 6}}))


def test_validate_command_fails_and_names_the_key(tmp_path, capsys):
    bad = _write(tmp_path, {**BASE, "training": {"lr": 1}})
    assert main(["validate", str(bad)]) == 2
    assert "training.lr: unknown key" in capsys.readouterr().out


def test_trust_remote_code_is_off_by_default(tmp_path):
    assert load_recipe(_write(tmp_path, BASE)).model.trust_remote_code is False


def test_train_accepts_overrides_before_and_after_options(monkeypatch, tmp_path):
    seen = {}

    def fake_train(recipe, run_test=False, callbacks=None, overwrite=False):
        seen["recipe"], seen["test"] = recipe, run_test
        raise SystemExit(0)

    monkeypatch.setattr("tapt.training.contrastive.train", fake_train)
    path = _write(tmp_path, BASE)
    for argv in (["train", str(path), "training.epochs=2", "--test", "output_dir=x"],
                 ["train", str(path), "--test", "training.epochs=2", "output_dir=x"]):
        with pytest.raises(SystemExit):
            main(argv)
        assert seen["test"] is True
        assert (seen["recipe"].training.epochs, seen["recipe"].output_dir) == (2, "x")
    with pytest.raises(SystemExit) as err:
        main(["train", str(path), "--tset"])
    assert err.value.code == 2


def test_splits_must_differ(tmp_path):
    with pytest.raises(RecipeError, match="must differ"):
        load_recipe(_write(tmp_path, {**BASE, "data": {"path": "d", "dev_split": "train"}}))


def test_cross_field_checks_run_when_a_recipe_is_built_in_python(tmp_path):
    data = load_recipe(_write(tmp_path, BASE)).model_dump()
    data["data"]["negatives_per_query"] = 2  # without data.mined_negatives
    with pytest.raises(ValueError, match="data.mined_negatives and data.negatives_per_query"):
        Recipe.model_validate(data)


def test_warmup_ratio_of_one_is_refused(tmp_path):
    with pytest.raises(RecipeError, match="training.warmup_ratio"):
        load_recipe(_write(tmp_path, {**BASE, "training": {"warmup_ratio": 1.0}}))
