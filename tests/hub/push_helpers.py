"""Helpers shared by the push tests (a module of its own: ``conftest`` names are ambiguous
when several test folders are collected together)."""

from __future__ import annotations

import hashlib
from pathlib import Path


def folder_digest(folder: Path) -> dict[str, str]:
    """sha256 of every file under ``folder`` by relative path (to prove it is unchanged)."""
    return {path.relative_to(folder).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(folder.rglob("*")) if path.is_file()}


def files_containing(root: Path, needle: str) -> list[Path]:
    return [path for path in root.rglob("*")
            if path.is_file() and needle.encode() in path.read_bytes()]
