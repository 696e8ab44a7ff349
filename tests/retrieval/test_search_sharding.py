"""The GPU path of ExactIndex, with faiss's sharded multi-GPU index played by CPU shards."""

from __future__ import annotations

import faiss
import numpy as np

from tapt.retrieval import search

_ALIVE: list = []


class ClonerOptions:
    """faiss-cpu has no GpuMultipleClonerOptions."""

    shard = False


def fake_index_cpu_to_all_gpus(index, co=None, ngpu=2):
    """What faiss builds for a flat index on several GPUs: IndexShards with successive ids,
    which accepts add() only while empty."""
    assert co is not None and co.shard
    shards = faiss.IndexShards(index.d, True, True)
    parts = [faiss.IndexFlatIP(index.d) for _ in range(ngpu)]
    for part in parts:
        shards.add_shard(part)
    shards.add(index.reconstruct_n(0, index.ntotal))
    _ALIVE.extend(parts)  # the shards must outlive this function
    return shards


def test_sharded_gpu_search_equals_cpu_search_after_batchwise_adds(monkeypatch):
    rng = np.random.default_rng(0)
    corpus, queries = rng.normal(size=(50, 8)), rng.normal(size=(5, 8))
    cpu = search.ExactIndex(8, use_gpu=False)
    monkeypatch.setattr(search, "gpu_count", lambda: 2)
    monkeypatch.setattr(search.faiss, "index_cpu_to_all_gpus", fake_index_cpu_to_all_gpus)
    monkeypatch.setattr(search.faiss, "GpuMultipleClonerOptions", ClonerOptions, raising=False)
    gpu = search.ExactIndex(8)
    assert gpu.on_gpu
    for start in range(0, 50, 16):  # batch by batch, as corpus encoding adds
        cpu.add(corpus[start:start + 16])
        gpu.add(corpus[start:start + 16])
    cpu_scores, cpu_ids = cpu.search(queries, 10)
    gpu_scores, gpu_ids = gpu.search(queries, 10)
    np.testing.assert_array_equal(gpu_ids, cpu_ids)
    np.testing.assert_allclose(gpu_scores, cpu_scores, rtol=1e-6)
    # Adding after a search re-copies the index instead of adding to the sharded one.
    gpu.add(corpus[:2])
    assert gpu.search(queries, 3)[1].shape == (5, 3)
    assert gpu.size == 52
