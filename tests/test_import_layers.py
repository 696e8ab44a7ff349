"""tapt's layers, bottom up, and the rule that a module imports only from its own layer or
below, with no cycles (README "Layout"):

    util -> data -> recipe -> encoders -> retrieval, hub -> run_folder -> cards -> serving
    -> training -> selection -> analysis -> cli

``serving`` (making exports) sits above ``encoders``: it converts and checks a model that
an encoder loads, while running an export is an encoder's job
(:mod:`tapt.encoders.exported`), so no encoder imports ``serving``. It sits above
``cards`` too, since it writes an export's card (:mod:`tapt.cards.serving_card`: every card
writer in one package); only the command line imports it.

Every module under ``tapt/`` is parsed with ``ast`` (nothing is imported); every
``import tapt...`` / ``from tapt... import ...``, at module level or inside a function, is
mapped to its layer. Exceptions are listed below, each with its reason.

Function-local imports follow the rule of ``tapt/__init__.py``'s docstring, checked here
too: outside ``cli/`` one defers a third-party library that importing its module does not
already load (or a tapt module that loads one); in ``cli/`` the handlers import the library
lazily, and no module imports the standard library inside a function.
"""

from __future__ import annotations

import ast
import graphlib
import re
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "tapt"

LAYERS = ["util", "data", "recipe", "encoders", "retrieval/hub", "run_folder", "cards",
          "serving", "training", "selection", "analysis", "cli"]
PACKAGES = {"util": "util", "data": "data", "recipe": "recipe", "encoders": "encoders",
            "serving": "serving",
            "retrieval": "retrieval/hub", "hub": "retrieval/hub", "run_folder": "run_folder",
            "cards": "cards", "training": "training",
            "selection": "selection", "analysis": "analysis", "cli": "cli"}
"""Each package directly inside ``tapt/`` and its layer."""
ROOT_MODULES = {"__main__": "cli"}
"""The modules directly inside ``tapt/`` besides ``__init__`` (the public facade, the top)."""

ALLOWED_UPWARD: dict[tuple[str, str], str] = {}
"""(importer, imported) pairs allowed to point upwards, with the reason."""

KNOWN_HIDDEN_CYCLES: dict[frozenset, str] = {}
"""Cycles that only function-level imports close (still a hidden circle), with the reason."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def layer(module: str) -> str:
    """The layer of a tapt module; ``tapt`` itself (the public facade) is the top."""
    parts = module.split(".")
    if len(parts) == 1:
        return "cli"
    if parts[1] in PACKAGES:
        return PACKAGES[parts[1]]
    if parts[1] in ROOT_MODULES:
        return ROOT_MODULES[parts[1]]
    raise AssertionError(f"{module}: not in any layer; add its package to PACKAGES in "
                         "tests/test_import_layers.py (and to the README's layout)")


def test_the_root_holds_only_the_entry_points_and_the_packages():
    """``tapt/`` lists ``__init__.py``, ``__main__.py``, the helpers package and the concern
    packages: a helper module belongs in ``util/``, a concern's module in its package."""
    loose = sorted(path.name for path in PACKAGE.glob("*.py")
                   if path.stem not in ("__init__", *ROOT_MODULES))
    assert loose == []
    packages = {path.name for path in PACKAGE.iterdir() if (path / "__init__.py").is_file()}
    assert packages == set(PACKAGES)
    others = sorted(path.name for path in PACKAGE.iterdir() if path.is_dir()
                    and path.name not in PACKAGES and path.name != "__pycache__")
    assert others == []  # package data lives beside the module that reads it


def test_no_module_is_above_500_lines():
    long = {str(path.relative_to(PACKAGE)): n for path in sorted(PACKAGE.rglob("*.py"))
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > 500}
    assert long == {}


