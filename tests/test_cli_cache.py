"""tapt eval with the local embedding cache and the torch search; tapt cache ls | prune."""

from __future__ import annotations

import json

from tapt.cli import main


def _eval(tmp_path, data, model, name, *extra):
    out = tmp_path / f"{name}.json"
    code = main(["eval", "--model", str(model), "--data", str(data), "--quiet",
                 "--output", str(out), *extra])
    assert code == 0
    return json.loads(out.read_text())


def test_a_warm_cache_gives_the_same_result_without_encoding(tiny_bert_path, tiny_beir_path,
                                                              tmp_path, capsys):
    cache, corpora = tmp_path / "cache", tmp_path / "corpora"
    arrow = ("--corpus-store", "arrow", "--corpus-cache", str(corpora))
    cold = _eval(tmp_path, tiny_beir_path, tiny_bert_path, "cold", "--cache-dir", str(cache),
                 *arrow)
    warm = _eval(tmp_path, tiny_beir_path, tiny_bert_path, "warm", "--cache-dir", str(cache),
                 *arrow)
    off = _eval(tmp_path, tiny_beir_path, tiny_bert_path, "off", "--cache-dir", str(cache),
                "--no-cache")
    passages = cold["evaluated"]["corpus_size"]
    assert cold["evaluated"]["search"]["passages_from_cache"] == 0
    assert warm["evaluated"]["search"]["passages_from_cache"] == passages
    assert off["evaluated"]["search"]["passages_from_cache"] == 0
    for key in ("binary_ndcg@10", "graded_ndcg@10", "mrr@10", "recall@100"):
        assert warm[key] == cold[key] == off[key], key
    assert warm["per_query"] == cold["per_query"]
    capsys.readouterr()
    folders = ["--cache-dir", str(cache), "--corpus-cache", str(corpora)]
    assert main(["cache", "ls", *folders]) == 0
    listed = " ".join(capsys.readouterr().out.split())
    assert "1 model keys, 1 corpora" in listed and f"{passages}" in listed
    assert "corpus.jsonl" in listed  # the corpus file the Arrow file was read from
    assert main(["cache", "prune", *folders, "--max-gb", "0"]) == 0
    assert "deleted 1 model keys, 1 corpora" in " ".join(capsys.readouterr().out.split())
    assert not list(corpora.glob("*.arrow")) and not list((cache / "local").iterdir())
    assert main(["cache", "prune", *folders]) == 2  # nothing to prune by


def test_torch_search_gives_the_metrics_of_faiss_and_is_named(tiny_bert_path, tiny_beir_path,
                                                              tmp_path):
    faiss = _eval(tmp_path, tiny_beir_path, tiny_bert_path, "faiss", "--search-backend", "faiss")
    torch = _eval(tmp_path, tiny_beir_path, tiny_bert_path, "torch", "--search-backend", "torch")
    assert faiss["evaluated"]["search"]["backend"] == "faiss"
    assert torch["evaluated"]["search"]["backend"] == "torch"
    for key in ("binary_ndcg@10", "graded_ndcg@10", "mrr@10", "recall@100"):
        assert abs(torch[key] - faiss[key]) < 1e-6, key
