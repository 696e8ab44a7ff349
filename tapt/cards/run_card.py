"""The model card of a training run's export (``OUTPUT/final``), TAPT and DAPT, and the
cards sentence-transformers writes into its checkpoints.

The TAPT card is tapt's section first (what was trained on what, for how many epochs or
steps, the results, the dev curve, how to load it: the pushed repository's id when the
recipe pushes), then sentence-transformers' own card (architecture, loss, hyperparameters,
training logs). The DAPT card is tapt's own (:func:`write_dapt_card`): the base model's card
says nothing true about a continued-pretraining run. Neither holds a path of this machine.
The YAML front matter is rewritten with huggingface_hub's ``ModelCard``:
sentence-transformers writes ``license``, ``library_name``, ``pipeline_tag``, ``tags`` and a
``model-index`` of the trainer's *last* dev evaluation; tapt sets ``base_model`` (the Hub id
when known), ``datasets`` (Hub datasets only: a local folder's name is no dataset id) and a
``model-index`` with the best-checkpoint dev metrics and the test metrics it measured, each
split also as an MTEB-shaped entry (``text-retrieval``, ``ndcg_at_10``:
:func:`tapt.retrieval.mteb_results.mteb_eval_results`).
"""

from __future__ import annotations

from pathlib import Path

from tapt.cards.common import (
    LICENSE_ID,
    METRIC_NAMES,
    data_label,
    how_to_load,
    model_label,
    warning_lines,
)
from tapt.cards.dev_history import dev_curve, dev_table, metrics_table
from tapt.encoders.precision import bf16_label
from tapt.encoders.preset_record import base_model_id
from tapt.recipe import DaptRecipe, Recipe
from tapt.retrieval.metrics import METRIC_KEYS
from tapt.retrieval.mteb_results import mteb_eval_results
from tapt.run_folder.split_records import split_lines
from tapt.util.figures import save
from tapt.util.files import atomic_write_json, atomic_write_text
from tapt.util.ids import is_hub_id

CARD_SECTION_MARKER = "## Task-adaptive training with tapt"
CARD_SECTION_END = "<!-- end of tapt's section -->"
"""Ends tapt's section, so that a rewrite replaces it and keeps what follows."""


def set_card_metadata(model, recipe: Recipe) -> None:
    """Fill the model card fields sentence-transformers writes on every save."""
    card = model.model_card_data
    card.license = LICENSE_ID
    card.language = ["en"]
    card.model_name = f"tapt {Path(recipe.output_dir).name} ({model_label(recipe.model.name)})"
    card.tags = list(dict.fromkeys([*card.tags, "tapt", "formbench", "retrieval"]))
    base = base_model_id(recipe.model.name)
    if base:
        card.base_model = base
    repo_id = getattr(getattr(recipe, "hub", None), "repo_id", None)
    if repo_id:  # the card's usage snippet then loads the pushed repository
        card.model_id = repo_id


def drop_data_samples(card) -> None:
    """Keep the training data out of sentence-transformers' model card ``card`` (its
    ``model_card_data``): the first rows of each dataset ("Samples"), the widget and the
    usage examples it draws from the data. A card is published with the model, and data
    may hold what must not be (a token pasted into a passage). Call it once the trainer is
    made (that is when they are set); the usage snippet falls back to generic sentences."""
    for dataset in [*card.train_datasets, *card.eval_datasets]:
        for key in ("examples", "examples_table", "_example_columns"):
            dataset.pop(key, None)
    card.widget = []
    card.usage_examples = None


def redact_card(card: Path) -> None:
    """Rewrite the model card ``card`` that sentence-transformers wrote (a checkpoint's, an
    export's) with its text redacted (:func:`tapt.util.files.atomic_write_text`); no card: no-op."""
    if card.is_file():
        atomic_write_text(card, card.read_text(encoding="utf-8"))


