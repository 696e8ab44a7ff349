"""The on-disk embedding cache: hits equal what was stored, misses are exact, damage is seen."""

from __future__ import annotations

import json
import logging
import mmap
import os
import time

import numpy as np
import pytest

from tapt.encoders.model_digest import model_key
from tapt.retrieval.embedding_cache import EmbeddingCache
from tapt.retrieval.embedding_cache_entries import list_entries, prune


def _rows(n, dim=8, seed=0):
    return np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)


def test_hits_return_the_stored_rows_and_only_changed_texts_miss(tmp_path):
    texts = [f"passage {i}" for i in range(50)]
    rows = _rows(50)
    cache = EmbeddingCache(tmp_path, {"model": "m"})
    cache.put(texts, rows)
    changed = list(texts)
    changed[7] = "passage 7, edited"
    again = EmbeddingCache(tmp_path, {"model": "m"})  # a new process reads the shards
    got, found = again.get(changed)
    assert found.sum() == 49 and not found[7]
    np.testing.assert_array_equal(got[found], rows[found])
    assert (again.hits, again.misses) == (49, 1)


def test_float16_storage_rounds_only(tmp_path):
    rows = _rows(10)
    cache = EmbeddingCache(tmp_path, {"model": "m"}, storage_dtype="float16")
    cache.put([str(i) for i in range(10)], rows)
    got, found = cache.get([str(i) for i in range(10)])
    assert found.all()
    np.testing.assert_allclose(got, rows, atol=2e-3)
    assert cache.shards[0].rows.dtype == np.float16


def test_another_key_shares_nothing(tmp_path):
    EmbeddingCache(tmp_path, {"model": "m", "max_length": 512}).put(["a"], _rows(1))
    _, found = EmbeddingCache(tmp_path, {"model": "m", "max_length": 256}).get(["a"])
    assert not found.any()


def test_a_truncated_shard_is_deleted_and_never_used(tmp_path, caplog):
    cache = EmbeddingCache(tmp_path, {"model": "m"})
    cache.put(["a", "b", "c"], _rows(3))
    rows_file = next(cache.folder.glob("*.rows.npy"))
    with open(rows_file, "r+b") as handle:
        handle.truncate(rows_file.stat().st_size - 8)
    with caplog.at_level(logging.WARNING):
        again = EmbeddingCache(tmp_path, {"model": "m"})
    assert "damaged" in caplog.text
    _, found = again.get(["a", "b", "c"])
    assert not found.any()
    assert not list(cache.folder.glob("shard-*"))  # rebuilt from scratch on the next put


def test_a_shard_without_manifest_is_a_dead_write(tmp_path):
    cache = EmbeddingCache(tmp_path, {"model": "m"})
    cache.put(["a"], _rows(1))
    manifest = next(cache.folder.glob("shard-*.json"))
    manifest.unlink()
    fresh = EmbeddingCache(tmp_path, {"model": "m"})
    assert not fresh.get(["a"])[1].any()
    assert list(cache.folder.glob("shard-*.npy"))  # young: maybe another process writing
    old = time.time() - 7200
    for path in cache.folder.glob("shard-*"):
        os.utime(path, (old, old))
    EmbeddingCache(tmp_path, {"model": "m"})
    assert not list(cache.folder.glob("shard-*"))


def test_put_refuses_mismatched_rows(tmp_path):
    cache = EmbeddingCache(tmp_path, {"model": "m"})
    with pytest.raises(ValueError, match="expected 2 rows"):
        cache.put(["a", "b"], _rows(3))
    cache.put(["a"], _rows(1, dim=8))
    with pytest.raises(ValueError, match="dimension 4"):
        cache.put(["b"], _rows(1, dim=4))


def test_model_key_sees_weights_tokenizer_and_settings(tiny_bert_path):
    import torch
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(tiny_bert_path), device="cpu")
    base = model_key(model, prompt="", max_length=128)
    assert model_key(model, prompt="", max_length=128) == base
    assert model_key(model, prompt="query: ", max_length=128) != base
    assert model_key(model, prompt="", max_length=64) != base
    with torch.no_grad():
        next(model.parameters()).add_(1e-3)
    assert model_key(model, prompt="", max_length=128)["weights"] != base["weights"]


