"""Deprecated path of the TAPT recipe: use :mod:`tapt.training.contrastive` (the recipe,
``train``), :mod:`tapt.training.run` (the steps DAPT shares) and
:func:`tapt.recipe.check_recipe` (now run when a recipe loads). The names below stay
importable from here; no warning is raised, so ``-W error`` users are not broken."""

from tapt.recipe import check_recipe
from tapt.training.contrastive import (
    EVAL_NAME,
    TrainResult,
    column_prompts,
    dataset_columns,
    load_recipe_data,
    query_ids_by_text,
    summarize,
    test_metrics,
    train,
    train_in,
    training_arguments,
)
from tapt.training.run import (
    check_exportable,
    check_hub,
    export_staging,
    finish_wandb,
    model_spec,
    push_to_hub,
    read_history,
    run_trainer,
    write_results,
)

__all__ = [
    "EVAL_NAME",
    "TrainResult",
    "check_exportable",
    "check_hub",
    "check_recipe",
    "column_prompts",
    "dataset_columns",
    "export_staging",
    "finish_wandb",
    "load_recipe_data",
    "model_spec",
    "push_to_hub",
    "query_ids_by_text",
    "read_history",
    "run_trainer",
    "summarize",
    "test_metrics",
    "train",
    "train_in",
    "training_arguments",
    "write_results",
]
