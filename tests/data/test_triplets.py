"""Training rows from graded qrels: (query, anchor, hard negative[, soft negative])."""

from __future__ import annotations

import pytest
from datasets import Dataset, DatasetDict

from tapt.data.beir import BeirDataset, Passage, load_beir_folder
from tapt.data.relevance import BEIR
from tapt.data.triplets import TripletStats, build_rows, build_training_rows


@pytest.fixture
def tiny(beir_folder) -> BeirDataset:
    return load_beir_folder(beir_folder)


def titled(passage: Passage) -> str:
    return passage.title + " " + passage.text


def make_dataset(judged: dict[str, dict[str, int]], titles: bool = True) -> BeirDataset:
    doc_ids = sorted({d for docs in judged.values() for d in docs})
    corpus = {d: Passage(text=f"text of {d}", title=f"Title {d}" if titles else "")
              for d in doc_ids}
    queries = {q: f"question {q}?" for q in judged}
    return BeirDataset(corpus=corpus, queries=queries, qrels={"train": judged}, source="mem")


def test_rows_are_query_positive_negative(tiny, corpus, queries):
    rows, stats = build_rows(tiny)  # the train split by default
    assert rows == [
        {"query": queries["q1"], "positive": titled(corpus["d1"]),
         "negative": titled(corpus["d2"])},
        {"query": queries["q2"], "positive": titled(corpus["d3"]),
         "negative": titled(corpus["d4"])},
    ]
    assert rows[0]["positive"] == ("Epoxy primer The primer uses a bisphenol epoxy binder "
                                   "with zinc phosphate.")
    assert stats == TripletStats(queries=2, rows=2, pairs=0, dropped=0)


def test_other_split(tiny, corpus, queries):
    rows, _ = build_rows(tiny, "dev")
    assert rows == [{"query": queries["q3"], "positive": titled(corpus["d5"]),
                     "negative": titled(corpus["d4"])}]


def test_without_title_passages_are_text_only(tiny, corpus):
    rows, _ = build_rows(tiny, with_title=False)
    assert rows[0]["positive"] == corpus["d1"].text
    assert rows[0]["negative"] == corpus["d2"].text
    table = build_training_rows(tiny, with_title=False)
    assert table["positive"] == [corpus["d1"].text, corpus["d3"].text]


def test_untitled_passage_has_no_leading_space():
    dataset = make_dataset({"q": {"a": 3, "h": 2}}, titles=False)
    rows, _ = build_rows(dataset)
    assert rows == [{"query": "question q?", "positive": "text of a", "negative": "text of h"}]


def test_soft_negative_column(tiny, corpus):
    # q2 of train has no soft negative: dropped under the default policy
    rows, stats = build_rows(tiny, soft_negative=True)
    assert rows == [{"query": tiny.queries["q1"], "positive": titled(corpus["d1"]),
                     "negative": titled(corpus["d2"]), "soft_negative": titled(corpus["d6"])}]
    assert stats == TripletStats(queries=1, rows=1, pairs=0, dropped=1)
    table = build_training_rows(tiny, soft_negative=True)
    assert isinstance(table, Dataset)
    assert table.column_names == ["query", "positive", "negative", "soft_negative"]


def test_soft_negative_with_pair_policy_keeps_shorter_rows(tiny):
    rows, stats = build_rows(tiny, soft_negative=True, missing="pair")
    assert [sorted(r) for r in rows] == [
        sorted(["query", "positive", "negative", "soft_negative"]),
        sorted(["query", "positive", "negative"])]
    assert stats == TripletStats(queries=2, rows=2, pairs=0, dropped=0)
    table = build_training_rows(tiny, soft_negative=True, missing="pair")
    assert isinstance(table, DatasetDict)
    assert set(table) == {"quadruplets", "triplets"}
    assert table["triplets"]["query"] == [tiny.queries["q2"]]


MISSING_HARD = {"qa": {"a1": 3, "h1": 2, "s1": 1},
                "qb": {"a2": 3, "s2": 1},          # no hard negative
                "qc": {"a3": 3, "h3": 2}}


def test_missing_hard_negative_dropped_and_counted():
    dataset = make_dataset(MISSING_HARD)
    rows, stats = build_rows(dataset, missing="drop")
    assert [r["query"] for r in rows] == ["question qa?", "question qc?"]
    assert stats == TripletStats(queries=2, rows=2, pairs=0, dropped=1)
    table = build_training_rows(dataset)
    assert isinstance(table, Dataset) and table.num_rows == 2


