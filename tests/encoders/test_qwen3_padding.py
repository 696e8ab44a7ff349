"""Qwen3-style last-token pooling reads the last real token (EOS) whatever the padding side.

A known trap: left padding in Qwen3-Embedding training was reported to start at loss ~14
instead of ~3. With the tokenizer appending EOS and sentence-transformers' ``lasttoken``
pooling reading the attention mask, left and right padding must give the same embeddings,
equal to encoding each text alone.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tapt.encoders.loading import ModelSpec, load_sentence_transformer

TEXTS = [
    "pH",
    "Hand cream with xanthan gum.",
    ("The shampoo combines sodium laureth sulfate and cocamidopropyl betaine for a rich foam "
     "that stays stable after three months at 45 C; the pH is adjusted to 5.5 with citric "
     "acid and the formula is preserved with sodium benzoate and potassium sorbate."),
    "Epoxy",
    "A polycarboxylate ether superplasticizer reduces water in the concrete admixture.",
]


@pytest.fixture(scope="module")
def qwen3(tiny_qwen3_path):
    model = load_sentence_transformer(ModelSpec(str(tiny_qwen3_path)))
    assert model[1].pooling_mode == "lasttoken"
    return model


def _encode(model, texts, side, **kwargs):
    previous = model.tokenizer.padding_side
    model.tokenizer.padding_side = side
    try:
        return model.encode(texts, batch_size=len(texts), convert_to_numpy=True, **kwargs)
    finally:
        model.tokenizer.padding_side = previous


def test_texts_really_need_padding(qwen3):
    lengths = {len(ids) for ids in qwen3.tokenizer(TEXTS)["input_ids"]}
    assert max(lengths) > 5 * min(lengths)


@pytest.mark.parametrize("side", ["left", "right"])
def test_padding_side_puts_pads_where_asked(qwen3, side):
    qwen3.tokenizer.padding_side, previous = side, qwen3.tokenizer.padding_side
    try:
        mask = qwen3.tokenizer(TEXTS, padding=True, return_tensors="pt")["attention_mask"]
    finally:
        qwen3.tokenizer.padding_side = previous
    column = 0 if side == "left" else -1
    assert (mask[:, column] == 0).any()


def test_left_and_right_padding_give_the_same_embeddings(qwen3):
    left = _encode(qwen3, TEXTS, "left")
    right = _encode(qwen3, TEXTS, "right")
    alone = np.vstack([_encode(qwen3, [text], "left") for text in TEXTS])
    np.testing.assert_allclose(left, right, atol=1e-5)
    np.testing.assert_allclose(left, alone, atol=1e-5)
    # ... and the texts are not all mapped to one vector.
    assert np.abs(left[0] - left[2]).max() > 1e-3


def test_queries_with_prompt_are_padding_invariant(qwen3):
    left = _encode(qwen3, TEXTS, "left", prompt_name="query")
    right = _encode(qwen3, TEXTS, "right", prompt_name="query")
    np.testing.assert_allclose(left, right, atol=1e-5)


@pytest.mark.parametrize("side", ["left", "right"])
def test_the_pooled_token_is_eos(qwen3, side):
    tokenizer = qwen3.tokenizer
    eos_id = tokenizer.eos_token_id
    assert eos_id is not None and tokenizer.pad_token_id == eos_id
    tokenizer.padding_side, previous = side, tokenizer.padding_side
    try:
        batch = tokenizer(TEXTS, padding=True, return_tensors="pt")
    finally:
        tokenizer.padding_side = previous
    ids, mask = batch["input_ids"], batch["attention_mask"]
    # Index of the last real token of each row, for either padding side.
    positions = torch.arange(ids.shape[1]).expand_as(ids)
    last = torch.where(mask.bool(), positions, -1).max(dim=1).values
    assert (ids[torch.arange(len(TEXTS)), last] == eos_id).all()
    # Every unpadded sequence ends with EOS too.
    assert all(row[-1] == eos_id for row in tokenizer(TEXTS)["input_ids"])


def test_lasttoken_pooling_reads_the_eos_hidden_state(qwen3):
    """The sentence embedding is the (normalised) hidden state at the EOS position."""
    text = TEXTS[1]
    features = qwen3.tokenizer([text], return_tensors="pt")
    assert features["input_ids"][0, -1] == qwen3.tokenizer.eos_token_id
    with torch.no_grad():
        hidden = qwen3[0].model(**features).last_hidden_state[0, -1]
    expected = torch.nn.functional.normalize(hidden, dim=0).numpy()
    np.testing.assert_allclose(qwen3.encode([text])[0], expected, atol=1e-5)
