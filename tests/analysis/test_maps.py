"""``tapt analyze map``: seeded 2-D maps of passage embeddings, one panel per model, coloured
by a corpus label field."""

from __future__ import annotations

import importlib.util
import json
from collections import Counter

import numpy as np
import pytest

from tapt.analysis import maps
from tapt.cli import main
from tapt.data.labels import read_labels


def run_map(model, data, output, *extra) -> dict:
    assert main(["analyze", "map", "--model", f"A={model}", "--model", f"B={model}",
                 "--data", str(data), "--color-by", "domain", "--method", "tsne",
                 "--sample", "40", "--output", str(output), "--quiet", *extra]) == 0
    return json.loads(output.read_text())


def coordinates(result: dict, model: str) -> np.ndarray:
    return np.array([[p["x"], p["y"]] for p in result["points"][model]])


def test_the_same_seed_gives_the_same_map(tiny_bert_path, synth_path, tmp_path):
    first = run_map(tiny_bert_path, synth_path, tmp_path / "a.json", "--seed", "3")
    again = run_map(tiny_bert_path, synth_path, tmp_path / "b.json", "--seed", "3")
    other = run_map(tiny_bert_path, synth_path, tmp_path / "c.json", "--seed", "4")
    assert first["method"] == "tsne" and first["passages"] == 40
    assert first["points"] == again["points"]  # identical coordinates, ids and labels
    assert first["points"]["A"] != other["points"]["A"]  # the seed draws another sample
    labels = read_labels(synth_path, ["domain"])["domain"]
    assert all(p["label"] == labels[p["id"]] for p in first["points"]["A"])
    assert (tmp_path / "a.png").is_file()


def test_figure_has_a_panel_per_model_and_a_colour_per_label():
    rng = np.random.default_rng(0)
    labels = ["x", "y", "x", "z", "y", "x"]
    result = maps.MapResult(field="domain", method="tsne", seed=0, ids=list("abcdef"),
                            labels=labels, coords={"A": rng.normal(size=(6, 2)),
                                                   "B": rng.normal(size=(6, 2))})
    figure = maps.map_figure(result)
    panels = [ax for ax in figure.axes if ax.get_title()]
    assert [ax.get_title() for ax in panels] == ["A", "B"]
    for ax, name in zip(panels, ("A", "B")):
        counts = {c.get_label(): len(c.get_offsets()) for c in ax.collections}
        assert counts == Counter(labels)
        for collection in ax.collections:  # the label's points, where the map put them
            wanted = result.coords[name][np.asarray(labels) == collection.get_label()]
            np.testing.assert_allclose(collection.get_offsets(), wanted)
    colours = [{c.get_label(): tuple(c.get_facecolor()[0]) for c in ax.collections}
               for ax in panels]
    assert colours[0] == colours[1] and len(set(colours[0].values())) == 3


@pytest.mark.parametrize("method", ["tsne", "umap"])
def test_projection_is_deterministic_for_a_seed(method):
    if method == "umap" and importlib.util.find_spec("umap") is None:
        pytest.skip("umap-learn is not installed")
    x = np.random.default_rng(1).normal(size=(30, 8)).astype(np.float32)
    first, again = maps.project(x, method, seed=5), maps.project(x, method, seed=5)
    assert first.shape == (30, 2)
    np.testing.assert_array_equal(first, again)
    if method == "umap":  # t-SNE starts from PCA: its seed only picks the sample
        assert not np.array_equal(first, maps.project(x, method, seed=6))


def test_umap_missing_falls_back_to_tsne_or_names_the_extra(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(maps.importlib.util, "find_spec",
                        lambda name, *a: None if name == "umap" else real(name, *a))
    assert maps.choose_method("auto") == "tsne"
    with pytest.raises(ValueError, match=r'pip install "tapt\[maps\]"'):
        maps.choose_method("umap")


def test_unknown_label_field_is_refused_before_embedding(tiny_bert_path, synth_path, tmp_path,
                                                          capsys):
    assert main(["analyze", "map", "--model", str(tiny_bert_path), "--data", str(synth_path),
                 "--color-by", "no-such-field", "--method", "tsne",
                 "--output", str(tmp_path / "m.json"), "--quiet"]) == 2
    assert "no passage has label field(s) no-such-field" in capsys.readouterr().out
    assert not (tmp_path / "m.json").exists()


@pytest.mark.parametrize("sample", ["1", "2"])
def test_a_sample_too_small_for_a_map_is_refused_at_parsing(sample, tiny_bert_path, synth_path,
                                                            tmp_path, capsys):
    """--sample 1 used to fail after loading, saying the corpus held 1 labelled passage."""
    with pytest.raises(SystemExit) as exited:
        main(["analyze", "map", "--model", str(tiny_bert_path), "--data", str(synth_path),
              "--color-by", "domain", "--sample", sample, "--output", str(tmp_path / "m.json")])
    assert exited.value.code == 2 and "in [3, 100000]" in capsys.readouterr().err


def test_too_few_labelled_passages_are_counted_in_the_corpus():
    from tapt.analysis.maps import embedding_maps
    from tapt.data.beir import BeirDataset, Passage
    from tapt.data.relevance import BEIR

    corpus = {f"p{i}": Passage(text=f"t {i}", title="") for i in range(10)}
    dataset = BeirDataset(corpus=corpus, queries={}, qrels={}, rule=BEIR)
    with pytest.raises(ValueError, match="^2 passage"):
        embedding_maps({}, dataset, {"p1": "a", "p2": "b"}, field="f", method="tsne")
