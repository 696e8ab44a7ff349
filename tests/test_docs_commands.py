"""Every ``tapt`` command the documentation shows parses with tapt's own parsers, so the
documentation runs as written: each command in a fenced code block of README.md and
docs/*.md, each command in a recipe's header (its leading ``#`` lines, which users copy),
and each row of README.md's command table (which must list every command).

Which lines are commands: in a fenced block, a line (joined with the next ones while it
ends with ``\\``; a leading ``$ `` and ``VAR=value`` words are dropped; ``#`` starts a
comment) that starts with ``tapt``, ``python -m tapt``, ``python tapt``,
``accelerate launch [options] tapt`` or ``torchrun [options] -m tapt [--]``.
docs/reliability.md is generated from the tests and left out. In the command table, the
optional parts of a row (``[...]``) are left out.

How a command is checked, as ``tapt.cli.main.main`` parses it: ``build_parser()`` and
``parse_known_args``; an argparse error (unknown command, missing argument, bad value) fails;
left-over words are refused except ``key=value`` overrides of ``train``, ``dapt`` and
``sweep``, whose keys must be recipe keys (``tapt recipe schema``) and whose values must be
YAML (but a sweep's, which are comma lists); a recipe given to ``train``, ``dapt``,
``sweep`` or ``validate`` must exist in the repository.

Placeholders (the one rule): a word holding a name in capitals (``N``, ``MODEL``,
``RESULT.json``, ``NODE0_ADDRESS``, ``KEY=V1,V2``) or that is ``...`` stands for a value of
the user's; it fills an option's value without its type or choices being checked (a choice
option gets its first choice), and a placeholder recipe or override key is not looked for.
``a|b`` in a value means "a or b": each alternative must pass the option's type and
choices. A placeholder left over as an unknown word still fails, so ``...`` may only stand
where a value goes.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from tapt.cli.main import build_parser
from tapt.recipe import describe_schema, parse_override

ROOT = Path(__file__).resolve().parents[1]
GENERATED = {"docs/reliability.md"}
"""Pages written by a script (scripts/reliability_report.py), not by hand."""
OVERRIDE_COMMANDS = {"train": "tapt", "sweep": "tapt", "dapt": "dapt"}
"""Commands that take ``key=value`` overrides -> the recipe kind whose keys they take."""
RECIPE_COMMANDS = {"train", "dapt", "sweep", "validate"}
PLACEHOLDER = re.compile(r"(?<![A-Za-z0-9])[A-Z][A-Z0-9_]*(?![a-z0-9])|^\.\.\.$")
FENCE = re.compile(r"^\s*(```|~~~)")


def doc_pages(root: Path = ROOT) -> list[Path]:
    """README.md and every hand-written page under docs/."""
    pages = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    return [page for page in pages if page.relative_to(root).as_posix() not in GENERATED]


@dataclass(frozen=True)
class DocCommand:
    """One documented command: where it is, as written, and the words tapt parses."""

    page: str
    line: int
    text: str
    words: tuple[str, ...]  # the words after ``tapt`` (after its launcher)

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {self.text}"


def joined(numbered):
    """(number, line) pairs -> (first number, logical line): a line ending with ``\\``
    continues on the next; a ``None`` line ends a block (and any pending line)."""
    pending, start = "", 0
    for number, line in numbered:
        if line is None:
            pending = ""
            continue
        if not pending:
            start = number
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        yield start, pending + line
        pending = ""


def fenced_lines(text: str):
    """(line number, logical line) of every fenced code block, continuations joined."""
    def inside_fences():
        inside = False
        for number, line in enumerate(text.splitlines(), 1):
            if FENCE.match(line):
                inside = not inside
                yield number, None
            elif inside:
                yield number, line
    return joined(inside_fences())


def tapt_words(line: str) -> list[str] | None:
    """The words after ``tapt`` if ``line`` runs tapt (directly or under a launcher)."""
    stripped = line.strip().removeprefix("$ ")
    first = stripped.split(maxsplit=1)[0] if stripped else ""
    if first not in ("tapt", "python", "python3", "accelerate", "torchrun") and "=" not in first:
        return None
    try:
        words = shlex.split(stripped, comments=True)
    except ValueError:  # not shell (a heredoc's body): no command
        return None
    while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=\S*", words[0]):
        words = words[1:]  # OMP_NUM_THREADS=1 tapt ...
    if not words:
        return None
    if words[0] == "tapt":
        return words[1:]
    if words[0] in ("python", "python3"):
        if words[1:3] == ["-m", "tapt"]:
            rest = words[3:]
        elif words[1:2] == ["tapt"]:
            rest = words[2:]
        else:
            return None
    elif words[:2] == ["accelerate", "launch"]:
        if "tapt" not in words[2:]:
            return None
        rest = words[words.index("tapt", 2) + 1:]
    elif words[0] == "torchrun":
        module = [i for i in range(1, len(words) - 1) if words[i:i + 2] == ["-m", "tapt"]]
        if not module:
            return None
        rest = words[module[0] + 2:]
    else:
        return None
    return rest[1:] if rest[:1] == ["--"] else rest


def header_lines(text: str):
    """(line number, logical line) of a recipe's header: the ``#`` comment lines before its
    first key, the ``#`` taken off, continuations joined (the header's ``Run:`` commands)."""
    lines = enumerate(text.splitlines(), 1)
    return joined((number, line[1:]) for number, line in
                  itertools.takewhile(lambda pair: pair[1].startswith("#"), lines))


