"""``tapt data``: validate a BEIR folder, count its judgments and passage lengths, or
generate a FormBench-like dataset. The data loaders are imported inside the handler."""

from __future__ import annotations

import argparse
from pathlib import Path
from types import SimpleNamespace

from tapt.cli import terminal
from tapt.cli.number_types import seed, sequence_length, synth_distractors, synth_queries
from tapt.cli.options import (
    add_decontaminate_arg,
    add_dev_carve_args,
    add_relevance_arg,
    check_folder,
)
from tapt.data.beir import SPLITS


def add_parsers(commands) -> None:
    """``tapt data validate | stats | synth``."""
    data = commands.add_parser("data", help="validate, describe or generate BEIR datasets")
    data_commands = data.add_subparsers(dest="data_command", required=True, metavar="ACTION",
                                        help="what to do with a dataset")
    validate = data_commands.add_parser("validate", help="check a BEIR folder")
    stats = data_commands.add_parser("stats", help="counts per split and tier, passage lengths")
    for parser in (validate, stats):
        parser.add_argument("folder", type=Path,
                            help="BEIR folder: corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv")
        parser.add_argument("--splits", nargs="+", default=None, metavar="SPLIT",
                            help="qrels splits to read (default: those with a "
                                 "qrels/SPLIT.tsv file, of train, dev, test)")
        parser.add_argument("--lenient", action="store_true",
                            help="accept empty passages and queries without an anchor")
        add_relevance_arg(parser)
    stats.add_argument("--tokenizer", default=None,
                       help="model whose tokenizer counts tokens (default: whitespace words); "
                            "also shows what share of passages and tokens each --max-length "
                            "cuts off")
    add_decontaminate_arg(stats)
    add_dev_carve_args(stats)
    stats.add_argument("--max-length", type=sequence_length, nargs="+", default=None,
                       metavar="N",
                       help="maximum lengths to report with --tokenizer (default: 256 512 "
                            "1024 2048 8192)")
    synth = data_commands.add_parser("synth", help="generate a FormBench-like BEIR dataset")
    synth.add_argument("out", type=Path, metavar="OUT",
                       help="folder to write (refused when it already holds a dataset)")
    synth.add_argument("--queries", type=synth_queries, default=600,
                       help="queries over all splits (80%% train, 10%% dev, 10%% test)")
    synth.add_argument("--distractors", type=synth_distractors, default=2000,
                       help="unjudged passages added to the corpus")
    synth.add_argument("--variant", choices=("random", "structured"), default="structured",
                       help="corpus style, as FormBench's configs: structured (C1) or "
                            "random (C0)")
    synth.add_argument("--seed", type=seed, default=0, help="seed of the generator")


def cmd_data(args: argparse.Namespace) -> int:
    from rich.table import Table

    from tapt.data.beir import load_beir_folder, strictness

    if args.data_command == "synth":
        from tapt.data.synth import synthesize

        check_folder("OUT", args.out)
        summary = synthesize(args.out, queries=args.queries, distractors=args.distractors,
                             variant=args.variant, seed=args.seed)
        table = Table(title=f"wrote {args.out} ({summary.variant}, seed {summary.seed})")
        table.add_column("what")
        table.add_column("value", justify="right")
        for label, counts in (("queries per split", summary.queries_per_split),
                              ("queries per mode", summary.queries_per_mode),
                              ("passages per kind", summary.passages_per_kind)):
            table.add_row(label, ", ".join(f"{k} {v:,}" for k, v in counts.items()))
        table.add_row("corpus size", f"{summary.corpus_size:,}")
        table.add_row("mean Jaccard: hard / soft negative",
                      f"{summary.mean_hard_jaccard:.3f} / {summary.mean_soft_jaccard:.3f}")
        table.add_row("hard negatives reusing a chemical in another role",
                      f"{summary.role_swap_share:.1%}")
        terminal.console.print(table)
        return 0
    if getattr(args, "max_length", None) and not args.tokenizer:
        raise ValueError("--max-length needs --tokenizer MODEL (lengths in that model's tokens)")
    splits = args.splits or present_splits(args.folder)
    if args.data_command == "stats":
        check_decontamination(args)
        splits = list(dict.fromkeys([*splits, *args.decontaminate]))
        if args.dev_from_train is not None and "dev" in splits and args.splits is None:
            splits.remove("dev")  # carved instead (data.dev_from_train refuses a dev file)
    dataset = load_beir_folder(args.folder, splits, relevant_from=args.relevant_from,
                               **strictness(args.lenient))
    if args.data_command == "validate":
        absent = [split for split in SPLITS if split not in splits]
        terminal.console.print(
            f"[green]ok[/green] {args.folder}: {len(dataset.corpus):,} passages, "
            f"{len(dataset.queries):,} queries; checked splits "
            + ", ".join(f"{s} ({len(q):,})" for s, q in dataset.qrels.items())
            + (f" ({'not asked for' if args.splits else 'no qrels file'}: {', '.join(absent)})"
               if absent else "")
            + f"; relevance rule {dataset.rule.describe()}")
        return 0
    from tapt.data.stats import (
        MAX_LENGTHS,
        length_percentiles,
        tier_counts,
        token_lengths,
        tokenizer_counter,
        truncation_shares,
        whitespace_counter,
    )

    dataset = training_view(args, dataset)
    counts = tier_counts(dataset)
    columns = sorted({key for row in counts.values() for key in row}, key=_column_order)
    table = Table(title=f"{args.folder}: judgments per split and tier")
    table.add_column("split")
    for column in columns:
        table.add_column(column, justify="right")
    for split, row in counts.items():
        table.add_row(split, *(f"{row.get(column, 0):,}" for column in columns))
    terminal.console.print(table)
    show_split_records(dataset)
    if args.tokenizer:
        from transformers import AutoTokenizer

        from tapt.encoders.model_paths import resolve_model_path

        counter, unit = tokenizer_counter(AutoTokenizer.from_pretrained(
            resolve_model_path(args.tokenizer))), f"tokens ({args.tokenizer})"
    else:
        counter, unit = whitespace_counter, "whitespace words"
    texts = [passage.as_text() for passage in dataset.corpus.values()]
    counts = token_lengths(texts, counter)
    lengths = length_percentiles(texts, counter, lengths=counts)
    table = Table(title=f"passage length in {unit}, {len(texts):,} passages")
    for key in lengths:
        table.add_column(key, justify="right")
    table.add_row(*(f"{value:,.0f}" for value in lengths.values()))
    terminal.console.print(table)
    if args.tokenizer:
        table = Table(title=f"truncation at a maximum length ({unit}, special tokens "
                            "included; --long-passages chunk-mean/chunk-max read it all)")
        for column in ("max length", "passages longer", "tokens dropped"):
            table.add_column(column, justify="right")
        for limit, share in truncation_shares(counts, args.max_length or MAX_LENGTHS).items():
            table.add_row(f"{limit:,}", f"{share['passages_longer']:.2%}",
                          f"{share['tokens_dropped']:.2%}")
        terminal.console.print(table)
    return 0