def test_a_hit_equals_a_fresh_encode(tiny_bert_path, tmp_path):
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(tiny_bert_path), device="cpu")
    texts = ["a polymer binder in the coating", "the solvent evaporates", "a pigment"]
    fresh = model.encode(texts, convert_to_numpy=True)
    key = model_key(model, max_length=model.max_seq_length)
    EmbeddingCache(tmp_path, key).put(texts, fresh)
    got, found = EmbeddingCache(tmp_path, model_key(model, max_length=model.max_seq_length)).get(
        texts)
    assert found.all()
    np.testing.assert_array_equal(got, model.encode(texts, convert_to_numpy=True))


def test_ls_and_prune(tmp_path):
    EmbeddingCache(tmp_path, {"model": "old"}).put(["a", "b"], _rows(2))
    EmbeddingCache(tmp_path, {"model": "new"}).put(["a"], _rows(1))
    entries = list_entries(tmp_path)
    assert sorted(e.rows for e in entries) == [1, 2]
    old_folder = next(e.folder for e in entries if e.key["model"] == "old")
    long_ago = time.time() - 40 * 86400
    for path in [old_folder, *old_folder.iterdir()]:
        os.utime(path, (long_ago, long_ago))
    deleted = prune(tmp_path, older_than_days=30)
    assert [e.key["model"] for e in deleted] == ["old"]
    assert [json.loads((e.folder / "key.json").read_text())["model"]
            for e in list_entries(tmp_path)] == ["new"]
    assert prune(tmp_path, keep_bytes=0) and not list_entries(tmp_path)


@pytest.mark.parametrize("record", ["{", "[1]", '{"model": "someone else"}', b"\xff\xfe"])
def test_a_key_whose_record_is_damaged_is_never_pruned(tmp_path, caplog, record):
    """A key folder whose ``key.json`` does not read back as the key its name is the digest
    of (cut short, not an object, another key, not UTF-8) is left alone by ``ls`` and
    ``prune``, with a warning: a damaged record must not make hours of encodings look
    unused and go first."""
    EmbeddingCache(tmp_path, {"model": "kept"}).put(["a", "b"], _rows(2))
    EmbeddingCache(tmp_path, {"model": "fresh"}).put(["a"], _rows(1))
    damaged = next(e.folder for e in list_entries(tmp_path) if e.key["model"] == "kept")
    key_file = damaged / "key.json"
    if isinstance(record, bytes):
        key_file.write_bytes(record)
    else:
        key_file.write_text(record, encoding="utf-8")
    with caplog.at_level("WARNING"):
        assert [e.key["model"] for e in list_entries(tmp_path)] == ["fresh"]
        deleted = prune(tmp_path, keep_bytes=0)
    assert [e.key["model"] for e in deleted] == ["fresh"]
    assert damaged.is_dir() and any(damaged.glob("shard-*"))
    assert "never pruned" in caplog.text


def test_prune_removes_what_a_killed_prune_left_renamed_aside(tmp_path):
    """A prune killed between renaming a key aside and deleting it leaves
    ``.NAME.deleting-PID``, which nothing lists: the next prune removes it, unless its
    process still runs."""
    import subprocess
    import sys

    EmbeddingCache(tmp_path, {"model": "kept"}).put(["a"], _rows(1))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    abandoned = tmp_path / f".k1.deleting-{int(dead.stdout)}"
    running = tmp_path / f".k2.deleting-{os.getpid()}"
    for folder in (abandoned, running):
        folder.mkdir()
        (folder / "shard-00000.rows").write_bytes(b"x" * 100)
    assert prune(tmp_path, older_than_days=30) == []  # nothing stale among the keys
    assert not abandoned.exists()
    assert running.is_dir()  # its prune is still at work
    assert [e.key["model"] for e in list_entries(tmp_path)] == ["kept"]


