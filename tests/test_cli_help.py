"""``tapt --help`` and every command's help: each option has a help line, defaults are
shown, the top-level description is plain text, ``tapt --version`` exists; the package
``tapt.cli`` keeps its public names."""

from __future__ import annotations

import argparse
from importlib.metadata import version

import pytest

from tapt.cli import build_parser, main
from tapt.cli.options import HelpFormatter


def walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ("tapt",)):
    """(command path, parser) for ``parser`` and every sub-parser under it."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from walk(sub, (*path, name))


PARSERS = list(walk(build_parser()))


def test_the_walk_reaches_every_command():
    names = {" ".join(path) for path, _ in PARSERS}
    assert {"tapt data synth", "tapt eval", "tapt mine", "tapt ablate corpus-size",
            "tapt recipe schema", "tapt push", "tapt merge"} <= names


@pytest.mark.parametrize("path,parser", PARSERS, ids=[" ".join(p) for p, _ in PARSERS])
def test_every_option_has_a_help_line(path, parser):
    missing = [action.option_strings or action.dest for action in parser._actions
               if not isinstance(action, argparse._HelpAction)
               and not (action.help or "").strip()]
    assert not missing, f"{' '.join(path)}: options without help: {missing}"


@pytest.mark.parametrize("path,parser", PARSERS, ids=[" ".join(p) for p, _ in PARSERS])
def test_every_help_shows_the_defaults(path, parser):
    assert issubclass(parser.formatter_class, argparse.ArgumentDefaultsHelpFormatter)
    formatter = parser._get_formatter()
    for action in parser._actions:
        if (action.option_strings and action.default not in (None, False, argparse.SUPPRESS)
                and not isinstance(action, argparse._HelpAction)):
            shown = formatter._get_help_string(action)
            assert "default" in shown, f"{' '.join(path)} {action.option_strings}: {shown!r}"


SHARED_FLAGS = ("--batch-size", "--max-tokens-per-batch", "--dtype", "--device")
"""Flags several commands take for the same thing: declared by one helper
(``tapt.cli.options.add_batching_args`` / ``add_device_args``)."""


def test_a_shared_flag_reads_the_same_in_every_command():
    """``--batch-size``, ``--max-tokens-per-batch``, ``--dtype`` and ``--device`` have one
    help, type, default and choices wherever they appear (``tapt merge --pick-on-dev``'s
    group once redefined them with another help)."""
    declared: dict[str, dict[tuple, list[str]]] = {}
    for path, parser in PARSERS:
        for action in parser._actions:
            for flag in set(action.option_strings) & set(SHARED_FLAGS):
                how = (action.help, action.type, action.default, tuple(action.choices or ()))
                declared.setdefault(flag, {}).setdefault(how, []).append(" ".join(path))
    assert set(declared) == set(SHARED_FLAGS)
    batch_commands = {command for commands in declared["--batch-size"].values()
                      for command in commands}
    assert {"tapt eval", "tapt merge", "tapt combine"} <= batch_commands
    differing = {flag: ways for flag, ways in declared.items() if len(ways) > 1}
    assert differing == {}


def test_defaults_appear_in_the_printed_help(capsys):
    with pytest.raises(SystemExit):
        main(["data", "synth", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: 600)" in text and "(default: 2000)" in text
    assert "(default: structured)" in text


def test_list_defaults_are_shown_as_words():
    formatter = HelpFormatter("tapt")
    action = argparse.Action(["--fractions"], "fractions", default=[0.1, 0.5], help="x")
    assert formatter._get_help_string(action) == "x (default: 0.1 0.5)"


def test_the_description_is_plain_text(capsys):
    parser = build_parser()
    assert parser.description
    assert not any(mark in parser.description for mark in ("`", "[", "]", ":mod:", "``"))
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert out.startswith("usage: tapt")
    assert "`" not in out.split("positional arguments")[0]


def test_version(capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["--version"])
    assert stopped.value.code == 0
    assert capsys.readouterr().out.strip() == f"tapt {version('tapt')}"


def test_the_public_names_import_from_tapt_cli():
    import tapt.cli
    from tapt.cli import COMMANDS, number_types
    from tapt.cli import options as cli_options

    assert callable(tapt.cli.main) and callable(tapt.cli.build_parser)
    assert number_types.NUMBER_TYPES and cli_options.check_outputs
    assert set(COMMANDS) >= {"data", "eval", "bm25", "train", "dapt", "mine", "push", "merge",
                             "validate", "recipe", "compare", "ablate", "analyze", "probe",
                             "report"}
