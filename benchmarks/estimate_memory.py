#!/usr/bin/env python
"""Training memory per GPU of the Qwen3-Embedding sizes under each launch config.

    .venv/bin/python benchmarks/estimate_memory.py [--gpus 8] [--gpu-memory-gb 80]

Builds each architecture on the meta device from its published config values (no download),
measures it with accelerate's ``calculate_maximum_sizes`` and ``estimate_training_usage`` (the
figures ``accelerate estimate-memory`` prints: bf16 mixed precision with AdamW, batch size 1,
activations excluded), and divides the states the way each config in ``recipes/accelerate/``
shards them. Activations come on top and grow with tokens per batch: measure them with
``benchmarks/gpu_check.sh``.
"""

from __future__ import annotations

import argparse

# Published config.json values of Qwen/Qwen3-Embedding-{0.6B,4B,8B}.
_KEYS = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
         "num_key_value_heads")
QWEN3_EMBEDDING = {
    "Qwen3-Embedding-0.6B": dict(zip(_KEYS, (1024, 3072, 28, 16, 8))),
    "Qwen3-Embedding-4B": dict(zip(_KEYS, (2560, 9728, 36, 32, 8))),
    "Qwen3-Embedding-8B": dict(zip(_KEYS, (4096, 12288, 36, 32, 8))),
}
GB = 1024 ** 3


def training_states(name: str) -> dict[str, float]:
    """Bytes of weights, gradients and optimizer state of one model (accelerate's estimate)."""
    from accelerate import init_empty_weights
    from accelerate.commands.estimate import estimate_training_usage
    from accelerate.utils import calculate_maximum_sizes
    from transformers import AutoModel, Qwen3Config

    config = Qwen3Config(vocab_size=151669, head_dim=128, tie_word_embeddings=True,
                         **QWEN3_EMBEDDING[name])
    with init_empty_weights():
        model = AutoModel.from_config(config)
    total, _largest = calculate_maximum_sizes(model)
    usage = estimate_training_usage(total, "bfloat16")
    params = sum(p.numel() for p in model.parameters())
    return {"params": params, "model": usage["model"], "gradients": usage["gradients"],
            "optimizer": usage["optimizer"]}


def per_gpu(states: dict[str, float], gpus: int) -> dict[str, float]:
    """Per-GPU bytes of the states (no activations) under each launch config."""
    model, grads, optim = states["model"], states["gradients"], states["optimizer"]
    return {
        "single-gpu / multi-gpu (DDP)": model + grads + optim,
        "deepspeed-zero2": model + (grads + optim) / gpus,
        "deepspeed-zero3 / fsdp": (model + grads + optim) / gpus,
        "multi-node (FSDP, 2x)": (model + grads + optim) / (2 * gpus),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gpus", type=int, default=8, help="GPUs per machine")
    parser.add_argument("--gpu-memory-gb", type=float, default=80.0,
                        help="memory of one GPU, for the 'fits' column")
    args = parser.parse_args()
    rows = []
    for name in QWEN3_EMBEDDING:
        states = training_states(name)
        for config, size in per_gpu(states, args.gpus).items():
            rows.append((name, f"{states['params'] / 1e9:.2f}B", config, size / GB,
                         size / GB < 0.7 * args.gpu_memory_gb))
    print(f"| model | parameters | launch config ({args.gpus} GPUs/node) | GB per GPU, states "
          f"only | fits {args.gpu_memory_gb:g} GB with room for activations |")
    print("|---|---:|---|---:|---|")
    for name, params, config, gb, fits in rows:
        print(f"| {name} | {params} | {config} | {gb:.1f} | {'yes' if fits else 'no'} |")


if __name__ == "__main__":
    main()