def test_dense_retrieval_reuses_the_cache_and_encodes_only_changed_passages(tiny_bert_path,
                                                                            tmp_path):
    from tapt.encoders.loading import ModelSpec
    from tapt.encoders.sentence import SentenceTransformerEncoder
    from tapt.retrieval.dense import DenseRetriever

    encoder = SentenceTransformerEncoder.load(ModelSpec(str(tiny_bert_path), device="cpu"))
    ids = [f"d{i}" for i in range(40)]
    texts = [f"passage {i}: the binder and the solvent number {i * 3}" for i in range(40)]
    queries = ["binder 9", "solvent 30", "passage 7"]
    fresh = DenseRetriever(encoder, top_k=40, progress=False).retrieve(
        ids, texts, ["q0", "q1", "q2"], queries)
    cached = DenseRetriever(encoder, top_k=40, progress=False, cache_dir=str(tmp_path))
    cold = cached.retrieve(ids, texts, ["q0", "q1", "q2"], queries)
    warm = cached.retrieve(ids, texts, ["q0", "q1", "q2"], queries)
    assert cold.timings["corpus_from_cache"] == 0 and warm.timings["corpus_from_cache"] == 40
    for run in (cold.run, warm.run):
        assert run == fresh.run  # same scores to the bit: float32 rows
    encoded: list[int] = []
    original = encoder.encode_stream

    def spy(batch_texts, kind="document", batch_size=32):
        if kind == "document":
            encoded.append(len(batch_texts))
        return original(batch_texts, kind, batch_size)

    encoder.encode_stream = spy
    texts[5] = "passage 5, rewritten: a pigment in water"
    changed = cached.retrieve(ids, texts, ["q0", "q1", "q2"], queries)
    assert encoded == [1] and changed.timings["corpus_from_cache"] == 39
    other = SentenceTransformerEncoder.load(ModelSpec(str(tiny_bert_path), device="cpu",
                                                      max_seq_length=16))
    assert DenseRetriever(other, top_k=5, progress=False, cache_dir=str(tmp_path)).retrieve(
        ids, texts, ["q0"], queries[:1]).timings["corpus_from_cache"] == 0


@pytest.mark.skipif(not hasattr(mmap, "MADV_DONTNEED"), reason="no madvise here")
def test_reading_the_rows_in_parts_equals_get_and_drops_the_shards_pages(tmp_path):
    from tapt.util.mapped_file import MappedFile

    texts = [f"passage {i}" for i in range(4000)]
    rows = _rows(4000, dim=512)  # 8 MB in one shard
    EmbeddingCache(tmp_path, {"model": "m"}).put(texts[:3000], rows[:3000])
    cache = EmbeddingCache(tmp_path, {"model": "m"})
    cache.put(texts[3000:], rows[3000:])  # a second shard
    asked = texts[::-1] + ["never stored"]
    hits = cache.lookup(asked)
    assert hits.found.sum() == 4000 and not hits.found[-1]
    shard = cache.shards[0]
    assert isinstance(shard.mapped, MappedFile)
    shard.mapped.release_every = 2**19
    small = cache.shards[1]
    small.mapped.release_every = 2**40  # never by the count: once the whole file was read
    found = np.flatnonzero(hits.found)
    parts = [hits.rows(found[start:start + 500]) for start in range(0, len(found), 500)]
    np.testing.assert_array_equal(np.concatenate(parts), rows[::-1])
    assert shard.mapped.releases >= 5  # ~6 MB read from the first shard, released per 0.5 MiB
    assert small.mapped.releases >= 1  # 2 MB shard: dropped after one full pass
    got, _ = cache.get(asked)
    np.testing.assert_array_equal(got[:-1], rows[::-1])
    with pytest.raises(KeyError, match="1 of the positions"):
        hits.rows(np.array([0, len(asked) - 1]))


def test_manifests_record_digests_and_one_without_them_is_re_encoded(tmp_path, caplog):
    from tapt.util.digests import file_record

    cache = EmbeddingCache(tmp_path, {"model": "m"})
    cache.put(["a", "b"], _rows(2))
    manifest_path = next(cache.folder.glob("shard-*.json"))
    manifest = json.loads(manifest_path.read_text())
    stem = manifest_path.name[:-len(".json")]
    assert manifest["files"] == {
        "rows.npy": file_record(cache.folder / f"{stem}.rows.npy"),
        "digests.npy": file_record(cache.folder / f"{stem}.digests.npy")}
    del manifest["files"]
    manifest_path.write_text(json.dumps(manifest))
    with caplog.at_level(logging.WARNING):
        again = EmbeddingCache(tmp_path, {"model": "m"})
    assert "records no content digests (field 'files')" in caplog.text
    assert not again.get(["a", "b"])[1].any() and not list(cache.folder.glob("shard-*"))


