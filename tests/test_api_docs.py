"""The public API is documented, and docs/api.md is its current rendering.

Every name of ``tapt.__all__`` (but ``__version__``) and every method or property of
:class:`~tapt.encoders.base.Encoder` that a subclass implements or may override has a
docstring with the sections its code calls for, read from the code itself:

- ``Args:`` naming exactly the parameters (``inspect.signature``; for a class, its
  constructor's, which ``Attributes:`` may document instead, as for dataclass fields);
- ``Returns:`` (or ``Yields:``) when the function returns something: a return annotation
  other than None, or, without one, a ``return`` of a value in its source;
- ``Raises:`` naming each exception class the body raises itself (``raise X(...)``; for a
  class, in ``__init__`` / ``__post_init__``), every name there an exception class;
- an ``Example::`` whose code compiles.

Every Sphinx cross reference (``:class:``, ``:func:``, ``:mod:``, ``:meth:``, ``:attr:``,
``:data:``, ``:exc:``) in those docstrings names an object that exists: a dotted path is
imported and walked attribute by attribute (``~`` dropped); a short name is looked up in the
documented class, then in the module that defines it. docs/api.md is what
``python scripts/api_docs.py`` writes (pdoc's model; skipped without pdoc); its links are
checked with every other page's (``tests/test_docs_links.py``). No model is loaded.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import importlib.util
import inspect
import re
import sys
import textwrap
from pathlib import Path

import pytest

import tapt
from tapt.encoders.base import Encoder

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "api_docs.py"


def load_generator():
    spec = importlib.util.spec_from_file_location("tapt_api_docs", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


api_docs = load_generator()


def documented() -> list[tuple[str, object, type | None]]:
    """(label, object, the class it belongs to) of everything that must be documented."""
    found = [(name, getattr(tapt, name), None) for name in api_docs.public_names()]
    found += [(f"Encoder.{name}", vars(Encoder)[name], Encoder)
              for name in api_docs.encoder_members()]
    return found


def function_of(obj):
    """The function behind a method or property."""
    return obj.fget if isinstance(obj, property) else obj


def home(obj, owner: type | None):
    """The module an object is defined in."""
    return sys.modules[(owner or function_of(obj)).__module__]


def function_node(func) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The parsed ``def`` of ``func``, or None without source (a generated ``__init__``)."""
    try:
        source = textwrap.dedent(inspect.getsource(func))
    except (OSError, TypeError):
        return None
    node = ast.parse(source).body[0]
    return node if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else None


def own_nodes(node: ast.AST):
    """The nodes of a function's body, without those of functions or classes in it."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                              ast.ClassDef)):
            continue
        yield child
        yield from own_nodes(child)


def returns_value(func) -> bool:
    """Whether ``func`` gives its caller something: by its return annotation, else by a
    ``return VALUE`` or ``yield`` in its own body."""
    annotation = inspect.signature(func).return_annotation
    if annotation is not inspect.Signature.empty:
        return annotation not in (None, "None", type(None))
    node = function_node(func)
    return node is not None and any(
        isinstance(child, (ast.Yield, ast.YieldFrom)) or (
            isinstance(child, ast.Return) and child.value is not None and not (
                isinstance(child.value, ast.Constant) and child.value.value is None))
        for child in own_nodes(node))


def dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def walk(base, parts: list[str]):
    """``base.a.b...`` or None; a dataclass field without a default (no class attribute)
    counts as found."""
    for index, part in enumerate(parts):
        if hasattr(base, part):
            base = getattr(base, part)
            continue
        if inspect.isclass(base) and index == len(parts) - 1 and any(
                part in vars(klass).get("__annotations__", {}) for klass in base.__mro__):
            return True
        return None
    return base


def resolve(target: str, module, scope=None):
    """The object a cross-reference target names, or None: a dotted path from its longest
    importable module, else a name in ``scope`` (a class), ``module``, or the builtins."""
    explicit = re.fullmatch(r".+?\s*<([^>]+)>", target)
    target = (explicit.group(1) if explicit else target).strip().lstrip("~")
    target = target.removesuffix("()")
    parts = target.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            base = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        return walk(base, parts[cut:])
    for base in (scope, module, builtins):
        if base is not None and (found := walk(base, parts)) is not None:
            return found
    return None


def raised_classes(func) -> set[type]:
    """The exception classes ``func``'s own body raises by name (``raise X(...)``)."""
    node = function_node(func)
    if node is None:
        return set()
    found = set()
    for child in own_nodes(node):
        if not isinstance(child, ast.Raise) or child.exc is None:
            continue
        exc = child.exc.func if isinstance(child.exc, ast.Call) else child.exc
        name = dotted(exc)
        value = resolve(name, sys.modules[func.__module__]) if name else None
        if inspect.isclass(value) and issubclass(value, BaseException):
            found.add(value)
    return found


def parameters(obj) -> list[str]:
    """The parameter names a caller passes (no ``self`` / ``cls``)."""
    try:
        signature = inspect.signature(function_of(obj))
    except (TypeError, ValueError):
        return []
    names = [name for name in signature.parameters if name not in ("self", "cls")]
    return [] if isinstance(obj, property) else names


