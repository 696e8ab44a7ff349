"""Training recipes: a typed schema, YAML loading and dotted ``key=value`` overrides.

A recipe is checked in full before anything heavy starts: unknown keys and wrong types
are errors that name the key (``training.learning_rate: ...``). The schema holds every
constraint that needs no model or data: ranges (seeds in numpy's [0, 2**32 - 1]), no
boolean for a number, no empty text, Matryoshka dimensions, and paths written as paths
(``/``, ``./``, ``../``, ``~``) that must exist. Limits: a bare relative name
(``data/quickstart``) may be a Hub id or an earlier step's output and is checked when read;
a Matryoshka width above the model's is known only once the model loads.

Example::

    recipe = load_recipe("recipes/quickstart.yaml", ["training.epochs=1"])
    recipe.training.per_device_batch_size
"""

from __future__ import annotations

from tapt.recipe.base import (  # the schema's parts, importable from here
    EXPLICIT_PATH_PREFIXES,
    Section,
    Seed,
    annotation_types,
    is_explicit_path,
    local_path,
)
from tapt.recipe.dapt import (  # the schema's parts, importable from here
    ChunkingSettings,
    DaptDataSettings,
    DaptRecipe,
    ObjectiveSettings,
)
from tapt.recipe.io import (  # the schema's parts, importable from here
    LABEL_FIELDS,
    MAX_RECIPE_BYTES,
    RecipeError,
    apply_overrides,
    describe_schema,
    format_validation_error,
    load_recipe,
    parse_override,
    recipe_record,
    recipe_to_yaml,
)
from tapt.recipe.loss import (  # the schema's parts, importable from here
    LossSettings,
)
from tapt.recipe.schema import (  # the schema's parts, importable from here
    DataSettings,
    EvalSettings,
    ExportSettings,
    HubSettings,
    LoraSettings,
    ModelSettings,
    Recipe,
    TrackingSettings,
    TrainingSettings,
    check_output_dir,
    check_recipe,
    import_family_module,
)

__all__ = [
    "EXPLICIT_PATH_PREFIXES",
    "LABEL_FIELDS",
    "MAX_RECIPE_BYTES",
    "ChunkingSettings",
    "DaptDataSettings",
    "DaptRecipe",
    "DataSettings",
    "EvalSettings",
    "ExportSettings",
    "HubSettings",
    "LoraSettings",
    "LossSettings",
    "ModelSettings",
    "ObjectiveSettings",
    "Recipe",
    "RecipeError",
    "Section",
    "Seed",
    "TrackingSettings",
    "TrainingSettings",
    "annotation_types",
    "apply_overrides",
    "check_output_dir",
    "check_recipe",
    "describe_schema",
    "format_validation_error",
    "import_family_module",
    "is_explicit_path",
    "load_recipe",
    "local_path",
    "parse_override",
    "recipe_record",
    "recipe_to_yaml",
]
