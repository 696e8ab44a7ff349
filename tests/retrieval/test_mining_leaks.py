"""Mining never turns a query's relevant passage into its negative: not under its own id
(any relevant grade), not as a copy of its text under another id, not above the margin of
its weakest positive; ``exclude`` keeps passages out of every query's negatives; and
``read_mined`` refuses a file that lists such a passage (tapt.retrieval.mining,
tapt.data.mined)."""

from __future__ import annotations

import json

import pytest

from tapt.data.beir import DataError, Passage, load_beir_folder, write_beir
from tapt.data.mined import read_mined
from tapt.retrieval.mining import MiningSettings, MiningSummary, mine, mine_query, threshold
from tapt.retrieval.retriever_factory import build_retriever

QUERY = "q00"


@pytest.fixture(scope="module")
def copies_path(tmp_path_factory):
    """The tiny BEIR set where train query q00 has two relevant passages (grade 4, its
    best, and the anchor at 3, its weaker one) and the corpus holds copies of both under
    other ids, plus a passage with the weaker one's text under another title."""
    import tiny_models

    corpus, queries, qrels = tiny_models.tiny_beir_parts()
    weaker = corpus["t00-anchor"]
    corpus["t00-best"] = Passage(text=f"{weaker.text} Also stable at 40 C.", title=weaker.title)
    corpus["copy-of-weaker"] = Passage(text=weaker.text, title=weaker.title)
    corpus["copy-of-best"] = Passage(text=corpus["t00-best"].text, title=weaker.title)
    corpus["retitled-weaker"] = Passage(text=weaker.text, title="Another title")
    qrels["train"][QUERY]["t00-best"] = 4
    folder = tmp_path_factory.mktemp("data") / "copies"
    return write_beir(folder, corpus, queries, qrels)


def mined_ids(records: list[dict], query_id: str = QUERY) -> set[str]:
    return {n["id"] for r in records if r["query_id"] == query_id for n in r["negatives"]}


def mine_bm25(dataset, **options) -> tuple[list[dict], MiningSummary]:
    settings = MiningSettings(per_query=60, depth=60, margin=None, sampling="top")
    return mine(build_retriever("bm25", top_k=60), dataset, "train", settings, **options)


def test_no_relevant_passage_nor_a_copy_of_one_is_mined(copies_path):
    dataset = load_beir_folder(copies_path, ["train"])
    assert dataset.rule.relevant_ids(dataset.split("train")[QUERY]) == ["t00-anchor",
                                                                        "t00-best"]
    records, summary = mine_bm25(dataset)
    mined = mined_ids(records)
    assert not mined & {"t00-anchor", "t00-best"}  # relevant, whatever the grade
    assert not mined & {"copy-of-weaker", "copy-of-best"}  # their texts under other ids
    assert "retitled-weaker" in mined  # encoded with its own title: another text
    assert summary.duplicates == 2
    # Without titles the retitled passage is the weaker positive's text too.
    records, summary = mine_bm25(dataset, with_title=False)
    assert "retitled-weaker" not in mined_ids(records)
    assert summary.duplicates == 3


def test_excluded_passages_are_never_mined_for_any_query(copies_path):
    dataset = load_beir_folder(copies_path, ["train"])
    records, _ = mine_bm25(dataset)
    everywhere = {n["id"] for r in records for n in r["negatives"]}
    excluded = frozenset(sorted(everywhere)[:3])
    records, summary = mine_bm25(dataset, exclude=excluded)
    assert not excluded & {n["id"] for r in records for n in r["negatives"]}
    assert summary.excluded >= len(excluded)


def test_the_margin_is_relative_to_the_weakest_positive():
    """A query's mined negatives are shared by all its rows (one per positive), so a
    candidate must score below (1 - margin) x every positive's score: the weakest one's."""
    scores = {"best": 10.0, "weaker": 6.0, "close-to-weaker": 5.9, "far": 3.0}
    settings = MiningSettings(per_query=5, depth=10, margin=0.05, sampling="top")
    summary = MiningSummary()
    record = mine_query("q", scores, {"best": 4, "weaker": 3}, ["best", "weaker"], settings,
                        summary)
    assert threshold(6.0, 0.05) == pytest.approx(5.7)
    assert [n["id"] for n in record["negatives"]] == ["far"]
    assert summary.above_margin == 1
    assert record["anchor_score"] == 6.0


def test_a_mined_file_listing_a_copy_of_a_positive_is_refused(copies_path, tmp_path):
    dataset = load_beir_folder(copies_path, ["train"])
    path = tmp_path / "mined.jsonl"
    for listed in ("copy-of-weaker", "copy-of-best"):
        path.write_text(json.dumps({"query_id": "q01", "negatives": []}) + "\n"
                        + json.dumps({"query_id": QUERY, "negatives": [
                            {"id": "d0"}, {"id": listed}]}) + "\n")
        with pytest.raises(DataError) as caught:
            read_mined(path, dataset, "train")
        message = str(caught.value)
        assert message.startswith(f"{path}:2: "), message
        assert "field 'negatives[1].id'" in message and listed in message
    path.write_text(json.dumps({"query_id": QUERY, "negatives": [
        {"id": "retitled-weaker"}]}) + "\n")
    assert read_mined(path, dataset, "train") == {QUERY: ["retitled-weaker"]}
    with pytest.raises(DataError, match="field 'negatives\\[0\\].id'"):
        read_mined(path, dataset, "train", with_title=False)


def test_a_mined_file_listing_a_weaker_relevant_passage_is_refused(copies_path, tmp_path):
    dataset = load_beir_folder(copies_path, ["train"])
    path = tmp_path / "mined.jsonl"
    path.write_text(json.dumps({"query_id": QUERY, "negatives": [{"id": "t00-anchor"}]})
                    + "\n")
    with pytest.raises(DataError, match=r":1: field 'negatives\[0\].id'"):
        read_mined(path, dataset, "train")
