"""``tapt_export.json``: what an export folder is, and the check that it still is.

The manifest records the backend, every file the folder's encoder reads (graph, weights,
tokenizer) with its size and SHA-256, the preset that turns texts into the graph's inputs
(prompts, maximum length, padding side and id, the graph's input names, width,
normalisation), where the graph came from (the source model and its weights digest,
tapt's version, the opset, the quantisation and its calibration sample) and the package
versions that made it. :func:`read_manifest` checks all of it before an encoder loads: a
file changed, missing or swapped for another export's is refused, naming the file. The
card (``README.md``) and ``LICENSE`` are not checked: a user may edit them.

The preset is plain JSON so that code without tapt (the card's ten lines) reads it too.
Both ends of the format live here: :mod:`tapt.serving.export_folder` writes it,
:class:`~tapt.encoders.exported.ExportedEncoder`, the encoder factory's refusals and
``tapt push`` read it.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from tapt.util.digests import ALGORITHM, file_record, mismatch
from tapt.util.files import atomic_write_json
from tapt.util.json_file import read_json

MANIFEST_FILE = "tapt_export.json"
FORMAT = 1
"""The manifest layout written; another is refused on load."""
UNCHECKED = frozenset({MANIFEST_FILE, "README.md", "LICENSE"})
"""Files of an export folder the manifest does not hold digests of."""
DYNAMIC_LABEL = "int8 dynamic"
"""The ``quantization.label`` of a graph whose activations are quantised at run time over
the whole batch (ONNX Runtime's ``quantize_dynamic``): an embedding depends on the texts
run with it, so :class:`~tapt.encoders.exported.ExportedEncoder` runs it one text per run."""


class ExportFolderError(ValueError):
    """A folder that is not a usable tapt export: the message names the file and why."""


@dataclass(frozen=True)
class Preset:
    """How texts become the graph's inputs, and what comes out.

    Attributes:
        query_prompt / document_prompt: Text put before every query / passage ("" none).
        max_seq_length: Tokens per text after truncation (special tokens included).
        padding_side: ``left`` or ``right`` (last-token pooling is traced for either).
        pad_id: The tokenizer's padding id.
        inputs: The graph's input names, in order (``input_ids``, ``attention_mask`` and
            ``token_type_ids`` when the model takes it).
        dim: Width of the embeddings.
        normalized: The graph ends in L2 normalisation.
        similarity: The source model's similarity function (``cosine``, ``dot``, ...).
        pooling: The pooling mode traced into the graph (for the card and reports).
    """

    query_prompt: str
    document_prompt: str
    max_seq_length: int
    padding_side: str
    pad_id: int
    inputs: list[str]
    dim: int
    normalized: bool
    similarity: str
    pooling: str

    @classmethod
    def from_record(cls, record: Any, where: Path) -> Preset:
        """The preset of a manifest, each field's type checked (a message naming it)."""
        if not isinstance(record, dict):
            raise ExportFolderError(f"{where}: 'preset' is not a JSON object")
        expected = {"query_prompt": str, "document_prompt": str, "max_seq_length": int,
                    "padding_side": str, "pad_id": int, "inputs": list, "dim": int,
                    "normalized": bool, "similarity": str, "pooling": str}
        for name, kind in expected.items():
            value = record.get(name)
            if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                raise ExportFolderError(f"{where}: preset field '{name}' is missing or not "
                                        f"a {kind.__name__}")
        if record["padding_side"] not in ("left", "right"):
            raise ExportFolderError(f"{where}: preset field 'padding_side' must be left or "
                                    f"right, got {record['padding_side']!r}")
        if record["max_seq_length"] < 1 or record["dim"] < 1:
            raise ExportFolderError(f"{where}: preset fields 'max_seq_length' and 'dim' "
                                    "must be positive")
        inputs = record["inputs"]
        if not inputs or not all(isinstance(name, str) for name in inputs) or \
                not {"input_ids", "attention_mask"} <= set(inputs):
            raise ExportFolderError(f"{where}: preset field 'inputs' must list input_ids and "
                                    "attention_mask")
        return cls(**{field.name: record[field.name] for field in fields(cls)})


@dataclass(frozen=True)
class Manifest:
    """A checked manifest: ``folder``, ``backend``, ``graph`` (the file the runtime
    opens), ``files`` (name -> digest record), ``preset``, and the rest as written
    (``record``: source, conversion, versions)."""

    folder: Path
    backend: str
    graph: str
    files: dict[str, dict]
    preset: Preset
    record: dict

    @property
    def graph_digest(self) -> str:
        """One digest of everything the encoder reads: the graph, its weights and the
        tokenizer files (the embedding cache's key)."""
        return ",".join(f"{name}:{self.files[name][ALGORITHM]}" for name in sorted(self.files))

    @property
    def precision(self) -> str:
        """``float32`` or the quantisation (``int8 dynamic``, ``int8 static``, ...)."""
        quantization = self.record.get("quantization") or {}
        return quantization.get("label") or "float32"

    @property
    def batch_dependent(self) -> bool:
        """The graph's output for a text depends on the texts batched with it (int8
        dynamic: :data:`DYNAMIC_LABEL`)."""
        return self.precision == DYNAMIC_LABEL


