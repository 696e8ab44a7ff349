"""CLEAR's residual hinge loss (Gao et al., 2021, "Complement Lexical Retrieval Model with
Semantic Residual Embeddings"): train the dense model for what BM25 misses.

For a query ``q``, its positive ``p`` and a negative ``n`` the dense model must score ``p``
above ``n`` by a margin that shrinks where BM25 already separates them::

    margin(q, p, n) = max(0, xi - lambda x (bm25'(q, p) - bm25'(q, n)))
    loss = mean over the pairs of max(0, margin - cos(q, p) + cos(q, n))

``bm25'`` is BM25's score divided by the query's largest (``tapt score --teacher bm25``,
``loss.teacher_normalize: query_max``): the row's ``label`` holds the gaps, one per
negative column (:class:`~tapt.training.distill.Labeler`, as for ``margin_mse``). The
other rows' passages of the batch are negatives too, with the plain margin ``xi`` (their
lexical gap is not scored). A fused system (the dense model with BM25) then gains from
the dense side where the lexical one is weak, instead of relearning what BM25 already
ranks.

Hand-written: sentence-transformers has no loss whose margin varies per pair (its
``TripletLoss`` and ``MarginMSELoss`` take a fixed margin or regress the gap).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn


class ClearLoss(nn.Module):
    """The residual hinge (module docstring): ``xi`` the base margin, ``weight`` lambda."""

    def __init__(self, model, *, xi: float = 0.2, weight: float = 0.2) -> None:
        super().__init__()
        self.model = model
        self.xi = float(xi)
        self.weight = float(weight)

    def forward(self, sentence_features: Iterable[dict], labels: torch.Tensor) -> torch.Tensor:
        embeddings = [nn.functional.normalize(self.model(features)["sentence_embedding"],
                                              dim=-1) for features in sentence_features]
        query, passages = embeddings[0], torch.stack(embeddings[1:], dim=1)  # (B, 1 + K, d)
        scores = torch.einsum("bd,bkd->bk", query, passages)  # each row's own passages
        positive, negatives = scores[:, :1], scores[:, 1:]
        gaps = labels.to(scores.dtype).reshape(negatives.shape)
        margins = (self.xi - self.weight * gaps).clamp(min=0)
        own = (margins - positive + negatives).clamp(min=0)
        batch, columns = passages.shape[:2]
        everyone = passages.reshape(-1, passages.shape[-1])  # (B x (1 + K), d)
        cross = query @ everyone.T  # (B, B x (1 + K))
        owner = torch.arange(batch * columns, device=cross.device) // columns
        mine = owner.unsqueeze(0) == torch.arange(batch, device=cross.device).unsqueeze(1)
        in_batch = (self.xi - positive + cross).clamp(min=0).masked_fill(mine, 0.0)
        terms = own.numel() + int((~mine).sum())
        return (own.sum() + in_batch.sum()) / max(terms, 1)

    @property
    def citation(self) -> str:
        return ("@inproceedings{gao2021clear, title={Complement Lexical Retrieval Model with "
                "Semantic Residual Embeddings}, author={Gao, Luyu and Dai, Zhuyun and Chen, "
                "Tongfei and Fan, Zhen and Van Durme, Benjamin and Callan, Jamie}, "
                "booktitle={ECIR}, year={2021}}")
