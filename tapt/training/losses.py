"""Build the loss a recipe names, from sentence-transformers' losses."""

from __future__ import annotations

import copy

from torch import nn

from tapt.encoders.loading import ModelSpec, load_sentence_transformer
from tapt.recipe import LossSettings
from tapt.training.clear_loss import ClearLoss
from tapt.training.lora import merge_lora
from tapt.util.process_group import launched


def build_loss(model, settings: LossSettings) -> nn.Module:
    """The sentence-transformers loss ``loss.name`` names, built with the recipe's options
    (each ``loss.*`` key is one constructor argument), Matryoshka-wrapped when asked.

    ``gather_across_devices`` makes every rank's in-batch passages negatives for every
    query under DDP (otherwise each query sees only its own device's batch).
    """
    if settings.name in DISTILLATION:
        return build_distillation_loss(model, settings)
    loss = build_contrastive_loss(model, settings)
    if settings.name == "matryoshka" or settings.matryoshka:
        loss = matryoshka_wrapped(model, loss, settings)
    return loss


SYMMETRIC = ("query_to_doc", "doc_to_query")
"""``mnsrl``'s directions (with ``per_direction``): what sentence-transformers' deprecated
MultipleNegativesSymmetricRankingLoss passes to MultipleNegativesRankingLoss."""


def build_contrastive_loss(model, settings: LossSettings) -> nn.Module:
    """MNRL (``mnrl``, ``matryoshka``), CachedMNRL (``cached_mnrl``), symmetric MNRL
    (``mnsrl``) or (Cached)GISTEmbedLoss (``gist``, ``cached_gist``), not yet wrapped."""
    from sentence_transformers.sentence_transformer import losses

    # Gathering needs a process group; asking for it on one process only logs a warning.
    gather = settings.gather_across_devices and launched()
    if settings.name in settings.GIST_FAMILY:
        return build_gist_loss(model, settings, gather=gather)
    if settings.name == "mnsrl":
        return losses.MultipleNegativesRankingLoss(
            model, scale=settings.scale, gather_across_devices=gather, directions=SYMMETRIC,
            partition_mode="per_direction")
    options = {"scale": settings.scale, "gather_across_devices": gather,
               "directions": tuple(settings.directions),
               "partition_mode": settings.partition_mode,
               "hardness_mode": settings.hardness_mode,
               "hardness_strength": settings.hardness_strength}
    if settings.name == "cached_mnrl":
        return losses.CachedMultipleNegativesRankingLoss(
            model, mini_batch_size=settings.mini_batch_size, **options)
    return losses.MultipleNegativesRankingLoss(model, **options)


def build_gist_loss(model, settings: LossSettings, *, gather: bool) -> nn.Module:
    """GISTEmbedLoss or CachedGISTEmbedLoss with the recipe's guide, temperature
    ``1 / loss.scale``, margin strategy and margin."""
    from sentence_transformers.sentence_transformer import losses

    options = {"temperature": 1.0 / settings.scale, "margin_strategy": settings.margin_strategy,
               "margin": settings.margin, "gather_across_devices": gather}
    guide = load_guide(model, settings.guide)
    if settings.name == "cached_gist":
        return losses.CachedGISTEmbedLoss(model, guide,
                                          mini_batch_size=settings.mini_batch_size, **options)
    return losses.GISTEmbedLoss(model, guide, **options)


def load_guide(model, guide: str):
    """GIST's guide, frozen (no gradients, eval mode) on the model's device: ``self`` is a
    deep copy of ``model`` as it is now (the starting weights; a LoRA adapter, still the
    identity before training, is folded in so the guide is the base weights), any other
    value a model loaded through :func:`tapt.encoders.loading.load_sentence_transformer`."""
    if guide == "self":
        copied = copy.deepcopy(model)
        merge_lora(copied)
    else:
        copied = load_sentence_transformer(ModelSpec(guide, device=str(model.device)))
    copied.requires_grad_(False)
    return copied.eval().to(model.device)


def matryoshka_wrapped(model, loss: nn.Module, settings: LossSettings) -> nn.Module:
    """``loss`` inside MatryoshkaLoss at ``loss.matryoshka_dims`` (widths above the model's
    dropped, the model's own width added)."""
    from sentence_transformers.sentence_transformer import losses

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
    return losses.MatryoshkaLoss(model, loss, matryoshka_dims=dims, matryoshka_weights=weights)

DISTILLATION = ("margin_mse", "distill_kl", "clear")
"""Loss names trained on labelled rows (:mod:`tapt.training.distill`)."""


def build_distillation_loss(model, settings: LossSettings) -> nn.Module:
    """``margin_mse``: sentence-transformers' MarginMSELoss (labels: target margins, one per
    negative column); ``clear``: CLEAR's hinge (:mod:`tapt.training.clear_loss`; labels:
    the lexical teacher's gaps, as margin_mse's); ``distill_kl``: DistillKLDivLoss (labels:
    the row's target scores),
    student and teacher temperature ``1 / loss.scale``. Both score the student with the
    cosine, on the scale of the targets (grade targets, query-normalised teacher scores)."""
    from sentence_transformers.sentence_transformer import losses
    from sentence_transformers.util import pairwise_cos_sim

    if settings.name == "margin_mse":
        return losses.MarginMSELoss(model, similarity_fct=pairwise_cos_sim)
    if settings.name == "clear":
        return ClearLoss(model, xi=settings.clear_margin, weight=settings.clear_weight)
    if settings.name == "distill_kl":
        return losses.DistillKLDivLoss(model, similarity_fct=pairwise_cos_sim,
                                       temperature=1.0 / settings.scale)
    raise ValueError(f"loss.name {settings.name!r} is not a distillation loss")
