"""Serving exports: a SentenceTransformer as one ONNX or OpenVINO graph (token ids to the
normalised sentence embedding), written with a manifest that is checked on load, and the
encoders that run such a folder through ONNX Runtime or OpenVINO directly.

- :mod:`tapt.serving.graph`: which models can be exported and the torch module that is;
- :mod:`tapt.serving.onnx_export` / :mod:`tapt.serving.openvino_export`: the conversions
  (OpenVINO's from the ONNX graph) and int8 by ONNX Runtime's dynamic quantisation or NNCF;
- :mod:`tapt.serving.export_folder`: ``tapt export``'s folder (graph, tokenizer, manifest,
  card), checked against torch, staged and renamed into place;
- :mod:`tapt.serving.manifest`: the manifest and its check;
- :mod:`tapt.serving.card`: the card, with the lines that run an export without tapt;
- :mod:`tapt.serving.runtime`: :class:`~tapt.serving.runtime.ExportedEncoder`.

No Optimum: its releases pin transformers versions older than tapt's, so the conversions
use the runtimes' own APIs (``torch.onnx.export``, ``openvino.convert_model``).
"""
