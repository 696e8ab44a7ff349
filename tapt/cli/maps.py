"""``tapt analyze map``: 2-D maps of passage embeddings coloured by a corpus label field, one
panel per model (FormBench Figures 9-10)."""

from __future__ import annotations

import argparse
from pathlib import Path

from tapt.cli import terminal
from tapt.cli.number_types import map_sample
from tapt.cli.options import add_analysis_data, add_model_options


def add_map_parser(analyses) -> None:
    """``tapt analyze map`` under ``tapt analyze``'s sub-commands."""
    from tapt.analysis.maps import METHODS

    maps = analyses.add_parser(
        "map", help="2-D projection (UMAP if umap-learn is installed, else t-SNE) of passage "
                    "embeddings, one panel per model, coloured by a label field")
    add_model_options(maps, several=True, one_vector=True)
    maps.add_argument("--color-by", required=True, metavar="FIELD",
                      help="label field of corpus.jsonl ('labels': {FIELD: ...}, or a "
                           "top-level field; tapt data synth writes domain and class)")
    maps.add_argument("--sample", type=map_sample, default=2000,
                      help="map a seeded sample of this many labelled passages")
    maps.add_argument("--method", choices=METHODS, default="auto",
                      help="auto: umap when umap-learn is installed (tapt[maps]), else tsne")
    add_analysis_data(maps, split=False, output="map.json")


def labels_folder(args: argparse.Namespace) -> Path:
    """The local folder whose corpus.jsonl holds the labels (``--config`` subfolder too)."""
    from tapt.data.sources import config_name

    folder = Path(args.data)
    config = config_name(args.config)
    return folder / config if config and (folder / config).is_dir() else folder


def run_map(args: argparse.Namespace, loaders, load_dataset, output: Path, plot: Path,
            cache_dir: str | None, main: bool = True) -> int:
    """``tapt analyze map`` with the analysis command's parts (``tapt.cli.analysis``): the
    model ``loaders``, ``load_dataset()``, the checked ``output`` / ``plot`` paths, the
    embedding cache; ``main``: this process writes (rank 0 under torchrun)."""
    from tapt.analysis.maps import choose_method, embedding_maps, map_figure
    from tapt.data.labels import read_labels
    from tapt.util.figures import save
    from tapt.util.files import atomic_write_json

    choose_method(args.method)  # a missing umap-learn fails before anything loads
    labels = read_labels(labels_folder(args), [args.color_by])[args.color_by]
    result = embedding_maps(loaders, load_dataset(), labels, field=args.color_by,
                            sample=args.sample, seed=args.seed, method=args.method,
                            batch_size=args.batch_size, with_title=not args.no_title,
                            cache_dir=cache_dir,
                            on_model=lambda name: terminal.console.print(f"[bold]{name}[/bold]"))
    if not main:
        return 0
    atomic_write_json(output, result.to_dict())
    save(map_figure(result), plot)
    terminal.console.print(f"{result.method} map of {len(result.ids):,} passages "
                           f"({len(set(result.labels))} {args.color_by} labels) written to "
                           f"{output}, plot to {plot}", highlight=False)
    return 0
