"""tapt: contrastive fine-tuning of text-embedding models for fine-grained retrieval.

The public API::

    from tapt import Encoder, SentenceTransformerEncoder, ModelSpec, load_data, evaluate
    from tapt import ExportedEncoder   # a tapt export folder (ONNX Runtime / OpenVINO)
    from tapt import register_family, registered_families   # model families (presets)

Layout: one package per concern, bottom up ``util`` (the helpers) -> ``data`` -> ``recipe``
-> ``encoders``, ``serving`` -> ``retrieval``, ``hub`` -> ``training`` -> ``selection`` -> ``analysis``
-> ``cli``; a module imports only from its own layer or below (README "Layout").

Imports sit at the top of a module. A function-local import defers a third-party library
that importing its module does not load already (torch, transformers, sentence-transformers,
datasets, peft, matplotlib, huggingface_hub, ...) or a tapt module that loads one, so that
``import tapt`` and a command's checks of its inputs stay fast; rich's table printer is
imported where a table is printed; the ``cli/`` handlers import the library inside the
handler, so that ``tapt --help`` loads none of it. tests/test_import_layers.py checks this.
"""

from tapt.data.beir import BeirDataset, DataError, Passage, load_beir_folder
from tapt.data.sources import load_data
from tapt.encoders.base import Encoder
from tapt.encoders.exported import ExportedEncoder
from tapt.encoders.loading import ModelSpec, load_sentence_transformer
from tapt.encoders.sentence import SentenceTransformerEncoder
from tapt.retrieval.dense import DenseRetriever
from tapt.retrieval.evaluate import EvalReport, evaluate
from tapt.retrieval.metrics import score_run
from tapt.util.families import register_family, registered_families

__version__ = "0.1.0"

__all__ = [
           "BeirDataset",
           "DataError",
           "DenseRetriever",
           "Encoder",
           "EvalReport",
           "ExportedEncoder",
           "ModelSpec",
           "Passage",
           "SentenceTransformerEncoder",
           "__version__",
           "evaluate",
           "load_beir_folder",
           "load_data",
           "load_sentence_transformer",
           "register_family",
           "registered_families",
           "score_run",
]
