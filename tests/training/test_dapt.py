"""DAPT end to end on tiny models: the held-out loss goes down, the export starts a TAPT run
that keeps the base model's preset, an interrupted run resumes, bad input fails early."""

from __future__ import annotations

import itertools
import json

import pytest
import torch
import yaml
from faults import CrashAt
from safetensors.torch import load_file
from sentence_transformers import SentenceTransformer

from tapt.cli import main
from tapt.data.beir import DataError
from tapt.recipe import RecipeError, load_recipe
from tapt.retrieval.metrics import METRIC_KEYS
from tapt.training.chunking import pack, windows
from tapt.training.contrastive import train
from tapt.training.dapt import dapt


@pytest.fixture
def dapt_recipe(tmp_path, tiny_bert_path, synth_path):
    """``dapt_recipe(name, **sections) -> (recipe file, output dir)``: MLM on tiny BERT."""
    def make(name: str = "dapt", **sections) -> tuple:
        output = tmp_path / name
        recipe = {
            "model": {"name": str(tiny_bert_path), "family": "default", "max_seq_length": 96,
                      "pooling": "cls", "query_prompt": "query: ",
                      "document_prompt": "passage: "},
            "data": {"path": str(synth_path), "dev_distractors": 10, "held_out_fraction": 0.1},
            "objective": {"name": "mlm"},
            "chunking": {"max_length": 64, "overlap": 8},
            "training": {"epochs": 1, "max_steps": 8, "learning_rate": 5e-3,
                         "per_device_batch_size": 8, "bf16": False, "eval_steps": 4,
                         "logging_steps": 2, "warmup_ratio": 0.0, "seed": 5},
            "eval": {"batch_size": 8},
            "output_dir": str(output),
        }
        for section, values in sections.items():
            recipe.setdefault(section, {}).update(values)
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(recipe), encoding="utf-8")
        return path, output
    return make


def history(output) -> list[dict]:
    return [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]


def test_mlm_lowers_heldout_loss_and_its_export_starts_tapt_with_the_base_preset(
        dapt_recipe, make_recipe):
    recipe_file, output = dapt_recipe("mlm")
    assert main(["dapt", str(recipe_file)]) == 0
    entries = history(output)
    assert [e["step"] for e in entries] == [0, 4, 8]
    losses = [e["heldout_loss"] for e in entries]
    assert losses[2] < losses[1] < losses[0] and losses[2] < 0.95 * losses[0]
    assert entries[-1]["perplexity"] == pytest.approx(
        torch.tensor(entries[-1]["heldout_loss"]).exp().item(), rel=1e-4)
    assert all(0.0 <= e[key] <= 1.0 for e in entries for key in METRIC_KEYS)  # dev retrieval
    final = output / "final"
    record = json.loads((final / "tapt_preset.json").read_text())
    assert record["stage"] == "dapt" and record["pooling"] == "cls"
    base_path = load_recipe(recipe_file, kind="dapt").model.name  # a local folder: its name
    assert record["base_model"] == base_path.rstrip("/").rsplit("/", 1)[-1]
    assert (final / "LICENSE").is_file() and "Domain-adaptive" in (final / "README.md").read_text()

    # The encoder changed, and the export holds it (not the base weights).
    base = load_file(load_recipe(recipe_file, kind="dapt").model.name + "/model.safetensors")
    trained = load_file(final / "model.safetensors")
    key = next(k for k in trained if "word_embeddings" in k)
    assert not torch.equal(base[key], trained[key])

    # TAPT from the DAPT export: family auto, no pooling/prompts given -> the base's preset.
    tapt_file, tapt_output = make_recipe("after-dapt", model_path=final,
                                         model={"max_seq_length": None},
                                         training={"max_steps": 2, "eval_steps": 2})
    train(load_recipe(tapt_file))
    model = SentenceTransformer(str(tapt_output / "final"))
    assert model.prompts["query"] == "query: " and model.prompts["document"] == "passage: "
    assert model[1].pooling_mode == "cls" and model.max_seq_length == 96
    chained = json.loads((tapt_output / "final" / "tapt_preset.json").read_text())
    assert chained["base_model"] == record["base_model"] and chained["stage"] == "tapt"


def test_simcse_on_a_decoder_lowers_heldout_loss_and_keeps_the_qwen3_preset(
        dapt_recipe, tiny_qwen3_path, make_recipe):
    recipe_file, output = dapt_recipe(
        "simcse", model={"name": str(tiny_qwen3_path), "family": "qwen3", "pooling": None,
                         "query_prompt": None, "document_prompt": None,
                         "max_seq_length": 128},
        objective={"name": "simcse"}, training={"learning_rate": 2e-3, "max_steps": 10,
                                                "eval_steps": 5})
    result = dapt(load_recipe(recipe_file, kind="dapt"))
    entries = result.history
    assert entries[-1]["heldout_loss"] < entries[0]["heldout_loss"]
    assert "perplexity" not in entries[-1]
    final = output / "final"
    assert json.loads((final / "tapt_preset.json").read_text())["family"] == "qwen3"
    config = json.loads((final / "config.json").read_text())
    assert config.get("attention_dropout", 0.0) == 0.0  # SimCSE's dropout is not exported

    tapt_file, tapt_output = make_recipe("qwen3-after-dapt", model_path=final,
                                         model={"max_seq_length": None},
                                         training={"max_steps": 2, "eval_steps": 2})
    train(load_recipe(tapt_file))
    model = SentenceTransformer(str(tapt_output / "final"))
    assert model.prompts["query"].startswith("Instruct: ")
    assert model[1].pooling_mode == "lasttoken"
    assert model.tokenizer("probe")["input_ids"][-1] == model.tokenizer.eos_token_id


