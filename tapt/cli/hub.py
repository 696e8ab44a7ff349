"""``tapt push``: publish a tapt export to the HuggingFace Hub (huggingface_hub is
imported inside the handler)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.markup import escape

from tapt.cli import terminal


def add_parsers(commands) -> None:
    """``tapt push``."""
    push = commands.add_parser("push", help="publish an export to the HuggingFace Hub (token "
                                            "from HF_TOKEN or `hf auth login`)")
    push.add_argument("folder", type=Path, help="a tapt export, e.g. runs/NAME/final")
    push.add_argument("--repo-id", required=True, help="ORG/NAME, created if missing")
    push.add_argument("--private", action="store_const", const=True, default=None,
                      help="create the repository private (default: the Hub's default)")
    push.add_argument("--revision", default=None,
                      help="branch to push to, created if missing (default: main)")
    push.add_argument("--commit-message", default=None,
                      help="Hub commit message (default: one naming the export)")
    push.add_argument("--license", default="apache-2.0",
                      help="license the model card must declare (default: apache-2.0)")
    push.add_argument("--trust-remote-code", action="store_true",
                      help="let the load check run the model's own code (default: off; an "
                           "export recorded as running its own code is refused without it)")
    push.add_argument("--dry-run", action="store_true",
                      help="check, list the files and print the card; no network call")


def cmd_push(args: argparse.Namespace) -> int:
    from tapt.hub import PushFailed, push_export
    from tapt.hub.upload_table import files_table

    try:
        result = push_export(args.folder, args.repo_id, private=args.private,
                             revision=args.revision, commit_message=args.commit_message,
                             license=args.license, dry_run=args.dry_run,
                             trust_remote_code=args.trust_remote_code)
    except PushFailed as err:  # refusals (PushRefused) exit 2 through main()
        terminal.console.print(f"[red]error:[/red] {escape(str(err))}", highlight=False,
                               soft_wrap=True)
        return 1
    target = f"{result.url}" + (f" (branch {args.revision})" if args.revision else "")
    if not args.dry_run:
        terminal.console.print(files_table(result.plan, f"pushed to {target}"))
        terminal.console.print(f"commit: {result.commit_url}", highlight=False, soft_wrap=True)
        return 0
    terminal.console.print(files_table(result.plan,
                                       f"dry run: would push {args.folder} to {target}"))
    terminal.console.rule("README.md (model card)")
    terminal.console.out(result.plan.card, highlight=False)
    terminal.console.rule()
    terminal.console.print("dry run: nothing was uploaded", highlight=False)
    return 0


COMMANDS = {"push": cmd_push}