def recipe_files(root: Path = ROOT) -> list[Path]:
    return sorted((root / "recipes").glob("*.yaml"))


def doc_commands(pages: list[Path] | None = None, root: Path = ROOT) -> list[DocCommand]:
    """The commands of the pages' fenced blocks and of the recipes' headers."""
    found = []
    for page in pages if pages is not None else [*doc_pages(root), *recipe_files(root)]:
        name = page.relative_to(root).as_posix()
        lines = header_lines if page.suffix == ".yaml" else fenced_lines
        for number, line in lines(page.read_text(encoding="utf-8")):
            words = tapt_words(line)
            if words is not None:
                found.append(DocCommand(name, number, " ".join(line.split()), tuple(words)))
    return found


def is_placeholder(word: str) -> bool:
    return bool(PLACEHOLDER.search(word))


def lenient_type(action: argparse.Action):
    """``action``'s type and choices check, letting placeholders through and checking
    each alternative of ``a|b``."""
    convert = action.type or (lambda text: text)
    choices = action.choices

    def checked(text: str):
        value = convert(text)
        if choices is not None and value not in choices:
            raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from "
                                             f"{', '.join(map(str, choices))})")
        return value

    def placeholder_aware(text: str):
        if action.type is None and choices is None:  # any text (an override too), as written
            return text
        if is_placeholder(text):
            return next(iter(choices)) if choices is not None else text
        if "|" in text:
            alternatives = [checked(part) for part in text.split("|")]  # each one checked
            return alternatives[0]
        return checked(text)

    placeholder_aware.__name__ = getattr(action.type, "__name__", "value")
    return placeholder_aware


def placeholder_parser() -> argparse.ArgumentParser:
    """tapt's parser with every option's value check made placeholder-aware."""
    parser = build_parser()
    stack = [parser]
    while stack:
        current = stack.pop()
        for action in current._actions:
            if isinstance(action, argparse._SubParsersAction):
                stack.extend(action.choices.values())
            elif action.nargs != 0:  # an option or argument that takes a value
                action.type, action.choices = lenient_type(action), None
    return parser


def recipe_keys(kind: str) -> set[str]:
    """Every dotted key of a recipe, sections included (``loss`` and ``loss.name``)."""
    keys = set()
    for row in describe_schema(kind):
        parts = row.key.split(".")
        keys.update(".".join(parts[:end]) for end in range(1, len(parts) + 1))
    return keys


