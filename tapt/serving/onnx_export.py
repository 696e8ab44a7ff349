"""The ONNX conversion: :class:`~tapt.serving.graph.EmbeddingGraph` through
``torch.onnx.export`` (the dynamo exporter, onnxscript), batch and sequence axes dynamic,
inputs named as the tokenizer names them; int8 by ONNX Runtime's dynamic quantisation
(``onnxruntime.quantization.quantize_dynamic``: int8 weights, activations quantised at
run time), per output channel unless asked per tensor (per tensor loses more: cosine to
fp32 0.964 against 0.992 for all-MiniLM-L6-v2).
"""

from __future__ import annotations

import logging
import tempfile
import warnings
from pathlib import Path

import torch

from tapt.serving.graph import OUTPUT_NAME, EmbeddingGraph, example_inputs

OPSET = 18
"""The ONNX opset written (ONNX Runtime 1.16 and newer run it)."""
SINGLE_FILE_LIMIT = 1_800_000_000
"""Weights above this many bytes go to an external data file (protobuf's 2 GB limit)."""
GRAPH_FILE = "model.onnx"
REGISTRATION_LOGGER = "torch.onnx._internal.exporter._registration"


def export_onnx(model, folder: Path, *, opset: int = OPSET) -> list[str]:
    """Write ``model``'s graph to ``folder/model.onnx`` (plus ``model.onnx.data`` for
    weights beyond :data:`SINGLE_FILE_LIMIT`); returns the files written, relative to
    ``folder``."""
    graph = EmbeddingGraph(model).eval()
    inputs = example_inputs(model)
    batch, sequence = torch.export.Dim("batch"), torch.export.Dim("sequence")
    size = sum(p.numel() * p.element_size() for p in model.parameters())
    path = Path(folder) / GRAPH_FILE
    registration = logging.getLogger(REGISTRATION_LOGGER)
    level = registration.level
    registration.setLevel(logging.ERROR)  # "torchvision is not installed": not used here
    with warnings.catch_warnings(), torch.inference_mode(False), torch.no_grad():
        warnings.simplefilter("ignore")  # the exporter's deprecation chatter
        try:
            torch.onnx.export(graph, inputs, str(path), input_names=list(graph.names),
                              output_names=[OUTPUT_NAME], opset_version=opset, dynamo=True,
                              dynamic_shapes={name: {0: batch, 1: sequence}
                                              for name in graph.names},
                              external_data=size > SINGLE_FILE_LIMIT, verbose=False)
        finally:
            registration.setLevel(level)
    return sorted(p.name for p in Path(folder).iterdir() if p.name.startswith(GRAPH_FILE))


def quantize_onnx_int8(folder: Path, *, per_channel: bool = True) -> None:
    """Replace ``folder/model.onnx`` by its dynamic int8 quantisation (ONNX Runtime), the
    graph shape-inferred first as ONNX Runtime recommends (``quant_pre_process``)."""
    from onnxruntime.quantization import QuantType, quant_pre_process, quantize_dynamic

    path = Path(folder) / GRAPH_FILE
    with tempfile.TemporaryDirectory(dir=folder) as work:
        prepared = Path(work) / "prepared.onnx"
        quant_pre_process(str(path), str(prepared), skip_symbolic_shape=True)
        quantized = Path(work) / "quantized.onnx"
        quantize_dynamic(str(prepared), str(quantized), per_channel=per_channel,
                         weight_type=QuantType.QInt8)
        for old in Path(folder).glob(GRAPH_FILE + "*"):
            old.unlink()
        quantized.replace(path)
