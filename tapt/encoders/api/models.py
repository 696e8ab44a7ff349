"""What tapt knows about each hosted embedding model: width, request limits, rate limits, price.

Sources (read 2026-11-30; providers change these, so every figure can be overridden):

- OpenAI (platform.openai.com/docs/guides/embeddings, /docs/api-reference/embeddings,
  /pricing, /docs/guides/rate-limits): at most 2,048 inputs and 300,000 tokens per
  request, 8,191 tokens per input (longer inputs are refused with HTTP 400, not
  truncated); text-embedding-3-large 3,072 dimensions, text-embedding-3-small 1,536, both
  shortened by the ``dimensions`` parameter; $0.13 and $0.02 per million tokens (standard
  tier; the Batch API halves it, tapt does not use it); usage tier 1: 3,000 requests and
  1,000,000 tokens per minute.
- Voyage AI (docs.voyageai.com/reference/embeddings-api, /docs/embeddings,
  /docs/pricing, /docs/rate-limits): at most 1,000 inputs per request, and at most 120K
  tokens per request for voyage-4-large and voyage-3-large, 320K for voyage-4 and
  voyage-3.5, 1M for voyage-4-lite and voyage-3.5-lite; 32,000 tokens of context
  (longer inputs are truncated by the API, ``truncation: true``); ``output_dimension``
  256, 512, 1,024 (default) or 2,048; $0.12 (voyage-4-large), $0.06 (voyage-4,
  voyage-3.5), $0.02 (the lite models), $0.18 (voyage-3-large) per million tokens, the
  first 200M tokens of each model free per account (tapt reports the list price);
  tier 1: 2,000 requests per minute and 3M tokens per minute for the large models, 8M for
  voyage-4 / voyage-3.5, 16M for the lite ones (voyage-4-large's row assumed equal to
  voyage-3-large's).
"""

from __future__ import annotations

from dataclasses import dataclass

PRICE_DATE = "2026-11-30"
"""When the prices and limits below were read from the providers' pages."""

PROVIDERS = ("openai", "voyage")


@dataclass(frozen=True)
class ModelInfo:
    """One hosted model. ``dimension_choices`` None: any width from 1 to ``dimensions``."""

    provider: str
    model: str
    dimensions: int
    dimension_choices: tuple[int, ...] | None
    max_inputs_per_request: int
    max_tokens_per_request: int
    max_tokens_per_input: int
    server_truncates: bool
    usd_per_million_tokens: float | None
    requests_per_minute: int
    tokens_per_minute: int


def _openai(model: str, dims: int, price: float) -> ModelInfo:
    return ModelInfo("openai", model, dims, None, 2048, 300_000, 8191, False, price,
                     3_000, 1_000_000)


def _voyage(model: str, per_request: int, price: float, tpm: int) -> ModelInfo:
    return ModelInfo("voyage", model, 1024, (256, 512, 1024, 2048), 1000, per_request, 32_000,
                     True, price, 2_000, tpm)


MODELS: dict[tuple[str, str], ModelInfo] = {(m.provider, m.model): m for m in (
    _openai("text-embedding-3-large", 3072, 0.13),
    _openai("text-embedding-3-small", 1536, 0.02),
    _voyage("voyage-4-large", 120_000, 0.12, 3_000_000),
    _voyage("voyage-4", 320_000, 0.06, 8_000_000),
    _voyage("voyage-4-lite", 1_000_000, 0.02, 16_000_000),
    _voyage("voyage-3-large", 120_000, 0.18, 3_000_000),
    _voyage("voyage-3.5", 320_000, 0.06, 8_000_000),
    _voyage("voyage-3.5-lite", 1_000_000, 0.02, 16_000_000),
)}


def model_info(provider: str, model: str, dimensions: int | None = None) -> ModelInfo:
    """The table's entry, or, for a model it does not list (a newer model, or one a proxy
    serves), the provider's general limits with no price; its width must then be given."""
    if provider not in PROVIDERS:
        raise ValueError(f"unknown embedding API provider {provider!r}; known: "
                         + ", ".join(PROVIDERS))
    if not model.strip():
        example = next(m for p, m in MODELS if p == provider)
        raise ValueError(f"{provider}: no model name; expected {provider}:MODEL, e.g. "
                         f"{provider}:{example}")
    known = MODELS.get((provider, model))
    if known is not None:
        return known
    if dimensions is None:
        listed = ", ".join(m for p, m in MODELS if p == provider)
        raise ValueError(f"{provider}:{model} is not in tapt's model table ({listed}); give its "
                         "embedding width with --truncate-dim (Python: dimensions=N)")
    template = MODELS[("openai", "text-embedding-3-small")] if provider == "openai" \
        else MODELS[("voyage", "voyage-4-large")]
    return ModelInfo(provider, model, dimensions, None, template.max_inputs_per_request,
                     template.max_tokens_per_request, template.max_tokens_per_input,
                     template.server_truncates, None, template.requests_per_minute,
                     template.tokens_per_minute)


def check_dimensions(info: ModelInfo, dimensions: int | None) -> int:
    """The width to ask for (the model's default when None), checked against the model."""
    if dimensions is None:
        return info.dimensions
    if info.dimension_choices is not None and dimensions not in info.dimension_choices:
        raise ValueError(f"{info.provider}:{info.model} returns "
                         + "/".join(map(str, info.dimension_choices))
                         + f" dimensions, not {dimensions}")
    if info.dimension_choices is None and not 0 < dimensions <= info.dimensions \
            and (info.provider, info.model) in MODELS:
        raise ValueError(f"{info.provider}:{info.model}: dimensions must be in "
                         f"1..{info.dimensions}, got {dimensions}")
    return dimensions
