"""The one rule for corpus, query and judgment ids: one token of a TSV cell and of a TREC
run line.

An id may hold any letter, digit or symbol, non-ASCII ones included (``d-é``, ``α1``,
``文書7``), but no whitespace (any Unicode space, ``str.isspace``, or category ``Z*``) and no
control or format character (category ``C*``: tab, newline, NUL, zero-width space, bidi
marks, lone surrogates). trec_eval and ``pytrec_eval.parse_run`` split run lines on
whitespace, so ``query 0`` would become two fields; an invisible character makes two ids
that print the same. Every reader of ids (corpus, queries, qrels, mined negatives) and the
TREC run writer call :func:`id_problem`.

Example::

    id_problem("d-é")      # None: valid
    id_problem("query 0")  # "a space (U+0020) at position 6: ..."
"""

from __future__ import annotations

import re
import unicodedata

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
