"""A lexical model in the same vector as the dense one (SPAR, Chen et al., 2022).

SPAR trains a second dense encoder, the *lexical model* Λ, to imitate BM25 (on
pseudo-queries labelled by BM25: ``tapt pseudo --teacher bm25``, then ``tapt train`` with
``data.pseudo_mix: only``), and concatenates it with the dense model: query ``[d(q),
w·Λ(q)]``, passage ``[d(p), Λ(p)]``, so one inner product scores ``d(q)·d(p) + w
Λ(q)·Λ(p)`` and one index serves a hybrid.

Here the weight is split evenly, ``sqrt(w)`` on both sides: the inner product is the same,
and queries and passages go through one module path. So the combined model needs no
query/document routing: it encodes, evaluates, caches and exports (one ONNX graph) as any
SentenceTransformer. The dense model's normalised embedding and Λ's have norms 1 and
``sqrt(w)``, so every vector has the norm ``sqrt(1 + w)`` and cosine ranks as the inner
product does.

:class:`LexicalBranch` is a sentence-transformers module placed after the dense model's
own (``Transformer``, ``Pooling``, ``Normalize``): it runs Λ's modules on the same token
ids (Λ must share the dense model's tokenizer: checked when they are combined) and appends
``sqrt(w)`` times Λ's embedding to the sentence embedding. Λ is saved inside the module's
folder as a SentenceTransformer of its own (standard modules only). Λ reads the token ids the dense
model reads, its prompt included: pair it with a model without prompts, or one trained on
the same prompts.

Loading: sentence-transformers (6.0 and newer) imports a module class outside its own
package only with ``trust_remote_code=True``: ``SentenceTransformer(path,
trust_remote_code=True)`` with tapt installed. No code is read from the model's folder:
the class is tapt's own, imported from the installed package; tapt's loader checks that the
folder's modules are sentence-transformers' and this one, and that the folder holds no
Python file, before it allows that import (:func:`tapt_modules_only`).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import torch
from sentence_transformers import SentenceTransformer
from sentence_transformers.base.modules.module import Module

CLASS_REF = "tapt.encoders.lexical_branch.LexicalBranch"
"""The module's class reference in ``modules.json``."""
LEXICAL_FOLDER = "lexical"
"""Λ's SentenceTransformer, inside the module's folder."""


class LexicalBranch(Module):
    """Appends ``sqrt(weight)`` x Λ's sentence embedding of the same token ids to the
    sentence embedding (module docstring)."""

    config_keys = ["weight", "dense_dim"]  # noqa: RUF012 (sentence-transformers' own name)
    config_file_name = "lexical_branch_config.json"

    def __init__(self, lexical, weight: float = 1.0, dense_dim: int | None = None) -> None:
        super().__init__()
        if not math.isfinite(weight) or weight < 0:
            raise ValueError(f"the lexical weight must be a finite number >= 0, got {weight}")
        self.lexical = lexical
        self.weight = float(weight)
        self.dense_dim = dense_dim
        """The width of the embedding the branch appends to (the dense model's)."""

    def forward(self, features: dict[str, Any], **kwargs) -> dict[str, Any]:
        inputs = {name: features[name] for name in ("input_ids", "attention_mask",
                                                    "token_type_ids") if name in features}
        lexical = self.lexical(inputs)["sentence_embedding"]
        dense = features["sentence_embedding"]
        features["sentence_embedding"] = torch.cat(
            [dense, math.sqrt(self.weight) * lexical.to(dense.dtype)], dim=-1)
        return features

    def get_embedding_dimension(self) -> int | None:
        """The combined width: the dense model's and Λ's."""
        if self.dense_dim is None:
            return None
        return self.dense_dim + int(self.lexical.get_embedding_dimension())

    def save(self, output_path: str, *args, safe_serialization: bool = True, **kwargs) -> None:
        self.lexical.save(str(Path(output_path) / LEXICAL_FOLDER),
                          safe_serialization=safe_serialization)
        self.save_config(output_path)

    @classmethod
    def load(cls, model_name_or_path: str, subfolder: str = "", token=None,
             cache_folder: str | None = None, revision: str | None = None,
             local_files_only: bool = False, **kwargs) -> LexicalBranch:
        config = cls.load_config(model_name_or_path, subfolder=subfolder, token=token,
                                 cache_folder=cache_folder, revision=revision,
                                 local_files_only=local_files_only)
        folder = cls.load_dir_path(model_name_or_path, subfolder=subfolder, token=token,
                                   cache_folder=cache_folder, revision=revision,
                                   local_files_only=local_files_only)
        dtype = (kwargs.get("model_kwargs") or {}).get("dtype")
        lexical = SentenceTransformer(str(Path(folder) / LEXICAL_FOLDER), device="cpu",
                                      model_kwargs={"dtype": dtype} if dtype else None)
        return cls(lexical, weight=float(config.get("weight", 1.0)),
                   dense_dim=config.get("dense_dim"))


def tapt_modules_only(folder: str | Path) -> bool:
    """Whether ``folder`` is a SentenceTransformer holding a :class:`LexicalBranch` whose
    modules are all sentence-transformers' own and this class (and no Python file, so no
    code of the folder's can be imported): then tapt may load it with
    ``trust_remote_code`` for this one class of its own."""
    folder = Path(folder)
    try:
        modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(modules, list):
        return False
    types = [module.get("type") for module in modules if isinstance(module, dict)]
    if len(types) != len(modules) or CLASS_REF not in types:
        return False
    if any(not isinstance(kind, str) or not (kind == CLASS_REF or
                                             kind.startswith("sentence_transformers."))
           for kind in types):
        return False
    return not any(folder.rglob("*.py"))


def same_tokenizer(first, second) -> bool:
    """Whether two tokenizers turn every text into the same ids: the same class, vocabulary,
    special tokens and lower-casing."""
    return (type(first) is type(second) and first.get_vocab() == second.get_vocab()
            and first.all_special_tokens == second.all_special_tokens
            and getattr(first, "do_lower_case", None) == getattr(second, "do_lower_case", None))


def combine(dense, lexical, weight: float):
    """A SentenceTransformer of ``dense``'s modules and a :class:`LexicalBranch` of
    ``lexical`` weighted ``weight`` (both loaded SentenceTransformers, not copied: the
    result shares their modules). The dense model's prompts and similarity are kept.

    Raises:
        ValueError: the two models tokenize differently, or either already holds a
            lexical branch.
    """
    for name, model in (("dense", dense), ("lexical", lexical)):
        if any(isinstance(module, LexicalBranch) for module in model):
            raise ValueError(f"the {name} model already holds a lexical branch")
    if not same_tokenizer(dense.tokenizer, lexical.tokenizer):
        raise ValueError("the lexical model tokenizes differently from the dense one: train it "
                         "from a model with the dense model's tokenizer (e.g. the same base)")
    branch = LexicalBranch(lexical, weight=weight,
                           dense_dim=int(dense.get_embedding_dimension()))
    model = SentenceTransformer(modules=[*dense, branch], device=str(dense.device),
                                similarity_fn_name=dense.similarity_fn_name,
                                prompts=dict(dense.prompts),
                                default_prompt_name=dense.default_prompt_name)
    model.max_seq_length = dense.max_seq_length
    return model


def branch_of(model) -> LexicalBranch | None:
    """The model's :class:`LexicalBranch`, None when it has none."""
    return next((module for module in model if isinstance(module, LexicalBranch)), None)
