"""README.md and docs/*.md point only at what exists: every relative Markdown link and
image resolves to a file or folder (from the page's own folder), every ``#anchor`` into a
Markdown page names one of its headings (GitHub's heading ids), and every repository file
named in inline code (``recipes/quickstart.yaml``, ``benchmarks/bench_scale.py``; paths
are read from the repository root, where the commands run) exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
CODE_SPAN = re.compile(r"`([^`]+)`")
REPO_FILE = re.compile(r"(?:recipes|benchmarks|examples|scripts|docs|tests|tapt)/[\w./-]*")
FENCE = re.compile(r"^\s*(```|~~~)")


def pages(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def prose(text: str) -> str:
    """``text`` with its fenced code blocks blanked (line numbers kept)."""
    kept, inside = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            inside = not inside
            kept.append("")
            continue
        kept.append("" if inside else line)
    return "\n".join(kept)


def heading_ids(text: str) -> set[str]:
    """The ids GitHub gives the headings of a Markdown page: lower case, punctuation but
    ``-`` and ``_`` dropped, spaces as ``-``, a repeated id suffixed ``-1``, ``-2``..."""
    ids: set[str] = set()
    for line in prose(text).splitlines():
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        slug = re.sub(r"[^\w\- ]", "", match.group(1).replace("`", "").lower()).replace(" ", "-")
        candidate, count = slug, 0
        while candidate in ids:
            count += 1
            candidate = f"{slug}-{count}"
        ids.add(candidate)
    return ids


def blank_code_spans(text: str) -> str:
    """``text`` with each inline code span (which may run over a line break) blanked,
    lengths and line breaks kept."""
    return CODE_SPAN.sub(lambda span: re.sub(r"[^\n]", " ", span.group(0)), text)


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    """``page:line: target (why)`` for each relative link or inline-code file that does
    not resolve."""
    text = prose(page.read_text(encoding="utf-8"))
    name = page.relative_to(root).as_posix()
    found = []

    def where(offset: int) -> str:
        return f"{name}:{text.count(chr(10), 0, offset) + 1}"

    for link in LINK.finditer(blank_code_spans(text)):
        target = link.group(1)
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        path_text, _, anchor = target.partition("#")
        path = (page.parent / path_text).resolve() if path_text else page
        if not path.exists():
            found.append(f"{where(link.start())}: {target} (no such file)")
        elif anchor and path.suffix == ".md" and \
                anchor not in heading_ids(path.read_text(encoding="utf-8")):
            found.append(f"{where(link.start())}: {target} (no heading #{anchor} in "
                         f"{path.name})")
    for span in CODE_SPAN.finditer(text):
        file = span.group(1).strip()
        if REPO_FILE.fullmatch(file) and not (root / file).exists():
            found.append(f"{where(span.start())}: `{file}` (no such file in the repository)")
    return found


@pytest.mark.parametrize("page", pages(), ids=lambda page: page.relative_to(ROOT).as_posix())
def test_every_link_resolves(page):
    assert not broken_links(page), broken_links(page)


def test_the_docs_index_links_every_page():
    index = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    linked = {target.partition("#")[0] for target in LINK.findall(index)}
    missing = [page.name for page in pages()[1:] if page.name != "README.md"
               and page.name not in linked]
    assert not missing, f"docs/README.md does not link {missing}"


def test_every_docs_page_links_back_to_the_index():
    lonely = [page.name for page in pages()[1:] if page.name not in ("README.md",
                                                                     "reliability.md")
              and "(README.md)" not in page.read_text(encoding="utf-8")]
    assert not lonely, f"pages without a link to the index: {lonely}"


@pytest.mark.parametrize("text,problem", [
    ("see [the data page](data-missing.md)\n", "data-missing.md (no such file)"),
    ("see [data](docs/README.md#no-such-heading)\n", "no heading #no-such-heading"),
    ("run `recipes/no-such.yaml`\n", "`recipes/no-such.yaml` (no such file"),
    ("![plot](images/none.png)\n", "images/none.png (no such file)"),
])
def test_what_is_broken(tmp_path, text, problem):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "README.md").write_text("# Index\n\n## Pages\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text("# Page\n\n" + text, encoding="utf-8")
    assert any(problem in line for line in broken_links(page, tmp_path)), \
        broken_links(page, tmp_path)


def test_what_resolves(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "README.md").write_text(
        "# Index\n\n## MTEB's conventions (`--format mteb`, the card)\n## Pages\n## Pages\n",
        encoding="utf-8")
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "a.yaml").write_text("x: 1\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text("# Page\n\n[a](docs/README.md#mtebs-conventions---format-mteb-the-card) "
                    "[b](docs/README.md#pages-1) [c](#page) [d](https://example.org/x) "
                    "`recipes/a.yaml` `[x](missing.md)` `a code span\nover [y](missing.md) two lines`"
                    "\n\n```\n[e](missing.md)\n```\n",
                    encoding="utf-8")
    assert broken_links(page, tmp_path) == []
