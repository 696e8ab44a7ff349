"""``tapt data synth`` writes each query's group labels (``"labels": {"mode": ..., "domain":
...}`` in queries.jsonl): they restate what the generator drew (the mode of the query's key,
the anchor's domain), every reader of queries.jsonl takes the lines as before, and ``tapt
bm25 --by`` / ``tapt eval --by`` report per-group metrics that average back to the overall."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from tapt.cli import main
from tapt.data.beir import ANCHOR, load_beir_folder, parse_queries, read_queries
from tapt.data.labels import read_query_labels
from tapt.data.stats import tier_counts
from tapt.data.synth import MODES, build, synthesize
from tapt.data.triplets import build_rows
from tapt.retrieval.by_group import NO_LABEL
from tapt.retrieval.metrics import METRIC_KEYS

SIZE = {"queries": 200, "distractors": 60, "seed": 11}
KIND_OF_MODE = {"process": "process", "performance": "property", "application": "application"}
"""The item kind (prefix of a key item) a query of each non-composition mode asks for."""


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("synth-query-labels") / "ds"
    synthesize(out, **SIZE)
    return out


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def stripped_copy(folder: Path, out: Path) -> Path:
    """``folder`` with the ``labels`` field removed from every query line."""
    shutil.copytree(folder, out)
    rows = lines(out / "queries.jsonl")
    for row in rows:
        del row["labels"]
    (out / "queries.jsonl").write_text(
        "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return out


def test_every_query_carries_the_mode_of_its_key_and_its_anchors_domain(folder):
    drawn = build(**SIZE).queries
    domain_of_doc = {row["_id"]: row["labels"]["domain"] for row in lines(folder / "corpus.jsonl")}
    dataset = load_beir_folder(folder)
    anchor_of = {q: next(d for d, grade in judged.items() if grade == ANCHOR)
                 for split in dataset.qrels.values() for q, judged in split.items()}
    rows = lines(folder / "queries.jsonl")
    assert [row["_id"] for row in rows] == list(drawn)
    for row in rows:
        labels, query = row["labels"], drawn[row["_id"]]
        assert set(labels) == {"mode", "domain"}
        # the mode is the kind of item the key asks for beside its ingredients
        kinds = {item.split(":", 1)[0] for item in query.key} & set(KIND_OF_MODE.values())
        assert kinds == ({KIND_OF_MODE[labels["mode"]]} if labels["mode"] in KIND_OF_MODE
                         else set()), (row["_id"], labels, sorted(query.key))
        assert labels["domain"] == domain_of_doc[anchor_of[row["_id"]]]
    modes = Counter(row["labels"]["mode"] for row in rows)
    assert set(modes) == set(MODES) and sum(modes.values()) == SIZE["queries"]
    assert read_query_labels(folder, "mode") == {r["_id"]: r["labels"]["mode"] for r in rows}


def test_readers_take_the_labelled_queries_as_the_unlabelled_ones(folder, tmp_path):
    plain = stripped_copy(folder, tmp_path / "plain")
    labelled, bare = load_beir_folder(folder), load_beir_folder(plain)
    assert labelled.queries == bare.queries and labelled.qrels == bare.qrels
    assert labelled.corpus == bare.corpus
    assert tier_counts(labelled) == tier_counts(bare)
    assert build_rows(labelled, "train")[0] == build_rows(bare, "train")[0]
    # the Arrow path of a Hub config (datasets reads a struct column, parse_queries skips it)
    from datasets import load_dataset

    rows = load_dataset("json", data_files=str(folder / "queries.jsonl"), split="train")
    assert "labels" in rows.column_names
    assert parse_queries(enumerate(rows, start=1), "queries.jsonl") == \
        read_queries(plain / "queries.jsonl")
    assert main(["data", "validate", str(folder)]) == 0


def weighted_mean(groups: dict, key: str) -> float:
    count = sum(group["counts"].get(key, 0) for group in groups.values())
    return sum(group["metrics"][key] * group["counts"][key]
               for group in groups.values() if key in group["metrics"]) / count


@pytest.mark.parametrize("field", ["mode", "domain"])
def test_bm25_by_field_on_synthesized_data_averages_back(folder, tmp_path, field, capsys):
    out = tmp_path / "by.json"
    assert main(["bm25", "--data", str(folder), "--split", "test", "--quiet", "--by", field,
                 "--output", str(out)]) == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    section = report["by_group"]
    assert section["field"] == field
    groups = section["groups"]
    test_ids = set(load_beir_folder(folder).qrels["test"])
    expected = Counter(read_query_labels(folder, field)[q] for q in test_ids)
    assert NO_LABEL not in groups and len(expected) > 1
    assert {name: group["queries"] for name, group in groups.items()} == dict(expected)
    for key in METRIC_KEYS:
        assert weighted_mean(groups, key) == pytest.approx(report[key])
    assert f"metrics by {field}" in capsys.readouterr().out


def test_eval_hybrid_by_mode_on_synthesized_data(folder, tiny_bert_path, tmp_path):
    """``tapt eval --by``: the same path as ``tapt bm25 --by``, on a small sub-corpus (the
    test split's judged passages plus 20 distractors) to keep the tiny model fast."""
    out = tmp_path / "by.json"
    assert main(["eval", "--model", str(tiny_bert_path), "--hybrid", "bm25", "--data",
                 str(folder), "--split", "test", "--distractors", "20", "--quiet",
                 "--by", "mode", "--output", str(out)]) == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    groups = report["by_group"]["groups"]
    assert set(groups) <= set(MODES)
    assert sum(group["queries"] for group in groups.values()) == len(report["per_query"])
    for key in METRIC_KEYS:
        assert weighted_mean(groups, key) == pytest.approx(report[key])
