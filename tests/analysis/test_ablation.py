"""``tapt ablate corpus-size``: one encoding per model, every judged passage at every
fraction, the numbers of ``tapt eval --fraction``, and a plot of what the table says."""

from __future__ import annotations

import json
import math

import pytest
from analysis_helpers import CountingEncoder, WordHashEncoder

import tapt
from tapt.analysis.ablation import (
    ablation_figure,
    corpus_size_ablation,
    fraction_corpora,
)
from tapt.cli import main
from tapt.data.subcorpus import subcorpus_ids
from tapt.retrieval.bm25 import BM25Retriever
from tapt.retrieval.metrics import METRIC_KEYS

FRACTIONS = (0.05, 0.25, 1.0)


def test_each_model_encodes_its_corpus_once_for_all_fractions(c1):
    encoders = [CountingEncoder(WordHashEncoder(name="a")),
                CountingEncoder(WordHashEncoder(dim=256, name="b"))]
    result = corpus_size_ablation(encoders, c1, "test", fractions=FRACTIONS, seed=3)
    for encoder in encoders:
        assert encoder.streams == {"query": 1, "document": 1}
        assert encoder.texts["query"] == len(c1.split("test"))
        assert encoder.texts["document"] == len(c1.corpus)  # fraction 1.0: everything
        assert [r["fraction"] for r in result.models[encoder.name]] == list(FRACTIONS)
    assert result.encoding["a"]["passages_encoded"] == len(c1.corpus)


def test_only_the_passages_some_fraction_needs_are_encoded(c1):
    encoder = CountingEncoder(WordHashEncoder())
    corpora = fraction_corpora(c1, "test", (0.1, 0.3), seed=0)
    corpus_size_ablation([encoder], c1, "test", fractions=(0.1, 0.3), seed=0)
    assert encoder.texts["document"] == len(set(corpora[0.1]) | set(corpora[0.3]))
    assert encoder.texts["document"] < len(c1.corpus)


def test_every_fraction_keeps_every_judged_passage_and_grows(c1):
    corpora = fraction_corpora(c1, "test", (0.0, *FRACTIONS), seed=7)
    judged = c1.judged_ids("test")
    pool = len(c1.corpus) - len(judged)
    for fraction, ids in corpora.items():
        assert judged <= set(ids)
        assert len(ids) == len(judged) + round(fraction * pool)
        assert len(set(ids)) == len(ids)
    assert corpora[0.0] == [d for d in c1.corpus if d in judged]
    assert fraction_corpora(c1, "test", (0.25,), seed=7) == {0.25: corpora[0.25]}
    assert fraction_corpora(c1, "test", (0.25,), seed=8) != {0.25: corpora[0.25]}


def test_each_fraction_scores_as_tapt_eval_on_that_sub_corpus(c1):
    encoder = WordHashEncoder()
    result = corpus_size_ablation([encoder, BM25Retriever(progress=False)], c1, "test",
                                  fractions=FRACTIONS, seed=1)
    for model, records in result.models.items():
        for record in records:
            ids = subcorpus_ids(c1, "test", fraction=record["fraction"], seed=1)
            retriever = (tapt.DenseRetriever(encoder, progress=False) if model == encoder.name
                         else BM25Retriever(progress=False))
            expected = tapt.evaluate(retriever, c1, "test", corpus_ids=ids).metrics
            assert record["corpus_size"] == len(ids)
            for key in METRIC_KEYS:
                assert record[key] == pytest.approx(expected[key], abs=1e-9), (model, key)


def test_drops_are_relative_to_the_smallest_fraction(c1):
    result = corpus_size_ablation([WordHashEncoder()], c1, "test", fractions=FRACTIONS)
    records = result.models["word-hash"]
    first = records[0]["binary_ndcg@10"]
    assert first > 0
    expected = [100 * (first - r["binary_ndcg@10"]) / first for r in records]
    assert result.drops()["word-hash"] == pytest.approx(expected)
    assert result.drops()["word-hash"][0] == 0


def test_plot_draws_the_table(c1):
    result = corpus_size_ablation([WordHashEncoder(), BM25Retriever(progress=False)], c1,
                                  "test", fractions=FRACTIONS)
    figure = ablation_figure(result, "binary_ndcg@10")
    lines = {line.get_label(): line for line in figure.axes[0].get_lines()}
    assert set(lines) == {"word-hash", "bm25"}
    for name, records in result.models.items():
        assert list(lines[name].get_xdata()) == [r["corpus_size"] for r in records]
        assert list(lines[name].get_ydata()) == [r["binary_ndcg@10"] for r in records]
    assert figure.axes[0].get_xscale() == "log"


def test_bad_fractions_and_duplicate_names_are_refused(c1):
    with pytest.raises(ValueError, match="fractions"):
        corpus_size_ablation([WordHashEncoder()], c1, "test", fractions=(0.5, 1.5))
    with pytest.raises(ValueError, match="differ"):
        corpus_size_ablation([WordHashEncoder(), WordHashEncoder()], c1, "test",
                             fractions=(1.0,))


def test_cli_writes_table_json_and_plot(c1_path, tiny_bert_path, tmp_path, capsys):
    output = tmp_path / "ablation.json"
    code = main(["ablate", "corpus-size", "--model", f"tiny={tiny_bert_path}", "--model", "bm25",
                 "--data", str(c1_path), "--split", "test", "--fractions", "0.1", "0.5", "1.0",
                 "--seed", "2", "--output", str(output), "--quiet"])
    assert code == 0
    shown = capsys.readouterr().out
    assert "Corpus-size ablation" in shown and "drop" in shown
    data = json.loads(output.read_text())
    assert list(data["models"]) == ["tiny", "bm25"]  # NAME=MODEL labels a model
    judged = len(tapt.load_data(c1_path, splits=["test"]).judged_ids("test"))
    for records in data["models"].values():
        assert [r["fraction"] for r in records] == [0.1, 0.5, 1.0]
        sizes = [r["corpus_size"] for r in records]
        assert sizes == sorted(sizes) and sizes[0] > judged
        for record in records:
            assert {"fraction", "corpus_size", *METRIC_KEYS} <= set(record)
            assert all(0.0 <= record[k] <= 1.0 for k in METRIC_KEYS)
    for drops in data["drop_pct_from_smallest"]["binary_ndcg@10"].values():
        assert drops[0] == 0 and all(math.isfinite(d) for d in drops)
    assert (tmp_path / "ablation.png").stat().st_size > 1000
    assert main(["ablate", "corpus-size", "--model", "bm25", "--data", str(c1_path),
                 "--output", str(output), "--quiet"]) == 2  # exists, no --overwrite
