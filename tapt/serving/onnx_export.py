"""The ONNX conversion: :class:`~tapt.serving.graph.EmbeddingGraph` through
``torch.onnx.export`` (the dynamo exporter, onnxscript), batch and sequence axes dynamic,
inputs named as the tokenizer names them.

int8 by ONNX Runtime's quantisation tools, the graph shape-inferred first as ONNX Runtime
recommends (``quant_pre_process``):

- static (:func:`quantize_onnx_static`, ``quantize_static``, QDQ format): int8 weights
  (symmetric, per output channel unless asked per tensor) and uint8 activations whose
  ranges are calibrated once (MinMax) on passages of the user's corpus and fixed in the
  graph, so a passage's embedding does not depend on the texts batched with it. Only the
  linear layers are quantised (a MatMul or Gemm with a constant weight): the attention
  products (activation x activation), LayerNorm, Softmax and the activation function stay
  float32, as does every linear layer that reads the activation function's output (the
  feed-forward's down projection: its input has outliers one static scale cannot hold),
  after Bondarenko et al. 2021, "Understanding and Overcoming the Challenges of
  Efficient Transformer Quantization". all-MiniLM-L6-v2 calibrated on 100 SciFact
  passages, min / mean cosine to torch on 60 others: every MatMul quantised 0.918 /
  0.943; these linear layers 0.994 / 0.996; dynamic 0.992 / 0.995.
- dynamic (:func:`quantize_onnx_dynamic`, ``quantize_dynamic``): int8 weights, each
  activation's range taken at run time from the whole padded batch, so an embedding
  depends on the batch (the runtime runs such a graph one text per run).
"""

from __future__ import annotations

import logging
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

from tapt.serving.graph import OUTPUT_NAME, EmbeddingGraph, example_inputs

OPSET = 18
"""The ONNX opset written (ONNX Runtime 1.16 and newer run it)."""
SINGLE_FILE_LIMIT = 1_800_000_000
"""Weights above this many bytes go to an external data file (protobuf's 2 GB limit)."""
GRAPH_FILE = "model.onnx"
REGISTRATION_LOGGER = "torch.onnx._internal.exporter._registration"
LINEAR_OPS = ("MatMul", "Gemm")
"""The ops a static int8 graph quantises, when their weight is a constant."""
ACTIVATION_OPS = frozenset({"Erf", "Tanh", "Sigmoid", "Relu", "Gelu", "FastGelu",
                            "Softplus", "Elu", "Selu", "HardSigmoid", "HardSwish", "Mish"})
"""The activation functions' ops (GELU is exported as Erf or Tanh arithmetic, SiLU as
Sigmoid arithmetic): a linear layer reading their output is left in float32."""
ELEMENTWISE_OPS = frozenset({"Mul", "Add", "Sub", "Div", "Pow", "Sqrt", "Neg", "Cast",
                             "Identity"})
"""What lies between an activation function and the linear layer reading its output
(GELU's ``0.5 * x * (1 + erf(x / sqrt 2))``, SwiGLU's gate product)."""
ACTIVATION_DEPTH = 6
"""Elementwise ops followed back from a linear layer's input in search of an activation."""
CALIBRATION_HELD = 16
"""Calibration runs whose intermediate tensors ONNX Runtime holds before it folds them
into the running ranges (its default holds every run's: gigabytes for 300 passages)."""


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


def quantize_onnx_static(folder: Path, calibration: Sequence[dict[str, np.ndarray]], *,
                         per_channel: bool = True) -> None:
    """Replace ``folder/model.onnx`` by its static int8 quantisation (QDQ; see the module):
    activation ranges calibrated (MinMax) on ``calibration``, the graph's inputs of one
    passage each, in order."""
    from onnxruntime.quantization import (
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    with _prepared(folder) as (prepared, quantized):
        quantize_static(str(prepared), str(quantized), calibration_reader(calibration),
                        quant_format=QuantFormat.QDQ, op_types_to_quantize=list(LINEAR_OPS),
                        nodes_to_quantize=linear_nodes(prepared), per_channel=per_channel,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                        calibrate_method=CalibrationMethod.MinMax,
                        use_external_data_format=_external(folder),
                        extra_options={"ActivationSymmetric": False, "WeightSymmetric": True,
                                       "CalibMaxIntermediateOutputs": CALIBRATION_HELD})


def quantize_onnx_dynamic(folder: Path, *, per_channel: bool = True) -> None:
    """Replace ``folder/model.onnx`` by its dynamic int8 quantisation (activations
    quantised at run time over the whole batch: an embedding depends on its batch)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with _prepared(folder) as (prepared, quantized):
        quantize_dynamic(str(prepared), str(quantized), per_channel=per_channel,
                         weight_type=QuantType.QInt8,
                         use_external_data_format=_external(folder))


def linear_nodes(path: Path) -> list[str]:
    """The names of the graph's linear layers a static int8 graph quantises: the MatMul and
    Gemm nodes with a constant weight, but those that read an activation function's
    output (through at most :data:`ACTIVATION_DEPTH` elementwise ops)."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    constants = {init.name for init in graph.initializer}
    constants |= {out for node in graph.node if node.op_type == "Constant"
                  for out in node.output}
    producer = {out: node for node in graph.node for out in node.output}

    def after_activation(name: str, depth: int) -> bool:
        node = producer.get(name)
        if node is None or depth > ACTIVATION_DEPTH:
            return False
        if node.op_type in ACTIVATION_OPS:
            return True
        return node.op_type in ELEMENTWISE_OPS and any(
            after_activation(source, depth + 1) for source in node.input)

    chosen = []
    for node in graph.node:
        if node.op_type not in LINEAR_OPS or len(node.input) < 2:
            continue
        data, weight = node.input[0], node.input[1]
        if weight in constants and data not in constants and \
                not after_activation(data, 0):
            chosen.append(node.name)
    return chosen


def calibration_reader(feeds: Sequence[dict[str, np.ndarray]]):
    """An ONNX Runtime ``CalibrationDataReader`` handing out ``feeds`` in order (the class
    is made here: onnxruntime is an extra, imported when a graph is quantised)."""
    from onnxruntime.quantization import CalibrationDataReader

    class Passages(CalibrationDataReader):
        def __init__(self) -> None:
            self.feeds = iter(feeds)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.feeds, None)

    return Passages()


def _external(folder: Path) -> bool:
    """The graph keeps its weights in an external data file (over 2 GB)."""
    return (Path(folder) / (GRAPH_FILE + ".data")).is_file()


@contextmanager
def _prepared(folder: Path) -> Iterator[tuple[Path, Path]]:
    """``(prepared, quantized)`` paths in a work folder inside ``folder``: the graph
    shape-inferred (``quant_pre_process``) and where the quantiser writes; on a clean exit
    the quantised graph replaces ``folder/model.onnx``."""
    from onnxruntime.quantization import quant_pre_process

    path = Path(folder) / GRAPH_FILE
    with tempfile.TemporaryDirectory(dir=folder) as work:
        prepared = Path(work) / "prepared.onnx"
        quant_pre_process(str(path), str(prepared), skip_symbolic_shape=True,
                          save_as_external_data=_external(folder))
        quantized = Path(work) / "quantized" / GRAPH_FILE  # its data file: model.onnx.data
        quantized.parent.mkdir()
        yield prepared, quantized
        for old in Path(folder).glob(GRAPH_FILE + "*"):
            old.unlink()
        for made in quantized.parent.iterdir():
            made.replace(Path(folder) / made.name)
