"""The model card's front matter that tapt's export writes (``write_card``)."""

from __future__ import annotations

import json

from huggingface_hub import ModelCard

from tapt.cards.run_card import card_with_front_matter, dataset_id
from tapt.encoders.preset_record import base_model_id
from tapt.recipe import load_recipe
from tapt.retrieval.metrics import METRIC_KEYS


def model_index_rows(metadata: dict) -> dict[str, dict[str, float]]:
    """{split: {metric: value}} from a card's model-index."""
    rows: dict[str, dict[str, float]] = {}
    for entry in metadata["model-index"]:
        for result in entry["results"]:
            split = result["dataset"]["split"]
            for metric in result["metrics"]:
                rows.setdefault(split, {})[metric["type"]] = metric["value"]
    return rows


def test_export_card_front_matter(tapt_export):
    metadata = ModelCard((tapt_export / "README.md").read_text()).data.to_dict()
    assert metadata["license"] == "apache-2.0"
    assert metadata["library_name"] == "sentence-transformers"
    assert metadata["pipeline_tag"] == "sentence-similarity"
    assert {"tapt", "sentence-transformers", "sentence-similarity"} <= set(metadata["tags"])
    assert "datasets" not in metadata  # local data: a folder's name is no dataset id
    assert "base_model" not in metadata  # a local base model has no Hub id

    results = json.loads((tapt_export / "tapt_results.json").read_text())
    best_dev = next(metrics for name, metrics in results.items() if name.startswith("best dev"))
    rows = model_index_rows(metadata)
    assert set(rows) == {"dev", "test"}  # zero-shot rows describe the base model: left out
    for key in METRIC_KEYS:
        assert rows["dev"][key] == best_dev[key]
        assert rows["test"][key] == results["TAPT test"][key]
    dataset = metadata["model-index"][0]["results"][0]["dataset"]
    assert dataset["type"] == "tiny-beir"
    # the body is still sentence-transformers' card with tapt's section
    card = (tapt_export / "README.md").read_text()
    assert "## Task-adaptive training with tapt" in card and "### Full Model Architecture" in card


def test_front_matter_is_rewritten_idempotently(tapt_export, tmp_path):
    recipe = load_recipe(tapt_export.parent / "recipe.yaml")
    text = (tapt_export / "README.md").read_text()
    summary = json.loads((tapt_export / "tapt_results.json").read_text())
    assert card_with_front_matter(text, recipe, summary) == text


def test_base_model_and_dataset_ids(tmp_path, tiny_bert_path):
    assert base_model_id("Qwen/Qwen3-Embedding-0.6B") == "Qwen/Qwen3-Embedding-0.6B"
    assert base_model_id(str(tiny_bert_path)) is None
    assert base_model_id("package:no_such_package_tapt/model") is None
    dapt = tmp_path / "dapt-final"
    dapt.mkdir()
    (dapt / "tapt_preset.json").write_text(json.dumps({"base_model": "BAAI/bge-small-en-v1.5",
                                                       "family": "default"}))
    assert base_model_id(str(dapt)) == "BAAI/bge-small-en-v1.5"
    (dapt / "tapt_preset.json").write_text(json.dumps({"base_model": "/local/path"}))
    assert base_model_id(str(dapt)) is None


def test_hub_ids_in_front_matter(tapt_export):
    recipe = load_recipe(tapt_export.parent / "recipe.yaml")
    hub_recipe = recipe.model_copy(update={
        "model": recipe.model.model_copy(update={"name": "Qwen/Qwen3-Embedding-0.6B"}),
        "data": recipe.data.model_copy(update={"path": "vinven7/FormBench",
                                               "config": "structured"})})
    assert dataset_id(hub_recipe) == "vinven7/FormBench"
    summary = json.loads((tapt_export / "tapt_results.json").read_text())
    text = card_with_front_matter("# a card without front matter\n", hub_recipe, summary)
    metadata = ModelCard(text).data.to_dict()
    assert metadata["base_model"] == "Qwen/Qwen3-Embedding-0.6B"
    assert metadata["datasets"] == ["vinven7/FormBench"]
    assert metadata["license"] == "apache-2.0"
    result = metadata["model-index"][0]["results"][0]
    assert result["dataset"]["type"] == "vinven7/FormBench"
    assert result["dataset"]["config"] == "structured"
    assert text.rstrip().endswith("# a card without front matter")


def test_export_card_has_mteb_shaped_results(tapt_export):
    """Each evaluated split also as mteb writes it (TaskResult.get_hf_eval_results): task
    type text-retrieval, metric ndcg_at_10 = tapt's graded nDCG@10 (MTEB's gains are the
    grades; tests/retrieval/test_mteb_conventions.py checks the two agree)."""
    metadata = ModelCard((tapt_export / "README.md").read_text()).data.to_dict()
    results = json.loads((tapt_export / "tapt_results.json").read_text())
    best_dev = next(metrics for name, metrics in results.items() if name.startswith("best dev"))
    mteb_rows = [result for entry in metadata["model-index"] for result in entry["results"]
                 if result["task"]["type"] == "text-retrieval"]
    by_split = {row["dataset"]["split"]: row for row in mteb_rows}
    assert set(by_split) == {"dev", "test"}
    for split, metrics in (("dev", best_dev), ("test", results["TAPT test"])):
        row = by_split[split]
        assert row["task"]["name"] == "Retrieval"
        assert row["dataset"]["name"] == "tiny-beir (default)"
        assert row["dataset"]["config"] == "default"
        assert row["metrics"] == [{"type": "ndcg_at_10", "name": "ndcg_at_10",
                                   "value": metrics["graded_ndcg@10"]}]
