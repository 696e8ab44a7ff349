"""Small BEIR datasets shared by the tests under tests/data.

The tiny dataset: 6 titled passages, 6 queries, qrels for train (q1, q2), dev (q3) and
test (q4, q5, q6) graded 3 (anchor) / 2 (hard negative) / 1 (soft negative); no query is
judged in two splits.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tapt.data.beir import Passage, write_beir


@pytest.fixture(autouse=True)
def _hub_offline(monkeypatch):
    """No test under tests/data may reach the network."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def tiny_corpus() -> dict[str, Passage]:
    return {
        "d1": Passage(title="Epoxy primer",
                      text="The primer uses a bisphenol epoxy binder with zinc phosphate."),
        "d2": Passage(title="Acrylic topcoat",
                      text="The topcoat uses an acrylic binder with titanium dioxide pigment."),
        "d3": Passage(title="Polyurethane sealant",
                      text="The sealant cures with an aliphatic isocyanate hardener."),
        "d4": Passage(title="Alkyd enamel",
                      text="The enamel dries by oxidation of a soybean alkyd resin."),
        "d5": Passage(title="Silicone coating",
                      text="The coating resists heat thanks to a methyl phenyl silicone resin."),
        "d6": Passage(title="Latex paint",
                      text="The paint is a vinyl acrylic latex with calcium carbonate filler."),
    }


def tiny_queries() -> dict[str, str]:
    return {
        "q1": "Which binder does the epoxy primer use?",
        "q2": "What hardener cures the polyurethane sealant?",
        "q3": "Which resin gives the silicone coating its heat resistance?",
        "q4": "Which binder holds the epoxy primer together?",
        "q5": "Which curing agent hardens the polyurethane sealant?",
        "q6": "What makes the silicone coating resist heat?",
    }


def tiny_qrels() -> dict[str, dict[str, dict[str, int]]]:
    return {
        # q1 has anchor + hard + soft; q2 has anchor + hard only (no soft negative).
        "train": {"q1": {"d1": 3, "d2": 2, "d6": 1},
                  "q2": {"d3": 3, "d4": 2}},
        "dev": {"q3": {"d5": 3, "d4": 2, "d1": 1}},
        # Splits share no query (tapt refuses overlapping splits).
        "test": {"q4": {"d1": 3, "d2": 2, "d6": 1},
                 "q5": {"d3": 3, "d4": 2, "d1": 1},
                 "q6": {"d5": 3, "d4": 2, "d2": 1}},
    }


@pytest.fixture
def corpus() -> dict[str, Passage]:
    return tiny_corpus()


@pytest.fixture
def queries() -> dict[str, str]:
    return tiny_queries()


@pytest.fixture
def qrels() -> dict[str, dict[str, dict[str, int]]]:
    return tiny_qrels()


@pytest.fixture
def make_beir(tmp_path):
    """``make_beir(name, corpus=None, queries=None, qrels=None)``: a valid BEIR folder
    (the tiny dataset unless parts are replaced) written with ``write_beir``."""

    def make(name: str = "beir", corpus=None, queries=None, qrels=None) -> Path:
        return write_beir(tmp_path / name,
                          tiny_corpus() if corpus is None else corpus,
                          tiny_queries() if queries is None else queries,
                          tiny_qrels() if qrels is None else qrels)

    return make


@pytest.fixture
def beir_folder(make_beir) -> Path:
    """The tiny dataset as a BEIR folder."""
    return make_beir()


@pytest.fixture
def raw_beir(tmp_path):
    """``raw_beir(corpus=..., queries=..., qrels={split: text})``: a BEIR folder whose
    parts are given as raw text (the tiny dataset's text for parts left out)."""

    def make(name: str = "raw", *, corpus: str | None = None, queries: str | None = None,
             qrels: dict[str, str] | None = None) -> Path:
        source = write_beir(tmp_path / f"{name}-source", tiny_corpus(), tiny_queries(),
                            tiny_qrels())
        folder = tmp_path / name
        (folder / "qrels").mkdir(parents=True)
        (folder / "corpus.jsonl").write_text(
            corpus if corpus is not None else (source / "corpus.jsonl").read_text("utf-8"),
            encoding="utf-8")
        (folder / "queries.jsonl").write_text(
            queries if queries is not None else (source / "queries.jsonl").read_text("utf-8"),
            encoding="utf-8")
        texts = {split: (source / "qrels" / f"{split}.tsv").read_text("utf-8")
                 for split in ("train", "dev", "test")}
        texts.update(qrels or {})
        for split, text in texts.items():
            (folder / "qrels" / f"{split}.tsv").write_text(text, encoding="utf-8")
        return folder

    return make
