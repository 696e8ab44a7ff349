"""LoRA through peft: attach adapters for training, merge them into the weights for export."""

from __future__ import annotations

import logging

from tapt.recipe import LoraSettings

logger = logging.getLogger(__name__)


def add_lora(model, settings: LoraSettings) -> None:
    """Attach a LoRA adapter to the SentenceTransformer's backbone (peft, feature extraction)."""
    from peft import LoraConfig, TaskType

    config = LoraConfig(task_type=TaskType.FEATURE_EXTRACTION, r=settings.r,
                        lora_alpha=settings.alpha, lora_dropout=settings.dropout,
                        target_modules=settings.target_modules, inference_mode=False)
    model.add_adapter(config)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    logger.info("LoRA r=%d: %s of %s parameters trainable", settings.r, f"{trainable:,}",
                f"{total:,}")


def merge_lora(model) -> int:
    """Fold every LoRA layer into its base weights and remove the adapters; returns the count.

    sentence-transformers attaches adapters through transformers' PEFT integration, which
    (unlike ``PeftModel.merge_and_unload``) offers no merge; this uses peft's own
    ``LoraLayer.merge`` and puts each layer's base module back in its place.
    """
    from peft.tuners.lora import LoraLayer

    backbone = model.transformers_model
    merged = 0
    for name, module in list(backbone.named_modules()):
        if isinstance(module, LoraLayer):
            module.merge(safe_merge=True)
            parent_name, _, child = name.rpartition(".")
            parent = backbone.get_submodule(parent_name) if parent_name else backbone
            setattr(parent, child, module.get_base_layer())
            merged += 1
    if merged:
        backbone._hf_peft_config_loaded = False
        if hasattr(backbone, "peft_config"):
            del backbone.peft_config
    return merged
