"""``tapt analyze geometry``: Delta, anchor rank-1 rate, tiers and anisotropy on hand-made
embeddings whose values are worked out by hand, then end to end."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from analysis_helpers import CountingEncoder, LookupEncoder

import tapt
from tapt.analysis.geometry import (
    analyze_geometry,
    anisotropy,
    geometry_figure,
    geometry_from_embeddings,
)
from tapt.cli import main
from tapt.data.beir import Passage, write_beir

# Two queries; for each an anchor (3), a hard (2) and a soft (1) negative; three distractors.
QUERIES = {"q1": [1, 0, 0], "q2": [0, 1, 0]}
PASSAGES = {
    "a1": [1, 0, 0],        # cos(q1) = 1
    "h1": [0.6, 0.8, 0],    # cos(q1) = 0.6
    "s1": [0, 0, 1],        # cos(q1) = 0
    "a2": [0, 0.8, 0.6],    # cos(q2) = 0.8
    "h2": [0, 3, 0],        # cos(q2) = 1 (inner product 3): the hard negative wins for q2
    "s2": [0.8, 0, 0.6],    # cos(q2) = 0
    "d1": [0, 0, 1],        # cos 0 with both
    "d2": [-1, 0, 0],       # cos -1 with q1, 0 with q2
    "d3": [2, 2, 0],        # cos 0.7071 with both; inner product 2 beats a1 for q1 unnormalised
}
QRELS = {"q1": {"a1": 3, "h1": 2, "s1": 1}, "q2": {"a2": 3, "h2": 2, "s2": 1}}
SQRT_HALF = math.sqrt(0.5)


def hand_made(normalize: bool = True, **kwargs):
    query_ids, passage_ids = list(QUERIES), list(PASSAGES)
    return geometry_from_embeddings(
        query_ids, np.array([QUERIES[q] for q in query_ids], dtype=np.float32),
        passage_ids, np.array([PASSAGES[p] for p in passage_ids], dtype=np.float32), QRELS,
        normalize=normalize, **kwargs)


def test_delta_and_tier_means_equal_the_hand_computed_values():
    geometry = hand_made()
    assert geometry.tier_means["anchor"] == pytest.approx((1 + 0.8) / 2)
    assert geometry.tier_means["hard_negative"] == pytest.approx((0.6 + 1) / 2)
    assert geometry.tier_means["soft_negative"] == pytest.approx(0.0, abs=1e-7)
    assert geometry.delta == pytest.approx(0.9 - 0.8)
    # random: q1 -> d1 0, d2 -1, d3 0.7071; q2 -> 0, 0, 0.7071 (3 distractors, all taken)
    assert geometry.tier_means["random"] == pytest.approx((-1 + 2 * SQRT_HALF) / 6)
    assert geometry.tier_stats["random"]["count"] == 6
    assert geometry.anchor_above_hard_rate == 0.5  # q1: 1 > 0.6; q2: 0.8 < 1


def test_anchor_rank1_follows_the_models_scoring():
    # cosine: q1 -> a1 (1 > 0.7071), q2 -> h2 (1 > 0.8): one of two
    assert hand_made(normalize=True).anchor_rank1_rate == 0.5
    # inner product: q1 -> d3 (2 > 1), q2 -> h2 (3): none
    assert hand_made(normalize=False).anchor_rank1_rate == 0.0


def test_band_spans_the_pooled_similarities():
    geometry = hand_made()
    pooled = np.concatenate(list(geometry.similarities.values()))
    assert geometry.band["p5"] == pytest.approx(np.percentile(pooled, 5))
    assert geometry.band["width"] == pytest.approx(
        np.percentile(pooled, 95) - np.percentile(pooled, 5))


def test_anisotropy_is_the_mean_cosine_of_distinct_passage_pairs():
    # [1,0], [0,1], [1,1]: cosines 0, 0.7071, 0.7071
    mean, pairs = anisotropy(np.array([[1, 0], [0, 1], [SQRT_HALF, SQRT_HALF]]), pairs=10)
    assert pairs == 3 and mean == pytest.approx(2 * SQRT_HALF / 3)
    # sampled pairs never pair a passage with itself (that would add cosines of 1)
    mean, pairs = anisotropy(np.eye(60, dtype=np.float32), pairs=200, seed=4)
    assert pairs == 200 and mean == 0.0
    # hand-made corpus: every pair of the 9 passages
    cosines = []
    unit = {k: np.array(v) / np.linalg.norm(v) for k, v in PASSAGES.items()}
    keys = list(unit)
    for i, a in enumerate(keys):
        cosines += [float(unit[a] @ unit[b]) for b in keys[i + 1:]]
    geometry = hand_made()
    assert geometry.pairs == 36 and geometry.anisotropy == pytest.approx(np.mean(cosines))


def test_random_tier_is_a_seeded_sample_of_unjudged_passages():
    few = hand_made(random_per_query=2, seed=0)
    assert few.tier_stats["random"]["count"] == 4
    again = hand_made(random_per_query=2, seed=0)
    np.testing.assert_array_equal(few.similarities["random"], again.similarities["random"])
    allowed = {0.0, -1.0, round(SQRT_HALF, 5)}
    assert {round(v, 5) + 0.0 for v in few.similarities["random"]} <= allowed


def test_analyze_geometry_encodes_once_through_the_shared_path(tmp_path):
    corpus = {doc_id: Passage(text=f"passage {doc_id}") for doc_id in PASSAGES}
    queries = {q: f"query {q}" for q in QUERIES}
    folder = write_beir(tmp_path / "hand", corpus, queries,
                        {"train": {}, "dev": {}, "test": QRELS})
    dataset = tapt.load_data(folder, splits=["test"])
    vectors = {f"passage {k}": v for k, v in PASSAGES.items()}
    vectors |= {f"query {k}": v for k, v in QUERIES.items()}
    encoder = CountingEncoder(LookupEncoder(vectors))
    geometry = analyze_geometry(encoder, dataset, "test", distractors=None)
    assert encoder.streams == {"query": 1, "document": 1}
    assert encoder.texts["document"] == len(PASSAGES)
    expected = hand_made()
    assert geometry.delta == pytest.approx(expected.delta)
    assert geometry.anchor_rank1_rate == expected.anchor_rank1_rate
    assert geometry.anisotropy == pytest.approx(expected.anisotropy)
    assert geometry.tier_means == pytest.approx(expected.tier_means)
    # a sub-corpus: every judged passage plus one distractor
    small = analyze_geometry(LookupEncoder(vectors), dataset, "test", distractors=1)
    assert small.corpus_size == 7 and small.tier_stats["random"]["count"] == 2


def test_histogram_draws_the_four_tiers_and_their_means():
    geometry = hand_made()
    figure = geometry_figure(geometry)
    ax = figure.axes[0]
    means = {line.get_label().removeprefix("mean "): line.get_xdata()[0]
             for line in ax.get_lines() if line.get_label().startswith("mean ")}
    assert means == pytest.approx(geometry.tier_means)
    bars = {container.get_label().split(" (")[0]: container for container in ax.containers}
    assert set(bars) == {"anchor", "hard_negative", "soft_negative", "random"}
    for container in bars.values():  # densities: each histogram integrates to 1
        area = sum(p.get_height() * p.get_width() for p in container.patches)
        assert area == pytest.approx(1.0)


def test_cli_writes_the_documented_keys(c1_path, tiny_bert_path, tmp_path, capsys):
    output = tmp_path / "geometry.json"
    assert main(["analyze", "geometry", "--model", f"tiny={tiny_bert_path}", "--data", str(c1_path),
                 "--split", "test", "--distractors", "50", "--output", str(output),
                 "--quiet"]) == 0
    assert "Delta" in capsys.readouterr().out
    data = json.loads(output.read_text())
    assert data["model"] == "tiny"
    assert {"delta", "anchor_rank1_rate", "anisotropy", "tier_means", "band"} <= set(data)
    assert data["delta"] == pytest.approx(data["tier_means"]["anchor"]
                                          - data["tier_means"]["hard_negative"])
    assert 0.0 <= data["anchor_rank1_rate"] <= 1.0 and -1.0 <= data["anisotropy"] <= 1.0
    judged = len(tapt.load_data(c1_path, splits=["test"]).judged_ids("test"))
    assert data["corpus_size"] == judged + 50
    assert (tmp_path / "geometry.png").stat().st_size > 1000
    assert main(["analyze", "geometry", "--model", "bm25", "--data", str(c1_path),
                 "--output", str(tmp_path / "g2.json")]) == 2
