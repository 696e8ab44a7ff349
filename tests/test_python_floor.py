"""tapt runs on Python 3.10 (pyproject's requires-python): no module may use what came later.

CI runs 3.11, so a 3.11-only name would pass there and fail a 3.10 user at import. This
parses every module (nothing is imported) and refuses the names below, each with the
version that added it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "tapt"
NEWER = {("typing", "Self"): "3.11", ("typing", "LiteralString"): "3.11",
         ("typing", "Never"): "3.11", ("typing", "assert_never"): "3.11",
         ("typing", "reveal_type"): "3.11", ("typing", "Required"): "3.11",
         ("typing", "NotRequired"): "3.11", ("typing", "override"): "3.12",
         ("hashlib", "file_digest"): "3.11", ("tomllib", None): "3.11",
         ("datetime", "UTC"): "3.11", ("enum", "StrEnum"): "3.11",
         ("asyncio", "TaskGroup"): "3.11", ("itertools", "batched"): "3.12"}
"""(module, name) -> the Python version that added it (None: the whole module)."""


def uses(tree: ast.Module) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                if (node.module, alias.name) in NEWER:
                    found.append((node.lineno, f"from {node.module} import {alias.name}"))
            if (node.module, None) in NEWER:
                found.append((node.lineno, f"from {node.module} import ..."))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, f"import {a.name}") for a in node.names
                      if (a.name, None) in NEWER]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                (node.value.id, node.attr) in NEWER:
            found.append((node.lineno, f"{node.value.id}.{node.attr}"))
        elif isinstance(node, getattr(ast, "TryStar", ())):  # the node itself is 3.11+
            found.append((node.lineno, "except* (3.11)"))
    return found


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(
    p.relative_to(PACKAGE.parent)))
def test_no_name_newer_than_python_3_10(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    assert uses(tree) == [], f"{path}: needs a Python newer than 3.10"


def test_the_check_sees_a_newer_name():
    tree = ast.parse("from typing import Self\nimport hashlib\nhashlib.file_digest(f, 'x')\n")
    assert [line for line, _ in uses(tree)] == [1, 3]
