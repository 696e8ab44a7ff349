"""``--long-passages``: chunk-mean, chunk-max (MaxSim over windows), the flags, and the
truncation table of ``tapt data stats --tokenizer``."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from tapt import cli
from tapt.cli.inputs import model_options
from tapt.data.stats import token_lengths, tokenizer_counter, truncation_shares
from tapt.encoders.loading import ModelSpec, load_sentence_transformer
from tapt.encoders.long_passages import (
    LongPassageError,
    LongPassages,
    plan_windows,
    window_starts,
)
from tapt.encoders.sentence import SentenceTransformerEncoder
from tapt.retrieval.dense import DenseRetriever

CHUNK = 20


@pytest.fixture(scope="module")
def model(tiny_bert_path):
    return load_sentence_transformer(ModelSpec(str(tiny_bert_path), family="default"))


@pytest.fixture(scope="module")
def words(model, tiny_texts) -> list[str]:
    """Words of the tiny vocabulary that are one token each (so text windows = token
    windows)."""
    found = sorted({w for text in tiny_texts for w in text.lower().split() if w.isalpha()})
    single = [w for w in found
              if len(model.tokenizer(w, add_special_tokens=False)["input_ids"]) == 1]
    assert len(single) > 30
    return single


def long_text(words: list[str], count: int, seed: int) -> str:
    rng = np.random.default_rng(seed)
    return " ".join(rng.choice(words, size=count))


def window_embeddings(model, text: str, size: int, stride: int) -> np.ndarray:
    """Each window's embedding, by running the model on [CLS] window [SEP] ourselves."""
    tokenizer = model.tokenizer
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    rows, was_training = [], model.training
    model.eval()  # no dropout
    for start in window_starts(len(ids), size, stride):
        window = [tokenizer.cls_token_id, *ids[start:start + size], tokenizer.sep_token_id]
        features = {"input_ids": torch.tensor([window]),
                    "attention_mask": torch.ones(1, len(window), dtype=torch.long),
                    "token_type_ids": torch.zeros(1, len(window), dtype=torch.long)}
        with torch.inference_mode():
            rows.append(model(features)["sentence_embedding"][0].float().numpy())
    model.train(was_training)
    return np.stack(rows)


def test_chunk_mean_of_a_short_passage_equals_its_plain_embedding(model, tiny_texts):
    plain = SentenceTransformerEncoder(model).encode_corpus(tiny_texts)
    chunked = SentenceTransformerEncoder(model, long_passages=LongPassages("chunk-mean"))
    np.testing.assert_allclose(chunked.encode_corpus(tiny_texts), plain, atol=1e-6)
    assert chunked.window_stats.split == 0


def test_chunk_mean_is_the_mean_of_the_window_embeddings(model, words, tiny_texts):
    text = long_text(words, 3 * CHUNK - 5, seed=1)  # three windows, the last shorter
    encoder = SentenceTransformerEncoder(
        model, long_passages=LongPassages("chunk-mean", chunk_tokens=CHUNK))
    got = encoder.encode_corpus([tiny_texts[0], text])
    windows = window_embeddings(model, text, CHUNK, CHUNK)
    assert len(windows) == 3
    mean = windows.mean(axis=0)
    np.testing.assert_allclose(got[1], mean / np.linalg.norm(mean), atol=1e-5)  # Normalize
    assert encoder.result_info()["long_passages"] == {
        "mode": "chunk-mean", "chunk_tokens": CHUNK, "chunk_stride": CHUNK, "passages": 2,
        "split": 1, "windows_of_split": 3, "max_windows": 3}


