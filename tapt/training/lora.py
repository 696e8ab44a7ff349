"""LoRA through peft: wrap the backbone for training, restore adapters from checkpoints, and
merge them into the base weights for export.

peft's own ``get_peft_model`` / ``merge_and_unload`` are used rather than
sentence-transformers' ``add_adapter``: that path goes through transformers 5's PEFT
integration, which needs peft >= 0.22, newer than many installs have.
"""

from __future__ import annotations

import logging
from pathlib import Path

from tapt.recipe import LoraSettings

logger = logging.getLogger(__name__)

ADAPTER_WEIGHTS = "adapter_model.safetensors"


def _backbone_module(model):
    """The SentenceTransformer's first module (the Transformer holding the HF model)."""
    module = model[0]
    if not hasattr(module, "model"):
        raise ValueError("LoRA needs a model whose first module is a Transformer")
    return module


def add_lora(model, settings: LoraSettings) -> None:
    """Wrap the backbone in a peft LoRA model (feature extraction); only adapters train."""
    from peft import LoraConfig, TaskType, get_peft_model

    config = LoraConfig(task_type=TaskType.FEATURE_EXTRACTION, r=settings.r,
                        lora_alpha=settings.alpha, lora_dropout=settings.dropout,
                        target_modules=settings.target_modules, inference_mode=False)
    module = _backbone_module(model)
    module.model = get_peft_model(module.model, config)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    logger.info("LoRA r=%d: %s of %s parameters trainable", settings.r, f"{trainable:,}",
                f"{total:,}")


def has_lora(model) -> bool:
    from peft import PeftModel

    return isinstance(getattr(model[0], "model", None), PeftModel)


def load_lora_checkpoint(model, checkpoint: str | Path) -> None:
    """Restore adapter weights saved in a trainer checkpoint (resume, best model)."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    path = Path(checkpoint) / ADAPTER_WEIGHTS
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no LoRA adapter in this checkpoint")
    result = set_peft_model_state_dict(_backbone_module(model).model, load_file(path))
    if getattr(result, "unexpected_keys", None):
        raise ValueError(f"{path}: unexpected adapter keys {result.unexpected_keys[:5]}")


def merge_lora(model) -> bool:
    """Fold the adapters into the base weights (peft ``merge_and_unload``); True if merged."""
    if not has_lora(model):
        return False
    module = _backbone_module(model)
    module.model = module.model.merge_and_unload()
    return True
