"""The one rule for corpus, query and judgment ids: one token of a TSV cell and of a TREC
run line.

An id may hold any letter, digit or symbol, non-ASCII ones included (``d-é``, ``α1``,
``文書7``), but no whitespace (any Unicode space, ``str.isspace``, or category ``Z*``) and no
control or format character (category ``C*``: tab, newline, NUL, zero-width space, bidi
marks, lone surrogates). trec_eval and ``pytrec_eval.parse_run`` split run lines on
whitespace, so ``query 0`` would become two fields; an invisible character makes two ids
that print the same. Every reader of ids (corpus, queries, qrels, mined negatives) and the
TREC run writer call :func:`id_problem`.

Hub repository ids have their own rule, huggingface_hub's: :func:`hub_id_problem` and
:func:`is_hub_id` are the one check of them (recipes, ``tapt push``, data sources, model
loading and cards).

Example::

    id_problem("d-é")      # None: valid
    id_problem("query 0")  # "a space (U+0020) at position 6: ..."
    is_hub_id("vinven7/FormBench")               # True
    is_hub_id("FormBench", namespace=False)      # True: a model id may lack an owner
"""

from __future__ import annotations

import re
import unicodedata

from tapt.util.redaction import redact, secret_in

# huggingface_hub is imported by hub_id_problem only, when a Hub id is checked: importing
# tapt (and every id_problem caller) stays free of it.

_ASCII_BAD = re.compile(r"[\x00-\x20\x7f]")
_RULE = "an id must be one token of a TSV cell and a TREC run line (no whitespace or control " \
        "characters)"


def id_problem(value: str) -> str | None:
    """Why ``value`` cannot be an id, or None when it can (an empty id is the caller's
    check)."""
    if value.isascii():  # the common case, one regex pass
        found = _ASCII_BAD.search(value)
        return None if found is None else _describe(found.group(), found.start())
    for position, char in enumerate(value):
        if char.isspace() or unicodedata.category(char)[0] in "CZ":
            return _describe(char, position)
    return None


def _describe(char: str, position: int) -> str:
    category = unicodedata.category(char)
    if char.isspace() or category[0] == "Z":
        what = "a space" if char == " " else "whitespace"
    elif category == "Cs":
        what = "a lone surrogate (not encodable as UTF-8)"
    elif category == "Cf":
        what = "an invisible format character"
    else:
        what = "a control character"
    return f"{what} {char!r} (U+{ord(char):04X}) at position {position + 1}: {_RULE}"


def hub_id_problem(repo_id: str, *, namespace: bool = True) -> str | None:
    """Why ``repo_id`` is not an id the Hub takes, or None when it is: the rules of
    huggingface_hub's ``validate_repo_id`` (ASCII letters, digits, ``-``, ``_`` and ``.``; no
    ``--`` or ``..``; no part starting or ending with ``-`` or ``.``; at most 96 characters a
    part; no ``.git`` ending) and, with ``namespace``, exactly one ``/`` (``namespace/name``,
    as a push or a dataset needs). The one check of Hub ids in tapt: recipes, ``tapt push``,
    data sources and model cards use it."""
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    if namespace and repo_id.count("/") != 1:
        return "a Hub id here is namespace/name, with exactly one '/'"
    try:
        validate_repo_id(repo_id)
    except HFValidationError as err:  # its message ends with the id, which callers name
        return str(err).rsplit(": '", 1)[0].rstrip(".")
    return None


def is_hub_id(text: str, *, namespace: bool = True) -> bool:
    """Whether ``text`` is a Hub id (:func:`hub_id_problem` finds nothing wrong with it);
    ``namespace=False`` also takes a bare ``NAME`` (``./x``, ``/abs/x`` and ``x/y/z`` never
    are ids)."""
    return hub_id_problem(text, namespace=namespace) is None


def path_component_problem(name: str) -> str | None:
    """Why ``name`` cannot be one file or folder name that tapt writes, or None when it
    can: not empty, not ``.`` or ``..``, no ``/`` or ``\\``, no control or format character
    (:func:`id_problem`'s rule for those), no secret (:func:`tapt.util.redaction.secret_in`:
    a name is shown in listings and copied with the folder)."""
    if not name.strip():
        return "is empty"
    if name.strip() in (".", ".."):
        return f"is {name.strip()!r}, a folder of its own"
    if "/" in name or "\\" in name:
        return "holds a path separator ('/' or '\\'): a name is one file or folder name"
    for position, char in enumerate(name):
        if unicodedata.category(char)[0] == "C":
            return _describe(char, position).split(": ")[0]
    if secret := secret_in(name):
        return f"holds {secret}"
    return None


def path_component(name: str, what: str) -> str:
    """``name`` when it can be one file or folder name (:func:`path_component_problem`),
    else a ValueError naming ``what`` (the flag or key) and why, with secrets masked."""
    if (problem := path_component_problem(name)) is not None:
        raise ValueError(f"{what} {redact(name)!r} {problem}")
    return name


def label(name: str, what: str) -> str:
    """``name`` (a label the user gives: a system in ``tapt cases`` / ``tapt compare``, a
    model panel, a query set) when it holds no secret, else a ValueError naming ``what``:
    labels are written into results, tables and figures, so a token given as one is
    refused rather than written (or masked into a label that no longer says what it is)."""
    if (found := secret_in(name)) is not None:
        raise ValueError(f"{what} {redact(name)!r} holds {found}; labels are "
                         "written into results, tables and figures: choose another")
    return name

