"""The embedding cache after a Ctrl-C: an interrupted ``tapt eval`` leaves no key folder
holding nothing but its ``in-use.lock`` for ``tapt cache ls`` to count, and what an older
or killed process left is listed for what it is and pruned."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest

from tapt.retrieval import embedding_cache
from tapt.retrieval.embedding_cache import EmbeddingCache
from tapt.retrieval.embedding_cache_entries import list_entries

AREA = "crash safety"


def message_of(capsys) -> str:
    return " ".join(capsys.readouterr().out.split())


def cache_ls(cli, cache_dir, capsys) -> str:
    assert cli.main(["cache", "ls", "--cache-dir", str(cache_dir), "--corpus-cache",
                     str(cache_dir / "corpus")]) == 0
    return message_of(capsys)


@pytest.mark.reliability(
    area=AREA, reader="tapt eval's embedding cache (tapt.retrieval.embedding_cache)",
    fault="Ctrl-C (SIGINT) while tapt eval encodes the corpus, before a shard is stored",
    behaviour="exit 130; the key folder it opened is removed (no lone in-use.lock); tapt "
              "cache ls then lists no key and counts 0 model keys")
def test_an_interrupted_eval_leaves_no_key_for_cache_ls(tiny_bert_path, tiny_beir_path,
                                                        tmp_path, quiet_cli, capsys,
                                                        monkeypatch):
    from tapt.retrieval import dense

    real = dense.stream_embeddings

    def ctrl_c_on_passages(encoder, texts, kind, *args, **kwargs):
        if kind == "document":
            os.kill(os.getpid(), signal.SIGINT)
        return real(encoder, texts, kind, *args, **kwargs)

    monkeypatch.setattr(dense, "stream_embeddings", ctrl_c_on_passages)
    cache_dir = tmp_path / "cache"
    code = quiet_cli.main(["eval", "--model", str(tiny_bert_path), "--data",
                           str(tiny_beir_path), "--split", "test", "--cache-dir",
                           str(cache_dir), "--quiet"])
    assert code == 130, message_of(capsys)
    capsys.readouterr()
    local = cache_dir / "local"
    assert not local.is_dir() or list(local.iterdir()) == []
    assert "0 model keys" in cache_ls(quiet_cli, cache_dir, capsys)


@pytest.mark.reliability(
    area=AREA, reader="embedding cache (tapt.retrieval.embedding_cache.EmbeddingCache)",
    fault="Ctrl-C while a new key's key.json is being written",
    behaviour="the interrupt goes on; the key folder (its in-use.lock, the partial key.json) "
              "is removed")
def test_ctrl_c_while_a_key_is_recorded_leaves_no_folder(tmp_path, monkeypatch):
    real = embedding_cache._atomic_write

    def interrupted(path, text):
        path.with_name(path.name + ".partial").write_text(text[:5], encoding="utf-8")
        raise KeyboardInterrupt

    monkeypatch.setattr(embedding_cache, "_atomic_write", interrupted)
    with pytest.raises(KeyboardInterrupt):
        EmbeddingCache(tmp_path, {"model": "m"})
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setattr(embedding_cache, "_atomic_write", real)
    with EmbeddingCache(tmp_path, {"model": "m"}) as cache:  # the key starts afresh
        cache.put(["a"], np.ones((1, 4), dtype=np.float32))
    assert [entry.rows for entry in list_entries(tmp_path)] == [1]


@pytest.mark.reliability(
    area=AREA, reader="embedding cache close (tapt.util.cache_entries.InUse)",
    fault="two users of one key that caches nothing; the first lets go while the second "
          "still encodes",
    behaviour="the folder stays while the second uses it, and goes when it lets go too")
def test_an_empty_key_stays_while_another_user_holds_it(tmp_path):
    first = EmbeddingCache(tmp_path, {"model": "m"})
    second = EmbeddingCache(tmp_path, {"model": "m"})  # its own lock, as another process's
    first.close()
    assert second.folder.is_dir() and (second.folder / "key.json").is_file()
    second.close()
    assert not second.folder.exists() and list(tmp_path.iterdir()) == []


@pytest.mark.reliability(
    area=AREA, reader="tapt cache ls / prune (tapt.cli.cache)",
    fault="key folders a killed process left: one with key.json and in-use.lock but no "
          "shard, one with only in-use.lock (killed before recording its key)",
    behaviour="ls lists the first as '0 (nothing cached)' and counts it as holding nothing; "
              "prune removes the second, which no listing shows")
def test_what_a_killed_process_left_is_listed_as_such_and_pruned(tmp_path, quiet_cli,
                                                                 capsys):
    root = tmp_path / "local"
    with EmbeddingCache(root, {"model": "kept"}) as cache:
        cache.put(["a", "b"], np.ones((2, 4), dtype=np.float32))
    empty = EmbeddingCache(root, {"model": "killed"})
    empty.in_use.release()  # as a SIGKILL would: the lock goes, the folder stays
    unstarted = root / "0123456789abcdef0123456789abcdef"
    unstarted.mkdir()
    (unstarted / "in-use.lock").write_bytes(b"")

    listed = cache_ls(quiet_cli, tmp_path, capsys)
    assert "0 (nothing cached)" in listed
    assert "2 model keys (1 holding nothing cached)" in listed
    assert quiet_cli.main(["cache", "prune", "--cache-dir", str(tmp_path), "--corpus-cache",
                           str(tmp_path / "corpus"), "--older-than-days", "30"]) == 0
    capsys.readouterr()
    assert not unstarted.exists()
    assert sorted(entry.key["model"] for entry in list_entries(root)) == ["kept", "killed"]
