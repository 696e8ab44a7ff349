"""The local-model embedding cache in every command that encodes a corpus (``tapt ablate``,
``analyze``, ``probe``, ``eval --dims``, the zero-shot test after training): a second run
with the same ``--cache-dir`` encodes no passage, says so in its JSON and gives the numbers
of the first run and of a ``--no-cache`` run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tapt.encoders.sentence import SentenceTransformerEncoder

CORPUS_SIZE = 40  # tiny_beir_path's passages


@pytest.fixture
def encoded(monkeypatch) -> list[int]:
    """Passages each encode of a SentenceTransformer encoder was given (queries not counted)."""
    counts: list[int] = []
    original = SentenceTransformerEncoder.encode_stream

    def spy(self, texts, kind="document", batch_size=32):
        if kind == "document":
            counts.append(len(texts))
        return original(self, texts, kind, batch_size)

    monkeypatch.setattr(SentenceTransformerEncoder, "encode_stream", spy)
    return counts


def three_runs(argv: list, output_flag_path: Path, cache_dir: Path, encoded: list[int],
               from_cache) -> tuple[dict, dict, dict]:
    """Cold and warm runs with ``--cache-dir``, then one with ``--no-cache``: the JSONs.
    Checks that the cold and the uncached runs encode passages and read none from the cache,
    and the warm one encodes none (the spy) and says it read them (``from_cache(json)``)."""
    from tapt.cli import main

    results = []
    for number, flags in enumerate((["--cache-dir", cache_dir], ["--cache-dir", cache_dir],
                                    ["--no-cache"])):
        output = output_flag_path.with_name(f"{output_flag_path.stem}-{number}.json")
        encoded.clear()
        assert main([str(item) for item in [*argv, *flags, "--output", output, "--quiet"]]) == 0
        results.append(json.loads(output.read_text()))
        passages = sum(encoded)
        if number == 1:
            assert passages == 0 and from_cache(results[-1]) > 0
        else:
            assert passages > 0 and from_cache(results[-1]) == 0
    return tuple(results)


def without(data: dict, *keys: str) -> dict:
    """``data`` less timing and cache keys (which differ between runs by design)."""
    return {k: v for k, v in data.items() if k not in keys}


def test_ablate_reads_every_passage_from_the_cache(tiny_bert_path, tiny_beir_path, tmp_path,
                                                   encoded):
    argv = ["ablate", "corpus-size", "--model", f"tiny={tiny_bert_path}", "--data",
            tiny_beir_path, "--split", "test", "--fractions", "0.5", "1.0"]
    cold, warm, uncached = three_runs(argv, tmp_path / "ablation.json", tmp_path / "cache",
                                      encoded, lambda d: d["encoding"]["tiny"]["corpus_from_cache"])
    assert warm["encoding"]["tiny"]["corpus_from_cache"] == CORPUS_SIZE  # fraction 1.0: all
    for other in (warm, uncached):
        for ours, theirs in zip(cold["models"]["tiny"], other["models"]["tiny"], strict=True):
            assert without(ours, "search_ms_per_query") == without(theirs, "search_ms_per_query")


def test_analyze_geometry_reads_every_passage_from_the_cache(tiny_bert_path, tiny_beir_path,
                                                             tmp_path, encoded):
    argv = ["analyze", "geometry", "--model", f"tiny={tiny_bert_path}", "--data",
            tiny_beir_path, "--split", "test", "--distractors", "4"]
    cold, warm, uncached = three_runs(argv, tmp_path / "geometry.json", tmp_path / "cache",
                                      encoded, lambda d: d["info"]["corpus_from_cache"])
    assert warm["info"]["corpus_from_cache"] == warm["corpus_size"] == 9 + 4  # 3 queries x 3
    for other in (warm, uncached):
        assert without(other, "info") == without(cold, "info")


@pytest.fixture
def labelled_beir(tiny_beir_path, tmp_path) -> Path:
    """tiny_beir_path with ``labels`` (domain: topic number mod 3; class: the passage's
    role) on every passage, for ``tapt probe``."""
    folder = shutil.copytree(tiny_beir_path, tmp_path / "labelled")
    lines = []
    for line in (folder / "corpus.jsonl").read_text().splitlines():
        record = json.loads(line)
        doc_id = record["_id"]
        number = int(doc_id[1:3]) if doc_id.startswith("t") else int(doc_id[1:])
        record["labels"] = {"domain": "abc"[number % 3],
                            "class": doc_id.split("-")[1] if "-" in doc_id else "distractor"}
        lines.append(json.dumps(record))
    (folder / "corpus.jsonl").write_text("\n".join(lines) + "\n")
    return folder


def test_probe_reads_every_passage_from_the_cache(tiny_bert_path, labelled_beir, tmp_path,
                                                  encoded):
    argv = ["probe", "--model", f"tiny={tiny_bert_path}", "--data", labelled_beir]
    cold, warm, uncached = three_runs(argv, tmp_path / "probes.json", tmp_path / "cache",
                                      encoded, lambda d: d["corpus_from_cache"]["tiny"])
    assert warm["corpus_from_cache"]["tiny"] == warm["passages"] == CORPUS_SIZE
    for other in (warm, uncached):
        assert other["models"] == cold["models"]


def test_eval_dims_reads_every_passage_from_the_cache(tiny_bert_path, tiny_beir_path,
                                                      tmp_path, encoded):
    argv = ["eval", "--model", tiny_bert_path, "--data", tiny_beir_path, "--dims", 32, 16]
    cache = tmp_path / "cache"
    cold, warm, uncached = three_runs(argv, tmp_path / "dims.json", cache, encoded,
                                      lambda d: d["evaluated"]["search"]["passages_from_cache"])
    assert warm["timings"]["corpus_from_cache"] == CORPUS_SIZE
    for other in (warm, uncached):
        assert other["dims"]["metrics"] == cold["dims"]["metrics"]
    # The full-width rows --dims stored are the ones a plain `tapt eval` reads.
    from tapt.cli import main

    encoded.clear()
    plain = tmp_path / "plain.json"
    assert main([str(item) for item in ["eval", "--model", tiny_bert_path, "--data",
                                        tiny_beir_path, "--cache-dir", cache, "--output",
                                        plain, "--quiet"]]) == 0
    data = json.loads(plain.read_text())
    assert sum(encoded) == 0 and data["evaluated"]["search"]["passages_from_cache"] == 40
    assert data["binary_ndcg@10"] == cold["dims"]["metrics"]["32"]["binary_ndcg@10"]


def test_passage_stream_mixes_hits_and_misses_in_corpus_order(tiny_bert_path, tmp_path):
    from tapt.encoders.base import collect_in_order
    from tapt.encoders.loading import ModelSpec
    from tapt.retrieval.dense import EncodingTally, open_cache, passage_stream

    encoder = SentenceTransformerEncoder.load(ModelSpec(str(tiny_bert_path), device="cpu"))
    texts = [f"passage {i}: a binder at {i} percent in the coating" for i in range(12)]
    dim = encoder.embedding_dim

    def run(some, cache):
        tally = EncodingTally()
        rows = collect_in_order(passage_stream(encoder, some, 4, tally, cache), len(some), dim)
        return rows, tally

    fresh, _ = run(texts, None)
    cache = open_cache(encoder, str(tmp_path))
    run(texts[::2], cache)  # every other passage cached
    mixed, tally = run(texts, open_cache(encoder, str(tmp_path)))
    assert (tally.texts, tally.from_cache) == (12, 6)
    np.testing.assert_allclose(mixed, fresh, atol=1e-6)


def test_a_warm_stream_reads_the_cached_rows_a_part_at_a_time(tiny_bert_path, tmp_path,
                                                               monkeypatch):
    """All hits: the rows come in batches of CACHED_ROWS_PER_BATCH, never one N x dim copy,
    and equal a fresh encode."""
    from tapt.encoders.base import collect_in_order
    from tapt.encoders.loading import ModelSpec
    from tapt.retrieval import dense

    encoder = SentenceTransformerEncoder.load(ModelSpec(str(tiny_bert_path), device="cpu"))
    texts = [f"passage {i}: a solvent at {i} percent in the ink" for i in range(11)]
    dim = encoder.embedding_dim
    fresh = collect_in_order(dense.passage_stream(encoder, texts, 4, dense.EncodingTally(),
                                                  dense.open_cache(encoder, str(tmp_path))),
                             len(texts), dim)
    monkeypatch.setattr(dense, "CACHED_ROWS_PER_BATCH", 3)
    tally = dense.EncodingTally()
    batches = list(dense.passage_stream(encoder, texts, 4, tally,
                                        dense.open_cache(encoder, str(tmp_path))))
    assert [len(b.positions) for b in batches] == [3, 3, 3, 2]
    assert tally.from_cache == 11
    np.testing.assert_allclose(collect_in_order(iter(batches), len(texts), dim), fresh,
                               atol=1e-6)


def test_zero_shot_test_after_training_uses_the_cache(tiny_bert_path, tiny_beir_path,
                                                      tmp_path, monkeypatch, encoded):
    """report_on_test(cached=True), the zero-shot test of ``tapt train --test``, hits the
    default cache on the second run; the trained model's test (cached=False) never reads it."""
    from sentence_transformers import SentenceTransformer

    import tapt
    from tapt.recipe import Recipe
    from tapt.training.evaluation_on_test import report_on_test

    monkeypatch.setenv("TAPT_EMBEDDING_CACHE", "1")
    monkeypatch.setenv("TAPT_CACHE_DIR", str(tmp_path / "cache-home"))
    model = SentenceTransformer(str(tiny_bert_path), device="cpu")
    dataset = tapt.load_data(tiny_beir_path)
    recipe = Recipe.model_validate({"model": {"name": str(tiny_bert_path)},
                                    "data": {"path": str(tiny_beir_path)},
                                    "eval": {"dtype": "float32"},
                                    "output_dir": str(tmp_path / "run")})
    first = report_on_test(model, dataset, recipe.eval, recipe.data,
                           name=recipe.model.name, cached=True)
    encoded.clear()
    second = report_on_test(model, dataset, recipe.eval, recipe.data,
                            name=recipe.model.name, cached=True)
    assert sum(encoded) == 0
    assert first.info["search"]["passages_from_cache"] == 0
    assert second.info["search"]["passages_from_cache"] == len(dataset.corpus)
    assert second.metrics == first.metrics
    trained = report_on_test(model, dataset, recipe.eval, recipe.data, name=recipe.model.name)
    assert sum(encoded) == len(dataset.corpus) and trained.metrics == first.metrics
    assert trained.info["search"]["passages_from_cache"] == 0


