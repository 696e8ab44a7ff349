"""A fingerprint of a run's inputs, recorded in ``recipe.yaml`` (key ``fingerprint``), so that
a resume notices data or model weights that changed behind an unchanged path.

What is recorded: every file the run reads (a BEIR folder's ``corpus.jsonl``,
``queries.jsonl`` and the qrels files of the recipe's splits, ``data.mined_negatives``,
``loss.teacher_scores``, DAPT's ``data.files`` and ``data.dev_data``) and the weight files (``*.safetensors``,
``*.bin``) of a local model folder, each with its size and a SHA-256 of its whole content
(:func:`tapt.util.digests.file_digest`: one streamed pass, about a second per GB, so a 6 GB
corpus costs seconds at a start or resume; a same-size edit anywhere in a file is seen). A
Hub model or dataset is recorded by id, the revision as given and, when the local Hugging
Face cache holds it, the commit of the cached snapshot (nothing is fetched).

The rule a resume applies (:func:`compare`):

- same size and same content hash: unchanged, whatever the mtime (``touch``, or a copy that
  keeps the bytes, is not a change);
- a file added or removed, a new size or a new hash is a change; so is a different cached
  Hub commit where both fingerprints know one (an unknown commit is not compared).

A recorded fingerprint is checked first (:func:`recorded_problem`): an entry without its
size or its SHA-256 is a damaged record, never compared.

Example::

    old = input_fingerprint(recipe)
    changes = compare(old, input_fingerprint(recipe))
"""

from __future__ import annotations

import re
from pathlib import Path

from tapt.data.sources import config_name
from tapt.encoders.model_paths import resolve_model_path
from tapt.util.digests import file_digest

WEIGHT_SUFFIXES = (".safetensors", ".bin")
HUB = "(hub)"
"""The key of a Hub id's entry in a group."""


def file_entry(path: Path) -> dict:
    """Size and SHA-256 of ``path``'s whole content."""
    return {"size": path.stat().st_size, "sha256": file_digest(path)}


def cached_commit(repo_id: str, filename: str, revision: str | None,
                  repo_type: str | None = None) -> str | None:
    """The commit of the snapshot the local Hugging Face cache holds ``filename`` in, or
    None (not cached, not a valid id); never contacts the Hub."""
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(repo_id, filename, revision=revision,
                                       repo_type=repo_type)
    except (ValueError, OSError):  # an id the Hub client rejects is not in the cache
        return None
    if not isinstance(found, str):
        return None
    parts = Path(found).parts
    return parts[parts.index("snapshots") + 1] if "snapshots" in parts else None


def hub_entry(repo_id: str, revision: str | None, commit: str | None, **extra) -> dict:
    return {HUB: {"id": repo_id, "revision": revision, "commit": commit, **extra}}


def beir_files(source: str, config: str | None, splits: list[str], revision: str | None
               ) -> dict:
    """A BEIR folder's files (as :func:`tapt.data.sources.load_data` resolves it), or the
    Hub entry of a dataset id."""
    config = config_name(config)
    path = Path(source)
    if path.is_dir():
        folder = path / config if config and (path / config).is_dir() else path
        names = ["corpus.jsonl", "queries.jsonl", *(f"qrels/{split}.tsv" for split in splits)]
        return {name: file_entry(folder / name) for name in names if (folder / name).is_file()}
    if not path.exists() and config:  # a Hub id (loading checks it)
        first = f"{config}/qrels/{splits[0]}.tsv" if splits else f"{config}/README.md"
        return hub_entry(source, revision, cached_commit(source, first, revision, "dataset"),
                         config=config)
    return {}


def model_files(name: str, revision: str | None) -> dict:
    """A local model folder's weight files, or the Hub entry of a model id."""
    path = Path(resolve_model_path(name))
    if path.is_dir():
        weights = sorted(p for p in path.rglob("*") if p.suffix in WEIGHT_SUFFIXES
                         and p.is_file())
        return {p.relative_to(path).as_posix(): file_entry(p) for p in weights}
    return hub_entry(name, revision, cached_commit(name, "config.json", revision))


