"""Inference precision: which dtype to encode in, and running a float32 model in it.

``auto`` means bfloat16 on a CUDA GPU that supports it and float32 anywhere else. A model
loaded for evaluation only is loaded directly in the chosen dtype; a model being trained
keeps its float32 master weights and is encoded under autocast, which casts per matmul and
leaves the weights untouched.
"""

from __future__ import annotations

import contextlib
from typing import Literal

# torch is imported by the functions that need it: importing tapt must not import it.

DtypeName = Literal["auto", "float32", "bfloat16", "float16"]
DTYPE_NAMES: tuple[str, ...] = ("auto", "float32", "bfloat16", "float16")


def resolve_dtype(name: str | None, device: str | None = None) -> str:
    """The concrete dtype name for ``name`` on ``device`` (``auto`` picks bf16 on CUDA)."""
    import torch

    name = name or "auto"
    if name not in DTYPE_NAMES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPE_NAMES)}, got {name!r}")
    if name != "auto":
        return name
    on_cuda = (device or ("cuda" if torch.cuda.is_available() else "cpu")).startswith("cuda")
    if on_cuda and torch.cuda.is_available() and torch.cuda.is_bf16_supported():
        return "bfloat16"
    return "float32"


def torch_dtype(name: str):
    """``"bfloat16"`` -> ``torch.bfloat16`` (a concrete name, not ``auto``)."""
    import torch

    return {"float32": torch.float32, "bfloat16": torch.bfloat16,
            "float16": torch.float16}[name]


def dtype_name(dtype) -> str:
    """``torch.bfloat16`` -> ``"bfloat16"``."""
    return str(dtype).removeprefix("torch.")


def compute_context(model, dtype_name_: str | None):
    """A context that runs ``model``'s forward in ``dtype_name_``.

    Nothing is needed when the weights already have that dtype; otherwise autocast on the
    model's device type does the casting and the stored weights stay as they are.
    """
    import torch

    if dtype_name_ is None:
        return contextlib.nullcontext()
    target = torch_dtype(dtype_name_)
    parameter = next(model.parameters(), None)
    if parameter is None or parameter.dtype == target:
        return contextlib.nullcontext()
    device_type = parameter.device.type
    if target == torch.float32:
        # A half-precision model asked to run in float32: autocast cannot widen.
        raise ValueError(f"the model's weights are {dtype_name(parameter.dtype)}; load it in "
                         "float32 to encode in float32")
    return torch.autocast(device_type=device_type, dtype=target)