def stats_data_settings(args: argparse.Namespace) -> SimpleNamespace:
    """``tapt data stats``' flags as the data settings of a recipe."""
    return SimpleNamespace(train_split="train", dev_split="dev", test_split="test",
                           dev_from_train=args.dev_from_train, dev_seed=args.dev_seed,
                           dev_carve=args.dev_carve, decontaminate=args.decontaminate)


def check_decontamination(args: argparse.Namespace) -> None:
    """Refuse, before reading the data, ``--decontaminate`` naming train or a dev split
    ``--dev-from-train`` carves (the recipe check's message, with the flags' names)."""
    from tapt.data.splits import decontamination_problem

    problem = decontamination_problem(stats_data_settings(args), "--decontaminate",
                                      "--dev-from-train")
    if problem is not None:
        raise ValueError(problem)


def training_view(args: argparse.Namespace, dataset):
    """``tapt data stats``: the dataset as a recipe with ``data.decontaminate`` and
    ``data.dev_from_train`` would train on it (:func:`tapt.data.splits.training_splits`)."""
    from tapt.data.splits import training_splits

    if not args.decontaminate and args.dev_from_train is None:
        return dataset
    if "train" not in dataset.qrels:
        raise ValueError(f"{args.folder}: --decontaminate and --dev-from-train need its "
                         "train split (qrels/train.tsv; add train to --splits)")
    keep = tuple(args.splits or present_splits(args.folder))
    return training_splits(dataset, stats_data_settings(args), keep=keep)


def show_split_records(dataset) -> None:
    """The decontamination and the dev carve, if any, then seen and novel queries of every
    split but train (:func:`tapt.data.overlap.split_overlap`)."""
    from rich.table import Table

    from tapt.data.overlap import split_overlap

    if (record := dataset.decontaminated):
        terminal.console.print(
            f"train decontaminated against {', '.join(record['against'])}: "
            f"{record['train_queries'][0]:,} -> {record['train_queries'][1]:,} queries, "
            f"{record['judgments'][0]:,} -> {record['judgments'][1]:,} judgments "
            f"({record['passages']:,} passages held out)", highlight=False)
    if (carve := dataset.carved):
        terminal.console.print(
            f"dev carved from {carve['carved_from']} by {carve['by']} (seed {carve['seed']}): "
            f"{carve['queries']:,} queries in {carve['groups']:,} groups, "
            f"{carve['remaining_train_queries']:,} train queries left; "
            f"{carve['overlap']:,} dev queries have a relevant passage that is a training "
            "positive", highlight=False)  # carving by query logged its warning
    if "train" not in dataset.qrels:
        return
    others = [split for split in dataset.qrels if split != "train"]
    if not others:
        return
    table = Table(title="train overlap",
                  caption="seen: a relevant passage is a train positive; novel: none is")
    for column in ("split", "queries", "seen", "novel"):
        table.add_column(column, justify="left" if column == "split" else "right")
    for split in others:
        counts = split_overlap(dataset, split).counts()
        table.add_row(split, f"{sum(counts.values()):,}", f"{counts['seen']:,}",
                      f"{counts['novel']:,}")
    terminal.console.print(table)


def present_splits(folder: Path) -> list[str]:
    """The splits of ``folder`` with a ``qrels/SPLIT.tsv`` entry (loading refuses one that
    is not a file), in SPLITS order; all of them when there is none (then loading names the
    first missing file)."""
    qrels = folder / "qrels"
    present = [split for split in SPLITS
               if (qrels / f"{split}.tsv").exists() or (qrels / f"{split}.tsv").is_symlink()]
    return present or list(SPLITS)


def _column_order(name: str) -> tuple[int, str]:
    order = ["queries", "judgments", "anchor", "hard negative", "soft negative"]
    if name.startswith("relevant"):  # the BEIR rule's "relevant (grade N)"
        return (order.index("anchor"), name)
    return (order.index(name) if name in order else len(order), name)


COMMANDS = {"data": cmd_data}
