"""The model card of a combine export (``tapt combine``): a dense model and a lexical model
in one vector, the weight, the dev grid when one picked it, and how to load it (the
lexical branch is tapt's module)."""

from __future__ import annotations

from collections.abc import Sequence

from tapt.cards.common import HOW_TO_LOAD, LICENSE_ID
from tapt.retrieval.metrics import METRIC_KEYS


def combine_card(records: list[dict], weight: float, points: Sequence, metric: str | None,
                 dev_info: dict, *, formula: str) -> str:
    """The card of a combine export: the dense and lexical models (``records``, each
    ``{model, revision, ...}``), the ``weight`` of the lexical part and the ``formula``
    (:data:`tapt.selection.combine.FORMULA`), the dev grid (``points``: each a
    :class:`~tapt.selection.combine.WeightPoint`; ``metric`` and ``dev_info``'s ``data``
    and ``split``: what was scored) when one was evaluated, and how to load it."""
    from huggingface_hub import ModelCardData

    names = [record["model"] for record in records]
    title = f"tapt combine of {names[0]} and the lexical model {names[1]}"
    card = ModelCardData(license=LICENSE_ID, library_name="sentence-transformers",
                         pipeline_tag="sentence-similarity", model_name=title,
                         tags=["sentence-transformers", "sentence-similarity", "tapt", "spar"])
    lines = ["---", card.to_yaml(), "---", "", f"# {title}", "",
             ("A dense model and a lexical model (trained to imitate BM25, as in SPAR, Chen et "
              "al. 2022) in one vector, made with `tapt combine`: ") + formula
             + (f", w = {weight:g}. One index of these vectors ranks as the dense model fused "
                "with the lexical one."),
             "", "| part | model | revision |", "|---|---|---|",
             f"| dense | `{names[0]}` | {records[0]['revision'] or '-'} |",
             f"| lexical | `{names[1]}` | {records[1]['revision'] or '-'} |"]
    if points:
        lines += ["", "### Weight picked on dev", "",
                  (f"Each weight was scored on `{dev_info.get('data')}` "
                   f"{dev_info.get('split', 'dev')}; the best `{metric}` was kept (ties: the "
                   "smaller weight)."), "",
                  "| w | " + " | ".join(METRIC_KEYS) + " | |",
                  "|---:|" + "---:|" * len(METRIC_KEYS) + "---|"]
        lines += [f"| {p.weight:g} | " + " | ".join(f"{p.metrics[k]:.4f}" for k in METRIC_KEYS)
                  + (" | picked |" if p.weight == weight else " | |") for p in points]
    lines += ["", "### Loading", "",
              ("The lexical branch is a module of tapt's (`tapt.encoders.lexical_branch`); "
               "sentence-transformers imports a module class of another package only when "
               "asked to (no code is read from this folder):"), "", "```python",
              "# pip install tapt", "from sentence_transformers import SentenceTransformer",
              "model = SentenceTransformer(PATH, trust_remote_code=True)",
              "queries = model.encode_query([...]); passages = model.encode_document([...])",
              "```", "", "`tapt eval --model PATH` and `tapt export PATH` load it as they are.",
              "", HOW_TO_LOAD]
    return "\n".join(lines)
