"""Exact FAISS search, dense evaluation with predictable encoders, and ``tapt eval`` end to end."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from tapt import DenseRetriever, Encoder, evaluate
from tapt.data.beir import BeirDataset, Passage, load_beir_folder
from tapt.retrieval.metrics import METRIC_KEYS
from tapt.retrieval.search import ExactIndex

CRANFIELD = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "cranfield"


# --- ExactIndex ----------------------------------------------------------------------------

def _brute_force(corpus: np.ndarray, queries: np.ndarray, k: int, normalize: bool):
    if normalize:
        corpus = corpus / np.linalg.norm(corpus, axis=1, keepdims=True)
        queries = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    scores = queries.astype(np.float64) @ corpus.astype(np.float64).T
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(scores, order, axis=1), order


@pytest.mark.parametrize("normalize", [True, False])
def test_exact_index_matches_brute_force(normalize):
    rng = np.random.default_rng(0)
    corpus = rng.normal(size=(300, 24)).astype(np.float32) * rng.uniform(0.1, 5, (300, 1))
    queries = rng.normal(size=(7, 24)).astype(np.float32)
    index = ExactIndex(24, normalize=normalize, use_gpu=False)
    for start in range(0, 300, 64):  # filled batch by batch, like the corpus encoder
        index.add(corpus[start:start + 64])
    assert index.size == 300 and not index.on_gpu
    scores, positions = index.search(queries, top_k=10)
    expected_scores, expected_positions = _brute_force(corpus, queries, 10, normalize)
    assert scores.shape == positions.shape == (7, 10)
    np.testing.assert_array_equal(positions, expected_positions)
    np.testing.assert_allclose(scores, expected_scores, rtol=1e-4, atol=1e-4)
    if normalize:
        assert scores.max() <= 1.0 + 1e-5


def test_raw_inner_product_prefers_long_vectors_cosine_does_not():
    corpus = np.array([[1.0, 0.0], [10.0, 10.0]], dtype=np.float32)
    query = np.array([[1.0, 0.0]], dtype=np.float32)
    raw, cosine = ExactIndex(2, normalize=False), ExactIndex(2, normalize=True)
    raw.add(corpus)
    cosine.add(corpus)
    assert raw.search(query, 1)[1][0, 0] == 1
    assert cosine.search(query, 1)[1][0, 0] == 0


def test_normalising_does_not_touch_the_callers_arrays():
    vectors = np.full((3, 4), 2.0, dtype=np.float32)
    index = ExactIndex(4, normalize=True)
    index.add(vectors)
    index.search(vectors, 2)
    assert (vectors == 2.0).all()


def test_top_k_larger_than_the_index_is_capped():
    index = ExactIndex(8)
    index.add(np.random.default_rng(1).normal(size=(5, 8)))  # float64 is accepted
    scores, positions = index.search(np.ones((2, 8)), top_k=100)
    assert scores.shape == positions.shape == (2, 5)
    assert sorted(positions[0].tolist()) == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("shape", [(3, 7), (3, 9), (8,), (2, 2, 8)])
def test_wrong_shapes_raise(shape):
    index = ExactIndex(8)
    with pytest.raises(ValueError, match=r"expected vectors of shape \(n, 8\)"):
        index.add(np.zeros(shape, dtype=np.float32))
    index.add(np.ones((2, 8), dtype=np.float32))
    with pytest.raises(ValueError, match=r"expected vectors of shape \(n, 8\)"):
        index.search(np.zeros(shape, dtype=np.float32), 1)


def test_searching_an_empty_index_is_an_error():
    with pytest.raises(ValueError, match="empty"):
        ExactIndex(4).search(np.ones((1, 4), dtype=np.float32))


# --- dense evaluation with a predictable encoder -------------------------------------------

class KeywordEncoder(Encoder):
    """Counts keywords: dimension i is how often KEYWORDS[i] occurs. Raw inner product, so a
    query "alpha" scores a passage by its number of "alpha"s. Records every corpus batch."""

    KEYWORDS = ("alpha", "beta", "gamma", "delta")
    name = "keywords"
    normalize = False

    def __init__(self) -> None:
        self.corpus_batches: list[list[str]] = []
        self.query_batches: list[list[str]] = []

    @property
    def embedding_dim(self) -> int:
        return len(self.KEYWORDS)

    def _vectors(self, texts: Sequence[str]) -> np.ndarray:
        return np.array([[text.split().count(word) for word in self.KEYWORDS]
                         for text in texts], dtype=np.float32).reshape(len(texts), -1)

    def encode_queries(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        self.query_batches.append(list(texts))
        return self._vectors(texts)

    def encode_corpus(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        self.corpus_batches.append(list(texts))
        return self._vectors(texts)


def _keyword_dataset() -> BeirDataset:
    corpus = {
        "a3": Passage("alpha alpha alpha"),
        "a2": Passage("alpha gamma", title="alpha"),  # the title counts: "alpha alpha gamma"
        "a1": Passage("alpha gamma gamma"),
        "b2": Passage("beta beta"),
        "b1": Passage("beta delta"),
        "x": Passage("a much longer passage that mentions none of the keywords at all"),
        "y": Passage("gamma"),
    }
    queries = {"q1": "alpha", "q2": "beta", "q3": "delta"}
    qrels = {"test": {"q1": {"a3": 3, "a2": 2, "a1": 1},     # ranked 3 > 2 > 1: perfect
                      "q2": {"b1": 3, "b2": 2}},             # anchor b1 ranked 2nd
             "dev": {"q3": {"b1": 3}}}
    return BeirDataset(corpus=corpus, queries=queries, qrels=qrels, source="memory")


def test_dense_evaluation_gives_the_expected_run_and_metrics():
    dataset = _keyword_dataset()
    report = evaluate(DenseRetriever(KeywordEncoder(), batch_size=3, progress=False),
                      dataset, "test")
    assert report.run["q1"] == {"a3": 3.0, "a2": 2.0, "a1": 1.0, "b2": 0.0, "b1": 0.0,
                                "x": 0.0, "y": 0.0}
    assert report.run["q2"] == {"b2": 2.0, "b1": 1.0, "a3": 0.0, "a2": 0.0, "a1": 0.0,
                                "x": 0.0, "y": 0.0}
    assert set(report.run) == {"q1", "q2"}  # only the split's queries
    binary_q2 = 1 / math.log2(3)
    graded_q2 = (2 + 3 / math.log2(3)) / (3 + 2 / math.log2(3))
    assert report.per_query["q1"] == pytest.approx(
        {"binary_ndcg@10": 1.0, "graded_ndcg@10": 1.0, "mrr@10": 1.0, "recall@100": 1.0})
    assert report.per_query["q2"] == pytest.approx(
        {"binary_ndcg@10": binary_q2, "graded_ndcg@10": graded_q2, "mrr@10": 0.5,
         "recall@100": 1.0})
    assert report.metrics == pytest.approx({
        "binary_ndcg@10": (1 + binary_q2) / 2, "graded_ndcg@10": (1 + graded_q2) / 2,
        "mrr@10": 0.75, "recall@100": 1.0})
    assert report.info["corpus_size"] == report.info["full_corpus_size"] == 7
    assert report.info["num_queries"] == 2 and report.info["model"] == "keywords"


def test_without_titles_the_title_is_not_encoded():
    report = evaluate(DenseRetriever(KeywordEncoder(), progress=False), _keyword_dataset(),
                      "test", with_title=False)
    assert report.run["q1"]["a2"] == 1.0


def test_corpus_is_encoded_longest_first_in_bounded_batches():
    dataset = _keyword_dataset()
    encoder = KeywordEncoder()
    evaluate(DenseRetriever(encoder, batch_size=2, progress=False), dataset, "test")
    batches = encoder.corpus_batches
    assert [len(batch) for batch in batches] == [2, 2, 2, 1]  # never more than batch_size
    seen = [text for batch in batches for text in batch]
    assert sorted(seen) == sorted(p.as_text() for p in dataset.corpus.values())
    lengths = [len(text) for text in seen]
    assert lengths == sorted(lengths, reverse=True)
    assert seen[0].startswith("a much longer passage")
    assert encoder.query_batches == [["alpha", "beta"]]


def test_top_k_limits_the_run():
    report = evaluate(DenseRetriever(KeywordEncoder(), top_k=2, progress=False),
                      _keyword_dataset(), "test")
    assert report.run["q1"] == {"a3": 3.0, "a2": 2.0}
    assert report.metrics["mrr@10"] == 0.75


def test_a_corpus_subset_only_ranks_the_subset():
    dataset = _keyword_dataset()
    encoder = KeywordEncoder()
    report = evaluate(DenseRetriever(encoder, progress=False), dataset, "test",
                      corpus_ids=["a1", "b1", "y"])
    for docs in report.run.values():
        assert set(docs) == {"a1", "b1", "y"}
    assert report.run["q2"]["b1"] == 1.0
    assert report.metrics["mrr@10"] == pytest.approx(0.5)  # q1's anchor a3 is absent: 0
    assert report.info["corpus_size"] == 3 and report.info["full_corpus_size"] == 7
    assert sum(len(batch) for batch in encoder.corpus_batches) == 3


def test_report_dict_json_and_trec_run(tmp_path):
    report = evaluate(DenseRetriever(KeywordEncoder(), progress=False), _keyword_dataset(),
                      "test", info={"note": "x"})
    data = report.to_dict()
    for key in METRIC_KEYS:
        assert key in data and 0.0 <= data[key] <= 1.0
    assert set(METRIC_KEYS) == {"binary_ndcg@10", "graded_ndcg@10", "mrr@10", "recall@100"}
    timings = data["timings"]
    for key in ("corpus_encode_s", "passages_per_s", "query_encode_s",
                "query_encode_ms_per_query", "search_s", "search_ms_per_query", "faiss_gpu"):
        assert key in timings and timings[key] >= 0
    assert "tokens_per_s" not in timings  # KeywordEncoder cannot count tokens
    assert data["evaluated"]["note"] == "x" and data["evaluated"]["split"] == "test"
    assert set(data["per_query"]) == {"q1", "q2"}
    assert "per_query" not in report.to_dict(with_per_query=False)

    report.write_json(tmp_path / "out" / "m.json")
    assert json.loads((tmp_path / "out" / "m.json").read_text())["mrr@10"] == 0.75
    report.write_trec_run(tmp_path / "run.trec", tag="kw")
    lines = (tmp_path / "run.trec").read_text().splitlines()
    assert len(lines) == 14
    first = lines[0].split()
    assert first[:4] == ["q1", "Q0", "a3", "1"] and first[5] == "kw"
    assert float(first[4]) == 3.0
    assert lines[7].split()[:4] == ["q2", "Q0", "b2", "1"]


class TokenCountingEncoder(KeywordEncoder):
    def count_tokens(self, texts):
        return sum(len(text.split()) for text in texts)


def test_tokens_per_second_when_the_encoder_counts_tokens():
    report = evaluate(DenseRetriever(TokenCountingEncoder(), progress=False),
                      _keyword_dataset(), "test")
    assert report.timings["tokens_per_s"] > 0


# --- tapt eval, end to end -----------------------------------------------------------------

def _check_run_file(path: Path, query_ids: set[str], corpus_ids: set[str]) -> list[list[str]]:
    rows = [line.split() for line in path.read_text().splitlines()]
    assert rows
    for row in rows:
        assert len(row) == 6, row
        qid, q0, doc, rank, score, _tag = row
        assert q0 == "Q0" and qid in query_ids and doc in corpus_ids
        assert int(rank) >= 1
        float(score)
    first = [row for row in rows if row[0] == rows[0][0]]
    assert [int(row[3]) for row in first] == list(range(1, len(first) + 1))
    scores = [float(row[4]) for row in first]
    assert scores == sorted(scores, reverse=True)
    return rows


def test_cli_eval_end_to_end(tiny_bert_path, tiny_beir_path, tmp_path):
    from tapt.cli import main

    out, run = tmp_path / "out.json", tmp_path / "run.trec"
    code = main(["eval", "--model", str(tiny_bert_path), "--data", str(tiny_beir_path),
                 "--split", "test", "--output", str(out), "--run", str(run), "--quiet"])
    assert code == 0
    data = json.loads(out.read_text())
    for key in METRIC_KEYS:
        assert 0.0 <= data[key] <= 1.0
    assert data["timings"]["passages_per_s"] > 0 and "tokens_per_s" in data["timings"]
    evaluated = data["evaluated"]
    assert evaluated["model"] == str(tiny_bert_path)
    assert evaluated["data"] == str(tiny_beir_path)
    assert evaluated["split"] == "test"
    dataset = load_beir_folder(tiny_beir_path)
    assert evaluated["corpus_size"] == len(dataset.corpus)
    rows = _check_run_file(run, set(dataset.split("test")), set(dataset.corpus))
    assert {row[5] for row in rows} == {"tiny-bert"}
    assert len(rows) == len(dataset.split("test")) * len(dataset.corpus)  # top-100 > corpus

    # An existing output is not overwritten without --overwrite.
    assert main(["eval", "--model", str(tiny_bert_path), "--data", str(tiny_beir_path),
                 "--output", str(out), "--quiet"]) == 2


def test_cli_eval_with_distractors(tiny_bert_path, tiny_beir_path, tmp_path):
    from tapt.cli import main

    out = tmp_path / "sub.json"
    assert main(["eval", "--model", str(tiny_bert_path), "--data", str(tiny_beir_path),
                 "--split", "dev", "--distractors", "2", "--top-k", "5", "--output", str(out),
                 "--quiet"]) == 0
    evaluated = json.loads(out.read_text())["evaluated"]
    assert evaluated["corpus_size"] == 3 * 3 + 2  # 3 dev queries x 3 judged, 2 distractors
    assert evaluated["top_k"] == 5


# --- a real model on real data -------------------------------------------------------------

class RandomEncoder(Encoder):
    """Embeds each text as a vector seeded by its hash: no signal at all."""

    name = "random"
    embedding_dim = 384

    def _vectors(self, texts):
        rows = []
        for text in texts:
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
            rows.append(np.random.default_rng(seed).normal(size=self.embedding_dim))
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), self.embedding_dim)

    def encode_queries(self, texts, batch_size=32):
        return self._vectors(texts)

    encode_corpus = encode_queries


@pytest.mark.slow
def test_minilm_beats_random_embeddings_on_cranfield(minilm_path):
    if not (CRANFIELD / "corpus.jsonl").is_file():
        pytest.skip(f"Cranfield data not found at {CRANFIELD}")
    from tapt.data.subcorpus import subcorpus_ids
    from tapt.encoders.loading import ModelSpec
    from tapt.encoders.sentence import SentenceTransformerEncoder

    full = load_beir_folder(CRANFIELD, ["test"], require_anchor=False, allow_empty=True)
    test = full.split("test")
    chosen = sorted(q for q, docs in test.items() if max(docs.values()) >= 3)[:20]
    dataset = BeirDataset(corpus=full.corpus, queries=full.queries,
                          qrels={"test": {q: test[q] for q in chosen}}, source=str(CRANFIELD))
    corpus_ids = subcorpus_ids(dataset, "test", distractors=150, seed=0)
    assert 150 < len(corpus_ids) < 400

    minilm = SentenceTransformerEncoder.load(ModelSpec(str(minilm_path), max_seq_length=128))
    learned = evaluate(DenseRetriever(minilm, batch_size=32, progress=False), dataset, "test",
                       corpus_ids=corpus_ids)
    random = evaluate(DenseRetriever(RandomEncoder(), progress=False), dataset, "test",
                      corpus_ids=corpus_ids)

    assert learned.metrics["binary_ndcg@10"] > random.metrics["binary_ndcg@10"] + 0.2, (
        learned.metrics, random.metrics)
    assert learned.metrics["recall@100"] > random.metrics["recall@100"]
    assert learned.timings["tokens_per_s"] > 0
