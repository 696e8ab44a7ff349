"""Two CPU processes (gloo) with torchrun: different batches per rank, gathered negatives,
and in-loop dev metrics equal to a single-process ``tapt eval`` of the same checkpoint."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from two_ranks import torchrun_two

from tapt.cli import main
from tapt.recipe import load_recipe
from tapt.retrieval.metrics import METRIC_KEYS

WORKER = Path(__file__).with_name("ddp_worker.py")


@pytest.mark.slow
def run_two_ranks(recipe_file: Path, records: Path, port: int) -> list[dict]:
    """Train ``recipe_file`` on 2 CPU processes (gloo) with the recording worker; each
    rank's record (world size, batches, ...)."""
    done = torchrun_two([str(WORKER), str(recipe_file), str(records)], port)
    assert done.returncode == 0, done.stderr[-4000:]
    return [json.loads((records / f"rank{r}.json").read_text()) for r in (0, 1)]


def test_two_process_training(make_recipe, tmp_path):
    batch = 4
    recipe_file, output = make_recipe("ddp", training={"max_steps": 4, "eval_steps": 2,
                                                       "per_device_batch_size": batch},
                                      eval={"batch_size": 4})
    ranks = run_two_ranks(recipe_file, tmp_path / "records", port=29533)
    assert [r["world_size"] for r in ranks] == [2, 2]

    # Each rank trained on its own batches: no query appears on both ranks in a step.
    for step, (a, b) in enumerate(zip(ranks[0]["batches"], ranks[1]["batches"])):
        assert not set(a) & set(b), f"step {step}: ranks share queries"
    # Gathered negatives: each local query is scored against both ranks' passages
    # (2 ranks x batch x (positive + hard negative)).
    for r in ranks:
        assert set(r["local_queries"]) == {batch}
        assert set(r["candidates"]) == {2 * batch * 2}
    assert ranks[0]["final"] and not ranks[1]["final"]  # only rank 0 exports

    # In-loop dev metrics (computed with both ranks encoding) == single-process eval.
    recipe = load_recipe(recipe_file)
    in_loop = {e["step"]: e for e in map(json.loads, (output / "metrics.jsonl").read_text()
                                          .splitlines())}
    assert sorted(in_loop) == [0, 2, 4]
    out = tmp_path / "single.json"
    assert main(["eval", "--model", str(output / "checkpoints" / "checkpoint-4"), "--data",
                 recipe.data.path, "--split", "dev", "--distractors",
                 str(recipe.data.dev_distractors), "--seed", str(recipe.data.dev_seed),
                 "--batch-size", str(recipe.eval.batch_size), "--output", str(out),
                 "--quiet"]) == 0
    single = json.loads(out.read_text())
    for key in METRIC_KEYS:
        assert single[key] == pytest.approx(in_loop[4][key], abs=1e-6), key

    # Test metrics (both ranks encoding the full corpus) == single-process eval of final/.
    summary = ranks[0]["summary"]
    assert {"zero-shot test", "TAPT test"} <= set(summary) and ranks[1]["summary"] == {}
    out = tmp_path / "test.json"
    assert main(["eval", "--model", str(output / "final"), "--data", recipe.data.path,
                 "--split", "test", "--batch-size", str(recipe.eval.batch_size),
                 "--output", str(out), "--quiet"]) == 0
    single = json.loads(out.read_text())
    for key in METRIC_KEYS:
        assert single[key] == pytest.approx(summary["TAPT test"][key], abs=1e-6), key


