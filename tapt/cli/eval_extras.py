"""``tapt eval`` and ``tapt bm25``: alternative query sets (``--queries NAME=FILE``, FormBench
Table 4), the stored ranking (``--save-run K``, read by ``tapt cases``) and MTEB's result
layout (``--format mteb``).

:func:`check_extra_args` refuses bad combinations before anything loads;
:func:`read_query_sets` reads and validates the query files before any encoding;
:func:`evaluate` runs the evaluation (with query sets: one retrieval of every set);
:func:`finish_extras` prints the query-set tables, fills the report's JSON sections and
writes MTEB's files.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

from tapt.cli import terminal
from tapt.cli.number_types import top_k
from tapt.cli.options import check_folder

RANKING_SECTION = "ranking"
"""The result file's section holding ``--save-run``'s top passages per query."""


def add_extra_args(parser: argparse.ArgumentParser) -> None:
    """``--queries --save-run --format --mteb-dir --mteb-task``."""
    group = parser.add_argument_group("query sets, stored rankings, MTEB results")
    group.add_argument("--queries", action="append", default=[], metavar="NAME=FILE",
                       help="also evaluate this query file (queries.jsonl format, ids of the "
                            "split, e.g. rewritten queries) against the same corpus encoding; "
                            "repeat for several: a table each with retention against the "
                            "split's own queries and the paired test")
    group.add_argument("--save-run", type=top_k, default=None, metavar="K",
                       help="store each query's top K passages (ids and scores, ranked) in "
                            "--output, for tapt cases (K <= --top-k)")
    group.add_argument("--format", choices=("tapt", "mteb"), default="tapt",
                       help="mteb: also write the result in MTEB's results layout under "
                            "--mteb-dir (needs tapt[mteb])")
    group.add_argument("--mteb-dir", type=Path, default=Path("mteb-results"),
                       help="--format mteb: the folder of MTEB's layout "
                            "(results/MODEL/REVISION/TASK.json)")
    group.add_argument("--mteb-task", default=None, metavar="NAME",
                       help="--format mteb: the task name, one file name (default: the data "
                            "folder's name, with --config)")


MTEB_MIN_TOP_K = 10
"""MTEB's main retrieval score is ``ndcg_at_10``: a ranking shorter than 10 cannot give it."""


def check_mteb_args(args: argparse.Namespace) -> None:
    """``--format mteb``, before any loading: mteb installed, ``--top-k`` of at least 10,
    the task and model names each one file or folder name without a secret (the default
    task name comes from the data's folder, the model's from its folder), and nothing but
    folders on the way to the result file under ``--mteb-dir``."""
    from tapt.retrieval.mteb_results import mteb_model_name, require_mteb
    from tapt.util.ids import path_component

    require_mteb("--format mteb")
    check_folder("--mteb-dir", args.mteb_dir)
    if args.top_k < MTEB_MIN_TOP_K:
        raise ValueError(f"--format mteb: --top-k {args.top_k} ranks fewer passages than "
                         f"MTEB's main score ndcg_at_10 needs (at least {MTEB_MIN_TOP_K})")
    path_component(mteb_task_name(args), "--mteb-task" if args.mteb_task else
                   "--format mteb: the task name (the data folder's name with --config; "
                   "give another with --mteb-task NAME)")
    for part in mteb_model_name(system_name(args)).split("/"):
        path_component(part, "--format mteb: the model name's part (MTEB names its result "
                             "folders after the model: rename the model's folder)")
    folder = Path(args.mteb_dir) / "results"
    for parent in (folder, *folder.parents):
        if parent.exists() and not parent.is_dir():
            raise ValueError(f"--mteb-dir {args.mteb_dir}: {parent} is a file, where MTEB's "
                             "layout needs a folder")


def check_extra_args(args: argparse.Namespace) -> None:
    """Refuse combinations before any loading: ``--queries`` with ``--dims`` or
    ``--tune-on``, ``--save-run`` deeper than ``--top-k``, ``--format mteb`` without mteb
    or with an unwritable ``--mteb-dir`` (on an input: ``tapt.cli.retrieval``'s output
    check, :func:`tapt.util.outputs.check_apart`)."""
    if args.queries:
        from tapt.data.query_sets import parse_query_set_specs

        parse_query_set_specs(args.queries)
        for flag in ("dims", "tune_on"):
            if getattr(args, flag, None):
                raise ValueError(f"--queries and --{flag.replace('_', '-')}: evaluate the "
                                 "query sets at one width and one fusion setting")
    if args.save_run is not None and args.save_run > args.top_k:
        raise ValueError(f"--save-run {args.save_run}: the ranking holds --top-k "
                         f"{args.top_k} passages per query; store at most that many")
    if args.format == "mteb":
        check_mteb_args(args)


def query_set_inputs(args: argparse.Namespace) -> list[tuple[str, Path]]:
    """``--queries``' files, as inputs no output may land on ([] without the flag)."""
    if not getattr(args, "queries", None):
        return []
    from tapt.data.query_sets import parse_query_set_specs

    return [("--queries", path) for path in parse_query_set_specs(args.queries).values()]


def read_query_sets(args: argparse.Namespace, dataset) -> dict[str, dict[str, str]]:
    """``--queries``' files, validated against the split's qrels ({} without the flag)."""
    if not args.queries:
        return {}
    from tapt.data.query_sets import parse_query_set_specs
    from tapt.data.query_sets import read_query_sets as read_files

    files = parse_query_set_specs(args.queries)
    return read_files(files, dataset.split(args.split), dataset.split_file(args.split),
                      dataset.rule)