def is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def runtime_top_level(tree: ast.Module) -> set[int]:
    """Ids of the import nodes executed at import time (top level, or inside a top-level
    ``try`` / ``if`` other than ``if TYPE_CHECKING``)."""
    found, pending = set(), list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.add(id(node))
        elif isinstance(node, ast.If) and not is_type_checking(node):
            pending += node.body + node.orelse
        elif isinstance(node, ast.Try):
            pending += node.body + node.orelse + node.finalbody
            pending += [stmt for handler in node.handlers for stmt in handler.body]
    return found


def imports_of(module: str) -> list[tuple[str, int, bool]]:
    """``(imported tapt module, line, at module level)`` for every tapt import of ``module``;
    ``from tapt.x import y`` names the module ``tapt.x.y`` when that is a module."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    top = runtime_top_level(tree)
    is_package = path.name == "__init__.py"
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base if is_package else base[:-1]
                base = base[:len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            targets = [f"{source}.{alias.name}" if f"{source}.{alias.name}" in MODULES
                       else source for alias in node.names]
        else:
            continue
        for target in dict.fromkeys(targets):
            if target == "tapt" or target.startswith("tapt."):
                found.append((target, node.lineno, id(node) in top))
    return found


EDGES = {module: imports_of(module) for module in MODULES}


def test_every_module_has_a_layer():
    for module in MODULES:
        layer(module)


def test_no_module_imports_from_a_higher_layer():
    upward = []
    for module, imports in EDGES.items():
        for target, line, _ in imports:
            if LAYERS.index(layer(target)) > LAYERS.index(layer(module)) and \
                    (module, target) not in ALLOWED_UPWARD:
                upward.append(f"{MODULES[module].relative_to(PACKAGE.parent)}:{line}: "
                              f"{module} ({layer(module)}) imports {target} ({layer(target)})")
    assert not upward, "imports from a higher layer:\n" + "\n".join(upward)


def test_no_encoder_imports_serving():
    """Encoders sit below serving: an export is made by ``serving`` and run by an encoder
    (:mod:`tapt.encoders.exported`), so no module of ``tapt.encoders`` imports
    ``tapt.serving``, not even inside a function or for type checking, and no exception
    allows one."""
    assert LAYERS.index("serving") > LAYERS.index("encoders")
    upward = [f"{MODULES[module].relative_to(PACKAGE.parent)}:{line}: {target}"
              for module, imports in EDGES.items() if layer(module) == "encoders"
              for target, line, _ in imports if layer(target) == "serving"]
    assert upward == [], "encoders importing serving:\n" + "\n".join(upward)


def test_allowed_exceptions_still_exist():
    """An exception that no longer matches an import is stale: remove it."""
    edges = {(module, target) for module, imports in EDGES.items() for target, _, _ in imports}
    assert set(ALLOWED_UPWARD) <= edges


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as err:
        return list(err.args[1])
    return None


def graph(module_level_only: bool) -> dict[str, set[str]]:
    return {module: {target for target, _, top in imports
                     if target != module and target in MODULES and (top or not module_level_only)}
            for module, imports in EDGES.items()}


def test_module_level_imports_have_no_cycle():
    found = cycle(graph(module_level_only=True))
    assert found is None, "module-level import cycle: " + " -> ".join(found)


def strongly_connected(edges: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in edges.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(component)

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return components


def test_function_level_imports_hide_no_cycle():
    """A function-local import can hide a circle (encoders' loading -> presets ->
    preset_record -> loading did): the whole graph has none either, outside the CLI (whose
    lazy imports sit in the top layer) and the listed exceptions."""
    full = {module: targets for module, targets in graph(module_level_only=False).items()
            if layer(module) != "cli"}
    circles = [sorted(c) for c in strongly_connected(full)
               if frozenset(c) not in KNOWN_HIDDEN_CYCLES]
    assert not circles, f"import cycles through function-level imports: {circles}"


def test_the_util_package_imports_no_other_layer():
    """The ground floor (standard library, numpy, rich): no other tapt layer."""
    for module in (name for name in MODULES if layer(name) == "util"):
        assert {layer(target) for target, _, _ in EDGES[module]} <= {"util"}, module


STDLIB = sys.stdlib_module_names
LAZY_BY_NAME = {"rich.table": "the table printer: imported where a table is printed"}
"""Function-local imports allowed though their package is loaded already, with the reason."""


def function_level_imports(module: str) -> list[ast.Import | ast.ImportFrom]:
    """The imports of ``module`` run inside a function, outside ``if TYPE_CHECKING`` and
    outside ``try`` (an optional dependency's probe)."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    top, skipped, found = runtime_top_level(tree), set(), []
    for node in ast.walk(tree):
        if (isinstance(node, ast.If) and is_type_checking(node)) or isinstance(node, ast.Try):
            skipped |= {id(inner) for stmt in ast.iter_child_nodes(node)
                        for inner in ast.walk(stmt)}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in top | skipped:
            found.append(node)
    return found


def packages_at_import(module: str) -> set[str]:
    """The top-level packages (standard library included) that ``module`` imports at
    module level itself."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    top = runtime_top_level(tree)
    names = set()
    for node in ast.walk(tree):
        if id(node) in top and isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif id(node) in top and isinstance(node, ast.ImportFrom) and not node.level:
            names.add(node.module or "")
    return {name.split(".")[0] for name in names} - {"tapt"}


MODULE_LEVEL = graph(module_level_only=True)


def loaded_by(module: str) -> set[str]:
    """The packages that importing ``module`` loads: its module-level tapt imports
    followed, with its parent packages and ``tapt`` itself (run first by any import)."""
    parts = module.split(".")
    pending = [module] + [".".join(parts[:i]) for i in range(1, len(parts))]
    seen, packages = set(), set()
    while pending:
        name = pending.pop()
        if name in seen or name not in MODULES:
            continue
        seen.add(name)
        packages |= packages_at_import(name)
        pending += MODULE_LEVEL[name]
    return packages


def test_function_local_imports_defer_a_library():
    """Outside ``cli/``, a function-local import pays for itself: it defers a third-party
    library (torch, transformers, datasets, ...) that importing its module does not load
    already, or a tapt module that loads one; in ``cli/``, it imports tapt or a third-party
    library, never the standard library. Anything else belongs at the top of the module."""
    needless = []
    for module, path in MODULES.items():
        loaded = loaded_by(module) | STDLIB
        for node in function_level_imports(module):
            if isinstance(node, ast.ImportFrom) and (node.level or
                                                     (node.module or "").startswith("tapt")):
                targets = [target for target, line, _ in EDGES[module] if line == node.lineno]
                deferred = set().union(*(loaded_by(target) for target in targets)) - loaded
                named = ", ".join(targets)
                if layer(module) == "cli" or deferred:
                    continue
            else:
                names = [alias.name for alias in node.names] if isinstance(node, ast.Import) \
                    else [node.module]
                named = ", ".join(names)
                tops = {name.split(".")[0] for name in names}
                if all(name in LAZY_BY_NAME for name in names) or not tops & STDLIB and (
                        layer(module) == "cli" or tops - loaded):
                    continue
            needless.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: "
                            f"{named}")
    assert not needless, ("function-local imports that defer nothing (import them at the top "
                          "of the module):\n" + "\n".join(needless))


def readme_layout() -> dict[str, list[str]]:
    """The README's Layout picture: each package line (``  data/  beir.py, ...`` and its
    continuation lines) -> the ``*.py`` files and ``sub/`` folders it names."""
    readme = (PACKAGE.parent / "README.md").read_text(encoding="utf-8")
    block = readme.split("## Layout", 1)[1].split("```", 2)[1]
    listed: dict[str, list[str]] = {}
    package = None
    for line in block.splitlines():
        if match := re.match(r"^  (\w+)/\s", line):
            package = match.group(1)
            listed[package] = []
        elif not line.startswith("   "):
            package = None
        if package is not None:
            text = line[len(package) + 3:] if line.startswith(f"  {package}/") else line
            listed[package] += re.findall(r"\b\w+\.py\b|\b\w+/(?!\w)", text)
    return listed


def test_the_readme_layout_names_the_tree():
    """README "Layout" lists every package of ``tapt/``, and each module or folder it names
    exists in that package."""
    listed = readme_layout()
    assert set(listed) == set(PACKAGES)
    missing = [f"{package}/{name}" for package, names in listed.items() for name in names
               if not (PACKAGE / package / name.rstrip("/")).exists()]
    assert missing == []


def test_finite_number_is_the_one_rule():
    from tapt.util.finite import finite_number

    assert finite_number(0) and finite_number(-2.5)
    for value in (float("nan"), float("inf"), True, None, "1", 10**400):
        assert not finite_number(value), value


INPUT_STEP = {
    "tapt.training.inputs": "TAPT's inputs step: the recipe's data, rows, mined negatives",
    "tapt.training.guard_data": "the guard set (eval.guard_data), read in the inputs step",
    "tapt.training.distill": "the teacher's labels of each row, built in the inputs step",
    "tapt.training.dapt.dapt_inputs": "DAPT's inputs step: passages and dev data",
}
"""The modules of the training layer that read data (the inputs step), with what they read."""


def test_after_the_inputs_step_training_reads_nothing_from_the_data_layer():
    """A run's data is read and checked once, in its inputs step: every other module of
    ``tapt.training`` (setup, train, select, export, test) works from what that step
    returned and imports nothing from ``tapt.data``, not even inside a function."""
    reads = [f"{MODULES[module].relative_to(PACKAGE.parent)}:{line}: {target}"
             for module, imports in EDGES.items()
             if module.startswith("tapt.training") and module not in INPUT_STEP
             for target, line, _ in imports
             if target == "tapt.data" or target.startswith("tapt.data.")]
    assert reads == [], "read the data in the inputs step instead:\n" + "\n".join(reads)
    assert set(INPUT_STEP) <= set(MODULES)  # a stale entry: remove it


def test_module_basenames_are_unique_outside_the_command_line():
    """One name, one module: outside ``cli/`` (which mirrors the command groups) no two
    modules share a file name, but for each package's ``__init__.py``, ``base.py`` and
    ``errors.py``."""
    seen: dict[str, list[str]] = {}
    for module, path in MODULES.items():
        if not module.startswith("tapt.cli") and path.name not in (
                "__init__.py", "base.py", "errors.py"):
            seen.setdefault(path.name, []).append(str(path.relative_to(PACKAGE.parent)))
    assert {name: paths for name, paths in seen.items() if len(paths) > 1} == {}


READ_THIS_FIRST_LINES = 2000
"""The most lines docs/README.md's "read this first" list of one training run may add up to."""


