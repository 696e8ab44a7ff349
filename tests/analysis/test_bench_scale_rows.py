"""benchmarks/bench_scale.py --show: rows an earlier --json run wrote are read back checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GIB = 2**30


@pytest.fixture
def bench_scale(benchmark_module):
    return benchmark_module("bench_scale")


def row(**changes) -> dict:
    """A row as a --json run writes it (the shape of ``measure`` plus ``parts``)."""
    return {"store": "arrow", "peak": {"VmRSS": GIB, "VmHWM": 2 * GIB, "RssAnon": GIB,
                                       "RssFile": GIB // 2},
            "wall_s": 125.0, "arrow_built": True,
            "timings": {"passages_per_s": 812.5, "tokens_per_s": 1.1e6,
                        "corpus_tokens": 130_000_000},
            "passages": 100_000, "queries": 200, "ndcg": 0.0123,
            "parts": {"corpus.jsonl": 0.61, "index (float32)": 0.38}} | changes


def write(path: Path, rows) -> Path:
    path.write_text(json.dumps(rows), encoding="utf-8")
    return path


def test_rows_it_wrote_are_shown(bench_scale, tmp_path, capsys):
    path = write(tmp_path / "100k.json", [row(), row(store="memory", arrow_built=False)])
    assert bench_scale.read_rows(path) == [row(), row(store="memory", arrow_built=False)]
    assert bench_scale.main(["--show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "100,000" in out and "2.00" in out  # the passages and the peak RSS in GiB


@pytest.mark.parametrize(("rows", "says"), [
    ({"passages": 1}, "non-empty list of rows"),
    ([], "non-empty list of rows"),
    ([row(), 3], "row 2: not a JSON object"),
    ([row(passages=0)], "row 1: field 'passages'"),
    ([row(wall_s=0)], "row 1: field 'wall_s'"),
    ([row(ndcg=1.5)], "row 1: field 'ndcg'"),
    ([row(store=None)], "'store' (text)"),
    ([row(peak={"VmHWM": 1, "RssAnon": 1})], "peak: field 'RssFile'"),
    ([row(timings={"passages_per_s": float("nan")})], "timings: field 'passages_per_s'"),
    ([row(parts={"index (float32)": "0.4"})], "parts: field 'index (float32)'"),
    ([row(parts=[])], "field 'parts': expected an object"),
])
def test_a_damaged_rows_file_is_refused_naming_row_and_field(bench_scale, tmp_path, capsys,
                                                             rows, says):
    path = write(tmp_path / "rows.json", rows)
    with pytest.raises(bench_scale.StoredFileError, match="rows.json") as caught:
        bench_scale.read_rows(path)
    assert says in str(caught.value)
    assert bench_scale.main(["--show", str(path)]) == 2
    captured = capsys.readouterr()
    assert says in captured.err and "Traceback" not in captured.err


def test_a_rows_file_cut_short_is_refused(bench_scale, tmp_path, capsys):
    path = tmp_path / "rows.json"
    path.write_text(json.dumps([row()])[:40], encoding="utf-8")
    assert bench_scale.main(["--show", str(path)]) == 2
    assert "at line 1); bench_scale.py --json rows expected" in capsys.readouterr().err
