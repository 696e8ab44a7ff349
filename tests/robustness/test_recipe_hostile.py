"""Hostile recipes and ``key=value`` overrides through ``tapt.recipe.load_recipe`` and through
``tapt validate`` / ``tapt train``: accepted when valid, else a RecipeError naming the file
and the key (or the YAML line); ``tapt train`` never creates its output folder for a
refused recipe."""

from __future__ import annotations

import os

import pytest

from robustness.hostile import VALID, billion_laughs, document_variants
from tapt.recipe import load_recipe, parse_override

VALID_RECIPE = """\
# a small TAPT recipe (é)
model:
  name: sentence-transformers/all-MiniLM-L6-v2
data:
  path: data/quickstart
training:
  epochs: 1
  learning_rate: 2.0e-5
  per_device_batch_size: 8
output_dir: {output}
"""


def recipe_text(tmp_path) -> str:
    return VALID_RECIPE.format(output=tmp_path / "run")


ACCEPTED = {VALID, "UTF-8 BOM at the start", "CRLF line ends"}


@pytest.mark.parametrize("variant", list(document_variants(b"x" * 20)))
def test_recipe_encoding_and_framing(variant, tmp_path, reliability_case, quiet_cli, capsys):
    data = document_variants(recipe_text(tmp_path).encode("utf-8"))[variant]
    path = tmp_path / "recipe.yaml"
    path.write_bytes(data)
    expected = "accepted" if variant in ACCEPTED else "refused"
    case = reliability_case("recipe (YAML)", variant, expected=expected)
    api = case.api(load_recipe, path, via="API load_recipe")
    cli = case.cli(["validate", str(path)], capsys)
    if expected == "accepted":
        api.assert_accepted()
        cli.assert_accepted()
        return
    api.assert_refused(path)
    cli.assert_refused(path)
    case.cli(["train", str(path)], capsys, watch=[tmp_path],
             must_not_exist=[tmp_path / "run"]).assert_refused(path)


CONTENT = [
    ("nested 5,000 levels deep", lambda r: r + "extra: " + "[" * 5_000 + "]" * 5_000 + "\n",
     "refused"),
    ("billion laughs: 9**9 aliased scalars under a key the schema reads",
     lambda r: billion_laughs().decode() + r.replace(
         "  name: sentence-transformers/all-MiniLM-L6-v2",
         "  name: x\n  lora: {target_modules: *a8}"), "refused"),
    ("billion laughs under unknown keys", lambda r: r + billion_laughs().decode(), "refused"),
    ("tab indentation", lambda r: r.replace("  epochs: 1", "\tepochs: 1"), "refused"),
    ("unclosed flow mapping", lambda r: r + "eval: {batch_size: 8\n", "refused"),
    ("duplicate section (YAML keeps the last one)",
     lambda r: r + "training:\n  epochs: 2\n", "accepted"),
    ("top level is a list", lambda r: "- model\n- data\n", "refused"),
    ("top level is a scalar", lambda r: "just text\n", "refused"),
    ("only comments", lambda r: "# nothing here\n# at all\n", "refused"),
    ("training.epochs: .inf", lambda r: r.replace("epochs: 1", "epochs: .inf"), "refused"),
    ("training.learning_rate: .nan",
     lambda r: r.replace("learning_rate: 2.0e-5", "learning_rate: .nan"), "refused"),
    ("training.learning_rate: 1e999 (a string in YAML 1.1, inf as a float)",
     lambda r: r.replace("learning_rate: 2.0e-5", "learning_rate: 1e999"), "refused"),
    ("training.per_device_batch_size: -1",
     lambda r: r.replace("per_device_batch_size: 8", "per_device_batch_size: -1"), "refused"),
    ("training.per_device_batch_size: 1.5",
     lambda r: r.replace("per_device_batch_size: 8", "per_device_batch_size: 1.5"), "refused"),
    ("unknown key", lambda r: r.replace("  epochs: 1", "  epochs: 1\n  epoch: 2"), "refused"),
    ("model.name: null",
     lambda r: r.replace("sentence-transformers/all-MiniLM-L6-v2", "null"), "refused"),
    ("model.name: no (YAML 1.1 reads a boolean)",
     lambda r: r.replace("sentence-transformers/all-MiniLM-L6-v2", "no"), "refused"),
    ("a !!python/object/apply tag", lambda r: r + "x: !!python/object/apply:os.system [ls]\n",
     "refused"),
    ("a DAPT recipe given to tapt train", lambda r: r + "objective: {name: mlm}\n", "refused"),
]