def write_manifest(folder: Path, *, backend: str, graph: str, preset: Preset,
                   **record: Any) -> dict:
    """Write ``folder/tapt_export.json``: digests of every file in ``folder`` (but
    :data:`UNCHECKED`), ``preset`` and ``record`` (source, conversion, versions); returns
    what was written."""
    folder = Path(folder)
    files = {path.name: file_record(path) for path in sorted(folder.iterdir())
             if path.is_file() and path.name not in UNCHECKED}
    if graph not in files:
        raise ExportFolderError(f"{folder / graph}: the graph was not written")
    body = {"format": FORMAT, "backend": backend, "graph": graph, "files": files,
            "preset": asdict(preset), **record}
    atomic_write_json(folder / MANIFEST_FILE, body)
    return body


def is_export_folder(path: str | os.PathLike) -> bool:
    """``path`` is a folder holding a manifest (not checked yet)."""
    return (Path(path) / MANIFEST_FILE).is_file()


def _unchecked_body(folder: str | os.PathLike) -> dict:
    """An export folder's manifest as read, unchecked ({} when unreadable): for messages."""
    try:
        body = read_json(Path(folder) / MANIFEST_FILE, error=ExportFolderError)
    except (OSError, ExportFolderError):
        return {}
    return body if isinstance(body, dict) else {}


def recorded_backend(folder: str | os.PathLike) -> str:
    """The backend an export folder's manifest names, unchecked (for a message): ``onnx``,
    ``openvino``, or ``onnx or openvino`` when the manifest cannot say."""
    backend = _unchecked_body(folder).get("backend")
    return backend if backend in ("onnx", "openvino") else "onnx or openvino"


def recorded_source(folder: str | os.PathLike) -> str | None:
    """The source model an export folder's manifest names (``source.name``, with its
    revision), unchecked (for a message); None when it names none."""
    source = _unchecked_body(folder).get("source")
    name = source.get("name") if isinstance(source, dict) else None
    if not isinstance(name, str) or not name.strip():
        return None
    revision = source.get("revision")
    return f"{name} (revision {revision})" if isinstance(revision, str) and revision else name


def read_manifest(folder: str | os.PathLike, backend: str | None = None) -> Manifest:
    """The checked manifest of the export ``folder``: every file it lists present and as
    written, the preset well formed, the backend ``backend`` (when given). Raises
    :class:`ExportFolderError` naming the file at fault."""
    folder = Path(folder)
    path = folder / MANIFEST_FILE
    try:
        body = read_json(path, error=ExportFolderError)
    except FileNotFoundError:
        raise ExportFolderError(f"{folder}: not a tapt export (no {MANIFEST_FILE}); make "
                                "one with tapt export MODEL --backend onnx|openvino") from None
    if not isinstance(body, dict):
        raise ExportFolderError(f"{path}: not a JSON object")
    if body.get("format") != FORMAT:
        raise ExportFolderError(f"{path}: format {body.get('format')!r}, this tapt reads "
                                f"format {FORMAT}; export the model again")
    found_backend, graph, files = body.get("backend"), body.get("graph"), body.get("files")
    if found_backend not in ("onnx", "openvino") or not isinstance(graph, str) or \
            not isinstance(files, dict) or graph not in files:
        raise ExportFolderError(f"{path}: 'backend', 'graph' and 'files' must name an onnx "
                                "or openvino graph among the files")
    if backend is not None and backend != found_backend:
        raise ExportFolderError(f"{folder}: an export for the {found_backend} backend "
                                f"({MANIFEST_FILE}); pass --backend {found_backend}")
    preset = Preset.from_record(body.get("preset"), path)
    quantization = body.get("quantization")
    if quantization is not None and not (isinstance(quantization, dict) and isinstance(
            quantization.get("label"), str) and quantization["label"]):
        raise ExportFolderError(f"{path}: 'quantization' must be null (float32) or an object "
                                "whose 'label' names the precision")
    for name, digest in files.items():
        if not isinstance(name, str) or Path(name).name != name or name in ("", ".", ".."):
            raise ExportFolderError(f"{path}: file name {name!r} is not a name in the folder")
        problem = mismatch(folder / name, digest)
        if problem is not None:
            raise ExportFolderError(f"{folder / name}: {problem}; it is not the file "
                                    f"{MANIFEST_FILE} records (export the model again)")
    rest = {key: value for key, value in body.items()
            if key not in ("format", "backend", "graph", "files", "preset")}
    return Manifest(folder=folder, backend=found_backend, graph=graph, files=files,
                    preset=preset, record=rest)
