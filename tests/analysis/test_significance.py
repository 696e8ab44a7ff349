"""``tapt compare --baseline``: paired bootstrap CI and randomization test equal scipy's,
Holm's correction, seeds as mean ± std, and the refusals (unknown baseline, no shared
queries, no per-query values)."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
from scipy import stats

from tapt.analysis.compare import compare_results
from tapt.analysis.compare_render import markdown_table
from tapt.analysis.significance import holm, mean_std, paired_test
from tapt.cli import main
from tapt.retrieval.metrics import METRIC_KEYS

METRIC = "binary_ndcg@10"


def write_result(path, values: dict[str, float], *, model: str = "m",
                 data: str = "data/formbench-structured") -> str:
    """A result file as ``tapt eval --output`` writes it, every metric = ``values``."""
    mean = sum(values.values()) / len(values)
    result = {**dict.fromkeys(METRIC_KEYS, mean), "timings": {"search_ms_per_query": 0.1},
              "evaluated": {"model": model, "data": data},
              "per_query": {q: dict.fromkeys(METRIC_KEYS, v) for q, v in values.items()}}
    path.write_text(json.dumps(result), encoding="utf-8")
    return str(path)


def queries(values) -> dict[str, float]:
    """{query id: value}; ids sort as listed (the test pairs queries in id order)."""
    return {f"q{i:03d}": float(v) for i, v in enumerate(values)}


@pytest.fixture
def scores() -> dict[str, np.ndarray]:
    """Per-query values of a baseline, a clearly better system and one that only jitters."""
    rng = np.random.default_rng(7)
    base = rng.uniform(0.1, 0.7, 30)
    return {"base": base, "better": np.clip(base + 0.2 + rng.normal(0, 0.05, 30), 0, 1),
            "same": np.clip(base + rng.normal(0, 0.05, 30), 0, 1)}


def scipy_reference(a, b, n_resamples=10_000, seed=0):
    """The CI and p-value from scipy called directly."""
    diffs = np.asarray(a) - np.asarray(b)
    ci = stats.bootstrap((diffs,), np.mean, n_resamples=n_resamples, method="percentile",
                         rng=np.random.default_rng(seed)).confidence_interval
    p = stats.permutation_test((np.asarray(a), np.asarray(b)),
                               lambda x, y, axis: np.mean(x - y, axis=axis),
                               permutation_type="samples", vectorized=True,
                               n_resamples=n_resamples, alternative="two-sided",
                               rng=np.random.default_rng(seed)).pvalue
    return ci.low, ci.high, p


@pytest.mark.parametrize("n", [8, 30])  # 8: the exact test (2**8 sign patterns)
def test_paired_test_equals_scipy(n):
    rng = np.random.default_rng(n)
    a, b = rng.uniform(0, 1, n), rng.uniform(0, 1, n)
    test = paired_test(a, b, seed=3)
    low, high, p = scipy_reference(a, b, seed=3)
    assert (test.ci_low, test.ci_high, test.p_value) == (low, high, p)
    assert test.delta == pytest.approx(np.mean(a - b))
    assert test.queries == n
    assert low <= test.delta <= high


def test_paired_test_of_identical_systems_is_not_significant():
    test = paired_test([0.2, 0.5, 0.9], [0.2, 0.5, 0.9])
    assert (test.delta, test.ci_low, test.ci_high, test.p_value) == (0, 0, 0, 1)
    with pytest.raises(ValueError, match="at least 2 queries"):
        paired_test([0.5], [0.4])


def test_holm_on_a_known_example():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5, 0.4]) == pytest.approx([0.8, 0.8])  # 0.4*2, then monotone
    assert holm([0.6, 0.9]) == [1.0, 1.0]  # capped at 1
    assert holm([]) == []
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        holm([0.1, float("nan")])


def test_mean_std_is_the_sample_std():
    assert mean_std([0.5, 0.7]) == pytest.approx((0.6, np.std([0.5, 0.7], ddof=1)))


def test_compare_tests_every_system_against_the_baseline(tmp_path, scores):
    specs = [f"{name}={write_result(tmp_path / f'{name}.json', queries(v))}"
             for name, v in scores.items()]
    comparison = compare_results(specs, baseline="base")
    tested = comparison.tests.results["C1"]
    assert set(tested) == {"better", "same"}
    raw = []
    for name in ("better", "same"):
        low, high, p = scipy_reference(scores[name], scores["base"])
        test = tested[name].test
        assert (test.ci_low, test.ci_high, test.p_value) == (low, high, p)
        assert test.delta == pytest.approx(np.mean(scores[name] - scores["base"]))
        raw.append(p)
    assert [tested[n].p_holm for n in ("better", "same")] == pytest.approx(holm(raw))
    assert tested["better"].significant and not tested["same"].significant
    assert comparison.notes() == []  # one system differs: no "nothing is significant" note
    table = markdown_table(comparison)
    assert "C1 Δ bin nDCG@10 vs base" in table and "C1 95% CI" in table
    assert f"{tested['better'].p_holm:.4f}" in table


def test_a_note_says_when_nothing_is_significant(tmp_path, scores):
    specs = [f"{name}={write_result(tmp_path / f'{name}.json', queries(scores[name]))}"
             for name in ("base", "same")]
    comparison = compare_results(specs, baseline="base")
    detectable = comparison.tests.results[next(iter(comparison.tests.results))]["same"] \
        .test.detectable
    note = ("no system differs significantly from base (p (Holm) < 0.05); with 80% power "
            f"these queries detect a difference of {detectable:.4f} or more (smaller true "
            "gains can hide behind 'not significant')")
    assert comparison.notes() == [note]
    assert markdown_table(comparison).endswith(f"\n{note}\n")


def test_seeds_share_a_name_show_mean_std_and_are_averaged_before_the_test(tmp_path, scores):
    seeds = [scores["better"], np.clip(scores["better"] - 0.1, 0, 1)]
    specs = [f"base={write_result(tmp_path / 'base.json', queries(scores['base']))}"]
    specs += [f"MNRL={write_result(tmp_path / f'mnrl-s{i}.json', queries(v), model=f's{i}')}"
              for i, v in enumerate(seeds)]
    comparison = compare_results(specs, baseline="base")
    mnrl = comparison.rows[1]
    assert [row.name for row in comparison.rows] == ["base", "MNRL"]
    cell = mnrl.cells["C1"]
    means = [v.mean() for v in seeds]
    assert cell.metrics[METRIC] == pytest.approx(np.mean(means))
    assert cell.std[METRIC] == pytest.approx(np.std(means, ddof=1))
    assert len(cell.sources) == 2
    test = comparison.tests.results["C1"]["MNRL"].test
    low, high, p = scipy_reference((seeds[0] + seeds[1]) / 2, scores["base"])
    assert (test.ci_low, test.ci_high, test.p_value) == pytest.approx((low, high, p))
    table = markdown_table(comparison)
    assert f"{np.mean(means):.4f} ± {np.std(means, ddof=1):.4f}" in table
    assert "mean ± std over seeds (MNRL: 2 on C1)" in table
    result = comparison.to_dict()["systems"][1]["results"]["C1"]
    assert result["seeds"] == 2 and result["std"][METRIC] == pytest.approx(cell.std[METRIC])


def test_unlabelled_duplicates_and_a_file_given_twice_are_not_seeds(tmp_path, scores):
    path = write_result(tmp_path / "a.json", queries(scores["base"]))
    other = write_result(tmp_path / "b.json", queries(scores["same"]))
    with pytest.raises(ValueError, match="two results for m on C1: .*label one"):
        compare_results([path, other])
    with pytest.raises(ValueError, match="are one file"):
        compare_results([f"X={path}", f"X={path}"])


def test_an_unknown_baseline_is_refused_with_the_names(tmp_path, scores):
    specs = [f"{name}={write_result(tmp_path / f'{name}.json', queries(v))}"
             for name, v in scores.items()]
    with pytest.raises(ValueError, match="--baseline BM25: not a system .* base, better, same"):
        compare_results(specs, baseline="BM25")


def test_pairs_on_shared_queries_and_refuses_none_shared(tmp_path, scores, caplog):
    base = write_result(tmp_path / "base.json", queries(scores["base"]))
    fewer = dict(list(queries(scores["better"]).items())[:20])
    part = write_result(tmp_path / "part.json", fewer)
    with caplog.at_level(logging.WARNING, logger="tapt"):
        comparison = compare_results([f"base={base}", f"part={part}"], baseline="base")
    assert "20 and 30 queries, 20 shared" in caplog.text
    assert comparison.tests.results["C1"]["part"].test.queries == 20
    other = write_result(tmp_path / "other.json", {"x1": 0.5, "x2": 0.4})
    with pytest.raises(ValueError, match=r"other \(.*other.json\) and baseline base "
                                         r"\(.*base.json\) share 0 queries on C1"):
        compare_results([f"base={base}", f"other={other}"], baseline="base")


def test_per_query_values_are_required_and_checked(tmp_path, scores):
    base = write_result(tmp_path / "base.json", queries(scores["base"]))
    path = tmp_path / "bare.json"
    write_result(path, queries(scores["same"]))
    data = json.loads(path.read_text())
    del data["per_query"]
    path.write_text(json.dumps(data))
    assert compare_results([f"base={base}", f"bare={path}"]).tests is None  # fine without
    with pytest.raises(ValueError, match=r"bare.json: no 'per_query' block"):
        compare_results([f"base={base}", f"bare={path}"], baseline="base")
    data["per_query"] = {"q000": {METRIC: 1.5}}
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=r"field 'per_query.q000.binary_ndcg@10': expected a "
                                         r"value in \[0, 1\], got 1.5"):
        compare_results([f"base={base}", f"bare={path}"], baseline="base")


def test_cli_compare_with_a_baseline(tmp_path, scores, capsys):
    base = write_result(tmp_path / "bm25.json", queries(scores["base"]), model="bm25")
    tapt = write_result(tmp_path / "tapt.json", queries(scores["same"]), model="runs/x")
    output, markdown = tmp_path / "compare.json", tmp_path / "table.md"
    assert main(["compare", f"BM25={base}", f"TAPT={tapt}", "--baseline", "BM25",
                 "--resamples", "2000", "--seed", "1", "--output", str(output),
                 "--markdown", str(markdown)]) == 0
    shown = capsys.readouterr().out
    assert "no system differs significantly from BM25" in shown
    data = json.loads(output.read_text())
    versus = next(s for s in data["systems"] if s["name"] == "TAPT")["vs_baseline"]["C1"]
    low, high, p = scipy_reference(scores["same"], scores["base"], n_resamples=2000, seed=1)
    assert (versus["ci_low"], versus["ci_high"], versus["p_value"]) == (low, high, p)
    assert versus["p_holm"] == p and versus["queries"] == 30  # one system: Holm changes nothing
    assert data["baseline"]["name"] == "BM25" and data["baseline"]["n_resamples"] == 2000
    assert data["baseline"]["notes"][0].startswith(
        "no system differs significantly from BM25 (p (Holm) < 0.05); with 80% power these "
        f"queries detect a difference of {versus['detectable_difference']:.4f} or more")
    assert "vs_baseline" not in data["systems"][0]
    assert "p (Holm)" in markdown.read_text()
    assert main(["compare", f"BM25={base}", f"TAPT={tapt}", "--baseline", "bm25"]) == 2
    assert "--baseline bm25: not a system of this comparison" in capsys.readouterr().out


def test_detectable_difference_equals_the_closed_form():
    """Alternating +a / -a differences: sd = a * sqrt(n / (n - 1)), so the minimum
    detectable difference is (t(0.975, n-1) + t(0.8, n-1)) * a / sqrt(n - 1)."""
    from scipy import stats

    from tapt.analysis.significance import detectable_difference

    n, a = 32, 0.12
    diffs = [a if i % 2 else -a for i in range(n)]
    expected = (stats.t.ppf(0.975, n - 1) + stats.t.ppf(0.8, n - 1)) * a / (n - 1) ** 0.5
    assert detectable_difference(diffs) == pytest.approx(expected, rel=1e-12)
    # four times the queries: a little under half (the t quantiles shrink with the df too)
    assert 0.45 * expected < detectable_difference(diffs * 4) < 0.5 * expected


def test_a_true_gain_of_the_detectable_size_is_found_four_times_in_five():
    """Simulated paired designs whose true mean difference is the detectable one for
    their spread: the paired t-test rejects at 0.05 in about 80 % of them."""
    import numpy as np
    from scipy import stats

    from tapt.analysis.significance import detectable_difference

    rng = np.random.default_rng(0)
    n, sd = 100, 0.1
    spread = np.r_[np.full(n // 2, sd), np.full(n // 2, -sd)] * ((n - 1) / n) ** 0.5
    gain = detectable_difference(spread)  # differences whose sample sd is exactly `sd`
    rejected = np.mean([stats.ttest_1samp(rng.normal(gain, sd, n), 0).pvalue < 0.05
                        for _ in range(2000)])
    assert 0.76 < rejected < 0.84


def test_paired_test_carries_its_detectable_difference():
    from tapt.analysis.significance import detectable_difference, paired_test

    a = [0.9, 0.5, 0.7, 0.6, 0.8, 0.4]
    b = [0.8, 0.6, 0.5, 0.6, 0.7, 0.5]
    test = paired_test(a, b, n_resamples=200)
    assert test.detectable == pytest.approx(
        detectable_difference([x - y for x, y in zip(a, b)]))