def test_one_training_run_reads_in_one_sitting():
    """docs/README.md's "read this first" names the modules a ``tapt train`` run passes in
    phase order: at most 8, at most 2,000 lines in all, each an existing module, the
    orchestrator (``training/contrastive.py``) first and at most 150 lines."""
    docs = (PACKAGE.parent / "docs" / "README.md").read_text(encoding="utf-8")
    section = docs.split("## Read this first", 1)[1].split("\n## ", 1)[0]
    rows = "\n".join(line for line in section.splitlines() if line.startswith("|"))
    listed = re.findall(r"`(tapt/[\w/]+\.py)`", rows)
    assert 1 <= len(listed) <= 8 and listed[0] == "tapt/training/contrastive.py"
    lines = {name: len((PACKAGE.parent / name).read_text(encoding="utf-8").splitlines())
             for name in listed}
    assert lines["tapt/training/contrastive.py"] <= 150
    assert sum(lines.values()) <= READ_THIS_FIRST_LINES, lines


def test_fcntl_is_used_by_one_helper():
    """File locks go through :mod:`tapt.util.file_locks`; no other module imports ``fcntl``."""
    users = sorted(module for module in MODULES if module != "tapt.util.file_locks" and any(
        isinstance(node, (ast.Import, ast.ImportFrom)) and "fcntl" in (
            [alias.name for alias in node.names] if isinstance(node, ast.Import)
            else [node.module or ""])
        for node in ast.walk(ast.parse(MODULES[module].read_text(encoding="utf-8")))))
    assert users == []
