"""``tapt cache ls | prune``: the local-model embedding cache
(:mod:`tapt.retrieval.embedding_cache`), the cached Arrow corpora
(:mod:`tapt.data.arrow_corpus`) and training's scratch folders
(:mod:`tapt.run_folder.scratch`: listed; prune removes those whose process has ended)."""

from __future__ import annotations

import argparse
import datetime
from pathlib import Path

from tapt.cli import terminal
from tapt.cli.number_types import cache_gb, days


def add_parsers(commands) -> None:
    """``tapt cache ls`` and ``tapt cache prune``."""
    cache = commands.add_parser("cache", help="list or prune the embedding cache of local "
                                              "models, the cached Arrow corpora and "
                                              "training's scratch folders")
    cache_commands = cache.add_subparsers(dest="cache_command", required=True,
                                          metavar="ACTION", help="ls or prune")
    for name, text in (("ls", ("every cached model and corpus (rows, size, last use) and "
                               "training's scratch folders")),
                       ("prune", ("delete model keys and corpora unused for N days, then "
                                  "the least recently used past a size, and the scratch "
                                  "folders of ended training processes"))):
        action = cache_commands.add_parser(name, help=text)
        action.add_argument("--cache-dir", type=Path, default=None,
                            help="embedding cache folder (default: $TAPT_CACHE_DIR/embeddings, "
                                 "else ~/.cache/tapt/embeddings)")
        action.add_argument("--corpus-cache", type=Path, default=None,
                            help="Arrow corpus folder (default: $TAPT_CACHE_DIR/corpus, else "
                                 "~/.cache/tapt/corpus)")
        if name == "prune":
            action.add_argument("--older-than-days", type=days, default=None,
                                help="delete what was not used for this many days")
            action.add_argument("--max-gb", type=cache_gb, default=None,
                                help="then keep at most this many GB in both together (least "
                                     "recently used go first; scratch folders are not "
                                     "counted: those of ended processes are removed "
                                     "whatever their age or size)")


def _root(args: argparse.Namespace) -> Path:
    from tapt.encoders.api.cache import default_cache_dir

    return (args.cache_dir or default_cache_dir()) / "local"


def _corpus_folder(args: argparse.Namespace) -> Path:
    from tapt.data.arrow_corpus import default_corpus_cache

    return args.corpus_cache or default_corpus_cache()


def _when(timestamp: float) -> str:
    return datetime.datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M")


def _table(title: str, entries, corpora: bool = False):
    from rich.table import Table

    table = Table(title=title)
    columns = ("file", "corpus", "passages", "size", "last used") if corpora else \
        ("key", "model settings", "passages", "size", "last used")
    for column in columns:
        table.add_column(column, justify="right" if column in ("passages", "size") else "left")
    for entry in entries:
        if corpora:
            name, what = entry.path.name, entry.key.get("source", "?")
        else:
            name = entry.path.name[:12]
            what = f"{entry.key.get('kind', '?')}, max length " \
                   f"{entry.key.get('max_length', '?')}, {entry.key.get('dtype', '?')}"
        size = f"{entry.bytes / 1e9:.2f} GB"
        if getattr(entry, "unfinished_bytes", 0):
            size += f" ({entry.unfinished_bytes / 1e9:.2f} GB unfinished writes)"
        rows = f"{entry.rows:,}" if corpora or entry.rows else "0 (nothing cached)"
        table.add_row(name, what, rows, size, _when(entry.last_used))
    return table


def _scratch_table(title: str, folders):
    from rich.table import Table

    table = Table(title=title)
    for column in ("folder", "state", "size"):
        table.add_column(column, justify="right" if column == "size" else "left")
    for folder in folders:
        table.add_row(folder.path.name, folder.state, f"{folder.bytes / 1e9:.2f} GB")
    return table


def _summary(verb: str, models, corpora, scratch) -> str:
    """One line counting what the tables list (the model keys that hold nothing cached
    among them named as such)."""
    total = sum(e.bytes for e in [*models, *corpora, *scratch])
    empty = sum(1 for e in models if not e.rows)
    holding = f" ({empty} holding nothing cached)" if empty else ""
    return (f"{verb}{len(models)} model keys{holding}, {len(corpora)} corpora, "
            f"{len(scratch)} scratch folders, {total / 1e9:.2f} GB")


def cmd_cache(args: argparse.Namespace) -> int:
    from tapt.data.arrow_corpus import list_corpus_files
    from tapt.retrieval.embedding_cache_entries import UNSTARTED, list_entries
    from tapt.run_folder.scratch import list_scratch, remove_stale, scratch_root
    from tapt.util.cache_entries import (
        prune_entries,
        remove_abandoned_deletions,
        remove_unstarted,
    )

    root, folder = _root(args), _corpus_folder(args)
    if args.cache_command == "prune" and (args.older_than_days is not None
                                          or args.max_gb is not None):
        remove_abandoned_deletions(root)  # what no table lists: a killed prune's and
        remove_unstarted(root, UNSTARTED)  # a process's killed before it recorded its key
    models, corpora = list_entries(root), list_corpus_files(folder)
    scratch = list_scratch()
    if args.cache_command == "ls":
        terminal.console.print(_table(f"embedding cache {root}", models))
        terminal.console.print(_table(f"corpus cache {folder}", corpora, corpora=True))
        terminal.console.print(_scratch_table(f"scratch folders {scratch_root()} (in use: "
                                              "its training runs; left: its process "
                                              "ended, prune removes it)", scratch))
        terminal.console.print(_summary("", models, corpora, scratch))
        return 0
    if args.older_than_days is None and args.max_gb is None:
        raise ValueError("tapt cache prune: give --older-than-days and/or --max-gb")
    deleted = prune_entries([*models, *corpora], older_than_days=args.older_than_days,
                            keep_bytes=None if args.max_gb is None else int(args.max_gb * 1e9))
    corpus_paths = {e.path for e in corpora}
    gone_models = [e for e in deleted if e.path not in corpus_paths]
    gone_corpora = [e for e in deleted if e.path in corpus_paths]
    terminal.console.print(_table(f"deleted from {root}", gone_models))
    terminal.console.print(_table(f"deleted from {folder}", gone_corpora, corpora=True))
    removed: set[Path] = set()
    for kind in sorted({f.kind for f in scratch if f.state == "left"}):
        removed.update(remove_stale(scratch_root(), kind))  # checks each process again
    gone_scratch = [f for f in scratch if f.path in removed]
    terminal.console.print(_scratch_table(f"deleted from {scratch_root()}", gone_scratch))
    if stuck := [f.path.name for f in scratch if f.state == "left" and f.path not in removed
                 and f.path.exists()]:
        terminal.console.print(f"could not remove {len(stuck)} scratch folder(s) left by "
                               f"ended processes (no permission?): {', '.join(stuck)}",
                               markup=False, highlight=False)
    terminal.console.print(_summary("deleted ", gone_models, gone_corpora, gone_scratch))
    return 0


COMMANDS = {"cache": cmd_cache}
