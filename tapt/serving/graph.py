"""What an export holds: a SentenceTransformer's modules from token ids to the sentence
embedding (transformer, pooling, dense layers, normalisation) as one torch module whose
inputs are the tokenizer's tensors, so the exported graph needs no Python around it.

Only text models of the usual shape are exported: a ``Transformer`` first, then
``Pooling`` and any of ``Dense`` and ``Normalize``, and, last, a lexical branch
(:mod:`tapt.encoders.lexical_branch`: a second encoder of the same token ids, appended; its
own modules of the same kinds). Pooling is whatever sentence-
transformers' ``Pooling`` computes (mean, CLS, last token under either padding side, max,
...), traced as is, except pooling that leaves out the prompt's tokens (it needs the
prompt's length at run time, which the graph does not take).
"""

from __future__ import annotations

import torch

EXPORTABLE_MODULES = ("Transformer", "Pooling", "Dense", "Normalize")
"""The sentence-transformers module classes an export may hold, the first a Transformer."""
BRANCH = "LexicalBranch"
"""tapt's lexical branch, exportable as the last module when its own modules are."""
GRAPH_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
"""Tokenizer outputs the graph can take (in the tokenizer's own ``model_input_names``)."""
OUTPUT_NAME = "sentence_embedding"


class ExportError(ValueError):
    """A model or a request that cannot be exported as asked."""


def module_names(model) -> list[str]:
    """The class names of ``model``'s modules, in order."""
    return [type(module).__name__ for module in model]


def check_exportable(model) -> None:
    """Raise :class:`ExportError` naming what an export cannot hold: a first module that is
    not a text ``Transformer``, another kind of module, or pooling without the prompt."""
    names = module_names(model)
    if not names or names[0] != "Transformer":
        raise ExportError(f"only text models starting with a Transformer module are exported; "
                          f"this one's modules are {', '.join(names) or 'none'}")
    if BRANCH in names[:-1]:
        raise ExportError(f"a {BRANCH} must be the model's last module to be exported")
    if names[-1] == BRANCH:
        check_exportable(model[len(names) - 1].lexical)  # the second encoder, the same rules
        names = names[:-1]
    other = [name for name in names[1:] if name not in EXPORTABLE_MODULES[1:]]
    if other:
        raise ExportError(f"module {other[0]} cannot be exported (an export holds "
                          f"{', '.join(EXPORTABLE_MODULES)} modules only)")
    if "Pooling" not in names:
        raise ExportError("the model has no Pooling module: nothing turns its token "
                          "embeddings into one sentence embedding")
    for module in model:
        if type(module).__name__ == "Pooling" and not getattr(module, "include_prompt", True):
            raise ExportError("pooling that leaves out the prompt's tokens (include_prompt: "
                              "false) needs the prompt's length at run time; it is not "
                              "exported")


def input_names(model) -> tuple[str, ...]:
    """The graph's inputs: the tokenizer's ``model_input_names`` that the model takes, in
    :data:`GRAPH_INPUTS` order (``input_ids`` and ``attention_mask`` always)."""
    given = set(getattr(model.tokenizer, "model_input_names", ()) or ())
    return tuple(name for name in GRAPH_INPUTS
                 if name in ("input_ids", "attention_mask") or name in given)


class EmbeddingGraph(torch.nn.Module):
    """``forward(input_ids, attention_mask[, token_type_ids]) -> sentence embeddings``
    through every module of the SentenceTransformer; :attr:`names` are the inputs the
    graph takes (:func:`input_names`)."""

    def __init__(self, model) -> None:
        super().__init__()
        check_exportable(model)
        self.model = model
        self.names = input_names(model)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        features = {"input_ids": input_ids, "attention_mask": attention_mask}
        if token_type_ids is not None:
            features["token_type_ids"] = token_type_ids
        return self.model(features)["sentence_embedding"]


EXAMPLE_TEXTS = ("An epoxy primer with zinc phosphate and a bisphenol binder.", "A sealant.")
"""What the exporters trace with: two lengths, so padding is in the traced batch."""


def example_inputs(model, texts: tuple[str, ...] = EXAMPLE_TEXTS) -> tuple[torch.Tensor, ...]:
    """Tokenizer tensors of ``texts`` (two lengths, padded) in :func:`input_names` order:
    what the exporters trace with."""
    features = model.tokenizer(list(texts), padding=True, truncation=True,
                               max_length=model.max_seq_length, return_tensors="pt")
    names = input_names(model)
    if "token_type_ids" in names and "token_type_ids" not in features:
        features["token_type_ids"] = torch.zeros_like(features["input_ids"])
    return tuple(features[name].to(torch.int64) for name in names)
