"""``tapt eval/bm25 --queries NAME=FILE``: query sets against one corpus encoding, with
retention against the split's own queries and the paired test (FormBench Table 4)."""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tapt.cli import main
from tapt.data.beir import DataError, load_beir_folder, read_queries
from tapt.data.query_sets import read_query_set
from tapt.retrieval.metrics import METRIC_KEYS


def rewritten(dataset, split: str, keep: int = 2) -> dict[str, str]:
    """The split's queries with only every ``keep``-th word (a crude rewrite)."""
    return {query_id: " ".join(dataset.queries[query_id].split()[::keep])
            for query_id in dataset.split(split)}


def write_queries(path: Path, queries: dict[str, str]) -> Path:
    path.write_text("".join(json.dumps({"_id": q, "text": t}) + "\n"
                            for q, t in queries.items()), encoding="utf-8")
    return path


def with_queries(folder: Path, target: Path, replaced: dict[str, str]) -> Path:
    """A copy of the BEIR ``folder`` whose queries.jsonl has ``replaced``'s texts."""
    shutil.copytree(folder, target)
    queries = {**read_queries(folder / "queries.jsonl"), **replaced}
    write_queries(target / "queries.jsonl", queries)
    return target


def exact_sign_flip_p(a: list[float], b: list[float]) -> float:
    """Two-sided p of the paired randomization test by enumerating every sign flip (twice
    the smaller tail, capped at 1: scipy's definition)."""
    diffs = np.asarray(a) - np.asarray(b)
    observed = diffs.mean()
    stats = np.array([np.mean(diffs * np.array(signs))
                      for signs in itertools.product((1, -1), repeat=len(diffs))])
    tol = 1e-12
    return min(1.0, 2 * min(np.mean(stats <= observed + tol), np.mean(stats >= observed - tol)))


def test_query_ids_missing_from_the_qrels_name_file_and_line(synth_path, tmp_path, capsys):
    dataset = load_beir_folder(synth_path, ["test", "train"])
    test_ids = list(dataset.split("test"))
    train_id = next(iter(dataset.split("train")))
    path = write_queries(tmp_path / "v2.jsonl", {test_ids[0]: "a rewritten query",
                                                 test_ids[1]: "another rewrite",
                                                 train_id: "judged in train, not test"})
    with pytest.raises(DataError) as err:
        read_query_set(path, dataset.split("test"), dataset.split_file("test"))
    assert err.value.path == str(path) and err.value.line == 3 and err.value.field == "_id"
    assert main(["bm25", "--data", str(synth_path), "--queries", f"v2={path}",
                 "--output", str(tmp_path / "r.json"), "--quiet"]) == 2
    shown = capsys.readouterr().out
    assert f"{path}:3: field '_id'" in shown and train_id in shown
    assert not (tmp_path / "r.json").exists()


def test_retention_and_paired_test_equal_an_independent_calculation(synth_path, tmp_path):
    dataset = load_beir_folder(synth_path, ["test"])
    short = rewritten(dataset, "test")
    path = write_queries(tmp_path / "short.jsonl", short)
    assert main(["bm25", "--data", str(synth_path), "--queries", f"short={path}",
                 "--output", str(tmp_path / "sets.json"), "--quiet"]) == 0
    result = json.loads((tmp_path / "sets.json").read_text())
    # independently: the rewritten queries as the dataset's own, evaluated on their own
    alone = with_queries(synth_path, tmp_path / "short-data", short)
    assert main(["bm25", "--data", str(alone), "--output", str(tmp_path / "alone.json"),
                 "--quiet"]) == 0
    separate = json.loads((tmp_path / "alone.json").read_text())["per_query"]
    section = result["query_sets"]["sets"]["short"]
    assert section["per_query"] == separate
    assert section["queries"] == len(short)
    assert result["query_sets"]["original_queries"] == len(short)
    changed = 0
    for key in METRIC_KEYS:
        queries = sorted(q for q in separate if key in separate[q])
        before = [result["per_query"][q][key] for q in queries]
        after = [separate[q][key] for q in queries]
        row = section["metrics"][key]
        assert row["original"] == pytest.approx(np.mean(before))
        assert row["value"] == pytest.approx(np.mean(after))
        assert row["retention"] == pytest.approx(np.mean(after) / np.mean(before))
        assert row["delta"] == pytest.approx(np.mean(after) - np.mean(before))
        assert row["p_value"] == pytest.approx(exact_sign_flip_p(after, before))
        assert row["p_holm"] == pytest.approx(row["p_value"])  # one set: nothing to correct
        assert row["ci_low"] <= row["delta"] <= row["ci_high"]
        changed += before != after
    assert changed  # the rewrite changed some metric: the test compared real differences


def test_dense_query_sets_share_one_encoding_and_match_separate_runs(tiny_bert_path,
                                                                     tiny_beir_path, tmp_path):
    dataset = load_beir_folder(tiny_beir_path, ["test"])
    short = rewritten(dataset, "test")
    path = write_queries(tmp_path / "short.jsonl", short)
    assert main(["eval", "--model", str(tiny_bert_path), "--data", str(tiny_beir_path),
                 "--queries", f"short={path}", "--queries", f"same={path}",
                 "--output", str(tmp_path / "sets.json"), "--quiet"]) == 0
    result = json.loads((tmp_path / "sets.json").read_text())
    alone = with_queries(tiny_beir_path, tmp_path / "short-data", short)
    assert main(["eval", "--model", str(tiny_bert_path), "--data", str(alone),
                 "--output", str(tmp_path / "alone.json"), "--quiet"]) == 0
    separate = json.loads((tmp_path / "alone.json").read_text())
    sets = result["query_sets"]["sets"]
    for name in ("short", "same"):
        for query_id, row in separate["per_query"].items():
            assert sets[name]["per_query"][query_id] == pytest.approx(row)
    # the corpus was encoded once for the three query sets
    assert result["timings"]["corpus_tokens"] == separate["timings"]["corpus_tokens"]


def test_evaluate_query_sets_retrieves_once(tiny_beir_path):
    from tapt.retrieval.bm25 import BM25Retriever
    from tapt.retrieval.evaluate import evaluate
    from tapt.retrieval.query_set_retrieval import evaluate_query_sets

    class Counting(BM25Retriever):
        calls = 0

        def retrieve(self, *args, **kwargs):
            Counting.calls += 1
            return super().retrieve(*args, **kwargs)

    dataset = load_beir_folder(tiny_beir_path, ["test"])
    sets = {"short": rewritten(dataset, "test"), "shorter": rewritten(dataset, "test", 3)}
    results = evaluate_query_sets(Counting(progress=False), dataset, "test", sets)
    assert Counting.calls == 1
    plain = evaluate(BM25Retriever(progress=False), dataset, "test")
    assert results.original.per_query == plain.per_query
    assert set(results.sets) == {"short", "shorter"}


def test_query_sets_refuse_dims(tiny_bert_path, tiny_beir_path, tmp_path, capsys):
    path = write_queries(tmp_path / "q.jsonl", {"q09": "x"})
    assert main(["eval", "--model", str(tiny_bert_path), "--data", str(tiny_beir_path),
                 "--queries", f"v2={path}", "--dims", "8", "--quiet"]) == 2
    assert "--queries and --dims" in capsys.readouterr().out
