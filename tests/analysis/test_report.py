"""``tapt report RUN_DIR``: the dev curve with zero-shot and BM25 references (BM25 on the
run's own dev sub-corpus), the best checkpoint, test metrics and linked plots."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

import tapt
from tapt.analysis.report import build_report, curve_figure
from tapt.cli import main
from tapt.data.subcorpus import subcorpus_ids
from tapt.retrieval.bm25 import BM25Retriever
from tapt.retrieval.metrics import METRIC_KEYS
from tapt.util.figures import new_figure, save

HISTORY = [(0, 0.0, 0.31), (5, 0.5, 0.52), (10, 1.0, 0.61), (15, 1.5, 0.58)]


def metrics(value: float) -> dict[str, float]:
    return {"binary_ndcg@10": value, "graded_ndcg@10": value - 0.01, "mrr@10": value - 0.02,
            "recall@100": 1.0}


@pytest.fixture
def run_dir(tmp_path, c1_path) -> Path:
    """A finished run folder as tapt train leaves it (best step 10), with a PNG in final/."""
    run = tmp_path / "runs" / "tiny"
    (run / "final").mkdir(parents=True)
    recipe = {"model": {"name": "tiny-model"}, "loss": {"name": "mnrl"},
              "training": {"epochs": 2, "learning_rate": 5e-5, "per_device_batch_size": 8},
              "eval": {"metric": "binary_ndcg@10"},
              "data": {"path": str(c1_path), "config": None, "dev_split": "dev",
                       "dev_distractors": 30, "dev_seed": 4, "with_title": True,
                       "lenient": False},
              "output_dir": str(run)}
    (run / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    history = [{"step": s, "epoch": e, "seconds": 1.0, "dtype": "float32", **metrics(v)}
               for s, e, v in HISTORY]
    (run / "metrics.jsonl").write_text("".join(json.dumps(h) + "\n" for h in history))
    summary = {"zero-shot dev": metrics(0.31), "best dev (step 10)": metrics(0.61),
               "zero-shot test": metrics(0.22), "TAPT test": metrics(0.4567)}
    (run / "results.json").write_text(json.dumps({"status": "finished", "summary": summary,
                                                  "best_step": 10, "history": history}))
    figure, ax = new_figure()
    ax.plot([0, 1], [0, 1])
    save(figure, run / "final" / "dev_curve.png")
    return run


def links(markdown: str, base: Path) -> list[Path]:
    return [(base / target).resolve() for target in re.findall(r"!\[[^]]*\]\(([^)]+)\)",
                                                                 markdown)]


def test_report_shows_curve_best_checkpoint_test_metrics_and_plots(run_dir, tmp_path, capsys):
    extra = tmp_path / "elsewhere" / "ablation.png"
    figure, ax = new_figure()
    ax.plot([1, 2], [2, 1])
    save(figure, extra)
    assert main(["report", str(run_dir), "--plot", str(extra)]) == 0
    assert "best step 10" in capsys.readouterr().out
    markdown = (run_dir / "report.md").read_text()
    assert "| **10** (best) | 1.00 | **0.6100** |" in markdown
    assert "Step 10: dev binary_ndcg@10 **0.6100** (+0.3000 over zero-shot)" in markdown
    assert "| TAPT test | 0.4567 | 0.4467 | 0.4367 | 1.0000 |" in markdown
    targets = links(markdown, run_dir)
    assert (run_dir / "report_dev_curve.png").resolve() in targets
    assert (run_dir / "final" / "dev_curve.png").resolve() in targets
    assert extra.resolve() in targets
    assert all(path.is_file() for path in targets)
    data = json.loads((run_dir / "report.json").read_text())
    assert data["best_step"] == 10 and set(data["references"]) == {"zero-shot", "BM25"}


def test_bm25_reference_is_scored_on_the_runs_dev_sub_corpus(run_dir, c1_path):
    report = build_report(run_dir)
    dataset = tapt.load_data(c1_path, splits=["dev"])
    ids = subcorpus_ids(dataset, "dev", distractors=30, seed=4)
    expected = tapt.evaluate(BM25Retriever(progress=False), dataset, "dev",
                             corpus_ids=ids).metrics
    assert report.references["BM25"] == pytest.approx(expected)
    assert report.references["zero-shot"] == metrics(0.31)
    assert any(f"{len(ids):,} passages" in note for note in report.notes)


def test_curve_plot_draws_the_history_and_the_references(run_dir):
    report = build_report(run_dir)
    figure = curve_figure(report)
    lines = {line.get_label(): line for line in figure.axes[0].get_lines()}
    assert list(lines["binary_ndcg@10"].get_xdata()) == [s for s, _, _ in HISTORY]
    assert list(lines["binary_ndcg@10"].get_ydata()) == [v for _, _, v in HISTORY]
    for key in METRIC_KEYS:
        assert key in lines
    bm25 = report.references["BM25"]["binary_ndcg@10"]
    assert set(lines["BM25 (binary_ndcg@10)"].get_ydata()) == {bm25}
    assert set(lines["zero-shot (binary_ndcg@10)"].get_ydata()) == {0.31}
    assert list(lines["best"].get_xdata()) == [10]
    assert list(lines["best"].get_ydata()) == [0.61]


def test_bm25_from_a_result_file_or_none(run_dir, tmp_path, c1_path):
    result = tmp_path / "bm25-dev.json"
    assert main(["bm25", "--data", str(c1_path), "--split", "dev", "--distractors", "30",
                 "--seed", "4", "--output", str(result), "--quiet"]) == 0  # the run's dev
    report = build_report(run_dir, bm25=result)
    assert report.references["BM25"]["mrr@10"] == json.loads(result.read_text())["mrr@10"]
    assert "BM25" not in build_report(run_dir, bm25=None).references
    assert main(["report", str(run_dir), "--no-bm25", "--output",
                 str(tmp_path / "r" / "plain.md")]) == 0
    assert "BM25" not in (tmp_path / "r" / "plain.md").read_text()
    assert (tmp_path / "r" / "plain_dev_curve.png").is_file()


def test_missing_data_leaves_a_note_not_a_crash(run_dir):
    recipe = yaml.safe_load((run_dir / "recipe.yaml").read_text())
    recipe["data"]["path"] = str(run_dir / "gone")
    (run_dir / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    report = build_report(run_dir)
    assert "BM25" not in report.references
    assert any("BM25 not computed" in note for note in report.notes)


def test_a_folder_without_a_run_is_refused(tmp_path):
    assert main(["report", str(tmp_path)]) == 2


def test_bm25_on_dev_carves_the_dev_split_as_the_run_did(tiny_beir_path, tmp_path):
    """A run with ``data.dev_from_train`` has no dev file: ``tapt report`` carves the same
    dev queries from train again (same size and seed) and scores BM25 on them, under the
    recipe's relevance rule, where it used to fail to load a dev split."""
    import shutil

    from tapt.analysis.bm25_reference import bm25_on_dev, dev_subcorpus
    from tapt.data.sources import load_data
    from tapt.data.splits import carve_dev

    data = Path(shutil.copytree(tiny_beir_path, tmp_path / "beir"))
    (data / "qrels" / "dev.tsv").unlink()
    recipe = {"model": {"name": "tiny"}, "output_dir": "x",
              "data": {"path": str(data), "dev_from_train": 2, "dev_seed": 3,
                       "dev_distractors": 5}}
    dataset, split, _ = dev_subcorpus(recipe)
    carved = carve_dev(load_data(data, None, ["train"]), size=2, seed=3)
    assert split == "dev" and dataset.qrels["dev"] == carved.qrels["dev"]
    assert len(dataset.qrels["dev"]) == 2
    metrics, note = bm25_on_dev(recipe)
    assert 0 <= metrics["binary_ndcg@10"] <= 1 and "2 queries" in note


def test_bm25_on_dev_refuses_a_carve_other_than_the_runs(tiny_beir_path, tmp_path):
    """The run recorded its dev carve (results.json dev_carve): when today's carve differs
    (the data changed, or the run carved by query where today's recipe carves by group),
    BM25 is not measured on other queries than the run's dev curve."""
    import shutil

    import pytest

    from tapt.analysis.bm25_reference import bm25_on_dev, dev_subcorpus

    data = Path(shutil.copytree(tiny_beir_path, tmp_path / "beir"))
    (data / "qrels" / "dev.tsv").unlink()
    recipe = {"model": {"name": "tiny"}, "output_dir": "x",
              "data": {"path": str(data), "dev_from_train": 2, "dev_seed": 3}}
    today = dev_subcorpus(recipe)[0].carved
    assert bm25_on_dev(recipe, dict(today))[0]  # the same carve: measured
    with pytest.raises(ValueError, match=r"dev_carve\.by: 'query', today 'group'"):
        bm25_on_dev(recipe, {**today, "by": "query"})
    with pytest.raises(ValueError, match="dev_carve.ids_digest"):
        bm25_on_dev(recipe, {**today, "ids_digest": "0" * 32})
