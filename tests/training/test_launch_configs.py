"""The Accelerate launch configs in recipes/accelerate/ parse with accelerate's own parsers.

Each YAML goes through the path ``accelerate launch --config_file`` takes
(``_validate_launch_command``, which refuses unknown top-level keys and fills defaults); the
FSDP ones through accelerate's ``FullyShardedDataParallelPlugin`` built from the environment
that launcher would set; the DeepSpeed JSONs through transformers' ``HfTrainerDeepSpeedConfig``
("auto" values filled from TrainingArguments as the Trainer does) and then DeepSpeed's own
``DeepSpeedConfig`` (skipped when deepspeed is not installed).
"""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CONFIG_DIR = ROOT / "recipes" / "accelerate"
CONFIGS = sorted(CONFIG_DIR.glob("*.yaml"))
EXPECTED = {  # name -> (distributed mode, processes, machines)
    "single-gpu": ("NO", 1, 1),
    "multi-gpu": ("MULTI_GPU", 8, 1),
    "fsdp": ("FSDP", 8, 1),
    "deepspeed-zero2": ("DEEPSPEED", 8, 1),
    "deepspeed-zero3": ("DEEPSPEED", 8, 1),
    "multi-node": ("FSDP", 16, 2),
}


def _launch_args(config: Path):
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser

    parser = launch_command_parser()
    args = parser.parse_args(["--config_file", str(config), "tapt", "train", "recipe.yaml"])
    args, _, _ = _validate_launch_command(args)
    return args


def test_every_config_is_listed():
    assert {c.stem for c in CONFIGS} == set(EXPECTED)


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.stem)
def test_config_parses_as_accelerate_launch_reads_it(config, monkeypatch):
    from accelerate.commands.config.config_args import ClusterConfig

    monkeypatch.chdir(ROOT)  # the DeepSpeed JSON paths are relative to the repository root
    cluster = ClusterConfig.from_yaml_file(config)  # refuses unknown keys
    mode, processes, machines = EXPECTED[config.stem]
    assert str(cluster.distributed_type).split(".")[-1] == mode
    assert (cluster.num_processes, cluster.num_machines) == (processes, machines)
    assert cluster.mixed_precision == "bf16"
    args = _launch_args(config)
    assert args.num_processes == processes
    assert bool(args.use_fsdp) == (mode == "FSDP")
    assert bool(args.use_deepspeed) == (mode == "DEEPSPEED")
    if mode == "DEEPSPEED":
        assert (ROOT / cluster.deepspeed_config["deepspeed_config_file"]).is_file()


@pytest.mark.parametrize("name", ["fsdp", "multi-node"])
def test_fsdp_config_builds_accelerates_plugin(name, monkeypatch):
    from accelerate.utils import FullyShardedDataParallelPlugin
    from accelerate.utils.launch import prepare_multi_gpu_env

    env = prepare_multi_gpu_env(_launch_args(CONFIG_DIR / f"{name}.yaml"))
    for key, value in env.items():
        if key.startswith(("FSDP_", "ACCELERATE_")):
            monkeypatch.setenv(key, value)
    plugin = FullyShardedDataParallelPlugin()
    assert plugin.fsdp_version == 2
    assert plugin.transformer_cls_names_to_wrap == ["Qwen3DecoderLayer"]
    assert str(plugin.state_dict_type).endswith("FULL_STATE_DICT")  # the export needs it whole
    assert plugin.reshard_after_forward is True  # FSDP2's full shard


@pytest.mark.parametrize("stage", [2, 3])
def test_deepspeed_json_is_valid_once_auto_values_are_filled(stage, tmp_path):
    # transformers' HfTrainerDeepSpeedConfig needs deepspeed itself (not a test dependency:
    # importing it on every run slows every test; `pip install deepspeed` installs on CPU)
    deepspeed_config = pytest.importorskip("deepspeed.runtime.config")
    from transformers import TrainingArguments
    from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig

    config = json.loads((CONFIG_DIR / "deepspeed" / f"zero{stage}.json").read_text())
    hf_config = HfTrainerDeepSpeedConfig(config)
    args = TrainingArguments(output_dir=str(tmp_path), per_device_train_batch_size=16,
                             gradient_accumulation_steps=2, use_cpu=True, report_to=[])
    hf_config.trainer_config_process(args)
    model = types.SimpleNamespace(config=types.SimpleNamespace(hidden_size=1024))
    hf_config.trainer_config_finalize(args, model, num_training_steps=100)
    filled = hf_config.config
    assert filled["train_micro_batch_size_per_gpu"] == 16
    assert filled["gradient_accumulation_steps"] == 2
    assert filled["zero_optimization"]["stage"] == stage
    if stage == 3:  # checkpoints and the export must hold whole 16-bit weights
        assert filled["zero_optimization"]["stage3_gather_16bit_weights_on_model_save"] is True
    checked = deepspeed_config.DeepSpeedConfig(filled)  # pydantic: unknown keys refused
    assert checked.zero_optimization_stage == stage
    assert checked.train_batch_size == 16 * 2


def test_deepspeed_refuses_a_misspelt_key_when_installed():
    deepspeed_config = pytest.importorskip("deepspeed.runtime.config")
    config = json.loads((CONFIG_DIR / "deepspeed" / "zero3.json").read_text())
    config["zero_optimization"]["stage3_gather_16bit_weight_on_model_save"] = True  # typo
    config.update(train_micro_batch_size_per_gpu=1, gradient_accumulation_steps=1,
                  train_batch_size=1, gradient_clipping=1.0)
    config["bf16"] = {"enabled": False}
    for key in ("reduce_bucket_size", "stage3_prefetch_bucket_size",
                "stage3_param_persistence_threshold"):
        config["zero_optimization"][key] = 1000
    with pytest.raises(Exception, match="stage3_gather_16bit_weight_on_model_save"):
        deepspeed_config.DeepSpeedConfig(config)


def test_each_config_header_gives_its_launch_line():
    for config in CONFIGS:
        header = config.read_text().split("\n")
        assert any(f"--config_file recipes/accelerate/{config.name}" in line for line in header)
        yaml.safe_load(config.read_text())