def problems(obj, owner: type | None = None) -> list[str]:
    """What the docstring of ``obj`` (a function, class, method or property) lacks."""
    doc = function_of(obj).__doc__ if isinstance(obj, property) else obj.__doc__
    if not doc or not doc.strip():
        return ["no docstring"]
    _, found = api_docs.sections(doc)
    titles = {section.title for section in found}
    named = {section.title: section for section in found}
    module = home(obj, owner)
    issues = []

    example = named.get("Example") or named.get("Examples")
    if example is None or not any(line.strip() for line in example.body):
        issues.append("no Example")
    else:
        try:
            compile("\n".join(example.body), "<example>", "exec")
        except SyntaxError as err:
            issues.append(f"the Example does not compile ({err.msg}, line {err.lineno})")

    args = dict((named.get("Args") or named.get("Arguments") or api_docs.Section(
        "Args", False, [])).entries)
    if inspect.isclass(obj):
        wanted = parameters(obj)
        fields = {**args, **(named["Attributes"].entries if "Attributes" in named else {})}
        missing = [name for name in wanted if name not in fields]
        if missing:
            issues.append(f"Args/Attributes do not document {missing}")
        functions = [vars(obj)[name] for name in ("__init__", "__post_init__")
                     if inspect.isfunction(vars(obj).get(name))]
    else:
        wanted = parameters(obj)
        missing = [name for name in wanted if name not in args]
        if missing:
            issues.append(f"Args do not document {missing}")
        functions = [function_of(obj)]
        if returns_value(function_of(obj)) and not titles & {"Returns", "Yields"}:
            issues.append("no Returns (it returns a value)")
    extra = [name for name in args if name.lstrip("*") not in wanted]
    if extra:
        issues.append(f"Args names what is no parameter: {extra}")

    raises = named["Raises"].entries if "Raises" in named else {}
    documented_classes = []
    for name in raises:
        value = resolve(name, module, owner)
        if inspect.isclass(value) and issubclass(value, BaseException):
            documented_classes.append(value)
        else:
            issues.append(f"Raises names {name!r}, which is no exception class here")
    for func in functions:
        for raised in sorted(raised_classes(func), key=lambda cls: cls.__name__):
            if not any(issubclass(raised, listed) for listed in documented_classes):
                issues.append(f"Raises does not name {raised.__name__} (raised in "
                              f"{func.__qualname__})")
    return issues


def broken_references(obj, owner: type | None = None) -> list[str]:
    """The cross references in ``obj``'s docstring that name nothing, or the wrong kind."""
    doc = function_of(obj).__doc__ if isinstance(obj, property) else obj.__doc__
    module = home(obj, owner)
    scope = obj if inspect.isclass(obj) else owner
    broken = []
    for match in api_docs.ROLE.finditer(doc or ""):
        role, target = match.groups()
        value = resolve(target, module, scope)
        kind_ok = {"mod": inspect.ismodule, "class": inspect.isclass,
                   "exc": inspect.isclass,
                   "func": lambda v: callable(v) or isinstance(v, property),
                   "meth": lambda v: callable(v) or isinstance(v, property)}.get(
                       role, lambda v: True)
        if value is None or not kind_ok(value):
            broken.append(match.group(0))
    return broken


@pytest.mark.parametrize("label,obj,owner", documented(), ids=[row[0] for row in documented()])
def test_public_docstring_has_its_sections(label, obj, owner):
    assert not problems(obj, owner), f"{label}: {problems(obj, owner)}"


def test_the_public_api_is_what_is_documented():
    assert "Encoder" in api_docs.public_names()
    assert "__version__" not in api_docs.public_names()
    assert {"embedding_dim", "encode_queries", "encode_corpus", "encode_stream"} <= set(
        api_docs.encoder_members())


def test_every_cross_reference_resolves():
    broken = {label: found for label, obj, owner in documented()
              if (found := broken_references(obj, owner))}
    assert not broken, broken


def _sample(path: str, limit: int = 3) -> int:
    """Count something in :func:`tapt.no_such_function` and :class:`Encoder`.

    Args:
        path: A file.
        depth: No such parameter.

    Raises:
        NoSuchError: a name that is nothing.

    Example::

        _sample("x"
    """
    if limit < 0:
        raise ValueError("limit")
    return limit


def test_the_checks_catch_what_is_missing():
    found = problems(_sample)
    for expected in ("Args do not document ['limit']", "no Returns",
                     "the Example does not compile", "Args names what is no parameter: ['depth']",
                     "'NoSuchError', which is no exception class",
                     "Raises does not name ValueError"):
        assert any(expected in issue for issue in found), (expected, found)
    assert broken_references(_sample) == [":func:`tapt.no_such_function`"]
    assert problems(lambda: None) == ["no docstring"]


def test_sections_are_parsed():
    prose, found = api_docs.sections('''Do it.

    Args:
        first: One,
            continued.
        second (int): Two.

    Returns:
        Something.

    Example::

        do(1, 2)
    ''')
    assert prose == ["Do it.", ""]
    assert [section.title for section in found] == ["Args", "Returns", "Example"]
    assert found[0].entries == {"first": "One, continued.", "second": "Two."}
    assert found[2].literal and found[2].body == ["do(1, 2)"]
    assert api_docs.inline(":class:`~tapt.encoders.base.Encoder` and :func:`tapt.load_data`"
                           " with ``x``") == "`Encoder` and `tapt.load_data` with `x`"


def test_docs_api_md_is_current(tmp_path, monkeypatch, capsys):
    pytest.importorskip("pdoc")
    page = ROOT / "docs" / "api.md"
    expected = api_docs.render()
    assert page.exists() and page.read_text(encoding="utf-8") == expected, \
        "docs/api.md is stale: run python scripts/api_docs.py"
    assert not re.search(r"0x[0-9a-fA-F]{6,}|/work/|/home/|site-packages", expected)
    stale = tmp_path / "api.md"
    stale.write_text(expected.replace("## `Encoder`", "## `Encoder`\n\nedited"),
                     encoding="utf-8")
    monkeypatch.setattr(api_docs, "PAGE", stale)
    assert api_docs.main(["--check"]) == 1
    assert "stale" in capsys.readouterr().err
