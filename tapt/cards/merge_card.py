"""The model card of a merge or soup export (``tapt merge``, ``tapt soup``): front matter
(license, library, the base models, a ``model-index`` with the picked weight's dev
metrics), the sources and weights, the dev grid and the soup's steps."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tapt.cards.common import HOW_TO_LOAD, LICENSE_ID, METRIC_NAMES
from tapt.encoders.preset_record import base_model_id
from tapt.retrieval.metrics import METRIC_KEYS


def base_models(specs: Sequence) -> list[str]:
    """The Hub ids the sources' tapt chains started from (none for local models)."""
    return list(dict.fromkeys(base for spec in specs
                              if (base := base_model_id(spec.name_or_path)) is not None))


def merge_card(records: list[dict], selection,
               base: list[str], soup: dict | None = None) -> str:
    """The model card: front matter (license, library, base models, a ``model-index`` with
    the picked weight's dev metrics) and the sources, weights and dev grid; ``selection``:
    the dev pick (:class:`~tapt.selection.merge_types.DevSelection`), None without one;
    ``soup``: the soup's record (:func:`soup_card_lines`)."""
    from huggingface_hub import EvalResult, ModelCardData

    names = [record["model"] for record in records]
    title = "tapt merge of " + ", ".join(names)
    results = None
    if selection is not None:
        picked = next(p for p in selection.points if p.weight == selection.picked)
        data = selection.info.get("data") or "dev data"
        results = [EvalResult(task_type="information-retrieval",
                              task_name="Information Retrieval", dataset_type=data,
                              dataset_name=f"{data} {selection.info.get('split', 'dev')}",
                              dataset_split=selection.info.get("split", "dev"),
                              metric_type=key, metric_name=METRIC_NAMES.get(key, key),
                              metric_value=picked.metrics[key]) for key in METRIC_KEYS]
    card = ModelCardData(license=LICENSE_ID, library_name="sentence-transformers",
                         pipeline_tag="sentence-similarity", model_name=title,
                         tags=["sentence-transformers", "sentence-similarity", "tapt",
                               "merge"], base_model=base or None, eval_results=results)
    if len(base) > 1:
        card.base_model_relation = "merge"
    intro = ("A weighted average of models of the same architecture, made with `tapt merge`: "
             "every floating-point tensor is the weighted sum of the sources' tensors "
             "(accumulated in float64), integer and boolean tensors are copied. Tokenizer, "
             "pooling, prompts and maximum length are the first model's.")
    lines = ["---", card.to_yaml(), "---", "", f"# {title}", "", intro, "",
             "| model | revision | weight |", "|---|---|---:|"]
    lines += [f"| `{r['model']}` | {r['revision'] or '-'} | {r['weight']:g} |"
              for r in records]
    if selection is not None:
        info = selection.info
        how = (f"Each weight of `{names[0]}` (the other model gets 1 - w) was evaluated on "
               f"`{info.get('data')}` {info.get('split', 'dev')} "
               f"({info.get('corpus_size', '?')} passages, {info.get('num_queries', '?')} "
               f"queries); the best `{selection.metric}` was kept (ties: the larger weight "
               "on the first model).")
        guarded = "guard_data" in info
        if guarded:
            how += (f" Only weights whose `{selection.metric}` on the guard set "
                    f"`{info['guard_data']}` {info.get('guard_split')} was at least the second "
                    f"model's (w = 0) minus {info.get('guard_tolerance'):g} were eligible.")
        guard_column = [f"guard {selection.metric}"] if guarded else []
        lines += ["", "### Weights picked on dev", "", how, "",
                  f"| weight of `{names[0]}` | " + " | ".join([*METRIC_KEYS, *guard_column])
                  + " | |", "|---:|" + "---:|" * (len(METRIC_KEYS) + len(guard_column)) + "---|"]
        lines += [f"| {p.weight:g} | " + " | ".join(
                      [f"{p.metrics[k]:.4f}" for k in METRIC_KEYS]
                      + ([f"{p.guard[selection.metric]:.4f}"] if guarded else []))
                  + (" | picked |" if p.weight == selection.picked else " | |")
                  for p in selection.points]
    if soup is not None:
        lines += ["", *soup_card_lines(soup)]
    lines += ["", HOW_TO_LOAD]
    return "\n".join(lines)


def soup_card_lines(soup: dict) -> list[str]:
    """The card's section on a model soup (:mod:`tapt.selection.soup`)."""
    metric = next(iter(soup["dev"]), "binary_ndcg@10")
    how = ("A **uniform soup**: the mean of every ingredient (Wortsman et al., 2022)."
           if soup["method"] == "uniform" else
           "A **greedy soup** (Wortsman et al., 2022, Algorithm 1): the runs sorted by their "
           "own best dev metric, each added if the mean with it scored at least as well on "
           "dev as without it.")
    lines = ["### Soup", "", how, "", (f"Dev {metric} of the exported soup: "
             f"{soup['dev'][metric]:.4f}.")]
    if soup["steps"]:
        lines += ["", f"| step | run tried | dev {metric} | kept |", "|---:|---|---:|---|"]
        lines += [f"| {i} | `{Path(step['ingredient']).name}` | {step['dev'][metric]:.4f} | "
                  f"{'yes' if step['kept'] else 'no'} |"
                  for i, step in enumerate(soup["steps"], start=1)]
    return lines
