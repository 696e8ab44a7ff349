"""Write docs/api.md, the API reference, from the docstrings of tapt's public names.

Every name of ``tapt.__all__`` (but ``__version__``) gets a heading, its signature and its
docstring, then each :class:`~tapt.encoders.base.Encoder` method a subclass implements or
may override. The documentation model is pdoc's (``pdoc.doc.Module``, ``.docstring``,
``.signature``); the Google-style sections become Markdown: ``Args:`` / ``Attributes:`` /
``Raises:`` bold headers over lists, ``Returns:`` a paragraph, ``Example::`` (a reST
literal block) a fenced Python block, Sphinx roles (``:class:`~tapt.x.Y```) inline code.

Usage::

    python scripts/api_docs.py           # rewrite docs/api.md
    python scripts/api_docs.py --check   # exit 1 when docs/api.md is stale

tests/test_api_docs.py runs the check and imports the docstring parser from here
(:func:`sections`), so the page and the test read docstrings the same way. pdoc is
imported by :func:`render` only: the parser needs nothing but the standard library.
"""

from __future__ import annotations

import argparse
import difflib
import inspect
import re
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "api.md"
SKIPPED = {"__version__"}
"""Names of ``tapt.__all__`` that are no API to document."""

SECTION = re.compile(r"^(Args|Arguments|Attributes|Returns|Yields|Raises|Examples?|Notes?)"
                     r"(::?)\s*$")
ENTRY_SECTIONS = {"Args", "Arguments", "Attributes", "Raises"}
"""Sections that list ``name: description`` entries."""
CODE_SECTIONS = {"Example", "Examples"}
ENTRY = re.compile(r"^(\*{0,2}[\w.~]+)(?:\s*\(([^)]*)\))?\s*:(?:\s+(.*))?$")
ROLE = re.compile(r":(?:py:)?(class|func|meth|mod|attr|data|exc|obj|const):`([^`]+)`")
"""A Sphinx cross reference: its role and its target (``~a.b.C``, ``title <a.b.C>``)."""
LITERAL = re.compile(r"``(.+?)``", re.DOTALL)
ADDRESS = re.compile(r" at 0x[0-9A-Fa-f]+")


@dataclass
class Section:
    """One Google-style section of a docstring: ``title`` (``Args``, ``Example``, ...),
    ``literal`` (the header ended with ``::``), its dedented ``body`` lines and, for the
    entry sections, its ``entries`` (name -> description, continuation lines joined)."""

    title: str
    literal: bool
    body: list[str]
    entries: dict[str, str] = field(default_factory=dict)


def blocks(docstring: str | None) -> list[list[str] | Section]:
    """A docstring (cleaned, as ``inspect.getdoc`` gives it) in order: runs of free-text
    lines and sections. A section runs from its header (at the docstring's left margin) to
    the next line that is neither blank nor indented."""
    lines = inspect.cleandoc(docstring or "").splitlines()
    found: list[list[str] | Section] = []
    index = 0
    while index < len(lines):
        match = SECTION.match(lines[index])
        if not match:
            if not found or isinstance(found[-1], Section):
                found.append([])
            found[-1].append(lines[index])
            index += 1
            continue
        index += 1
        body: list[str] = []
        while index < len(lines) and (not lines[index].strip() or lines[index][0].isspace()):
            body.append(lines[index])
            index += 1
        body = textwrap.dedent("\n".join(body)).strip("\n").splitlines()
        title = match.group(1)
        found.append(Section(title, match.group(2) == "::", body,
                             entries(body) if title in ENTRY_SECTIONS else {}))
    return found


def sections(docstring: str | None) -> tuple[list[str], list[Section]]:
    """A docstring's free text (the lines outside any section) and its sections, in order
    (:func:`blocks`)."""
    parts = blocks(docstring)
    prose = [line for part in parts if not isinstance(part, Section) for line in part]
    return prose, [part for part in parts if isinstance(part, Section)]


def entries(body: list[str]) -> dict[str, str]:
    """``name: description`` entries of a dedented section body; a line indented further
    continues the entry above it."""
    found: dict[str, str] = {}
    name = None
    for line in body:
        if not line.strip():
            continue
        match = ENTRY.match(line) if not line[0].isspace() else None
        if match:
            name = match.group(1).lstrip("*")
            found[name] = (match.group(3) or "").strip()
        elif name is not None:
            found[name] = f"{found[name]} {line.strip()}".strip()
    return found


