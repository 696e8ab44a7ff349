"""``tapt compare --baseline`` on the novel queries: the same paired test restricted to the
queries no result calls seen (``train_overlap``), a note when a significant gain holds only
on seen queries; each pair on the queries novel to both."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tapt.analysis.compare import compare_results
from tapt.analysis.compare_render import markdown_table
from tapt.analysis.significance import holm, paired_test
from tapt.cli import main
from tapt.retrieval.metrics import METRIC_KEYS

METRIC = "binary_ndcg@10"
IDS = [f"q{i:03d}" for i in range(40)]
SEEN = set(IDS[:24])  # 24 seen, 16 novel
NOVEL = [q for q in IDS if q not in SEEN]


def overlap(values: dict[str, float], seen: set[str]) -> dict:
    """A ``train_overlap`` section as tapt eval writes it for ``values``."""
    parts = {"seen": [v for q, v in values.items() if q in seen],
             "novel": [v for q, v in values.items() if q not in seen]}
    return {"split": "test", "train_split": "train", "decontaminated": [],
            "seen": len(parts["seen"]), "novel": len(parts["novel"]),
            "seen_query_ids": sorted(seen & set(values)),
            "metrics": {p: dict.fromkeys(METRIC_KEYS, float(np.mean(v)))
                        for p, v in parts.items() if v},
            "counts": {p: dict.fromkeys(METRIC_KEYS, len(v)) for p, v in parts.items() if v}}


def write(path, values: dict[str, float], seen: set[str] | None = SEEN, **extra) -> str:
    result = {**dict.fromkeys(METRIC_KEYS, float(np.mean(list(values.values())))),
              "timings": {"search_ms_per_query": 0.1},
              "evaluated": {"model": path.stem, "data": "data/formbench-structured"},
              "per_query": {q: dict.fromkeys(METRIC_KEYS, v) for q, v in values.items()}}
    if seen is not None:
        result["train_overlap"] = {**overlap(values, seen), **extra}
    path.write_text(json.dumps(result), encoding="utf-8")
    return str(path)


@pytest.fixture
def scores() -> dict[str, dict[str, float]]:
    """A baseline; ``memorised`` gains 0.3 on seen queries and loses a little on novel
    ones; ``general`` gains 0.2 everywhere."""
    rng = np.random.default_rng(3)
    base = rng.uniform(0.1, 0.6, len(IDS))
    noise = rng.normal(0, 0.03, len(IDS))
    seen = np.array([q in SEEN for q in IDS])
    memorised = np.clip(base + np.where(seen, 0.3, -0.02) + noise, 0, 1)
    general = np.clip(base + 0.2 + noise, 0, 1)
    return {name: dict(zip(IDS, map(float, values), strict=True))
            for name, values in (("base", base), ("memorised", memorised),
                                 ("general", general))}


def specs(tmp_path, scores, **seen_of) -> list[str]:
    return [f"{name}={write(tmp_path / f'{name}.json', values, seen_of.get(name, SEEN))}"
            for name, values in scores.items()]


def test_each_system_is_tested_again_on_the_novel_queries(tmp_path, scores):
    comparison = compare_results(specs(tmp_path, scores), baseline="base")
    novel = comparison.tests.novel
    assert novel.queries == {"C1": len(NOVEL)}
    raw = []
    for name in ("memorised", "general"):
        expected = paired_test([scores[name][q] for q in NOVEL],
                               [scores["base"][q] for q in NOVEL])
        assert novel.results["C1"][name].test == expected
        raw.append(expected.p_value)
    assert [novel.results["C1"][n].p_holm for n in ("memorised", "general")] == \
        pytest.approx(holm(raw))
    overall = comparison.tests.results["C1"]["memorised"].test
    assert overall.queries == len(IDS) and overall.delta > 0.1  # the overall test unchanged


def test_a_gain_only_on_seen_queries_is_said(tmp_path, scores):
    comparison = compare_results(specs(tmp_path, scores), baseline="base")
    overall = comparison.tests.results["C1"]
    assert overall["memorised"].significant and overall["general"].significant
    notes = comparison.notes()
    said = [note for note in notes if "all comes from seen queries" in note]
    assert len(said) == 1 and said[0].startswith("memorised's gain over base on C1")
    assert not any(note.startswith("general") for note in notes)
    table = markdown_table(comparison)
    assert f"C1 Δ bin nDCG@10 vs base, novel queries (up to {len(NOVEL)})" in table
    assert "C1 novel p (Holm)" in table and said[0] in table
    row = next(line for line in table.splitlines() if line.startswith("| memorised "))
    delta = comparison.tests.novel.results["C1"]["memorised"].test.delta
    assert delta <= 0 and f"{delta:+.4f}" in row


def test_a_novel_gain_that_is_not_significant_is_said_too(tmp_path, scores):
    base = scores["base"]
    scores["memorised"] = {q: min(1.0, v + (0.3 if q in SEEN else 0.004 * (-1) ** i))
                           for i, (q, v) in enumerate(base.items())}
    scores["memorised"][NOVEL[0]] = base[NOVEL[0]] + 0.05  # a small positive mean
    comparison = compare_results(specs(tmp_path, {k: scores[k] for k in ("base", "memorised")}),
                                 baseline="base")
    on_novel = comparison.tests.novel.results["C1"]["memorised"]
    assert on_novel.test.delta > 0 and not on_novel.significant
    assert any("is not significant on novel queries" in note and "may come from seen queries "
               "alone" in note for note in comparison.notes())


def test_each_pair_is_tested_on_the_queries_novel_to_both(tmp_path, scores):
    """A system that trained on other queries than the baseline (another training split, a
    decontamination, a dev carve) is paired on the queries neither saw: a query either
    trained on is left out, so its gain there cannot be remembered."""
    system_seen = set(IDS[10:30])  # overlaps the baseline's SEEN (IDS[:24]) partly
    comparison = compare_results(specs(tmp_path, scores, general=system_seen),
                                 baseline="base")
    novel = comparison.tests.novel
    assert "general" not in novel.skipped.get("C1", {})
    both = [q for q in IDS if q not in SEEN | system_seen]
    mean = {name: [scores[name][q] for q in both] for name in ("general", "base")}
    expected = paired_test(mean["general"], mean["base"])
    test = novel.results["C1"]["general"].test
    assert test.queries == len(both) == 10
    assert test.delta == pytest.approx(expected.delta)
    assert novel.results["C1"]["memorised"].test.queries == len(NOVEL)


def test_another_training_split_is_paired_on_the_queries_novel_to_both(tmp_path, scores):
    path = tmp_path / "general.json"
    write(path, scores["general"], seen=set(), train_split="train-all",
          decontaminated=["test"])  # trained on nothing any test query is relevant to
    files = [f"base={write(tmp_path / 'base.json', scores['base'])}", f"general={path}"]
    comparison = compare_results(files, baseline="base")
    assert comparison.tests.novel.results["C1"]["general"].test.queries == len(NOVEL)
    assert "novel p (Holm)" in markdown_table(comparison)


def test_files_without_train_overlap_compare_as_before(tmp_path, scores):
    files = [f"{name}={write(tmp_path / f'{name}.json', values, seen=None)}"
             for name, values in scores.items()]
    comparison = compare_results(files, baseline="base")
    assert comparison.tests.novel.results == {} and comparison.tests.novel.skipped == {}
    assert "novel" not in markdown_table(comparison)
    assert not any("novel" in note for note in comparison.notes())
    # one file with the section and the baseline without: skipped, and said
    files[1] = f"memorised={write(tmp_path / 'memorised.json', scores['memorised'])}"
    comparison = compare_results(files, baseline="base")
    reason = comparison.tests.novel.skipped["C1"]["memorised"]
    assert reason.startswith(f"{tmp_path / 'base.json'} has no train_overlap section")


def test_a_malformed_section_is_named(tmp_path, scores):
    path = tmp_path / "memorised.json"
    write(path, scores["memorised"], seen_query_ids=["q000"])
    files = [f"base={write(tmp_path / 'base.json', scores['base'])}", f"memorised={path}"]
    with pytest.raises(ValueError, match=r"memorised.json: field "
                                         r"'train_overlap.seen_query_ids': expected the 24"):
        compare_results(files, baseline="base")


def test_seeds_must_agree_on_what_is_seen(tmp_path, scores):
    files = [f"base={write(tmp_path / 'base.json', scores['base'])}",
             f"M={write(tmp_path / 's0.json', scores['general'])}",
             f"M={write(tmp_path / 's1.json', scores['general'], seen=SEEN - {IDS[1]})}"]
    comparison = compare_results(files, baseline="base")
    assert comparison.tests.novel.skipped["C1"]["M"] == \
        "the seeds of M disagree on which queries are seen"


def test_cli_prints_the_novel_columns_and_the_note(tmp_path, scores, capsys):
    output = tmp_path / "compare.json"
    assert main(["compare", *specs(tmp_path, scores), "--baseline", "base",
                 "--resamples", "2000", "--output", str(output)]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert "memorised's gain over base on C1" in shown
    assert "all comes from seen queries" in shown
    data = json.loads(output.read_text())
    assert any("all comes from seen queries" in note for note in data["baseline"]["notes"])
    memorised = next(s for s in data["systems"] if s["name"] == "memorised")
    assert memorised["vs_baseline"]["C1"]["novel"]["delta"] <= 0