def evaluate(args: argparse.Namespace, retriever, dataset, corpus_ids, info, query_sets):
    """``(report, retriever, per-width reports, QuerySetResults)``: without query sets what
    :func:`tapt.cli.eval_views.evaluate_views` gives (and None); with them the report of the
    split's own queries from the one retrieval of every set (no widths). The report is None
    on a DDP rank other than 0."""
    if not query_sets:
        from tapt.cli.eval_views import evaluate_views

        return (*evaluate_views(args, retriever, dataset, corpus_ids, info), None)
    from tapt.retrieval.query_set_retrieval import evaluate_query_sets

    results = evaluate_query_sets(retriever, dataset, args.split, query_sets,
                                  corpus_ids=corpus_ids, with_title=not args.no_title,
                                  info=info)
    return (None, retriever, None, None) if results is None else \
        (results.original, retriever, None, results)


def system_name(args: argparse.Namespace) -> str:
    """What was evaluated, for MTEB's model name: ``--model`` (``bm25`` for ``tapt bm25``),
    with the fusion of ``--hybrid``."""
    name = getattr(args, "model", None) or "bm25"
    return f"{name}+bm25-{args.fusion}" if getattr(args, "hybrid", None) else name


def ranking_section(run, depth: int) -> dict:
    """``--save-run``: each query's top ``depth`` passages as ``[id, score]`` pairs, in
    trec_eval's order (the order the metrics and ``--run`` use)."""
    from tapt.retrieval.metrics import trec_ranking

    return {"depth": depth, "queries": {query_id: [[doc_id, score] for doc_id, score in
                                                   trec_ranking(docs)[:depth]]
                                        for query_id, docs in run.items()}}


def finish_extras(args: argparse.Namespace, report, results, dataset, corpus_ids) -> None:
    """Print and store what the extra flags asked for: the query-set tables and section,
    the stored ranking (MTEB's files come after ``--output`` is written: :func:`write_mteb`)."""
    if results is not None:
        show_query_sets(args, report, results)
    if args.save_run is not None:
        report.sections[RANKING_SECTION] = ranking_section(report.run, args.save_run)


def show_query_sets(args: argparse.Namespace, report, results) -> None:
    from tapt.analysis.rewritten_queries import ORIGINAL, compare_query_sets, query_set_table
    from tapt.data.query_sets import parse_query_set_specs

    files = parse_query_set_specs(args.queries)
    sources = {ORIGINAL: f"{report.info['data']} queries", **{n: str(p)
                                                              for n, p in files.items()}}
    comparison = compare_query_sets(report.per_query,
                                    {n: m.per_query for n, m in results.sets.items()},
                                    sources=sources)
    for name in comparison.rows:
        title = (f"{args.split}: query set {name} ({comparison.queries[name]:,} of "
                 f"{comparison.original_queries:,} queries) against the original")
        terminal.console.print(query_set_table(comparison, name, title))
    section = comparison.to_dict()
    for name, metrics in results.sets.items():
        section["sets"][name]["mean"] = metrics.mean
        section["sets"][name]["per_query"] = metrics.per_query
    report.sections["query_sets"] = section


def mteb_task_name(args: argparse.Namespace) -> str:
    """``--mteb-task``, else the data's name (a Hub id's last part), with ``--config``."""
    if args.mteb_task:
        return args.mteb_task
    base = Path(str(args.data)).name or str(args.data)
    return f"{base}-{args.config}" if args.config else base


def evaluation_revision(args: argparse.Namespace, report) -> str:
    """MTEB's revision folder for this evaluation: ``tapt-`` and a digest of what was
    evaluated (the model, resolved when a folder, and the report's ``evaluated`` block:
    data, split, sub-corpus, precision, fusion, top-k, ...), so that two different
    evaluations never share a result file (an export called ``final/`` is one of many)."""
    model = system_name(args)
    identity = str(Path(model).resolve()) if Path(model).exists() else model
    settings = {key: value for key, value in report.info.items()
                if key not in ("search", "timings", "api", "mteb")}
    settings["search"] = {key: value for key, value in (report.info.get("search") or {}).items()
                          if key != "passages_from_cache"}
    text = json.dumps({"model": identity, "evaluated": settings}, sort_keys=True, default=str)
    return "tapt-" + hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def write_mteb(args: argparse.Namespace, report, dataset, corpus_ids) -> None:
    """MTEB's scores of the report's ranking, in MTEB's layout under ``--mteb-dir``, in the
    revision folder of this evaluation (:func:`evaluation_revision`); called after
    ``--output`` is written, so a failure here loses nothing computed."""
    from tapt.retrieval.mteb_results import main_scores, task_result_of_run, write_task_result

    revision = evaluation_revision(args, report)
    task_result, meta = task_result_of_run(
        report.run, dataset, args.split, model_name=system_name(args),
        task_name=mteb_task_name(args), top_k=args.top_k, corpus_ids=corpus_ids,
        dataset_revision=args.revision, model_revision=revision)
    path = write_task_result(task_result, meta, args.mteb_dir)
    score = main_scores(task_result)[args.split]
    report.info["mteb"] = {"task": task_result.task_name, "model": meta.name,
                           "revision": revision, "main_score": score, "file": str(path)}
    terminal.console.print(f"MTEB result ({task_result.task_name}, ndcg_at_10 {score:.5f}) "
                           f"written to {path}", highlight=False)
