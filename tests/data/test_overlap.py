"""Train/test overlap made visible (seen and novel queries), decontamination, and the group
carve on real data (tapt.data.overlap, tapt data stats, train_overlap in results)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tapt.cli import main, terminal
from tapt.data.beir import BeirDataset, DataError, Passage, write_beir
from tapt.data.overlap import decontaminate, relevance_groups, split_overlap
from tapt.data.relevance import BEIR, FORMBENCH
from tapt.util.redaction import RedactingConsole

SCIFACT = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "scifact"


@pytest.fixture
def wide(monkeypatch):
    monkeypatch.setattr(terminal, "console", RedactingConsole(width=10_000, color_system=None))


def scifact() -> Path:
    if not (SCIFACT / "corpus.jsonl").is_file():
        pytest.skip(f"{SCIFACT} is not in this checkout (../shared/data/scifact)")
    return SCIFACT


def small() -> BeirDataset:
    """train: t1 -> a, t2 -> b (+ hard negative c), t3 -> b, d; test: s1 -> a (seen),
    s2 -> c (c is only a train hard negative: novel), s3 -> e (novel)."""
    corpus = {doc: Passage(text=f"passage {doc}") for doc in "abcde"}
    train = {"t1": {"a": 3}, "t2": {"b": 3, "c": 2}, "t3": {"b": 3, "d": 3}}
    test = {"s1": {"a": 3, "e": 1}, "s2": {"c": 3}, "s3": {"e": 3}}
    queries = {q: f"query {q}" for q in [*train, *test]}
    return BeirDataset(corpus=corpus, queries=queries, qrels={"train": train, "test": test},
                       rule=FORMBENCH)


def test_seen_means_a_relevant_passage_is_a_training_positive():
    overlap = split_overlap(small(), "test")
    assert overlap.seen == {"s1"} and overlap.novel == {"s2", "s3"}


def test_decontamination_drops_judgments_and_emptied_queries_and_records_it():
    data = small()
    clean = decontaminate(data, ["test"])
    # a, c, e are relevant in test: t1 loses its only anchor, t2 its hard negative
    assert clean.split("train") == {"t2": {"b": 3}, "t3": {"b": 3, "d": 3}}
    assert clean.decontaminated["train_queries"] == [3, 2]
    assert clean.decontaminated["judgments"] == [5, 3]
    assert clean.held_out == {"a", "c", "e"}
    assert split_overlap(clean, "test").counts() == {"seen": 0, "novel": 3}
    assert data.split("train")["t1"] == {"a": 3}  # the input is not changed
    assert "test" in clean.qrels
    assert "test" not in decontaminate(data, ["test"], keep=()).qrels


def test_decontamination_refuses_what_would_leave_nothing_or_itself():
    data = small()
    with pytest.raises(DataError, match="against itself"):
        decontaminate(data, ["train"])
    with pytest.raises(DataError, match="not loaded"):
        decontaminate(data, ["dev"])
    data.qrels["test"]["s4"] = {"b": 3, "d": 3}
    with pytest.raises(DataError, match="leaves no train query"):
        decontaminate(data, ["test"])


def test_groups_join_queries_through_shared_passages_only():
    qrels = {"q1": {"a": 1}, "q2": {"a": 1, "b": 1}, "q3": {"b": 1}, "q4": {"c": 1},
             "q5": {"c": 0}}
    assert relevance_groups(qrels, BEIR) == [["q1", "q2", "q3"], ["q4"], ["q5"]]


def test_stats_on_scifact_report_seen_and_novel(capsys, wide):
    folder = scifact()
    assert main(["data", "stats", str(folder)]) == 0
    out = capsys.readouterr().out
    assert _row(out, "test") == ["300", "196", "104"]


def _row(out: str, split: str) -> list[str]:
    """The numbers of ``split``'s row in the train-overlap table."""
    table = out[out.index("train overlap"):]
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip("│ ").split("│")]
        if cells and cells[0] == split:
            return [c.replace(",", "") for c in cells[1:]]
    raise AssertionError(f"no {split} row in {table}")


