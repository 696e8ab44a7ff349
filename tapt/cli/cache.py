"""``tapt cache ls | prune``: the local-model embedding cache
(:mod:`tapt.retrieval.embedding_cache`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from tapt.cli import terminal
from tapt.cli.options import non_negative_float


def add_parsers(commands) -> None:
    """``tapt cache ls`` and ``tapt cache prune``."""
    cache = commands.add_parser("cache", help="list or prune the embedding cache of local "
                                              "models")
    cache_commands = cache.add_subparsers(dest="cache_command", required=True,
                                          metavar="ACTION", help="ls or prune")
    for name, text in (("ls", "every cached model: rows, size, last use"),
                       ("prune", ("delete model keys unused for N days, then the least "
                                  "recently used past a size"))):
        action = cache_commands.add_parser(name, help=text)
        action.add_argument("--cache-dir", type=Path, default=None,
                            help="cache folder (default: $TAPT_CACHE_DIR/embeddings, else "
                                 "~/.cache/tapt/embeddings)")
        if name == "prune":
            action.add_argument("--older-than-days", type=non_negative_float, default=None,
                                help="delete model keys not used for this many days")
            action.add_argument("--max-gb", type=non_negative_float, default=None,
                                help="then keep at most this many GB (least recently used "
                                     "go first)")


def _root(args: argparse.Namespace) -> Path:
    from tapt.encoders.api.cache import default_cache_dir

    return (args.cache_dir or default_cache_dir()) / "local"


def _rows(entries) -> list[tuple[str, str, str, str, str]]:
    import datetime

    rows = []
    for entry in entries:
        used = datetime.datetime.fromtimestamp(entry.last_used).strftime("%Y-%m-%d %H:%M")
        what = f"{entry.key.get('kind', '?')}, max length {entry.key.get('max_length', '?')}, " \
               f"{entry.key.get('dtype', '?')}"
        rows.append((entry.folder.name[:12], what, f"{entry.rows:,}",
                     f"{entry.bytes / 1e9:.2f} GB", used))
    return rows


def _table(title: str, entries):
    from rich.table import Table

    table = Table(title=title)
    for column in ("key", "model settings", "passages", "size", "last used"):
        table.add_column(column, justify="right" if column in ("passages", "size") else "left")
    for row in _rows(entries):
        table.add_row(*row)
    return table


def cmd_cache(args: argparse.Namespace) -> int:
    from tapt.retrieval.embedding_cache import list_entries, prune

    root = _root(args)
    if args.cache_command == "ls":
        entries = list_entries(root)
        terminal.console.print(_table(f"embedding cache {root}", entries))
        total = sum(e.bytes for e in entries)
        terminal.console.print(f"{len(entries)} model keys, {total / 1e9:.2f} GB")
        return 0
    if args.older_than_days is None and args.max_gb is None:
        raise ValueError("tapt cache prune: give --older-than-days and/or --max-gb")
    deleted = prune(root, older_than_days=args.older_than_days,
                    keep_bytes=None if args.max_gb is None else int(args.max_gb * 1e9))
    terminal.console.print(_table(f"deleted from {root}", deleted))
    terminal.console.print(f"deleted {len(deleted)} model keys, "
                           f"{sum(e.bytes for e in deleted) / 1e9:.2f} GB")
    return 0


COMMANDS = {"cache": cmd_cache}
