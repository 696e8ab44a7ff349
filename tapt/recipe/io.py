"""Reading recipes (YAML files, dotted ``key=value`` overrides, errors) and writing them back."""

from __future__ import annotations

import os
import reprlib
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ValidationError,
)

from tapt.recipe.base import RecipeError
from tapt.recipe.dapt import DaptRecipe
from tapt.recipe.keys import SchemaRow, closest_key, schema_rows
from tapt.recipe.schema import Recipe
from tapt.util.redaction import redact_data

MAX_RECIPE_BYTES = 2**20
"""A larger file is not a recipe (and would take PyYAML minutes to parse)."""
_short_repr = reprlib.Repr()
_short_repr.maxstring = _short_repr.maxother = 80
_short_repr.maxlevel, _short_repr.maxlist, _short_repr.maxdict = 2, 4, 4


def parse_override(text: str) -> tuple[list[str], Any]:
    """``training.learning_rate=1e-5`` -> (["training", "learning_rate"], 1e-5).

    The value is read as YAML, so numbers, booleans, null and lists keep their types.
    """
    if len(text) > MAX_RECIPE_BYTES:
        raise RecipeError(f"override {_short_repr.repr(text)}: longer than "
                          f"{MAX_RECIPE_BYTES:,} characters")
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise RecipeError(f"override {text!r}: expected dotted.key=value")
    # YAML 1.1 reads "1e-5" as a string; the schema's float fields accept numeric strings.
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except (yaml.YAMLError, RecursionError) as err:
        problem = "nested too deeply" if isinstance(err, RecursionError) else \
            " ".join(str(err).split())
        raise RecipeError(f"override {_short_repr.repr(text)}: the value is not valid YAML "
                          f"({problem})") from None
    return key.strip().split("."), value


def apply_overrides(data: dict, overrides: list[str]) -> dict:
    """Set each dotted key in a nested dict (sections are created as needed)."""
    for override in overrides:
        keys, value = parse_override(override)
        node = data
        for key in keys[:-1]:
            child = node.setdefault(key, {})
            if not isinstance(child, dict):
                raise RecipeError(f"override {override!r}: '{key}' is not a section")
            node = child
        node[keys[-1]] = value
    return data


def format_validation_error(source: str, err: ValidationError,
                            schema: type[BaseModel] | None = None) -> str:
    """One line per problem, naming the dotted key; an unknown key names the closest key of
    ``schema`` when one is close (:func:`tapt.recipe.keys.closest_key`)."""
    lines = [f"{source}: invalid recipe"]
    for problem in err.errors():
        key = ".".join(str(part) for part in problem["loc"]) or "(top level)"
        message = problem["msg"]
        if problem["type"] == "extra_forbidden":
            message = "unknown key"
            meant = closest_key(problem["loc"], schema) if schema is not None else None
            if meant:
                message += f"; did you mean {meant}?"
        elif "input" in problem and problem["type"] not in ("missing",) and problem["loc"]:
            message = f"{message} (got {_short_repr.repr(problem['input'])})"
        lines.append(f"  {key}: {message}")
    return "\n".join(lines)


def describe_schema(kind: Literal["tapt", "dapt"] = "tapt") -> list[SchemaRow]:
    """Every key of a TAPT (``tapt train``) or DAPT (``tapt dapt``) recipe: dotted key, type,
    default and one line of help (what ``tapt recipe schema`` prints)."""
    if kind not in ("tapt", "dapt"):
        raise RecipeError(f"recipe kind must be tapt or dapt, got {kind!r}")
    return schema_rows(DaptRecipe if kind == "dapt" else Recipe)


def load_recipe(path: str | os.PathLike, overrides: list[str] | None = None,
                kind: Literal["tapt", "dapt", "auto"] = "tapt") -> Recipe | DaptRecipe:
    """Read a YAML recipe, apply ``key=value`` overrides and validate it.

    ``kind``: ``tapt`` (``tapt train``), ``dapt`` (``tapt dapt``) or ``auto`` (a recipe
    with an ``objective`` section is a DAPT recipe).
    """
    path = Path(path)
    if not path.is_file():
        raise RecipeError(f"{path}: recipe not found" if not path.exists() else
                          f"{path}: not a regular file (a folder, FIFO or device)")
    try:
        if path.stat().st_size > MAX_RECIPE_BYTES:
            raise RecipeError(f"{path}: larger than {MAX_RECIPE_BYTES:,} bytes; not a recipe")
        raw = path.read_bytes()
        text = raw.decode("utf-8")
    except OSError as err:
        raise RecipeError(f"{path}: cannot read ({err.strerror or err})") from None
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        hint = " (UTF-16? save it as UTF-8)" if raw[:2] in (b"\xff\xfe", b"\xfe\xff") else ""
        raise RecipeError(f"{path}:{line}: not valid UTF-8 (byte {err.start + 1}){hint}") \
            from None
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as err:
        raise RecipeError(f"{path}: not valid YAML: {err}") from None
    except RecursionError:
        raise RecipeError(f"{path}: not valid YAML: nested too deeply") from None
    if not isinstance(data, dict):
        raise RecipeError(f"{path}: a recipe is a mapping of sections")
    data.pop("fingerprint", None)  # a run folder's record of its inputs, not a setting
    apply_overrides(data, overrides or [])
    is_dapt = "objective" in data
    if kind == "tapt" and is_dapt:
        raise RecipeError(f"{path}: a DAPT recipe (it has an objective section); run it with "
                          "tapt dapt")
    if kind == "dapt" and not is_dapt:
        raise RecipeError(f"{path}: not a DAPT recipe (no objective section: mlm or simcse); "
                          "a TAPT recipe runs with tapt train")
    schema = DaptRecipe if is_dapt else Recipe
    try:
        return schema.model_validate(data)
    except ValidationError as err:
        raise RecipeError(format_validation_error(str(path), err, schema)) from None


LABEL_FIELDS = ("tracking.run_name", "tracking.project", "hub.commit_message")
"""Recipe values that are labels, not data: redacted as free text (token shapes too)."""


def recipe_record(recipe: Recipe | DaptRecipe) -> dict[str, Any]:
    """The fully resolved recipe as a run folder records it: the exact values of known
    secrets redacted in every value (paths and ids stay as they are otherwise), token-shaped
    strings too in the :data:`LABEL_FIELDS` (:func:`tapt.util.redaction.redact_data`)."""
    return redact_data(recipe.model_dump(mode="json"), where="the recipe",
                       free_text=LABEL_FIELDS)


def recipe_to_yaml(recipe: Recipe | DaptRecipe) -> str:
    """:func:`recipe_record` as YAML, redacted in the values, not the text: a bare ``***``
    would read as a YAML alias."""
    return yaml.safe_dump(recipe_record(recipe), sort_keys=False)
