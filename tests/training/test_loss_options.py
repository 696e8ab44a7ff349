"""Loss options (``loss.directions``, ``loss.hardness_*``, ``gist`` / ``cached_gist`` with a
guide, ``mnsrl``, ``loss.matryoshka``): thin mappings onto sentence-transformers' losses,
checked by the recipe schema."""

from __future__ import annotations

import math

import pytest
import torch
import yaml

from tapt.encoders.loading import ModelSpec, load_sentence_transformer
from tapt.recipe import LossSettings, RecipeError, load_recipe
from tapt.training.contrastive import train
from tapt.training.losses import build_loss, load_guide

QUERIES = ["filler for a primer", "a wetting agent", "dispersant for pigments",
           "thickener for paint"]
POSITIVES = ["calcium carbonate as a filler in the primer", "a wetting agent in the primer",
             "a dispersant keeps the pigment apart", "a cellulose thickener for the paint"]
NEGATIVES = ["a solvent for the resin", "titanium dioxide as a white pigment",
             POSITIVES[0],  # planted: a duplicate of query 0's positive
             "a biocide against mould"]
BATCH = len(QUERIES)


@pytest.fixture(scope="module")
def tiny_model(tiny_bert_path):
    model = load_sentence_transformer(ModelSpec(str(tiny_bert_path)))
    return model.eval()  # no dropout: the guide and the model see the same embeddings


def features(model, with_negatives: bool = True) -> list[dict]:
    columns = [QUERIES, POSITIVES, *([NEGATIVES] if with_negatives else [])]
    return [model.preprocess(texts) for texts in columns]


def logsumexp_inputs(monkeypatch) -> list[torch.Tensor]:
    """Every logits matrix MultipleNegativesRankingLoss normalises (its softmax
    denominators go through ``torch.logsumexp``)."""
    seen: list[torch.Tensor] = []
    original = torch.logsumexp

    def recording(scores, *args, **kwargs):
        seen.append(scores.detach().clone())
        return original(scores, *args, **kwargs)

    monkeypatch.setattr(torch, "logsumexp", recording)
    return seen


def test_gist_with_a_guide_masks_a_planted_duplicate_and_mnrl_does_not(tiny_model,
                                                                       monkeypatch):
    gist = build_loss(tiny_model, LossSettings(name="gist", margin=0.05))
    assert gist.guide is not tiny_model and not gist.guide.training
    assert not any(param.requires_grad for param in gist.guide.parameters())
    logits = []
    criterion = gist.cross_entropy_loss
    criterion.register_forward_pre_hook(lambda _, inputs: logits.append(inputs[0].detach()))
    with torch.no_grad():
        gist_loss = float(gist(features(tiny_model), None))
    # GIST's blocks: anchor-positive, anchor-anchor, positive-positive, anchor-negative.
    (scores,) = logits
    assert scores.shape == (BATCH, 4 * BATCH)
    duplicate = 3 * BATCH + 2
    assert scores[0, duplicate] == -math.inf  # the guide scores it as close as the positive
    assert math.isfinite(scores[0, 0]) and math.isfinite(gist_loss)
    # The loss is the one computed with that candidate removed from query 0's row.
    rows = [torch.cat([scores[0, :duplicate], scores[0, duplicate + 1:]]), *scores[1:]]
    expected = sum(float(torch.logsumexp(row, 0) - row[index]) for index, row in enumerate(rows))
    assert gist_loss == pytest.approx(expected / BATCH, rel=1e-5)

    # Plain MNRL (no guide) keeps the duplicate as a negative as strong as the positive.
    mnrl = build_loss(tiny_model, LossSettings())
    seen = logsumexp_inputs(monkeypatch)
    with torch.no_grad():
        mnrl(features(tiny_model), None)
    (mnrl_scores,) = seen
    assert math.isfinite(mnrl_scores[0, BATCH + 2])
    assert mnrl_scores[0, BATCH + 2] == pytest.approx(float(mnrl_scores[0, 0]), abs=1e-4)


@pytest.mark.parametrize(("settings", "widths"), [
    ({}, [2 * BATCH]),  # query -> positives and negatives: the default, as before
    ({"directions": ["query_to_doc", "query_to_query", "doc_to_query", "doc_to_doc"]},
     # one joint softmax: + query -> other queries, positive -> queries, positive -> passages
     [2 * BATCH + BATCH + BATCH + 2 * BATCH]),
    ({"directions": ["query_to_doc", "doc_to_query"], "partition_mode": "per_direction"},
     [2 * BATCH, BATCH]),  # one softmax per direction
    ({"name": "mnsrl"}, [2 * BATCH, BATCH]),  # the same as the line above
])
def test_directions_add_the_documented_similarity_blocks(tiny_model, monkeypatch, settings,
                                                         widths):
    loss = build_loss(tiny_model, LossSettings(**settings))
    seen = logsumexp_inputs(monkeypatch)
    with torch.no_grad():
        loss(features(tiny_model), None)
    assert [tuple(scores.shape) for scores in seen] == [(BATCH, width) for width in widths]


