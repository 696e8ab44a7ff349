"""``tapt compare``: systems x corpora from result files, C1/C0 retention, kinds, and a
frontier plot that draws the table's numbers."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from tapt.analysis.compare import compare_results, corpus_label, infer_kind, latency_ms
from tapt.analysis.compare_render import frontier_figure, markdown_table
from tapt.analysis.plots import pareto_front
from tapt.cli import main
from tapt.retrieval.metrics import METRIC_KEYS


@pytest.fixture(scope="module")
def results(tmp_path_factory, c0_path, c1_path, tiny_bert_path) -> dict[str, str]:
    """Result files of BM25, the tiny model and their hybrid on C0 and C1 (tapt's CLI)."""
    folder = tmp_path_factory.mktemp("results")
    files = {}
    for corpus, data in (("c0", c0_path), ("c1", c1_path)):
        common = ["--data", str(data), "--split", "test", "--quiet"]
        for name, command in (("bm25", ["bm25"]),
                              ("tiny", ["eval", "--model", str(tiny_bert_path)]),
                              ("hybrid", ["eval", "--model", str(tiny_bert_path), "--hybrid",
                                          "bm25"])):
            path = folder / f"{name}-{corpus}.json"
            assert main([*command, *common, "--output", str(path)]) == 0
            files[f"{name}-{corpus}"] = str(path)
    return files


def read(path: str) -> dict:
    return json.loads(open(path, encoding="utf-8").read())


def test_one_row_per_system_with_both_corpora_and_retention(results):
    comparison = compare_results(list(results.values()))
    assert comparison.corpora == ["C0", "C1"]
    assert [row.kind for row in comparison.rows] == ["bm25", "base", "hybrid"]
    for row, name in zip(comparison.rows, ("bm25", "tiny", "hybrid"), strict=True):
        c0, c1 = read(results[f"{name}-c0"]), read(results[f"{name}-c1"])
        for key in METRIC_KEYS:
            assert row.cells["C0"].metrics[key] == c0[key]
            assert row.cells["C1"].metrics[key] == c1[key]
            assert row.gap[key] == pytest.approx(c0[key] - c1[key])
            if c0[key]:
                assert row.retention[key] == pytest.approx(c1[key] / c0[key])
        assert row.cells["C1"].latency_ms == pytest.approx(
            latency_ms(c1["timings"], "search"))


def test_labels_name_systems_and_corpora_can_be_relabelled(results):
    comparison = compare_results([f"BM25={results['bm25-c1']}", f"dense={results['tiny-c1']}"],
                                 corpus_labels={"formbench-structured": "C1-small"})
    assert [row.name for row in comparison.rows] == ["BM25", "dense"]
    assert comparison.corpora == ["C1-small"]
    assert all(not row.retention for row in comparison.rows)  # no C0


def test_hybrid_latency_adds_its_parts_and_the_fusion(results):
    timings = read(results["hybrid-c1"])["timings"]
    assert "search_ms_per_query" not in timings
    expected = (timings["dense_search_ms_per_query"] + timings["bm25_search_ms_per_query"]
                + timings["fusion_ms_per_query"])
    assert latency_ms(timings, "search") == pytest.approx(expected)
    assert math.isnan(latency_ms({}, "search"))


def test_kinds_are_inferred_from_the_result_files(tmp_path):
    export = tmp_path / "run" / "final"
    export.mkdir(parents=True)
    (export / "tapt_preset.json").write_text(json.dumps({"stage": "tapt"}))
    dapt = tmp_path / "dapt" / "final"
    dapt.mkdir(parents=True)
    (dapt / "tapt_preset.json").write_text(json.dumps({"stage": "dapt"}))

    def kind(model, **extra):
        return infer_kind({"evaluated": {"model": model, **extra}})

    assert kind("bm25") == "bm25"
    assert kind("openai:text-embedding-3-large") == "api"
    assert kind("voyage:voyage-3.5") == "api"
    assert kind("Qwen/Qwen3-Embedding-0.6B") == "base"
    assert kind(str(tmp_path)) == "base"  # a folder, but no tapt export
    assert kind(str(export)) == "tapt"
    assert kind(str(dapt)) == "dapt"
    assert kind(str(export), hybrid={"fusion": "rrf"}) == "hybrid"
    assert infer_kind({"evaluated": {"model": "x"}, "fusion": {}}) == "hybrid"


def test_explicit_kinds_override_and_bad_kinds_fail(results):
    comparison = compare_results([f"mine={results['tiny-c1']}"], kinds={"mine": "tapt"})
    assert comparison.rows[0].kind == "tapt"
    with pytest.raises(ValueError, match="kind must be one of"):
        compare_results([results["tiny-c1"]], kinds={"x": "magic"})


@pytest.mark.parametrize(("evaluated", "label"), [
    ({"data": "hf://datasets/vinven7/FormBench/formbench-structured"}, "C1"),
    ({"data": "data/FormBench/formbench-random"}, "C0"),
    ({"data": "data/c0"}, "C0"),
    ({"data": "x", "config": "structured"}, "C1"),
    ({"data": "data/quickstart/"}, "quickstart"),
])
def test_corpus_labels(evaluated, label):
    assert corpus_label(evaluated) == label


def test_two_results_for_one_system_and_corpus_are_refused(results):
    with pytest.raises(ValueError, match="two results for bm25 on C1"):
        compare_results([results["bm25-c1"], results["bm25-c1"]])


def test_frontier_plot_draws_the_table(results):
    comparison = compare_results(list(results.values()))
    figure = frontier_figure(comparison)
    assert [ax.get_title().split(":")[0] for ax in figure.axes] == ["C0", "C1"]
    for ax, corpus in zip(figure.axes, comparison.corpora, strict=True):
        drawn = {c.get_label(): c.get_offsets() for c in ax.collections}
        assert set(drawn) == {"bm25", "base", "hybrid"}
        for row in comparison.rows:
            cell = row.cells[corpus]
            np.testing.assert_allclose(drawn[row.kind],
                                       [[cell.latency_ms, cell.metrics["binary_ndcg@10"]]])
        base = next(c for c in ax.collections if c.get_label() == "base")
        assert not base.get_facecolor().any()  # base models: open markers (no face)
        bm25 = next(c for c in ax.collections if c.get_label() == "bm25")
        assert bm25.get_facecolor()[0][3] == 1  # filled


def test_pareto_front():
    points = [("slow-good", 10.0, 0.9), ("fast-bad", 0.1, 0.2), ("dominated", 5.0, 0.1),
              ("mid", 1.0, 0.5)]
    assert pareto_front(points) == ["fast-bad", "mid", "slow-good"]


def test_cli_writes_json_plot_and_markdown(results, tmp_path, capsys):
    output, markdown = tmp_path / "compare.json", tmp_path / "table.md"
    specs = [f"BM25={results['bm25-c0']}", f"BM25={results['bm25-c1']}",
             f"tiny={results['tiny-c0']}", f"tiny={results['tiny-c1']}"]
    assert main(["compare", *specs, "--kind", "tiny=tapt", "--output", str(output),
                 "--markdown", str(markdown)]) == 0
    shown = capsys.readouterr().out
    assert "Systems x corpora" in shown and "BM25" in shown
    data = json.loads(output.read_text())
    systems = {s["name"]: s for s in data["systems"]}
    c0, c1 = read(results["bm25-c0"]), read(results["bm25-c1"])
    assert systems["BM25"]["retention_c1_c0"]["binary_ndcg@10"] == pytest.approx(
        c1["binary_ndcg@10"] / c0["binary_ndcg@10"])
    assert systems["tiny"]["kind"] == "tapt"
    assert set(data["pareto_front"]) == {"metric", "C0", "C1"}
    assert (tmp_path / "compare.png").stat().st_size > 1000
    table = markdown.read_text()
    assert table == markdown_table(compare_results(specs, kinds={"tiny": "tapt"}))
    assert f"{c1['binary_ndcg@10']:.4f}" in table
    assert main(["compare", str(tmp_path / "missing.json")]) == 2
    assert main(["compare", str(output)]) == 2  # not a result file


def test_baseline_tests_run_on_the_per_query_values_tapt_writes(results):
    specs = [f"{name}={results[f'{name}-{c}']}" for name in ("bm25", "tiny", "hybrid")
             for c in ("c0", "c1")]
    comparison = compare_results(specs, baseline="bm25")
    assert set(comparison.tests.results) == {"C0", "C1"}
    for corpus in ("C0", "C1"):
        by = comparison.tests.results[corpus]
        assert set(by) == {"tiny", "hybrid"}
        per_query = read(results[f"tiny-{corpus.lower()}"])["per_query"]
        assert by["tiny"].test.queries == sum("binary_ndcg@10" in v for v in per_query.values())
        tiny = comparison.rows[1].cells[corpus].metrics["binary_ndcg@10"]
        bm25 = comparison.rows[0].cells[corpus].metrics["binary_ndcg@10"]
        assert by["tiny"].test.delta == pytest.approx(tiny - bm25)
        assert by["tiny"].test.ci_low <= by["tiny"].test.delta <= by["tiny"].test.ci_high
