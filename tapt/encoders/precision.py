"""Inference precision: which dtype to encode in, and running a float32 model in it.

``auto`` means bfloat16 where the device computes it natively (:func:`native_bf16`: a CUDA
GPU with bf16 units, a CPU with AMX or AVX512-BF16) and float32 anywhere else: without
native support bf16 is emulated and slower than float32 (7x on an AVX2 CPU). A model
loaded for evaluation only is loaded directly in the chosen dtype; a model being trained
keeps its float32 master weights and is encoded under autocast, which casts per matmul and
leaves the weights untouched.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from typing import Literal

# torch is imported by the functions that need it: importing tapt must not import it.

DtypeName = Literal["auto", "float32", "bfloat16", "float16"]
DTYPE_NAMES: tuple[str, ...] = ("auto", "float32", "bfloat16", "float16")
NATIVE_CPU_BF16 = ("amx_bf16", "avx512_bf16", "bf16")
"""CPU features that compute bf16 in hardware, as torch names them
(``torch.cpu.get_capabilities``): AMX and AVX512-BF16 on x86, the BF16 extension on Arm."""
CPU_BF16_VARIABLE = "TAPT_CPU_BF16"
"""``0`` or ``1``: the answer for the CPU, instead of its reported features (a virtual
machine whose flags say more or less than its cores do; the test suite sets 0, so that
``auto`` means float32 on every CPU it runs on)."""


def cpu_capabilities() -> Mapping[str, object]:
    """The CPU's features as torch detects them (cpuinfo): ``torch.cpu.get_capabilities``,
    or on an older torch its two bf16 queries."""
    import torch

    query = getattr(torch.cpu, "get_capabilities", None)
    if query is not None:
        return query()
    return {"amx_bf16": getattr(torch.cpu, "_is_amx_tile_supported", bool)(),
            "avx512_bf16": getattr(torch.cpu, "_is_avx512_bf16_supported", bool)()}


def native_bf16(device: str | None = None) -> str | None:
    """What computes bfloat16 natively on ``device`` (``cuda``, ``cuda:1``, ``cpu``; None:
    the GPU when there is one, else the CPU), for a log line: ``a CUDA GPU with bf16``,
    ``a CPU with avx512_bf16``; None where bf16 would be emulated (a CPU without AMX or
    AVX512-BF16, a GPU before Ampere, MPS), and float32 is the faster choice."""
    import torch

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda"):
        return ("a CUDA GPU with bf16" if torch.cuda.is_available() and
                torch.cuda.is_bf16_supported(including_emulation=False) else None)
    if device.partition(":")[0] != "cpu":
        return None
    forced = os.environ.get(CPU_BF16_VARIABLE, "").strip()
    if forced in ("0", "1"):
        return f"a CPU ({CPU_BF16_VARIABLE}=1)" if forced == "1" else None
    features = cpu_capabilities()
    found = [name for name in NATIVE_CPU_BF16 if features.get(name) is True]
    return f"a CPU with {found[0]}" if found else None


def resolve_dtype(name: str | None, device: str | None = None) -> str:
    """The concrete dtype name for ``name`` on ``device`` (``auto``: bfloat16 where
    :func:`native_bf16`, else float32)."""
    name = name or "auto"
    if name not in DTYPE_NAMES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPE_NAMES)}, got {name!r}")
    if name != "auto":
        return name
    return "bfloat16" if native_bf16(device) else "float32"


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


def has_accelerator() -> bool:
    import torch

    mps = getattr(torch.backends, "mps", None)
    return torch.cuda.is_available() or bool(mps and mps.is_available()) or (
        hasattr(torch, "xpu") and torch.xpu.is_available())


def training_bf16(setting: bool | str) -> tuple[bool, str]:
    """``training.bf16`` as the trainer takes it, and why: ``auto`` is bf16 mixed precision
    where the training device (the CUDA GPU, else the CPU; float32 on MPS or XPU) computes
    bf16 natively (:func:`~tapt.encoders.precision.native_bf16`), float32 elsewhere."""
    if setting != "auto":
        return bool(setting), f"training.bf16: {str(bool(setting)).lower()}"
    import torch

    if not torch.cuda.is_available() and has_accelerator():
        return False, "training.bf16: auto, on MPS or XPU float32"
    found = native_bf16("cuda" if torch.cuda.is_available() else "cpu")
    if found:
        return True, f"training.bf16: auto, {found}"
    where = ("a GPU without native bf16" if torch.cuda.is_available() else
             "a CPU without AMX or AVX512-BF16")
    return False, f"training.bf16: auto, {where}"


def bf16_label(setting: bool | str) -> str:
    """The card's cell: ``true``, ``false``, or under ``auto`` the choice and why."""
    bf16, why = training_bf16(setting)
    return str(bf16).lower() + (f" ({why})" if setting == "auto" else "")
