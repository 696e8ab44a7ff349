"""Build a randomly initialised Qwen3 SentenceTransformer of a chosen shape.

The defaults are Qwen3-Embedding-0.6B's architecture (28 layers, hidden 1024, 16 query
heads, 8 key/value heads, head dim 128, intermediate 3072, vocabulary 151,669, tied
embeddings, RMSNorm eps 1e-6, RoPE theta 1e6, 32,768 positions), with random weights
(``initializer_range`` 0.02, seeded). The tokenizer is a byte-level BPE trained here with
``tokenizers`` on the texts you give (e.g. a BEIR ``corpus.jsonl``), wrapped as a
``Qwen2Tokenizer`` (the class Qwen3-Embedding ships): ``<|endoftext|>`` is EOS, pad and
unk, padding is on the left, and, like the official tokenizer, it appends EOS to every
input (``append_eos``). The model's vocabulary may be larger than the trained tokenizer's:
the embedding table is what sets parameters and memory, and unused rows are never read.

The folder holds Transformer -> Pooling(lasttoken) -> Normalize and loads with
``SentenceTransformer(path)`` (or ``tapt.encoders.loading.load_sentence_transformer``).

Example::

    from benchmarks.random_qwen3 import QwenShape, build_random_qwen3, corpus_texts

    texts = corpus_texts("data/synth/corpus.jsonl")
    build_random_qwen3("/tmp/rq3", texts, QwenShape(num_layers=28, hidden_size=256,
                       num_heads=4, num_kv_heads=2, head_dim=64, intermediate_size=768))

Command line::

    python benchmarks/random_qwen3.py /tmp/rq3 --texts data/synth --hidden 256 --heads 4 \\
        --kv-heads 2 --head-dim 64 --intermediate 768
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

EOS = "<|endoftext|>"
"""Qwen3's end-of-text token: EOS, pad and unk of the tokenizer."""

QWEN3_EMBEDDING_0_6B_VOCAB = 151_669