def test_windows_overlap_by_the_stride_and_default_to_the_model_length(model, words):
    text = long_text(words, 300, seed=2)
    plan = plan_windows(model, [text], LongPassages("chunk-max", CHUNK, CHUNK // 2))
    assert plan.stats.windows_of_split == len(window_starts(300, CHUNK, CHUNK // 2))
    np.testing.assert_allclose(  # the first window equals a hand-made one
        SentenceTransformerEncoder(model)._encode_with_st(
            model.encode_document, [" ".join(text.split()[:CHUNK])], 8)[0],
        window_embeddings(model, text, CHUNK, CHUNK // 2)[0], atol=1e-5)
    default = plan_windows(model, [text], LongPassages("chunk-mean"))
    assert default.stats.chunk_tokens == model.max_seq_length - 2  # [CLS] and [SEP]
    assert default.tokenized.lengths.max() == model.max_seq_length
    with pytest.raises(LongPassageError, match="--chunk-tokens 127"):
        plan_windows(model, [text], LongPassages("chunk-mean", chunk_tokens=127))


def test_maxsim_ranks_the_passage_of_the_planted_window_first(model, words, tiny_texts):
    long_ids = ["long-a", "long-b", "long-c"]
    longs = [long_text(words, 5 * CHUNK, seed=seed) for seed in (3, 4, 5)]
    corpus_ids = long_ids + [f"s{i}" for i in range(len(tiny_texts))]
    corpus = longs + list(tiny_texts)
    planted = " ".join(longs[1].split()[2 * CHUNK:3 * CHUNK])  # the third window of long-b
    encoder = SentenceTransformerEncoder(
        model, long_passages=LongPassages("chunk-max", chunk_tokens=CHUNK))
    retriever = DenseRetriever(encoder, top_k=5, progress=False)
    run = retriever.retrieve(corpus_ids, corpus, ["q"], [planted]).run
    ranked = sorted(run["q"], key=run["q"].get, reverse=True)
    assert ranked[0] == "long-b"
    window = window_embeddings(model, longs[1], CHUNK, CHUNK)[2]
    query = SentenceTransformerEncoder(model).encode_queries([planted])[0]
    assert run["q"]["long-b"] == pytest.approx(float(window @ query), abs=1e-5)
    assert run["q"]["long-b"] == pytest.approx(1.0, abs=1e-5)
    assert len(run["q"]) == 5 and len(set(run["q"])) == 5  # distinct passages


def test_chunk_max_ranking_equals_a_brute_force_max_over_windows(model, words, tiny_texts):
    corpus = [long_text(words, n, seed=n) for n in (45, 70, 130, 61)] + list(tiny_texts[:8])
    corpus_ids = [f"p{i}" for i in range(len(corpus))]
    queries = list(tiny_texts[8:14])
    encoder = SentenceTransformerEncoder(
        model, long_passages=LongPassages("chunk-max", chunk_tokens=CHUNK, chunk_stride=15))
    retrieval = DenseRetriever(encoder, top_k=4, progress=False).retrieve(
        corpus_ids, corpus, [f"q{i}" for i in range(len(queries))], queries,
        also_score={"q0": ["p2"]})
    query_vectors = SentenceTransformerEncoder(model).encode_queries(queries)
    best = np.full((len(queries), len(corpus)), -np.inf)
    for batch in encoder.encode_stream(corpus, "document"):
        scores = query_vectors @ batch.embeddings.T
        for column, passage in enumerate(batch.positions):
            best[:, passage] = np.maximum(best[:, passage], scores[:, column])
    for row, run in enumerate(retrieval.run[f"q{i}"] for i in range(len(queries))):
        expected = np.argsort(-best[row], kind="stable")[:4]
        extra = {"p2"} if row == 0 else set()  # also_score adds p2 to q0's run
        assert set(run) == {corpus_ids[p] for p in expected} | extra
        for doc_id, score in run.items():
            assert score == pytest.approx(best[row, corpus_ids.index(doc_id)], abs=1e-5)
    assert retrieval.run["q0"]["p2"] == pytest.approx(best[0, 2], abs=1e-5)  # also_score


def test_chunk_max_refuses_one_vector_per_passage(model):
    encoder = SentenceTransformerEncoder(model, long_passages=LongPassages("chunk-max"))
    with pytest.raises(LongPassageError, match="chunk-max"):
        encoder.encode_corpus(["a passage"])
    assert encoder.cache_key("document") is None  # several rows per text: never cached


@pytest.mark.parametrize("argv", [
    ["--long-passages", "chunk-best"],
    ["--long-passages", "chunk-mean", "--chunk-tokens", "0"],
    ["--long-passages", "chunk-max", "--chunk-stride", "-3"],
    ["--long-passages", "chunk-mean", "--chunk-tokens", "1.5"],
])
def test_bad_flag_values_stop_at_parsing(argv, capsys):
    with pytest.raises(SystemExit) as stop:
        cli.build_parser().parse_args(["eval", "--model", "m", "--data", "d", *argv])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {argv[-2]}:" in err


@pytest.mark.parametrize("command", [["analyze", "geometry"], ["probe"],
                                     ["ablate", "corpus-size"]])
def test_commands_that_need_one_vector_per_passage_refuse_chunk_max(command):
    parser = cli.build_parser()
    base = [*command, "--model", "m", "--data", "d", "--output", "o.json"]
    with pytest.raises(LongPassageError, match="--long-passages chunk-max"):
        model_options(parser.parse_args([*base, "--long-passages", "chunk-max"]))
    chosen = model_options(parser.parse_args([*base, "--long-passages", "chunk-mean"]))
    assert chosen.long_passages == LongPassages("chunk-mean")
    assert model_options(parser.parse_args(["eval", "--model", "m", "--data", "d",
                                            "--long-passages", "chunk-max"])
                         ).long_passages.mode == "chunk-max"


def test_mining_and_eval_accept_every_mode():
    parser = cli.build_parser()
    for mode in ("truncate", "chunk-mean", "chunk-max"):
        args = parser.parse_args(["eval", "--model", "m", "--data", "d",
                                  "--long-passages", mode])
        assert args.long_passages == mode
        args = parser.parse_args(["mine", "--retriever", "m", "--data", "d", "--output",
                                  "o.jsonl", "--long-passages", mode, "--chunk-tokens", "64"])
        assert (args.long_passages, args.chunk_tokens) == (mode, 64)


@pytest.mark.parametrize("options,match", [
    (("truncate", 64, None), "need --long-passages"),
    (("chunk-mean", 32, 64), "--chunk-stride 64 is larger"),
    (("chunk-all", None, None), "--long-passages 'chunk-all'"),
])
def test_bad_combinations_are_refused(options, match):
    with pytest.raises(LongPassageError, match=match):
        LongPassages(*options)


def test_eval_records_the_long_passage_mode_in_the_result(tiny_bert_path, tiny_beir_path,
                                                          tmp_path, monkeypatch):
    monkeypatch.setenv("TAPT_EMBEDDING_CACHE", "0")
    out = tmp_path / "result.json"
    assert cli.main(["eval", "--model", str(tiny_bert_path), "--family", "default",
                     "--data", str(tiny_beir_path), "--quiet", "--output", str(out),
                     "--long-passages", "chunk-max", "--chunk-tokens", "8",
                     "--chunk-stride", "4"]) == 0
    record = json.loads(out.read_text())["evaluated"]["long_passages"]
    assert record["mode"] == "chunk-max"
    assert (record["chunk_tokens"], record["chunk_stride"]) == (8, 4)
    assert 0 < record["split"] <= record["passages"]
    assert record["windows_of_split"] > 2 * record["split"]
    assert cli.main(["eval", "--model", str(tiny_bert_path), "--family", "default",
                     "--data", str(tiny_beir_path), "--quiet",
                     "--long-passages", "chunk-mean", "--chunk-tokens", "500"]) == 2


def test_truncation_shares_of_a_constructed_corpus():
    shares = truncation_shares([10, 20, 30, 40], max_lengths=(15, 40))
    assert shares[15] == {"passages_longer": 0.75, "tokens_dropped": (5 + 15 + 25) / 100}
    assert shares[40] == {"passages_longer": 0.0, "tokens_dropped": 0.0}


def test_data_stats_prints_the_truncation_table(tiny_bert_path, tiny_beir_path, model,
                                                capsys):
    from tapt.data.beir import load_beir_folder

    texts = [p.as_text() for p in load_beir_folder(tiny_beir_path).corpus.values()]
    lengths = token_lengths(texts, tokenizer_counter(model.tokenizer))
    limit = int(np.median(lengths))
    assert cli.main(["data", "stats", str(tiny_beir_path), "--tokenizer", str(tiny_bert_path),
                     "--max-length", str(limit), "8192"]) == 0
    out = capsys.readouterr().out
    share = truncation_shares(lengths, (limit,))[limit]
    assert 0 < share["passages_longer"] < 1 and share["tokens_dropped"] > 0
    rows = [line for line in out.splitlines() if f"{share['passages_longer']:.2%}" in line
            and f"{share['tokens_dropped']:.2%}" in line]
    assert rows and f"{limit:,}" in rows[0]
    assert "0.00%" in next(line for line in out.splitlines() if "8,192" in line)
    assert cli.main(["data", "stats", str(tiny_beir_path), "--max-length", "512"]) == 2


@pytest.mark.parametrize("model_fixture,family", [("tiny_qwen3_path", "qwen3"),
                                                   ("tiny_bert_path", "default")])
def test_each_window_gets_the_prompt_and_special_tokens_a_passage_gets(
        request, tiny_texts, model_fixture, family):
    from tapt.encoders.st_inference import tokenize_once

    path = request.getfixturevalue(model_fixture)
    model = load_sentence_transformer(ModelSpec(str(path), family=family,
                                                document_prompt="passage: "))
    text = " ".join(tiny_texts * 3)
    plain = tokenize_once(model, [text], prompt="passage: ", task="document")
    plan = plan_windows(model, [text], LongPassages("chunk-mean"))
    assert plan.stats.windows_of_split > 2
    rows = [plan.tokenized.ids[plan.tokenized.offsets[i]:plan.tokenized.offsets[i + 1]]
            for i in range(len(plan.tokenized))]
    np.testing.assert_array_equal(rows[0], plain.ids)  # the first window = the truncation
    for row in rows[1:]:
        np.testing.assert_array_equal(row[:3], rows[0][:3])  # prompt (and [CLS]) again
        assert row[-1] == rows[0][-1]  # [SEP] / EOS again
    short = tiny_texts[:6]
    plain_vectors = SentenceTransformerEncoder(model).encode_corpus(short)
    chunked = SentenceTransformerEncoder(model, long_passages=LongPassages("chunk-mean"))
    np.testing.assert_allclose(chunked.encode_corpus(short), plain_vectors, atol=1e-6)
