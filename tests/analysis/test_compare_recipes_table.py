"""benchmarks/compare_recipes.py's table shows zero-shot beside every arm (the difference of
its test mean from the base model's) and, when the test files record ``train_overlap``, each
arm's test figure on the novel queries, with a note when a gain over mnrl holds only on
seen queries. Nothing trains: the arms' records are written by hand."""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import numpy as np
import pytest

from tapt.retrieval.metrics import METRIC_KEYS

METRIC = "binary_ndcg@10"
IDS = [f"q{i:03d}" for i in range(40)]
SEEN = set(IDS[:24])


def result_file(folder: Path, values: dict[str, float], with_overlap: bool) -> dict:
    """An arm's ``test-float32.json`` (every metric = ``values``) and its test means."""
    folder.mkdir(parents=True)
    mean = float(np.mean(list(values.values())))
    result = {**dict.fromkeys(METRIC_KEYS, mean), "evaluated": {"model": str(folder),
                                                                "data": "d"},
              "per_query": {q: dict.fromkeys(METRIC_KEYS, v) for q, v in values.items()}}
    if with_overlap:
        parts = {"seen": [v for q, v in values.items() if q in SEEN],
                 "novel": [v for q, v in values.items() if q not in SEEN]}
        result["train_overlap"] = {
            "split": "test", "train_split": "train", "decontaminated": [], "seen": 24,
            "novel": 16, "seen_query_ids": sorted(SEEN),
            "metrics": {p: dict.fromkeys(METRIC_KEYS, float(np.mean(v)))
                        for p, v in parts.items()},
            "counts": {p: dict.fromkeys(METRIC_KEYS, len(v)) for p, v in parts.items()}}
    (folder / "test-float32.json").write_text(json.dumps(result))
    return dict.fromkeys(METRIC_KEYS, mean)


def arm_row(folder: Path, values: dict[str, float], with_overlap: bool = True) -> dict:
    test = result_file(folder, values, with_overlap)
    row = {"model": str(folder), "dev": dict.fromkeys(METRIC_KEYS, 0.5), "test": test,
           "seconds": 60, "load_average": 1.0}
    (folder / "arm.json").write_text(json.dumps(row))
    return row


@pytest.fixture
def comparison(benchmark_module, tmp_path):
    module = benchmark_module("compare_recipes")
    args = argparse.Namespace(out=tmp_path / "runs", summary=None, seeds=[0, 1],
                              metric=METRIC, arms=["mnrl", "lr-2e-4"])
    return module, module.Comparison(args)


def scores(seed: int) -> dict[str, dict[str, float]]:
    """mnrl, and lr-2e-4 better by 0.3 on seen queries only (a little worse on novel)."""
    rng = np.random.default_rng(seed)
    base = rng.uniform(0.2, 0.6, len(IDS))
    seen = np.array([q in SEEN for q in IDS])
    other = np.clip(base + np.where(seen, 0.3, -0.03) + rng.normal(0, 0.02, len(IDS)), 0, 1)
    return {name: dict(zip(IDS, map(float, values), strict=True))
            for name, values in (("mnrl", base), ("lr-2e-4", other))}


def build(comparison, with_overlap: bool = True):
    module, made = comparison
    results = {"mnrl": [], "lr-2e-4": []}
    for seed in (0, 1):
        for arm, values in scores(seed).items():
            results[arm].append(arm_row(made.folder(arm, seed), values, with_overlap))
    zero_values = {q: 0.3 + 0.1 * (q in SEEN) for q in IDS}
    zero = arm_row(made.out / "zero-shot", zero_values, with_overlap)
    return module.table(made, results, zero), results, zero


def row_of(markdown: str, name: str) -> list[str]:
    line = next(line for line in markdown.splitlines() if line.startswith(f"| {name}"))
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_every_arm_shows_its_difference_from_zero_shot_and_its_novel_figure(comparison):
    (markdown, data), results, zero = build(comparison)
    header = row_of(markdown, "arm")
    delta = header.index(f"Δ test {METRIC} vs zero-shot")
    novel = header.index(f"test {METRIC}, novel queries")
    for arm, rows in results.items():
        cells = row_of(markdown, arm)
        assert len(cells) == len(header)
        mean = statistics.mean(r["test"][METRIC] for r in rows)
        assert cells[delta] == f"{mean - zero['test'][METRIC]:+.4f}"
        figures = [float(np.mean([scores(seed)[arm][q] for q in IDS if q not in SEEN]))
                   for seed in (0, 1)]
        assert cells[novel] == f"{statistics.mean(figures):.4f} ± {statistics.stdev(figures):.4f}"
        assert data["novel_queries"][arm] == pytest.approx(figures)
    zero_cells = row_of(markdown, "zero-shot (base model)")
    assert len(zero_cells) == len(header)
    assert zero_cells[delta] == "" and zero_cells[novel] == "0.3000"
    assert "lr-2e-4's gain over mnrl" in data["verdict"]
    assert "all comes from seen queries" in data["verdict"]