@dataclass(frozen=True)
class QwenShape:
    """Architecture of the random model (defaults: Qwen3-Embedding-0.6B)."""

    num_layers: int = 28
    hidden_size: int = 1024
    num_heads: int = 16
    num_kv_heads: int = 8
    head_dim: int = 128
    intermediate_size: int = 3072
    vocab_size: int = QWEN3_EMBEDDING_0_6B_VOCAB
    tie_word_embeddings: bool = True
    max_position_embeddings: int = 32_768
    rope_theta: float = 1_000_000.0
    rms_norm_eps: float = 1e-6
    initializer_range: float = 0.02

    def check(self) -> None:
        """Raise ValueError for shapes Qwen3 cannot take."""
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads ({self.num_heads}) must be a multiple of "
                             f"num_kv_heads ({self.num_kv_heads})")
        for name in ("num_layers", "hidden_size", "num_heads", "num_kv_heads", "head_dim",
                     "intermediate_size", "vocab_size"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")

    def parameter_count(self) -> int:
        """Parameters of ``Qwen3Model`` of this shape (no LM head: tied or not, none is built)."""
        h, q, kv = self.hidden_size, self.num_heads * self.head_dim, \
            self.num_kv_heads * self.head_dim
        attention = h * q + 2 * h * kv + q * h + 2 * self.head_dim  # q, k, v, o, q/k norms
        mlp = 3 * h * self.intermediate_size
        layer = attention + mlp + 2 * h  # two RMSNorms
        return self.vocab_size * h + self.num_layers * layer + h  # final norm


def corpus_texts(path: str | os.PathLike, *, with_title: bool = True,
                 with_queries: bool = True, limit: int | None = None) -> list[str]:
    """Texts to train the tokenizer on, from a BEIR folder or a ``corpus.jsonl`` file.

    Passages are ``title + " " + text`` (as tapt encodes them); a folder's
    ``queries.jsonl`` is added when ``with_queries``. ``limit`` caps the passages read.
    """
    path = Path(path)
    corpus = path / "corpus.jsonl" if path.is_dir() else path
    texts: list[str] = []
    with corpus.open(encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            row = json.loads(line)
            title = row.get("title") or ""
            text = row.get("text") or ""
            texts.append(f"{title} {text}".strip() if with_title and title else text)
            if limit is not None and len(texts) >= limit:
                break
    queries = corpus.parent / "queries.jsonl"
    if with_queries and queries.is_file():
        with queries.open(encoding="utf-8") as handle:
            texts += [json.loads(line)["text"] for line in handle if line.strip()]
    return texts


def train_tokenizer(texts: Iterable[str], *, vocab_size: int = 16_000,
                    padding_side: str = "left", append_eos: bool = True,
                    model_max_length: int = 32_768):
    """A ``Qwen2Tokenizer`` over a byte-level BPE trained on ``texts``.

    Deterministic for the same texts (BPE merges are ranked by count, ties by pair).
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from tokenizers.processors import TemplateProcessing
    from transformers import Qwen2Tokenizer

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=[EOS], show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    state = json.loads(backend.to_str())["model"]
    merges = [tuple(pair) if isinstance(pair, list) else tuple(pair.split(" "))
              for pair in state["merges"]]
    tokenizer = Qwen2Tokenizer(vocab=state["vocab"], merges=merges, eos_token=EOS,
                               pad_token=EOS, unk_token=EOS, bos_token=None,
                               padding_side=padding_side, model_max_length=model_max_length)
    if append_eos:
        eos_id = tokenizer.convert_tokens_to_ids(EOS)
        tokenizer.backend_tokenizer.post_processor = TemplateProcessing(
            single=f"$A:0 {EOS}:0", pair=f"$A:0 {EOS}:0 $B:1 {EOS}:1",
            special_tokens=[(EOS, eos_id)])
    return tokenizer


def qwen3_config(shape: QwenShape, eos_id: int, *, pad_in_config: bool = False):
    """A ``Qwen3Config`` of ``shape``; ``bos``/``eos`` are ``eos_id`` as in Qwen3-Embedding.

    Qwen3-Embedding-0.6B's config names no ``pad_token_id``; ``pad_in_config`` sets it to
    ``eos_id``, which makes that embedding row zero and frozen (``nn.Embedding``'s
    ``padding_idx``).
    """
    from transformers import Qwen3Config

    return Qwen3Config(
        vocab_size=shape.vocab_size, hidden_size=shape.hidden_size,
        num_hidden_layers=shape.num_layers, num_attention_heads=shape.num_heads,
        num_key_value_heads=shape.num_kv_heads, head_dim=shape.head_dim,
        intermediate_size=shape.intermediate_size,
        max_position_embeddings=shape.max_position_embeddings,
        rope_parameters={"rope_type": "default", "rope_theta": shape.rope_theta},
        rms_norm_eps=shape.rms_norm_eps, initializer_range=shape.initializer_range,
        tie_word_embeddings=shape.tie_word_embeddings, attention_bias=False,
        use_sliding_window=False, eos_token_id=eos_id, bos_token_id=eos_id,
        pad_token_id=eos_id if pad_in_config else None)


def build_random_qwen3(folder: str | os.PathLike, texts: list[str],
                       shape: QwenShape = QwenShape(), *, seed: int = 0,
                       tokenizer_vocab_size: int = 16_000, padding_side: str = "left",
                       append_eos: bool = True, max_seq_length: int = 2048,
                       pad_in_config: bool = False, overwrite: bool = False) -> Path:
    """Save a random Qwen3 SentenceTransformer of ``shape`` in ``folder``; return the folder.

    Weights are float32, drawn after ``torch.manual_seed(seed)``; the tokenizer is trained
    on ``texts`` (``tokenizer_vocab_size`` is an upper bound). ``shape.vocab_size`` must be
    at least the trained tokenizer's size. Writes ``random_qwen3.json`` (shape, seed,
    parameter count) next to the model.
    """
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Normalize, Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling
    from transformers import Qwen3Model

    shape.check()
    folder = Path(folder)
    if folder.exists():
        if not overwrite:
            raise FileExistsError(f"{folder} exists (pass overwrite=True / --overwrite)")
        shutil.rmtree(folder)
    if not texts:
        raise ValueError("no texts to train the tokenizer on")
    tokenizer = train_tokenizer(texts, vocab_size=tokenizer_vocab_size,
                                padding_side=padding_side, append_eos=append_eos,
                                model_max_length=shape.max_position_embeddings)
    if len(tokenizer) > shape.vocab_size:
        raise ValueError(f"the tokenizer has {len(tokenizer)} tokens, more than the model's "
                         f"vocab_size {shape.vocab_size}")
    eos_id = tokenizer.convert_tokens_to_ids(EOS)

    torch.manual_seed(seed)
    config = qwen3_config(shape, eos_id, pad_in_config=pad_in_config)
    model = Qwen3Model(config).to(torch.float32).eval()
    hf_folder = folder.parent / f".{folder.name}-hf"
    shutil.rmtree(hf_folder, ignore_errors=True)
    model.save_pretrained(hf_folder)
    tokenizer.save_pretrained(hf_folder)
    del model

    transformer = Transformer(str(hf_folder), max_seq_length=max_seq_length,
                              model_kwargs={"dtype": torch.float32},
                              processor_kwargs={"padding_side": padding_side})
    pool = Pooling(transformer.get_embedding_dimension(), pooling_mode="lasttoken")
    st_model = SentenceTransformer(modules=[transformer, pool, Normalize()], device="cpu")
    st_model.save(str(folder))
    shutil.rmtree(hf_folder, ignore_errors=True)
    info = {"shape": asdict(shape), "seed": seed, "parameters": shape.parameter_count(),
            "tokenizer_size": len(tokenizer), "eos_id": eos_id, "append_eos": append_eos,
            "padding_side": padding_side, "pad_in_config": pad_in_config,
            "texts": len(texts)}
    (folder / "random_qwen3.json").write_text(json.dumps(info, indent=2) + "\n",
                                              encoding="utf-8")
    return folder


def shape_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--layers --hidden --heads --kv-heads --head-dim --intermediate --vocab
    --no-tie`` (defaults: Qwen3-Embedding-0.6B) to ``parser``."""
    d = QwenShape()
    group = parser.add_argument_group("model shape (defaults: Qwen3-Embedding-0.6B)")
    group.add_argument("--layers", type=int, default=d.num_layers)
    group.add_argument("--hidden", type=int, default=d.hidden_size)
    group.add_argument("--heads", type=int, default=d.num_heads)
    group.add_argument("--kv-heads", type=int, default=d.num_kv_heads)
    group.add_argument("--head-dim", type=int, default=d.head_dim)
    group.add_argument("--intermediate", type=int, default=d.intermediate_size)
    group.add_argument("--vocab", type=int, default=d.vocab_size,
                       help="embedding rows (may exceed the trained tokenizer's size)")
    group.add_argument("--no-tie", dest="tie", action="store_false",
                       help="tie_word_embeddings=False (default: tied, as Qwen3-Embedding)")


def shape_from_args(args: argparse.Namespace) -> QwenShape:
    """The :class:`QwenShape` that :func:`shape_arguments`' options describe."""
    return QwenShape(num_layers=args.layers, hidden_size=args.hidden, num_heads=args.heads,
                     num_kv_heads=args.kv_heads, head_dim=args.head_dim,
                     intermediate_size=args.intermediate, vocab_size=args.vocab,
                     tie_word_embeddings=args.tie)


def instruction_texts() -> list[str]:
    """Qwen3's FormBench query instruction (from tapt, when importable), so the tokenizer
    has seen it."""
    try:
        from tapt.util.families import qwen3_instruction
    except ImportError:
        return []
    return [qwen3_instruction()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Save a randomly initialised Qwen3 SentenceTransformer (byte-level BPE "
                    "trained on the given texts, <|endoftext|> EOS/pad, left padding, "
                    "last-token pooling, Normalize).")
    parser.add_argument("folder", help="output folder")
    parser.add_argument("--texts", required=True,
                        help="BEIR folder or corpus.jsonl to train the tokenizer on")
    parser.add_argument("--text-limit", type=int, default=None,
                        help="read at most this many passages")
    parser.add_argument("--tokenizer-vocab", type=int, default=16_000,
                        help="BPE vocabulary size (upper bound)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-seq-length", type=int, default=2048)
    parser.add_argument("--padding-side", choices=["left", "right"], default="left")
    parser.add_argument("--no-append-eos", dest="append_eos", action="store_false",
                        help="tokenizer does not append <|endoftext|> by itself")
    parser.add_argument("--pad-in-config", action="store_true",
                        help="set config.pad_token_id = EOS (zero, frozen EOS embedding row)")
    parser.add_argument("--overwrite", action="store_true")
    shape_arguments(parser)
    args = parser.parse_args(argv)
    shape = shape_from_args(args)
    texts = corpus_texts(args.texts, limit=args.text_limit) + instruction_texts()
    folder = build_random_qwen3(args.folder, texts, shape, seed=args.seed,
                                tokenizer_vocab_size=args.tokenizer_vocab,
                                padding_side=args.padding_side, append_eos=args.append_eos,
                                max_seq_length=args.max_seq_length,
                                pad_in_config=args.pad_in_config, overwrite=args.overwrite)
    info = json.loads((folder / "random_qwen3.json").read_text(encoding="utf-8"))
    print(f"{folder}: {info['parameters']:,} parameters, tokenizer {info['tokenizer_size']:,} "
          f"tokens, {info['texts']:,} texts")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