def input_fingerprint(recipe) -> dict[str, dict]:
    """Every input of a TAPT or DAPT recipe: group (``data``, ``model``, ...) -> name ->
    entry. Missing files are left out (loading reports them)."""
    data = recipe.data
    groups: dict[str, dict] = {"model": model_files(recipe.model.name, recipe.model.revision)}
    if hasattr(data, "files"):  # DAPT
        if data.path:
            splits = [data.dev_split] if data.dev_split and not data.dev_data else []
            groups["data"] = beir_files(data.path, data.config, splits, data.revision)
        if data.dev_data:
            groups["data.dev_data"] = beir_files(data.dev_data, None,
                                                 [data.dev_split] if data.dev_split else [],
                                                 None)
        groups["data.files"] = {name: file_entry(Path(name)) for name in data.files
                                if Path(name).is_file()}
    else:
        splits = [data.train_split, data.dev_split, data.test_split]
        groups["data"] = beir_files(data.path, data.config, splits, data.revision)
        for group, name in (("data.mined_negatives", data.mined_negatives),
                            ("loss.teacher_scores", recipe.loss.teacher_scores)):
            if name and Path(name).is_file():
                groups[group] = {name: file_entry(Path(name))}
        if recipe.eval.guard_data:
            groups["eval.guard_data"] = beir_files(recipe.eval.guard_data, None,
                                                   [recipe.eval.guard_split], None)
    return {group: entries for group, entries in groups.items() if entries}


SHA256 = re.compile(r"[0-9a-f]{64}")


def recorded_problem(fingerprint: dict) -> str | None:
    """What is wrong with a fingerprint read back from ``recipe.yaml`` (``FIELD: problem``,
    the field as ``GROUP.NAME.KEY``), or None when it has the shape :func:`input_fingerprint`
    writes. :func:`compare` trusts that shape: an entry without its size or its hash would
    otherwise pass a changed file as unchanged, or stop with a KeyError."""
    for group, entries in fingerprint.items():
        if not isinstance(entries, dict):
            return f"{group}: expected an object of files, got {entries!r}"
        for name, entry in entries.items():
            where = f"{group}.{name}"
            if not isinstance(entry, dict):
                return f"{where}: expected an object, got {entry!r}"
            if name == HUB:
                for key in ("id", "revision", "commit", "config"):
                    if entry.get(key) is not None and not isinstance(entry[key], str):
                        return f"{where}.{key}: expected text or null, got {entry[key]!r}"
                continue
            size, sha = entry.get("size"), entry.get("sha256")
            if isinstance(size, bool) or not isinstance(size, int) or size < 0:
                return f"{where}.size: expected a whole number >= 0, got {size!r}"
            if not (isinstance(sha, str) and SHA256.fullmatch(sha)):
                return f"{where}.sha256: expected 64 hex digits, got {sha!r}"
    return None


def compare(old: dict, new: dict) -> list[str]:
    """The changes between two fingerprints, one line each, e.g.
    ``data: qrels/dev.tsv changed (size 812 -> 790)``; see the module docstring."""
    changes: list[str] = []
    for group in sorted(set(old) | set(new)):
        before, after = old.get(group) or {}, new.get(group) or {}
        for name in sorted(set(before) | set(after)):
            a, b = before.get(name), after.get(name)
            if name == HUB:
                changes += _hub_change(group, a or {}, b or {})
            elif a is None:
                changes.append(f"{group}: {name} added ({b['size']} bytes)")
            elif b is None:
                changes.append(f"{group}: {name} removed (was {a['size']} bytes)")
            elif a["size"] != b["size"]:
                changes.append(f"{group}: {name} changed (size {a['size']} -> {b['size']})")
            elif a["sha256"] != b["sha256"]:
                changes.append(f"{group}: {name} changed (same size {a['size']}, other "
                               "content)")
    return changes


def _hub_change(group: str, a: dict, b: dict) -> list[str]:
    if a.get("id") != b.get("id") or a.get("config") != b.get("config"):
        return [f"{group}: {a.get('id')} -> {b.get('id')}"]
    if a.get("commit") and b.get("commit") and a["commit"] != b["commit"]:
        old, new = a["commit"][:12], b["commit"][:12]
        return [f"{group}: {b.get('id')} changed (cached commit {old} -> {new})"]
    return []