def role_text(target: str) -> str:
    """How a cross reference reads: ``~a.b.C`` -> ``C``, ``a.b.C`` -> ``a.b.C``,
    ``title <a.b.C>`` -> ``title``."""
    explicit = re.fullmatch(r"(.+?)\s*<([^>]+)>", target)
    if explicit:
        return explicit.group(1)
    target = target.strip()
    if target.startswith("~"):
        return target[1:].rsplit(".", 1)[-1]
    return target


def inline(text: str) -> str:
    """reST inline markup as Markdown: roles and ````literals```` become code spans."""
    text = ROLE.sub(lambda m: f"\0{role_text(m.group(2))}\0", text)
    text = LITERAL.sub(lambda m: f"\0{m.group(1)}\0", text)
    return text.replace("\0", "`")


def prose_markdown(lines: list[str]) -> list[str]:
    """Free docstring text as Markdown: paragraphs kept; a paragraph ending with ``::``
    introduces an indented literal block, which becomes a fenced Python block."""
    out: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.rstrip().endswith("::"):
            head = line.rstrip()[:-2].rstrip()
            out.append(inline(head + ":") if head else "")
            block: list[str] = []
            index += 1
            while index < len(lines) and (not lines[index].strip() or lines[index][0].isspace()):
                block.append(lines[index])
                index += 1
            out += ["", *fenced(block), ""]
            continue
        out.append(inline(line.strip()) if line.strip() else "")
        index += 1
    return out


def fenced(block: list[str]) -> list[str]:
    code = textwrap.dedent("\n".join(block)).strip("\n")
    return ["```python", *code.splitlines(), "```"]


def section_markdown(section: Section) -> list[str]:
    """One section as Markdown: a bold header over a list, a paragraph or a code block."""
    title = {"Arguments": "Args"}.get(section.title, section.title)
    if section.title in CODE_SECTIONS:
        return [f"**{title}:**", "", *fenced(section.body)]
    if section.entries:
        return [f"**{title}:**", "",
                *(f"- `{name}`: {inline(text)}" if text else f"- `{name}`"
                  for name, text in section.entries.items())]
    paragraphs = " ".join(line.strip() for line in section.body if line.strip())
    return [f"**{title}:** {inline(paragraphs)}"]


def docstring_markdown(docstring: str | None) -> list[str]:
    """A whole docstring as Markdown lines, its free text and sections in their order."""
    out: list[str] = []
    for part in blocks(docstring):
        out += ["", *(section_markdown(part) if isinstance(part, Section)
                      else prose_markdown(part))]
    return squeeze(out)


def squeeze(lines: list[str]) -> list[str]:
    """No leading, trailing or doubled blank lines."""
    out: list[str] = []
    for line in lines:
        if line.strip() or (out and out[-1].strip()):
            out.append(line.rstrip())
    while out and not out[-1]:
        out.pop()
    return out


def signature_text(text: str) -> str:
    """A signature without memory addresses (``<object at 0x7f...>`` -> ``<object>``)."""
    return ADDRESS.sub("", text)


def summary(docstring: str | None) -> str:
    """The first sentence of a docstring, as Markdown."""
    first = " ".join(inspect.cleandoc(docstring or "").split("\n\n")[0].split())
    sentence = re.split(r"(?<=[.!?])\s+(?=[A-Z`])", first, maxsplit=1)[0]
    return inline(sentence.rstrip(":") + ("" if sentence.endswith((".", "!", "?")) else "."))


def public_names() -> list[str]:
    """The documented names: ``tapt.__all__`` but :data:`SKIPPED`, in its order."""
    import tapt

    return [name for name in tapt.__all__ if name not in SKIPPED]


def encoder_members() -> list[str]:
    """What a subclass of :class:`~tapt.encoders.base.Encoder` implements or may override:
    its public methods and properties, in source order."""
    from tapt.encoders.base import Encoder

    return [name for name, value in vars(Encoder).items() if not name.startswith("_")
            and (inspect.isfunction(value) or isinstance(value, property))]


