"""Weak pairs from unlabelled passages (tapt.data.weak_pairs, data.weak_pairs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tapt.data.beir import BeirDataset, Passage
from tapt.data.weak_pairs import (
    sentences,
    weak_pairs,
    weak_pairs_dataset,
    weak_pairs_for,
    with_weak_pairs,
)

TEXT = ("Aspirin lowers the risk of stroke. It was given at 3.5 mg per kg, e.g. twice a day. "
        "Patients over 60 years were enrolled. 12 of them left the trial early.")


def corpus(count: int = 40) -> dict[str, Passage]:
    return {f"p{i}": Passage(text=f"Passage {i} one. Passage {i} two. Passage {i} three.",
                             title=f"Title {i}") for i in range(count)}


def test_sentences_keep_abbreviations_and_decimals_whole():
    assert sentences(TEXT) == [
        "Aspirin lowers the risk of stroke.", "It was given at 3.5 mg per kg, e.g. twice a day.",
        "Patients over 60 years were enrolled.", "12 of them left the trial early."]


def test_title_pairs_are_title_to_text_and_skip_untitled_passages():
    passages = {"a": Passage(text="Body of a.", title="Title of a"),
                "b": Passage(text="Body of b.", title=""),
                "c": Passage(text="Same", title="Same")}
    assert weak_pairs(passages, "title") == {"query": ["Title of a"],
                                             "positive": ["Body of a."], "passage_id": ["a"]}


def test_ict_query_is_a_sentence_mostly_removed_from_its_positive():
    pairs = weak_pairs(corpus(400), "ict", seed=1)
    assert len(pairs["query"]) == 400
    kept = 0
    for query, positive, doc_id in zip(pairs["query"], pairs["positive"],
                                       pairs["passage_id"]):
        number = doc_id[1:]
        assert query in {f"Passage {number} one.", f"Passage {number} two.",
                         f"Passage {number} three."}
        assert positive.startswith(f"Title {number} ")
        kept += query in positive
    assert 0.05 < kept / 400 < 0.16  # KEEP_SENTENCE = 0.1


def test_a_sample_is_seeded_and_of_the_asked_size():
    first = weak_pairs(corpus(), "title", count=10, seed=3)
    assert len(first["query"]) == 10
    assert weak_pairs(corpus(), "title", count=10, seed=3) == first
    assert weak_pairs(corpus(), "title", count=10, seed=4) != first
    assert len(weak_pairs(corpus(), "ict", count=10, seed=3)["query"]) == 10


class Poisoned(dict):
    """Any read of it fails the test: weak pairs must not look at queries or qrels."""

    def __getitem__(self, key):
        raise AssertionError(f"read {key!r}")

    def __iter__(self):
        raise AssertionError("iterated")

    def __len__(self):
        raise AssertionError("len")

    def keys(self):
        raise AssertionError("keys")

    def items(self):
        raise AssertionError("items")

    def values(self):
        raise AssertionError("values")


@pytest.mark.parametrize("kind", ["title", "ict"])
def test_weak_pairs_read_no_query_and_no_qrels(kind, tmp_path):
    from tapt.data.relevance import BEIR

    dataset = BeirDataset(corpus=corpus(), queries=Poisoned(),
                          qrels=Poisoned(), rule=BEIR)
    pairs, _ = weak_pairs_for(dataset, kind, folder=tmp_path, count=5, seed=0)
    expected = weak_pairs(corpus(), kind, count=5, seed=0)
    assert pairs.to_dict() == {"query": expected["query"], "positive": expected["positive"]}


def test_a_decontaminated_training_makes_no_weak_pair_of_a_held_out_passage(tmp_path):
    from dataclasses import replace

    from tapt.data.relevance import BEIR

    whole = corpus()
    held = frozenset(list(whole)[:4])
    dataset = BeirDataset(corpus=whole, queries={}, qrels={}, rule=BEIR)
    pairs, _ = weak_pairs_for(replace(dataset, held_out=held), "title", folder=tmp_path, seed=0)
    texts = {whole[doc].text for doc in held}
    assert pairs.num_rows == len(whole) - len(held)
    assert not set(pairs["positive"]) & texts


def test_the_training_pairs_are_streamed_to_arrow_files_in_the_folder(tmp_path):
    """Memory-mapped from files under the scratch folder (not an in-memory table), the
    same pairs as the in-memory lists, and each build new: a second build in the same
    folder from another corpus serves that corpus's pairs, not the first build's."""
    first = weak_pairs_dataset(corpus(30), "title", folder=tmp_path, seed=2)
    assert first.cache_files and all(Path(f["filename"]).is_relative_to(tmp_path)
                                     for f in first.cache_files)
    assert first["query"] == weak_pairs(corpus(30), "title", seed=2)["query"]
    other = {f"x{i}": Passage(text=f"Other body {i}.", title=f"Other {i}") for i in range(4)}
    second = weak_pairs_dataset(other, "title", folder=tmp_path, seed=2)
    assert second["query"] == [f"Other {i}" for i in range(4)]
    with pytest.raises(ValueError, match="no passage gives a weak pair"):
        weak_pairs_dataset({"x": Passage(text="t", title="")}, "title", folder=tmp_path)


def test_mixed_rows_keep_the_labelled_rows_and_add_the_weak_dataset():
    from datasets import Dataset, DatasetDict

    labelled = Dataset.from_dict({"query": ["q"], "positive": ["p"], "negative": ["n"]})
    mixed = with_weak_pairs(labelled, weak_pairs(corpus(3), "title"))
    assert isinstance(mixed, DatasetDict) and set(mixed) == {"labelled", "weak_pairs"}
    assert mixed["labelled"].to_dict() == labelled.to_dict()
    assert mixed["weak_pairs"]["query"] == ["Title 0", "Title 1", "Title 2"]
    with pytest.raises(ValueError, match="no passage gives a weak pair"):
        with_weak_pairs(labelled, weak_pairs({"x": Passage(text="t", title="")}, "title"))


def test_building_the_pairs_never_hashes_the_corpus(tmp_path, monkeypatch):
    """datasets hashes a generator's arguments (with dill: the whole corpus) unless given a
    fingerprint; only strings may reach its hasher."""
    import datasets.fingerprint

    hashed = []
    original = datasets.fingerprint.Hasher.hash

    def recording(value):
        hashed.append(type(value).__name__)
        return original(value)
    monkeypatch.setattr(datasets.fingerprint.Hasher, "hash", staticmethod(recording))
    weak_pairs_dataset(corpus(5), "title", folder=tmp_path)
    assert hashed and set(hashed) == {"str"}


def test_the_size_estimate_scales_the_sample_to_the_pairs_made():
    from tapt.data.weak_pairs import ROW_OVERHEAD, weak_pairs_bytes

    passages = {f"p{i}": Passage(text="é" * 99, title="t") for i in range(3000)}
    per_pair = 1 + 2 * 99 + ROW_OVERHEAD  # UTF-8 bytes: 'é' is two
    assert weak_pairs_bytes(passages, "title") == 3000 * per_pair
    assert weak_pairs_bytes(passages, "title", count=800) == 800 * per_pair
    assert weak_pairs_bytes({}, "title") == 0


def test_the_size_estimate_counts_only_passages_that_give_a_pair():
    from tapt.data.weak_pairs import ROW_OVERHEAD, weak_pairs_bytes

    # 500 passages (all sampled) of different lengths; only the even ones have a title
    passages = {f"p{i}": Passage(text="x" * (10 + i), title="T" if i % 2 == 0 else "")
                for i in range(500)}
    titled = [i for i in range(500) if i % 2 == 0]
    assert weak_pairs_bytes(passages, "title") == sum(1 + 10 + i for i in titled) \
        + ROW_OVERHEAD * len(titled)
    no_sentences = {f"p{i}": Passage(text="one short line", title="T") for i in range(50)}
    assert weak_pairs_bytes(no_sentences, "ict") == 0  # so the clearer NO_PAIR error wins


def test_the_size_estimate_covers_the_arrow_files_written(tmp_path):
    from tapt.data.weak_pairs import weak_pairs_bytes

    text = " ".join(f"Sentence {k} of this passage says a little." for k in range(6))
    passages = {f"p{i}": Passage(text=text, title=f"Title {i}") for i in range(3000)}
    for kind in ("title", "ict"):
        folder = tmp_path / kind
        assert len(weak_pairs_dataset(passages, kind, folder=folder)) == 3000
        written = sum(path.stat().st_size for path in folder.rglob("*.arrow"))
        estimate = weak_pairs_bytes(passages, kind)
        assert written <= estimate <= 1.5 * written, (kind, written, estimate)


def test_a_disk_without_room_for_the_pairs_stops_before_writing(tmp_path, monkeypatch):
    import shutil
    from collections import namedtuple

    from tapt.util.files import DiskSpaceError

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda _: usage(10**9, 10**9 - 5000, 5000))
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    passages = {f"p{i}": Passage(text="x" * 100, title="Title") for i in range(20)}
    with pytest.raises(DiskSpaceError) as caught:  # 2 processes x 20 x 121 B > 5000 B
        weak_pairs_dataset(passages, "title", folder=tmp_path)
    message = str(caught.value)
    assert str(tmp_path) in message and "2 processes" in message
    assert "TAPT_CACHE_DIR" in message and list(tmp_path.iterdir()) == []
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")  # 2,420 B fit
    assert len(weak_pairs_dataset(passages, "title", folder=tmp_path)) == 20


def test_max_pairs_are_made_whenever_the_corpus_has_them_and_a_shortfall_is_said(
        tmp_path, caplog):
    """data.weak_pairs_max N gives N pairs when N passages give one, however sparse they
    are (10 of 40 here); when fewer do, the warning and the record say how many and why."""
    from tapt.data.relevance import BEIR

    sparse = {f"p{i}": Passage(text=(f"First {i}. Second {i}. Third {i}." if i % 4 == 0
                                     else f"Only one sentence {i}."), title="")
              for i in range(40)}
    for seed in range(5):
        assert len(weak_pairs(sparse, "ict", count=8, seed=seed)["query"]) == 8
    dataset = BeirDataset(corpus=sparse, queries={}, qrels={}, rule=BEIR)
    with caplog.at_level("WARNING", logger="tapt.data.weak_pairs"):
        pairs, record = weak_pairs_for(dataset, "ict", folder=tmp_path, count=25, seed=0)
    assert pairs.num_rows == record["made"] == 10
    assert record == {"kind": "ict", "asked": 25, "made": 10, "seed": 0, "passages": 40,
                      "excluded_passages": 0}
    assert "data.weak_pairs_max 25: 10 ict pairs made" in caplog.text
    assert "3 sentences or more" in caplog.text