def dataset_id(recipe: Recipe) -> str:
    """The recipe's dataset for the card's ``datasets``: its Hub id, or the local folder's
    name when the data is a local folder."""
    files = getattr(recipe.data, "files", None)  # a DAPT recipe may read plain files only
    path = recipe.data.path or (files[0] if files else "")
    if not Path(path).exists() and is_hub_id(path):
        return path
    return Path(path).name or path


def hub_dataset_id(recipe: Recipe) -> str | None:
    """The card's ``datasets`` entry: the recipe's Hub dataset id, None for local data."""
    path = recipe.data.path
    return path if path and not Path(path).exists() and is_hub_id(path) else None


def eval_results(recipe: Recipe, summary: dict[str, dict[str, float]]) -> list:
    """``model-index`` entries for what tapt measured on this model: the best checkpoint's
    dev metrics (the average's, ``averaged dev``, when the export is the mean of the last
    checkpoints) and the test metrics (zero-shot rows describe the base model, not this one),
    then the same splits as MTEB-shaped entries (:func:`mteb_eval_results`)."""
    from huggingface_hub import EvalResult

    exported = "averaged dev" if "averaged dev" in summary else "best dev"
    splits = [(recipe.data.dev_split, metrics) for name, metrics in summary.items()
              if name.startswith(exported)]
    if "TAPT test" in summary:
        splits.append((recipe.data.test_split, summary["TAPT test"]))
    dataset = dataset_id(recipe)
    tapt_rows = [EvalResult(task_type="information-retrieval", task_name="Information Retrieval",
                            dataset_type=dataset, dataset_name=f"{recipe_data(recipe)} {split}",
                            dataset_config=recipe.data.config, dataset_split=split,
                            metric_type=key, metric_name=METRIC_NAMES.get(key, key),
                            metric_value=float(metrics[key]))
                 for split, metrics in splits for key in METRIC_KEYS if key in metrics]
    return tapt_rows + mteb_eval_results(dict(splits), dataset_type=dataset,
                                         task_name=Path(str(dataset)).name or str(dataset),
                                         config=recipe.data.config,
                                         revision=recipe.data.revision)


def card_with_front_matter(text: str, recipe: Recipe,
                           summary: dict[str, dict[str, float]]) -> str:
    """``text`` (a model card, with or without front matter) with tapt's metadata set:
    license, library_name, pipeline_tag, base_model, datasets, tags and model-index."""
    from huggingface_hub import ModelCard

    card = ModelCard(text)
    data = card.data
    data.license = LICENSE_ID
    data.library_name = "sentence-transformers"
    data.pipeline_tag = "sentence-similarity"
    base = base_model_id(recipe.model.name)
    if base:
        data.base_model = base
    dataset = hub_dataset_id(recipe)
    data.datasets = [dataset] if dataset else None
    data.tags = list(dict.fromkeys([*(data.tags or []), "sentence-transformers",
                                    "sentence-similarity", "tapt"]))
    data.model_name = data.model_name or f"tapt {Path(recipe.output_dir).name}"
    data.eval_results = eval_results(recipe, summary) or None
    return str(card)


def recipe_data(recipe) -> str:
    """The recipe's data as the card names it (:func:`~tapt.cards.common.data_label`)."""
    data = recipe.data
    return data_label(data.path, data.config, getattr(data, "files", None) or ())


def write_dev_curve(history: list[dict], metric: str, path: Path) -> Path | None:
    """The card's dev curve (:func:`tapt.training.dev_history.dev_curve`) as a PNG; None
    when no dev evaluation was recorded."""
    if not any(not entry.get("error") for entry in history):
        return None
    figure = dev_curve(history, metric,
                       title="Dev retrieval metrics during TAPT (step 0 = zero-shot)")
    return save(figure, path, dpi=120)


