"""Where a command may write: never on, inside or around one of its inputs, and never at a
path whose name holds a secret or a token-shaped string; nor may an input's path hold one
(results, run folders and cards record the inputs' paths).

Every command that writes (``--output``, ``--run``, ``--plot``, ``--markdown``, ``tapt
report``'s files, ``tapt merge``'s export, the ``output_dir`` of ``tapt train`` / ``tapt
dapt``, the ``tapt sweep`` folder) calls :func:`check_apart` with its outputs and its
inputs (data folders, model folders, teacher and mined files, result files, the recipe,
guard data) before any work starts, ``--overwrite`` or not: ``--overwrite`` replaces an
earlier output, never an input. Paths are compared after ``~`` is expanded and symlinks
and relative parts are resolved (and, for paths that exist, as the same file, which also
catches hard links); an input that does not exist locally (a Hub id, an API model) is
skipped.

Example::

    check_apart([("--output", "tiny/corpus.jsonl")], [("--data", "tiny")])
    # OutputOnInputError: --output tiny/corpus.jsonl: is inside the --data input (/.../tiny)
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from tapt.util.redaction import TOKEN_SHAPES, known_secrets, redact

PathLike = str | os.PathLike
Named = tuple[str, "PathLike | None"]
"""(what it is: a flag such as ``--output`` or a recipe key such as ``data.path``, path)."""


class OutputOnInputError(ValueError):
    """An output path is, holds or lies inside an input, or its name (or an input's)
    holds a secret."""


def resolved(path: PathLike) -> Path:
    """``path`` with ``~`` expanded, made absolute, symlinks resolved (missing parts kept;
    ``os.path.realpath``, which leaves a symlink loop as it is where ``Path.resolve``
    raises)."""
    return Path(os.path.realpath(os.path.expanduser(os.fspath(path))))


def relation(output: PathLike, source: PathLike) -> str | None:
    """How ``output`` lies against the existing ``source``: ``is``, ``holds`` (a folder
    around it), ``is inside``, or None (apart). Both are resolved first."""
    out, src = resolved(output), resolved(source)
    if out == src or (os.path.exists(out) and _same_file(out, src)):
        return "is"
    if out in src.parents:
        return "holds"
    if src in out.parents:
        return "is inside"
    return None


def refuse_secret_in_name(flag: str, path: PathLike, why: str) -> None:
    """Raise :class:`OutputOnInputError` when ``path`` (as given or resolved) holds the
    value of a known secret or a token-shaped string; the message names ``flag`` and says
    ``why`` (it never shows the token)."""
    shown, full = os.fspath(path), str(resolved(path))
    for value, name in known_secrets().items():
        if value in shown or value in full:
            raise OutputOnInputError(f"{flag} {redact(shown)}: the path holds the value of "
                                     f"{name}; {why}")
    if TOKEN_SHAPES.search(shown) or TOKEN_SHAPES.search(full):
        raise OutputOnInputError(f"{flag} {redact(shown)}: the path holds a token-shaped "
                                 f"string (hf_..., sk-..., pa-...); {why}")


def _same_file(first: Path, second: Path) -> bool:
    try:
        return os.path.samefile(first, second)
    except OSError:
        return False


def check_apart(outputs: Iterable[Named], inputs: Iterable[Named]) -> None:
    """Refuse an output that is, holds or lies inside an input, or whose path holds the
    value of a known secret (:func:`tapt.util.redaction.known_secrets`) or a token-shaped
    string (:data:`tapt.util.redaction.TOKEN_SHAPES`, someone's token: the rule ``tapt push``
    and sweep names follow): a token in a file or folder name ends up in listings, logs,
    checkpoints and uploads. An input whose path holds one is refused too: results, run
    folders and cards record where their inputs came from.

    ``outputs`` and ``inputs``: (flag or key, path) pairs; None and empty paths are
    skipped, and inputs that do not exist locally are not compared with the outputs.

    Raises:
        OutputOnInputError: naming the output's flag and path and the input's flag and
            resolved path (or the secret's variable).
    """
    given = [(what, path) for what, path in inputs
             if path is not None and os.fspath(path) != ""]
    for what, source in given:  # its path is recorded in results, run folders and cards
        refuse_secret_in_name(f"the {what} input", source,
                              "tapt records the paths of its inputs in results, run folders "
                              "and cards: rename it or move it")
    sources = [(what, path) for what, path in given if os.path.exists(resolved(path))]
    for flag, output in outputs:
        if output is None or os.fspath(output) == "":
            continue
        shown = os.fspath(output)
        refuse_secret_in_name(flag, output, "a file or folder named with it ends up in "
                                            "listings, logs and uploads: choose another name")
        for what, source in sources:
            found = relation(output, source)
            if found is not None:
                raise OutputOnInputError(
                    f"{flag} {shown}: {found} the {what} input ({resolved(source)}); tapt "
                    "never writes on, inside or around an input, --overwrite or not: "
                    "choose a path outside it")
