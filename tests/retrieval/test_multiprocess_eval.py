"""``tapt eval``, ``tapt mine`` and ``tapt analyze geometry`` on two CPU processes (torchrun,
gloo) give what one process gives: each rank encodes a share, rank 0 searches and writes."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tapt.cli import main
from tapt.retrieval.metrics import METRIC_KEYS

pytestmark = pytest.mark.slow


def torchrun(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """``python -m torch.distributed.run --standalone --nproc_per_node 2 -m tapt -- ARGS``
    (``--``: torchrun's parser would read tapt's ``--run`` as its own ``--run-path``)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1",
           "TOKENIZERS_PARALLELISM": "false", "TAPT_EMBEDDING_CACHE": "0"}
    root = Path(__file__).resolve().parents[2]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
         "-m", "tapt", "--", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=300,
        check=False)


def trec_lines(path: Path) -> list[tuple[str, str, int, float]]:
    """(query, passage, rank, score) of each line of a TREC run file."""
    rows = []
    for line in path.read_text().splitlines():
        query, _, passage, rank, score, _ = line.split()
        rows.append((query, passage, int(rank), float(score)))
    return rows


def assert_numbers_close(a, b, where: str = "") -> None:
    """Equal structures whose floats agree to 1e-6 (float32 encodes of different batches)."""
    if isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            assert_numbers_close(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_numbers_close(x, y, f"{where}[{i}]")
    elif isinstance(a, float) and not isinstance(b, str):
        assert math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-6) or \
            (math.isnan(a) and math.isnan(b)), f"{where}: {a} != {b}"
    else:
        assert a == b, where


def test_two_process_eval_equals_one_process(tiny_bert_path, tiny_beir_path, tmp_path):
    common = ["eval", "--model", str(tiny_bert_path), "--data", str(tiny_beir_path),
              "--split", "test", "--top-k", "20", "--quiet"]
    one, two = tmp_path / "one", tmp_path / "two"
    assert main([*common, "--output", str(one / "m.json"), "--run", str(one / "r.trec")]) == 0
    done = torchrun([*common, "--output", str(two / "m.json"), "--run", str(two / "r.trec")],
                    tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.count("metrics written to") == 1  # rank 0 alone prints
    single, double = (json.loads((d / "m.json").read_text()) for d in (one, two))
    for key in METRIC_KEYS:
        assert_numbers_close(single[key], double[key], key)
    assert single["evaluated"] == double["evaluated"]
    assert_numbers_close(single["per_query"], double["per_query"], "per_query")
    ranks_one, ranks_two = trec_lines(one / "r.trec"), trec_lines(two / "r.trec")
    assert [r[:3] for r in ranks_one] == [r[:3] for r in ranks_two]  # the same rankings
    for a, b in zip(ranks_one, ranks_two):
        assert math.isclose(a[3], b[3], abs_tol=1e-5)


def test_two_process_mine_writes_the_same_file(tiny_bert_path, tiny_beir_path, tmp_path):
    common = ["mine", "--data", str(tiny_beir_path), "--retriever", str(tiny_bert_path),
              "--per-query", "3", "--margin", "0.05", "--quiet"]
    assert main([*common, "--output", str(tmp_path / "one.jsonl")]) == 0
    done = torchrun([*common, "--output", str(tmp_path / "two.jsonl")], tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    assert (tmp_path / "one.jsonl").read_bytes() == (tmp_path / "two.jsonl").read_bytes()


def test_two_process_geometry_equals_one_process(tiny_bert_path, tiny_beir_path, tmp_path):
    common = ["analyze", "geometry", "--model", str(tiny_bert_path), "--data",
              str(tiny_beir_path), "--split", "test", "--distractors", "10", "--quiet"]
    assert main([*common, "--output", str(tmp_path / "one.json")]) == 0
    done = torchrun([*common, "--output", str(tmp_path / "two.json")], tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    assert not (tmp_path / "two.json.tmp").exists()
    single, double = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("one", "two"))
    assert_numbers_close(single, double, "geometry")


def test_an_error_on_rank_0_fails_the_launch(tiny_bert_path, tiny_beir_path, tmp_path):
    taken = tmp_path / "m.json"
    taken.write_text("keep")
    done = torchrun(["eval", "--model", str(tiny_bert_path), "--data", str(tiny_beir_path),
                     "--split", "test", "--output", str(taken), "--quiet"], tmp_path)
    assert done.returncode != 0
    assert "exists; pass --overwrite" in done.stdout + done.stderr
    assert taken.read_text() == "keep"
