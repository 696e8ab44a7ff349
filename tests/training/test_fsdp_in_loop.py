"""The in-loop dev evaluator under FSDP on two CPU processes (torchrun, gloo).

- FSDP2 itself (``fully_shard``) runs on gloo/CPU: with the tiny BERT sharded per layer,
  every rank encodes its share through the sharded model, the ranks make the same number
  of (collective) forward passes even when their token-budget batches differ (tapt pads
  with discarded forwards, :mod:`tapt.encoders.collective`), and the metrics equal the
  unsharded model's in one process.
- ``tapt train`` with the environment ``accelerate launch --config_file
  recipes/accelerate/fsdp.yaml`` sets: Accelerate turns FSDP on only for accelerator
  devices (``AcceleratorState`` sets ``DistributedType.FSDP`` for MULTI_GPU/NPU/XPU/...,
  not MULTI_CPU), so on CPU it trains as DDP; the test says so and skips in that case.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tapt.data.beir import load_beir_folder
from tapt.retrieval.in_loop import RetrievalEvaluator

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
MAX_TOKENS = 40
"""A small token budget: many batches, of different counts on the two ranks."""


def launch(script: Path, *args: str, env: dict | None = None, cwd: Path | None = None):
    full_env = {**os.environ, **(env or {}), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1",
                "TOKENIZERS_PARALLELISM": "false",
                "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT),
                                                            os.environ.get("PYTHONPATH")]))}
    return subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
         str(script), *args], env=full_env, cwd=cwd, capture_output=True, text=True,
        timeout=300, check=False)


def test_in_loop_evaluator_through_an_fsdp2_sharded_model(tiny_bert_path, tiny_beir_path,
                                                          tmp_path):
    done = launch(HERE / "fsdp_eval_worker.py", str(tiny_bert_path), str(tiny_beir_path),
                  str(tmp_path / "rank.json"), str(MAX_TOKENS), cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [r["world_size"] for r in ranks] == [2, 2]
    assert ranks[0]["units"] == ranks[1]["units"] > 1  # the layers and the root are sharded
    assert ranks[0]["forwards"] == ranks[1]["forwards"] > 0  # collective forwards agree
    # Each encoding (queries, then passages): own batches + padding = the same on both ranks,
    # and the padding was needed at least once (the shares' batch counts differed).
    for first, second in zip(ranks[0]["padding"], ranks[1]["padding"]):
        assert sum(first) == sum(second)
    assert any(extra for r in ranks for _, extra in r["padding"])
    assert ranks[0]["metrics"] == ranks[1]["metrics"]  # rank 0's, broadcast

    from sentence_transformers import SentenceTransformer

    dataset = load_beir_folder(tiny_beir_path, ["dev"])
    single = RetrievalEvaluator(dataset, "dev", list(dataset.corpus), batch_size=4,
                                dtype="float32", max_tokens_per_batch=MAX_TOKENS)(
        SentenceTransformer(str(tiny_bert_path), device="cpu"))
    assert single.keys() == ranks[0]["metrics"].keys()
    for key, value in single.items():
        assert ranks[0]["metrics"][key] == pytest.approx(value, abs=1e-6), key


def accelerate_fsdp_env() -> dict[str, str]:
    """What accelerate's launcher derives from recipes/accelerate/fsdp.yaml, for tiny BERT
    on CPU (BertLayer units, no mixed precision, no meta-device loading)."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_multi_gpu_env

    args = launch_command_parser().parse_args(
        ["--config_file", str(ROOT / "recipes" / "accelerate" / "fsdp.yaml"), "tapt", "train",
         "recipe.yaml"])
    args, _, _ = _validate_launch_command(args)
    env = {k: v for k, v in prepare_multi_gpu_env(args).items()
           if k.startswith(("FSDP_", "ACCELERATE_"))}
    env.update(FSDP_TRANSFORMER_CLS_TO_WRAP="BertLayer", ACCELERATE_MIXED_PRECISION="no",
               FSDP_CPU_RAM_EFFICIENT_LOADING="false", ACCELERATE_USE_CPU="true")
    return env


def test_tapt_train_with_the_fsdp_launch_config(make_recipe, tmp_path):
    recipe_file, _ = make_recipe("fsdp", training={"max_steps": 2, "eval_steps": 2,
                                                   "per_device_batch_size": 4},
                                 eval={"batch_size": 4})
    records = tmp_path / "records"
    done = launch(HERE / "fsdp_worker.py", str(recipe_file), str(records),
                  env=accelerate_fsdp_env(), cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    ranks = [json.loads((records / f"rank{r}.json").read_text()) for r in (0, 1)]
    evaluations = list(zip(ranks[0]["evaluations"], ranks[1]["evaluations"]))
    assert len(evaluations) == 2  # steps 0 and 2
    for first, second in evaluations:
        assert first["forwards"] == second["forwards"] > 0
        assert first["metrics"] == second["metrics"]  # rank 0's, broadcast
    if not ranks[0]["evaluations"][-1]["sharded"]:
        pytest.skip("accelerate 1.15 enables FSDP only on accelerator devices "
                    "(AcceleratorState sets DistributedType.FSDP for MULTI_GPU/NPU/XPU/..., "
                    "not MULTI_CPU): with ACCELERATE_USE_FSDP=true on CPU it trains as DDP")
    assert ranks[0]["evaluations"][-1]["sharded"] == ranks[1]["evaluations"][-1]["sharded"]
