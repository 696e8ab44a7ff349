"""End-to-end TAPT runs on tiny models built at test time."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch
from faults import CrashAt
from safetensors.torch import load_file
from sentence_transformers import SentenceTransformer

from tapt.cli import main
from tapt.data.sources import load_data
from tapt.data.triplets import build_rows
from tapt.encoders.loading import ModelSpec, load_sentence_transformer
from tapt.recipe import RecipeError, load_recipe
from tapt.retrieval.metrics import METRIC_KEYS
from tapt.training.contrastive import train
from tapt.training.losses import build_loss


def mnrl_loss(model, rows) -> float:
    """The MNRL loss of ``model`` on ``rows`` in one batch, in eval mode (no dropout)."""
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    model.eval()
    loss = MultipleNegativesRankingLoss(model)
    columns = [[row[key] for row in rows] for key in ("query", "positive", "negative")]
    features = [model.tokenize(texts) for texts in columns]
    with torch.no_grad():
        return float(loss(features, None))


def test_training_lowers_the_loss_and_exports(make_recipe, tiny_beir_path):
    recipe_file, output = make_recipe(
        "lower", data_path=tiny_beir_path, model={"max_seq_length": 128},
        data={"dev_distractors": 5},
        training={"max_steps": 8, "learning_rate": 5e-3, "per_device_batch_size": 6})
    recipe = load_recipe(recipe_file)
    rows, _ = build_rows(load_data(tiny_beir_path, splits=["train"]), "train")
    before = mnrl_loss(load_sentence_transformer(ModelSpec(recipe.model.name,
                                                           max_seq_length=128)), rows)
    result = train(recipe)
    for model_dir in (output / "checkpoints" / "checkpoint-8", result.final_dir):
        after = mnrl_loss(SentenceTransformer(str(model_dir)), rows)
        assert after < 0.5 * before, (model_dir, before, after)

    # The run folder: recipe, zero-shot first in the metrics, best + last checkpoints.
    history = [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]
    assert [entry["step"] for entry in history] == [0, 2, 4, 6, 8]
    assert all(0.0 <= entry[key] <= 1.0 for entry in history for key in METRIC_KEYS)
    checkpoints = sorted(p.name for p in (output / "checkpoints").glob("checkpoint-*"))
    assert len(checkpoints) <= 2 and "checkpoint-8" in checkpoints
    best = max(history[1:], key=lambda entry: entry["binary_ndcg@10"])
    assert result.best_step == best["step"] or history[result.best_step // 2]["binary_ndcg@10"] \
        == best["binary_ndcg@10"]
    assert load_recipe(output / "recipe.yaml") == recipe


def test_export_is_an_apache_licensed_sentence_transformer(make_recipe, tiny_qwen3_path,
                                                          monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_secretTOKEN123456")
    monkeypatch.setenv("WANDB_API_KEY", "wandbSECRET0987654321")
    recipe_file, output = make_recipe("export", model_path=tiny_qwen3_path,
                                      model={"family": "qwen3"})
    assert main(["train", str(recipe_file), "--test"]) == 0
    final = output / "final"
    assert (final / "model.safetensors").is_file()
    assert "Apache License" in (final / "LICENSE").read_text()
    card = (final / "README.md").read_text()
    assert "license: apache-2.0" in card
    assert "### Dev curve" in card and "dev_curve.png" in card and (final / "dev_curve.png").is_file()
    assert "TAPT test" in card and "zero-shot dev" in card

    model = SentenceTransformer(str(final))
    prompt = model.prompts["query"]
    assert prompt.startswith("Instruct: ") and prompt.endswith("\nQuery:")
    text = "Which binder is used in the primer?"
    np.testing.assert_allclose(model.encode_query([text]), model.encode([prompt + text]),
                               atol=1e-6)
    assert not np.allclose(model.encode_query([text]), model.encode([text]), atol=1e-4)
    assert model.tokenizer(text)["input_ids"][-1] == model.tokenizer.eos_token_id

    for path in output.rglob("*"):
        if path.is_file() and path.suffix in {".md", ".json", ".yaml", ".jsonl", ".txt"}:
            content = path.read_text(errors="ignore")
            assert "hf_secretTOKEN123456" not in content, path
            assert "wandbSECRET0987654321" not in content, path


@pytest.mark.parametrize("loss", ["matryoshka", "cached_mnrl"])
def test_other_losses_train(make_recipe, loss, tmp_path):
    recipe_file, _ = make_recipe(loss, loss={"name": loss, "matryoshka_dims": [32, 16, 8],
                                             "mini_batch_size": 4},
                                      training={"max_steps": 2})
    result = train(load_recipe(recipe_file))
    assert (result.final_dir / "model.safetensors").is_file()
    if loss == "matryoshka":
        out = tmp_path / "truncated.json"
        assert main(["eval", "--model", str(result.final_dir), "--data",
                     str(load_recipe(recipe_file).data.path), "--split", "test",
                     "--truncate-dim", "8", "--output", str(out), "--quiet"]) == 0
        report = json.loads(out.read_text())
        assert report["evaluated"]["model"].endswith("@8")
        assert all(0.0 <= report[key] <= 1.0 for key in METRIC_KEYS)


def test_matryoshka_loss_trains_every_dimension(tiny_bert_path):
    from tapt.recipe import LossSettings

    model = load_sentence_transformer(ModelSpec(str(tiny_bert_path)))
    loss = build_loss(model, LossSettings(name="matryoshka", matryoshka_dims=[64, 16, 8]))
    # 64 is wider than the tiny model (32): dropped, and the full width is always kept.
    assert list(loss.matryoshka_dims) == [32, 16, 8]


def test_lora_export_merges_weights_exactly(make_recipe, tiny_bert_path, tmp_path):
    from tapt.recipe import LoraSettings
    from tapt.training.lora import add_lora, merge_lora

    model = load_sentence_transformer(ModelSpec(str(tiny_bert_path)))
    add_lora(model, LoraSettings(enabled=True, r=4, alpha=8, dropout=0.0,
                                 target_modules=["query", "value"]))
    torch.manual_seed(0)
    for name, param in model.named_parameters():
        if "lora_B" in name:  # peft starts B at zero: give the adapter an effect
            param.data.normal_(0, 0.5)
    texts = ["calcium carbonate as a filler", "a wetting agent in the primer"]
    with_adapter = model.encode(texts)
    base = load_sentence_transformer(ModelSpec(str(tiny_bert_path))).encode(texts)
    assert not np.allclose(with_adapter, base, atol=1e-3)
    assert merge_lora(model) is True
    assert not any("lora" in name for name, _ in model.named_parameters())
    np.testing.assert_allclose(model.encode(texts), with_adapter, atol=1e-5)
    saved = tmp_path / "merged"
    model.save(str(saved))
    np.testing.assert_allclose(SentenceTransformer(str(saved)).encode(texts), with_adapter,
                               atol=1e-5)

    # A LoRA training run exports plain (merged) weights that load without peft.
    recipe_file, output = make_recipe("lora", model={"lora": {"enabled": True, "r": 4,
                                                              "target_modules": ["query"]}},
                                      training={"max_steps": 2})
    train(load_recipe(recipe_file))
    final = output / "final"
    assert not (final / "adapter_config.json").exists()
    assert not any("lora" in key for key in load_file(final / "model.safetensors"))
    SentenceTransformer(str(final)).encode(texts)



def test_resume_gives_the_same_weights_as_an_uninterrupted_run(make_recipe):
    steps = {"max_steps": 6, "eval_steps": 3, "save_total_limit": 3}
    straight_file, straight = make_recipe("straight", training=steps)
    train(load_recipe(straight_file))

    crash_file, crashed = make_recipe("crashed", training=steps)
    with pytest.raises(KeyboardInterrupt):
        train(load_recipe(crash_file), callbacks=[CrashAt(4)])
    assert (crashed / "checkpoints" / "checkpoint-3").is_dir()
    assert not (crashed / "final").exists()
    result = train(load_recipe(crash_file))  # same recipe, same folder: resumes
    assert result.final_dir is not None

    for name in ("checkpoints/checkpoint-6/model.safetensors", "final/model.safetensors"):
        a, b = load_file(straight / name), load_file(crashed / name)
        assert a.keys() == b.keys()
        for key in a:
            torch.testing.assert_close(a[key], b[key], atol=1e-6, rtol=0)


def test_output_folder_of_another_run_is_refused(make_recipe, tmp_path):
    recipe_file, output = make_recipe("first", training={"max_steps": 2})
    train(load_recipe(recipe_file))
    before = sorted(p.relative_to(output) for p in output.rglob("*"))
    changed = load_recipe(recipe_file, ["training.learning_rate=0.5"])
    with pytest.raises(RecipeError, match=r"(?s)different run.*training.learning_rate: 0.001 -> 0.5"):
        train(changed)
    with pytest.raises(RecipeError, match="finished run"):
        train(load_recipe(recipe_file))
    assert sorted(p.relative_to(output) for p in output.rglob("*")) == before

    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(RecipeError, match="no recipe.yaml"):
        train(load_recipe(recipe_file, [f"output_dir={foreign}"]))
    assert (foreign / "notes.txt").read_text() == "mine"


def test_bad_data_fails_before_anything_is_written(make_recipe, synth_path, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(synth_path, bad)
    qrels = bad / "qrels" / "train.tsv"
    qrels.write_text(qrels.read_text() + "q-unknown\tp0001-c1\t3\n")
    recipe_file, output = make_recipe("badrun", data_path=bad)
    assert main(["train", str(recipe_file)]) == 2
    assert not output.exists()


def test_in_loop_metrics_equal_tapt_eval_of_the_checkpoint(make_recipe, tmp_path):
    recipe_file, output = make_recipe("same", training={"max_steps": 2, "eval_steps": 2})
    recipe = load_recipe(recipe_file)
    train(recipe)
    in_loop = [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]
    step2 = next(entry for entry in in_loop if entry["step"] == 2)
    out = tmp_path / "eval.json"
    assert main(["eval", "--model", str(output / "checkpoints" / "checkpoint-2"),
                 "--data", recipe.data.path, "--split", "dev",
                 "--distractors", str(recipe.data.dev_distractors),
                 "--seed", str(recipe.data.dev_seed), "--batch-size",
                 str(recipe.eval.batch_size), "--output", str(out), "--quiet"]) == 0
    single = json.loads(out.read_text())
    for key in METRIC_KEYS:
        assert single[key] == pytest.approx(step2[key], abs=1e-6)


def test_qwen3_padding_side_does_not_change_the_training_loss(tiny_qwen3_path, synth_path):
    rows, _ = build_rows(load_data(synth_path, splits=["train"]), "train")
    losses = {}
    for side in ("left", "right"):
        model = load_sentence_transformer(ModelSpec(str(tiny_qwen3_path), family="qwen3",
                                                    max_seq_length=64))
        model.tokenizer.padding_side = side
        losses[side] = mnrl_loss(model, rows[:8])
    assert losses["left"] == pytest.approx(losses["right"], abs=1e-5)


def test_training_batches_carry_the_query_instruction(make_recipe, tiny_qwen3_path, tmp_path):
    """The trainer's collator must add the same prompts that evaluation and export use."""
    from datasets import Dataset

    from tapt.run_folder.layout import RunDir
    from tapt.training.assembly import column_prompts, training_arguments
    from tapt.training.losses import build_loss
    from tapt.training.trainer import TaptTrainer

    recipe_file, _ = make_recipe("prompts", model_path=tiny_qwen3_path,
                                 model={"family": "qwen3", "document_prompt": "passage: "})
    recipe = load_recipe(recipe_file)
    model = load_sentence_transformer(ModelSpec(str(tiny_qwen3_path), family="qwen3",
                                                document_prompt="passage: "))
    prompts = column_prompts(model)
    assert prompts["query"].startswith("Instruct: ") and prompts["negative"] == "passage: "
    args = training_arguments(recipe, RunDir(tmp_path / "run"), False, prompts=prompts)
    rows = Dataset.from_list([{"query": "which binder?", "positive": "a binder",
                               "negative": "a solvent"}])
    trainer = TaptTrainer(model=model, args=args, train_dataset=rows, eval_dataset=rows,
                          loss=build_loss(model, recipe.loss))
    batch = trainer.data_collator([rows[0]])
    decode = model.tokenizer.decode
    assert decode(batch["query_input_ids"][0], skip_special_tokens=True) == \
        prompts["query"] + "which binder?"
    assert decode(batch["negative_input_ids"][0], skip_special_tokens=True) == "passage: a solvent"
