"""Recipe keys are discoverable: `tapt recipe schema` lists every key with its type, default
and help, and an unknown key names the closest one (in files and in overrides)."""

from __future__ import annotations

import typing

import pytest
import yaml

from tapt.cli import main
from tapt.recipe import DaptRecipe, Recipe, RecipeError, describe_schema, load_recipe
from tapt.recipe.keys import all_keys, closest_key, help_line


def test_every_key_has_a_type_a_default_and_one_line_of_help():
    for kind, schema in (("tapt", Recipe), ("dapt", DaptRecipe)):
        rows = describe_schema(kind)
        keys = [row.key for row in rows]
        assert len(keys) == len(set(keys))
        for row in rows:
            assert row.type and row.default, row
            assert row.help and "\n" not in row.help, f"{kind}: {row.key} has no help"
        # every leaf key of the schema is a row, nothing else is
        sections = {key for key in all_keys(schema) if any(k.startswith(key + ".")
                                                              for k in all_keys(schema))}
        assert set(keys) == set(all_keys(schema)) - sections


def test_rows_give_types_defaults_and_bounds():
    rows = {row.key: row for row in describe_schema("tapt")}
    assert rows["training.max_steps"].type == "int (-1 or in [1, 1000000000])"
    assert rows["training.max_steps"].default == "-1"
    assert rows["training.learning_rate"].type == "float (in (0, 1])"  # tapt.util.bounds
    assert rows["model.name"].default == "(required)"
    losses = typing.get_args(Recipe.model_fields["loss"].annotation.model_fields["name"].annotation)
    assert rows["loss.name"].type == " | ".join(losses) and "cached_mnrl" in losses
    assert rows["model.max_seq_length"].default == "null"
    assert rows["data.with_title"].default == "true"
    # a section's own default instance wins: DAPT trains 1 epoch at 5e-5
    dapt = {row.key: row for row in describe_schema("dapt")}
    assert dapt["training.epochs"].default == "1.0"
    assert dapt["training.learning_rate"].default == "5e-05"
    with pytest.raises(RecipeError, match="tapt or dapt"):
        describe_schema("mlm")


def test_help_is_the_first_sentence():
    assert help_line("Local BEIR folder (e.g. x/y). More.") == "Local BEIR folder (e.g. x/y)."
    assert help_line("A ``key`` via :func:`f`\n  wrapped") == "A `key` via `f` wrapped"


@pytest.mark.parametrize(("location", "meant"), [
    (("training", "max_step"), "training.max_steps"),
    (("trainig",), "training"),
    (("training", "top_k"), "eval.top_k"),  # a key of that name in another section
    (("model", "lora", "enabeld"), "model.lora.enabled"),
    (("model", "zzz"), None),
    (("nosuch", "max_steps"), None),
])
def test_closest_key(location, meant):
    assert closest_key(location, Recipe) == meant


def test_unknown_key_in_a_file_names_the_closest(make_recipe):
    recipe_file, _ = make_recipe("typo")
    data = yaml.safe_load(recipe_file.read_text())
    data["training"]["max_step"] = data["training"].pop("max_steps")
    recipe_file.write_text(yaml.safe_dump(data))
    with pytest.raises(RecipeError) as err:
        load_recipe(recipe_file)
    assert "training.max_step: unknown key; did you mean training.max_steps?" in str(err.value)


def test_unknown_key_in_an_override_names_the_closest(make_recipe):
    recipe_file, _ = make_recipe("override")
    with pytest.raises(RecipeError) as err:
        load_recipe(recipe_file, ["training.max_step=3"])
    assert "training.max_step: unknown key; did you mean training.max_steps?" in str(err.value)
    with pytest.raises(RecipeError) as err:  # a DAPT recipe is matched against its own keys
        load_recipe(recipe_file, ["objective.name=mlm", "chunking.max_lenght=64"],
                    kind="dapt")
    assert "chunking.max_lenght: unknown key; did you mean chunking.max_length?" in \
        str(err.value)


def test_cli_prints_the_schema(capsys):
    assert main(["recipe", "schema"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["key", "type", "default", "help"]
    row = next(line for line in lines if line.startswith("training.max_steps "))
    assert row.split()[1] == "int" and "])  " in row and row.split("])")[1].split()[0] == "-1"
    assert main(["recipe", "schema", "--kind", "dapt"]) == 0
    assert any(line.startswith("objective.mlm_probability ")
               for line in capsys.readouterr().out.splitlines())
