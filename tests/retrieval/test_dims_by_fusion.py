"""``tapt eval --dims`` (widths from one encoding), ``--by FIELD`` (metrics per query group)
and ``--hybrid bm25 --tune-on dev`` (fusion picked on dev), through the library and
``tapt.cli.main``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tapt.data.beir import DataError
from tapt.data.labels import read_query_labels
from tapt.retrieval.by_group import NO_LABEL, group_metrics
from tapt.retrieval.dense import Retrieval
from tapt.retrieval.fusion_tuning import RRF_GRID, pick, tune_and_evaluate
from tapt.retrieval.hybrid import HybridRetriever
from tapt.retrieval.metrics import METRIC_KEYS


def run_main(argv: list[str]) -> int:
    from tapt.cli import main

    return main([str(item) for item in argv])


# --- --dims ------------------------------------------------------------------------------

def test_dims_match_truncate_dim_and_write_one_table(tiny_bert_path, tiny_beir_path, tmp_path,
                                                     capsys):
    common = ["--model", tiny_bert_path, "--data", tiny_beir_path, "--quiet"]
    out, plot = tmp_path / "dims.json", tmp_path / "dims.png"
    assert run_main(["eval", *common, "--dims", 32, 16, 8, "--output", out,
                     "--plot", plot]) == 0
    data = json.loads(out.read_text())
    dims = data["dims"]
    assert dims["widths"] == [32, 16, 8]
    assert plot.stat().st_size > 0
    assert "metrics per width" in capsys.readouterr().out
    assert {key: data[key] for key in METRIC_KEYS} == dims["metrics"]["32"]  # the widest
    assert data["evaluated"]["width"] == 32
    # Each width scores exactly what --truncate-dim N scores on its own encoding.
    for width in (16, 8):
        single = tmp_path / f"single{width}.json"
        assert run_main(["eval", *common, "--truncate-dim", width, "--output", single]) == 0
        expected = json.loads(single.read_text())
        assert dims["metrics"][str(width)] == pytest.approx(
            {key: expected[key] for key in METRIC_KEYS}, abs=1e-6)


def test_dims_wider_than_the_model_is_refused(tiny_bert_path, tiny_beir_path, capsys):
    assert run_main(["eval", "--model", tiny_bert_path, "--data", tiny_beir_path, "--quiet",
                     "--dims", 32, 64]) == 2
    assert "--dims: widths must be in 1..32" in capsys.readouterr().out
    assert run_main(["eval", "--model", tiny_bert_path, "--data", tiny_beir_path, "--quiet",
                     "--dims", 16, "--hybrid", "bm25"]) == 2


# --- --by FIELD --------------------------------------------------------------------------

def labelled_copy(source: Path, folder: Path, labels: dict[str, object]) -> Path:
    shutil.copytree(source, folder)
    path = folder / "queries.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for row in rows:
        if row["_id"] in labels:
            row["labels"] = {"domain": labels[row["_id"]]}
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return folder


def weighted_mean(groups: dict, key: str) -> float:
    count = sum(group["counts"].get(key, 0) for group in groups.values())
    return sum(group["metrics"][key] * group["counts"][key]
               for group in groups.values() if key in group["metrics"]) / count


def test_group_means_average_back_to_the_overall_mean():
    # q3 has no relevant passage: binary metrics skip it, graded nDCG counts it (trec_eval).
    per_query = {"q1": {"binary_ndcg@10": 1.0, "graded_ndcg@10": 0.9, "mrr@10": 1.0,
                        "recall@100": 1.0},
                 "q2": {"binary_ndcg@10": 0.0, "graded_ndcg@10": 0.2, "mrr@10": 0.0,
                        "recall@100": 0.5},
                 "q3": {"graded_ndcg@10": 0.4},
                 "q4": {"binary_ndcg@10": 0.5, "graded_ndcg@10": 0.6, "mrr@10": 0.5,
                        "recall@100": 1.0}}
    groups = group_metrics(per_query, {"q1": "a", "q3": "a", "q2": "b"})
    assert list(groups) == ["a", "b", NO_LABEL]
    assert groups["a"]["queries"] == 2 and groups["a"]["counts"]["binary_ndcg@10"] == 1
    for key in METRIC_KEYS:
        values = [row[key] for row in per_query.values() if key in row]
        assert weighted_mean(groups, key) == pytest.approx(sum(values) / len(values))


def test_cli_by_reports_each_group(tiny_bert_path, tiny_beir_path, tmp_path, capsys):
    data_path = labelled_copy(tiny_beir_path, tmp_path / "beir",
                              {"q09": "pharma", "q10": "food", "q06": "food"})
    out = tmp_path / "by.json"
    assert run_main(["eval", "--model", tiny_bert_path, "--data", data_path, "--quiet",
                     "--by", "domain", "--output", out]) == 0
    data = json.loads(out.read_text())
    groups = data["by_group"]["groups"]
    assert {name: group["queries"] for name, group in groups.items()} == \
        {"food": 1, "pharma": 1, NO_LABEL: 1}  # q06 is a dev query; q11 has no label
    for key in METRIC_KEYS:
        assert weighted_mean(groups, key) == pytest.approx(data[key])
    assert "metrics by domain" in capsys.readouterr().out


def test_query_labels_errors_name_the_file_line_and_field(tiny_beir_path, tmp_path):
    data_path = labelled_copy(tiny_beir_path, tmp_path / "beir", {"q00": ["a", "b"]})
    with pytest.raises(DataError, match=r"queries.jsonl:1: field 'labels.domain'"):
        read_query_labels(data_path, "domain")
    with pytest.raises(DataError, match="no query has label field 'topic'"):
        read_query_labels(tiny_beir_path, "topic")


# --- --tune-on dev -----------------------------------------------------------------------

class Fixed:
    """A retriever with a fixed run that counts its calls."""

    def __init__(self, name: str, run: dict, top_k: int = 100) -> None:
        self.name, self.run, self.top_k, self.calls = name, run, top_k, 0

    def retrieve(self, corpus_ids, corpus_texts, query_ids, query_texts) -> Retrieval:
        self.calls += 1
        return Retrieval(run={q: dict(self.run.get(q, {})) for q in query_ids})


def test_pick_prefers_the_default_on_ties():
    assert pick([(1.0, 0.5), (10.0, 0.7), (60.0, 0.7)], default=60.0) == 60.0
    assert pick([(1.0, 0.5), (10.0, 0.7), (30.0, 0.7)], default=60.0) == 10.0
    assert pick([(1.0, 0.9), (60.0, 0.7)], default=60.0) == 1.0


def test_tuning_retrieves_once_and_applies_the_dev_pick(tiny_beir_path):
    from tapt.data.sources import load_data

    dataset = load_data(tiny_beir_path, splits=["dev", "test"])
    ids = list(dataset.corpus)
    dense_run = {q: {doc: 1.0 - i / 100 for i, doc in enumerate(ids[:20])}
                 for q in dataset.queries}
    sparse_run = {q: {f"t{int(q[1:]):02d}-anchor": 5.0} for q in dataset.queries}
    dense, sparse = Fixed("dense", dense_run), Fixed("bm25", sparse_run)
    hybrid = HybridRetriever(dense, sparse, fusion="linear", alpha=0.9)
    report, tuned = tune_and_evaluate(hybrid, dataset, "test", "dev")
    assert (dense.calls, sparse.calls) == (1, 1)  # one retrieval for dev and test queries
    tuning = report.info["tuning"]
    assert tuning["tuned_on"] == "dev" and tuning["setting"] == "alpha"
    assert len(tuning["grid"]) == len(tuning["scores"]) == 11
    # BM25 finds every anchor: low dense weights rank it first, 0.9 (the default) does
    # not; among the tied best the first in grid order is 0.0.
    assert tuning["picked"] == tuned.alpha == 0.0
    assert report.metrics["mrr@10"] == 1.0
    assert report.info["model"] == "dense+bm25-linear"
    with pytest.raises(ValueError, match="--tune-on test"):
        tune_and_evaluate(hybrid, dataset, "test", "test")


def test_auto_fusion_picks_the_fusion_that_wins_on_dev(tiny_beir_path):
    """``auto`` tries RRF's grid and linear's: where only linear fusion with a low dense
    weight puts BM25's anchor first on dev, linear wins, its alpha with it, and the test
    split is fused so; without a tuning split auto cannot fuse."""
    from tapt.data.sources import load_data

    dataset = load_data(tiny_beir_path, splits=["dev", "test"])
    ids = list(dataset.corpus)
    # the dense list never holds the anchor and its first passage ties with BM25's anchor
    # under RRF at every k (1 / (k + 1) each), winning the tie by its larger id
    dense_run = {q: {f"z{i:02d}": 1.0 - i / 100 for i in range(20)} for q in dataset.queries}
    sparse_run = {q: {f"t{int(q[1:]):02d}-anchor": 5.0} for q in dataset.queries}
    hybrid = HybridRetriever(Fixed("dense", dense_run), Fixed("bm25", sparse_run),
                             fusion="auto")
    report, tuned = tune_and_evaluate(hybrid, dataset, "test", "dev")
    tuning = report.info["tuning"]
    assert tuning["fusions"] == ["rrf"] * len(RRF_GRID) + ["linear"] * 11
    assert (tuning["fusion"], tuning["picked"]) == ("linear", 0.0)
    assert (tuned.fusion, tuned.alpha) == ("linear", 0.0)
    assert report.metrics["mrr@10"] == 1.0
    with pytest.raises(ValueError, match="--tune-on"):
        hybrid.retrieve(ids, ["text"] * len(ids), ["q09"], ["query"])


def test_cli_tune_on_dev_equals_the_fixed_pick(tiny_bert_path, tiny_beir_path, tmp_path):
    common = ["--model", tiny_bert_path, "--data", tiny_beir_path, "--quiet",
              "--hybrid", "bm25"]
    out = tmp_path / "tuned.json"
    assert run_main(["eval", *common, "--tune-on", "dev", "--output", out]) == 0
    data = json.loads(out.read_text())
    tuning = data["evaluated"]["tuning"]
    assert tuning["grid"] == list(RRF_GRID) and tuning["tuned_on"] == "dev"
    picked = tuning["picked"]
    assert data["evaluated"]["hybrid"]["rrf_k"] == picked
    fixed = tmp_path / "fixed.json"
    assert run_main(["eval", *common, "--rrf-k", picked, "--output", fixed]) == 0
    expected = json.loads(fixed.read_text())
    assert {key: data[key] for key in METRIC_KEYS} == \
        pytest.approx({key: expected[key] for key in METRIC_KEYS})


def test_cli_tune_on_needs_hybrid_and_another_split(tiny_bert_path, tiny_beir_path, capsys):
    common = ["--model", tiny_bert_path, "--data", tiny_beir_path, "--quiet"]
    assert run_main(["eval", *common, "--tune-on", "dev"]) == 2
    assert "add --hybrid bm25" in capsys.readouterr().out
    assert run_main(["eval", *common, "--hybrid", "bm25", "--tune-on", "test"]) == 2
    assert "--tune-on test" in capsys.readouterr().out
    assert run_main(["eval", *common, "--hybrid", "bm25", "--fusion", "auto"]) == 2
    assert "--fusion auto" in capsys.readouterr().out


def test_cli_tune_on_a_carved_dev_records_the_carve(tiny_bert_path, tiny_beir_path, tmp_path,
                                                     capsys):
    """``--dev-from-train N`` carves the dev that ``--tune-on dev`` tunes on (data without a
    dev file, as SciFact): by groups, recorded, and the carved queries leave train."""
    from tapt.data.sources import load_data
    from tapt.data.splits import carve_dev

    folder = tmp_path / "no-dev"
    shutil.copytree(tiny_beir_path, folder)
    (folder / "qrels" / "dev.tsv").unlink()
    common = ["--model", tiny_bert_path, "--data", folder, "--quiet", "--hybrid", "bm25"]
    out = tmp_path / "tuned.json"
    assert run_main(["eval", *common, "--tune-on", "dev", "--dev-from-train", 3,
                     "--dev-seed", 1, "--output", out]) == 0
    data = json.loads(out.read_text())
    expected = carve_dev(load_data(folder, splits=["train", "test"]), size=3, seed=1)
    assert data["evaluated"]["dev_carve"] == expected.carved
    assert data["evaluated"]["dev_carve"]["by"] == "group"
    assert data["evaluated"]["tuning"]["tuned_on"] == "dev"
    # Without the carve there is no dev to tune on; with a dev file of its own the carve is
    # refused (naming the file), as a recipe refuses it.
    assert run_main(["eval", *common, "--tune-on", "dev"]) != 0
    capsys.readouterr()
    assert run_main(["eval", "--model", tiny_bert_path, "--data", tiny_beir_path, "--quiet", "--hybrid", "bm25",
                     "--tune-on", "dev", "--dev-from-train", 3]) == 2
    assert "dev.tsv" in capsys.readouterr().out
