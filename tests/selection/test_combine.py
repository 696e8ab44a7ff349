"""``tapt combine``: a dense and a lexical model in one vector (SPAR), saved so that plain
sentence-transformers, ``tapt eval`` and ``tapt export`` all rank with it alike."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import tiny_models


def run_main(argv: list) -> int:
    from tapt.cli import main

    return main([str(item) for item in argv])


@pytest.fixture(scope="module")
def lexical_path(tmp_path_factory, tiny_texts) -> Path:
    """A second tiny BERT with the first one's tokenizer (same texts) and other weights."""
    return tiny_models.build_tiny_bert(tmp_path_factory.mktemp("models") / "lexical",
                                       tiny_texts, seed=5)


@pytest.fixture(scope="module")
def combined(tmp_path_factory, tiny_bert_path, lexical_path) -> Path:
    output = tmp_path_factory.mktemp("combined") / "model"
    assert run_main(["combine", tiny_bert_path, lexical_path, "--weight", "0.5",
                     "--output", output, "--quiet"]) == 0
    return output


def run_of(path: Path) -> dict[str, list[str]]:
    """A TREC run file as query -> ranked passage ids."""
    ranked: dict[str, list[tuple[int, str]]] = {}
    for line in path.read_text().splitlines():
        query, _, doc, rank, *_ = line.split()
        ranked.setdefault(query, []).append((int(rank), doc))
    return {query: [doc for _, doc in sorted(rows)] for query, rows in ranked.items()}


def test_the_vector_is_the_dense_one_then_the_weighted_lexical_one(combined, tiny_bert_path,
                                                                   lexical_path):
    """Plain sentence-transformers loads the folder (tapt's module class, asked for with
    trust_remote_code) and embeds x as [dense(x), sqrt(0.5) lexical(x)]."""
    from sentence_transformers import SentenceTransformer

    texts = ["An epoxy primer with zinc phosphate.", "A silicone sealant."]
    model = SentenceTransformer(str(combined), trust_remote_code=True, device="cpu")
    dense = SentenceTransformer(str(tiny_bert_path), device="cpu")
    lexical = SentenceTransformer(str(lexical_path), device="cpu")
    expected = np.concatenate([dense.encode_document(texts),
                               math.sqrt(0.5) * lexical.encode_document(texts)], axis=1)
    assert model.encode_document(texts) == pytest.approx(expected, abs=1e-5)
    assert model.encode_query(texts) == pytest.approx(expected, abs=1e-5)
    record = json.loads((combined / "combine.json").read_text())
    assert record["weight"] == 0.5 and "combine.json" in record["files"]
    with pytest.raises(ValueError, match="trust_remote_code"):
        SentenceTransformer(str(combined), device="cpu")


def test_tapt_eval_plain_st_and_the_onnx_export_rank_alike(combined, tiny_beir_path,
                                                           tmp_path):
    """The same test rankings from tapt eval (torch), from plain sentence-transformers
    scoring the same passages, and from tapt export's ONNX graph run by tapt eval."""
    from sentence_transformers import SentenceTransformer

    from tapt.data.beir import load_beir_folder

    torch_run = tmp_path / "torch.trec"
    assert run_main(["eval", "--model", combined, "--data", tiny_beir_path, "--split", "test",
                     "--no-cache", "--quiet", "--run", torch_run]) == 0
    ranked = run_of(torch_run)
    dataset = load_beir_folder(tiny_beir_path, ["test"])
    ids = list(dataset.corpus)
    model = SentenceTransformer(str(combined), trust_remote_code=True, device="cpu")
    passages = model.encode_document([dataset.corpus[i].as_text() for i in ids],
                                     normalize_embeddings=True)
    for query_id in dataset.split("test"):
        query = model.encode_query([dataset.queries[query_id]], normalize_embeddings=True)[0]
        order = sorted(range(len(ids)), key=lambda i: (-float(passages[i] @ query), ids[i]))
        assert ranked[query_id][:5] == [ids[i] for i in order[:5]]
    exported = tmp_path / "onnx"
    assert run_main(["export", combined, "--backend", "onnx", "--output", exported,
                     "--quiet"]) == 0
    onnx_run = tmp_path / "onnx.trec"
    assert run_main(["eval", "--model", exported, "--backend", "onnx", "--data",
                     tiny_beir_path, "--split", "test", "--no-cache", "--quiet",
                     "--run", onnx_run]) == 0
    assert {q: docs[:10] for q, docs in run_of(onnx_run).items()} == \
        {q: docs[:10] for q, docs in ranked.items()}


