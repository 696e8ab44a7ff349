"""Quantised corpus indexes (tapt.retrieval.quantized_search) and tapt eval
--embedding-precision / --rescore."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sentence_transformers.util.quantization import quantize_embeddings

from tapt.cli import main
from tapt.retrieval.quantized_search import QuantizedIndex, dequantize
from tapt.retrieval.search import ExactIndex


def separable(seed: int = 0, passages: int = 24, dim: int = 64):
    """Passages with distinct random directions; each query is one passage plus a little
    noise, so its own passage is the clear nearest one."""
    rng = np.random.default_rng(seed)
    corpus = rng.normal(size=(passages, dim)).astype(np.float32)
    queries = (corpus + 0.05 * rng.normal(size=corpus.shape)).astype(np.float32)
    return corpus, queries


@pytest.mark.parametrize("precision, rescore", [
    ("binary", None), ("ubinary", None), ("int8", None),
    # uint8 codes are all positive: their inner product favours rows with large codes
    # everywhere (sentence-transformers' uint8 FAISS scoring does too), so it is rescored
    ("uint8", 4)])
def test_a_quantised_index_finds_the_same_top_passage_as_float_search(precision, rescore):
    corpus, queries = separable()
    exact = ExactIndex(corpus.shape[1])
    exact.add(corpus)
    quantised = QuantizedIndex(corpus.shape[1], precision, rescore_multiplier=rescore)
    for start in range(0, len(corpus), 5):  # batch by batch, as the retriever adds them
        quantised.add(corpus[start:start + 5])
    _, float_top = exact.search(queries, 1)
    scores, quantised_top = quantised.search(queries, 3)
    assert (float_top[:, 0] == np.arange(len(corpus))).all()
    assert (quantised_top[:, 0] == float_top[:, 0]).all()
    assert (np.diff(scores, axis=1) <= 0).all()  # best first: higher scores are better


def test_binary_index_holds_one_bit_and_int8_one_byte_per_dimension():
    corpus, _ = separable(passages=10, dim=64)
    sizes = {}
    for precision in ("binary", "ubinary", "int8", "uint8"):
        index = QuantizedIndex(64, precision)
        index.add(corpus)
        sizes[precision] = index.nbytes
    exact = ExactIndex(64)
    exact.add(corpus)
    assert sizes == {"binary": 10 * 8, "ubinary": 10 * 8, "int8": 10 * 64, "uint8": 10 * 64}
    assert exact.nbytes == 10 * 64 * 4 == 32 * sizes["ubinary"]


@pytest.mark.parametrize("precision", ["int8", "uint8"])
def test_scalar_scores_are_the_inner_products_of_sentence_transformers_codes(precision):
    """The FAISS codes are the quantised values themselves (int8 keeps its sign)."""
    corpus, queries = separable(dim=16)
    index = QuantizedIndex(16, precision, normalize=False)
    index.add(corpus)
    scores, positions = index.search(queries[:4], len(corpus))
    ranges = np.vstack((corpus.min(axis=0), corpus.max(axis=0)))
    rows = quantize_embeddings(corpus, precision, ranges=ranges).astype(np.int64)
    coded = quantize_embeddings(queries[:4], precision, ranges=ranges).astype(np.int64)
    expected = coded @ rows.T
    for query in range(4):
        np.testing.assert_allclose(scores[query], expected[query, positions[query]], rtol=1e-6)
        np.testing.assert_allclose(index.score(queries[query], list(positions[query])),
                                   scores[query], rtol=1e-6)


def test_dequantisation_is_sentence_transformers_own():
    from sentence_transformers.util import quantization

    private = getattr(quantization, "_dequantize_embeddings", None)
    if private is None:
        pytest.skip("sentence-transformers no longer has _dequantize_embeddings")
    corpus, _ = separable(dim=16)
    ranges = np.vstack((corpus.min(axis=0), corpus.max(axis=0)))
    for precision in ("int8", "uint8"):
        codes = quantize_embeddings(corpus, precision, ranges=ranges)
        np.testing.assert_allclose(dequantize(codes, precision, ranges),
                                   private(codes.astype(int), precision, ranges), atol=1e-6)


def test_the_ranges_come_from_the_first_calibration_rows():
    corpus, _ = separable(passages=30, dim=8)
    corpus[20:] *= 10  # later rows fall outside the calibrated ranges: clipped
    index = QuantizedIndex(8, "uint8", normalize=False, calibration_rows=20)
    index.add(corpus[:12])
    assert index.ranges is None and index.index.ntotal == 0  # still waiting for 20 rows
    index.add(corpus[12:])
    assert index.calibrated_on == 20 and index.size == 30
    np.testing.assert_array_equal(index.ranges, np.vstack((corpus[:20].min(axis=0),
                                                           corpus[:20].max(axis=0))))
    codes = index.index.reconstruct_batch(np.arange(20, 30))
    np.testing.assert_array_equal(codes, quantize_embeddings(corpus[20:], "uint8",
                                                             ranges=index.ranges))


def hamming_trap():
    """A query whose relevant passage (0) agrees with it on the one large dimension but
    disagrees on two small ones, and a distractor (1) the other way round: fewer bits
    differ for the distractor, but the float query weighs the large dimension."""
    query = np.array([[3.0, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2]], dtype=np.float32)
    relevant = [1.0, -1.0, -1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    distractor = [-1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    far = [-1.0] * 8
    return query, np.array([relevant, distractor, far], dtype=np.float32)


def test_rescoring_with_the_float_query_recovers_what_hamming_distance_loses():
    query, corpus = hamming_trap()
    exact = ExactIndex(8)
    exact.add(corpus)
    assert exact.search(query, 1)[1][0, 0] == 0
    for precision in ("binary", "ubinary"):
        plain = QuantizedIndex(8, precision)
        rescored = QuantizedIndex(8, precision, rescore_multiplier=2)
        plain.add(corpus)
        rescored.add(corpus)
        assert plain.search(query, 1)[1][0, 0] == 1  # the trap: recall@1 is 0
        assert rescored.search(query, 1)[1][0, 0] == 0  # rescored: recall@1 is 1


def test_rescoring_keeps_or_improves_recall_on_separable_data():
    corpus, queries = separable(passages=60, dim=32, seed=3)
    relevant = np.arange(len(corpus))

    def recall_at(index, k=1):
        index.add(corpus)
        return float((index.search(queries, k)[1] == relevant[:, None]).any(axis=1).mean())

    for precision in ("ubinary", "int8"):
        assert recall_at(QuantizedIndex(32, precision, rescore_multiplier=4)) >= \
            recall_at(QuantizedIndex(32, precision))


def test_eval_records_the_precision_and_the_index_bytes(tiny_bert_path, tiny_beir_path,
                                                        tmp_path):
    results = {}
    for precision, extra in (("float32", ()), ("ubinary", ("--rescore", "4"))):
        out = tmp_path / f"{precision}.json"
        assert main(["eval", "--model", str(tiny_bert_path), "--data", str(tiny_beir_path),
                     "--quiet", "--no-cache", "--embedding-precision", precision, *extra,
                     "--output", str(out)]) == 0
        results[precision] = json.loads(out.read_text())["evaluated"]["search"]
    passages = results["float32"]["index_rows"]
    dim = results["float32"]["dim"]
    assert results["float32"]["embedding_precision"] == "float32"
    assert results["float32"]["index_bytes"] == passages * dim * 4
    assert results["ubinary"]["embedding_precision"] == "ubinary"
    assert results["ubinary"]["rescore_multiplier"] == 4
    assert results["ubinary"]["index_bytes"] == passages * dim // 8


@pytest.mark.parametrize("argv, message", [
    (["--rescore", "4"], "--rescore rescores a quantised index"),
    (["--embedding-precision", "int8", "--search-backend", "torch"], "drop --search-backend"),
    (["--embedding-precision", "binary", "--hybrid", "bm25"], "and --hybrid"),
])
def test_serving_flags_that_do_not_combine_are_refused_before_loading(argv, message,
                                                                      tmp_path, capsys):
    missing_model = tmp_path / "no-such-model"  # never loaded: the flags fail first
    code = main(["eval", "--model", str(missing_model), "--data", str(tmp_path), *argv])
    out = " ".join(capsys.readouterr().out.split())
    assert code == 2 and message in out


def test_deep_rescoring_takes_fewer_queries_at_once(monkeypatch):
    """top_k x multiplier candidates of dim floats per query: the batch shrinks so one
    rescoring array stays under RESCORE_BYTES (1,000 x 100 candidates x 1,024 floats would
    be 26 GB at 64 queries), and the results do not depend on the batch."""
    import tapt.retrieval.quantized_search as quantized

    assert quantized.rescore_batch(400, 384) == quantized.RESCORE_QUERY_BATCH
    for depth in (10_000, 50_000):  # one query of 65,536 candidates is the floor
        assert quantized.rescore_batch(depth, 1024) * depth * 1024 * 4 <= \
            quantized.RESCORE_BYTES
    corpus, queries = separable(passages=40)
    index = QuantizedIndex(corpus.shape[1], "ubinary", rescore_multiplier=4)
    index.add(corpus)
    whole = index.search(queries, 5)
    monkeypatch.setattr(quantized, "RESCORE_BYTES", 20 * 64 * 4 * 3)  # 3 queries a batch
    assert quantized.rescore_batch(20, 64) == 3
    small = index.search(queries, 5)
    assert np.array_equal(whole[1], small[1]) and np.allclose(whole[0], small[0])


def test_int8_rankings_do_not_depend_on_what_the_cache_holds(tiny_bert_path, tiny_beir_path,
                                                             tmp_path):
    """Above the calibration size the ranges come from a seeded sample streamed first:
    a cold run, a run whose cache holds some passages (they used to arrive first and
    calibrate) and a warm run rank alike, and the sample is recorded."""
    from tapt.data.beir import load_beir_folder
    from tapt.encoders.factory import open_encoder
    from tapt.retrieval.dense import DenseRetriever
    from tapt.retrieval.quantized_search import calibration_first

    dataset = load_beir_folder(tiny_beir_path, ["test"])
    ids = list(dataset.corpus)
    texts = [dataset.corpus[d].as_text(True) for d in ids]
    queries = list(dataset.split("test"))
    query_texts = [dataset.queries[q] for q in queries]
    encoder = open_encoder(str(tiny_bert_path))

    def run(cache_dir, corpus_ids=ids, corpus_texts=texts):
        retriever = DenseRetriever(encoder, top_k=5, progress=False, cache_dir=cache_dir,
                                   embedding_precision="int8")
        retriever.calibration_rows = 4
        return retriever.retrieve(corpus_ids, corpus_texts, queries, query_texts)

    cold = run(None)
    cache = str(tmp_path / "cache")
    tail = slice(len(ids) // 2, None)
    run(cache, ids[tail], texts[tail])  # the cache holds the second half
    partly = run(cache)
    warm = run(cache)
    for other in (partly, warm):
        assert other.run == cold.run  # integer scores of the int8 codes: exactly
    assert cold.index["calibration"] == {"sample": "seeded", "seed": 0, "rows": 4,
                                         "passages": len(ids)}
    order = calibration_first(len(ids), 4)
    assert sorted(order.tolist()) == list(range(len(ids)))
    assert order[:4].tolist() == sorted(order[:4].tolist())
