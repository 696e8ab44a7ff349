"""The bounded-memory path of a large evaluation: the Arrow corpus and blockwise encoding.

The 1M-passage figures come from ``benchmarks/bench_scale.py``; these tests check, on tiny
data, that the path gives what the dict path and one-block encoding give."""

from __future__ import annotations

import json
import mmap
import shutil

import numpy as np
import pytest

from tapt.data.arrow_corpus import ArrowCorpus, choose_store, corpus_texts, open_arrow_corpus
from tapt.data.beir import DataError, load_beir_folder
from tapt.data.sources import load_data
from tapt.retrieval.metrics import METRIC_KEYS


def _corpus_lines(folder) -> list[str]:
    return (folder / "corpus.jsonl").read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize("with_title", [True, False])
def test_arrow_corpus_gives_the_dict_paths_ids_texts_and_passages(tiny_beir_path, tmp_path,
                                                                  with_title):
    memory = load_beir_folder(tiny_beir_path)
    arrow = load_data(tiny_beir_path, corpus_store="arrow", corpus_cache=tmp_path)
    assert isinstance(arrow.corpus, ArrowCorpus)
    assert list(arrow.corpus) == list(memory.corpus)
    assert dict(arrow.corpus.items()) == memory.corpus
    assert arrow.qrels == memory.qrels and arrow.queries == memory.queries
    ids = list(memory.corpus)
    expected = [memory.corpus[doc_id].as_text(with_title) for doc_id in ids]
    view = corpus_texts(arrow.corpus, ids, with_title)
    assert list(view) == expected == corpus_texts(memory.corpus, ids, with_title)
    assert view[3] == expected[3] and view[-1] == expected[-1] and view[2:7] == expected[2:7]
    some = ids[::-3]  # a sub-corpus in another order
    assert list(corpus_texts(arrow.corpus, some, with_title)) == [
        memory.corpus[doc_id].as_text(with_title) for doc_id in some]
    with pytest.raises(IndexError):
        view[len(ids)]
    assert "nope" not in arrow.corpus and ids[0] in arrow.corpus


