"""Identifiers and secrets: redaction never rewrites a data id by
a pattern; Hub repository ids follow huggingface_hub's rules; a token given to tapt through
overrides and data reaches no file of the run folder, no W&B file and no printed line."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest
import yaml

from tapt.cli import main

TOKEN = "hf_" + "kQ7vX2mB9pL4nR8tW1yZ3cF6hJ0dS5gAeU"  # a planted, realistic-looking token
TOKEN_SHAPED_IDS = ["pa-patent-application-query-0005", "hf_trainingqueryid0123456789",
                    "sk-supplier-catalogue-entry-0042"]
"""Data ids that look like Voyage, Hub and OpenAI tokens (no secret is set to them)."""


def beir_with_ids(folder: Path, query_ids: dict[str, str], passage_ids: dict[str, str]
                  ) -> Path:
    """The tiny BEIR dataset with some query and passage ids renamed."""
    from tiny_models import tiny_beir_parts

    from tapt.data.beir import write_beir

    corpus, queries, qrels = tiny_beir_parts()
    corpus = {passage_ids.get(doc_id, doc_id): passage for doc_id, passage in corpus.items()}
    queries = {query_ids.get(qid, qid): text for qid, text in queries.items()}
    qrels = {split: {query_ids.get(qid, qid): {passage_ids.get(d, d): s for d, s in docs.items()}
                     for qid, docs in judged.items()} for split, judged in qrels.items()}
    return write_beir(folder, corpus, queries, qrels)


# --------------------------------------------------------------------- 7: ids are data

@pytest.mark.reliability(
    area="secrets", reader="result JSON, TREC run",
    fault="tapt bm25 on test queries whose ids look like tokens "
          "(pa-patent-application-query-0005, hf_..., sk-...), no secret set",
    behaviour="per_query keys and run-file ids are written as they are: a pattern never "
              "rewrites a data id (token shapes are redacted in free text only)")
def test_token_shaped_query_ids_are_kept_in_results_and_run_files(tmp_path, monkeypatch):
    for name in ("HF_TOKEN", "OPENAI_API_KEY", "VOYAGE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    renamed = dict(zip(("q09", "q10", "q11"), TOKEN_SHAPED_IDS))  # the test queries
    data = beir_with_ids(tmp_path / "data", renamed, {"t09-anchor": "pa-patent-document-0001"})
    output, run = tmp_path / "bm25.json", tmp_path / "bm25.run"
    assert main(["bm25", "--data", str(data), "--split", "test", "--output", str(output),
                 "--run", str(run), "--quiet"]) == 0
    per_query = json.loads(output.read_text())["per_query"]
    assert sorted(per_query) == sorted(TOKEN_SHAPED_IDS)
    run_ids = {line.split()[0] for line in run.read_text().splitlines()}
    assert run_ids == set(TOKEN_SHAPED_IDS)
    assert "pa-patent-document-0001" in run.read_text()


@pytest.mark.reliability(
    area="secrets", reader="metrics.jsonl, mined file, recipe.yaml",
    fault="token-shaped query ids in a metrics line and a mined file; a token-shaped data "
          "path in the recipe",
    behaviour="written unchanged (exact secret values only); a token pasted into a free-text "
              "label (tracking.run_name) is still recorded as ***")
def test_structured_writers_redact_exact_secret_values_only(tmp_path, monkeypatch):
    from tapt.recipe import Recipe, recipe_to_yaml
    from tapt.retrieval.mining import MiningSettings, write_mined
    from tapt.util.files import append_json_line

    monkeypatch.setenv("HF_TOKEN", TOKEN)
    append_json_line(tmp_path / "metrics.jsonl", {"step": 2, "query": TOKEN_SHAPED_IDS[0],
                                                  "secret": TOKEN})
    line = json.loads((tmp_path / "metrics.jsonl").read_text())
    assert line == {"step": 2, "query": TOKEN_SHAPED_IDS[0], "secret": "***"}

    records = [{"query_id": qid, "negatives": [{"doc_id": "pa-patent-document-0001",
                                                "rank": 1}], "candidates": 1}
               for qid in TOKEN_SHAPED_IDS]
    write_mined(tmp_path / "mined.jsonl", records, retriever="bm25",
                settings=MiningSettings(), data="pa-patent-application-corpus-2024",
                split="train")
    mined = [json.loads(line) for line in (tmp_path / "mined.jsonl").read_text().splitlines()]
    assert [record["query_id"] for record in mined] == TOKEN_SHAPED_IDS
    assert mined[0]["data"] == "pa-patent-application-corpus-2024"

    recipe = Recipe.model_validate({
        "model": {"name": "models/pa-patent-application-model-v2"},
        "data": {"path": "data/pa-patent-application-corpus-2024"},
        "tracking": {"run_name": "hf_" + "Q1w2E3r4" * 5}, "output_dir": "runs/x"})
    saved = yaml.safe_load(recipe_to_yaml(recipe))
    assert saved["model"]["name"] == "models/pa-patent-application-model-v2"
    assert saved["data"]["path"] == "data/pa-patent-application-corpus-2024"
    assert saved["tracking"]["run_name"] == "***"


@pytest.mark.reliability(
    area="secrets", reader="result JSON",
    fault="HF_TOKEN's exact value inside a query id (q-TOKEN) of tapt bm25's test split",
    behaviour="secrecy wins: the id is written with *** in its place, and a warning names the "
              "file and the field (per_query key) whose data no longer matches its source")
def test_an_exact_secret_inside_an_id_is_replaced_with_a_warning_naming_the_field(
        tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    data = beir_with_ids(tmp_path / "data", {"q09": f"q-{TOKEN}"}, {})
    output = tmp_path / "bm25.json"
    with caplog.at_level(logging.WARNING):
        assert main(["bm25", "--data", str(data), "--split", "test", "--output", str(output),
                     "--quiet"]) == 0
    text = output.read_text()
    assert TOKEN not in text
    assert sorted(json.loads(text)["per_query"]) == ["q-***", "q10", "q11"]
    warning = " ".join(caplog.text.split())
    assert TOKEN not in warning
    assert "HF_TOKEN" in warning and "per_query" in warning and str(output) in warning


# --------------------------------------------------------------------- 8: Hub repo ids

BAD_REPO_IDS = ["../x", "org/..", "örg/x", "org/x/y", "justaname", "org/x--y", "org/-x",
                "org/" + "a" * 97]


@pytest.mark.reliability(
    area="identifiers", reader="tapt push --repo-id",
    fault="--repo-id ../x, org/.., örg/x, org/x/y, justaname, org/x--y, org/-x, a 97-character "
          "name (with --dry-run)",
    behaviour="refused before anything else (exit 2, names the id and huggingface_hub's rule "
              "it breaks); org/name passes the id check")
@pytest.mark.parametrize("repo_id", BAD_REPO_IDS)
def test_push_refuses_repo_ids_the_hub_would_refuse(repo_id, tmp_path, quiet_cli, capsys):
    assert main(["push", str(tmp_path), "--repo-id", repo_id, "--dry-run"]) == 2
    out = " ".join(capsys.readouterr().out.split())
    assert "error:" in out and repr(repo_id) in out and "would push" not in out


def test_a_valid_repo_id_passes_the_id_check(tmp_path, quiet_cli, capsys):
    assert main(["push", str(tmp_path / "missing"), "--repo-id", "my-org/x.v1_2",
                 "--dry-run"]) == 2  # refused for the folder, not for the id
    out = " ".join(capsys.readouterr().out.split())
    assert "repository id" not in out


@pytest.mark.reliability(
    area="identifiers", reader="recipe hub.repo_id",
    fault="a recipe with hub.repo_id: ../x (also org/.., örg/x), tapt train",
    behaviour="refused when the recipe is loaded (RecipeError naming hub.repo_id; exit 2), "
              "before any output folder or training")
@pytest.mark.parametrize("repo_id", ["../x", "org/..", "örg/x"])
def test_a_recipe_with_a_bad_hub_repo_id_is_refused_at_load(repo_id, make_recipe, quiet_cli,
                                                           capsys):
    from tapt.recipe import RecipeError, load_recipe

    recipe_file, output = make_recipe("bad-repo", hub={"repo_id": repo_id})
    with pytest.raises(RecipeError, match=r"hub\.repo_id"):
        load_recipe(recipe_file)
    assert main(["train", str(recipe_file)]) == 2
    assert "hub.repo_id" in capsys.readouterr().out
    assert not output.exists()
    assert load_recipe(recipe_file, ["hub.repo_id=my-org/ok"]).hub.repo_id == "my-org/ok"


def test_a_hub_dataset_id_follows_the_same_rule(tmp_path, monkeypatch):
    from tapt.data.beir import DataError
    from tapt.data.sources import load_data
    from tapt.util.ids import hub_id_problem

    monkeypatch.chdir(tmp_path)
    with pytest.raises(DataError, match="no such folder"):
        load_data("../x", config="structured")
    assert hub_id_problem("vinven7/FormBench") is None
    assert "namespace/name" in hub_id_problem("FormBench")


# --------------------------------------------------------------------- 9: planted secrets

def planted_dataset(folder: Path) -> Path:
    """The tiny BEIR dataset with TOKEN in one train query and four train passages."""
    from tiny_models import tiny_beir_parts

    from tapt.data.beir import Passage, write_beir

    corpus, queries, qrels = tiny_beir_parts()
    queries["q00"] = f"which sealant code {TOKEN} does the primer use?"
    for doc_id in ("t00-anchor", "t00-hard", "t01-anchor", "t01-hard"):
        passage = corpus[doc_id]
        corpus[doc_id] = Passage(text=f"{passage.text} sealant code {TOKEN}.",
                                 title=passage.title)
    return write_beir(folder, corpus, queries, qrels)


def leaking_files(root: Path, secret: str) -> list[str]:
    return [str(path) for path in sorted(root.rglob("*"))
            if path.is_file() and secret.encode() in path.read_bytes()]


@pytest.mark.reliability(
    area="secrets", reader="tapt train + W&B (offline) + tapt push",
    fault="a token in HF_TOKEN, also passed as tracking.run_name=TOKEN, tracking.project="
          "proj-TOKEN, hub.repo_id=org/TOKEN and present in one query and four passages",
    behaviour="in no file of the run folder (checkpoint cards included: no training samples, "
              "no widget), in no file of the W&B folder (argv, project, run name, config), "
              "and in no printed line (also tapt push --repo-id org/TOKEN --dry-run)")
def test_a_token_in_overrides_and_data_reaches_no_file_and_no_output(
        make_recipe, tmp_path, monkeypatch, capsys, caplog):
    pytest.importorskip("wandb")
    import tapt.training.contrastive as tapt_training
    from tapt.hub.push import check_environment, push_export
    from tapt.training import run_outputs

    wandb_dir = tmp_path / "wandb-dir"
    wandb_dir.mkdir()
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(wandb_dir))
    monkeypatch.delenv("WANDB_PROJECT", raising=False)
    # The push at the end runs as a dry run: the real checks, no Hub.
    monkeypatch.setattr(tapt_training, "check_run_push",
                        lambda hub: check_environment(hub.repo_id, dry_run=True))
    pushed = []
    monkeypatch.setattr(run_outputs, "push_run_export", lambda folder, hub, **_: pushed.append(
        push_export(folder, hub.repo_id, dry_run=True)))

    data = planted_dataset(tmp_path / "data")
    recipe_file, output = make_recipe("planted", data_path=data,
                                      training={"max_steps": 2, "eval_steps": 2})
    argv = ["train", str(recipe_file), "--test", "tracking.backend=wandb",
            f"tracking.run_name={TOKEN}", f"tracking.project=proj-{TOKEN}",
            f"hub.repo_id=org/{TOKEN}"]
    monkeypatch.setattr(sys, "argv", ["tapt", *argv])  # what W&B records as the command
    with caplog.at_level(logging.INFO):
        assert main(argv) == 0
        assert pushed and pushed[0].repo_id == f"org/{TOKEN}"
        assert main(["push", str(output / "final"), "--repo-id", f"org/{TOKEN}",
                     "--dry-run"]) == 0
    captured = capsys.readouterr()

    assert list(wandb_dir.rglob("*.wandb")), "no W&B run was written"
    assert list((output / "checkpoints").glob("checkpoint-*/README.md"))
    assert leaking_files(output, TOKEN) == []
    assert leaking_files(wandb_dir, TOKEN) == []
    printed = captured.out + captured.err + caplog.text
    assert TOKEN not in printed
    assert "org/***" in " ".join(captured.out.split())  # the dry run still says where
    for card in [*output.glob("checkpoints/checkpoint-*/README.md"), output / "final/README.md"]:
        text = card.read_text(encoding="utf-8")
        assert "sealant code" not in text, card  # no training samples, no widget
        assert "SentenceTransformer(" in text, card
