"""TorchExactIndex ranks as faiss IndexFlatIP does (random data has no ties)."""

from __future__ import annotations

import faiss
import numpy as np
import pytest
import torch

from tapt.retrieval.search import ExactIndex
from tapt.retrieval.torch_search import TorchExactIndex


def _data(rows=1000, queries=23, dim=32, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(rows, dim)).astype(np.float32),
            rng.normal(size=(queries, dim)).astype(np.float32))


def _faiss_search(corpus, queries, k, normalize):
    corpus, queries = corpus.copy(), queries.copy()
    if normalize:
        faiss.normalize_L2(corpus)
        faiss.normalize_L2(queries)
    index = faiss.IndexFlatIP(corpus.shape[1])
    index.add(corpus)
    return index.search(queries, k)


@pytest.mark.parametrize("normalize", [True, False])
def test_rankings_equal_faiss_across_chunks_and_shards(normalize):
    corpus, queries = _data()
    # two "devices" (both the CPU) and chunks of 97 rows: 11 chunks, round-robin, last partial;
    # rows added in uneven batches that cross chunk borders
    index = TorchExactIndex(32, normalize=normalize, devices=[torch.device("cpu")] * 2,
                            chunk_rows=97, query_batch=5)
    for start, stop in [(0, 13), (13, 200), (200, 201), (201, 1000)]:
        index.add(corpus[start:stop])
    assert index.size == 1000
    scores, positions = index.search(queries, top_k=50)
    want_scores, want_positions = _faiss_search(corpus, queries, 50, normalize)
    np.testing.assert_array_equal(positions, want_positions)
    np.testing.assert_allclose(scores, want_scores, rtol=1e-5, atol=1e-5)


def test_same_answers_as_exact_index_including_score_and_small_corpora():
    corpus, queries = _data(rows=40)
    torch_index, faiss_index = TorchExactIndex(32, chunk_rows=16), ExactIndex(32)
    torch_index.add(corpus)
    faiss_index.add(corpus)
    _, t_positions = torch_index.search(queries, top_k=100)  # k capped at the 40 rows
    _, f_positions = faiss_index.search(queries, top_k=100)
    assert t_positions.shape == (len(queries), 40)
    np.testing.assert_array_equal(t_positions, f_positions)
    np.testing.assert_allclose(torch_index.score(queries[3], [0, 39, 7]),
                               faiss_index.score(queries[3], [0, 39, 7]), rtol=1e-5, atol=1e-6)


def test_float16_storage_keeps_the_top_of_the_ranking():
    corpus, queries = _data(rows=2000, dim=64)
    index = TorchExactIndex(64, storage_dtype=torch.float16, chunk_rows=512)
    index.add(corpus)
    scores, positions = index.search(queries, top_k=10)
    want_scores, want_positions = _faiss_search(corpus, queries, 10, True)
    np.testing.assert_allclose(scores, want_scores, atol=2e-3)
    overlap = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(positions, want_positions)])
    assert overlap >= 0.9
    assert index._chunks[0].dtype == torch.float16


def test_refusals_name_the_problem():
    index = TorchExactIndex(8)
    with pytest.raises(ValueError, match="empty"):
        index.search(np.zeros((1, 8), np.float32))
    with pytest.raises(ValueError, match=r"shape \(n, 8\)"):
        index.add(np.zeros((2, 5), np.float32))
    with pytest.raises(ValueError, match="top_k"):
        index.search(np.zeros((1, 8), np.float32), top_k=0)
    with pytest.raises(ValueError, match="storage_dtype"):
        TorchExactIndex(8, storage_dtype=torch.int8)


def test_auto_backend_is_faiss_without_gpus_and_named_in_the_retrieval(tiny_bert_path):
    from tapt.encoders.loading import ModelSpec
    from tapt.encoders.sentence import SentenceTransformerEncoder
    from tapt.retrieval.dense import DenseRetriever
    from tapt.retrieval.search import choose_backend, make_index

    assert choose_backend("auto") == "faiss"  # CPU-only torch and faiss-cpu here
    assert make_index(4, backend="torch").backend == "torch"
    with pytest.raises(ValueError, match="search backend"):
        choose_backend("annoy")
    encoder = SentenceTransformerEncoder.load(ModelSpec(str(tiny_bert_path), device="cpu"))
    corpus = [f"passage {i} about binders and solvents number {i * 7}" for i in range(30)]
    queries = ["binder", "solvent 14", "passage 3"]
    results = {}
    for backend in ("faiss", "torch"):
        retriever = DenseRetriever(encoder, top_k=30, progress=False, search_backend=backend)
        retrieval = retriever.retrieve([f"d{i}" for i in range(30)], corpus,
                                       ["q0", "q1", "q2"], queries)
        assert retrieval.search_backend == backend
        results[backend] = retrieval.run
    for query in results["faiss"]:  # the whole corpus: the tiny model has near-ties
        faiss_run, torch_run = results["faiss"][query], results["torch"][query]
        assert faiss_run.keys() == torch_run.keys()
        for doc in faiss_run:
            assert faiss_run[doc] == pytest.approx(torch_run[doc], abs=1e-5)