def tapt_card_section(recipe: Recipe, history: list[dict], summary: dict[str, dict[str, float]],
                      best_step: int | None, curve: Path | None,
                      averaged: dict | None = None, gate_warning: str | None = None,
                      splits: dict | None = None, weak_pairs: dict | None = None,
                      pseudo_queries: dict | None = None) -> str:
    """tapt's section of the model card (it comes first, ends with
    :data:`CARD_SECTION_END`); ``gate_warning``: the zero-shot gate's message when the model
    does not beat its base model on dev (:func:`tapt.training.zero_shot_gate.gate_message`),
    shown first; ``splits``: the split records (:mod:`tapt.run_folder.split_records`),
    stated under "Splits"; ``weak_pairs``: the record
    of the weak pairs mixed in (:func:`tapt.data.weak_pairs.weak_pairs_record`);
    ``pseudo_queries``: the record of the pseudo-query rows (:mod:`tapt.data.pseudo_rows`)."""
    training = recipe.training
    length = ("max steps", training.max_steps) if training.max_steps > 0 else \
        ("epochs", training.epochs)  # max_steps, when set, is what stopped training
    lines = [CARD_SECTION_MARKER, "",
             f"Trained with tapt (`{recipe.loss.name}` loss) on "
             f"`{recipe_data(recipe)}` ({recipe.data.train_split} split: query, anchor, "
             "hard negative), best checkpoint chosen on "
             f"{recipe.data.dev_split} `{recipe.eval.metric}`"
             + (f" (step {best_step})." if best_step is not None else "."), ""]
    lines += warning_lines(gate_warning) + averaged_card_lines(averaged)
    lines += ["| hyperparameter | value |", "|---|---|"]
    for key, value in [("base model", model_label(recipe.model.name)),
                       ("loss", recipe.loss.name),
                       ("scale", recipe.loss.scale), length,
                       ("learning rate", recipe.training.learning_rate),
                       ("batch size per device", recipe.training.per_device_batch_size),
                       ("gradient accumulation", recipe.training.gradient_accumulation_steps),
                       ("bf16", bf16_label(recipe.training.bf16)),
                       ("max length", recipe.model.max_seq_length),
                       ("LoRA", f"r={recipe.model.lora.r}" if recipe.model.lora.enabled
                        else "no"), ("seed", recipe.training.seed)]:
        lines.append(f"| {key} | {value} |")
    if recipe.loss.name == "matryoshka":
        lines.append(f"| matryoshka dims | {recipe.loss.matryoshka_dims} |")
    if weak_pairs:
        asked = "" if weak_pairs["asked"] is None else f" of {weak_pairs['asked']:,} asked"
        lines.append(f"| weak pairs (unlabelled passages) | {weak_pairs['made']:,} "
                     f"{weak_pairs['kind']} pairs{asked}, seed {weak_pairs['seed']} |")
    if pseudo_queries:
        read = pseudo_queries["held_out_passages_read"]
        lines.append(f"| pseudo-queries (unlabelled passages) | {pseudo_queries['rows']:,} rows "
                     f"labelled by {pseudo_queries['teacher']} ({pseudo_queries['mix']}), "
                     f"passages: {pseudo_queries['passages']}"
                     + (f", {read:,} held-out passages read" if read else "") + " |")
    shown = {f"{name} (step {best_step})" if name == "best dev" and best_step is not None
             else name: metrics for name, metrics in summary.items()}
    lines += ["", "### Results", "", *metrics_table(shown), ""]
    described = split_lines(splits or {}, recipe.eval.metric)
    lines += ["### Splits", "", *described] if described else []
    if history:
        lines += ["### Dev curve", ""]
        if curve is not None:
            lines += [f"![dev curve]({curve.name})", ""]
        lines += dev_table(history, recipe.eval.metric, missing="refused (non-finite)")
        lines.append("")
    lines += [how_to_load(recipe.hub.repo_id), CARD_SECTION_END, ""]
    return "\n".join(lines)


def averaged_card_lines(averaged: dict | None) -> list[str]:
    """The model card's sentence on a ``training.average_last`` export (the record of
    :func:`tapt.training.average.average_last`; none without averaging)."""
    if averaged is None:
        return []
    steps = ", ".join(str(step) for step in averaged["steps"])
    weight = averaged["weights"][0]
    text = (f"**Exported weights**: the element-wise mean of the last {len(averaged['steps'])} "
            f"checkpoints (steps {steps}; weight {weight:.6g} each, float64 accumulation), "
            "`training.average_last`; not the best dev checkpoint, whose metrics are shown "
            "beside the average's (`averaged dev`).")
    return [text, ""]