def problems(command: DocCommand, parser: argparse.ArgumentParser, root: Path = ROOT) -> list[str]:
    """What keeps ``command`` from parsing as tapt parses it; empty if nothing."""
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
            args, extra = parser.parse_known_args(list(command.words))
    except SystemExit:
        lines = errors.getvalue().strip().splitlines()
        return [lines[-1] if lines else "argparse exited"]
    found = []
    overrides_kind = OVERRIDE_COMMANDS.get(args.command)
    if overrides_kind and all("=" in word and not word.startswith("-") for word in extra):
        overrides, extra = list(args.overrides) + extra, []
    else:
        overrides = list(getattr(args, "overrides", []) or [])
    if extra:
        found.append(f"unrecognized arguments: {' '.join(extra)}")
    if overrides_kind:
        keys = recipe_keys(overrides_kind)
        for override in overrides:
            key = override.partition("=")[0]
            if is_placeholder(key):  # KEY=V1,V2 in a synopsis
                continue
            if key not in keys:
                found.append(f"override {override!r}: {key!r} is not a {overrides_kind} "
                             "recipe key (tapt recipe schema)")
            elif args.command != "sweep":  # a sweep's values are comma lists
                try:
                    parse_override(override)
                except ValueError as err:
                    found.append(str(err))
    if args.command in RECIPE_COMMANDS:
        recipes = getattr(args, "recipes", None) or [args.recipe]
        for recipe in map(str, recipes):
            if not is_placeholder(recipe) and not (root / recipe).is_file():
                found.append(f"recipe {recipe} does not exist")
    return found


COMMANDS = doc_commands()


def test_the_recipe_headers_are_checked_too():
    """Each best recipe's header shows the workflow: train it, measure it and the untrained
    model fused with BM25, and compare them with the paired test; those lines are among the
    checked commands."""
    for recipe in ("recipes/quickstart-best.yaml", "recipes/scifact-best.yaml"):
        words = {command.words[0] for command in COMMANDS if command.page == recipe}
        assert words >= {"eval", "train", "compare"}, (recipe, words)
        compare = next(c for c in COMMANDS if c.page == recipe and c.words[0] == "compare")
        assert "--baseline" in compare.words


def test_a_wrong_flag_in_a_recipe_header_fails(tmp_path):
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "r.yaml").write_text(
        "# Run:\n#   tapt mine --data D --retriever bm25 --per-qery 3 \\\n"
        "#       --output m.jsonl\nmodel:\n  name: m\n# tapt eval --bogus (not header)\n",
        encoding="utf-8")
    (command,) = doc_commands(recipe_files(tmp_path), tmp_path)
    assert (command.page, command.line) == ("recipes/r.yaml", 2)
    assert command.words[-2:] == ("--output", "m.jsonl")  # the continuation was joined
    found = problems(command, placeholder_parser())
    assert found and "--per-qery" in " ".join(found)


def test_the_pages_hold_commands_of_every_launcher():
    texts = [str(command) for command in COMMANDS]
    assert len(COMMANDS) >= 40, texts
    assert any("accelerate launch" in text for text in texts)
    assert any("torchrun" in text for text in texts)
    assert {command.words[0] for command in COMMANDS} >= {"eval", "bm25", "train", "dapt",
                                                          "sweep", "merge", "soup", "push"}


@pytest.mark.parametrize("command", COMMANDS, ids=[f"{c.page}:{c.line}" for c in COMMANDS])
def test_every_documented_command_parses(command):
    found = problems(command, placeholder_parser())
    assert not found, (str(command), found)


def write_page(tmp_path: Path, body: str) -> list[DocCommand]:
    (tmp_path / "docs").mkdir(exist_ok=True)
    (tmp_path / "README.md").write_text("# x\n", encoding="utf-8")
    (tmp_path / "docs" / "page.md").write_text(body, encoding="utf-8")
    return doc_commands(doc_pages(tmp_path), tmp_path)


def test_an_unknown_flag_fails(tmp_path):
    """A scratch copy of the pages with one flag that does not exist: exactly that command
    fails, naming the flag."""
    mark = "--lenient --queries half="
    for page in doc_pages():
        name = page.relative_to(ROOT).as_posix()
        text = page.read_text(encoding="utf-8")
        if mark in text:
            text = text.replace(mark, "--lenient --no-such-flag --queries half=", 1)
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    commands = doc_commands(doc_pages(tmp_path), tmp_path)
    parser = placeholder_parser()
    failing = [c for c in commands if problems(c, parser, ROOT)]
    assert len(commands) == len([c for c in COMMANDS if not c.page.startswith("recipes/")])
    assert len(failing) == 1 and "--no-such-flag" in failing[0].text
    assert "unrecognized arguments: --no-such-flag" in problems(failing[0], parser, ROOT)


