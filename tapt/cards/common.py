"""What every model card tapt writes shares: the license, how to load the model, the
metric names, and how a model and a dataset are named (a Hub id as is, a local folder by
its name: a published card carries no path of this machine). The base model a card names
is :func:`tapt.encoders.preset_record.base_model_id`'s, the one lookup."""

from __future__ import annotations

import importlib.resources
from collections.abc import Sequence
from pathlib import Path

from tapt.encoders.model_paths import PACKAGE_SCHEME
from tapt.util.ids import is_hub_id

LICENSE_ID = "apache-2.0"
METRIC_NAMES = {"binary_ndcg@10": "binary nDCG@10", "graded_ndcg@10": "graded nDCG@10",
                "mrr@10": "MRR@10", "recall@100": "Recall@100"}


HOW_TO_LOAD = """### How to load

```python
from sentence_transformers import SentenceTransformer

model = SentenceTransformer("PATH_OR_REPO_ID")
queries = model.encode_query(["Which binder does the primer use?"])  # stored query prompt
passages = model.encode_document(["The primer comprises a polyvinyl acetate binder ..."])
scores = model.similarity(queries, passages)
```

Evaluate it with `tapt eval --model PATH --data DATA --split test`.
"""


def how_to_load(repo_id: str | None) -> str:
    """:data:`HOW_TO_LOAD` loading ``repo_id`` (the repository a recipe pushes to), else
    with its placeholders."""
    if not repo_id:
        return HOW_TO_LOAD
    return HOW_TO_LOAD.replace("PATH_OR_REPO_ID", repo_id).replace("--model PATH",
                                                                   f"--model {repo_id}")


def apache_license_text() -> str:
    return (importlib.resources.files("tapt.cards") / "apache-2.0.txt").read_text(
        encoding="utf-8")


def model_label(name: str) -> str:
    """``name`` as a card shows it: a Hub id or ``package:`` as is, a local path by its
    folder name (a published card carries no paths of this machine)."""
    if name.startswith(PACKAGE_SCHEME) or not Path(name).exists():
        return name
    return Path(name).resolve().name


def data_label(source: str | None, config: str | None = None, files: Sequence[str] = ()) -> str:
    """A dataset as a card (and ``merge.json``) names it: a Hub id as is, a local folder or
    path by its name (no path of this machine), the ``files`` a DAPT recipe reads by their
    names when there is no ``source``; with the ``config``."""
    if source:
        name = source if is_hub_id(source) and not Path(source).exists() else \
            Path(source).name or source
    else:  # a DAPT recipe reading plain files only
        name = ", ".join(Path(path).name for path in files)
    return f"{name} ({config})" if config else name


def warning_lines(message: str | None) -> list[str]:
    """A card's or report's bold warning (the first thing a reader sees after the summary
    sentence), e.g. a zero-shot gate that did not pass; none without a message."""
    if message is None:
        return []
    return [f"> **Warning: {message[0].upper()}{message[1:]}.**", ""]
