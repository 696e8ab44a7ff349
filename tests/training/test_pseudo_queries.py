"""Pseudo-queries from the corpus (``tapt pseudo``) and training on them
(``data.pseudo_queries``): labels from the teacher's ranking, no query or judgment read,
the file read back checked, rows kept off passages training must not see."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tapt.cli.main import main
from tapt.data.beir import DataError, load_beir_folder
from tapt.recipe import load_recipe
from tapt.training.contrastive import train


def corpus_only(source: Path, target: Path) -> Path:
    """A copy of ``source`` with its corpus alone: queries.jsonl and qrels/ are gone."""
    target.mkdir(parents=True)
    shutil.copyfile(source / "corpus.jsonl", target / "corpus.jsonl")
    return target


def rows_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def bm25_top(corpus: dict, query: str) -> tuple[str, float]:
    """BM25's first passage for ``query`` over ``corpus`` (bm25s, as tapt bm25 ranks)."""
    from tapt.retrieval.bm25 import BM25Retriever

    ids = list(corpus)
    run = BM25Retriever(top_k=1, progress=False).retrieve(
        ids, [corpus[i].as_text() for i in ids], ["q"], [query]).run
    return max(run["q"].items(), key=lambda item: (item[1], item[0]))


def test_pseudo_rows_are_labelled_by_bm25_without_reading_queries_or_qrels(tiny_beir_path,
                                                                            tmp_path):
    """Every row's positive is BM25's first passage for its query over the whole corpus,
    with BM25's score; its negatives come from the asked rank window; the data folder has
    no queries.jsonl and no qrels/ (nothing of them can be read)."""
    data = corpus_only(tiny_beir_path, tmp_path / "data")
    output = tmp_path / "pseudo.jsonl"
    code = main(["pseudo", "--data", str(data), "--teacher", "bm25", "--output", str(output),
                 "--min-words", "3", "--depth", "10",
                 "--negatives-from", "4", "--negatives-to", "8", "--negatives", "2", "--quiet"])
    assert code == 0
    rows = rows_of(output)
    corpus = load_beir_folder(tiny_beir_path, ["train"]).corpus
    assert len(rows) == len(corpus)  # one sentence of every passage
    for row in rows:
        top, score = bm25_top(corpus, row["query"])
        assert row["positives"][0] == {"id": top, "rank": 1, "score": round(score, 6)}
        assert row["query"] in corpus[row["source"]].text
        assert all(4 <= negative["rank"] <= 8 for negative in row["negatives"])
        assert len(row["negatives"]) <= 2  # BM25 ranks only passages sharing a word
    assert any(len(row["negatives"]) == 2 for row in rows)
    record = json.loads((tmp_path / "pseudo.jsonl.digest.json").read_text())
    assert record["kind"] == "pseudo queries" and record["rows"] == len(rows)


def test_dropping_the_source_labels_with_other_passages(tiny_beir_path, tmp_path):
    output = tmp_path / "pseudo.jsonl"
    assert main(["pseudo", "--data", str(tiny_beir_path), "--teacher", "bm25", "--output",
                 str(output), "--source", "drop", "--negatives", "0", "--quiet"]) == 0
    rows = rows_of(output)
    assert rows and all(row["positives"][0]["id"] != row["source"] for row in rows)


def test_the_hybrid_teacher_ranks_as_tapt_eval_fuses(tiny_beir_path, tiny_bert_path, tmp_path):
    """With --hybrid bm25 the row's positive is the fused ranking's first passage (the
    same fusion tapt eval --hybrid uses), not BM25's alone where the two differ."""
    from tapt.encoders.factory import ModelOptions, open_encoder
    from tapt.retrieval.retriever_factory import HybridOptions, build_retriever

    output = tmp_path / "pseudo.jsonl"
    assert main(["pseudo", "--data", str(tiny_beir_path), "--teacher", str(tiny_bert_path),
                 "--hybrid", "bm25", "--fusion", "linear", "--alpha", "0.7", "--negatives",
                 "0", "--min-words", "3", "--no-cache", "--quiet", "--output",
                 str(output)]) == 0
    rows = rows_of(output)
    corpus = load_beir_folder(tiny_beir_path, ["train"]).corpus
    ids = list(corpus)
    encoder = open_encoder(str(tiny_bert_path), ModelOptions(device="cpu", dtype="float32"))
    retriever = build_retriever(encoder, top_k=1, progress=False,
                                hybrid=HybridOptions(fusion="linear", alpha=0.7, depth=50))
    run = retriever.retrieve(ids, [corpus[i].as_text() for i in ids],
                             [row["query_id"] for row in rows],
                             [row["query"] for row in rows]).run
    for row in rows:
        expected = max(run[row["query_id"]].items(), key=lambda item: (item[1], item[0]))
        assert row["positives"][0]["id"] == expected[0]
        assert row["teacher"].endswith("+bm25-linear")


