"""``tapt eval --model openai:...|voyage:...`` end to end against the local fake API: the
result JSON's cost and token accounting, a resumed run served by the cache, retries, clear
errors, and a planted key that appears in no file, output or log."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fake_embedding_api import FakeEmbeddingAPI

from tapt.cli import main
from tapt.data.beir import load_beir_folder
from tapt.retrieval.metrics import METRIC_KEYS

PLANTED = "sk-proj-PLANTED-0123456789abcdef0123456789abcdef0123"


@pytest.fixture
def api(request, monkeypatch):
    provider = getattr(request, "param", "openai")
    server = FakeEmbeddingAPI(provider, key=PLANTED).start()
    env = "OPENAI" if provider == "openai" else "VOYAGE"
    monkeypatch.setenv(f"{env}_API_KEY", PLANTED)
    monkeypatch.setenv(f"{env}_BASE_URL", server.base_url)
    yield server
    server.stop()


def files_with(root: Path, needle: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


def run_eval(args, capsys, caplog) -> tuple[int, str]:
    caplog.set_level(logging.DEBUG)
    code = main(["--verbose", "eval", *args])
    captured = capsys.readouterr()
    return code, captured.out + captured.err + caplog.text


def test_eval_openai_writes_cost_and_resumes_from_the_cache(api, tiny_beir_path, tmp_path,
                                                           capsys, caplog):
    out, run, cache = tmp_path / "out.json", tmp_path / "run.trec", tmp_path / "cache"
    args = ["--model", "openai:text-embedding-3-small", "--data", str(tiny_beir_path),
            "--split", "test", "--cache-dir", str(cache), "--output", str(out),
            "--run", str(run), "--quiet"]
    code, output = run_eval(args, capsys, caplog)
    assert code == 0, output
    data = json.loads(out.read_text())
    for key in METRIC_KEYS:
        assert 0.0 <= data[key] <= 1.0
    dataset = load_beir_folder(tiny_beir_path)
    texts = len(dataset.split("test")) + len(dataset.corpus)
    evaluated = data["evaluated"]
    assert evaluated["model"] == "openai:text-embedding-3-small"
    usage = evaluated["api"]
    assert usage["provider"] == "openai" and usage["model"] == "text-embedding-3-small"
    assert usage["tokens"] == api.billed_tokens > 0
    assert usage["requests"] == len(api.requests) == 2  # queries, then the corpus
    assert usage["texts"] == texts and usage["cache_hits"] == 0
    assert usage["cost_usd"] == pytest.approx(api.billed_tokens * 0.02 / 1e6)
    assert usage["usd_per_million_tokens"] == 0.02 and usage["price_date"]
    assert usage["dimensions"] == 1536 and usage["cache"] == str(cache / "embeddings.sqlite3")
    assert data["timings"]["corpus_tokens"] > 0
    assert f"{usage['tokens']:,} tokens billed" in output

    # The same command again: every embedding from the cache, nothing paid, same metrics.
    code, output2 = run_eval(args + ["--overwrite"], capsys, caplog)
    assert code == 0, output2
    again = json.loads(out.read_text())
    assert len(api.requests) == 2
    assert again["evaluated"]["api"]["cache_hits"] == texts
    assert again["evaluated"]["api"]["tokens"] == 0 and again["evaluated"]["api"]["cost_usd"] == 0
    assert again["evaluated"]["api"]["saved_by_cache_usd"] == pytest.approx(usage["cost_usd"])
    assert {k: again[k] for k in METRIC_KEYS} == {k: data[k] for k in METRIC_KEYS}

    assert not files_with(tmp_path, PLANTED)
    assert PLANTED not in output and PLANTED not in output2
    assert all(r.headers["authorization"] == f"Bearer {PLANTED}" for r in api.requests)


@pytest.mark.parametrize("api", ["voyage"], indirect=True)
def test_eval_voyage_retries_and_records_them(api, tiny_beir_path, tmp_path, capsys, caplog,
                                              monkeypatch):
    monkeypatch.delenv("VOYAGE_BASE_URL")  # --api-base-url instead
    api.fail(429, headers={"Retry-After": "0"})
    api.fail(500, headers={"Retry-After": "0"})
    out = tmp_path / "out.json"
    code, output = run_eval(["--model", "voyage:voyage-3.5", "--truncate-dim", "256",
                             "--api-base-url", api.base_url, "--data", str(tiny_beir_path),
                             "--cache-dir", str(tmp_path / "cache"), "--output", str(out),
                             "--api-rpm", "0", "--api-tpm", "0", "--quiet"], capsys, caplog)
    assert code == 0, output
    usage = json.loads(out.read_text())["evaluated"]["api"]
    assert usage["retries"] == 2 and usage["requests"] == 2 and usage["dimensions"] == 256
    assert usage["cost_usd"] == pytest.approx(api.billed_tokens * 0.06 / 1e6)
    assert usage["limits"]["requests_per_minute"] is None
    assert [r.status for r in api.requests] == [429, 500, 200, 200]
    assert {r.body["input_type"] for r in api.requests[2:]} == {"query", "document"}
    assert all(r.body["output_dimension"] == 256 for r in api.requests)
    assert "HTTP 429" in output and PLANTED not in output
    assert not files_with(tmp_path, PLANTED)


def test_eval_malformed_answer_exits_1_naming_the_provider(api, tiny_beir_path, tmp_path,
                                                           capsys, caplog):
    api.fail(200, body=b'{"data": "oops", "echo": "' + PLANTED.encode() + b'"}')
    code, output = run_eval(["--model", "openai:text-embedding-3-large", "--data",
                             str(tiny_beir_path), "--cache-dir", str(tmp_path / "cache"),
                             "--output", str(tmp_path / "out.json"), "--quiet"], capsys, caplog)
    assert code == 1
    assert "OpenAI text-embedding-3-large: malformed response: no 'data' list" in output
    assert not (tmp_path / "out.json").exists() and PLANTED not in output
    assert not files_with(tmp_path, PLANTED)


def test_eval_without_a_key_fails_before_loading_data(monkeypatch, tmp_path, capsys):
    monkeypatch.delenv("VOYAGE_API_KEY", raising=False)
    code = main(["eval", "--model", "voyage:voyage-4-large", "--data", str(tmp_path / "none"),
                 "--cache-dir", str(tmp_path / "cache")])
    assert code == 2
    assert "set VOYAGE_API_KEY" in capsys.readouterr().out


def test_eval_api_model_in_a_hybrid(api, tiny_beir_path, tmp_path, capsys, caplog):
    out = tmp_path / "out.json"
    code, output = run_eval(["--model", "openai:text-embedding-3-small", "--hybrid", "bm25",
                             "--data", str(tiny_beir_path), "--cache-dir",
                             str(tmp_path / "cache"), "--output", str(out), "--quiet"],
                            capsys, caplog)
    assert code == 0, output
    evaluated = json.loads(out.read_text())["evaluated"]
    assert evaluated["hybrid"]["dense"] == "openai:text-embedding-3-small"
    assert evaluated["api"]["tokens"] == api.billed_tokens
    assert PLANTED not in output and not files_with(tmp_path, PLANTED)
