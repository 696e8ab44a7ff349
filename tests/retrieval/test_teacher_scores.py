"""Teacher scores (tapt score): the pairs needed, BM25 and model scores, the file's checks."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tapt.cli import main
from tapt.data.beir import DataError, load_beir_folder
from tapt.retrieval.bm25 import BM25Retriever
from tapt.retrieval.dense import DenseRetriever
from tapt.retrieval.teacher_scores import (
    needed_pairs,
    read_teacher_scores,
    score_pairs,
    write_teacher_scores,
)


@pytest.fixture
def dataset(tiny_beir_path):
    return load_beir_folder(tiny_beir_path)


def test_needed_pairs_are_anchors_graded_and_mined_negatives(dataset):
    query_id, judged = next(iter(dataset.split("train").items()))
    mined_id = next(doc_id for doc_id in dataset.corpus if doc_id not in judged)
    pairs = needed_pairs(dataset, "train", {query_id: [mined_id]})
    assert set(pairs) == set(dataset.split("train"))
    assert pairs[query_id] == [*sorted(judged, key=lambda d: -judged[d]), mined_id]


def test_bm25_teacher_scores_equal_bm25_retriever_scores(dataset):
    pairs = needed_pairs(dataset, "train")
    corpus_ids = list(dataset.corpus)
    scores = score_pairs(BM25Retriever(progress=False), dataset, pairs, corpus_ids=corpus_ids)
    query_ids = list(pairs)
    own = BM25Retriever(top_k=len(corpus_ids), progress=False).retrieve(
        corpus_ids, [dataset.corpus[d].as_text(True) for d in corpus_ids], query_ids,
        [dataset.queries[q] for q in query_ids]).run
    for query_id, row in scores.items():
        assert list(row) == pairs[query_id]
        for doc_id, score in row.items():
            assert score == pytest.approx(own[query_id].get(doc_id, 0.0))


def test_model_teacher_scores_equal_the_encoders_cosine(dataset, tiny_bert_path):
    from tapt.encoders.factory import open_encoder

    encoder = open_encoder(str(tiny_bert_path))
    pairs = needed_pairs(dataset, "train")
    scores = score_pairs(DenseRetriever(encoder, progress=False), dataset, pairs)
    for query_id, row in scores.items():
        query = encoder.encode_queries([dataset.queries[query_id]])[0]
        passages = encoder.encode_corpus([dataset.corpus[d].as_text(True) for d in row])
        cosine = passages @ query / (np.linalg.norm(passages, axis=1) * np.linalg.norm(query))
        assert list(row.values()) == pytest.approx(cosine.tolist(), abs=1e-5)


def test_score_file_round_trip_and_provenance(dataset, tmp_path):
    scores = {q: {d: i - 1.25 for i, d in enumerate(ids)}
              for q, ids in needed_pairs(dataset, "train").items()}
    path = write_teacher_scores(tmp_path / "s.jsonl", scores, teacher="bm25",
                                data=dataset.source, split="train")
    read = read_teacher_scores(path, dataset, "train")
    assert read.teacher == "bm25" and read.scores == scores
    first = json.loads(path.read_text().splitlines()[0])
    assert {"query_id", "passage_id", "score", "teacher", "data", "split"} <= set(first)


def test_cli_writes_a_file_the_reader_accepts(tiny_beir_path, dataset, tmp_path):
    output = tmp_path / "bm25.jsonl"
    assert main(["score", "--data", str(tiny_beir_path), "--teacher", "bm25", "--output",
                 str(output), "--quiet"]) == 0
    read = read_teacher_scores(output, dataset, "train")
    assert {q: list(r) for q, r in read.scores.items()} == needed_pairs(dataset, "train")
    assert main(["score", "--data", str(tiny_beir_path), "--teacher", "bm25", "--output",
                 str(output), "--quiet"]) == 2  # exists: refused without --overwrite


def good_line(dataset) -> dict:
    query_id, judged = next(iter(dataset.split("train").items()))
    return {"query_id": query_id, "passage_id": next(iter(judged)), "score": 1.0,
            "teacher": "bm25"}


@pytest.mark.parametrize("change, field, message", [
    ({"query_id": "nope"}, "query_id", "unknown query"),
    ({"query_id": 3}, "query_id", "non-empty string"),
    ({"passage_id": "nope"}, "passage_id", "unknown passage"),
    ({"score": "high"}, "score", "finite number"),
    ({"score": None}, "score", "finite number"),
    ({"teacher": ""}, "teacher", "non-empty string"),
])
def test_bad_lines_name_file_line_and_field(dataset, tmp_path, change, field, message):
    path = tmp_path / "s.jsonl"
    first = good_line(dataset)
    other = next(d for d in dataset.corpus if d != first["passage_id"])
    path.write_text(json.dumps(first) + "\n"
                    + json.dumps({**first, "passage_id": other, **change}) + "\n")
    with pytest.raises(DataError, match=message) as caught:
        read_teacher_scores(path, dataset, "train")
    assert (caught.value.path, caught.value.line, caught.value.field) == (str(path), 2, field)


def test_duplicates_mixed_teachers_other_splits_and_empty_files_are_refused(dataset, tmp_path):
    path = tmp_path / "s.jsonl"
    line = good_line(dataset)
    path.write_text(json.dumps(line) + "\n" + json.dumps(line) + "\n")
    with pytest.raises(DataError, match=r"s.jsonl:2: field 'passage_id': .*appears twice"):
        read_teacher_scores(path, dataset, "train")
    other = next(d for d in dataset.corpus if d != line["passage_id"])
    path.write_text(json.dumps(line) + "\n"
                    + json.dumps({**line, "passage_id": other, "teacher": "model"}) + "\n")
    with pytest.raises(DataError, match=r":2: field 'teacher': .*one file holds one teacher"):
        read_teacher_scores(path, dataset, "train")
    dev_query = next(iter(dataset.split("dev")))
    path.write_text(json.dumps({**line, "query_id": dev_query}) + "\n")
    with pytest.raises(DataError, match=r":1: field 'query_id': .*not in the train split"):
        read_teacher_scores(path, dataset, "train")
    path.write_text("\n")
    with pytest.raises(DataError, match="no teacher scores"):
        read_teacher_scores(path, dataset, "train")
    with pytest.raises(DataError, match="not found"):
        read_teacher_scores(tmp_path / "missing.jsonl", dataset, "train")


def test_the_digest_record_holds_the_data_and_the_mined_file_scored(dataset, tiny_beir_path,
                                                                    tmp_path):
    from tapt.data.content import dataset_digests
    from tapt.util.digests import file_digest, read_sidecar

    mined = tmp_path / "mined.jsonl"
    assert main(["mine", "--data", str(tiny_beir_path), "--retriever", "bm25", "--output",
                 str(mined), "--per-query", "1", "--quiet"]) == 0
    output = tmp_path / "scores.jsonl"
    assert main(["score", "--data", str(tiny_beir_path), "--teacher", "bm25", "--mined",
                 str(mined), "--output", str(output), "--quiet"]) == 0
    record = read_sidecar(output)
    assert record["data"] == dataset_digests(dataset, "train") and record["split"] == "train"
    assert record["mined"] == {"path": str(mined), "sha256": file_digest(mined)}
    assert read_sidecar(mined)["data"] == record["data"]
    read = read_teacher_scores(output, dataset, "train", mined=mined)
    assert read.teacher == "bm25"
    assert read_teacher_scores(output, dataset, "train").scores == read.scores  # no mined
    other = tmp_path / "other-mined.jsonl"
    shutil_copy(mined, other, change=True)
    with pytest.raises(DataError, match=r"whose content differs from data.mined_negatives"):
        read_teacher_scores(output, dataset, "train", mined=other)
    plain = tmp_path / "plain.jsonl"
    assert main(["score", "--data", str(tiny_beir_path), "--teacher", "bm25", "--output",
                 str(plain), "--quiet"]) == 0
    with pytest.raises(DataError, match=r"scored without mined negatives, but the training "
                                        r"uses data.mined_negatives"):
        read_teacher_scores(plain, dataset, "train", mined=mined)


def shutil_copy(source, target, change: bool = False) -> None:
    """A copy of a mined file; ``change``: its first negative dropped."""
    lines = source.read_text().splitlines()
    if change:
        first = json.loads(lines[0])
        first["negatives"] = first["negatives"][1:]
        lines[0] = json.dumps(first)
    target.write_text("\n".join(lines) + "\n")


def test_scores_of_queries_carved_off_into_dev_are_skipped(tmp_path, tiny_beir_path):
    """A file scored for the whole train split still trains once a dev split is carved
    from it (data.dev_from_train), as a mined-negatives file does."""
    from dataclasses import replace

    from tapt.data.splits import carve_dev

    whole = load_beir_folder(tiny_beir_path, ["train"])
    output = tmp_path / "bm25.jsonl"
    assert main(["score", "--data", str(tiny_beir_path), "--teacher", "bm25", "--output",
                 str(output), "--quiet"]) == 0
    carved = carve_dev(whole, size=2, seed=0, split="carved")
    read = read_teacher_scores(output, carved, "train")
    assert set(read.scores) == set(carved.split("train"))
    with pytest.raises(DataError, match="not in the train split"):
        read_teacher_scores(output, replace(carved, carved=None), "train")


def test_fused_teacher_is_the_linear_fusion_of_the_model_and_bm25(tiny_beir_path,
                                                                  tiny_bert_path, tmp_path,
                                                                  capsys):
    """``--fuse-bm25 ALPHA``: per query, ALPHA x min-max(model) + (1 - ALPHA) x
    min-max(BM25) over the scored passages, from the two teachers' own files."""
    files = {}
    for name, teacher, extra in (("bm25", "bm25", []), ("model", str(tiny_bert_path), []),
                                 ("fused", str(tiny_bert_path), ["--fuse-bm25", "0.3"])):
        files[name] = tmp_path / f"{name}.jsonl"
        assert main(["score", "--data", str(tiny_beir_path), "--teacher", teacher, "--output",
                     str(files[name]), "--quiet", *extra]) == 0
    dataset = load_beir_folder(tiny_beir_path)
    read = {name: read_teacher_scores(path, dataset, "train") for name, path in files.items()}
    assert read["fused"].teacher.endswith("+bm25-linear-alpha0.3")
    for query_id, row in read["model"].scores.items():
        def scaled(values: dict) -> dict:
            low, high = min(values.values()), max(values.values())
            return {d: 1.0 if high == low else (v - low) / (high - low)
                    for d, v in values.items()}
        model, lexical = scaled(row), scaled(read["bm25"].scores[query_id])
        expected = {d: 0.3 * model[d] + 0.7 * lexical[d] for d in row}
        # the files hold 6 decimals; min-max scaling of rounded scores moves them ~1e-5
        assert read["fused"].scores[query_id] == pytest.approx(expected, abs=1e-4)
    # BM25 fused with itself is refused before anything is scored.
    assert main(["score", "--data", str(tiny_beir_path), "--teacher", "bm25", "--output",
                 str(tmp_path / "x.jsonl"), "--fuse-bm25", "0.5"]) == 2
    assert "--fuse-bm25" in capsys.readouterr().out
    assert not (tmp_path / "x.jsonl").exists()