@pytest.fixture
def pseudo_file(tiny_beir_path, tmp_path) -> Path:
    output = tmp_path / "pseudo.jsonl"
    assert main(["pseudo", "--data", str(tiny_beir_path), "--teacher", "bm25", "--output",
                 str(output), "--min-words", "3", "--depth", "8", "--negatives-from", "2",
                 "--negatives-to", "8",
                 "--negatives", "2", "--quiet"]) == 0
    return output


def test_a_changed_or_foreign_file_is_refused(pseudo_file, tiny_beir_path, synth_path):
    from tapt.data.pseudo_rows import read_pseudo_file

    dataset = load_beir_folder(tiny_beir_path, ["train"])
    assert read_pseudo_file(pseudo_file, dataset).rows
    with pytest.raises(DataError, match="another corpus"):
        read_pseudo_file(pseudo_file, load_beir_folder(synth_path, ["train"]))
    lines = pseudo_file.read_text().splitlines()
    row = json.loads(lines[1])
    row["positives"][0]["id"] = "no-such-passage"
    pseudo_file.write_text("\n".join([lines[0], json.dumps(row), *lines[2:]]) + "\n")
    with pytest.raises(DataError, match="since tapt pseudo wrote it"):
        read_pseudo_file(pseudo_file, dataset)
    Path(f"{pseudo_file}.digest.json").unlink()  # unchecked: every line is still checked
    with pytest.raises(DataError, match=r"pseudo.jsonl:2: field .positives\[0\]\.id."):
        read_pseudo_file(pseudo_file, dataset)


def train_batches(monkeypatch) -> list[list[str]]:
    from tapt.training import nonfinite

    batches: list[list[str]] = []
    call = nonfinite.QueryIdsCollator.__call__

    def recording(self, features):
        batches.append([row["query"] for row in features])
        return call(self, features)
    monkeypatch.setattr(nonfinite.QueryIdsCollator, "__call__", recording)
    return batches


def test_pseudo_rows_train_beside_the_labelled_ones(make_recipe, tiny_beir_path, pseudo_file,
                                                    monkeypatch, tmp_path):
    """Mixed proportionally, a batch holds pseudo-queries or labelled queries, never both;
    with pseudo_mix only, every batch is pseudo-queries. What was used is recorded."""
    monkeypatch.setenv("TAPT_CACHE_DIR", str(tmp_path / "cache"))
    pseudo = {row["query"] for row in rows_of(pseudo_file)}
    batches = train_batches(monkeypatch)
    recipe_file, _ = make_recipe(
        "mixed", data_path=tiny_beir_path,
        data={"pseudo_queries": str(pseudo_file), "pseudo_negatives": 2,
              "dev_distractors": 5},
        training={"epochs": 1, "max_steps": -1, "eval_steps": 50, "per_device_batch_size": 3})
    result = train(load_recipe(recipe_file))
    mixed = [batch for batch in batches if set(batch) & pseudo]
    assert mixed and len(mixed) < len(batches)
    assert all(set(batch) <= pseudo for batch in mixed)
    record = json.loads((result.run_dir / "results.json").read_text())["pseudo_queries"]
    assert record["teacher"] == "bm25" and record["mix"] == "proportional"
    assert record["rows"] == record["rows_in_file"] - record["left_out_short_negatives"]
    assert "pseudo-queries (unlabelled passages)" in (result.final_dir / "README.md").read_text()

    batches.clear()
    recipe_file, _ = make_recipe(
        "only", data_path=tiny_beir_path,
        data={"pseudo_queries": str(pseudo_file), "pseudo_mix": "only",
              "dev_distractors": 5},
        training={"epochs": 1, "max_steps": -1, "eval_steps": 50, "per_device_batch_size": 3})
    train(load_recipe(recipe_file))
    assert batches and all(set(batch) <= pseudo for batch in batches)