@pytest.mark.slow
def test_accelerate_launch_runs_the_cli_from_the_repository_root(make_recipe):
    """``accelerate launch tapt train ...`` runs ``python tapt train ...`` from the root."""
    recipe_file, output = make_recipe("launched", training={"max_steps": 2, "eval_steps": 2})
    repo = Path(__file__).resolve().parents[2]
    accelerate = Path(sys.executable).with_name("accelerate")
    done = subprocess.run([str(accelerate), "launch", "--num_processes", "1", "tapt", "train",
                           str(recipe_file)], cwd=repo, capture_output=True, text=True,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=600,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (output / "final" / "model.safetensors").is_file()
    assert "TAPT results" in done.stdout


@pytest.mark.slow
def test_a_nan_on_one_rank_stops_every_rank_at_that_step(make_recipe):
    """The non-finite decision is all-reduced: rank 1's NaN stops rank 0 too, at the same
    step, with no hang and no export."""
    recipe_file, output = make_recipe("ddp-nan", training={"max_steps": 4, "eval_steps": 2,
                                                           "per_device_batch_size": 4},
                                      eval={"batch_size": 4})
    done = torchrun_two([str(WORKER.with_name("ddp_nan_worker.py")), str(recipe_file)],
                        29534)
    assert done.returncode != 0
    assert "optimizer step 2 on rank 1" in " ".join(done.stdout.split()), done.stdout[-3000:]
    results = json.loads((output / "results.json").read_text())
    [event] = results["nonfinite_events"]
    assert event["step"] == 2 and event["ranks"] == [1] and len(event["query_ids"]) == 4
    assert not (output / "final").exists()


@pytest.mark.slow
def test_dapt_under_two_processes(make_recipe, tmp_path, tiny_bert_path, synth_path):
    """``tapt dapt`` under torchrun: both ranks train and evaluate, rank 0 writes one
    metrics line per evaluation and the export."""
    output = tmp_path / "dapt-ddp"
    recipe = {"model": {"name": str(tiny_bert_path), "max_seq_length": 64},
              "data": {"path": str(synth_path), "dev_distractors": 10},
              "objective": {"name": "mlm"}, "chunking": {"max_length": 64},
              "training": {"max_steps": 4, "eval_steps": 2, "per_device_batch_size": 4,
                           "bf16": False, "learning_rate": 1e-3, "warmup_ratio": 0.0},
              "eval": {"batch_size": 4}, "output_dir": str(output)}
    path = tmp_path / "dapt-ddp.yaml"
    path.write_text(json.dumps(recipe), encoding="utf-8")  # JSON is YAML
    done = torchrun_two(["-m", "tapt", "dapt", str(path)], 29535)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    steps = [json.loads(line)["step"] for line in
             (output / "metrics.jsonl").read_text().splitlines()]
    assert steps == [0, 2, 4]
    assert (output / "final" / "model.safetensors").is_file()
    assert (output / "final" / "tapt_preset.json").is_file()


@pytest.mark.slow
def test_two_processes_train_on_mined_negatives(make_recipe, tmp_path, tiny_bert_path,
                                                synth_path):
    """Under DDP each query is scored against every rank's passages, mined ones included:
    2 ranks x batch x (positive + hard negative + K mined)."""
    batch, k = 4, 2
    mined = tmp_path / "mined.jsonl"
    assert main(["mine", "--data", str(synth_path), "--retriever", str(tiny_bert_path),
                 "--output", str(mined), "--per-query", str(k), "--margin", "none",
                 "--quiet"]) == 0
    recipe_file, output = make_recipe(
        "ddp-mined", data={"mined_negatives": str(mined), "negatives_per_query": k},
        training={"max_steps": 2, "eval_steps": 2, "per_device_batch_size": batch},
        eval={"batch_size": 4})
    ranks = run_two_ranks(recipe_file, tmp_path / "records", port=29536)
    for r in ranks:
        assert set(r["local_queries"]) == {batch}
        assert set(r["candidates"]) == {2 * batch * (2 + k)}
    assert (output / "final" / "model.safetensors").is_file()


def test_a_run_started_from_python_closes_its_process_group_before_exit(tmp_path):
    """Training called from Python under torchrun (no tapt command around it) destroys the
    process group at exit, before C++ static destructors tear gloo's threads down (which
    aborted ranks with SIGABRT now and then): an atexit handler that runs after tapt's
    finds the group closed on both ranks."""
    done = torchrun_two([str(WORKER.with_name("exit_worker.py")), str(tmp_path)], 29541)
    assert done.returncode == 0, done.stderr[-3000:]
    states = [(tmp_path / f"rank{rank}.txt").read_text(encoding="utf-8") for rank in (0, 1)]
    assert states == ["closed", "closed"]
