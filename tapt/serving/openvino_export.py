"""The OpenVINO conversion: the ONNX graph of :mod:`tapt.serving.onnx_export` (batch and
sequence dynamic, inputs named as the tokenizer names them) read by
``openvino.convert_model`` and saved as IR (``openvino_model.xml`` + ``.bin``) in float32.
Not ``convert_model`` on the torch module: it traces with ``torch.jit.trace``, which fixes
transformers' masking branches to the example's shapes, and OpenVINO's attention on
``torch.export``'s graph gives NaN rows under left padding (a tiny Qwen3: both measured);
the dynamo ONNX graph runs as torch does in both runtimes. int8 by NNCF:
``nncf.quantize`` (static: weights and activations, activation ranges calibrated on
tokenized passages of the user's own corpus) or ``nncf.compress_weights`` (weights only,
no calibration). NNCF draws its progress bars on rich's global console:
``progress=False`` silences that console while NNCF runs (NNCF has no switch of its own).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import rich

from tapt.serving import onnx_export
from tapt.serving.onnx_export import export_onnx

GRAPH_FILE = "openvino_model.xml"
WEIGHTS_FILE = "openvino_model.bin"


def export_openvino(model, folder: Path) -> list[str]:
    """Write ``model``'s graph to ``folder/openvino_model.xml`` and ``.bin`` (float32);
    returns the files written, relative to ``folder``."""
    import openvino

    with tempfile.TemporaryDirectory(dir=folder) as work:
        export_onnx(model, Path(work))
        converted = openvino.convert_model(str(Path(work) / onnx_export.GRAPH_FILE))
        openvino.save_model(converted, str(Path(folder) / GRAPH_FILE), compress_to_fp16=False)
        del converted  # holds the ONNX weights mapped until the folder goes
    return [GRAPH_FILE, WEIGHTS_FILE]


def quantize_openvino_int8(folder: Path, *, calibration: Sequence[dict[str, np.ndarray]]
                           | None, progress: bool = True) -> None:
    """Replace the IR in ``folder`` by its int8 version: static quantisation by
    ``nncf.quantize`` (transformer preset) calibrated on ``calibration`` (the graph's
    inputs of one passage each), or weight-only ``nncf.compress_weights`` (INT8_ASYM)
    when ``calibration`` is None. ``progress``: NNCF's progress bars."""
    import nncf
    import openvino

    path = Path(folder) / GRAPH_FILE
    core = openvino.Core()
    model = core.read_model(str(path))
    with bars(progress):
        if calibration is None:
            quantized = nncf.compress_weights(model, mode=nncf.CompressWeightsMode.INT8_ASYM)
        else:
            quantized = nncf.quantize(model, nncf.Dataset(list(calibration)),
                                      model_type=nncf.ModelType.TRANSFORMER,
                                      subset_size=len(calibration))
    staged = path.with_name("quantized.xml")
    openvino.save_model(quantized, str(staged), compress_to_fp16=False)
    del model, quantized  # the IR's .bin is mapped while the model lives
    staged.replace(path)
    staged.with_suffix(".bin").replace(path.with_suffix(".bin"))


@contextmanager
def bars(shown: bool) -> Iterator[None]:
    """Inside, unless ``shown``: rich's global console (where NNCF's ``track`` bars are
    drawn) prints nothing; restored afterwards. NNCF's log lines use the logging module
    and still show."""
    if shown:
        yield
        return
    console = rich.get_console()
    was = console.quiet
    console.quiet = True
    try:
        yield
    finally:
        console.quiet = was