def test_mlm_needs_a_mask_token(dapt_recipe, tiny_qwen3_path):
    recipe_file, output = dapt_recipe("no-mask", model={"name": str(tiny_qwen3_path),
                                                       "family": "qwen3"})
    with pytest.raises(RecipeError, match="objective.name: simcse"):
        dapt(load_recipe(recipe_file, kind="dapt"))
    assert not (output / "final").exists()



def test_an_interrupted_dapt_run_resumes_to_the_same_weights(dapt_recipe):
    settings = {"training": {"max_steps": 6, "eval_steps": 3, "save_total_limit": 3}}
    straight_file, straight = dapt_recipe("straight", **settings)
    dapt(load_recipe(straight_file, kind="dapt"))
    crash_file, crashed = dapt_recipe("crashed", **settings)
    with pytest.raises(KeyboardInterrupt):
        dapt(load_recipe(crash_file, kind="dapt"), callbacks=[CrashAt(4)])
    assert (crashed / "checkpoints" / "checkpoint-3").is_dir()
    assert not (crashed / "final").exists()
    assert dapt(load_recipe(crash_file, kind="dapt")).final_dir is not None
    a = load_file(straight / "final" / "model.safetensors")
    b = load_file(crashed / "final" / "model.safetensors")
    for key in a:
        torch.testing.assert_close(a[key], b[key], atol=1e-6, rtol=0)
    # The folder of a finished DAPT run is never reused.
    with pytest.raises(RecipeError, match="finished run"):
        dapt(load_recipe(crash_file, kind="dapt"))


def test_whole_word_masking_and_packing_train(dapt_recipe):
    recipe_file, _ = dapt_recipe("wwm-pack", objective={"whole_word_masking": True},
                                      chunking={"mode": "pack"},
                                      training={"max_steps": 2, "eval_steps": 2})
    result = dapt(load_recipe(recipe_file, kind="dapt"))
    assert result.final_dir is not None and result.history[-1]["step"] == 2


def test_plain_passage_files_and_their_errors(dapt_recipe, tmp_path):
    good = tmp_path / "passages.jsonl"
    good.write_text("".join(json.dumps({"title": "P", "text": f"calcium carbonate filler {i}"})
                            + "\n" for i in range(40)), encoding="utf-8")
    lines = tmp_path / "more.txt"
    lines.write_text("a primer with a binder\n\nxanthan gum thickener\n", encoding="utf-8")
    recipe_file, _ = dapt_recipe("files", data={"path": None, "files": [str(good), str(lines)],
                                                "dev_split": None},
                                 training={"max_steps": 2, "eval_steps": 2})
    result = dapt(load_recipe(recipe_file, kind="dapt"))
    assert result.final_dir is not None
    assert all(key not in result.history[-1] for key in METRIC_KEYS)  # no dev data: no retrieval

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{"title": "no text"}\n', encoding="utf-8")
    recipe_file, output = dapt_recipe("bad", data={"path": None, "files": [str(bad)],
                                                   "dev_split": None})
    with pytest.raises(DataError, match=r"bad.jsonl:2: field 'text': missing"):
        dapt(load_recipe(recipe_file, kind="dapt"))
    assert not (output / "checkpoints").exists()


def test_recipes_of_the_wrong_kind_are_refused_with_a_hint(dapt_recipe, make_recipe):
    recipe_file, _ = dapt_recipe("kind")
    with pytest.raises(RecipeError, match="run it with tapt dapt"):
        load_recipe(recipe_file)
    tapt_file, _ = make_recipe("tapt-kind")
    with pytest.raises(RecipeError, match="not a DAPT recipe"):
        load_recipe(tapt_file, kind="dapt")
    assert main(["validate", str(recipe_file), str(tapt_file)]) == 0


def test_windows_cover_the_passage_with_the_overlap():
    assert windows(10, 4, 1) == [(0, 4), (3, 7), (6, 10)]
    assert windows(3, 4, 1) == [(0, 3)]
    spans = windows(1000, 128, 32)
    assert spans[0][0] == 0 and spans[-1][1] == 1000
    assert all(b[0] == a[1] - 32 for a, b in itertools.pairwise(spans))
    assert pack([[1, 2, 3], [4, 5], [6]], 3, separator=0) == [[1, 2, 3], [0, 4, 5], [0, 6]]
