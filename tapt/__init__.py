"""tapt: contrastive fine-tuning of text-embedding models for fine-grained retrieval.

The public API::

    from tapt import Encoder, SentenceTransformerEncoder, ModelSpec, load_data, evaluate
    from tapt import register_family, registered_families   # model families (presets)
"""

from tapt.data.beir import BeirDataset, DataError, Passage, load_beir_folder
from tapt.data.sources import load_data
from tapt.encoders.base import Encoder
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
