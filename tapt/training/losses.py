"""Build the contrastive loss a recipe names, from sentence-transformers' losses."""

from __future__ import annotations

import os

from torch import nn

from tapt.recipe import LossSettings


def build_loss(model, settings: LossSettings) -> nn.Module:
    """MNRL, Matryoshka-wrapped MNRL, or cached (GradCache) MNRL.

    ``gather_across_devices`` makes every rank's in-batch passages negatives for every
    query under DDP (otherwise each query sees only its own device's batch).
    """
    from sentence_transformers.sentence_transformer import losses

    # Gathering needs a process group; asking for it on one process only logs a warning.
    gather = settings.gather_across_devices and int(os.environ.get("WORLD_SIZE", "1")) > 1
    if settings.name == "cached_mnrl":
        return losses.CachedMultipleNegativesRankingLoss(
            model, scale=settings.scale, mini_batch_size=settings.mini_batch_size,
            gather_across_devices=gather)
    mnrl = losses.MultipleNegativesRankingLoss(
        model, scale=settings.scale, gather_across_devices=gather)
    if settings.name == "mnrl":
        return mnrl
    width = model.get_embedding_dimension()
    dims = [dim for dim in settings.matryoshka_dims if dim <= width]
    if not dims:
        raise ValueError(f"loss.matryoshka_dims {settings.matryoshka_dims} are all wider than "
                         f"the model's embeddings ({width})")
    if width not in dims:
        dims = [width, *dims]
    weights = settings.matryoshka_weights
    if weights is not None:
        kept = {dim: weight for dim, weight in zip(settings.matryoshka_dims, weights)}
        weights = [kept.get(dim, 1.0) for dim in dims]
    return losses.MatryoshkaLoss(model, mnrl, matryoshka_dims=dims, matryoshka_weights=weights)
