"""Seeded sub-corpora: every judged passage of the split plus sampled distractors."""

from __future__ import annotations

import pytest

from tapt.data.beir import BeirDataset, Passage, load_beir_folder
from tapt.data.subcorpus import subcorpus_ids

DEV = {"q1": {"p03": 3, "p10": 2, "p41": 1}, "q2": {"p07": 3, "p10": 2}}
TEST = {"q3": {"p00": 3, "p22": 2}}
NUM_PASSAGES = 60
JUDGED_DEV = {"p03", "p10", "p41", "p07"}


def make_dataset(order: list[str] | None = None) -> BeirDataset:
    ids = order or [f"p{i:02d}" for i in range(NUM_PASSAGES)]
    corpus = {doc_id: Passage(text=f"passage {doc_id}") for doc_id in ids}
    queries = {"q1": "one", "q2": "two", "q3": "three"}
    return BeirDataset(corpus=corpus, queries=queries, qrels={"dev": DEV, "test": TEST},
                       source="mem")


@pytest.fixture
def dataset() -> BeirDataset:
    return make_dataset()


def test_neither_option_gives_whole_corpus(dataset):
    assert subcorpus_ids(dataset, "dev") == list(dataset.corpus)


@pytest.mark.parametrize("seed", [0, 1, 7, 123])
@pytest.mark.parametrize("count", [0, 1, 5, 20])
def test_distractor_count(dataset, seed, count):
    ids = subcorpus_ids(dataset, "dev", distractors=count, seed=seed)
    assert JUDGED_DEV <= set(ids)
    assert len(ids) == len(set(ids)) == len(JUDGED_DEV) + count
    # the result keeps corpus order
    assert ids == [doc_id for doc_id in dataset.corpus if doc_id in set(ids)]


@pytest.mark.parametrize("fraction,expected", [
    (0.0, 0), (0.25, 14), (0.5, 28), (1.0, 56),
])
def test_distractor_fraction(dataset, fraction, expected):
    # 60 passages - 4 judged in dev = 56 distractors; 0.25 * 56 = 14, 0.5 * 56 = 28
    ids = subcorpus_ids(dataset, "dev", fraction=fraction, seed=3)
    assert JUDGED_DEV <= set(ids)
    assert len(ids) - len(JUDGED_DEV) == expected


def test_judged_passages_of_the_requested_split_only(dataset):
    ids = subcorpus_ids(dataset, "test", distractors=0)
    assert ids == ["p00", "p22"]
    assert set(subcorpus_ids(dataset, "dev", distractors=0)) == JUDGED_DEV


def test_more_distractors_than_available_gives_everything(dataset):
    assert subcorpus_ids(dataset, "dev", distractors=10_000) == list(dataset.corpus)


def test_deterministic_per_seed_and_different_across_seeds(dataset):
    first = subcorpus_ids(dataset, "dev", distractors=10, seed=42)
    assert subcorpus_ids(dataset, "dev", distractors=10, seed=42) == first
    assert subcorpus_ids(make_dataset(), "dev", distractors=10, seed=42) == first
    samples = {tuple(subcorpus_ids(dataset, "dev", distractors=10, seed=seed))
               for seed in range(5)}
    assert len(samples) == 5
    fraction = subcorpus_ids(dataset, "dev", fraction=0.2, seed=1)
    assert fraction != subcorpus_ids(dataset, "dev", fraction=0.2, seed=2)
    assert fraction == subcorpus_ids(dataset, "dev", fraction=0.2, seed=1)


def test_sample_does_not_depend_on_corpus_order(dataset):
    shuffled = make_dataset(list(reversed(list(dataset.corpus))))
    assert set(subcorpus_ids(shuffled, "dev", distractors=10, seed=5)) == \
        set(subcorpus_ids(dataset, "dev", distractors=10, seed=5))


@pytest.mark.parametrize("fraction", [-0.1, 1.01, 2.0])
def test_fraction_out_of_range(dataset, fraction):
    with pytest.raises(ValueError, match="fraction must be in"):
        subcorpus_ids(dataset, "dev", fraction=fraction)


def test_both_options_rejected(dataset):
    with pytest.raises(ValueError, match="not both"):
        subcorpus_ids(dataset, "dev", distractors=3, fraction=0.1)


def test_negative_distractors_rejected(dataset):
    with pytest.raises(ValueError, match="distractors must be >= 0"):
        subcorpus_ids(dataset, "dev", distractors=-1)


def test_tiny_folder(beir_folder):
    tiny = load_beir_folder(beir_folder)
    # dev judges d5, d4, d1; 3 distractors remain (d2, d3, d6)
    ids = subcorpus_ids(tiny, "dev", distractors=1, seed=0)
    assert {"d1", "d4", "d5"} <= set(ids) and len(ids) == 4
    assert subcorpus_ids(tiny, "dev", fraction=1.0) == list(tiny.corpus)