def test_stats_decontaminated_leave_550_claims_624_pairs_and_nothing_seen(capsys, wide):
    folder = scifact()
    assert main(["data", "stats", str(folder), "--decontaminate", "test"]) == 0
    out = capsys.readouterr().out
    assert "809 -> 550 queries, 919 -> 624 judgments" in out
    assert _row(out, "test") == ["300", "0", "300"]


def test_stats_show_the_group_carve_with_no_dev_passage_trained_on(capsys, wide):
    folder = scifact()
    assert main(["data", "stats", str(folder), "--dev-from-train", "100"]) == 0
    out = capsys.readouterr().out
    assert "dev carved from train by group (seed 0): 100 queries in" in out
    assert "0 dev queries have a relevant passage that is a training positive" in out
    assert _row(out, "dev")[1] == "0"
    assert main(["data", "stats", str(folder), "--dev-from-train", "100",
                 "--dev-carve", "query"]) == 0
    leaky = capsys.readouterr().out
    assert int(_row(leaky, "dev")[1]) > 0  # why it is not the default


def test_a_bm25_result_records_the_overlap_with_metrics_on_each_part(tmp_path, wide):
    folder = scifact()
    output = tmp_path / "bm25.json"
    assert main(["bm25", "--data", str(folder), "--split", "test", "--output", str(output),
                 "--quiet"]) == 0
    result = json.loads(output.read_text())
    overlap = result["train_overlap"]
    assert (overlap["split"], overlap["train_split"]) == ("test", "train")
    assert (overlap["seen"], overlap["novel"]) == (196, 104)
    assert len(overlap["seen_query_ids"]) == 196
    assert set(overlap["seen_query_ids"]) <= set(result["per_query"])
    for key in ("binary_ndcg@10", "recall@100"):  # the parts make up the whole
        parts = sum(overlap["metrics"][p][key] * overlap["counts"][p][key]
                    for p in ("seen", "novel"))
        assert parts / 300 == pytest.approx(result[key])
    decontaminated = tmp_path / "clean.json"
    assert main(["bm25", "--data", str(folder), "--split", "test", "--output",
                 str(decontaminated), "--quiet", "--decontaminate", "test"]) == 0
    clean = json.loads(decontaminated.read_text())["train_overlap"]
    assert (clean["seen"], clean["novel"], clean["decontaminated"]) == (0, 300, ["test"])


def test_a_result_without_a_train_split_has_no_overlap(tiny_beir_path, tmp_path, wide):
    import shutil

    folder = tmp_path / "no-train"
    shutil.copytree(tiny_beir_path, folder)
    (folder / "qrels" / "train.tsv").unlink()
    output = tmp_path / "r.json"
    assert main(["bm25", "--data", str(folder), "--split", "test", "--output", str(output),
                 "--quiet"]) == 0
    assert "train_overlap" not in json.loads(output.read_text())
    with_train = tmp_path / "t.json"
    assert main(["bm25", "--data", str(tiny_beir_path), "--split", "test", "--output",
                 str(with_train), "--quiet"]) == 0
    assert "train_overlap" in json.loads(with_train.read_text())