def test_hardness_weighting_reaches_the_loss(tiny_model):
    plain = build_loss(tiny_model, LossSettings())
    hard = build_loss(tiny_model, LossSettings(hardness_mode="in_batch_negatives",
                                               hardness_strength=9.0))
    assert (hard.hardness_mode, hard.hardness_strength) == ("in_batch_negatives", 9.0)
    with torch.no_grad():
        assert float(hard(features(tiny_model), None)) > float(plain(features(tiny_model),
                                                                      None))


def test_guides_are_frozen_base_weights_on_the_models_device(tiny_bert_path):
    from tapt.recipe import LoraSettings
    from tapt.training.lora import add_lora, has_lora

    model = load_sentence_transformer(ModelSpec(str(tiny_bert_path)))
    add_lora(model, LoraSettings(enabled=True, r=4, target_modules=["query"]))
    guide = load_guide(model, "self")
    assert has_lora(model) and not has_lora(guide)  # the base weights, adapter folded in
    base = load_sentence_transformer(ModelSpec(str(tiny_bert_path)))
    torch.testing.assert_close(guide.encode(QUERIES, convert_to_tensor=True),
                               base.encode(QUERIES, convert_to_tensor=True))
    named = load_guide(model, str(tiny_bert_path))
    for loaded in (guide, named):
        assert not loaded.training and loaded.device == model.device
        assert not any(param.requires_grad for param in loaded.parameters())


@pytest.mark.parametrize("name", ["gist", "cached_gist", "mnsrl", "cached_mnrl"])
def test_matryoshka_wraps_any_contrastive_loss(tiny_model, name):
    from sentence_transformers.sentence_transformer.losses import MatryoshkaLoss

    loss = build_loss(tiny_model, LossSettings(name=name, matryoshka=True,
                                               matryoshka_dims=[32, 16], mini_batch_size=2))
    assert isinstance(loss, MatryoshkaLoss) and list(loss.matryoshka_dims) == [32, 16]
    value = loss(features(tiny_model), None)  # the cached losses need gradients
    value.backward()
    assert math.isfinite(float(value.detach()))


BASE = {"model": {"name": "some/model"}, "data": {"path": "some/data"}, "output_dir": "out"}


@pytest.mark.parametrize(("loss", "data", "message"), [
    ({"guide": "other/model"}, {}, "loss.guide: only for loss.name gist / cached_gist"),
    ({"margin": 0.1}, {}, "loss.margin: only for loss.name gist"),
    ({"name": "gist", "directions": ["query_to_doc", "doc_to_query"]}, {},
     "loss.directions: only for loss.name mnrl / matryoshka / cached_mnrl"),
    ({"name": "mnsrl", "partition_mode": "per_direction"}, {}, "loss.partition_mode: only"),
    ({"directions": ["doc_to_query"]}, {}, "loss.directions: .*must include query_to_doc"),
    ({"directions": ["query_to_doc", "doc_to_doc"], "partition_mode": "per_direction"}, {},
     "loss.partition_mode: per_direction needs .* doc_to_doc"),
    ({"hardness_mode": "hard_negatives"}, {}, "loss.hardness_strength: must be > 0"),
    ({"hardness_strength": 5.0}, {}, "loss.hardness_strength: has no effect"),
    ({"hardness_mode": "hardest"}, {}, "loss.hardness_mode"),
    ({"name": "gist", "margin_strategy": "percent"}, {}, "loss.margin_strategy"),
    ({"name": "gist", "guide": "./no-such-guide"}, {}, "loss.guide: .*no such folder"),
    ({"name": "margin_mse", "grade_weight": 1.0, "matryoshka": True}, {},
     "loss.matryoshka: only for loss.name"),
    ({"name": "gist"}, {"soft_negative": True}, "loss.name gist .* data.soft_negative"),
])
def test_the_schema_refuses_options_the_loss_does_not_take(tmp_path, loss, data, message):
    recipe = {**BASE, "loss": loss, "data": {**BASE["data"], **data},
              "output_dir": str(tmp_path / "out")}
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe), encoding="utf-8")
    with pytest.raises(RecipeError, match=message):
        load_recipe(path)


def test_saved_recipes_with_every_key_load_again(tmp_path):
    """A run's recipe.yaml holds every key, defaults included: they are not "used"."""
    for loss in ({"name": "gist", "margin": 0.1}, {"name": "mnsrl"},
                 {"name": "cached_mnrl", "directions": ["query_to_doc", "doc_to_query"]}):
        dumped = LossSettings(**loss).model_dump()
        assert LossSettings(**dumped) == LossSettings(**loss)


@pytest.mark.parametrize("name", ["gist", "mnsrl"])
def test_tiny_training_runs_and_exports(make_recipe, name):
    recipe_file, _ = make_recipe(name, loss={"name": name},
                                      training={"max_steps": 2, "eval_steps": 2})
    result = train(load_recipe(recipe_file))
    assert (result.final_dir / "model.safetensors").is_file()