def abstract(value) -> bool:
    target = value.fget if isinstance(value, property) else value
    return bool(getattr(target, "__isabstractmethod__", False))


def slug(heading: str) -> str:
    """GitHub's id of a heading (lower case, punctuation but ``-`` / ``_`` dropped)."""
    return re.sub(r"[^\w\- ]", "", heading.replace("`", "").lower()).replace(" ", "-")


def render() -> str:
    """docs/api.md as it should be."""
    import pdoc.doc

    import tapt
    from tapt.encoders.base import Encoder

    modules: dict[str, pdoc.doc.Module] = {}

    def documented(obj):
        name = obj.__module__
        if name not in modules:
            modules[name] = pdoc.doc.Module.from_name(name)
        return modules[name].get(obj.__qualname__)

    names = public_names()
    members = encoder_members()
    out = [
        "# API reference",
        "",
        "<!-- Generated by scripts/api_docs.py from the docstrings: do not edit by hand. -->",
        "",
        "The public Python API: every name of `tapt.__all__` (import each from `tapt`), then",
        "the methods of `Encoder` that a subclass implements or may override. The page is",
        "generated from the docstrings by `scripts/api_docs.py`; `tests/test_api_docs.py`",
        "checks that it is current, that every docstring has its sections and that every",
        "cross reference resolves. Back to the [documentation index](README.md).",
        "",
        "## Contents",
        "",
    ]
    docs = {name: documented(getattr(tapt, name)) for name in names}
    for name in names:
        out.append(f"- [`{name}`](#{slug(name)}): {summary(docs[name].docstring)}")
    out.append(f"- [`Encoder` methods](#{slug('Encoder methods')}): "
               + ", ".join(f"[`{member}`](#{slug(f'Encoder.{member}')})" for member in members))
    for name in names:
        doc = docs[name]
        out += ["", f"## `{name}`", ""]
        kind = "class" if isinstance(doc, pdoc.doc.Class) else "function"
        bases = [qualname if module == "builtins" else display
                 for module, qualname, display in getattr(doc, "bases", [])
                 if (module, qualname) != ("builtins", "object")]
        line = f"*{kind}* `tapt.{name}`, defined in `{doc.modulename}`"
        out.append(line + (f"; bases: {', '.join(f'`{b}`' for b in bases)}." if bases else "."))
        out += ["", "```python"]
        if isinstance(doc, pdoc.doc.Class):
            init = doc.members.get("__init__")
            params = str(init.signature_without_self) if isinstance(init, pdoc.doc.Function) \
                and init.taken_from[0] != "builtins" else ""
            out.append(signature_text(f"class {name}{params}"))
        else:
            out.append(signature_text(f"def {name}{doc.signature}"))
        out += ["```", "", *docstring_markdown(doc.docstring)]
    out += ["", "## `Encoder` methods", "",
            "What a subclass of `Encoder` implements (*abstract*) or may override; the "
            + "defaults are `Encoder`'s own."]
    encoder = documented(Encoder)
    for member in members:
        value = vars(Encoder)[member]
        doc = encoder.get(member)
        out += ["", f"### `Encoder.{member}`", "", "```python"]
        lines = ["@abstractmethod"] if abstract(value) else []
        if isinstance(value, property):
            lines = ["@property", *lines, f"def {member}(self){annotation(doc)}"]
        else:
            lines.append(f"def {member}{doc.signature}")
        out += [signature_text(line) for line in lines]
        out += ["```", "", *docstring_markdown(doc.docstring)]
    return "\n".join(out) + "\n"


def annotation(doc) -> str:
    """`` -> int`` for a property whose pdoc variable reads ``: int``."""
    text = (getattr(doc, "annotation_str", "") or "").removeprefix(":").strip()
    return f" -> {text}" if text else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if docs/api.md differs from what would be written")
    args = parser.parse_args(argv)
    page = render()
    if args.check:
        current = PAGE.read_text(encoding="utf-8") if PAGE.exists() else ""
        if current == page:
            return 0
        sys.stdout.writelines(difflib.unified_diff(
            current.splitlines(keepends=True), page.splitlines(keepends=True),
            "docs/api.md", "docs/api.md (generated)"))
        print("docs/api.md is stale: run python scripts/api_docs.py", file=sys.stderr)
        return 1
    PAGE.write_text(page, encoding="utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