def test_mined_negatives_must_share_the_training_decontamination(tmp_path, wide):
    """A file mined from the whole train split is refused for a decontaminated one (its
    queries and negatives may be what was held out), and the other way round."""
    from tapt.data.mined import read_mined
    from tapt.data.sources import load_data

    folder = tmp_path / "data"
    data = small()
    write_beir(folder, data.corpus, data.queries, data.qrels)
    whole = tmp_path / "whole.jsonl"
    clean = tmp_path / "clean.jsonl"
    assert main(["mine", "--data", str(folder), "--retriever", "bm25", "--output", str(whole),
                 "--per-query", "1", "--margin", "none", "--quiet"]) == 0
    assert main(["mine", "--data", str(folder), "--retriever", "bm25", "--output", str(clean),
                 "--per-query", "2", "--margin", "none", "--quiet",
                 "--decontaminate", "test"]) == 0
    loaded = load_data(folder, splits=["train", "test"])
    decontaminated = decontaminate(loaded, ["test"])
    with pytest.raises(DataError, match="not decontaminated, used with it decontaminated"):
        read_mined(whole, decontaminated, "train")
    with pytest.raises(DataError, match="decontaminated against test, used with it not"):
        read_mined(clean, loaded, "train")
    mined = read_mined(clean, decontaminated, "train")
    assert set(mined) == {"t2", "t3"}
    negatives = {doc for docs in mined.values() for doc in docs}
    assert not negatives & decontaminated.held_out  # test passages are never mined


def test_a_mined_file_without_its_record_still_cannot_feed_a_held_out_passage(tmp_path):
    """The decontamination check does not rest on the digest record alone: a file made
    by hand (no record) that lists a passage relevant in test is refused, naming the line."""
    from tapt.data.mined import read_mined

    data = decontaminate(small(), ["test"])
    mined = tmp_path / "hand.jsonl"
    mined.write_text(json.dumps({"query_id": "t2", "negatives": [{"id": "d"}]}) + "\n"
                     + json.dumps({"query_id": "t3", "negatives": [{"id": "e"}]}) + "\n")
    with pytest.raises(DataError, match="decontaminated against") as refused:
        read_mined(mined, data, "train")
    assert (refused.value.line, refused.value.field) == (2, "negatives[0].id")


def test_training_leaves_a_carved_dev_passage_out_of_every_negative(tmp_path):
    """A group carve keeps dev's relevant passages out of train's positives; a train
    query's graded negative or mined negative can still be one: both are left out."""
    from tapt.data.mined import read_mined
    from tapt.data.splits import carve_dev, dev_passages

    corpus = {doc: Passage(text=f"passage {doc}") for doc in "abcdefgh"}
    train = {f"t{i}": {doc: 3, "h": 2} for i, doc in enumerate("abcdefg")}  # h: a negative
    train["t7"] = {"h": 3}  # ... and t7's anchor
    data = BeirDataset(corpus=corpus, queries={q: q for q in train}, qrels={"train": train},
                       rule=FORMBENCH)
    carved = None
    for seed in range(50):  # a seed whose dev holds t7 (and so passage h)
        carved = carve_dev(data, size=1, seed=seed)
        if "t7" in carved.split("dev"):
            break
    assert carved is not None and "t7" in carved.split("dev")
    assert dev_passages(carved, "train") == {"h"}
    assert all("h" not in docs for docs in carved.split("train").values())
    mined = tmp_path / "mined.jsonl"
    mined.write_text("".join(json.dumps({"query_id": q, "negatives": [{"id": "h"}]}) + "\n"
                             for q in train))
    assert all(negatives == [] for negatives in read_mined(mined, carved, "train").values())


def test_weak_pairs_leave_a_carved_dev_passage_out(tmp_path):
    from tapt.data.splits import carve_dev
    from tapt.data.weak_pairs import weak_pairs_for

    corpus = {f"p{i}": Passage(text=f"text {i}", title=f"title {i}") for i in range(10)}
    train = {f"q{i}": {f"p{i}": 1} for i in range(10)}
    data = BeirDataset(corpus=corpus, queries={q: q for q in train}, qrels={"train": train},
                       rule=BEIR)
    carved = carve_dev(data, size=3, seed=0)
    held = {doc for docs in carved.split("dev").values() for doc in docs}
    pairs, _ = weak_pairs_for(carved, "title", folder=tmp_path)
    assert pairs.num_rows == 7
    assert not set(pairs["positive"]) & {corpus[doc].text for doc in held}
