"""``examples/formbench_table1.py``: the C0 twin shares queries and judgments with C1, and
the whole example runs (with a tiny model) to a table, plots and a report."""

from __future__ import annotations

import importlib.util
import json
from collections import Counter
from pathlib import Path

import pytest

from tapt.data.synth import build

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "formbench_table1.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("formbench_table1_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_c0_twin_keeps_queries_qrels_and_patents_and_swaps_the_distractors(example):
    c1 = build(queries=60, distractors=150, variant="structured", seed=2)
    c0 = example.random_twin(c1, seed=3)
    assert c0.queries == c1.queries and c0.qrels() == c1.qrels()
    kept = {i for i, d in c1.docs.items() if d.kind != "distractor"}
    assert kept <= set(c0.docs)
    assert all(c0.docs[i] == c1.docs[i] for i in kept)
    swapped = [d for i, d in c0.docs.items() if i not in kept]
    assert len(swapped) == sum(d.kind == "distractor" for d in c1.docs.values())
    assert all(d.kind == "distractor" and d.doc_id.startswith("r") for d in swapped)
    # C1 distractors follow the queries' domains; C0's come from every domain
    c1_domains = Counter(d.domain for d in c1.docs.values() if d.kind == "distractor")
    c0_domains = Counter(d.domain for d in swapped)
    assert len(c0_domains) == 7
    texts = {d.passage.text for d in c1.docs.values() if d.kind == "distractor"}
    assert not texts & {d.passage.text for d in swapped}
    assert c0_domains != c1_domains


@pytest.mark.slow
def test_example_runs_end_to_end_with_a_tiny_model(example, tiny_bert_path, tmp_path, capsys):
    out = tmp_path / "t1"
    assert example.main(["--out", str(out), "--model", str(tiny_bert_path), "--queries", "40",
                         "--distractors", "60", "--epochs", "1", "--max-seq-length", "128",
                         "--fractions", "0.1 1.0"]) == 0
    shown = capsys.readouterr().out
    assert "$ tapt eval --model" in shown and "--hybrid bm25" in shown
    compare = json.loads((out / "compare.json").read_text())
    assert compare["corpora"] == ["C0", "C1"]
    kinds = {s["name"]: s["kind"] for s in compare["systems"]}
    assert kinds == {"BM25": "bm25", "zero-shot": "base", "TAPT": "tapt",
                     "TAPT+BM25": "hybrid"}
    assert all(set(s["results"]) == {"C0", "C1"} for s in compare["systems"])
    table = (out / "table1.md").read_text()
    assert table.count("\n") == 2 + 4 and "C1/C0" in table
    ablation = json.loads((out / "ablation.json").read_text())
    assert list(ablation["models"]) == ["zero-shot", "TAPT", "BM25"]
    probes = json.loads((out / "probes.json").read_text())
    assert list(probes["models"]) == ["zero-shot", "TAPT"]
    for name in ("compare.png", "ablation.png", "probes.png", "geometry-TAPT.png",
                 "tapt/report.md", "tapt/report_dev_curve.png", "commands.txt"):
        assert (out / name).is_file(), name
    report = (out / "tapt" / "report.md").read_text()
    assert "ablation.png" in report and "compare.png" in report
