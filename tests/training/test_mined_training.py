"""Training on mined negatives: K mined columns per row, with every loss."""

from __future__ import annotations

import pytest

import tapt.training.losses as losses_module
from tapt.cli import main
from tapt.recipe import RecipeError, load_recipe
from tapt.training.contrastive import train


@pytest.mark.parametrize("loss", ["mnrl", "matryoshka", "cached_mnrl"])
def test_training_rows_hold_k_mined_negatives(make_recipe, tiny_beir_path, tiny_bert_path,
                                              tmp_path, monkeypatch, loss):
    k = 2
    mined = tmp_path / "mined.jsonl"  # a dense teacher ranks every passage: K for each query
    assert main(["mine", "--data", str(tiny_beir_path), "--retriever", str(tiny_bert_path),
                 "--output", str(mined), "--per-query", str(k), "--margin", "none",
                 "--quiet"]) == 0
    columns_seen = []
    build = losses_module.build_loss

    def recording(model, settings):
        built = build(model, settings)
        inner = getattr(built, "model", None)
        forward = built.forward

        def forward_recorded(features, labels=None, *args, **kwargs):
            if built.training:
                columns_seen.append(len(features))
            return forward(features, labels, *args, **kwargs)
        built.forward = forward_recorded
        assert inner is not None
        return built
    monkeypatch.setattr(losses_module, "build_loss", recording)
    recipe_file, output = make_recipe(
        f"mined-{loss}", data_path=tiny_beir_path,
        data={"mined_negatives": str(mined), "negatives_per_query": k, "dev_distractors": 5},
        loss={"name": loss, "matryoshka_dims": [16, 8], "mini_batch_size": 2},
        training={"max_steps": 2, "eval_steps": 2, "per_device_batch_size": 3})
    result = train(load_recipe(recipe_file))
    assert result.final_dir is not None
    # query + positive + graded hard negative + k mined: k + 1 negatives per query.
    assert columns_seen and set(columns_seen) == {2 + 1 + k}
    saved = load_recipe(output / "recipe.yaml")
    assert saved.data.negatives_per_query == k


def test_mined_negatives_need_their_count(make_recipe, tiny_beir_path, tmp_path):
    (tmp_path / "m.jsonl").write_text("")  # exists: the schema checks paths before pairs
    recipe_file, _ = make_recipe("half", data_path=tiny_beir_path,
                                 data={"mined_negatives": str(tmp_path / "m.jsonl")})
    with pytest.raises(RecipeError, match="go together"):
        train(load_recipe(recipe_file))
