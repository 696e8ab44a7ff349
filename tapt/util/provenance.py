"""Where a result came from: tapt's and the main libraries' versions, the date and the
command, recorded in every result file (``tapt eval``/``bm25 --output``, a run's
``results.json`` and ``test.json``).

Versions are read from the installed distributions (``importlib.metadata``: nothing is
imported); a library that is not installed is ``null``. The command is ``sys.argv`` as the
shell would quote it, its program reduced to its name, redacted as free text
(:func:`tapt.util.redaction.redact`: a token pasted into an override is not recorded).

Example::

    provenance()["libraries"]["transformers"]  # "5.24.0"
"""

from __future__ import annotations

import importlib.metadata
import shlex
import sys
from datetime import datetime, timezone
from pathlib import Path

from tapt.util.redaction import redact

LIBRARIES = ("torch", "transformers", "sentence-transformers", "accelerate", "peft",
             "datasets", "huggingface_hub", "pytrec-eval-terrier", "bm25s", "numpy")
"""Distributions whose versions a result file records (faiss: whichever build is there)."""
FAISS_BUILDS = ("faiss-cpu", "faiss-gpu-cu12", "faiss-gpu", "faiss")


def installed_version(distribution: str) -> str | None:
    """The installed version of ``distribution``, or None."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def library_versions() -> dict[str, str | None]:
    """:data:`LIBRARIES` -> version, and ``faiss`` -> ``VERSION (BUILD)`` of the first
    faiss build installed."""
    versions = {name: installed_version(name) for name in LIBRARIES}
    faiss = next(((build, version) for build in FAISS_BUILDS
                  if (version := installed_version(build))), None)
    versions["faiss"] = f"{faiss[1]} ({faiss[0]})" if faiss else None
    return versions


def command_line(argv: list[str] | None = None) -> str:
    """``argv`` (default ``sys.argv``) as one shell line, the program by its name
    (``tapt``, ``pytest``), redacted."""
    argv = list(sys.argv if argv is None else argv)
    if argv:
        argv[0] = Path(argv[0]).name
        if argv[0] == "__main__.py":  # python -m tapt
            argv[0] = "python -m tapt"
            return redact(" ".join([argv[0], shlex.join(argv[1:])]).strip())
    return redact(shlex.join(argv))


def tapt_version() -> str:
    """tapt's version (the installed distribution's, else the package's own)."""
    # the package is imported whenever this module is (no upward import needed)
    return installed_version("tapt") or getattr(sys.modules.get("tapt"), "__version__", None) \
        or "unknown"


def provenance(argv: list[str] | None = None) -> dict:
    """``{"tapt", "libraries", "date" (UTC, ISO 8601), "command"}`` for a result file."""
    return {"tapt": tapt_version(), "libraries": library_versions(),
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "command": command_line(argv)}