def write_card(folder: Path, recipe: Recipe, *, history: list[dict],
               summary: dict[str, dict[str, float]], best_step: int | None,
               averaged: dict | None = None, gate_warning: str | None = None,
               splits: dict | None = None, weak_pairs: dict | None = None,
               pseudo_queries: dict | None = None) -> None:
    """Put tapt's section first in the model card (replacing an earlier one), under the
    card's title, and set its front matter (:func:`card_with_front_matter`); write the dev
    curve and ``tapt_results.json``. ``averaged``: the record of ``training.average_last``
    (:func:`tapt.training.average.average_last`), named in the card; ``gate_warning`` and
    ``splits``: see :func:`tapt_card_section`."""
    curve = write_dev_curve(history, recipe.eval.metric, folder / "dev_curve.png")
    card = folder / "README.md"
    text = card.read_text(encoding="utf-8") if card.exists() else "---\nlicense: apache-2.0\n---\n"
    text = card_with_front_matter(without_tapt_section(text), recipe, summary)
    section = tapt_card_section(recipe, history, summary, best_step, curve, averaged,
                                gate_warning, splits, weak_pairs, pseudo_queries)
    atomic_write_text(card, with_section_first(text, section))
    atomic_write_json(folder / "tapt_results.json", summary)


def without_tapt_section(text: str) -> str:
    """A card without tapt's section, wherever it stands (up to the end of the card when its
    end marker is missing)."""
    if CARD_SECTION_MARKER not in text:
        return text
    before, _, after = text.partition(CARD_SECTION_MARKER)
    after = after.partition(CARD_SECTION_END)[2] if CARD_SECTION_END in after else ""
    return before.rstrip("\n") + "\n" + ("\n" + after.lstrip("\n") if after.strip() else "")


def with_section_first(text: str, section: str) -> str:
    """``section`` as the first section of the card ``text``: after its front matter and
    title (its first ``# `` line), before everything else."""
    from huggingface_hub import ModelCard

    card = ModelCard(text)
    body = card.text.lstrip("\n")
    title = ""
    if body.startswith("# "):
        title, _, body = body.partition("\n")
        title += "\n\n"
    card.text = "\n" + title + section + "\n" + body.lstrip("\n")
    return str(card)


def write_dapt_card(folder: Path, recipe, section: str) -> None:
    """DAPT's model card: front matter (:func:`card_with_front_matter`), a title and
    ``section`` (what was trained on what, the curves), replacing the card
    sentence-transformers wrote for the base model."""
    title = f"# DAPT {Path(recipe.output_dir).name} ({model_label(recipe.model.name)})\n\n"
    text = card_with_front_matter(f"---\nlicense: {LICENSE_ID}\n---\n", recipe, summary={})
    atomic_write_text(folder / "README.md",
                      with_section_first(text, title + section.strip("\n") + "\n"))


def dapt_card_section(recipe: DaptRecipe, history: list[dict]) -> str:
    """The card section: what was trained on what, and the held-out loss and dev
    metrics at each save."""
    intro = (f"Continued pretraining of `{model_label(recipe.model.name)}` with the "
             f"`{recipe.objective.name}` objective on `{recipe_data(recipe)}`. Start a TAPT "
             "run from this "
             "folder (`model.name: <this folder>`): it keeps the base model's pooling and "
             "prompts (`tapt_preset.json`).")
    lines = ["## Domain-adaptive pretraining with tapt", "", intro, "",
             "| step | held-out loss | " + " | ".join(METRIC_KEYS) + " |",
             "|---:|---:|" + "---:|" * len(METRIC_KEYS)]
    for entry in history:
        loss = entry.get("heldout_loss")
        cells = [f"{entry[key]:.4f}" if isinstance(entry.get(key), float) else "-"
                 for key in METRIC_KEYS]
        lines.append(f"| {entry['step']} | {f'{loss:.4f}' if loss is not None else '-'} | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