def test_missing_hard_negative_kept_as_pair():
    dataset = make_dataset(MISSING_HARD)
    rows, stats = build_rows(dataset, missing="pair")
    assert rows[1] == {"query": "question qb?", "positive": "Title a2 text of a2"}
    assert stats == TripletStats(queries=3, rows=3, pairs=1, dropped=0)
    table = build_training_rows(dataset, missing="pair")
    assert isinstance(table, DatasetDict)
    assert set(table) == {"triplets", "pairs"}
    assert table["pairs"].column_names == ["query", "positive"]
    assert table["pairs"]["query"] == ["question qb?"]
    assert table["triplets"].column_names == ["query", "positive", "negative"]
    assert table["triplets"]["negative"] == ["Title h1 text of h1", "Title h3 text of h3"]


def test_several_anchors_give_one_row_each_and_negatives_cycle():
    dataset = make_dataset({"q": {"a3": 3, "a1": 3, "a2": 3, "h2": 2, "h1": 2, "s": 1}})
    rows, stats = build_rows(dataset)
    # anchors and hard negatives are taken in id order; negatives cycle h1, h2, h1
    assert [(r["positive"], r["negative"]) for r in rows] == [
        ("Title a1 text of a1", "Title h1 text of h1"),
        ("Title a2 text of a2", "Title h2 text of h2"),
        ("Title a3 text of a3", "Title h1 text of h1"),
    ]
    assert all(r["query"] == "question q?" for r in rows)
    assert stats == TripletStats(queries=1, rows=3, pairs=0, dropped=0)


def test_split_without_usable_rows_raises():
    dataset = make_dataset({"qa": {"a": 3, "s": 1}, "qb": {"b": 3}})
    with pytest.raises(ValueError, match="no training rows.*2 queries dropped"):
        build_rows(dataset)
    with pytest.raises(ValueError, match="no training rows"):
        build_training_rows(dataset)
    rows, stats = build_rows(dataset, missing="pair")
    assert stats.pairs == 2 and len(rows) == 2


def test_unknown_policy_and_split(tiny):
    with pytest.raises(ValueError, match="missing must be"):
        build_rows(tiny, missing="skip")
    with pytest.raises(KeyError):
        build_rows(tiny, "validation")


def test_mined_negatives_follow_the_graded_ones_and_short_rows_are_kept(tiny):
    from tapt.data.triplets import build_rows, build_training_rows

    qrels = tiny.split("train")
    first, second = list(qrels)[:2]
    free = {q: [d for d in tiny.corpus if d not in qrels[q]] for q in (first, second)}
    mined = {first: free[first][:3], second: free[second][:1]}
    assert len(mined[first]) >= 2
    rows, stats = build_rows(tiny, "train", mined=mined, mined_per_row=2)
    by_query = {row["query"]: row for row in rows}
    row = by_query[tiny.queries[first]]
    assert list(row)[:3] == ["query", "positive", "negative"]
    assert [row["mined_1"], row["mined_2"]] == [tiny.corpus[d].as_text()
                                                for d in mined[first][:2]]
    assert "mined_2" not in by_query[tiny.queries[second]]  # one mined: a shorter row, kept
    assert stats.short_mined == len(rows) - 1
    table = build_training_rows(tiny, "train", mined=mined, mined_per_row=2)
    widths = sorted(len(part.column_names) for part in table.values())
    assert widths == [4, 5]  # one mined negative: a row of 4 columns, not dropped


def test_binary_qrels_with_mined_negatives_drop_a_query_without_any():
    """On binary qrels mined negatives are a row's only negatives: ``drop`` leaves out a
    query that got none (a distillation row needs one), ``pair`` keeps it as a pair."""
    judged = {"q1": {"d1": 1}, "q2": {"d2": 1}, "q3": {"d3": 1}}
    dataset = BeirDataset(corpus={d: Passage(text=f"text of {d}") for d in ("d1", "d2", "d3",
                                                                             "d4", "d5")},
                          queries={q: f"question {q}?" for q in judged},
                          qrels={"train": judged}, source="mem", rule=BEIR)
    mined = {"q1": ["d4", "d5"], "q2": ["d5"], "q3": []}
    rows, stats = build_rows(dataset, mined=mined, mined_per_row=2, missing="drop")
    assert [row["query"] for row in rows] == ["question q1?", "question q2?"]
    assert stats.dropped == 1 and stats.short_mined == 1
    rows, stats = build_rows(dataset, mined=mined, mined_per_row=2, missing="pair")
    assert len(rows) == 3 and stats.dropped == 0 and stats.pairs == 1
    rows, stats = build_rows(dataset, missing="drop")  # nothing mined: pairs, as before
    assert len(rows) == 3 and stats.dropped == 0