def test_cache_keys_separate_widths_and_chunk_windows(tiny_bert_path, tmp_path):
    """Embeddings that differ (a truncated width, chunk-mean with another window size or
    stride) are cached under different keys: a chunk-mean run never reads truncate rows,
    nor rows of another window setting; chunk-max is never cached."""
    from sentence_transformers import SentenceTransformer

    from tapt.encoders.base import TruncatedEncoder
    from tapt.encoders.long_passages import LongPassages
    from tapt.retrieval.dense import EncodingTally, open_cache, passage_stream

    model = SentenceTransformer(str(tiny_bert_path), device="cpu")
    settings = [LongPassages(), LongPassages("chunk-mean", 16, 8),
                LongPassages("chunk-mean", 16, 4), LongPassages("chunk-mean", 12, 8)]
    encoders = [SentenceTransformerEncoder(model, long_passages=s) for s in settings]
    keys = [e.cache_key("document") for e in encoders]
    keys.append(TruncatedEncoder(encoders[0], 16).cache_key("document"))
    assert len({json.dumps(k, sort_keys=True, default=str) for k in keys}) == len(keys)
    assert SentenceTransformerEncoder(model, long_passages=LongPassages("chunk-max")) \
        .cache_key("document") is None
    texts = [" ".join(f"word{i}" for i in range(40))] * 2
    for encoder in encoders[:2]:  # the truncate rows cached first are not read by chunk-mean
        tally = EncodingTally()
        list(passage_stream(encoder, texts, 4, tally, open_cache(encoder, str(tmp_path))))
        assert tally.from_cache == 0
