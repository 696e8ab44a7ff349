"""Inference backends of a SentenceTransformer: ``torch`` (default), ``onnx`` (ONNX Runtime
through Optimum) and ``openvino`` (OpenVINO through Optimum Intel), as sentence-transformers'
``SentenceTransformer(..., backend=...)`` names them.

The ONNX and OpenVINO packages come with extras (``tapt[onnx]``, ``tapt[openvino]``, the
same packages as ``sentence-transformers[onnx]`` / ``[openvino]``). :func:`require_backend`
imports what a backend needs before any model loads and, when that fails, raises one
:class:`BackendMissingError` line naming the extra and why the import failed (a package
missing, or one installed at a version that does not import with this transformers).

A folder written by ``tapt export`` records its backend in ``tapt_preset.json``
(:func:`recorded_backend`), so loading it with another backend is refused in one line
instead of failing deep inside transformers on the missing torch weights.
"""

from __future__ import annotations

import importlib

from tapt.encoders.preset_record import read_record_hint

BACKENDS: tuple[str, ...] = ("torch", "onnx", "openvino")
EXTRAS = {"onnx": "tapt[onnx]", "openvino": "tapt[openvino]"}
"""The extra that installs each non-torch backend."""
REQUIRED_MODULES = {"onnx": ("onnxruntime", "optimum.onnxruntime"),
                    "openvino": ("openvino", "optimum.intel.openvino")}
"""What each backend imports (sentence-transformers' ``load_onnx_model`` /
``load_openvino_model`` import the same)."""
REQUIRED_NAMES = {"optimum.onnxruntime": ("ORTModelForFeatureExtraction", "ORTQuantizer",
                                          "ORTOptimizer"),
                  "optimum.intel.openvino": ("OVModelForFeatureExtraction", "OVQuantizer")}
"""The classes sentence-transformers' loaders and export functions take from them; Optimum's
packages import these lazily, so a version that cannot import with this transformers
fails only when one is read."""
PACKAGES = {"onnx": "optimum-onnx and onnxruntime", "openvino": "optimum-intel and openvino"}


class BackendMissingError(ImportError, ValueError):
    """A backend's packages are missing or do not import (an ImportError; also a
    ValueError, so the command line prints it as one ``error:`` line)."""

    def __init__(self, backend: str, cause: str) -> None:
        super().__init__(f"the {backend} backend needs {PACKAGES[backend]}: pip install "
                         f"\"{EXTRAS[backend]}\" ({cause})", name=REQUIRED_MODULES[backend][-1])


def check_backend_name(backend: str) -> str:
    """``backend`` if it is one of :data:`BACKENDS`, else a ``ValueError`` naming them."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    return backend


def require_backend(backend: str) -> None:
    """Import what ``backend`` needs (nothing for torch); :class:`BackendMissingError` when
    an import fails."""
    for module in REQUIRED_MODULES.get(check_backend_name(backend), ()):
        try:
            imported = importlib.import_module(module)
            for name in REQUIRED_NAMES.get(module, ()):
                getattr(imported, name)  # a lazy import: the real one happens here
        except (ImportError, AttributeError, RuntimeError) as err:  # missing, or a version
            text = str(err).strip()  # that does not import with this transformers
            first_line = text.splitlines()[0] if text else type(err).__name__
            raise BackendMissingError(backend, f"import {module} failed: {first_line}") from None


def recorded_backend(name_or_path: str) -> str | None:
    """The backend a ``tapt export`` folder records (``tapt_preset.json``), or None (no
    record, or a record of a torch model)."""
    record = read_record_hint(name_or_path, "no recorded backend is checked")
    backend = (record or {}).get("backend")
    return backend if isinstance(backend, str) and backend != "torch" else None


def check_backend_matches(name_or_path: str, backend: str) -> None:
    """Refuse to load a ``tapt export`` folder of one backend with another."""
    recorded = recorded_backend(name_or_path)
    if recorded is not None and recorded != backend:
        raise ValueError(f"model '{name_or_path}' is a tapt export for the {recorded} backend "
                         f"(its tapt_preset.json); pass --backend {recorded}")
