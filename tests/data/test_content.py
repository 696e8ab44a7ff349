"""tapt.data.content: the digests of the data a file was made from, and the check on read."""

from __future__ import annotations

import json
import logging
import shutil

import pytest

from tapt.data.beir import DataError, load_beir_folder
from tapt.data.content import check_made_from, dataset_digests, made_from
from tapt.data.sources import load_data
from tapt.util.digests import write_sidecar


def test_digests_do_not_depend_on_the_store_or_the_folder_and_name_each_part(tiny_beir_path,
                                                                             tmp_path):
    memory = dataset_digests(load_data(tiny_beir_path), "train")
    arrow = dataset_digests(load_data(tiny_beir_path, corpus_store="arrow",
                                      corpus_cache=tmp_path / "cache"), "train")
    copy = tmp_path / "copy"
    shutil.copytree(tiny_beir_path, copy)
    assert memory == arrow == dataset_digests(load_beir_folder(copy), "train")
    assert set(memory) == {"corpus", "queries", "qrels"}
    assert dataset_digests(load_beir_folder(copy), "dev")["qrels"] != memory["qrels"]
    lines = (copy / "queries.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    lines[0] = json.dumps({**first, "text": first["text"] + " again"})
    (copy / "queries.jsonl").write_text("\n".join(lines) + "\n")
    changed = dataset_digests(load_beir_folder(copy), "train")
    assert [part for part in memory if memory[part] != changed[part]] == ["queries"]


def test_a_dataset_built_in_code_is_digested_by_content(tiny_beir_path):
    from tapt.data.beir import BeirDataset

    loaded = load_beir_folder(tiny_beir_path)
    built = BeirDataset(corpus=dict(loaded.corpus), queries=dict(loaded.queries),
                        qrels=dict(loaded.qrels))
    digests = dataset_digests(built, "train")
    assert all(value.startswith("content:") for value in digests.values())
    assert digests == dataset_digests(BeirDataset(
        corpus=dict(reversed(list(loaded.corpus.items()))), queries=dict(loaded.queries),
        qrels=dict(loaded.qrels)), "train")  # the order of passages is no change


def test_check_made_from(tiny_beir_path, tmp_path, caplog):
    dataset = load_beir_folder(tiny_beir_path)
    path = tmp_path / "made.jsonl"
    path.write_text("{}\n")
    with caplog.at_level(logging.INFO, logger="tapt"):
        assert check_made_from(path, dataset, "train", made_by="tapt mine") is None
    assert "has no digest record" in caplog.text  # made by hand: read unchecked
    write_sidecar(path, **made_from(dataset, "train"))
    assert check_made_from(path, dataset, "train", made_by="tapt mine")["split"] == "train"
    with pytest.raises(DataError, match="made from the 'train' split, used for the 'dev'"):
        check_made_from(path, dataset, "dev", made_by="tapt mine")
    write_sidecar(path, **{**made_from(dataset, "train"),
                           "data": {**dataset_digests(dataset, "train"), "corpus": "x"}})
    with pytest.raises(DataError, match=r"made from other data .*its corpus differ") as caught:
        check_made_from(path, dataset, "train", made_by="tapt mine")
    assert caught.value.path == str(path)
    path.write_text("{} \n")
    with pytest.raises(DataError, match=r"since tapt mine wrote it .*delete made.jsonl.digest"):
        check_made_from(path, dataset, "train", made_by="tapt mine")


@pytest.mark.parametrize("provenance", [{"data": None}, {"data": "digests"},
                                        {"split": None}])
def test_a_record_without_its_provenance_warns_that_the_data_is_not_checked(
        tiny_beir_path, tmp_path, caplog, provenance):
    """A digest record whose ``data`` or ``split`` is missing or of the wrong type still
    checks the file's own digest, and says that the data it was made from is not checked."""
    dataset = load_beir_folder(tiny_beir_path)
    path = tmp_path / "made.jsonl"
    path.write_text("{}\n")
    write_sidecar(path, **{**made_from(dataset, "train"), **provenance})
    with caplog.at_level(logging.WARNING, logger="tapt"):
        assert check_made_from(path, dataset, "train", made_by="tapt mine") is not None
    assert "does not say which" in caplog.text and "made.jsonl" in caplog.text
    path.write_text("{} \n")
    with pytest.raises(DataError, match="since tapt mine wrote it"):
        check_made_from(path, dataset, "train", made_by="tapt mine")


def test_a_record_without_its_split_still_compares_the_data(tiny_beir_path, tmp_path):
    dataset = load_beir_folder(tiny_beir_path)
    path = tmp_path / "made.jsonl"
    path.write_text("{}\n")
    write_sidecar(path, **{**made_from(dataset, "train"), "split": None,
                           "data": {**dataset_digests(dataset, "train"), "qrels": "x"}})
    with pytest.raises(DataError, match="made from other data"):
        check_made_from(path, dataset, "train", made_by="tapt mine")


def test_a_dataset_is_digested_once_per_split(tiny_beir_path, monkeypatch):
    from tapt.data import content

    read: list[str] = []
    original = content.file_digest
    monkeypatch.setattr(content, "file_digest", lambda path: read.append(path) or original(path))
    dataset = load_beir_folder(tiny_beir_path)
    first = dataset_digests(dataset, "train")
    assert dataset_digests(dataset, "train") == first and len(read) == 3
    dataset_digests(dataset, "dev")
    assert len(read) == 6
    assert dataset_digests(load_beir_folder(tiny_beir_path), "train") == first
    assert len(read) == 9  # another dataset object: read again
