"""The shared parts of the recipe schema: the strict ``Section`` base, seeds and paths."""

from __future__ import annotations

import os
import types
import typing
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    ValidationInfo,
    field_validator,
)

from tapt.util.bounds import SEED, number_from_text

Seed = Annotated[int, SEED]
"""A seed numpy takes (``numpy.random.seed``: a whole number in [0, 2**32 - 1])."""

EXPLICIT_PATH_PREFIXES = ("/", "./", "../", "~")


def is_explicit_path(text: str) -> bool:
    """Written as a local path (``/``, ``./``, ``../``, ``~``): such a value must exist when
    the recipe is loaded. A bare relative name (``data/quickstart``, ``runs/x/final``) may
    be a Hub id or what an earlier step writes (``tapt data synth``, ``tapt dapt``,
    ``tapt mine``), so it is checked when the run reads it."""
    return text.startswith(EXPLICIT_PATH_PREFIXES) or text in (".", "..")


def local_path(text: str | None, *, folder: bool) -> str | None:
    """``text`` with ``~`` expanded (nothing downstream expands it); an explicit path must
    be an existing ``folder`` (else an existing file)."""
    if text is None or not is_explicit_path(text):
        return text
    expanded = os.path.expanduser(text)
    path = Path(expanded)
    try:
        found, exists = (path.is_dir() if folder else path.is_file()), path.exists()
    except (OSError, ValueError) as err:  # a NUL byte, a name too long
        raise ValueError(f"not a usable path ({err})") from None
    if not found:
        problem = ("not a folder" if folder else "not a file") if exists else "no such " + (
            "folder" if folder else "file")
        raise ValueError(f"{problem}: {expanded} (a value written as a path, with /, ./, "
                         "../ or ~, must exist when the recipe is loaded)")
    return expanded


def annotation_types(annotation) -> set:
    """The classes an annotation admits, through ``X | None``, ``list[X]`` and
    ``Annotated`` (``Literal`` values are left out)."""
    origin = typing.get_origin(annotation)
    if origin is Literal:
        return set()
    if origin in (typing.Union, types.UnionType, list, Annotated):
        return set().union(*(annotation_types(arg) for arg in typing.get_args(annotation)))
    return {annotation}


class Section(BaseModel):
    """A recipe section. Every field, in files and ``key=value`` overrides alike: a boolean
    is never a number (``true`` is not 1), a number written as text (YAML 1.1 reads ``1e0``
    and ``2e-5`` as strings) is that number (:func:`tapt.util.bounds.number_from_text`, the one
    reading for every key), a number lies in its range (the :class:`tapt.util.bounds.Bound` in
    its annotation), and text is never empty (except the fields in ``may_be_empty``, where
    an empty string means something)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False,
                              use_attribute_docstrings=True)  # docstrings: `tapt recipe schema`
    may_be_empty: ClassVar[frozenset[str]] = frozenset()

    @field_validator("*", mode="before")
    @classmethod
    def _strict_values(cls, value: Any, info: ValidationInfo) -> Any:
        leaves = annotation_types(cls.model_fields[info.field_name].annotation)
        if leaves & {int, float}:  # one reading of numbers written as text
            value = [number_from_text(item) for item in value] if isinstance(value, list) \
                else number_from_text(value)
        items = value if isinstance(value, list) else [value]
        if leaves & {int, float} and bool not in leaves and \
                any(isinstance(item, bool) for item in items):
            raise ValueError("expected a number, got a boolean")
        if leaves - {type(None)} == {bool} and isinstance(value, (int, float)) and \
                not isinstance(value, bool):
            raise ValueError("expected true or false, got a number")
        if str in leaves and info.field_name not in cls.may_be_empty and \
                any(isinstance(item, str) and not item.strip() for item in items):
            raise ValueError("must not be empty")
        return value


class RecipeError(ValueError):
    """A recipe that cannot be used; the message names the file and the key."""
