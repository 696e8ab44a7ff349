"""Hard-negative mining: what is never mined, what the filters drop, determinism, the
validation of a mined file, and training on K mined negatives per row."""

from __future__ import annotations

import json

import pytest

from tapt.cli import main
from tapt.data.beir import ANCHOR, DataError, load_beir_folder
from tapt.data.mined import read_mined
from tapt.retrieval.mining import MiningSettings, MiningSummary, mine_query, threshold


def mined_lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("retriever", ["bm25", "model"])
def test_an_anchor_is_never_mined(tiny_beir_path, tiny_bert_path, tmp_path, retriever):
    out = tmp_path / "mined.jsonl"
    teacher = "bm25" if retriever == "bm25" else str(tiny_bert_path)
    # Every candidate kept: the anchors would be among them if mining did not exclude them.
    assert main(["mine", "--data", str(tiny_beir_path), "--retriever", teacher, "--output",
                 str(out), "--per-query", "50", "--margin", "none", "--quiet"]) == 0
    qrels = load_beir_folder(tiny_beir_path, ["train"]).split("train")
    records = mined_lines(out)
    assert sorted(r["query_id"] for r in records) == sorted(qrels)
    for record in records:
        judged = qrels[record["query_id"]]
        mined = {n["id"] for n in record["negatives"]}
        assert not mined & set(judged)  # never a judged passage, anchors first
        assert record["retriever"] and record["settings"]["per_query"] == 50
        ranks = [n["rank"] for n in record["negatives"]]
        assert ranks == sorted(ranks) and len(set(ranks)) == len(ranks)
    with_negatives = sum(bool(r["negatives"]) for r in records)
    # The model ranks the whole (40-passage) corpus, anchors included; BM25 only what
    # shares a word with the query.
    assert with_negatives == len(records) if retriever == "model" else with_negatives >= 2


def test_the_margin_drops_candidates_above_the_threshold_and_keeps_those_below():
    scores = {"anchor": 10.0, "too-close": 9.6, "just-below": 9.4, "far": 3.0,
              "hard-negative": 9.0}
    judged = {"anchor": 3, "hard-negative": 2}
    settings = MiningSettings(per_query=5, depth=10, margin=0.05, sampling="top")
    summary = MiningSummary()
    record = mine_query("q", scores, judged, ["anchor"], settings, summary)
    assert threshold(10.0, 0.05) == pytest.approx(9.5)
    assert [n["id"] for n in record["negatives"]] == ["just-below", "far"]
    assert (summary.anchors, summary.judged, summary.above_margin) == (1, 1, 1)
    # Ranks are positions in the teacher's ranking, anchors included.
    assert [n["rank"] for n in record["negatives"]] == [3, 5]
    assert summary.short_queries == 1  # 2 < 5, and the query is kept
    # skip-top drops ranks 1..N whatever their score (here "too-close", rank 2).
    summary = MiningSummary()
    record = mine_query("q", scores, judged, ["anchor"],
                        MiningSettings(per_query=5, depth=10, margin=None, skip_top=2,
                                       sampling="top"), summary)
    assert [n["id"] for n in record["negatives"]] == ["just-below", "far"]
    assert (summary.skipped_top, summary.above_margin) == (1, 0)


def test_the_same_seed_gives_the_same_file(tiny_beir_path, tmp_path):
    outputs = []
    for name, seed in (("a", 1), ("b", 1), ("c", 2)):
        out = tmp_path / f"{name}.jsonl"
        assert main(["mine", "--data", str(tiny_beir_path), "--retriever", "bm25",
                     "--output", str(out), "--per-query", "2", "--margin", "none",
                     "--seed", str(seed), "--quiet"]) == 0
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]
    assert outputs[0] != outputs[2]  # another seed samples other candidates


def test_an_existing_output_is_never_overwritten_without_asking(tiny_beir_path, tmp_path):
    out = tmp_path / "mined.jsonl"
    out.write_text("mine")
    assert main(["mine", "--data", str(tiny_beir_path), "--retriever", "bm25",
                 "--output", str(out), "--quiet"]) == 2
    assert out.read_text() == "mine"


def _good_line(dataset) -> dict:
    query_id = next(iter(dataset.split("train")))
    judged = dataset.split("train")[query_id]
    negative = next(d for d in dataset.corpus if d not in judged)
    return {"query_id": query_id, "negatives": [{"id": negative, "rank": 3, "score": 1.5}]}


BAD_LINES = {
    "malformed JSON": (lambda d, good: "{not json", None),
    "query_id missing": (lambda d, good: {"negatives": []}, "query_id"),
    "unknown query": (lambda d, good: {**good, "query_id": "nope"}, "query_id"),
    "query of another split": (
        lambda d, good: {**good, "query_id": next(iter(d.split("test")))}, "query_id"),
    "negatives not a list": (lambda d, good: {**good, "negatives": "p1"}, "negatives"),
    "unknown passage": (
        lambda d, good: {**good, "negatives": [{"id": "nope"}]}, "negatives[0].id"),
    "an anchor as negative": (
        lambda d, good: {**good, "negatives": [{"id": next(
            doc for doc, grade in d.split("train")[good["query_id"]].items()
            if grade >= ANCHOR)}]}, "negatives[0].id"),
    "NaN score": (
        lambda d, good: {**good, "negatives": [{**good["negatives"][0], "score": "NaN"}]},
        "negatives[0].score"),
}


@pytest.mark.parametrize("case", sorted(BAD_LINES))
def test_each_bad_line_of_a_mined_file_names_file_line_and_field(tiny_beir_path, tmp_path,
                                                                   case):
    dataset = load_beir_folder(tiny_beir_path, ["train", "test"])
    good = _good_line(dataset)
    make, field = BAD_LINES[case]
    bad = make(dataset, good)
    path = tmp_path / "mined.jsonl"
    other = next(q for q in dataset.split("train") if q != good["query_id"])
    path.write_text(json.dumps({"query_id": other, "negatives": []}) + "\n"
                    + (bad if isinstance(bad, str) else json.dumps(bad)) + "\n")
    with pytest.raises(DataError) as caught:
        read_mined(path, dataset, "train")
    message = str(caught.value)
    assert message.startswith(f"{path}:2: "), message
    if field:
        assert f"field '{field}'" in message


def test_a_duplicate_query_is_refused(tiny_beir_path, tmp_path):
    dataset = load_beir_folder(tiny_beir_path, ["train"])
    line = json.dumps(_good_line(dataset))
    path = tmp_path / "mined.jsonl"
    path.write_text(line + "\n" + line + "\n")
    with pytest.raises(DataError, match=r":2: field 'query_id': .*appears twice"):
        read_mined(path, dataset, "train")
