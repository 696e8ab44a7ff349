"""``tapt cases``: case studies of where systems disagree (FormBench Appendix D), from
``tapt eval/bm25 --output ... --save-run K`` result files and the data, as Markdown."""

from __future__ import annotations

import argparse
from pathlib import Path

from tapt.cli import terminal
from tapt.cli.number_types import cases_shown, relevant_from
from tapt.cli.options import add_corpus_store_args, check_outputs, data_inputs


def add_parsers(commands) -> None:
    from tapt.retrieval.metrics import METRIC_KEYS

    cases = commands.add_parser(
        "cases", help="case studies: the queries where systems disagree most, with each "
                      "system's rank of the first relevant passage and its top passages "
                      "(Markdown), from tapt eval/bm25 --save-run result files")
    cases.add_argument("results", nargs="+", metavar="[NAME=]RESULT.json",
                       help="tapt eval / tapt bm25 --output files written with --save-run K")
    cases.add_argument("--data", required=True,
                       help="the data the results were evaluated on (local BEIR folder or "
                            "Hub id): query and passage texts, grades")
    cases.add_argument("--config", default=None, help="Hub config or subfolder")
    cases.add_argument("--revision", default=None, help="Hub dataset revision")
    cases.add_argument("--lenient", action="store_true",
                       help="accept empty passages and queries without a relevant passage "
                            "(public BEIR sets)")
    cases.add_argument("--relevant-from", type=relevant_from, default=None, metavar="auto|N",
                       help="lowest grade that counts as relevant (default: the rule the "
                            "result files were evaluated under; auto for files that record "
                            "none); another rule than theirs is refused")
    add_corpus_store_args(cases)
    cases.add_argument("--query", default=None, metavar="ID", help="show this query only")
    cases.add_argument("--top", type=cases_shown, default=10,
                       help="queries listed (the most disagreed on)")
    cases.add_argument("--passages", type=cases_shown, default=3,
                       help="top passages shown per system")
    cases.add_argument("--chars", type=cases_shown, default=300,
                       help="characters of each passage's text shown")
    cases.add_argument("--metric", choices=METRIC_KEYS, default="binary_ndcg@10",
                       help="per-query metric shown beside the ranks")
    cases.add_argument("--output", type=Path, default=None,
                       help="write the Markdown here (default: print it)")
    cases.add_argument("--overwrite", action="store_true", help="replace an existing --output")


def cmd_cases(args: argparse.Namespace) -> int:
    from tapt.analysis.cases import (
        at_common_depth,
        common_split,
        find_cases,
        read_system,
        recorded_relevance,
        render_markdown,
    )
    from tapt.analysis.compare import split_spec
    from tapt.data.beir import strictness
    from tapt.data.sources import load_data
    from tapt.util.files import atomic_write_text

    check_outputs([("--output", args.output)], overwrite=args.overwrite,
                  inputs=[("RESULT", split_spec(spec)[1]) for spec in args.results]
                  + data_inputs("--data", args.data, args.config))
    systems = [read_system(spec) for spec in args.results]  # checked before the data loads
    systems = at_common_depth(systems)  # "not found" means one depth for all
    split = common_split(systems)  # and the results' data fields agree
    relevance = recorded_relevance(systems) if args.relevant_from is None else args.relevant_from
    dataset = load_data(args.data, args.config, [split],
                        revision=args.revision, relevant_from=relevance,
                        corpus_store=args.corpus_store, corpus_cache=args.corpus_cache,
                        **strictness(args.lenient))
    cases = find_cases(systems, dataset, limit=args.top, query=args.query)
    markdown = render_markdown(cases, systems, dataset, passages=args.passages,
                               chars=args.chars, metric=args.metric)
    if args.output is None:
        terminal.console.print(markdown, markup=False, highlight=False, soft_wrap=True)
    else:
        from tapt.util.digests import file_record, remove_sidecar, write_sidecar

        remove_sidecar(args.output)  # an older record never describes the new file
        atomic_write_text(args.output, markdown)
        write_sidecar(args.output, kind="tapt cases",  # what it was made from, checkably
                      results={system.name: file_record(system.source) for system in systems})
        terminal.console.print(f"{len(cases)} case(s) written to {args.output}")
    return 0


COMMANDS = {"cases": cmd_cases}
