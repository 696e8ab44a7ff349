"""The dotted keys of a recipe schema: each with its type, default and help, and the closest
key to a misspelt one.

Works on any pydantic model whose nested sections are pydantic models (tapt's ``Recipe`` and
``DaptRecipe``); the help is the field's ``description`` (tapt's sections take it from the
docstring under each field). Limits: a section field is described through its own keys, not
as a row; a union of sections is shown as a plain type.

Example::

    from tapt.recipe import Recipe

    rows = schema_rows(Recipe)  # [SchemaRow(key="model.name", type="str", ...), ...]
    closest_key(("training", "max_step"), Recipe)  # "training.max_steps"
"""

from __future__ import annotations

import difflib
import json
import re
import types
import typing
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from tapt.util.bounds import Bound

REQUIRED = "(required)"
SIMILARITY = 0.6
"""difflib's ratio a key name needs to be suggested (its default cutoff)."""
COLUMN_WIDTH = 40
"""Widest column of :func:`format_rows` (a longer value overflows its row)."""


@dataclass(frozen=True)
class SchemaRow:
    """One recipe key: ``training.max_steps``, ``int``, ``-1``, its one line of help."""

    key: str
    type: str
    default: str
    help: str


def section_of(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model an annotation is (``X`` or ``X | None``), else None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        models = [arg for arg in typing.get_args(annotation) if section_of(arg)]
        if len(models) == 1:
            return models[0]
    return None


def type_name(annotation: Any) -> str:
    """An annotation as a recipe author writes values: ``int | null``, ``mnrl | matryoshka``,
    ``list[int]``."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is Literal:
        return " | ".join(json.dumps(arg) if not isinstance(arg, str) else arg for arg in args)
    if origin is Annotated:
        return type_name(args[0])
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(arg) for arg in args)
    if origin in (list, tuple, set, dict):
        return f"{origin.__name__}[{', '.join(type_name(arg) for arg in args)}]"
    if annotation is type(None):
        return "null"
    return getattr(annotation, "__name__", str(annotation))


def bounds(field: FieldInfo) -> str:
    """A field's numeric bounds (``> 0``, ``>= 0, < 1``, or the range of the
    :class:`tapt.util.bounds.Bound` in its annotation: ``in (0, 1]``), or ``""``."""
    signs = {annotated_types.Gt: (">", "gt"), annotated_types.Ge: (">=", "ge"),
             annotated_types.Lt: ("<", "lt"), annotated_types.Le: ("<=", "le")}
    parts = []
    for item in [*field.metadata, *annotated_bounds(field.annotation)]:
        sign = signs.get(type(item))
        if sign:
            parts.append(f"{sign[0]} {getattr(item, sign[1])}")
        elif isinstance(item, Bound):  # the type column already says int
            text = item.description.replace(" (a whole number)", "")
            parts += [] if text in parts else [text]
    return ", ".join(parts)


def annotated_bounds(annotation: Any) -> list[Bound]:
    """The :class:`tapt.util.bounds.Bound` objects inside an annotation (``Annotated[int, B] |
    None``)."""
    if typing.get_origin(annotation) is Annotated:
        args = typing.get_args(annotation)
        return [item for item in args[1:] if isinstance(item, Bound)] + \
            annotated_bounds(args[0])
    return [found for arg in typing.get_args(annotation) for found in annotated_bounds(arg)]


def default_value(field: FieldInfo) -> Any:
    """A field's default (``PydanticUndefined`` when it is required)."""
    if field.is_required():
        return PydanticUndefined
    if field.default is PydanticUndefined and field.default_factory is not None:
        return field.default_factory()
    return field.default


def default_text(value: Any) -> str:
    """A default as YAML would write it (``null``, ``true``, ``[768, 512]``)."""
    if value is PydanticUndefined:
        return REQUIRED
    return value if isinstance(value, str) else json.dumps(value)


def help_line(description: str | None) -> str:
    """A description's first sentence on one line (a full stop outside parentheses ends
    it), reST literals and roles as plain backticks."""
    text = re.sub(r":\w+:`", "`", " ".join((description or "").split()).replace("``", "`"))
    depth = 0
    for position, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "." and depth <= 0 and text[position + 1:position + 2] in (" ", ""):
            return text[:position + 1]
    return text


def schema_rows(schema: type[BaseModel], prefix: str = "",
                defaults: BaseModel | None = None) -> list[SchemaRow]:
    """Every leaf key of ``schema`` (sections flattened into dotted keys), in field order.
    A section's defaults are those of its default value where it has one (DAPT's
    ``training.epochs`` is 1, not the section's 5)."""
    rows = []
    for name, field in schema.model_fields.items():
        key = f"{prefix}{name}"
        value = default_value(field)
        if defaults is not None:
            value = getattr(defaults, name)
        section = section_of(field.annotation)
        if section is not None:
            rows += schema_rows(section, f"{key}.",
                                value if isinstance(value, BaseModel) else None)
            continue
        if isinstance(value, BaseModel):
            value = value.model_dump(mode="json")
        limits = bounds(field)
        kind = type_name(field.annotation) + (f" ({limits})" if limits else "")
        rows.append(SchemaRow(key, kind, default_text(value), help_line(field.description)))
    return rows


def all_keys(schema: type[BaseModel], prefix: str = "") -> list[str]:
    """Every dotted key of ``schema``, sections included."""
    keys = []
    for name, field in schema.model_fields.items():
        keys.append(prefix + name)
        section = section_of(field.annotation)
        if section is not None:
            keys += all_keys(section, f"{prefix}{name}.")
    return keys


def closest_key(location: tuple, schema: type[BaseModel]) -> str | None:
    """The key meant by the unknown key at ``location`` (pydantic's ``loc``): the most
    similar name in the same section (difflib), else a key of that name in another section
    (``training.top_k`` -> ``eval.top_k``); None when nothing is close."""
    parts = [str(part) for part in location]
    section: type[BaseModel] | None = schema
    for part in parts[:-1]:
        field = section.model_fields.get(part) if section is not None else None
        section = section_of(field.annotation) if field is not None else None
        if section is None:
            return None
    prefix = "".join(f"{part}." for part in parts[:-1])
    match = difflib.get_close_matches(parts[-1], list(section.model_fields), n=1,
                                      cutoff=SIMILARITY)
    if match:
        return prefix + match[0]
    elsewhere = [key for key in all_keys(schema) if key.rsplit(".", 1)[-1] == parts[-1]]
    return elsewhere[0] if len(elsewhere) == 1 else None


def format_rows(rows: list[SchemaRow]) -> str:
    """``rows`` as aligned text, one key a line: key, type, default, help."""
    header = SchemaRow("key", "type", "default", "help")
    table = [header, *rows]
    widths = [min(COLUMN_WIDTH, max(len(getattr(row, column)) for row in table))
              for column in ("key", "type", "default")]
    return "\n".join(f"{row.key:<{widths[0]}}  {row.type:<{widths[1]}}  "
                     f"{row.default:<{widths[2]}}  {row.help}".rstrip() for row in table)
