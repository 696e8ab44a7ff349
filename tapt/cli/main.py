"""The ``tapt`` entry point: the parser of every command, and the dispatch that turns
tapt's errors into one ``error: ...`` line and an exit code."""

from __future__ import annotations

import argparse
import logging
import shlex
import sys
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as installed

from rich.markup import escape

from tapt.cli import (
    analysis,
    cache,
    cases,
    combine,
    data,
    hub,
    pseudo,
    retrieval,
    selection,
    serving,
    terminal,
    training,
)
from tapt.cli.options import CommandParser, check_cache_folders
from tapt.data.beir import DataError
from tapt.util.folder_replace import forget_published, published
from tapt.util.process_group import close_process_group, end_launched_process

logger = logging.getLogger("tapt")
GROUPS = (data, retrieval, pseudo, serving, training, selection, combine, hub, analysis, cases, cache)
"""The command modules, in the order their commands are listed in ``tapt --help``."""

COMMANDS = {name: handler for group in GROUPS for name, handler in group.COMMANDS.items()}
"""Command name -> handler(args) -> exit code."""

PUBLISHING = ("export", "merge", "soup")
"""Commands whose last step publishes their ``--output`` folder
(:func:`tapt.util.folder_replace.replace_folder`): a Ctrl-C that comes after it ends them
as complete (exit 0, naming the folder), not as interrupted."""

DESCRIPTION = ("tapt: contrastive fine-tuning and exact retrieval evaluation of text-embedding\n"
               "models. Each command parses its options, calls the library and prints.")


def version() -> str:
    """tapt's installed version (the package metadata), else the source tree's."""
    try:
        return installed("tapt")
    except PackageNotFoundError:
        from tapt import __version__

        return __version__


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(prog="tapt", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"tapt {version()}",
                        help="print tapt's version and exit")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                     help="one of the commands below; tapt COMMAND --help "
                                          "for its options")
    for group in GROUPS:
        group.add_parsers(commands)
    return parser


def entry() -> int:
    """The ``tapt`` program (``python -m tapt``, the console script): :func:`main` on the
    process's own arguments; a rank started by a launcher ends here
    (:func:`~tapt.util.process_group.end_launched_process`)."""
    code = main()
    end_launched_process(code)
    return code


def main(argv: list[str] | None = None) -> int:
    """Run one tapt command (``argv``: the arguments, None: the process's own) and return
    its exit code."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    # argparse stops filling the overrides at the first option; accept key=value after it.
    if extra and args.command in ("train", "dapt", "sweep") and \
            all("=" in e and not e.startswith("-") for e in extra):
        args.overrides += extra
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    from rich.logging import RichHandler

    quiet = getattr(args, "quiet", False)
    level = logging.DEBUG if args.verbose else logging.WARNING if quiet else logging.INFO
    handler = RichHandler(show_path=False, level=level, console=terminal.log_console())
    handler.addFilter(terminal.ShownOnce())  # a sweep's trials repeat their data's warnings
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(message)s", handlers=[handler])
    logger.setLevel(level)  # --quiet: warnings and errors only
    from tapt.util.redaction import install_log_redaction, redact

    install_log_redaction()
    from tapt.hub.errors import PushFailed
    from tapt.training.errors import NonFiniteTrainingError

    console = terminal.console
    terminal.stop_on_ctrl_c()  # also when started with SIGINT ignored (cmd & in a script)
    forget_published()
    try:
        check_cache_folders(args)  # --corpus-cache / --cache-dir: a file there is refused
        with terminal.hub_bars_off(not terminal.show_progress(args)):  # quiet, or piped
            return COMMANDS[args.command](args)
    except (DataError, OSError, ValueError) as err:
        console.print(f"[red]error:[/red] {escape(redact(str(err)))}", highlight=False,
                      soft_wrap=True)  # paths in messages stay whole for copy and paste
        return 2
    except NonFiniteTrainingError as err:
        console.print(f"[red]training stopped:[/red] {escape(redact(str(err)))}",
                      highlight=False, soft_wrap=True)
        return 3
    except PushFailed as err:  # the end-of-run push of a recipe's hub section
        console.print(f"[red]push failed:[/red] {escape(redact(str(err)))} (the export is kept; "
                      "push it again with tapt push)", highlight=False, soft_wrap=True)
        return 1
    except KeyboardInterrupt as err:  # Ctrl-C: one line, no traceback, exit 130 (128 + SIGINT)
        done = published() if args.command in PUBLISHING else []
        if done:  # the result was whole before the interrupt came
            console.print(f"interrupted after the result was written: "
                          f"{escape(redact(str(done[-1])))} is complete", highlight=False,
                          soft_wrap=True)
            return 0
        command = "tapt " + shlex.join(sys.argv[1:] if argv is None else argv)
        line = err.message(command) if hasattr(err, "message") else "interrupted"
        console.print(escape(redact(line)), highlight=False, soft_wrap=True)
        return 130
    finally:
        close_process_group()  # under torchrun: before exit, not in static destructors


if __name__ == "__main__":
    sys.exit(main())