def test_a_shard_is_checked_when_first_hit_and_only_then(tmp_path, caplog):
    first = EmbeddingCache(tmp_path, {"model": "m"})
    first.put(["a"], _rows(1, seed=1))
    first.put(["b"], _rows(1, seed=2))
    rows_a = min(first.folder.glob("shard-*.rows.npy"))
    stored = np.load(rows_a)
    np.save(rows_a, stored + 1)  # same size, other content
    cache = EmbeddingCache(tmp_path, {"model": "m"})
    assert len(cache.shards) == 2  # opening reads the small digests files only
    with caplog.at_level(logging.WARNING):
        got, found = cache.get(["b"])
    assert found.all() and rows_a.exists() and not caplog.text  # shard a not read
    with caplog.at_level(logging.WARNING):
        got, found = cache.get(["a", "b"])
    assert found.tolist() == [False, True] and not rows_a.exists()
    assert f"{rows_a.name}: same size, other content" in caplog.text
    np.testing.assert_array_equal(got[1], _rows(1, seed=2)[0])


def test_a_write_into_a_vanished_folder_warns_and_counts_what_was_not_stored(tmp_path, caplog):
    import shutil

    cache = EmbeddingCache(tmp_path, {"model": "m"})
    shutil.rmtree(cache.folder)
    with caplog.at_level(logging.WARNING):
        cache.put(["a", "b"], _rows(2))
        cache.put(["c"], _rows(1))
    assert cache.unstored == 3 and not cache.shards
    assert caplog.text.count("cannot store") == 1  # one warning, not one per shard


def test_prune_keeps_a_key_while_a_cache_is_open_on_it(tmp_path, caplog):
    busy = EmbeddingCache(tmp_path, {"model": "busy"})
    busy.put(["a"], _rows(1))
    EmbeddingCache(tmp_path, {"model": "idle"}).put(["a"], _rows(1))  # closed when collected
    with caplog.at_level(logging.WARNING):
        deleted = prune(tmp_path, keep_bytes=0)
    assert [e.key["model"] for e in deleted] == ["idle"]
    assert "in use by a running process" in caplog.text
    assert busy.folder.is_dir() and busy.get(["a"])[1].all()
    busy.put(["b"], _rows(1))  # still writable: the folder was never touched
    busy.close()
    assert [e.key["model"] for e in prune(tmp_path, keep_bytes=0)] == ["busy"]
    assert not busy.folder.exists() and not list(tmp_path.iterdir())  # nothing left aside
    with EmbeddingCache(tmp_path, {"model": "busy"}) as fresh:  # a new key folder
        assert fresh.size == 0 and fresh.folder.is_dir()


def test_a_cache_reopened_after_prune_renamed_its_folder_uses_a_fresh_one(tmp_path):
    from tapt.util.cache_entries import InUse

    cache = EmbeddingCache(tmp_path, {"model": "m"})
    cache.put(["a"], _rows(1))
    cache.close()
    (entry,) = list_entries(tmp_path)
    assert entry.delete()
    lock = InUse(entry.path).acquire()  # the folder is made again, and locked
    try:
        assert entry.path.is_dir() and lock.fd is not None
        assert not entry.delete()  # in use now
    finally:
        lock.release()


def test_an_interrupted_writes_files_are_listed_then_cleaned_at_once(tmp_path):
    """A ``.partial`` left by a process that no longer runs (an interrupted encode) is
    counted by ``tapt cache``'s listing and removed the next time the key opens; one of a
    live writer (this process) stays for it to finish."""
    import subprocess
    import sys

    cache = EmbeddingCache(tmp_path, {"model": "m"})
    cache.put(["a"], _rows(1))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    left = cache.folder / f"shard-{time.time_ns():020d}-{dead}.rows.npy.partial"
    left.write_bytes(b"x" * 1000)
    live = cache.folder / f"shard-{time.time_ns():020d}-{os.getpid()}.rows.npy.partial"
    live.write_bytes(b"y" * 10)
    (entry,) = list_entries(tmp_path)
    assert entry.unfinished_bytes == 1010
    EmbeddingCache(tmp_path, {"model": "m"})
    assert not left.exists() and live.exists()
    (entry,) = list_entries(tmp_path)
    assert entry.unfinished_bytes == 10