@pytest.mark.parametrize("body,problem", [
    ("```bash\ntapt evaluate --data d\n```\n", "invalid choice"),
    ("```bash\ntapt eval --data d --top-k many\n```\n", "--top-k"),
    ("```bash\ntapt data synth OUT --variant structured|mixed\n```\n", "mixed"),
    ("```bash\ntapt train recipes/quickstart.yaml training.learnin_rate=1e-5\n```\n",
     "'training.learnin_rate' is not a tapt recipe key"),
    ("```bash\ntapt dapt recipes/dapt-quickstart.yaml loss.name=mnrl\n```\n",
     "'loss.name' is not a dapt recipe key"),
    ("```bash\ntapt train recipes/no-such.yaml\n```\n", "recipe recipes/no-such.yaml"),
    ("```bash\ntapt eval --model m ... --data d\n```\n", "unrecognized arguments: ..."),
    (("```bash\naccelerate launch --config_file c.yaml tapt train recipes/quickstart.yaml \\\n"
      "    --no-such-flag\n```\n"), "--no-such-flag"),
    ("```bash\ntorchrun --nproc_per_node 2 -m tapt -- eval --model m --data d --bad\n```\n", "--bad"),
])
def test_what_fails(tmp_path, body, problem):
    (command,) = write_page(tmp_path, body)
    found = problems(command, placeholder_parser(), ROOT)
    assert any(problem in text for text in found), found


@pytest.mark.parametrize("body", [
    "```bash\ntapt data synth OUT --queries N --distractors M --variant structured|random\n```\n",
    "```bash\ntapt eval --model ... --data D --split test  # a comment --bad\n```\n",
    ("```bash\ntapt train recipes/quickstart.yaml --test loss.name=margin_mse \\\n"
     "    \"loss.grade_targets={3: 1.0, 2: 0.9}\"\n```\n"),
    ("```bash\nOMP_NUM_THREADS=1 python -m tapt sweep recipes/quickstart.yaml "
     "\"loss.matryoshka_dims=[1024,256],[64]\"\n```\n"),
])
def test_what_passes(tmp_path, body):
    (command,) = write_page(tmp_path, body)
    assert not problems(command, placeholder_parser(), ROOT)


def test_lines_that_do_not_run_tapt_are_not_commands(tmp_path):
    body = ("```python\nimport tapt\ntapt.register_family('e5')\n```\n"
            "```bash\npython examples/formbench_table1.py\nhf auth login\n```\n"
            "tapt eval --bad outside a fence\n")
    assert write_page(tmp_path, body) == []


def table_synopses(readme: Path = ROOT / "README.md") -> list[DocCommand]:
    """The README's command table (under ``| command | what |``): each ``tapt ...`` code
    span of a row's first cell, its optional parts (``[...]``) left out and ``\\|`` read
    as ``|``."""
    found, inside = [], False
    for number, line in enumerate(readme.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("| command | what |"):
            inside = True
        inside = inside and line.startswith("|")
        if not inside or not line.startswith("| `tapt "):
            continue
        first_cell = re.split(r"(?<!\\)\|", line)[1]
        for span in re.findall(r"`([^`]+)`", first_cell):
            synopsis = span.replace("\\|", "|")
            while re.search(r"\[[^\[\]]*\]", synopsis):
                synopsis = re.sub(r"\s*\[[^\[\]]*\]", "", synopsis)
            found.append(DocCommand("README.md", number, synopsis,
                                    tuple(tapt_words(synopsis) or ())))
    return found


def leaf_commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """The word paths of every command that runs (``data synth``, ``eval``)."""
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subparsers:
        yield path
    for action in subparsers:
        for name, sub in action.choices.items():
            yield from leaf_commands(sub, (*path, name))


SYNOPSES = table_synopses()


def test_the_command_table_has_every_command():
    listed = {command.words[:2] for command in SYNOPSES} | \
        {command.words[:1] for command in SYNOPSES}
    missing = [" ".join(path) for path in leaf_commands(build_parser())
               if tuple(path) not in listed]
    assert not missing, f"commands without a row in README.md's command table: {missing}"


@pytest.mark.parametrize("command", SYNOPSES, ids=[c.text for c in SYNOPSES])
def test_every_row_of_the_command_table_parses(command):
    found = problems(command, placeholder_parser())
    assert not found, (str(command), found)