def test_without_train_overlap_the_zero_shot_difference_is_still_shown(comparison):
    (markdown, data), _, _ = build(comparison, with_overlap=False)
    header = row_of(markdown, "arm")
    assert f"Δ test {METRIC} vs zero-shot" in header
    assert not any("novel" in column for column in header)
    assert len(row_of(markdown, "zero-shot (base model)")) == len(header)
    assert "seen queries" not in data["verdict"] and data["novel_queries"] == {}


def novel_test_of(arm: str):
    """The paired test the table must show: seed-averaged values on the novel queries."""
    from tapt.analysis.significance import paired_test

    novel = [q for q in IDS if q not in SEEN]
    mean = {name: [statistics.mean(scores(seed)[name][q] for seed in (0, 1)) for q in novel]
            for name in (arm, "mnrl")}
    return paired_test(mean[arm], mean["mnrl"])


def test_every_arm_is_tested_against_mnrl_on_the_novel_queries(comparison):
    (markdown, data), _, _ = build(comparison)
    header = row_of(markdown, "arm")
    cell = row_of(markdown, "lr-2e-4")[header.index("Δ novel vs mnrl [95% CI]")]
    expected = novel_test_of("lr-2e-4")
    assert cell.startswith(f"{expected.delta:+.4f}") and expected.delta < 0
    assert data["novel_vs_mnrl"]["lr-2e-4"]["delta"] == pytest.approx(expected.delta)


def test_files_without_train_overlap_are_split_by_the_datas_train_split(comparison):
    """Result files written before tapt recorded train_overlap: the novel queries come
    from --data (compare_recipes.NOVEL_FROM_DATA), and the same test is made."""
    module, _ = comparison
    module.NOVEL_FROM_DATA["test"] = frozenset(q for q in IDS if q not in SEEN)
    try:
        (markdown, data), _, _ = build(comparison, with_overlap=False)
    finally:
        module.NOVEL_FROM_DATA.clear()
    header = row_of(markdown, "arm")
    novel = header.index(f"test {METRIC}, novel queries")
    assert row_of(markdown, "zero-shot (base model)")[novel] == "0.3000"
    assert data["novel_vs_mnrl"]["lr-2e-4"]["delta"] == \
        pytest.approx(novel_test_of("lr-2e-4").delta)
    assert "all comes from seen queries" in data["verdict"]


def test_the_plain_script_trains_on_the_recipes_rows(benchmark_module, tmp_path):
    """benchmarks/st_baseline.py (the st-script arm) decontaminates and carves dev as the
    recipe does, so it trains on the same (query, positive) rows as tapt's mnrl arm."""
    import yaml

    from tapt.data.beir import BeirDataset, Passage, write_beir
    from tapt.data.relevance import BEIR
    from tapt.recipe import load_recipe
    from tapt.training.inputs import load_recipe_data

    qrels = {f"q{i}": {f"p{i // 2}": 1} for i in range(40)}  # pairs of queries share a passage
    corpus = {f"p{i}": Passage(text=f"passage {i}", title=f"t{i}") for i in range(20)}
    test = {"s0": {"p0": 1}, "s1": {"p3": 1}}
    data = BeirDataset(corpus=corpus, queries={q: f"query {q}" for q in [*qrels, *test]},
                       qrels={"train": qrels, "test": test}, rule=BEIR)
    folder = tmp_path / "data"
    write_beir(folder, data.corpus, data.queries, data.qrels)
    recipe_file = tmp_path / "r.yaml"
    recipe_file.write_text(yaml.safe_dump({
        "model": {"name": "unused"}, "output_dir": str(tmp_path / "run"),
        "data": {"path": str(folder), "dev_from_train": 6, "decontaminate": ["test"]}}))
    dataset = load_recipe_data(load_recipe(recipe_file), with_test=False)
    expected = sorted((dataset.queries[q], dataset.corpus[d].as_text(True))
                      for q, docs in dataset.split("train").items() for d in docs)
    rows = benchmark_module("st_baseline").training_pairs(str(folder), 6, 0, "group", ["test"])
    assert sorted(zip(rows["query"], rows["positive"], strict=True)) == expected
    assert len(expected) == 40 - 4 - 6  # p0 and p3 held out (4 queries), 6 dev queries
