"""``tapt probe``: labels from corpus.jsonl, one fixed split for every model, and scores
that separate an encoder that knows the classes from one that does not."""

from __future__ import annotations

import json

import numpy as np
import pytest
from analysis_helpers import CountingEncoder, LookupEncoder

import tapt
from tapt.analysis.probes import fixed_split, probe_figure, read_labels, run_probes
from tapt.cli import main
from tapt.data.beir import DataError


def test_labels_are_read_from_the_synth_corpus(c1_path, c1):
    labels = read_labels(c1_path, ["domain", "class"])
    assert set(labels["domain"]) == set(c1.corpus) == set(labels["class"])
    assert len(set(labels["domain"].values())) == 7
    with pytest.raises(DataError, match="domain, class|class, domain"):
        read_labels(c1_path, ["cpc"])


def test_split_is_fixed_stratified_and_seeded():
    ids = [f"d{i}" for i in range(60)]
    labels = {d: "abc"[i % 3] for i, d in enumerate(ids)} | {"d0": "lonely"}
    train, test, dropped = fixed_split(ids, labels, test_size=0.3, seed=1)
    again = fixed_split(ids, labels, test_size=0.3, seed=1)
    assert np.array_equal(train, again[0]) and np.array_equal(test, again[1])
    assert not np.array_equal(test, fixed_split(ids, labels, test_size=0.3, seed=2)[1])
    assert dropped == ["lonely"] and 0 not in set(train) | set(test)
    assert not set(train) & set(test) and len(train) + len(test) == 59
    for label in "abc":  # stratified: every class on both sides
        assert any(labels[ids[i]] == label for i in test)
        assert any(labels[ids[i]] == label for i in train)


def _class_encoders(c1, labels):
    """``oracle`` puts each domain on its own axis; ``blind`` ignores the text."""
    domains = sorted(set(labels["domain"].values()))
    rng = np.random.default_rng(0)
    oracle, blind = {}, {}
    for doc_id, passage in c1.corpus.items():
        text = passage.as_text()
        vector = np.zeros(len(domains) + 4)
        vector[domains.index(labels["domain"][doc_id])] = 1.0
        vector[len(domains):] = rng.normal(0, 0.05, 4)
        oracle[text] = vector
        blind[text] = rng.normal(0, 1, len(domains) + 4)
    return LookupEncoder(oracle, name="oracle"), LookupEncoder(blind, name="blind")


def test_an_encoder_that_separates_domains_scores_higher(c1, c1_path):
    labels = read_labels(c1_path, ["domain"])
    oracle, blind = _class_encoders(c1, labels)
    counting = CountingEncoder(oracle)
    result = run_probes({"oracle": counting, "blind": blind}, c1, labels, seed=0)
    assert counting.streams == {"document": 1} and counting.texts["document"] == len(c1.corpus)
    good, bad = result.scores["oracle"]["domain"], result.scores["blind"]["domain"]
    assert good["accuracy"] == 1.0 and good["macro_f1"] == 1.0
    assert good["v_measure"] == pytest.approx(1.0)
    assert bad["accuracy"] < 0.6 and bad["v_measure"] < 0.2
    assert good["classes"] == 7 and good["passages"] == len(c1.corpus)


def test_max_passages_samples_the_same_passages_for_every_model(c1, c1_path):
    labels = read_labels(c1_path, ["domain"])
    oracle, blind = (CountingEncoder(e) for e in _class_encoders(c1, labels))
    result = run_probes({"o": oracle, "b": blind}, c1, labels, max_passages=150, seed=3)
    assert result.passages == 150
    assert oracle.texts["document"] == blind.texts["document"] == 150


def test_plot_draws_the_table(c1, c1_path):
    labels = read_labels(c1_path, ["domain", "class"])
    oracle, blind = _class_encoders(c1, labels)
    result = run_probes({"oracle": oracle, "blind": blind}, c1, labels)
    figure = probe_figure(result)
    for ax, field in zip(figure.axes, ["domain", "class"], strict=True):
        bars = {container.get_label(): [p.get_height() for p in container.patches]
                for container in ax.containers}
        for model in ("oracle", "blind"):
            scores = result.scores[model][field]
            assert bars[model] == [scores["accuracy"], scores["macro_f1"], scores["v_measure"]]


def test_cli_compares_models_side_by_side(c1_path, tiny_bert_path, tiny_qwen3_path, tmp_path,
                                          capsys):
    output = tmp_path / "probes.json"
    assert main(["probe", "--model", str(tiny_bert_path), "--model", str(tiny_qwen3_path),
                 "--data", str(c1_path), "--max-passages", "200", "--output", str(output),
                 "--quiet"]) == 0
    assert "V-measure" in capsys.readouterr().out
    data = json.loads(output.read_text())
    # a local model is named by its last two folders (no absolute path in a table or plot)
    assert list(data["models"]) == ["/".join(path.resolve().parts[-2:])
                                    for path in (tiny_bert_path, tiny_qwen3_path)]
    for by_field in data["models"].values():
        assert set(by_field) == {"domain", "class"}
        for scores in by_field.values():
            assert all(0.0 <= scores[k] <= 1.0 for k in ("accuracy", "macro_f1", "v_measure"))
    assert (tmp_path / "probes.png").stat().st_size > 1000


def test_cli_refuses_a_corpus_without_labels(tiny_beir_path, tiny_bert_path, tmp_path):
    assert tapt.load_data(tiny_beir_path, splits=["test"])  # a valid dataset ...
    assert main(["probe", "--model", str(tiny_bert_path), "--data", str(tiny_beir_path),
                 "--output", str(tmp_path / "p.json"), "--quiet"]) == 2  # ... with no labels
    assert not (tmp_path / "p.json").exists()