def test_arrow_file_is_reused_until_the_corpus_changes(tiny_beir_path, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(tiny_beir_path, data)
    first = open_arrow_corpus(data / "corpus.jsonl", cache_dir=tmp_path / "cache")
    assert open_arrow_corpus(data / "corpus.jsonl", cache_dir=tmp_path / "cache").path == \
        first.path
    lines = _corpus_lines(data)
    (data / "corpus.jsonl").write_text("\n".join(lines[:-1]) + "\n", encoding="utf-8")
    changed = open_arrow_corpus(data / "corpus.jsonl", cache_dir=tmp_path / "cache")
    assert changed.path != first.path and len(changed) == len(first) - 1
    assert not first.path.exists()  # the stale version is removed


@pytest.mark.parametrize("bad, field, message", [
    ('{"_id": "x1", "title": "t"}', "text", "missing"),
    ('{"_id": "has space", "text": "t"}', "_id", "a space"),
    ('{"_id": "x1", "text": 5}', "text", "expected a string"),
])
def test_arrow_path_refuses_a_bad_line_naming_file_line_and_field(tiny_beir_path, tmp_path,
                                                                  bad, field, message):
    data = tmp_path / "data"
    shutil.copytree(tiny_beir_path, data)
    lines = _corpus_lines(data)
    lines.insert(4, bad)
    (data / "corpus.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DataError) as caught:
        load_data(data, corpus_store="arrow", corpus_cache=tmp_path / "cache")
    err = caught.value
    assert (err.path, err.line, err.field) == (str(data / "corpus.jsonl"), 5, field)
    assert message in str(err)
    assert not list((tmp_path / "cache").glob("*"))  # no partial Arrow file left behind


def test_arrow_path_refuses_a_duplicate_id(tiny_beir_path, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(tiny_beir_path, data)
    lines = _corpus_lines(data)
    (data / "corpus.jsonl").write_text("\n".join([*lines, lines[1]]) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"duplicate id .* \(first on line 2\)") as caught:
        open_arrow_corpus(data / "corpus.jsonl", cache_dir=tmp_path / "cache")
    assert (caught.value.line, caught.value.field) == (len(lines) + 1, "_id")


def test_auto_store_chooses_by_file_size(tiny_beir_path, monkeypatch):
    from tapt.data import arrow_corpus

    corpus = tiny_beir_path / "corpus.jsonl"
    assert choose_store("auto", corpus) == "memory"
    monkeypatch.setattr(arrow_corpus, "AUTO_ARROW_BYTES", corpus.stat().st_size)
    assert choose_store("auto", corpus) == "arrow"
    with pytest.raises(ValueError, match="corpus_store"):
        choose_store("disk", corpus)


def test_blockwise_encoding_gives_the_embeddings_and_rankings_of_one_block(
        tiny_bert_path, tiny_beir_path, tmp_path, monkeypatch):
    from sentence_transformers import SentenceTransformer

    from tapt import DenseRetriever
    from tapt.encoders import st_inference
    from tapt.encoders.sentence import SentenceTransformerEncoder as SentenceEncoder
    from tapt.retrieval.evaluate import evaluate

    model = SentenceTransformer(str(tiny_bert_path), device="cpu")
    dataset = load_data(tiny_beir_path, corpus_store="arrow", corpus_cache=tmp_path)
    texts = corpus_texts(dataset.corpus, list(dataset.corpus))

    def embeddings(**kwargs) -> tuple[np.ndarray, list[np.ndarray]]:
        out = np.full((len(texts), model.get_embedding_dimension()), np.nan, np.float32)
        batches = []
        for batch in st_inference.encode_texts(model, texts, kind="document",
                                               max_tokens=256, **kwargs):
            out[batch.positions] = batch.embeddings
            batches.append(batch.positions)
        return out, batches

    whole, whole_batches = embeddings()
    report = evaluate(DenseRetriever(SentenceEncoder(model), progress=False), dataset, "test")
    monkeypatch.setattr(st_inference, "TOKENIZE_CHUNK", 4)  # blocks of one 4-text chunk
    blocked, blocked_batches = embeddings(block_tokens=1)
    assert len(blocked_batches) > len(whole_batches)  # the blocks really cut the batches
    assert sorted(np.concatenate(blocked_batches).tolist()) == list(range(len(texts)))
    assert all(len(set((positions // 4).tolist())) == 1 for positions in blocked_batches)
    np.testing.assert_allclose(blocked, whole, rtol=1e-5, atol=1e-6)
    monkeypatch.setattr(st_inference, "BLOCK_TOKENS", 1)
    blocked_report = evaluate(DenseRetriever(SentenceEncoder(model), progress=False),
                              dataset, "test")
    for query_id, docs in report.run.items():
        assert list(blocked_report.run[query_id]) == list(docs)
        np.testing.assert_allclose(list(blocked_report.run[query_id].values()),
                                   list(docs.values()), rtol=1e-5, atol=1e-6)
    assert blocked_report.metrics == pytest.approx(report.metrics)


def test_on_an_accelerator_the_next_block_is_tokenized_while_this_one_is_encoded(
        tiny_bert_path, monkeypatch):
    import threading

    from sentence_transformers import SentenceTransformer

    from tapt.encoders import st_inference

    model = SentenceTransformer(str(tiny_bert_path), device="cpu")
    texts = [f"passage {i} on a binder in the coating" for i in range(12)]
    threads: list[str] = []
    tokenizing = [threading.Event() for _ in range(3)]  # block i's tokenization began
    overlapped: list[bool] = []
    tokenize, encode = st_inference.tokenize_once, st_inference.encode_tokenized

    def logged_tokenize(model, chunk, **kwargs):
        tokenizing[len(threads)].set()
        threads.append(threading.current_thread().name)
        return tokenize(model, chunk, **kwargs)

    def logged_encode(model, tokenized, **kwargs):
        yield from encode(model, tokenized, **kwargs)
        block = len(overlapped)
        if block + 1 < len(tokenizing):  # the next block began before this one ended
            overlapped.append(tokenizing[block + 1].wait(timeout=5))

    monkeypatch.setattr(st_inference, "tokenize_once", logged_tokenize)
    monkeypatch.setattr(st_inference, "TOKENIZE_CHUNK", 4)  # blocks of one 4-text chunk
    list(st_inference.encode_texts(model, texts, kind="document", max_tokens=256,
                                   block_tokens=1))
    assert threads == ["MainThread"] * 3  # the default on a CPU: one after the other
    threads.clear()
    tokenizing[:] = [threading.Event() for _ in range(3)]
    monkeypatch.setattr(st_inference, "encode_tokenized", logged_encode)
    monkeypatch.setattr(st_inference, "TOKENIZE_AHEAD", True)  # as on an accelerator
    list(st_inference.encode_texts(model, texts, kind="document", max_tokens=256,
                                   block_tokens=1))
    assert len(threads) == 3 and all(name.startswith("tapt-tokenize") for name in threads)
    assert overlapped == [True, True]

    # Stopping early: blocks of two tokenizer calls; the 3rd call (block 2's first) is
    # held until the consumer has stopped, and block 2's second call must never come.
    calls: list[int] = []
    gate = threading.Event()

    def held_tokenize(model, chunk, **kwargs):
        calls.append(len(chunk))
        if len(calls) == 3:
            gate.wait(timeout=30)
        return tokenize(model, chunk, **kwargs)

    monkeypatch.setattr(st_inference, "tokenize_once", held_tokenize)
    monkeypatch.setattr(st_inference, "encode_tokenized", encode)
    four = tokenize(model, texts[:4], prompt=None, task="document").total_tokens
    stream = st_inference.encode_texts(model, texts * 2, kind="document", max_tokens=256,
                                       block_tokens=int(1.5 * four))
    next(stream)
    stream.close()  # the consumer stops during block 1
    gate.set()
    for thread in threading.enumerate():
        if thread.name.startswith("tapt-tokenize"):
            thread.join(timeout=30)
    assert len(calls) <= 3  # the tokenizer thread stopped inside block 2

    def broken(model, chunk, **kwargs):
        raise ValueError("tokenizer failed")

    monkeypatch.setattr(st_inference, "tokenize_once", broken)
    with pytest.raises(ValueError, match="tokenizer failed"):
        list(st_inference.encode_texts(model, texts, kind="document", max_tokens=256,
                                       block_tokens=1))


def test_cli_eval_arrow_store_gives_the_memory_stores_metrics(tiny_bert_path, tiny_beir_path,
                                                              tmp_path):
    from tapt.cli import main

    results = {}
    for store in ("memory", "arrow"):
        out = tmp_path / f"{store}.json"
        assert main(["eval", "--model", str(tiny_bert_path), "--data", str(tiny_beir_path),
                     "--corpus-store", store, "--corpus-cache", str(tmp_path / "cache"),
                     "--output", str(out), "--quiet"]) == 0
        results[store] = json.loads(out.read_text())
    assert list((tmp_path / "cache").glob("*.arrow"))  # the arrow run really used the store
    for key in METRIC_KEYS:  # same texts, same batches: the same numbers
        assert results["arrow"][key] == results["memory"][key]
    assert results["arrow"]["per_query"] == results["memory"]["per_query"]
    assert results["arrow"]["evaluated"]["corpus_size"] == \
        results["memory"]["evaluated"]["corpus_size"]


def test_cli_eval_dims_on_the_arrow_store_gives_the_memory_stores_widths(
        tiny_bert_path, tiny_beir_path, tmp_path):
    from tapt.cli import main

    results = {}
    for store in ("memory", "arrow"):
        out = tmp_path / f"{store}.json"
        assert main(["eval", "--model", str(tiny_bert_path), "--data", str(tiny_beir_path),
                     "--dims", "8", "32", "--corpus-store", store, "--corpus-cache",
                     str(tmp_path / "cache"), "--output", str(out), "--quiet"]) == 0
        results[store] = json.loads(out.read_text())["dims"]
    assert results["arrow"] == results["memory"]


def _mapped_rss(path) -> int | None:
    """Resident bytes of this process's mappings of ``path`` (Linux ``smaps``)."""
    try:
        with open("/proc/self/smaps") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    total, inside = 0, False
    for line in lines:
        fields = line.split()
        if fields and "-" in fields[0] and len(fields) >= 5:  # a mapping's header line
            inside = line.endswith(str(path))
        elif inside and fields[0] == "Rss:":
            total += int(fields[1]) * 1024
    return total


@pytest.mark.skipif(not hasattr(mmap, "MADV_DONTNEED"), reason="no madvise here")
def test_streaming_the_texts_drops_the_mappings_pages_and_keeps_the_texts(tmp_path,
                                                                           monkeypatch):
    from tapt.data import arrow_corpus

    rng = np.random.default_rng(0)
    words = np.array(["polymer", "ester", "glycol", "silica", "binder", "amine", "resin"])
    folder = tmp_path / "big"
    folder.mkdir()
    texts = {f"P{i}:0": " ".join(rng.choice(words, 1200)) for i in range(3000)}  # ~25 MB
    with open(folder / "corpus.jsonl", "w") as handle:
        handle.writelines(json.dumps({"_id": doc_id, "title": "", "text": text}) + "\n"
                          for doc_id, text in texts.items())
    corpus = open_arrow_corpus(folder / "corpus.jsonl", cache_dir=tmp_path / "cache")
    corpus.mapped.release_every = 2 * 2**20
    monkeypatch.setattr(arrow_corpus, "BATCH_ROWS", 200)  # ~1.4 MB a decode

    read = list(corpus.texts(with_title=False))

    assert read == list(texts.values())  # pages dropped mid-stream fault back in unchanged
    assert corpus.mapped.releases >= 6  # ~21 MB read, released every 2 MB
    resident = _mapped_rss(corpus.path)
    if resident is None:
        pytest.skip("no /proc/self/smaps: resident pages not measurable here")
    size = corpus.path.stat().st_size
    assert resident < size / 3  # at most what was read since the last release (+ slack)
    corpus.mapped.release()
    assert _mapped_rss(corpus.path) < 2**20
    assert corpus["P17:0"].text == texts["P17:0"]  # still readable after a release


def test_cached_corpora_are_listed_with_their_source_and_pruned_by_last_use(tiny_beir_path,
                                                                             tmp_path):
    import os
    import time

    from tapt.data.arrow_corpus import list_corpus_files
    from tapt.util.cache_entries import prune_entries

    other = tmp_path / "other"
    shutil.copytree(tiny_beir_path, other)
    for folder in (tiny_beir_path, other):
        open_arrow_corpus(folder / "corpus.jsonl", cache_dir=tmp_path / "cache")
    (tmp_path / "cache" / "results.arrow").write_bytes(b"not tapt's")  # never listed
    entries = list_corpus_files(tmp_path / "cache")
    passages = len(load_beir_folder(tiny_beir_path).corpus)
    assert sorted(e.key["source"] for e in entries) == sorted(
        str((f / "corpus.jsonl").resolve()) for f in (tiny_beir_path, other))
    assert [e.rows for e in entries] == [passages, passages]
    long_ago = time.time() - 40 * 86400
    for entry in entries:
        os.utime(entry.path, (long_ago, long_ago))
    open_arrow_corpus(other / "corpus.jsonl", cache_dir=tmp_path / "cache")  # a reuse
    deleted = prune_entries(list_corpus_files(tmp_path / "cache"), older_than_days=30)
    assert [e.key["source"] for e in deleted] == [str((tiny_beir_path / "corpus.jsonl")
                                                      .resolve())]
    assert [e.key["source"] for e in list_corpus_files(tmp_path / "cache")] == [
        str((other / "corpus.jsonl").resolve())]
    assert (tmp_path / "cache" / "results.arrow").exists()


@pytest.mark.parametrize("command", ["mine", "score"])
def test_mine_and_score_on_the_arrow_store_write_the_memory_stores_file(command, tiny_beir_path,
                                                                        tiny_bert_path, tmp_path):
    from tapt.cli import main

    flag = "--retriever" if command == "mine" else "--teacher"
    outputs = {}
    for store in ("memory", "arrow"):
        out = tmp_path / f"{command}-{store}.jsonl"
        assert main([command, "--data", str(tiny_beir_path), flag, str(tiny_bert_path),
                     "--output", str(out), "--corpus-store", store, "--corpus-cache",
                     str(tmp_path / "corpora"), "--quiet"]) == 0
        outputs[store] = [json.loads(line) for line in out.read_text().splitlines()]
    assert list((tmp_path / "corpora").glob("*.arrow"))  # the arrow run did read Arrow
    assert outputs["arrow"] == outputs["memory"] and outputs["memory"]


@pytest.mark.parametrize("command", [
    ["ablate", "corpus-size", "--fractions", "0.5", "1.0"],
    ["analyze", "geometry", "--distractors", "5", "--random-per-query", "2", "--pairs", "10"]])
def test_analyses_on_the_arrow_store_give_the_memory_stores_results(command, tiny_beir_path,
                                                                    tiny_bert_path, tmp_path):
    from tapt.cli import main

    results = {}
    for store in ("memory", "arrow"):
        out = tmp_path / f"{store}.json"
        assert main([*command, "--model", f"tiny={tiny_bert_path}", "--data",
                     str(tiny_beir_path), "--output", str(out), "--corpus-store", store,
                     "--corpus-cache", str(tmp_path / "corpora"), "--quiet"]) == 0
        results[store] = json.loads(out.read_text())
    assert list((tmp_path / "corpora").glob("*.arrow"))  # the arrow run did read Arrow
    for result in results.values():  # seconds differ from run to run
        for records in result.get("models", {}).values():
            for record in records:
                record.pop("search_ms_per_query", None)
        result.pop("encoding", None)
        result.pop("timings", None)
    assert results["arrow"] == results["memory"]


def test_the_arrow_file_has_a_digest_record_and_prune_deletes_both(tiny_beir_path, tmp_path):
    from tapt.data.arrow_corpus import list_corpus_files
    from tapt.util.cache_entries import prune_entries
    from tapt.util.digests import check_sidecar, file_digest

    corpus = open_arrow_corpus(tiny_beir_path / "corpus.jsonl", cache_dir=tmp_path / "cache")
    assert check_sidecar(corpus.path) is None
    assert corpus.source_digest == file_digest(tiny_beir_path / "corpus.jsonl")
    (entry,) = list_corpus_files(tmp_path / "cache")
    assert prune_entries([entry], keep_bytes=0) == [entry]
    assert not list((tmp_path / "cache").iterdir())  # the .arrow and its .digest.json