def test_the_weight_picked_on_dev_is_the_best_point(tiny_bert_path, lexical_path,
                                                    tiny_beir_path, tmp_path):
    """Every weight is scored on dev as the combined model scores it: weight 0 is the dense
    model alone (tapt eval's figures); the kept weight has the best dev metric."""
    output = tmp_path / "picked"
    assert run_main(["combine", tiny_bert_path, lexical_path, "--pick-on-dev",
                     tiny_beir_path, "--weights", "0", "0.5", "2", "--output", output,
                     "--quiet"]) == 0
    record = json.loads((output / "combine.json").read_text())["pick_on_dev"]
    points = {point["weight"]: point["metrics"] for point in record["points"]}
    metric = record["metric"]
    best = max(points.values(), key=lambda metrics: metrics[metric])[metric]
    assert points[record["picked"]][metric] == best
    alone = tmp_path / "dense.json"
    assert run_main(["eval", "--model", tiny_bert_path, "--data", tiny_beir_path, "--split",
                     "dev", "--no-cache", "--quiet", "--output", alone]) == 0
    assert points[0.0][metric] == pytest.approx(json.loads(alone.read_text())[metric])


def test_the_dev_pick_batches_by_the_token_budget_given(tiny_bert_path, lexical_path,
                                                        tiny_beir_path, tmp_path, monkeypatch):
    """``--max-tokens-per-batch`` reaches the dev pick's encoders (it was not a flag of
    combine), and the points do not depend on it."""
    import tapt.selection.combine as combine_module

    seen, real = [], combine_module.pick_weight

    def spy(dense, lexical, names, dev, grid, on_point=None):
        seen.append(dev.max_tokens_per_batch)
        return real(dense, lexical, names, dev, grid, on_point)

    monkeypatch.setattr(combine_module, "pick_weight", spy)
    points = {}
    for budget in ("64", None):
        output = tmp_path / f"picked-{budget}"
        flags = ["--max-tokens-per-batch", budget] if budget else []
        assert run_main(["combine", tiny_bert_path, lexical_path, "--pick-on-dev",
                         tiny_beir_path, "--weights", "0", "1", *flags, "--output", output,
                         "--quiet"]) == 0
        record = json.loads((output / "combine.json").read_text())["pick_on_dev"]
        points[budget] = {p["weight"]: p["metrics"] for p in record["points"]}
    assert seen == [64, None]
    for weight, metrics in points["64"].items():
        assert metrics == pytest.approx(points[None][weight], abs=1e-6)


def test_models_that_tokenize_differently_are_refused(tiny_bert_path, tiny_qwen3_path,
                                                      tmp_path, capsys):
    assert run_main(["combine", tiny_bert_path, tiny_qwen3_path, "--weight", "1",
                     "--output", tmp_path / "no"]) == 2
    assert "tokenizes differently" in capsys.readouterr().out
    assert not (tmp_path / "no").exists()


def test_a_folder_with_code_is_not_loaded_with_remote_code(combined, tiny_beir_path, tmp_path,
                                                          capsys):
    """tapt allows its own module class only in a folder that holds no Python file."""
    import shutil

    copy = tmp_path / "with-code"
    shutil.copytree(combined, copy)
    (copy / "modeling_extra.py").write_text("raise SystemExit('ran')\n")
    from tapt.encoders.lexical_branch import tapt_modules_only

    assert tapt_modules_only(combined) and not tapt_modules_only(copy)
    assert run_main(["eval", "--model", copy, "--data", tiny_beir_path, "--quiet"]) == 2
    assert "trust_remote_code" in capsys.readouterr().out


def test_push_checks_load_the_combined_model_as_its_card_says(combined):
    """tapt push's load check takes tapt's module class (no code from the folder), as the
    card's SentenceTransformer(path, trust_remote_code=True) does."""
    from tapt.hub.checks import check_loads

    check_loads(combined)
