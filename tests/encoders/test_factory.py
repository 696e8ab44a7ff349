"""tapt.encoders.factory (name or loaded model -> Encoder) and tapt.retrieval.retriever_factory
(bm25 / dense / hybrid), and the data layer's one lenient mapping."""

from __future__ import annotations

import numpy as np
import pytest

from tapt.data.beir import strictness
from tapt.encoders.base import Encoder, TruncatedEncoder
from tapt.encoders.factory import (
    APIOptions,
    EncoderLoader,
    ModelOptions,
    load_model,
    open_encoder,
    wrap_model,
)
from tapt.encoders.sentence import SentenceTransformerEncoder
from tapt.retrieval.bm25 import BM25Retriever
from tapt.retrieval.dense import DenseRetriever
from tapt.retrieval.hybrid import HybridRetriever
from tapt.retrieval.retriever_factory import BM25, HybridOptions, build_retriever


class Stub(Encoder):
    name, embedding_dim = "stub", 4

    def __init__(self) -> None:
        self.closed = 0

    def encode_queries(self, texts, batch_size=32):
        return np.ones((len(texts), 4), dtype=np.float32)

    encode_corpus = encode_queries

    def close(self) -> None:
        self.closed += 1


def test_open_encoder_loads_a_local_model_with_the_options(tiny_bert_path):
    options = ModelOptions(max_seq_length=16, truncate_dim=8, device="cpu",
                           max_tokens_per_batch=64)
    with open_encoder(str(tiny_bert_path), options) as encoder:
        assert isinstance(encoder, TruncatedEncoder)
        assert encoder.name == f"{tiny_bert_path}@8" and encoder.embedding_dim == 8
        inner = encoder.inner
        assert isinstance(inner, SentenceTransformerEncoder)
        assert inner.model.max_seq_length == 16 and inner.max_tokens_per_batch == 64
        assert encoder.encode_queries(["a query"]).shape == (1, 8)


def test_a_bad_family_fails_before_any_weights_load(tiny_bert_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("loaded before the family was checked")

    monkeypatch.setattr(SentenceTransformerEncoder, "load", classmethod(refuse))
    with pytest.raises(ValueError, match="nope"):
        EncoderLoader(str(tiny_bert_path), ModelOptions(family="nope"))


def test_an_api_model_gets_the_api_options_at_once_and_is_closed(monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    api = APIOptions(base_url="http://127.0.0.1:9/v1", cache_dir=tmp_path, concurrency=2,
                     requests_per_minute=0, tokens_per_minute=0)
    loader = EncoderLoader("openai:text-embedding-3-small", ModelOptions(truncate_dim=64), api)
    encoder = loader()  # built by the constructor: no request is made
    assert loader() is encoder
    assert encoder.dimensions == 64 and encoder.concurrency == 2
    assert encoder.base_url == "http://127.0.0.1:9/v1" and encoder.cache is not None
    calls = []
    monkeypatch.setattr(encoder, "close", lambda: calls.append("closed"))
    with loader:
        pass
    assert calls == ["closed"]


def test_an_api_model_without_a_key_fails_at_construction(monkeypatch):
    monkeypatch.delenv("VOYAGE_API_KEY", raising=False)
    with pytest.raises(ValueError, match="VOYAGE_API_KEY"):
        EncoderLoader("voyage:voyage-3.5", api=APIOptions(cache=False))


def test_options_are_checked():
    with pytest.raises(ValueError, match="truncate_dim"):
        ModelOptions(truncate_dim=0)
    with pytest.raises(ValueError, match="concurrency"):
        APIOptions(concurrency=0)
    with pytest.raises(ValueError, match="requests_per_minute"):
        APIOptions(requests_per_minute=float("nan"))


def test_wrap_model_and_load_model(tiny_bert_path):
    model, spec = load_model(str(tiny_bert_path), ModelOptions(device="cpu", dtype="float32",
                                                               max_seq_length=24))
    assert spec.name_or_path == str(tiny_bert_path) and model.max_seq_length == 24
    encoder = wrap_model(model, ModelOptions(dtype=None, truncate_dim=4), name="training")
    assert isinstance(encoder, TruncatedEncoder) and encoder.name == "training@4"
    assert encoder.inner.model is model and encoder.inner.dtype is None
    assert encoder.encode_corpus(["a passage"]).shape == (1, 4)
    with pytest.raises(ValueError, match="openai:MODEL"):
        load_model("openai:text-embedding-3-small")


def test_encoders_are_context_managers_and_truncation_closes_the_inner_one():
    stub = Stub()
    with TruncatedEncoder(stub, 2) as truncated:
        assert truncated.embedding_dim == 2
    assert stub.closed == 1
    with Stub() as plain:
        pass
    assert plain.closed == 1


def test_build_retriever_bm25_dense_and_hybrid():
    bm25 = build_retriever(BM25, top_k=7, k1=1.2, b=0.5)
    assert isinstance(bm25, BM25Retriever) and (bm25.top_k, bm25.k1, bm25.b) == (7, 1.2, 0.5)
    stub = Stub()
    dense = build_retriever(stub, top_k=5, batch_size=3)
    assert isinstance(dense, DenseRetriever) and dense.top_k == 5 and dense.encoder is stub
    hybrid = build_retriever(stub, top_k=5, hybrid=HybridOptions(fusion="linear", alpha=0.3,
                                                                 depth=20))
    assert isinstance(hybrid, HybridRetriever) and hybrid.top_k == 5
    assert (hybrid.dense.top_k, hybrid.sparse.top_k, hybrid.alpha) == (20, 20, 0.3)
    assert build_retriever(stub, top_k=9, hybrid=HybridOptions()).dense.top_k == 9


def test_build_retriever_refuses_what_it_cannot_build():
    with pytest.raises(ValueError, match="bm25 or an encoder"):
        build_retriever("some/model")
    with pytest.raises(ValueError, match="bm25 alone"):
        build_retriever(BM25, hybrid=HybridOptions())
    with pytest.raises(ValueError, match="alpha"):  # HybridRetriever's one check
        build_retriever(Stub(), hybrid=HybridOptions(fusion="linear", alpha=1.5))
    with pytest.raises(ValueError, match="fusion"):
        build_retriever(Stub(), hybrid=HybridOptions(fusion="max"))


def test_strictness_is_the_one_lenient_mapping():
    assert strictness(False) == {"require_anchor": True, "allow_empty": False}
    assert strictness(True) == {"require_anchor": False, "allow_empty": True}
