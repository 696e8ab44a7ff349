"""tapt's encoding path (tokenize once, token-budget batches, background padding) gives what
``SentenceTransformer.encode_query`` / ``encode_document`` give, in any precision asked."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tapt.encoders.loading import ModelSpec, load_sentence_transformer
from tapt.encoders.precision import resolve_dtype
from tapt.encoders.sentence import SentenceTransformerEncoder
from tapt.encoders.st_inference import supports_token_batching, tokenize_once
from tapt.encoders.token_batches import TokenizedTexts, pad_rows, token_budget_batches


def test_token_budget_batches_cover_everything_longest_first_within_budget():
    rng = np.random.default_rng(0)
    for _ in range(50):
        lengths = rng.integers(1, 300, size=int(rng.integers(1, 400)))
        budget = int(rng.integers(1, 2000))
        max_rows = int(rng.integers(1, 64)) if rng.random() < 0.5 else None
        batches = token_budget_batches(lengths, budget, max_rows)
        flat = np.concatenate(batches)
        assert sorted(flat.tolist()) == list(range(len(lengths)))
        assert all(np.diff(lengths[flat]) <= 0)  # longest first
        for batch in batches:
            longest = lengths[batch].max()
            assert len(batch) == 1 or len(batch) * longest <= budget
            assert max_rows is None or len(batch) <= max_rows


@pytest.mark.parametrize("side", ["left", "right"])
def test_padding_matches_the_tokenizer(tiny_qwen3_path, side):
    model = load_sentence_transformer(ModelSpec(str(tiny_qwen3_path), family="qwen3"))
    tokenizer = model.tokenizer
    tokenizer.padding_side = side
    rows = [tokenizer(text)["input_ids"] for text in
            ["a long sentence about xanthan gum in a hand cream", "short", "mid length one"]]
    tokenized = TokenizedTexts.from_lists(rows)
    positions = np.array([2, 0, 1])
    input_ids, mask = pad_rows(tokenized, positions, tokenizer.pad_token_id, left=side == "left")
    expected = tokenizer.pad({"input_ids": [rows[p] for p in positions]}, return_tensors="np")
    np.testing.assert_array_equal(input_ids, expected["input_ids"])
    np.testing.assert_array_equal(mask, expected["attention_mask"])


@pytest.mark.parametrize("model_fixture,family", [("tiny_qwen3_path", "qwen3"),
                                                   ("tiny_bert_path", "default")])
def test_fast_path_equals_sentence_transformers(request, tiny_texts, model_fixture, family):
    path = request.getfixturevalue(model_fixture)
    model = load_sentence_transformer(ModelSpec(str(path), family=family,
                                                document_prompt="passage: "))
    assert supports_token_batching(model)
    encoder = SentenceTransformerEncoder(model, max_tokens_per_batch=200)  # many small batches
    batches = list(encoder.encode_stream(tiny_texts, "document"))
    assert len(batches) > 3
    np.testing.assert_allclose(encoder.encode_queries(tiny_texts),
                               model.encode_query(tiny_texts), atol=1e-5)
    np.testing.assert_allclose(encoder.encode_corpus(tiny_texts),
                               model.encode_document(tiny_texts), atol=1e-5)
    # Token counts come from the same tokenization, prompt and EOS included.
    expected = sum(len(model.tokenizer("passage: " + text, truncation=True,
                                       max_length=model.max_seq_length)["input_ids"])
                   for text in tiny_texts)
    assert sum(batch.tokens for batch in batches) == expected == encoder.count_tokens(tiny_texts)


def test_truncation_to_the_maximum_length(tiny_bert_path):
    model = load_sentence_transformer(ModelSpec(str(tiny_bert_path), max_seq_length=8))
    text = "calcium carbonate filler in a primer with a wetting agent and a defoamer"
    tokenized = tokenize_once(model, [text, "short"], prompt=None, task="document")
    assert tokenized.lengths.tolist()[0] == 8
    np.testing.assert_allclose(SentenceTransformerEncoder(model).encode_corpus([text]),
                               model.encode_document([text]), atol=1e-5)


def test_fallback_for_models_the_fast_path_cannot_serve(tiny_bert_path, tiny_texts,
                                                        monkeypatch):
    from tapt.encoders import st_inference

    model = load_sentence_transformer(ModelSpec(str(tiny_bert_path)))
    monkeypatch.setattr(st_inference, "supports_token_batching", lambda model: False)
    encoder = SentenceTransformerEncoder(model)
    np.testing.assert_allclose(encoder.encode_corpus(tiny_texts),
                               model.encode_document(tiny_texts), atol=1e-6)
    assert sum(b.positions.size for b in encoder.encode_stream(tiny_texts)) == len(tiny_texts)


def test_auto_dtype_is_float32_without_a_cuda_gpu():
    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is present")
    assert resolve_dtype("auto") == "float32"
    assert resolve_dtype("auto", "cuda:0") == "float32"  # no GPU: never bf16
    assert resolve_dtype("bfloat16") == "bfloat16"
    with pytest.raises(ValueError, match="dtype must be one of"):
        resolve_dtype("fp8")


def test_bf16_encoding_of_a_float32_model_leaves_its_weights_alone(tiny_qwen3_path, tiny_texts):
    model = load_sentence_transformer(ModelSpec(str(tiny_qwen3_path), family="qwen3"))
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    full = SentenceTransformerEncoder(model, dtype="float32").encode_corpus(tiny_texts)
    half = SentenceTransformerEncoder(model, dtype="bfloat16")
    assert half.compute_dtype == "bfloat16"
    reduced = half.encode_corpus(tiny_texts)
    for name, p in model.named_parameters():
        assert p.dtype == torch.float32
        torch.testing.assert_close(p, before[name], rtol=0, atol=0)
    assert not np.array_equal(full, reduced)  # bf16 really ran
    cosine = (full * reduced).sum(1) / np.linalg.norm(full, axis=1) / np.linalg.norm(reduced,
                                                                                      axis=1)
    assert cosine.min() > 0.99


def test_a_bf16_load_runs_in_bf16(tiny_bert_path, tiny_texts):
    encoder = SentenceTransformerEncoder.load(ModelSpec(str(tiny_bert_path), dtype="bfloat16"))
    assert next(encoder.model.parameters()).dtype == torch.bfloat16
    assert encoder.compute_dtype == "bfloat16"
    embeddings = encoder.encode_corpus(tiny_texts)
    assert embeddings.dtype == np.float32 and np.isfinite(embeddings).all()
