"""load_data: local BEIR folders, Hub-shaped local folders, the Hub path and its errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import datasets
import datasets.config
import huggingface_hub
import huggingface_hub.constants
import pytest

from tapt.data.beir import DataError, Passage, write_beir
from tapt.data.sources import CONFIG_ALIASES, config_name, load_data, load_hub

README = """---
configs:
- config_name: formbench-sample
  data_files:
  - split: corpus
    path: formbench-sample/corpus.jsonl
  - split: queries
    path: formbench-sample/queries.jsonl
---
# A local mimic of the FormBench dataset repo
"""


@pytest.fixture
def empty_hf_cache(tmp_path, monkeypatch):
    """Offline mode and empty HF caches under tmp_path.

    ``huggingface_hub`` and ``datasets`` read these variables when first imported, so the
    module-level copies are patched too."""
    home = tmp_path / "hf-home"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("HF_HUB_CACHE", str(home / "hub"))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(home / "datasets"))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HOME", str(home))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(home / "hub"))
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", home / "datasets")
    monkeypatch.setattr(datasets.config, "HF_CACHE_HOME", str(home))
    # a relative Hub id must not resolve to a folder of the working directory
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return home


# --------------------------------------------------------------------------- local

def test_local_beir_folder(beir_folder, corpus, queries, qrels):
    dataset = load_data(beir_folder)
    assert dataset.corpus == corpus
    assert dataset.queries == queries
    assert dataset.qrels == qrels
    assert dataset.source == str(beir_folder)


def test_local_folder_with_chosen_splits_and_options(make_beir, corpus, queries):
    qrels = {"test": {"q1": {"d1": 3}, "q2": {"d3": 2}}}  # q2 has no anchor
    corpus["d6"] = Passage(text="", title="empty")
    folder = make_beir("lenient", corpus=corpus, queries=queries, qrels=qrels)
    with pytest.raises(DataError):
        load_data(folder, splits=["test"])
    dataset = load_data(folder, splits=["test"], require_anchor=False, allow_empty=True)
    assert dataset.qrels == qrels
    assert dataset.corpus["d6"].text == ""


@pytest.fixture
def hub_layout(tmp_path, corpus, queries, qrels):
    """A local folder laid out like the Hub repo: one subfolder per config."""
    root = tmp_path / "FormBench"
    write_beir(root / "formbench-structured", corpus, queries, qrels)
    other = {"d9": Passage(text="only in the random variant", title="R")}
    write_beir(root / "formbench-random", {**corpus, **other}, queries, qrels)
    return root


@pytest.mark.parametrize("config,expected", [
    ("C1", "formbench-structured"), ("c1", "formbench-structured"),
    ("structured", "formbench-structured"), ("formbench-structured", "formbench-structured"),
    ("C0", "formbench-random"), ("random", "formbench-random"),
])
def test_local_hub_layout_with_config_alias(hub_layout, config, expected):
    dataset = load_data(hub_layout, config)
    assert dataset.source == str(hub_layout / expected)
    assert ("d9" in dataset.corpus) == (expected == "formbench-random")
    assert len(dataset.qrels["test"]) == 3


def test_config_that_names_no_subfolder_is_an_error(hub_layout):
    structured = hub_layout / "formbench-structured"
    # asking the structured (C1) folder for the random (C0) variant must not give C1
    with pytest.raises(DataError, match="formbench-random"):
        load_data(structured, "random")


def test_config_name_aliases():
    assert config_name(None) is None
    assert config_name("C1") == config_name("STRUCTURED") == "formbench-structured"
    assert config_name("C0") == config_name("Random") == "formbench-random"
    assert config_name("sample") == "formbench-sample"
    assert config_name("my-own-config") == "my-own-config"
    assert set(CONFIG_ALIASES.values()) == {"formbench-random", "formbench-structured",
                                           "formbench-sample"}


def test_missing_local_path_that_is_not_a_hub_id(tmp_path):
    for source in (tmp_path / "no" / "such" / "folder", "nonexistent-folder-xyz",
                   "./a/b"):
        with pytest.raises(DataError) as info:
            load_data(source)
        assert info.value.path == str(source)
        assert "no such folder" in str(info.value)


def test_a_file_is_not_a_dataset(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_text('{"_id": "d1", "text": "x"}\n', encoding="utf-8")
    with pytest.raises(DataError, match="no such folder"):
        load_data(path)


# --------------------------------------------------------------------------- Hub

def test_hub_id_without_config(empty_hf_cache):
    with pytest.raises(DataError) as info:
        load_data("vinven7/FormBench")
    assert info.value.path == "vinven7/FormBench"
    assert "needs a config" in str(info.value)
    assert "structured" in str(info.value)


def test_offline_with_empty_cache_says_what_to_download(empty_hf_cache, corpus, queries,
                                                        qrels):
    with pytest.raises(DataError) as info:
        load_data("vinven7/FormBench", "structured")
    message = str(info.value)
    assert info.value.path == "hf://datasets/vinven7/FormBench/formbench-structured"
    assert "hf download vinven7/FormBench --repo-type dataset" in message
    assert "formbench-structured/*" in message
    assert "--data" in message
    # nothing was fetched into the (empty) cache
    assert not [p for p in empty_hf_cache.rglob("*") if p.is_file()]
    # following the advice works: download to --local-dir, pass the --data folder
    local_dir = re.search(r"--local-dir (\S+)", message).group(1)
    data = re.search(r"--data (\S+)", message).group(1)
    write_beir(Path(local_dir) / "formbench-structured", corpus, queries, qrels)
    assert load_data(data).qrels == qrels
    assert load_data(local_dir, "structured").qrels == qrels


def make_hub_mimic(root: Path, corpus_records: list[dict], query_records: list[dict],
                   qrels: dict[str, str]) -> Path:
    """A local folder shaped like the Hub dataset repo, with a README declaring configs."""
    config = root / "formbench-sample"
    (config / "qrels").mkdir(parents=True)
    (root / "README.md").write_text(README, encoding="utf-8")
    (config / "corpus.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in corpus_records), encoding="utf-8")
    (config / "queries.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in query_records), encoding="utf-8")
    for split, text in qrels.items():
        (config / "qrels" / f"{split}.tsv").write_text(text, encoding="utf-8")
    return root


def records_of(corpus: dict[str, Passage]) -> list[dict]:
    return [{"_id": k, "title": p.title, "text": p.text} for k, p in corpus.items()]


def qrels_tsv(judged: dict[str, dict[str, int]]) -> str:
    return "query-id\tcorpus-id\tscore\n" + "".join(
        f"{q}\t{d}\t{s}\n" for q, docs in judged.items() for d, s in docs.items())


@pytest.fixture
def local_downloads(monkeypatch):
    """Serve ``hf_hub_download(repo, filename)`` from a local mimic of the repo."""
    calls = []

    def fake_download(repo_id, filename, *, repo_type=None, revision=None, **kwargs):
        calls.append((repo_id, filename, repo_type, revision))
        path = Path(repo_id) / filename
        if not path.is_file():
            raise FileNotFoundError(path)
        return str(path)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_download)
    return calls


def test_load_hub_reads_a_hub_shaped_repo(empty_hf_cache, tmp_path, corpus, queries, qrels,
                                          local_downloads):
    """The real datasets.load_dataset on a repo with README configs (offline, local)."""
    records = records_of(corpus)
    del records[5]["title"]  # a row without title: datasets fills None
    root = make_hub_mimic(tmp_path / "mimic", records,
                          [{"_id": k, "text": v} for k, v in queries.items()],
                          {split: qrels_tsv(j) for split, j in qrels.items()})
    dataset = load_hub(str(root), "formbench-sample", ["dev", "test"])
    assert dataset.source == f"hf://datasets/{root}/formbench-sample"
    assert dataset.queries == queries
    assert dataset.corpus["d6"] == Passage(text=corpus["d6"].text, title="")
    assert {k: v for k, v in dataset.corpus.items() if k != "d6"} == \
        {k: v for k, v in corpus.items() if k != "d6"}
    assert dataset.qrels == {"dev": qrels["dev"], "test": qrels["test"]}
    assert [(f, t) for _, f, t, _ in local_downloads] == [
        ("formbench-sample/qrels/dev.tsv", "dataset"),
        ("formbench-sample/qrels/test.tsv", "dataset")]


def test_load_hub_validates_rows_of_a_hub_shaped_repo(empty_hf_cache, tmp_path, corpus,
                                                      queries, qrels, local_downloads):
    records = records_of(corpus)
    records[3]["text"] = "   "
    root = make_hub_mimic(tmp_path / "mimic", records,
                          [{"_id": k, "text": v} for k, v in queries.items()],
                          {split: qrels_tsv(j) for split, j in qrels.items()})
    with pytest.raises(DataError) as info:
        load_hub(str(root), "formbench-sample", ["test"])
    label = f"hf://datasets/{root}/formbench-sample/corpus.jsonl"
    assert info.value.path == label
    assert str(info.value).startswith(f"{label}:4: field 'text': empty")


class FakeHub:
    """Stand-ins for ``datasets.load_dataset`` and ``huggingface_hub.hf_hub_download``."""

    def __init__(self, tmp_path: Path, corpus_rows, query_rows, qrels: dict[str, str]):
        self.corpus_rows, self.query_rows = corpus_rows, query_rows
        self.files = {}
        for split, text in qrels.items():
            path = tmp_path / "hub-files" / f"{split}.tsv"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            self.files[split] = path
        self.calls = []

    def load_dataset(self, repo_id, config, *, split, revision=None, **kwargs):
        self.calls.append(("load_dataset", repo_id, config, split, revision))
        return {"corpus": self.corpus_rows, "queries": self.query_rows}[split]

    def hf_hub_download(self, repo_id, filename, *, repo_type=None, revision=None, **kwargs):
        self.calls.append(("hf_hub_download", repo_id, filename, repo_type, revision))
        split = Path(filename).stem
        return str(self.files[split])


@pytest.fixture
def fake_hub(monkeypatch, tmp_path, corpus, queries, qrels):
    def install(corpus_rows=None, query_rows=None, qrels_text=None) -> FakeHub:
        hub = FakeHub(tmp_path,
                      records_of(corpus) if corpus_rows is None else corpus_rows,
                      [{"_id": k, "text": v} for k, v in queries.items()]
                      if query_rows is None else query_rows,
                      {s: qrels_tsv(j) for s, j in qrels.items()}
                      if qrels_text is None else qrels_text)
        monkeypatch.setattr(datasets, "load_dataset", hub.load_dataset)
        monkeypatch.setattr(huggingface_hub, "hf_hub_download", hub.hf_hub_download)
        return hub

    return install


def test_hub_rows_load_with_config_alias_and_revision(empty_hf_cache, fake_hub, corpus,
                                                      queries, qrels):
    hub = fake_hub()
    dataset = load_data("vinven7/FormBench", "C1", ["test"], revision="v1.0")
    assert dataset.source == "hf://datasets/vinven7/FormBench/formbench-structured"
    assert (dataset.corpus, dataset.queries) == (corpus, queries)
    assert dataset.qrels == {"test": qrels["test"]}
    assert hub.calls == [
        ("load_dataset", "vinven7/FormBench", "formbench-structured", "corpus", "v1.0"),
        ("load_dataset", "vinven7/FormBench", "formbench-structured", "queries", "v1.0"),
        ("hf_hub_download", "vinven7/FormBench", "formbench-structured/qrels/test.tsv",
         "dataset", "v1.0"),
    ]


def test_hub_corpus_row_with_empty_text_is_rejected(empty_hf_cache, fake_hub, corpus):
    rows = records_of(corpus)
    rows[2]["text"] = ""
    fake_hub(corpus_rows=rows)
    with pytest.raises(DataError) as info:
        load_data("vinven7/FormBench", "structured")
    label = "hf://datasets/vinven7/FormBench/formbench-structured/corpus.jsonl"
    assert (info.value.path, info.value.line, info.value.field) == (label, 3, "text")
    assert str(info.value).startswith(f"{label}:3: field 'text': empty")
    # the lenient options reach Hub rows too
    dataset = load_data("vinven7/FormBench", "structured", allow_empty=True)
    assert dataset.corpus["d3"].text == ""


def test_hub_query_rows_are_validated(empty_hf_cache, fake_hub, queries):
    rows = [{"_id": k, "text": v} for k, v in queries.items()]
    rows.append({"_id": "q1", "text": "a duplicate"})  # after q1..q6: line 7
    fake_hub(query_rows=rows)
    with pytest.raises(DataError) as info:
        load_data("vinven7/FormBench", "sample", ["test"])
    label = "hf://datasets/vinven7/FormBench/formbench-sample/queries.jsonl"
    assert (info.value.path, info.value.line, info.value.field) == (label, 7, "_id")
    assert "first on line 1" in str(info.value)


def test_hub_qrels_are_validated_against_hub_rows(empty_hf_cache, fake_hub, tmp_path):
    fake_hub(qrels_text={"test": "query-id\tcorpus-id\tscore\nq1\td1\t3\nq2\tnope\t3\n"})
    with pytest.raises(DataError) as info:
        load_data("vinven7/FormBench", "structured", ["test"])
    assert info.value.path == str(tmp_path / "hub-files" / "test.tsv")
    assert (info.value.line, info.value.field) == (3, "corpus-id")


def test_hub_failure_becomes_one_data_error(empty_hf_cache, monkeypatch):
    def unreachable(*args, **kwargs):
        raise ConnectionError("no route to host")

    monkeypatch.setattr(datasets, "load_dataset", unreachable)
    with pytest.raises(DataError) as info:
        load_data("someone/OtherSet", "main", ["test"])
    message = str(info.value)
    assert info.value.path == "hf://datasets/someone/OtherSet/main"
    assert "ConnectionError: no route to host" in message
    assert "hf download someone/OtherSet --repo-type dataset --include 'main/*'" in message
    assert "--data data/OtherSet/main" in message
    assert isinstance(info.value.__cause__, ConnectionError)


def test_a_hub_corpus_on_the_arrow_store_equals_the_dict_and_is_validated(
        empty_hf_cache, tmp_path, corpus, queries, qrels, local_downloads):
    """The real datasets.load_dataset on a Hub-shaped repo, its corpus read into Arrow."""
    from tapt.data.arrow_corpus import ArrowCorpus, list_corpus_files

    def mimic(name, records):
        return make_hub_mimic(tmp_path / name, records,
                              [{"_id": k, "text": v} for k, v in queries.items()],
                              {split: qrels_tsv(j) for split, j in qrels.items()})

    root = mimic("mimic", records_of(corpus))
    cache = tmp_path / "corpora"
    memory = load_hub(str(root), "formbench-sample", ["test"])
    arrow = load_hub(str(root), "formbench-sample", ["test"], corpus_store="arrow",
                     corpus_cache=cache)
    assert isinstance(arrow.corpus, ArrowCorpus) and not isinstance(memory.corpus, ArrowCorpus)
    assert dict(arrow.corpus) == memory.corpus == corpus
    assert arrow.qrels == memory.qrels
    [entry] = list_corpus_files(cache)
    assert entry.key["source"] == f"hf://datasets/{root}/formbench-sample@main"
    again = load_hub(str(root), "formbench-sample", ["test"], corpus_store="arrow",
                     corpus_cache=cache)
    assert again.corpus.path == arrow.corpus.path  # reused, not written again
    from tapt.data import arrow_corpus

    auto = load_hub(str(root), "formbench-sample", ["test"], corpus_store="auto",
                    corpus_cache=cache)
    assert not isinstance(auto.corpus, ArrowCorpus)  # a small corpus stays a dict
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(arrow_corpus, "AUTO_ARROW_BYTES", 1)
        assert isinstance(load_hub(str(root), "formbench-sample", ["test"],
                                   corpus_store="auto", corpus_cache=cache).corpus,
                          ArrowCorpus)
    records = records_of(corpus)
    records[3]["text"] = "   "
    bad = mimic("bad", records)
    with pytest.raises(DataError) as info:
        load_hub(str(bad), "formbench-sample", ["test"], corpus_store="arrow",
                 corpus_cache=cache)
    label = f"hf://datasets/{bad}/formbench-sample/corpus.jsonl"
    assert (info.value.path, info.value.line, info.value.field) == (label, 4, "text")
    assert len(list_corpus_files(cache)) == 1  # no partial file of the refused corpus
