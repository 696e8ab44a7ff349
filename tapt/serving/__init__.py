"""Serving exports: a SentenceTransformer made into one ONNX or OpenVINO graph (token ids to
the normalised sentence embedding) and written with a manifest that is checked on load.

- :mod:`tapt.serving.graph`: which models can be exported and the torch module that is;
- :mod:`tapt.serving.onnx_export` / :mod:`tapt.serving.openvino_export`: the conversions
  (OpenVINO's from the ONNX graph) and int8 by ONNX Runtime's dynamic quantisation or NNCF;
- :mod:`tapt.serving.export_folder`: ``tapt export``'s folder (graph, tokenizer, manifest,
  card), checked against torch, staged and renamed into place. Its card, with the lines
  that run an export without tapt, is :mod:`tapt.cards.serving_card` (every card writer in
  one package, one layer down).

Running an export is an encoder's job, one layer down: the manifest and its check are
:mod:`tapt.encoders.export_manifest`, the encoder that runs the folder through ONNX Runtime
or OpenVINO :class:`~tapt.encoders.exported.ExportedEncoder`. So every encoder loads
through :mod:`tapt.encoders.factory` without ``tapt.encoders`` importing this package.

No Optimum: its releases pin transformers versions older than tapt's, so the conversions
use the runtimes' own APIs (``torch.onnx.export``, ``openvino.convert_model``).
"""
