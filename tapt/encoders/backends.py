"""Inference backends of tapt's encoders: ``torch`` (default), ``onnx`` (ONNX Runtime) and
``openvino`` (OpenVINO), the last two for folders ``tapt export`` wrote
(:mod:`tapt.serving`), run by :class:`~tapt.encoders.exported.ExportedEncoder`.

The runtimes come with extras: ``tapt[onnx]`` (onnx, onnxscript, onnxruntime) and
``tapt[openvino]`` (openvino, nncf, and onnx + onnxscript to write the graph it
converts). :func:`require_backend` imports what running a backend needs and :func:`require_export` what exporting to it needs, before any model
loads; when an import fails they raise one :class:`BackendMissingError` line naming the
extra and why the import failed.
"""

from __future__ import annotations

import importlib

BACKENDS: tuple[str, ...] = ("torch", "onnx", "openvino")
EXTRAS = {"onnx": "tapt[onnx]", "openvino": "tapt[openvino]"}
"""The extra that installs each non-torch backend."""
REQUIRED_MODULES = {"onnx": ("onnxruntime", "tokenizers"),
                    "openvino": ("openvino", "tokenizers")}
"""What running an export needs."""
EXPORT_MODULES = {"onnx": ("onnx", "onnxscript", "onnxruntime"),
                  "openvino": ("onnx", "onnxscript", "openvino")}
"""What writing one needs (ONNX int8 quantises with onnxruntime; OpenVINO converts the
ONNX graph)."""
QUANTIZE_MODULES = {"openvino": ("nncf",)}
"""What quantising one needs beyond :data:`EXPORT_MODULES`."""
PACKAGES = {"onnx": "onnx, onnxscript and onnxruntime",
            "openvino": "openvino, nncf, onnx and onnxscript"}


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
    """Import what running ``backend`` needs (nothing for torch);
    :class:`BackendMissingError` when an import fails."""
    _require(backend, REQUIRED_MODULES.get(check_backend_name(backend), ()))


def require_export(backend: str, quantize: str | None = None) -> None:
    """Import what exporting to ``backend`` (and quantising, when ``quantize``) needs."""
    modules = EXPORT_MODULES.get(check_backend_name(backend), ())
    _require(backend, modules + (QUANTIZE_MODULES.get(backend, ()) if quantize else ()))


def _require(backend: str, modules: tuple[str, ...]) -> None:
    for module in modules:
        try:
            importlib.import_module(module)
        except (ImportError, RuntimeError) as err:  # missing, or a build that cannot load
            text = str(err).strip()
            first_line = text.splitlines()[0] if text else type(err).__name__
            raise BackendMissingError(backend, f"import {module} failed: {first_line}") from None