@pytest.mark.parametrize("name,change,expected", CONTENT, ids=[c[0] for c in CONTENT])
def test_recipe_content(name, change, expected, tmp_path, reliability_case, quiet_cli, capsys):
    path = tmp_path / "recipe.yaml"
    path.write_text(change(recipe_text(tmp_path)), encoding="utf-8")
    case = reliability_case("recipe (YAML)", name, expected=expected)
    api = case.api(load_recipe, path, timeout=10, via="API load_recipe")
    if expected == "accepted":
        api.assert_accepted()
        return
    api.assert_refused(path)
    case.cli(["train", str(path)], capsys, timeout=10, watch=[tmp_path],
             must_not_exist=[tmp_path / "run"]).assert_refused(path)


def test_recipe_over_the_size_limit(tmp_path, reliability_case, monkeypatch):
    from tapt.recipe import io as recipe_io

    monkeypatch.setattr(recipe_io, "MAX_RECIPE_BYTES", 4096)
    path = tmp_path / "recipe.yaml"
    path.write_text(recipe_text(tmp_path) + "# " + "x" * 5000 + "\n", encoding="utf-8")
    case = reliability_case("recipe (YAML)", "file over the recipe size limit (one long line)")
    case.api(load_recipe, path, via="API load_recipe").assert_refused(path)


def _loop(path):
    os.symlink(path, path)


FILESYSTEM = [
    ("recipe path missing", lambda p: None),
    ("recipe is a folder", lambda p: p.mkdir()),
    ("recipe is a symlink loop", _loop),
    ("recipe is a FIFO (named pipe, nobody writing)", lambda p: os.mkfifo(p)),
]


@pytest.mark.parametrize("name,make", FILESYSTEM, ids=[c[0] for c in FILESYSTEM])
def test_recipe_filesystem(name, make, tmp_path, reliability_case, quiet_cli, capsys):
    path = tmp_path / "recipe.yaml"
    make(path)
    case = reliability_case("recipe (YAML)", name)
    case.api(load_recipe, path, timeout=10, via="API load_recipe").assert_refused(path)
    case.cli(["validate", str(path)], capsys, timeout=10).assert_refused(path)


OVERRIDES = [
    ("training.epochs=inf", "refused"),
    ("training.epochs=.nan", "refused"),
    ("training.learning_rate=1e999", "refused"),
    ("training.learning_rate=1e-5", "accepted"),
    ("=5", "refused"),
    ("training.epochs", "refused"),
    ("training.epochs=[", "refused"),
    ("training.epochs=\x00", "refused"),
    ("training.epochs=!!python/object/apply:os.system [ls]", "refused"),
    ("training.epochs.sub=1", "refused"),
    ("training..epochs=1", "refused"),
    ("nosuchsection.key=1", "refused"),
    (".".join(["deep"] * 10_000) + "=1", "refused"),
    ("training.epochs=" + "[" * 5_000, "refused"),
]


def _override_id(text: str) -> str:
    return text if len(text) < 60 else text[:40] + f"... ({len(text):,} characters)"


@pytest.mark.parametrize("override,expected", OVERRIDES,
                         ids=[_override_id(o) for o, _ in OVERRIDES])
def test_overrides(override, expected, tmp_path, reliability_case, quiet_cli, capsys):
    path = tmp_path / "recipe.yaml"
    path.write_text(recipe_text(tmp_path), encoding="utf-8")
    shown = _override_id(override).replace("\x00", "\\x00")
    case = reliability_case("recipe override (key=value)", shown, expected=expected)
    api = case.api(load_recipe, path, [override], timeout=10, via="API load_recipe")
    if expected == "accepted":
        api.assert_accepted()
        return
    api.assert_refused()
    assert str(path) in api.message or "override" in api.message, api.message
    case.cli(["train", str(path), override], capsys, timeout=10, watch=[tmp_path],
             must_not_exist=[tmp_path / "run"]).assert_refused()


def test_parse_override_alone(reliability_case):
    case = reliability_case("recipe override (key=value)", "parse_override('a=[')")
    case.api(parse_override, "a=[", via="API parse_override").assert_refused(
        contains="a=[")