def test_unseen_leaves_out_rows_touching_held_out_passages(tiny_beir_path, pseudo_file,
                                                           tmp_path):
    """Under decontamination, ``unseen`` keeps no row whose passages are relevant in test;
    ``all`` keeps them and says how many such passages training reads."""
    from tapt.data.beir import BeirDataset
    from tapt.data.pseudo_rows import pseudo_rows_dataset, read_pseudo_file

    dataset = load_beir_folder(tiny_beir_path, ["train", "test"])
    held = frozenset(doc for judged in dataset.split("test").values() for doc in judged
                     if judged[doc] >= 3)
    dataset = BeirDataset(corpus=dataset.corpus, queries=dataset.queries, qrels=dataset.qrels,
                          source=dataset.source, held_out=held)
    file = read_pseudo_file(pseudo_file, dataset)
    touching = [row for row in file.rows if held & set(row.passages)]
    assert touching  # the tiny corpus's test anchors are pseudo-query sources too
    _, unseen = pseudo_rows_dataset(file, dataset, folder=tmp_path / "a", negatives=0)
    assert unseen["left_out_touching_unseen"] == len(touching)
    assert unseen["held_out_passages_read"] == 0
    rows, everything = pseudo_rows_dataset(file, dataset, folder=tmp_path / "b", negatives=0,
                                           passages="all")
    assert everything["rows"] == len(file.rows) == len(rows)
    assert everything["held_out_passages_read"] > 0


def test_all_still_leaves_out_rows_touching_the_carved_dev(tiny_beir_path, pseudo_file,
                                                          tmp_path):
    """``all`` reads the held-out test passages, never a carved dev's: dev picks the
    checkpoint, so it keeps measuring passages training never saw."""
    from tapt.data.pseudo_rows import pseudo_rows_dataset, read_pseudo_file
    from tapt.data.splits import carve_dev, dev_passages

    dataset = carve_dev(load_beir_folder(tiny_beir_path, ["train", "test"]), size=0.3, seed=0)
    dev = dev_passages(dataset, "train")
    file = read_pseudo_file(pseudo_file, dataset)
    touching_dev = [row for row in file.rows if dev & set(row.passages)]
    assert dev and touching_dev and len(touching_dev) < len(file.rows)
    rows, record = pseudo_rows_dataset(file, dataset, folder=tmp_path / "a", negatives=0,
                                       passages="all")
    assert record["dev_passages_read"] == 0
    assert record["left_out_touching_unseen"] == len(touching_dev)
    assert len(rows) == len(file.rows) - len(touching_dev)


def test_distillation_labels_are_the_teachers_scores(tiny_beir_path, pseudo_file, tmp_path):
    from tapt.data.pseudo_rows import pseudo_rows_dataset, read_pseudo_file

    dataset = load_beir_folder(tiny_beir_path, ["train"])
    file = read_pseudo_file(pseudo_file, dataset)
    rows, _ = pseudo_rows_dataset(file, dataset, folder=tmp_path / "s", negatives=2,
                                  label="scores")
    by_query = {row.query: row for row in file.rows}
    for item in rows:
        row = by_query[item["query"]]
        top = max(abs(score) for score in row.scores[:3])
        assert item["label"] == pytest.approx([score / top for score in row.scores[:3]])
    margins, _ = pseudo_rows_dataset(file, dataset, folder=tmp_path / "m", negatives=2,
                                     label="margins")
    first = by_query[margins[0]["query"]]
    top = max(abs(score) for score in first.scores[:3])
    assert margins[0]["label"] == pytest.approx(
        [(first.scores[0] - score) / top for score in first.scores[1:3]])
