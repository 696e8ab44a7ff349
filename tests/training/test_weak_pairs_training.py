"""TAPT with weak pairs mixed in (data.weak_pairs): batches from one dataset each."""

from __future__ import annotations

from pathlib import Path

import pytest

from tapt.recipe import RecipeError, load_recipe
from tapt.training.contrastive import train


def test_weak_pairs_train_in_batches_of_their_own(make_recipe, tiny_beir_path, monkeypatch,
                                                  tmp_path):
    """Weak pairs and labelled rows never share a batch; the pairs are streamed to Arrow
    files in a scratch folder under $TAPT_CACHE_DIR (not /tmp, not the run folder) that is
    gone when training ends."""
    from tapt.data import weak_pairs as weak_module
    from tapt.data.beir import load_beir_folder
    from tapt.training import nonfinite

    monkeypatch.setenv("TAPT_CACHE_DIR", str(tmp_path / "cache"))
    built = []
    build = weak_module.weak_pairs_dataset

    def recording_build(*args, **kwargs):
        pairs = build(*args, **kwargs)
        built.append([Path(f["filename"]) for f in pairs.cache_files])
        return pairs
    monkeypatch.setattr(weak_module, "weak_pairs_dataset", recording_build)

    titles = {p.title for p in load_beir_folder(tiny_beir_path, ["train"]).corpus.values()}
    batches: list[list[str]] = []
    call = nonfinite.QueryIdsCollator.__call__

    def recording(self, features):
        batches.append([row["query"] for row in features])
        return call(self, features)
    monkeypatch.setattr(nonfinite.QueryIdsCollator, "__call__", recording)
    recipe_file, _ = make_recipe(
        "weak", data_path=tiny_beir_path,
        data={"weak_pairs": "title", "weak_pairs_max": 12, "dev_distractors": 5},
        training={"epochs": 1, "eval_steps": 50, "per_device_batch_size": 3})
    result = train(load_recipe(recipe_file))
    assert result.final_dir is not None
    weak = [batch for batch in batches if set(batch) <= titles]
    labelled = [batch for batch in batches if not set(batch) & titles]
    assert weak and labelled
    assert len(weak) + len(labelled) == len(batches)  # no batch mixes the two
    # the 12 sampled pairs, less those NO_DUPLICATES leaves out (the tiny corpus repeats
    # titles) and a last short batch
    assert 6 <= sum(map(len, weak)) <= 12
    # what was mixed in is recorded, in results.json and on the card
    import json

    record = json.loads((result.run_dir / "results.json").read_text())["weak_pairs"]
    assert (record["kind"], record["asked"], record["seed"]) == ("title", 12, 0)
    assert sum(map(len, weak)) <= record["made"] <= 12
    card = (result.final_dir / "README.md").read_text()
    assert f"| weak pairs (unlabelled passages) | {record['made']} title pairs of 12 asked" \
        in card
    (files,) = built
    scratch = tmp_path / "cache" / "scratch"
    assert files and all(f.is_relative_to(scratch) for f in files)
    assert not any(f.exists() for f in files) and list(scratch.iterdir()) == []


@pytest.mark.parametrize(("extra", "match"), [
    ({"data": {"weak_pairs_max": 5}}, "needs data.weak_pairs"),
    ({"data": {"weak_pairs": "title", "batch_by": "title"}}, "no group"),
])
def test_weak_pairs_refuse_what_they_cannot_serve(make_recipe, tiny_beir_path, extra, match):
    recipe_file, _ = make_recipe("bad", data_path=tiny_beir_path, **extra)
    with pytest.raises(RecipeError, match=match):
        load_recipe(recipe_file)
